/*
 * Picking members out of small JSON objects with libyaml's event parser
 * (see json.h). A depth-first walk over the event stream: members whose
 * path is asked for are copied, objects that hold an asked-for path are
 * entered, everything else is skipped whole.
 */
#include "json.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define PATH_MAX_LEN 128

struct walk {
	yaml_parser_t parser;
	yaml_event_t ev;
	bool have;
	struct dv_json_field *fields;
	size_t n;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3)))
static int fail(struct walk *w, const char *fmt, ...)
{
	va_list ap;

	if (w->err && w->errlen) {
		va_start(ap, fmt);
		vsnprintf(w->err, w->errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static size_t line_of(const struct walk *w)
{
	return w->ev.start_mark.line + 1;
}

static int next(struct walk *w)
{
	if (w->have)
		yaml_event_delete(&w->ev);
	w->have = false;
	if (!yaml_parser_parse(&w->parser, &w->ev)) {
		if (w->parser.error == YAML_MEMORY_ERROR)
			return -ENOMEM;
		/* libyaml's problem is fixed text: never the input's. */
		return fail(w, "not JSON: line %zu column %zu: %s",
			    w->parser.problem_mark.line + 1,
			    w->parser.problem_mark.column + 1,
			    w->parser.problem ? w->parser.problem : "?");
	}
	w->have = true;
	if (w->ev.type == YAML_ALIAS_EVENT)
		return fail(w, "not JSON: line %zu: an alias", line_of(w));
	return 0;
}

static bool is_quoted(const yaml_event_t *e)
{
	return e->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE ||
	       e->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE;
}

/* Consumes the rest of the value whose first event is current. */
static int skip_value(struct walk *w, unsigned depth)
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
		return fail(w, "not JSON: line %zu: unexpected token",
			    line_of(w));
	if (depth >= DV_JSON_MAX_DEPTH)
		return fail(w, "line %zu: nested too deeply", line_of(w));
	for (;;) {
		ret = next(w);
		if (ret)
			return ret;
		if (w->ev.type == end)
			return 0;
		ret = skip_value(w, depth + 1);
		if (ret)
			return ret;
	}
}

static struct dv_json_field *wanted(struct walk *w, const char *path)
{
	for (size_t i = 0; i < w->n; i++) {
		if (strcmp(w->fields[i].key, path) == 0)
			return &w->fields[i];
	}
	return NULL;
}

/* Does some field live inside the object at @path? */
static bool wanted_inside(struct walk *w, const char *path)
{
	size_t len = strlen(path);

	for (size_t i = 0; i < w->n; i++) {
		if (strncmp(w->fields[i].key, path, len) == 0 &&
		    w->fields[i].key[len] == '.')
			return true;
	}
	return false;
}

/* JSON numbers only: true, false, null and YAML's bare words are not. */
static bool is_number(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (!strchr("0123456789-+.eE", *s))
			return false;
	}
	return true;
}

static int store(struct walk *w, struct dv_json_field *f)
{
	const yaml_event_t *e = &w->ev;
	const char *v = (const char *)e->data.scalar.value;
	char *copy;

	if (strlen(v) != e->data.scalar.length)
		return fail(w, "line %zu: a string holds a NUL byte", line_of(w));
	if (!is_quoted(e) && !is_number(v))
		return 0;
	copy = strdup(v);
	if (!copy)
		return -ENOMEM;
	if (f->value) {
		OPENSSL_cleanse(f->value, strlen(f->value));
		free(f->value);
	}
	f->value = copy;
	return 0;
}

static int walk_object(struct walk *w, const char *prefix, unsigned depth);

static int member(struct walk *w, const char *path, unsigned depth)
{
	struct dv_json_field *f;

	if (w->ev.type == YAML_SCALAR_EVENT) {
		f = wanted(w, path);
		return f ? store(w, f) : 0;
	}
	if (w->ev.type == YAML_MAPPING_START_EVENT && wanted_inside(w, path) &&
	    depth + 1 < DV_JSON_MAX_DEPTH)
		return walk_object(w, path, depth + 1);
	return skip_value(w, depth + 1);
}

/* Walks the object whose MAPPING_START is current. */
static int walk_object(struct walk *w, const char *prefix, unsigned depth)
{
	char path[PATH_MAX_LEN];
	const char *key;
	int ret, n;

	for (;;) {
		ret = next(w);
		if (ret)
			return ret;
		if (w->ev.type == YAML_MAPPING_END_EVENT)
			return 0;
		if (w->ev.type != YAML_SCALAR_EVENT || !is_quoted(&w->ev))
			return fail(w, "not JSON: line %zu: a key is not a string",
				    line_of(w));
		key = (const char *)w->ev.data.scalar.value;
		n = snprintf(path, sizeof(path), "%s%s%s", prefix ? prefix : "",
			     prefix ? "." : "", key);
		/* A key too long for any field: its value is skipped. */
		if (n < 0 || (size_t)n >= sizeof(path))
			path[0] = '\0';
		ret = next(w);
		if (ret == 0)
			ret = member(w, path, depth);
		if (ret)
			return ret;
	}
}

static int expect(struct walk *w, yaml_event_type_t type, const char *what)
{
	int ret = next(w);

	if (ret)
		return ret;
	if (w->ev.type != type)
		return fail(w, "not a JSON object: line %zu: expected %s",
			    line_of(w), what);
	return 0;
}

static int walk_document(struct walk *w)
{
	int ret;

	ret = expect(w, YAML_STREAM_START_EVENT, "a document");
	if (ret == 0)
		ret = expect(w, YAML_DOCUMENT_START_EVENT, "a document");
	if (ret == 0)
		ret = expect(w, YAML_MAPPING_START_EVENT, "an object");
	if (ret == 0)
		ret = walk_object(w, NULL, 0);
	if (ret == 0)
		ret = expect(w, YAML_DOCUMENT_END_EVENT, "the end");
	if (ret == 0)
		ret = expect(w, YAML_STREAM_END_EVENT, "the end");
	return ret;
}

int dv_json_get(const char *text, size_t len,
		    struct dv_json_field *fields, size_t n, char *err,
		    size_t errlen)
{
	struct walk w = {
		.fields = fields, .n = n, .err = err, .errlen = errlen,
	};
	int ret;

	if (err && errlen)
		err[0] = '\0';
	for (size_t i = 0; i < n; i++)
		fields[i].value = NULL;
	if (!yaml_parser_initialize(&w.parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&w.parser, (const unsigned char *)text,
				     len);
	ret = walk_document(&w);
	if (w.have)
		yaml_event_delete(&w.ev);
	yaml_parser_delete(&w.parser);
	return ret;
}

void dv_json_release(struct dv_json_field *fields, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fields[i].value) {
			OPENSSL_cleanse(fields[i].value,
					strlen(fields[i].value));
			free(fields[i].value);
		}
		fields[i].value = NULL;
	}
}

static void printable(char *s)
{
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
	}
}

char *dv_json_reason(const char *text, size_t len, char *buf,
			 size_t buflen)
{
	struct dv_json_field f[] = {
		{ .key = "error.message" },
		{ .key = "error" },
		{ .key = "error_description" },
	};

	if (!buflen)
		return buf;
	buf[0] = '\0';
	if (!text || !len)
		return buf;
	/* A body cut short still gives what came before the cut. */
	dv_json_get(text, len, f, 3, NULL, 0);
	if (f[0].value)
		snprintf(buf, buflen, "%s", f[0].value);
	else if (f[1].value)
		snprintf(buf, buflen, "%s%s%s", f[1].value,
			 f[2].value ? ": " : "", f[2].value ? f[2].value : "");
	printable(buf);
	dv_json_release(f, 3);
	return buf;
}
