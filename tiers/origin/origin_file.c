/*
 * The file origin: file:///abs/path or /abs/path, a local disk or an NFS
 * mount holding the origin layout. Documents are read whole (at most
 * DV_DOC_MAX); their ETag is "<mtime_ns>-<size>-<ino>", so an unchanged file
 * answers "not modified" like an HTTP server would. Shards are copied into
 * the sink with read() in 1 MiB pieces: plain reads behave the same on NFS
 * and local disks, and a file truncated under us is an error, not a SIGBUS
 * as with mmap.
 *
 * Every path is resolved beneath the root (openat2, RESOLVE_BENEATH): a
 * symlink in the origin may point elsewhere inside it, never out of it, so
 * whoever can write into the origin cannot make the daemon read (and serve
 * through the mount) any other file it can read.
 *
 * Not here: retries (a local read either works or does not), verifying
 * (the sink does).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "tiers/net/http.h"
#include "origin_impl.h"
#include "origin.h"
#include "tiers/core/sink.h"

#define COPY_CHUNK (1u << 20)

struct file_origin {
	struct dv_origin base;
	char *root;    /* absolute directory, no trailing '/' */
};

static const struct dv_origin_ops file_origin_ops;

static struct file_origin *downcast(struct dv_origin *o)
{
	assert(o->ops == &file_origin_ops);
	return (struct file_origin *)o;
}

/* open() errors as the origin contract names them. */
static int map_open_errno(int err)
{
	switch (err) {
	case ENOENT:
	case ENOTDIR:
		return -ENOENT;
	case EACCES:
	case EPERM:
		return -EACCES;
	case ENOMEM:
		return -ENOMEM;
	case EXDEV: /* RESOLVE_BENEATH: the path leads out of the root */
		return -EACCES;
	case ELOOP:
		return -ELOOP;
	default:
		return -EIO;
	}
}

/*
 * openat2(@relpath) beneath the root, opened for each call so that a root
 * moved or replaced is seen at once. A kernel without openat2 (before 5.6)
 * gets O_NOFOLLOW: the last component, at least, is no symlink.
 */
static int open_beneath(const struct file_origin *o, const char *relpath)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH };
	int dir, fd, err;

	dir = open(*o->root ? o->root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -1;
	fd = (int)syscall(SYS_openat2, dir, relpath, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS)
		fd = openat(dir, relpath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	err = errno;
	close(dir);
	errno = err;
	return fd;
}

/* @path: what log lines show (the root and @relpath). */
static int open_regular(const struct file_origin *o, const char *relpath,
			const char *path, struct stat *st)
{
	int fd = open_beneath(o, relpath);
	int ret;

	if (fd < 0 && (errno == EXDEV || errno == ELOOP)) {
		ret = map_open_errno(errno);
		dv_err("origin: refusing %s: %s", path,
		       errno == EXDEV ? "a symlink leads out of the origin's root" :
					"too many symlinks");
		return ret;
	}
	if (fd < 0) {
		ret = map_open_errno(errno);
		if (ret != -ENOENT)
			dv_err("origin: cannot open %s: %s", path, strerror(errno));
		return ret;
	}
	if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
		dv_err("origin: %s is not a regular file", path);
		close(fd);
		return -EIO;
	}
	return fd;
}

static ssize_t read_full(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* ---- documents ---- */

static void doc_etag(const struct stat *st, char *buf, size_t len)
{
	unsigned long long ns = (unsigned long long)st->st_mtim.tv_sec *
				1000000000ULL +
				(unsigned long long)st->st_mtim.tv_nsec;

	snprintf(buf, len, "%llu-%llu-%llu", ns,
		 (unsigned long long)st->st_size,
		 (unsigned long long)st->st_ino);
}

static int read_doc(int fd, const char *path, size_t size, char **body,
		    size_t *len)
{
	char *buf = malloc(size + 1);
	ssize_t n;

	if (!buf)
		return -ENOMEM;
	n = read_full(fd, buf, size);
	if (n < 0) {
		dv_err("origin: reading %s: %s", path, strerror((int)-n));
		free(buf);
		return -EIO;
	}
	/* A file that shrank under us gives what it had: the ETag will move. */
	buf[n] = '\0';
	*body = buf;
	*len = (size_t)n;
	return 0;
}

static int file_get_doc(struct dv_origin *base, const char *relpath,
			const char *etag, char **body, size_t *len,
			char **etag_out)
{
	struct file_origin *o = downcast(base);
	char *path = NULL, tag[96];
	struct stat st;
	int fd, ret;

	if (asprintf(&path, "%s/%s", o->root, relpath) < 0)
		return -ENOMEM;
	fd = open_regular(o, relpath, path, &st);
	if (fd < 0) {
		ret = fd;
		goto out;
	}
	ret = -EFBIG;
	if ((uint64_t)st.st_size > DV_DOC_MAX) {
		dv_err("origin: %s is larger than %u bytes", path, DV_DOC_MAX);
		goto out_close;
	}
	doc_etag(&st, tag, sizeof(tag));
	ret = 1;
	if (etag && strcmp(etag, tag) == 0)
		goto out_close;
	ret = read_doc(fd, path, (size_t)st.st_size, body, len);
	if (ret == 0 && etag_out) {
		*etag_out = strdup(tag);
		if (!*etag_out) {
			free(*body);
			*body = NULL;
			ret = -ENOMEM;
		}
	}
out_close:
	close(fd);
out:
	if (ret < 0 && ret != -ENOENT)
		__atomic_fetch_add(&base->errors, 1, __ATOMIC_RELAXED);
	free(path);
	return ret;
}

/* ---- shards ---- */

static int copy_into(int fd, const char *path, uint64_t size,
		     struct dv_origin *base, struct dv_sink *sink)
{
	char *buf = malloc(COPY_CHUNK);
	uint64_t left = size;
	ssize_t n;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (left > 0) {
		n = read_full(fd, buf, left < COPY_CHUNK ? (size_t)left : COPY_CHUNK);
		if (n <= 0) {
			dv_err("origin: reading %s: %s", path,
			       n < 0 ? strerror((int)-n) : "file shrank");
			ret = -EIO;
			break;
		}
		ret = dv_sink_write(sink, buf, (size_t)n);
		if (ret) {
			dv_err("origin: copying %s to staging: %s", path,
			       strerror(-ret));
			break;
		}
		__atomic_fetch_add(&base->bytes, (uint64_t)n, __ATOMIC_RELAXED);
		left -= (uint64_t)n;
	}
	free(buf);
	return ret;
}

static int file_fetch_shard(struct dv_origin *base, const char *hash,
			    uint64_t size, struct dv_sink *sink)
{
	struct file_origin *o = downcast(base);
	struct stat st;
	char *path;
	int fd, ret;

	if (!dv_valid_hash(hash)) {
		dv_warn("origin: refusing a malformed content hash");
		return -EINVAL;
	}
	__atomic_fetch_add(&base->requests, 1, __ATOMIC_RELAXED);
	if (asprintf(&path, "%s/shards/%s.tar", o->root, hash) < 0)
		return -ENOMEM;
	fd = open_regular(o, path + strlen(o->root) + 1, path, &st);
	if (fd < 0) {
		ret = fd;
		if (ret == -ENOENT)
			dv_warn("origin: %s: not found", path);
		goto out;
	}
	if ((uint64_t)st.st_size != size) {
		dv_err("origin: %s has %llu bytes, the manifest says %llu",
		       path, (unsigned long long)st.st_size,
		       (unsigned long long)size);
		ret = -EIO;
		goto out_close;
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	ret = copy_into(fd, path, size, base, sink);
out_close:
	close(fd);
out:
	if (ret < 0)
		__atomic_fetch_add(&base->errors, 1, __ATOMIC_RELAXED);
	free(path);
	return ret;
}

static int file_fetch_range(struct dv_origin *base, const char *hash,
			    uint64_t size, uint64_t off, uint64_t len,
			    void *buf)
{
	struct file_origin *o = downcast(base);
	struct stat st;
	char *path;
	int fd, ret;

	if (!dv_valid_hash(hash))
		return -EINVAL;
	__atomic_fetch_add(&base->requests, 1, __ATOMIC_RELAXED);
	if (asprintf(&path, "%s/shards/%s.tar", o->root, hash) < 0)
		return -ENOMEM;
	fd = open_regular(o, path + strlen(o->root) + 1, path, &st);
	ret = fd < 0 ? fd : 0;
	if (ret == 0 && ((uint64_t)st.st_size != size || off + len > size)) {
		dv_err("origin: %s has %llu bytes, the manifest says %llu",
		       path, (unsigned long long)st.st_size,
		       (unsigned long long)size);
		ret = -EIO;
	}
	if (ret == 0)
		ret = dv_pread_full(fd, buf, len, off);
	if (ret == 0)
		__atomic_fetch_add(&base->bytes, len, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&base->errors, 1, __ATOMIC_RELAXED);
	if (fd >= 0)
		close(fd);
	free(path);
	return ret;
}

/* ---- lifecycle ---- */

static void file_release(struct dv_origin *base)
{
	free(downcast(base)->root);
}

static const struct dv_origin_ops file_origin_ops = {
	.kind = "file",
	.get_doc = file_get_doc,
	.fetch_shard = file_fetch_shard,
	.fetch_range = file_fetch_range,
	.release = file_release,
};

/* file:///abs, file://localhost/abs or /abs → "/abs" (no trailing '/'). */
static const char *path_of(const char *url)
{
	if (strncasecmp(url, "file://localhost/", 17) == 0)
		return url + 16;
	if (strncasecmp(url, "file://", 7) == 0)
		return url[7] == '/' ? url + 7 : NULL;
	return url[0] == '/' ? url : NULL;
}

static char *clean_root(const char *path)
{
	char *root = strdup(path);
	size_t len;

	if (!root)
		return NULL;
	len = strlen(root);
	while (len > 1 && root[len - 1] == '/')
		root[--len] = '\0';
	if (len == 1)
		root[0] = '\0'; /* "/": paths become "/shards/…" */
	return root;
}

int dv_origin_file_new(const char *url, const struct dv_http_config *http,
		       struct dv_origin **out, char *err, size_t errlen)
{
	const char *path = path_of(url);
	struct file_origin *o;

	*out = NULL;
	if (!path) {
		snprintf(err, errlen,
			 "origin \"%.200s\": a file origin is file:///absolute/path or /absolute/path",
			 url);
		return -EINVAL;
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->base.ops = &file_origin_ops;
	o->root = clean_root(path);
	if (o->root && asprintf(&o->base.url, "file://%s",
				*o->root ? o->root : "/") < 0)
		o->base.url = NULL;
	if (!o->root || !o->base.url) {
		snprintf(err, errlen, "origin: out of memory");
		dv_origin_free(&o->base);
		return -ENOMEM;
	}
	*out = &o->base;
	return 0;
}
