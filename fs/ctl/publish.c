/*
 * The publisher (publish.h): hashes a folder of tars, places the shards and
 * writes the manifest, the revision and datasets.json of an origin.
 *
 * Two passes over the sources: SHA-256 of every byte (which manifest_ref
 * needs before any content hash can start), then, per revision tried, a
 * walk over the tar headers only (dv_tar_members() seeks past the payloads)
 * to feed the sample ids into XXH3-128. Manifests are written by hand with
 * JSON escaping and then parsed back with dv_manifest_parse(), so a
 * document the daemon would refuse is never published.
 *
 * Not here: reading tar headers (tar.c), argument parsing and output
 * (fs/ctl/ctl_main.c).
 */
#include "publish.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "config/util.h"
#include "tiers/core/chunks.h"
#include "tiers/core/digest.h"
#include "tiers/origin/origin.h"
#include "tiers/core/sink.h"
#include "fs/namespace/manifest.h"
#include "publish_impl.h"
#include "tar.h"

#define COPY_CHUNK (1u << 20)

int dv_pub_fail(struct pub *p, int ret, const char *fmt, ...)
{
	va_list ap;

	if (p->err && p->errlen) {
		va_start(ap, fmt);
		vsnprintf(p->err, p->errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

int dv_pub_join(char *buf, size_t len, const char *a, const char *b)
{
	int n = snprintf(buf, len, "%s/%s", a, b);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ORIGIN/<@fmt…> into @buf (PATH_MAX bytes). 0 or -ENAMETOOLONG. */
__attribute__((format(printf, 3, 4)))
static int origin_path(struct pub *p, char *buf, const char *fmt, ...)
{
	int n = snprintf(buf, PATH_MAX, "%s/", p->o->origin_dir), m = -1;
	va_list ap;

	if (n > 0 && n < PATH_MAX) {
		va_start(ap, fmt);
		m = vsnprintf(buf + n, (size_t)(PATH_MAX - n), fmt, ap);
		va_end(ap);
	}
	if (m < 0 || m >= PATH_MAX - n)
		return dv_pub_fail(p, -ENAMETOOLONG, "%s: path too long",
			    p->o->origin_dir);
	return 0;
}

/* ---- sources ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_shard(const void *a, const void *b)
{
	return strcmp(((const struct src_shard *)a)->name,
		      ((const struct src_shard *)b)->name);
}

static bool is_tar_name(const char *name)
{
	size_t len = strlen(name);

	return len > 4 && strcmp(name + len - 4, ".tar") == 0;
}

/* Adds SRC/@name: checks it, measures it, hashes its bytes. */
/* The whole digest and, unless disabled, the chunk list: one read. */
static int hash_source(struct pub *p, int fd, struct src_shard *s)
{
	uint32_t cs = p->o->no_chunks ? 0 : p->o->chunk_size ? p->o->chunk_size
							      : DV_CHUNK_SIZE_DEFAULT;
	char *text;
	size_t len;
	int ret;

	ret = dv_chunks_of_fd(fd, cs, s->sha256, &s->chunks);
	if (ret || !cs)
		return ret;
	ret = dv_chunks_format(&s->chunks, &text, &len, s->chunks_pin);
	if (ret)
		return ret;
	free(text);
	s->has_chunks = true;
	return 0;
}

static int add_source(struct pub *p, const char *name, size_t *cap)
{
	struct src_shard *s;
	char path[PATH_MAX];
	struct stat st;
	int fd, ret;

	if (strlen(name) > DV_NAME_MAX || !dv_valid_name_part(name))
		return dv_pub_fail(p, -EINVAL, "%s/%s: not a valid shard name (letters, digits, '.', '_', '-')",
			    p->o->src_dir, name);
	if (p->n >= DV_MANIFEST_MAX_SHARDS)
		return dv_pub_fail(p, -EINVAL, "%s: more than %u shards",
			    p->o->src_dir, DV_MANIFEST_MAX_SHARDS);
	s = dv_grow(p->shards, p->n, cap, sizeof(*s), 64);
	if (!s)
		return -ENOMEM;
	p->shards = s;
	s = &p->shards[p->n];
	memset(s, 0, sizeof(*s));
	ret = dv_pub_join(path, sizeof(path), p->o->src_dir, name);
	fd = ret ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = ret ? ret : -errno;
		return dv_pub_fail(p, ret, "%s: %s", path, strerror(-ret));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		ret = dv_pub_fail(p, -EINVAL, "%s: not a regular file", path);
	if (ret == 0) {
		ret = hash_source(p, fd, s);
		if (ret)
			dv_pub_fail(p, ret, "%s: %s", path, strerror(-ret));
	}
	close(fd);
	s->name = ret ? NULL : strdup(name);
	if (ret == 0 && !s->name)
		ret = -ENOMEM;
	if (ret)
		return ret;
	s->size = (uint64_t)st.st_size;
	s->mode = st.st_mode;
	p->n++;
	return 0;
}

static int scan_sources(struct pub *p)
{
	DIR *d = opendir(p->o->src_dir);
	struct dirent *de;
	size_t cap = 0;
	int ret = 0;

	if (!d)
		return dv_pub_fail(p, -errno, "%s: %s", p->o->src_dir, strerror(errno));
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			ret = errno ? dv_pub_fail(p, -errno, "%s: %s", p->o->src_dir,
					   strerror(errno)) : 0;
			break;
		}
		if (!is_tar_name(de->d_name))
			continue;
		ret = add_source(p, de->d_name, &cap);
		if (ret)
			break;
	}
	closedir(d);
	if (ret == 0 && p->n == 0)
		ret = dv_pub_fail(p, -ENOENT, "%s: no .tar files", p->o->src_dir);
	if (ret == 0)
		qsort(p->shards, p->n, sizeof(*p->shards), cmp_shard);
	return ret;
}

/* Keys: 1-255 printable ASCII bytes each; kept sorted and unique. */
static int copy_keys(struct pub *p)
{
	const struct dv_publish_opts *o = p->o;
	size_t kept = 0;

	if (o->nkeys > DV_MANIFEST_MAX_KEYS)
		return dv_pub_fail(p, -EINVAL, "more than %u keys",
			    DV_MANIFEST_MAX_KEYS);
	p->keys = calloc(o->nkeys + 1, sizeof(char *));
	if (!p->keys)
		return -ENOMEM;
	for (size_t i = 0; i < o->nkeys; i++) {
		const char *k = o->keys[i];
		size_t len = strlen(k);

		for (size_t j = 0; j < len; j++) {
			if (k[j] < 0x20 || k[j] > 0x7e)
				len = 0;
		}
		if (len == 0 || len > DV_NAME_MAX)
			return dv_pub_fail(p, -EINVAL, "key %zu is not 1 to %u printable ASCII characters",
				    i, DV_NAME_MAX);
		p->keys[p->nkeys] = strdup(k);
		if (!p->keys[p->nkeys++])
			return -ENOMEM;
	}
	qsort(p->keys, p->nkeys, sizeof(char *), cmp_str);
	for (size_t i = 0; i < p->nkeys; i++) {
		if (kept && strcmp(p->keys[kept - 1], p->keys[i]) == 0)
			free(p->keys[i]);
		else
			p->keys[kept++] = p->keys[i];
	}
	p->nkeys = kept;
	return 0;
}

/* ---- shard files ---- */

static int copy_fd(int in, int out)
{
	char *buf = malloc(COPY_CHUNK);
	ssize_t n, w;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		n = read(in, buf, COPY_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : 0;
			break;
		}
		for (ssize_t off = 0; off < n; off += w) {
			w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR) {
				w = 0;
				continue;
			}
			if (w < 0) {
				ret = -errno;
				goto out;
			}
		}
	}
out:
	free(buf);
	return ret;
}

/* Copies @src to @dst through a hidden temporary, mode 0644. */
static int copy_file(const char *src, const char *dst, const char *dir)
{
	char tmp[PATH_MAX];
	int in, out, ret = 0;

	if (snprintf(tmp, sizeof(tmp), "%s/.copy.tmp.XXXXXX", dir) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = mkostemp(tmp, O_CLOEXEC);
	if (out < 0) {
		ret = -errno;
		close(in);
		return ret;
	}
	/* A reflink (btrfs, xfs) shares blocks copy-on-write: instant, safe. */
	if (ioctl(out, FICLONE, in) < 0)
		ret = copy_fd(in, out);
	if (ret == 0 && fchmod(out, 0644) < 0)
		ret = -errno;
	if (ret == 0 && fsync(out) < 0)
		ret = -errno;
	close(in);
	if (close(out) < 0 && ret == 0)
		ret = -errno;
	if (ret == 0 && rename(tmp, dst) < 0)
		ret = -errno;
	if (ret)
		unlink(tmp);
	return ret;
}

/* Hard-links @src as @dst (through a temporary, replacing @dst). */
static int link_file(const char *src, const char *dst, const char *dir)
{
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s/.link.tmp.%ld", dir,
		     (long)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	unlink(tmp);
	if (link(src, tmp) < 0)
		return -errno;
	if (rename(tmp, dst) < 0) {
		unlink(tmp);
		return -errno;
	}
	return 0;
}

static int place_shard(struct pub *p, const struct src_shard *s,
		       const char *dir, struct dv_publish_result *res)
{
	char src[PATH_MAX], dst[PATH_MAX], file[64];
	struct stat st;
	int ret;

	snprintf(file, sizeof(file), "%s.tar", s->hash);
	ret = dv_pub_join(dst, sizeof(dst), dir, file);
	if (ret == 0)
		ret = dv_pub_join(src, sizeof(src), p->o->src_dir, s->name);
	if (ret)
		return dv_pub_fail(p, ret, "%s: path too long", dir);
	if (stat(dst, &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size == s->size) {
		res->present++;
		return 0;
	}
	/* A link shares the source's mode: only a world-readable one. */
	if (!p->o->copy && (s->mode & 0444) == 0444 &&
	    link_file(src, dst, dir) == 0) {
		res->linked++;
		return 0;
	}
	ret = copy_file(src, dst, dir);
	if (ret)
		return dv_pub_fail(p, ret, "copying %s to %s: %s", src, dst,
			    strerror(-ret));
	res->copied++;
	return 0;
}

/* ORIGIN/shards/<hash>.chunks, before any manifest pins it. */
static int place_chunks(struct pub *p, const struct src_shard *s,
			const char *dir)
{
	char path[PATH_MAX], file[80], *text;
	uint8_t pin[32];
	struct iovec iov;
	size_t len;
	int ret;

	if (!s->has_chunks)
		return 0;
	snprintf(file, sizeof(file), "%s.chunks", s->hash);
	ret = dv_pub_join(path, sizeof(path), dir, file);
	if (ret)
		return dv_pub_fail(p, ret, "%s: path too long", dir);
	ret = dv_chunks_format(&s->chunks, &text, &len, pin);
	if (ret)
		return ret;
	iov.iov_base = text;
	iov.iov_len = len;
	ret = dv_doc_write_atomic(path, &iov, 1, 0644, 0);
	free(text);
	if (ret)
		return dv_pub_fail(p, ret, "%s: %s", path, strerror(-ret));
	return 0;
}

static int place_shards(struct pub *p, struct dv_publish_result *res)
{
	char dir[PATH_MAX];
	int fd, ret;

	ret = origin_path(p, dir, "shards");
	if (ret)
		return ret;
	ret = dv_mkdir_p(dir, 0755);
	if (ret)
		return dv_pub_fail(p, ret, "%s: %s", dir, strerror(-ret));
	for (size_t i = 0; i < p->n; i++) {
		ret = place_shard(p, &p->shards[i], dir, res);
		if (ret == 0)
			ret = place_chunks(p, &p->shards[i], dir);
		if (ret)
			return ret;
	}
	/* The renames must be durable before a manifest names them. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		ret = dv_pub_fail(p, -errno, "%s: %s", dir, strerror(errno));
	if (fd >= 0)
		close(fd);
	return ret;
}

/* ---- documents ---- */

/* A growing text buffer, bounded by DV_DOC_MAX. */
struct sbuf {
	char *p;
	size_t len;
	size_t cap;
	int err;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	size_t ncap = b->cap ? b->cap : 4096;
	char *p;

	if (b->err)
		return;
	if (b->len + n + 1 > DV_DOC_MAX) {
		b->err = -EFBIG;
		return;
	}
	while (b->len + n + 1 > ncap)
		ncap *= 2;
	if (ncap != b->cap) {
		p = realloc(b->p, ncap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = ncap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf))
		b->err = b->err ? b->err : -EINVAL;
	else
		sb_add(b, buf, (size_t)n);
}

/* A JSON string literal. */
static void sb_json(struct sbuf *b, const char *s)
{
	char esc[8];

	sb_add(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			sb_add(b, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			sb_add(b, esc, 6);
		} else {
			sb_add(b, s, 1);
		}
	}
	sb_add(b, "\"", 1);
}

static void manifest_json(const struct pub *p, uint64_t rev, struct sbuf *b)
{
	char sha[65];

	sb_printf(b, "{\"format\": \"%s\", \"dataset\": ", DV_MANIFEST_FORMAT);
	sb_json(b, p->o->dataset);
	sb_printf(b, ", \"revision\": %llu,\n \"manifest_ref\": \"%s\", \"keys\": [",
		  (unsigned long long)rev, p->ref);
	for (size_t k = 0; k < p->nkeys; k++) {
		sb_add(b, ", ", k ? 2 : 0);
		sb_json(b, p->keys[k]);
	}
	sb_add(b, "],\n \"shards\": [\n", 16);
	for (size_t i = 0; i < p->n; i++) {
		const struct src_shard *s = &p->shards[i];

		dv_hex_encode(s->sha256, 32, sha);
		sb_add(b, "  {\"name\": ", 11);
		sb_json(b, s->name);
		sb_printf(b, ", \"index\": %zu, \"content_hash\": \"%s\", \"size\": %llu, \"sha256\": \"%s\"",
			  i, s->hash, (unsigned long long)s->size, sha);
		if (s->has_chunks) {
			dv_hex_encode(s->chunks_pin, 32, sha);
			sb_printf(b, ", \"chunks\": \"%s\"", sha);
		}
		sb_printf(b, "}%s\n", i + 1 < p->n ? "," : "");
	}
	sb_add(b, " ]}\n", 4);
}

static int write_doc(struct pub *p, const char *path, const struct sbuf *b)
{
	struct iovec iov = { b->p, b->len };
	int ret = dv_doc_write_atomic(path, &iov, 1, 0644, 0);

	return ret ? dv_pub_fail(p, ret, "%s: %s", path, strerror(-ret)) : 0;
}

/* Reads @path: 0, -ENOENT when absent, else -errno with a message. */
static int read_origin_doc(struct pub *p, const char *path, char **body,
			   size_t *len)
{
	int ret = dv_doc_read(path, DV_DOC_MAX, body, len, NULL);

	if (ret && ret != -ENOENT)
		dv_pub_fail(p, ret, "%s: %s", path, strerror(-ret));
	return ret;
}

/* The current manifest of the dataset, or NULL when there is none. */
static int current_manifest(struct pub *p, struct dv_manifest **out)
{
	char path[PATH_MAX], why[256], *body;
	size_t len;
	int ret;

	*out = NULL;
	ret = origin_path(p, path, "%s/manifest.json", p->o->dataset);
	if (ret == 0)
		ret = read_origin_doc(p, path, &body, &len);
	if (ret)
		return ret == -ENOENT ? 0 : ret;
	ret = dv_manifest_parse(body, len, p->o->dataset, out, why,
				sizeof(why));
	free(body);
	if (ret)
		return dv_pub_fail(p, ret, "%s: %s", path, why);
	return 0;
}

/* Writes revisions/<rev>.json, then manifest.json; checks them first. */
static int write_manifest(struct pub *p, uint64_t rev)
{
	char path[PATH_MAX], dir[PATH_MAX], why[256];
	struct sbuf b = { 0 };
	struct dv_manifest *m = NULL;
	int ret;

	manifest_json(p, rev, &b);
	ret = b.err;
	if (ret == 0)
		ret = dv_manifest_parse(b.p, b.len, p->o->dataset, &m, why,
					sizeof(why));
	dv_manifest_free(m);
	if (ret) {
		free(b.p);
		return dv_pub_fail(p, ret == -EINVAL ? -EIO : ret,
			    "the new manifest is not valid: %s",
			    ret == -EINVAL ? why : strerror(-ret));
	}
	ret = origin_path(p, dir, "%s/revisions", p->o->dataset);
	if (ret == 0) {
		ret = dv_mkdir_p(dir, 0755);
		if (ret)
			dv_pub_fail(p, ret, "%s: %s", dir, strerror(-ret));
	}
	if (ret == 0)
		ret = origin_path(p, path, "%s/revisions/%llu.json",
				  p->o->dataset, (unsigned long long)rev);
	if (ret == 0)
		ret = write_doc(p, path, &b);
	if (ret == 0)
		ret = origin_path(p, path, "%s/manifest.json", p->o->dataset);
	if (ret == 0)
		ret = write_doc(p, path, &b);
	free(b.p);
	return ret;
}

static void datasets_json(char **names, size_t n, struct sbuf *b)
{
	sb_add(b, "{\"datasets\": [\n", 15);
	for (size_t i = 0; i < n; i++) {
		sb_add(b, "  ", 2);
		sb_json(b, names[i]);
		sb_add(b, ",\n", i + 1 < n ? 2 : 0);
	}
	sb_add(b, "\n]}\n", 4);
}

/* Adds the dataset to ORIGIN/datasets.json unless it is listed already. */
static int update_datasets(struct pub *p)
{
	const char *dataset = p->o->dataset;
	char path[PATH_MAX], why[256], *body = NULL, **names = NULL, **grown;
	struct sbuf b = { 0 };
	size_t len, n = 0;
	int ret;

	ret = origin_path(p, path, "datasets.json");
	if (ret)
		return ret;
	ret = read_origin_doc(p, path, &body, &len);
	if (ret == 0) {
		ret = dv_datasets_parse(body, len, &names, &n, why, sizeof(why));
		if (ret)
			dv_pub_fail(p, ret, "%s: %s", path, why);
	} else if (ret == -ENOENT) {
		names = calloc(2, sizeof(char *));
		ret = names ? 0 : -ENOMEM;
	}
	free(body);
	if (ret || bsearch(&dataset, names, n, sizeof(char *), cmp_str))
		goto out;
	/* Parsed lists are NULL-terminated: room for one more. */
	grown = reallocarray(names, n + 2, sizeof(char *));
	if (!grown) {
		ret = -ENOMEM;
		goto out;
	}
	names = grown;
	names[n] = strdup(dataset);
	names[n + 1] = NULL;
	if (!names[n++]) {
		ret = -ENOMEM;
		goto out;
	}
	qsort(names, n, sizeof(char *), cmp_str);
	datasets_json(names, n, &b);
	ret = b.err ? dv_pub_fail(p, b.err, "%s: %s", path, strerror(-b.err)) : 0;
	if (ret == 0)
		ret = write_doc(p, path, &b);
out:
	free(b.p);
	dv_datasets_free(names);
	return ret;
}

/* ---- the whole ---- */

/* Whether @m lists exactly our shards (hashed at m's revision). */
static bool same_shards(const struct pub *p, const struct dv_manifest *m)
{
	if (m->nshards != p->n)
		return false;
	for (size_t i = 0; i < p->n; i++) {
		const struct dv_manifest_shard *ms = &m->shards[i];
		const struct src_shard *s = &p->shards[i];

		if (strcmp(dv_manifest_name(m, ms), s->name) != 0 ||
		    strcmp(ms->hash, s->hash) != 0 || ms->size != s->size ||
		    ms->index != i || memcmp(ms->sha256, s->sha256, 32) != 0 ||
		    ms->has_chunks != s->has_chunks ||
		    (s->has_chunks &&
		     memcmp(dv_manifest_chunks_pin(m, ms), s->chunks_pin, 32) != 0))
			return false;
	}
	return true;
}

/* The revision to publish, or 0 when the current one is the same. */
static int choose_revision(struct pub *p, const struct dv_manifest *cur,
			   uint64_t *rev)
{
	const struct dv_publish_opts *o = p->o;
	char path[PATH_MAX];
	struct stat st;
	int ret;

	*rev = 0;
	if (cur && (o->revision == 0 || o->revision == cur->revision)) {
		ret = dv_pub_content_hashes(p, cur->revision);
		if (ret || same_shards(p, cur))
			return ret;
	}
	*rev = o->revision ? o->revision : cur ? cur->revision + 1 : 1;
	if (cur && *rev <= cur->revision)
		return dv_pub_fail(p, -EINVAL, "%s: revision %llu is not newer than the published %llu",
			    o->dataset, (unsigned long long)*rev,
			    (unsigned long long)cur->revision);
	ret = origin_path(p, path, "%s/revisions/%llu.json", o->dataset,
			  (unsigned long long)*rev);
	if (ret == 0 && stat(path, &st) == 0)
		return dv_pub_fail(p, -EEXIST, "%s already exists", path);
	return ret;
}

static int publish_locked(struct pub *p, struct dv_publish_result *res)
{
	struct dv_manifest *cur = NULL;
	uint64_t rev;
	int ret;

	ret = scan_sources(p);
	if (ret == 0)
		ret = dv_pub_manifest_ref(p);
	if (ret == 0)
		ret = current_manifest(p, &cur);
	if (ret == 0)
		ret = choose_revision(p, cur, &rev);
	if (ret == 0 && rev)
		ret = dv_pub_content_hashes(p, rev);
	if (ret == 0)
		ret = place_shards(p, res);
	if (ret == 0 && rev)
		ret = write_manifest(p, rev);
	if (ret == 0)
		ret = update_datasets(p);
	if (ret == 0) {
		res->unchanged = rev == 0;
		res->revision = rev ? rev : cur->revision;
		res->nshards = p->n;
		for (size_t i = 0; i < p->n; i++)
			res->bytes += p->shards[i].size;
		memcpy(res->manifest_ref, p->ref, sizeof(res->manifest_ref));
	}
	dv_manifest_free(cur);
	return ret;
}

/* Serializes publishers of one origin. Returns the lock fd or -errno. */
static int lock_origin(struct pub *p)
{
	char path[PATH_MAX];
	int fd, ret;

	ret = dv_mkdir_p(p->o->origin_dir, 0755);
	if (ret)
		return dv_pub_fail(p, ret, "%s: %s", p->o->origin_dir, strerror(-ret));
	ret = origin_path(p, path, ".publish.lock");
	if (ret)
		return ret;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return dv_pub_fail(p, -errno, "%s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX) < 0) {
		ret = dv_pub_fail(p, -errno, "%s: %s", path, strerror(errno));
		close(fd);
		return ret;
	}
	return fd;
}

int dv_publish(const struct dv_publish_opts *o, struct dv_publish_result *res,
	       char *err, size_t errlen)
{
	struct dv_publish_result local;
	struct pub p = { .o = o, .err = err, .errlen = errlen };
	int lock_fd, ret;

	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	if (!o->dataset || !dv_valid_dataset_name(o->dataset))
		return dv_pub_fail(&p, -EINVAL, "dataset '%s' is not a valid name (parts of letters, digits, '.', '_', '-', separated by '/')",
			    o->dataset ? o->dataset : "");
	ret = copy_keys(&p);
	p.xx = ret ? NULL : XXH3_createState();
	if (ret == 0 && !p.xx)
		ret = -ENOMEM;
	lock_fd = ret ? ret : lock_origin(&p);
	if (lock_fd >= 0) {
		ret = publish_locked(&p, res);
		close(lock_fd);
	} else {
		ret = lock_fd;
	}
	if (ret == -ENOMEM)
		dv_pub_fail(&p, ret, "out of memory");
	for (size_t i = 0; i < p.n; i++) {
		free(p.shards[i].name);
		dv_chunks_release(&p.shards[i].chunks);
	}
	free(p.shards);
	for (size_t i = 0; i < p.nkeys; i++)
		free(p.keys[i]);
	free(p.keys);
	XXH3_freeState(p.xx);
	return ret;
}

void dv_publish_describe(const struct dv_publish_opts *o,
			 const struct dv_publish_result *res, char *buf,
			 size_t len)
{
	char size[32];

	dv_format_bytes(res->bytes, size, sizeof(size));
	if (res->unchanged)
		snprintf(buf, len, "%s: unchanged, revision %llu (%zu shards, %s)",
			 o->dataset, (unsigned long long)res->revision,
			 res->nshards, size);
	else
		snprintf(buf, len, "%s: revision %llu, %zu shards, %s (%zu linked, %zu copied, %zu already present)",
			 o->dataset, (unsigned long long)res->revision,
			 res->nshards, size, res->linked, res->copied,
			 res->present);
}
