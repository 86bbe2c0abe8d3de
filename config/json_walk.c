/*
 * The streaming JSON walk (see json_walk.h): libyaml's events, checked
 * for what JSON allows (no aliases, string keys), one at a time.
 */
#include "json_walk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

int dv_json_walk_init(struct dv_json_walk *w, const char *text, size_t len,
		      unsigned max_depth, char *err, size_t errlen)
{
	memset(w, 0, sizeof(*w));
	w->max_depth = max_depth;
	w->err = err;
	w->errlen = errlen;
	if (!yaml_parser_initialize(&w->parser))
		return -ENOMEM;
	w->open = true;
	yaml_parser_set_input_string(&w->parser, (const unsigned char *)text,
				     len);
	return 0;
}

void dv_json_walk_release(struct dv_json_walk *w)
{
	if (w->have)
		yaml_event_delete(&w->ev);
	w->have = false;
	if (w->open)
		yaml_parser_delete(&w->parser);
	w->open = false;
}

int dv_json_walk_fail(struct dv_json_walk *w, const char *fmt, ...)
{
	va_list ap;

	if (w->err && w->errlen) {
		va_start(ap, fmt);
		vsnprintf(w->err, w->errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

size_t dv_json_walk_line(const struct dv_json_walk *w)
{
	return w->ev.start_mark.line + 1;
}

int dv_json_walk_next(struct dv_json_walk *w)
{
	if (w->have)
		yaml_event_delete(&w->ev);
	w->have = false;
	if (!yaml_parser_parse(&w->parser, &w->ev)) {
		if (w->parser.error == YAML_MEMORY_ERROR)
			return -ENOMEM;
		/* libyaml's problem is fixed text: never the input's. */
		return dv_json_walk_fail(w, "line %zu column %zu: %s",
					 w->parser.problem_mark.line + 1,
					 w->parser.problem_mark.column + 1,
					 w->parser.problem ? w->parser.problem :
							     "not JSON");
	}
	w->have = true;
	if (w->ev.type == YAML_ALIAS_EVENT)
		return dv_json_walk_fail(w, "line %zu: aliases are not JSON",
					 dv_json_walk_line(w));
	return 0;
}

/* Moves on: 1 when the container closes with @end, 0 for another value. */
static int next_in(struct dv_json_walk *w, yaml_event_type_t end)
{
	int ret = dv_json_walk_next(w);

	if (ret)
		return ret;
	return w->ev.type == end;
}

int dv_json_walk_skip(struct dv_json_walk *w, unsigned depth)
{
	yaml_event_type_t end;
	int ret;

	if (w->ev.type == YAML_SCALAR_EVENT)
		return 0;
	if (w->ev.type == YAML_SEQUENCE_START_EVENT)
		end = YAML_SEQUENCE_END_EVENT;
	else if (w->ev.type == YAML_MAPPING_START_EVENT)
		end = YAML_MAPPING_END_EVENT;
	else
		return dv_json_walk_fail(w, "line %zu: unexpected token",
					 dv_json_walk_line(w));
	if (depth >= w->max_depth)
		return dv_json_walk_fail(w, "line %zu: nested too deeply",
					 dv_json_walk_line(w));
	for (;;) {
		ret = next_in(w, end);
		if (ret)
			return ret < 0 ? ret : 0;
		ret = dv_json_walk_skip(w, depth + 1);
		if (ret)
			return ret;
	}
}

bool dv_json_walk_quoted(const struct dv_json_walk *w)
{
	return w->ev.type == YAML_SCALAR_EVENT &&
	       (w->ev.data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
		w->ev.data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE);
}

const char *dv_json_walk_string(const struct dv_json_walk *w, size_t *len)
{
	const char *v;

	if (!dv_json_walk_quoted(w))
		return NULL;
	v = (const char *)w->ev.data.scalar.value;
	if (strlen(v) != w->ev.data.scalar.length)
		return NULL;
	*len = w->ev.data.scalar.length;
	return v;
}

int dv_json_walk_uint(const struct dv_json_walk *w, uint64_t *out)
{
	if (w->ev.type != YAML_SCALAR_EVENT ||
	    w->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return -EINVAL;
	return dv_parse_uint((const char *)w->ev.data.scalar.value, UINT64_MAX,
			     out);
}

int dv_json_walk_object(struct dv_json_walk *w, unsigned depth,
			dv_json_member_fn fn, void *ctx)
{
	char key[64];
	const char *k;
	size_t klen;
	int ret;

	for (;;) {
		ret = next_in(w, YAML_MAPPING_END_EVENT);
		if (ret)
			return ret < 0 ? ret : 0;
		k = dv_json_walk_string(w, &klen);
		if (!k)
			return dv_json_walk_fail(w, "line %zu: a key is not a string",
						 dv_json_walk_line(w));
		/* Longer keys are nobody's: an empty key is skipped below. */
		if (klen >= sizeof(key))
			klen = 0;
		memcpy(key, k, klen);
		key[klen] = '\0';
		ret = dv_json_walk_next(w);
		if (ret == 0)
			ret = fn(w, key, ctx);
		if (ret == 1)
			ret = dv_json_walk_skip(w, depth + 1);
		if (ret)
			return ret;
	}
}

int dv_json_walk_array(struct dv_json_walk *w, const char *name,
		       dv_json_item_fn fn, void *ctx)
{
	int ret;

	if (w->ev.type != YAML_SEQUENCE_START_EVENT)
		return dv_json_walk_fail(w, "\"%s\" is not an array", name);
	for (;;) {
		ret = next_in(w, YAML_SEQUENCE_END_EVENT);
		if (ret)
			return ret < 0 ? ret : 0;
		ret = fn(w, ctx);
		if (ret)
			return ret;
	}
}

static int walk_document(struct dv_json_walk *w, dv_json_member_fn fn,
			 void *ctx)
{
	static const yaml_event_type_t opening[] = {
		YAML_STREAM_START_EVENT, YAML_DOCUMENT_START_EVENT,
		YAML_MAPPING_START_EVENT };
	int ret = 0;
	size_t i;

	for (i = 0; i < 3 && ret == 0; i++) {
		ret = dv_json_walk_next(w);
		if (ret == 0 && w->ev.type != opening[i])
			ret = dv_json_walk_fail(w, "the document is not a JSON object");
	}
	if (ret == 0)
		ret = dv_json_walk_object(w, 0, fn, ctx);
	if (ret == 0)
		ret = dv_json_walk_next(w);
	if (ret == 0 && w->ev.type == YAML_DOCUMENT_END_EVENT)
		ret = dv_json_walk_next(w);
	if (ret == 0 && w->ev.type != YAML_STREAM_END_EVENT)
		ret = dv_json_walk_fail(w, "line %zu: more than one document",
					dv_json_walk_line(w));
	return ret;
}

int dv_json_walk_document(const char *text, size_t len, unsigned max_depth,
			  dv_json_member_fn fn, void *ctx, char *err,
			  size_t errlen)
{
	struct dv_json_walk w;
	int ret = dv_json_walk_init(&w, text, len, max_depth, err, errlen);

	if (ret == 0)
		ret = walk_document(&w, fn, ctx);
	dv_json_walk_release(&w);
	return ret;
}
