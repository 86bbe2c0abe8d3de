/*
 * Manifests and datasets.json, parsed with libyaml's event API.
 *
 * A small cursor (struct jp) walks the event stream: jp_document() checks
 * the one-document, one-object shape and calls a member function for each
 * top-level key; members consume their value with jp_next() and the typed
 * accessors; unknown members are skipped whole. Every check fails fast with
 * one line in the caller's buffer; results are built on the side and only
 * handed out when the whole document passed.
 *
 * What this file does not do: fetch or cache documents (namespace.c), or
 * write manifests (publish.c). The file helpers at the end are shared by
 * both.
 */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config/perms.h"
#include "config/util.h"
#include "tiers/core/digest.h"
#include "tiers/core/sink.h"

/* JSON nests shallowly here; a deeper unknown value is refused. */
#define JP_MAX_DEPTH 32

struct jp {
	yaml_parser_t parser;
	yaml_event_t ev;
	bool have;
	char *err;
	size_t errlen;
};

/* Writes the one-line reason; returns -EINVAL. */
__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

#define jp_fail(jp, ...) fail((jp)->err, (jp)->errlen, __VA_ARGS__)

static size_t jp_line(const struct jp *jp)
{
	return jp->ev.start_mark.line + 1;
}

/* Copies at most 60 bytes of @s into @buf for a message, '?' for the odd. */
static const char *show(const char *s, char *buf, size_t len)
{
	size_t max = len > 64 ? 60 : len - 4, i;

	for (i = 0; s[i] && i < max; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (s[i]) {
		memcpy(buf + i, "...", 3);
		i += 3;
	}
	buf[i] = '\0';
	return buf;
}

static int jp_next(struct jp *jp)
{
	if (jp->have)
		yaml_event_delete(&jp->ev);
	jp->have = false;
	if (!yaml_parser_parse(&jp->parser, &jp->ev)) {
		if (jp->parser.error == YAML_MEMORY_ERROR)
			return -ENOMEM;
		return jp_fail(jp, "line %zu column %zu: %s",
			       jp->parser.problem_mark.line + 1,
			       jp->parser.problem_mark.column + 1,
			       jp->parser.problem ? jp->parser.problem :
						    "not JSON");
	}
	jp->have = true;
	if (jp->ev.type == YAML_ALIAS_EVENT)
		return jp_fail(jp, "line %zu: aliases are not JSON",
			       jp_line(jp));
	return 0;
}

/* The current event as a JSON string (quoted, no NUL inside), or NULL. */
static const char *jp_string(const struct jp *jp, size_t *len)
{
	const yaml_event_t *e = &jp->ev;
	const char *v;

	if (e->type != YAML_SCALAR_EVENT)
		return NULL;
	if (e->data.scalar.style != YAML_DOUBLE_QUOTED_SCALAR_STYLE &&
	    e->data.scalar.style != YAML_SINGLE_QUOTED_SCALAR_STYLE)
		return NULL;
	v = (const char *)e->data.scalar.value;
	if (strlen(v) != e->data.scalar.length)
		return NULL;
	*len = e->data.scalar.length;
	return v;
}

/* The current event as a JSON integer ≥ 0 that fits 64 bits. 0 or -EINVAL. */
static int jp_uint(const struct jp *jp, uint64_t *out)
{
	const yaml_event_t *e = &jp->ev;

	if (e->type != YAML_SCALAR_EVENT ||
	    e->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return -EINVAL;
	return dv_parse_uint((const char *)e->data.scalar.value, UINT64_MAX,
			     out);
}

/* The scalar text of the current event for messages ("" if not a scalar). */
static const char *jp_text(const struct jp *jp, char *buf, size_t len)
{
	if (jp->ev.type != YAML_SCALAR_EVENT)
		return jp->ev.type == YAML_MAPPING_START_EVENT ? "{...}" :
								   "[...]";
	return show((const char *)jp->ev.data.scalar.value, buf, len);
}

/* Consumes the rest of the value whose first event is current. */
static int jp_skip_current(struct jp *jp, unsigned depth)
{
	yaml_event_type_t end;
	int ret;

	if (jp->ev.type == YAML_SCALAR_EVENT)
		return 0;
	if (jp->ev.type == YAML_SEQUENCE_START_EVENT)
		end = YAML_SEQUENCE_END_EVENT;
	else if (jp->ev.type == YAML_MAPPING_START_EVENT)
		end = YAML_MAPPING_END_EVENT;
	else
		return jp_fail(jp, "line %zu: unexpected token", jp_line(jp));
	if (depth >= JP_MAX_DEPTH)
		return jp_fail(jp, "line %zu: nested too deeply", jp_line(jp));
	for (;;) {
		ret = jp_next(jp);
		if (ret)
			return ret;
		if (jp->ev.type == end)
			return 0;
		ret = jp_skip_current(jp, depth + 1);
		if (ret)
			return ret;
	}
}

/*
 * Called with the key of each member of an object; consumes the value with
 * jp_next() and returns 0, or returns 1 (before reading it) to skip it.
 */
typedef int (*jp_member_fn)(struct jp *jp, const char *key, void *ctx);

/* Walks the object whose MAPPING_START is current. */
static int jp_object(struct jp *jp, jp_member_fn fn, void *ctx)
{
	char key[64];
	const char *k;
	size_t klen;
	int ret;

	for (;;) {
		ret = jp_next(jp);
		if (ret)
			return ret;
		if (jp->ev.type == YAML_MAPPING_END_EVENT)
			return 0;
		k = jp_string(jp, &klen);
		if (!k)
			return jp_fail(jp, "line %zu: a key is not a string",
				       jp_line(jp));
		/* Longer keys are not ours: an empty key is skipped below. */
		if (klen >= sizeof(key))
			klen = 0;
		memcpy(key, k, klen);
		key[klen] = '\0';
		ret = fn(jp, key, ctx);
		if (ret == 1) {
			ret = jp_next(jp);
			if (ret == 0)
				ret = jp_skip_current(jp, 1);
		}
		if (ret)
			return ret;
	}
}

/* A whole JSON text: exactly one document holding one object. */
static int jp_document(const char *text, size_t len, jp_member_fn fn,
		       void *ctx, char *err, size_t errlen)
{
	static const yaml_event_type_t opening[] = {
		YAML_STREAM_START_EVENT, YAML_DOCUMENT_START_EVENT,
		YAML_MAPPING_START_EVENT };
	struct jp jp = { .err = err, .errlen = errlen };
	int ret = 0;
	size_t i;

	if (!yaml_parser_initialize(&jp.parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&jp.parser, (const unsigned char *)text,
				     len);
	for (i = 0; i < 3 && ret == 0; i++) {
		ret = jp_next(&jp);
		if (ret == 0 && jp.ev.type != opening[i])
			ret = jp_fail(&jp, "the document is not a JSON object");
	}
	if (ret == 0)
		ret = jp_object(&jp, fn, ctx);
	if (ret == 0)
		ret = jp_next(&jp);
	if (ret == 0 && jp.ev.type == YAML_DOCUMENT_END_EVENT)
		ret = jp_next(&jp);
	if (ret == 0 && jp.ev.type != YAML_STREAM_END_EVENT)
		ret = jp_fail(&jp, "line %zu: more than one document",
			      jp_line(&jp));
	if (jp.have)
		yaml_event_delete(&jp.ev);
	yaml_parser_delete(&jp.parser);
	return ret;
}

/* Reads the next value as a string into @out (dup'd) of 1..@max bytes. */
static int jp_dup_string(struct jp *jp, const char *what, size_t max,
			 char **out)
{
	char buf[80];
	const char *s;
	size_t len;
	int ret = jp_next(jp);

	if (ret)
		return ret;
	s = jp_string(jp, &len);
	if (!s)
		return jp_fail(jp, "%s is not a string ('%s')", what,
			       jp_text(jp, buf, sizeof(buf)));
	if (len == 0 || len > max)
		return jp_fail(jp, "%s '%s' is empty or longer than %zu bytes",
			       what, show(s, buf, sizeof(buf)), max);
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

/* ---- dataset names ---- */

bool dv_valid_dataset_name(const char *s)
{
	char part[DV_NAME_MAX + 1];
	size_t len, n;

	if (!s)
		return false;
	len = strlen(s);
	if (len == 0 || len > DV_DATASET_MAX)
		return false;
	while (*s) {
		n = strcspn(s, "/");
		if (n > DV_NAME_MAX)
			return false;
		memcpy(part, s, n);
		part[n] = '\0';
		if (!dv_valid_name_part(part))
			return false;
		s += n;
		if (*s == '/' && *++s == '\0')
			return false;
	}
	return true;
}

/* ---- manifests ---- */

enum {
	M_FORMAT = 1 << 0,
	M_DATASET = 1 << 1,
	M_REVISION = 1 << 2,
	M_REF = 1 << 3,
	M_KEYS = 1 << 4,
	M_SHARDS = 1 << 5,
};

enum {
	S_NAME = 1 << 0,
	S_INDEX = 1 << 1,
	S_HASH = 1 << 2,
	S_SIZE = 1 << 3,
	S_SHA256 = 1 << 4,
	S_CHUNKS = 1 << 5,   /* optional */
	S_ALL = (1 << 5) - 1,
};

struct mparse {
	struct dv_manifest *m;
	unsigned seen;
	size_t shards_cap;
	size_t keys_cap;
	size_t names_len;
	size_t names_cap;
};

/* One shard object being read. */
struct sparse {
	struct mparse *mp;
	size_t i;                 /* position in "shards", for messages */
	unsigned seen;
	struct dv_manifest_shard s;
	char name[DV_NAME_MAX + 1];
	uint8_t pin[32];          /* of the chunk list, when s.has_chunks */
};

/*
 * Makes room for @need elements of @arr (capacity *@cap, doubling from
 * @first). Returns the array, possibly moved, or NULL (and @arr is intact).
 */
static void *grow(void *arr, size_t *cap, size_t need, size_t elem,
		  size_t first)
{
	size_t ncap = *cap ? *cap : first;
	void *p;

	if (need <= *cap)
		return arr;
	while (ncap < need)
		ncap *= 2;
	p = reallocarray(arr, ncap, elem);
	if (p)
		*cap = ncap;
	return p;
}

static int shard_name(struct jp *jp, struct sparse *sp)
{
	char buf[80];
	const char *s;
	size_t len;
	int ret = jp_next(jp);

	if (ret)
		return ret;
	s = jp_string(jp, &len);
	if (!s)
		return jp_fail(jp, "shard %zu: name is not a string", sp->i);
	if (len > DV_NAME_MAX || !dv_valid_name_part(s))
		return jp_fail(jp, "shard %zu: name '%s' is not a valid name",
			       sp->i, show(s, buf, sizeof(buf)));
	if (len <= 4 || strcmp(s + len - 4, ".tar") != 0)
		return jp_fail(jp, "shard %zu: name '%s' does not end in .tar",
			       sp->i, show(s, buf, sizeof(buf)));
	memcpy(sp->name, s, len + 1);
	sp->s.name_len = (uint8_t)len;
	return 0;
}

static int shard_uint(struct jp *jp, struct sparse *sp, const char *what,
		      uint64_t *out)
{
	char buf[80];
	int ret = jp_next(jp);

	if (ret)
		return ret;
	if (jp_uint(jp, out) < 0)
		return jp_fail(jp,
			       "shard %zu: %s '%s' is not a non-negative integer",
			       sp->i, what, jp_text(jp, buf, sizeof(buf)));
	return 0;
}

/* A lowercase hex string of @min..@max digits, else a message. */
static int shard_hex(struct jp *jp, struct sparse *sp, const char *what,
		     size_t min, size_t max, const char **out)
{
	char buf[80];
	const char *s;
	size_t len;
	int ret = jp_next(jp);

	if (ret)
		return ret;
	s = jp_string(jp, &len);
	if (!s || len < min || len > max || !dv_valid_hash(s))
		return jp_fail(jp, "shard %zu: %s '%s' is not %zu%s lowercase hex digits",
			       sp->i, what, jp_text(jp, buf, sizeof(buf)), min,
			       min == max ? "" : " to 64");
	*out = s;
	return 0;
}

static int shard_member(struct jp *jp, const char *key, void *ctx)
{
	static const char *const keys[] = { "name", "index", "content_hash",
					    "size", "sha256", "chunks" };
	struct sparse *sp = ctx;
	const char *hex;
	unsigned bit;
	size_t k;
	int ret;

	for (k = 0; k < 6 && strcmp(key, keys[k]); k++)
		;
	if (k == 6)
		return 1;
	bit = 1u << k;
	if (sp->seen & bit)
		return jp_fail(jp, "shard %zu: duplicate key '%s'", sp->i, key);
	sp->seen |= bit;
	switch (bit) {
	case S_NAME:
		return shard_name(jp, sp);
	case S_INDEX:
		return shard_uint(jp, sp, "index", &sp->s.index);
	case S_SIZE:
		return shard_uint(jp, sp, "size", &sp->s.size);
	case S_HASH:
		ret = shard_hex(jp, sp, "content_hash", 32, 64, &hex);
		if (ret == 0)
			memcpy(sp->s.hash, hex, strlen(hex) + 1);
		return ret;
	case S_CHUNKS:
		ret = shard_hex(jp, sp, "chunks", 64, 64, &hex);
		if (ret == 0)
			ret = dv_hex_decode(hex, sp->pin, 32);
		sp->s.has_chunks = ret == 0;
		return ret;
	default:
		ret = shard_hex(jp, sp, "sha256", 64, 64, &hex);
		if (ret == 0)
			ret = dv_hex_decode(hex, sp->s.sha256, 32);
		return ret;
	}
}

/* Appends the shard just read to the manifest. */
static int shard_add(struct jp *jp, struct sparse *sp)
{
	static const char *const keys[] = { "name", "index", "content_hash",
					    "size", "sha256" };
	struct mparse *mp = sp->mp;
	struct dv_manifest *m = mp->m;
	size_t nlen = sp->s.name_len + 1;
	size_t len = nlen + (sp->s.has_chunks ? 32 : 0);
	void *p;
	unsigned k;

	for (k = 0; k < 5; k++) {
		if (!(sp->seen & (1u << k)))
			return jp_fail(jp, "shard %zu: no \"%s\"", sp->i,
				       keys[k]);
	}
	/*
	 * A size no file can have (off_t is signed) would only fail later,
	 * as EIO at open or a wrapped st_size: refuse the manifest now.
	 */
	if (sp->s.size > (uint64_t)INT64_MAX)
		return jp_fail(jp, "shard %zu (%s): size %" PRIu64
			       " is larger than a file can be (at most %" PRId64 ")",
			       sp->i, sp->name, sp->s.size, INT64_MAX);
	if (mp->names_len + len > UINT32_MAX)
		return jp_fail(jp, "shard %zu: too many names", sp->i);
	p = grow(m->names, &mp->names_cap, mp->names_len + len, 1, 4096);
	if (!p)
		return -ENOMEM;
	m->names = p;
	p = grow(m->shards, &mp->shards_cap, m->nshards + 1,
		 sizeof(*m->shards), 64);
	if (!p)
		return -ENOMEM;
	m->shards = p;
	sp->s.name_off = (uint32_t)mp->names_len;
	memcpy(m->names + mp->names_len, sp->name, nlen);
	if (sp->s.has_chunks)
		memcpy(m->names + mp->names_len + nlen, sp->pin, 32);
	mp->names_len += len;
	m->shards[m->nshards++] = sp->s;
	return 0;
}

static int manifest_shards(struct jp *jp, struct mparse *mp)
{
	struct sparse sp;
	int ret = jp_next(jp);

	if (ret)
		return ret;
	if (jp->ev.type != YAML_SEQUENCE_START_EVENT)
		return jp_fail(jp, "\"shards\" is not an array");
	for (;;) {
		ret = jp_next(jp);
		if (ret)
			return ret;
		if (jp->ev.type == YAML_SEQUENCE_END_EVENT)
			return 0;
		memset(&sp, 0, sizeof(sp));
		sp.mp = mp;
		sp.i = mp->m->nshards;
		if (sp.i >= DV_MANIFEST_MAX_SHARDS)
			return jp_fail(jp, "more than %u shards",
				       DV_MANIFEST_MAX_SHARDS);
		if (jp->ev.type != YAML_MAPPING_START_EVENT)
			return jp_fail(jp, "shard %zu: not an object", sp.i);
		ret = jp_object(jp, shard_member, &sp);
		if (ret == 0)
			ret = shard_add(jp, &sp);
		if (ret)
			return ret;
	}
}

static int manifest_keys(struct jp *jp, struct mparse *mp)
{
	struct dv_manifest *m = mp->m;
	const char *s;
	size_t len;
	char **p;
	int ret = jp_next(jp);

	if (ret)
		return ret;
	if (jp->ev.type != YAML_SEQUENCE_START_EVENT)
		return jp_fail(jp, "\"keys\" is not an array");
	for (;;) {
		if (m->nkeys >= DV_MANIFEST_MAX_KEYS)
			return jp_fail(jp, "more than %u keys",
				       DV_MANIFEST_MAX_KEYS);
		p = grow(m->keys, &mp->keys_cap, m->nkeys + 2, sizeof(char *), 8);
		if (!p)
			return -ENOMEM;
		m->keys = p;
		ret = jp_next(jp);
		if (ret)
			return ret;
		if (jp->ev.type == YAML_SEQUENCE_END_EVENT)
			return 0;
		s = jp_string(jp, &len);
		if (!s || len == 0 || len > DV_NAME_MAX)
			return jp_fail(jp, "key %zu is not a string of 1 to %u bytes",
				       m->nkeys, DV_NAME_MAX);
		m->keys[m->nkeys] = strdup(s);
		if (!m->keys[m->nkeys])
			return -ENOMEM;
		m->keys[++m->nkeys] = NULL;
	}
}

static int manifest_member(struct jp *jp, const char *key, void *ctx)
{
	static const char *const keys[] = { "format", "dataset", "revision",
					    "manifest_ref", "keys", "shards" };
	struct mparse *mp = ctx;
	struct dv_manifest *m = mp->m;
	char *format = NULL;
	unsigned bit;
	size_t k;
	int ret;

	for (k = 0; k < 6 && strcmp(key, keys[k]); k++)
		;
	if (k == 6)
		return 1;
	bit = 1u << k;
	if (mp->seen & bit)
		return jp_fail(jp, "duplicate key '%s'", key);
	mp->seen |= bit;
	switch (bit) {
	case M_FORMAT:
		ret = jp_dup_string(jp, "format", DV_NAME_MAX, &format);
		if (ret == 0 && strcmp(format, DV_MANIFEST_FORMAT) != 0) {
			char buf[80];

			ret = jp_fail(jp, "format '%s' is not %s",
				      show(format, buf, sizeof(buf)),
				      DV_MANIFEST_FORMAT);
		}
		free(format);
		return ret;
	case M_DATASET:
		return jp_dup_string(jp, "dataset", DV_DATASET_MAX, &m->dataset);
	case M_REVISION:
		ret = jp_next(jp);
		if (ret == 0 && jp_uint(jp, &m->revision) < 0)
			ret = jp_fail(jp, "revision is not a non-negative integer");
		return ret;
	case M_REF:
		return jp_dup_string(jp, "manifest_ref", DV_NAME_MAX,
				     &m->manifest_ref);
	case M_KEYS:
		return manifest_keys(jp, mp);
	default:
		return manifest_shards(jp, mp);
	}
}

static int cmp_shard_name(const void *a, const void *b, void *names)
{
	const struct dv_manifest_shard *x = a, *y = b;

	return strcmp((const char *)names + x->name_off,
		      (const char *)names + y->name_off);
}

/* Checks what only the whole document can tell, then sorts by name. */
static int manifest_finish(struct mparse *mp, const char *dataset, char *err,
			   size_t errlen)
{
	static const char *const required[] = { "format", "dataset",
						"revision" };
	struct dv_manifest *m = mp->m;
	char buf[80];
	void *p;
	size_t i;

	for (i = 0; i < 3; i++) {
		if (!(mp->seen & (1u << i)))
			return fail(err, errlen, "no \"%s\"", required[i]);
	}
	if (!(mp->seen & M_SHARDS))
		return fail(err, errlen, "no \"shards\"");
	if (!dv_valid_dataset_name(m->dataset))
		return fail(err, errlen, "dataset '%s' is not a valid name",
			    show(m->dataset, buf, sizeof(buf)));
	if (dataset && strcmp(m->dataset, dataset) != 0)
		return fail(err, errlen, "dataset '%s' is not the expected '%s'",
			    show(m->dataset, buf, sizeof(buf)), dataset);
	if (m->nshards)
		qsort_r(m->shards, m->nshards, sizeof(*m->shards),
			cmp_shard_name, m->names);
	for (i = 1; i < m->nshards; i++) {
		if (cmp_shard_name(&m->shards[i - 1], &m->shards[i],
				   m->names) == 0)
			return fail(err, errlen, "duplicate shard name '%s'",
				    dv_manifest_name(m, &m->shards[i]));
	}
	/* Give back the slack of the doubling arrays. */
	if (m->nshards) {
		p = realloc(m->shards, m->nshards * sizeof(*m->shards));
		m->shards = p ? p : m->shards;
		p = realloc(m->names, mp->names_len);
		m->names = p ? p : m->names;
	}
	return 0;
}

int dv_manifest_parse(const char *text, size_t len, const char *dataset,
		      struct dv_manifest **out, char *err, size_t errlen)
{
	struct mparse mp = { 0 };
	int ret;

	mp.m = calloc(1, sizeof(*mp.m));
	if (!mp.m)
		return -ENOMEM;
	ret = jp_document(text, len, manifest_member, &mp, err, errlen);
	if (ret == 0)
		ret = manifest_finish(&mp, dataset, err, errlen);
	if (ret == 0 && !mp.m->manifest_ref) {
		mp.m->manifest_ref = strdup("");
		ret = mp.m->manifest_ref ? 0 : -ENOMEM;
	}
	if (ret) {
		dv_manifest_free(mp.m);
		return ret;
	}
	*out = mp.m;
	return 0;
}

void dv_manifest_free(struct dv_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nkeys; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->dataset);
	free(m->manifest_ref);
	free(m->shards);
	free(m->names);
	free(m);
}

ssize_t dv_manifest_find_pos(const struct dv_manifest *m, const char *name)
{
	size_t lo = 0, hi = m->nshards;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, dv_manifest_name(m, &m->shards[mid]));

		if (c == 0)
			return (ssize_t)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

const struct dv_manifest_shard *dv_manifest_find(const struct dv_manifest *m,
						 const char *name)
{
	ssize_t pos = dv_manifest_find_pos(m, name);

	return pos < 0 ? NULL : &m->shards[pos];
}

/* ---- datasets.json ---- */

struct dsparse {
	char **names;
	size_t n;
	size_t cap;
	bool seen;
};

static int datasets_list(struct jp *jp, struct dsparse *dp)
{
	char buf[80];
	const char *s;
	size_t len;
	char **p;
	int ret = jp_next(jp);

	if (ret)
		return ret;
	if (jp->ev.type != YAML_SEQUENCE_START_EVENT)
		return jp_fail(jp, "\"datasets\" is not an array");
	for (;;) {
		ret = jp_next(jp);
		if (ret)
			return ret;
		if (jp->ev.type == YAML_SEQUENCE_END_EVENT)
			return 0;
		s = jp_string(jp, &len);
		if (!s || !dv_valid_dataset_name(s))
			return jp_fail(jp, "dataset %zu: '%s' is not a valid dataset name",
				       dp->n, jp_text(jp, buf, sizeof(buf)));
		if (dp->n >= DV_MAX_DATASETS)
			return jp_fail(jp, "more than %u datasets",
				       DV_MAX_DATASETS);
		p = grow(dp->names, &dp->cap, dp->n + 2, sizeof(char *), 16);
		if (!p)
			return -ENOMEM;
		dp->names = p;
		dp->names[dp->n] = strdup(s);
		if (!dp->names[dp->n])
			return -ENOMEM;
		dp->names[++dp->n] = NULL;
	}
}

static int datasets_member(struct jp *jp, const char *key, void *ctx)
{
	struct dsparse *dp = ctx;

	if (strcmp(key, "datasets") != 0)
		return 1;
	if (dp->seen)
		return jp_fail(jp, "duplicate key 'datasets'");
	dp->seen = true;
	return datasets_list(jp, dp);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dv_datasets_parse(const char *text, size_t len, char ***out, size_t *n,
		      char *err, size_t errlen)
{
	struct dsparse dp = { 0 };
	size_t i, kept = 0;
	int ret;

	ret = jp_document(text, len, datasets_member, &dp, err, errlen);
	if (ret == 0 && !dp.seen)
		ret = fail(err, errlen, "no \"datasets\"");
	if (ret == 0 && !dp.names) {
		dp.names = calloc(1, sizeof(char *));
		ret = dp.names ? 0 : -ENOMEM;
	}
	if (ret) {
		dv_datasets_free(dp.names);
		return ret;
	}
	qsort(dp.names, dp.n, sizeof(char *), cmp_str);
	for (i = 0; i < dp.n; i++) {
		if (kept && strcmp(dp.names[kept - 1], dp.names[i]) == 0)
			free(dp.names[i]);
		else
			dp.names[kept++] = dp.names[i];
	}
	dp.names[kept] = NULL;
	*out = dp.names;
	*n = kept;
	return 0;
}

void dv_datasets_free(char **names)
{
	if (!names)
		return;
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
}
