/*
 * Manifests and datasets.json, parsed with libyaml's event API.
 *
 * The streaming walk of config/json_walk.h goes over the event stream:
 * dv_json_walk_document() checks the one-document, one-object shape and
 * calls a member function for each top-level key with the first event of
 * its value current; members read it with the typed accessors, arrays go
 * item by item through dv_json_walk_array(); unknown members are skipped
 * whole. Every check fails fast with one line in the caller's buffer; results are built on the side and only
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

#include "config/json_walk.h"
#include "config/perms.h"
#include "config/util.h"
#include "tiers/core/digest.h"
#include "tiers/core/sink.h"

/* JSON nests shallowly here; a deeper unknown value is refused. */
#define JP_MAX_DEPTH 32

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

/* The scalar text of the current event for messages ("" if not a scalar). */
static const char *value_text(const struct dv_json_walk *w, char *buf,
			      size_t len)
{
	if (w->ev.type != YAML_SCALAR_EVENT)
		return w->ev.type == YAML_MAPPING_START_EVENT ? "{...}" :
								 "[...]";
	return show((const char *)w->ev.data.scalar.value, buf, len);
}

/* The value as a string into @out (dup'd) of 1..@max bytes. */
static int dup_string(struct dv_json_walk *w, const char *what, size_t max,
		      char **out)
{
	char buf[80];
	const char *s;
	size_t len;
	s = dv_json_walk_string(w, &len);
	if (!s)
		return dv_json_walk_fail(w, "%s is not a string ('%s')", what,
					 value_text(w, buf, sizeof(buf)));
	if (len == 0 || len > max)
		return dv_json_walk_fail(w, "%s '%s' is empty or longer than %zu bytes",
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

/* The members of a manifest, by their bits in mparse.seen. */
enum { M_FORMAT, M_DATASET, M_REVISION, M_REF, M_KEYS, M_SHARDS, M_COUNT };

static const char *const manifest_keys[M_COUNT] = {
	"format", "dataset", "revision", "manifest_ref", "keys", "shards",
};

/* The members of a shard, by their bits in sparse.seen; chunks is optional. */
enum { S_NAME, S_INDEX, S_HASH, S_SIZE, S_SHA256, S_CHUNKS, S_COUNT };

static const char *const shard_keys[S_COUNT] = {
	"name", "index", "content_hash", "size", "sha256", "chunks",
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

/*
 * Which of the @n @keys @key is, into *@which, marked in the bits of
 * *@seen: 0; 1 for none (the walk skips the member); -EINVAL for one
 * given twice ("@whose duplicate key ...").
 */
static int known_key(struct dv_json_walk *w, const char *key,
		     const char *const *keys, int n, unsigned *seen,
		     const char *whose, int *which)
{
	int k;

	for (k = 0; k < n && strcmp(key, keys[k]); k++)
		;
	if (k == n)
		return 1;
	if (*seen & (1u << k))
		return dv_json_walk_fail(w, "%sduplicate key '%s'", whose, key);
	*seen |= 1u << k;
	*which = k;
	return 0;
}

static int shard_name(struct dv_json_walk *w, struct sparse *sp)
{
	char buf[80];
	const char *s;
	size_t len;
	s = dv_json_walk_string(w, &len);
	if (!s)
		return dv_json_walk_fail(w, "shard %zu: name is not a string", sp->i);
	if (len > DV_NAME_MAX || !dv_valid_name_part(s))
		return dv_json_walk_fail(w, "shard %zu: name '%s' is not a valid name",
					 sp->i, show(s, buf, sizeof(buf)));
	if (len <= 4 || strcmp(s + len - 4, ".tar") != 0)
		return dv_json_walk_fail(w, "shard %zu: name '%s' does not end in .tar",
					 sp->i, show(s, buf, sizeof(buf)));
	memcpy(sp->name, s, len + 1);
	sp->s.name_len = (uint8_t)len;
	return 0;
}

static int shard_uint(struct dv_json_walk *w, struct sparse *sp, const char *what,
		      uint64_t *out)
{
	char buf[80];

	if (dv_json_walk_uint(w, out) < 0)
		return dv_json_walk_fail(w,
					 "shard %zu: %s '%s' is not a non-negative integer",
					 sp->i, what, value_text(w, buf, sizeof(buf)));
	return 0;
}

/* A lowercase hex string of @min..@max digits, else a message. */
static int shard_hex(struct dv_json_walk *w, struct sparse *sp, const char *what,
		     size_t min, size_t max, const char **out)
{
	char buf[80];
	const char *s;
	size_t len;
	s = dv_json_walk_string(w, &len);
	if (!s || len < min || len > max || !dv_valid_hash(s))
		return dv_json_walk_fail(w, "shard %zu: %s '%s' is not %zu%s lowercase hex digits",
					 sp->i, what, value_text(w, buf, sizeof(buf)), min,
					 min == max ? "" : " to 64");
	*out = s;
	return 0;
}

static int shard_member(struct dv_json_walk *w, const char *key, void *ctx)
{
	struct sparse *sp = ctx;
	char whose[40];
	const char *hex;
	int ret, k = 0;

	snprintf(whose, sizeof(whose), "shard %zu: ", sp->i);
	ret = known_key(w, key, shard_keys, S_COUNT, &sp->seen, whose, &k);
	if (ret)
		return ret;
	switch (k) {
	case S_NAME:
		return shard_name(w, sp);
	case S_INDEX:
		return shard_uint(w, sp, "index", &sp->s.index);
	case S_SIZE:
		return shard_uint(w, sp, "size", &sp->s.size);
	case S_HASH:
		ret = shard_hex(w, sp, "content_hash", 32, 64, &hex);
		if (ret == 0)
			memcpy(sp->s.hash, hex, strlen(hex) + 1);
		return ret;
	case S_CHUNKS:
		ret = shard_hex(w, sp, "chunks", 64, 64, &hex);
		if (ret == 0)
			ret = dv_hex_decode(hex, sp->pin, 32);
		sp->s.has_chunks = ret == 0;
		return ret;
	default:
		ret = shard_hex(w, sp, "sha256", 64, 64, &hex);
		if (ret == 0)
			ret = dv_hex_decode(hex, sp->s.sha256, 32);
		return ret;
	}
}

/* Appends the shard just read to the manifest. */
static int shard_add(struct dv_json_walk *w, struct sparse *sp)
{
	struct mparse *mp = sp->mp;
	struct dv_manifest *m = mp->m;
	size_t nlen = sp->s.name_len + 1;
	size_t len = nlen + (sp->s.has_chunks ? 32 : 0);
	void *p;
	unsigned k;

	for (k = 0; k < S_CHUNKS; k++) {
		if (!(sp->seen & (1u << k)))
			return dv_json_walk_fail(w, "shard %zu: no \"%s\"", sp->i,
						 shard_keys[k]);
	}
	/*
	 * A size no file can have (off_t is signed) would only fail later,
	 * as EIO at open or a wrapped st_size: refuse the manifest now.
	 */
	if (sp->s.size > (uint64_t)INT64_MAX)
		return dv_json_walk_fail(w, "shard %zu (%s): size %" PRIu64
					 " is larger than a file can be (at most %" PRId64 ")",
					 sp->i, sp->name, sp->s.size, INT64_MAX);
	if (mp->names_len + len > UINT32_MAX)
		return dv_json_walk_fail(w, "shard %zu: too many names", sp->i);
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

static int shard_item(struct dv_json_walk *w, void *ctx)
{
	struct mparse *mp = ctx;
	struct sparse sp;
	int ret;

	memset(&sp, 0, sizeof(sp));
	sp.mp = mp;
	sp.i = mp->m->nshards;
	if (sp.i >= DV_MANIFEST_MAX_SHARDS)
		return dv_json_walk_fail(w, "more than %u shards",
					 DV_MANIFEST_MAX_SHARDS);
	if (w->ev.type != YAML_MAPPING_START_EVENT)
		return dv_json_walk_fail(w, "shard %zu: not an object", sp.i);
	ret = dv_json_walk_object(w, 0, shard_member, &sp);
	if (ret == 0)
		ret = shard_add(w, &sp);
	return ret;
}

/*
 * The bound is checked once a key is in, so a list of exactly
 * DV_MANIFEST_MAX_KEYS keys is refused too (as it always was).
 */
static int key_item(struct dv_json_walk *w, void *ctx)
{
	struct mparse *mp = ctx;
	struct dv_manifest *m = mp->m;
	const char *s;
	size_t len;
	char **p;

	p = grow(m->keys, &mp->keys_cap, m->nkeys + 2, sizeof(char *), 8);
	if (!p)
		return -ENOMEM;
	m->keys = p;
	s = dv_json_walk_string(w, &len);
	if (!s || len == 0 || len > DV_NAME_MAX)
		return dv_json_walk_fail(w, "key %zu is not a string of 1 to %u bytes",
					 m->nkeys, DV_NAME_MAX);
	m->keys[m->nkeys] = strdup(s);
	if (!m->keys[m->nkeys])
		return -ENOMEM;
	m->keys[++m->nkeys] = NULL;
	if (m->nkeys >= DV_MANIFEST_MAX_KEYS)
		return dv_json_walk_fail(w, "more than %u keys",
					 DV_MANIFEST_MAX_KEYS);
	return 0;
}

static int manifest_member(struct dv_json_walk *w, const char *key, void *ctx)
{
	struct mparse *mp = ctx;
	struct dv_manifest *m = mp->m;
	char *format = NULL;
	int k = 0;
	int ret = known_key(w, key, manifest_keys, M_COUNT, &mp->seen, "", &k);

	if (ret)
		return ret;
	switch (k) {
	case M_FORMAT:
		ret = dup_string(w, "format", DV_NAME_MAX, &format);
		if (ret == 0 && strcmp(format, DV_MANIFEST_FORMAT) != 0) {
			char buf[80];

			ret = dv_json_walk_fail(w, "format '%s' is not %s",
						show(format, buf, sizeof(buf)),
						DV_MANIFEST_FORMAT);
		}
		free(format);
		return ret;
	case M_DATASET:
		return dup_string(w, "dataset", DV_DATASET_MAX, &m->dataset);
	case M_REVISION:
		if (dv_json_walk_uint(w, &m->revision) < 0)
			return dv_json_walk_fail(w, "revision is not a non-negative integer");
		return 0;
	case M_REF:
		return dup_string(w, "manifest_ref", DV_NAME_MAX,
				  &m->manifest_ref);
	case M_KEYS:
		return dv_json_walk_array(w, "keys", key_item, mp);
	default:
		return dv_json_walk_array(w, "shards", shard_item, mp);
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
	struct dv_manifest *m = mp->m;
	char buf[80];
	void *p;
	size_t i;

	/* format, dataset and revision are required; keys and a ref not. */
	for (i = M_FORMAT; i <= M_REVISION; i++) {
		if (!(mp->seen & (1u << i)))
			return fail(err, errlen, "no \"%s\"", manifest_keys[i]);
	}
	if (!(mp->seen & (1u << M_SHARDS)))
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
	ret = dv_json_walk_document(text, len, JP_MAX_DEPTH, manifest_member, &mp, err, errlen);
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

static int dataset_item(struct dv_json_walk *w, void *ctx)
{
	struct dsparse *dp = ctx;
	char buf[80];
	const char *s;
	size_t len;
	char **p;

	s = dv_json_walk_string(w, &len);
	if (!s || !dv_valid_dataset_name(s))
		return dv_json_walk_fail(w, "dataset %zu: '%s' is not a valid dataset name",
					 dp->n, value_text(w, buf, sizeof(buf)));
	if (dp->n >= DV_MAX_DATASETS)
		return dv_json_walk_fail(w, "more than %u datasets",
					 DV_MAX_DATASETS);
	p = grow(dp->names, &dp->cap, dp->n + 2, sizeof(char *), 16);
	if (!p)
		return -ENOMEM;
	dp->names = p;
	dp->names[dp->n] = strdup(s);
	if (!dp->names[dp->n])
		return -ENOMEM;
	dp->names[++dp->n] = NULL;
	return 0;
}

static int datasets_member(struct dv_json_walk *w, const char *key, void *ctx)
{
	struct dsparse *dp = ctx;

	if (strcmp(key, "datasets") != 0)
		return 1;
	if (dp->seen)
		return dv_json_walk_fail(w, "duplicate key 'datasets'");
	dp->seen = true;
	return dv_json_walk_array(w, "datasets", dataset_item, dp);
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

	ret = dv_json_walk_document(text, len, JP_MAX_DEPTH, datasets_member, &dp, err, errlen);
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
