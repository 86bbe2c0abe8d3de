/*
 * Destinations of write-back areas: a directory (file://, local disk or
 * NFS) or an S3 bucket and prefix (s3://), each an ops table. S3 uploads
 * are the s3 tier's (tiers/s3: one PUT, or a multipart upload whose parts
 * go up in parallel; retries with backoff in the network layer); its
 * credentials come from the AWS chain, region and endpoint from the entry.
 *
 * A file destination writes beside the final name, fsyncs and renames: a
 * reader of the destination sees the old object or the new one.
 */
#include "wb_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/s3/s3_client.h"

bool dv_wb_transient(int err)
{
	switch (err) {
	case -EACCES:
	case -EPERM:
	case -EINVAL:
	case -ENAMETOOLONG:
	case -EFBIG:
	case -EPROTO:
		return false;
	default:
		return true;
	}
}

/* ---- file:// ---- */

struct file_dest {
	int dirfd;
};

static int mkdir_parents(int dirfd, const char *rel)
{
	char path[PATH_MAX];
	char *p;

	snprintf(path, sizeof(path), "%s", rel);
	for (p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdirat(dirfd, path, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

static int copy_fd(int in, int out, uint64_t size)
{
	loff_t off_in = 0, off_out = 0;

	while ((uint64_t)off_in < size) {
		ssize_t n = copy_file_range(in, &off_in, out, &off_out,
					    (size_t)(size - (uint64_t)off_in), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file shrank under us */
	}
	return 0;
}

static int file_put(struct wb_area *a, const char *rel, int fd, uint64_t size)
{
	struct file_dest *d = a->dest;
	char tmp[PATH_MAX];
	int out, ret;

	if (snprintf(tmp, sizeof(tmp), "%s.datavo-part", rel) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	ret = mkdir_parents(d->dirfd, rel);
	if (ret)
		return ret;
	out = openat(d->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		     0644);
	if (out < 0)
		return -errno;
	ret = copy_fd(fd, out, size);
	if (ret == 0 && fsync(out) < 0)
		ret = -errno;
	close(out);
	if (ret == 0 && renameat(d->dirfd, tmp, d->dirfd, rel) < 0)
		ret = -errno;
	if (ret)
		unlinkat(d->dirfd, tmp, 0);
	return ret;
}

/* Removes @rel, then its parents while they are empty. */
static int file_del(struct wb_area *a, const char *rel)
{
	struct file_dest *d = a->dest;
	char path[PATH_MAX];
	char *p;

	if (unlinkat(d->dirfd, rel, 0) < 0 && errno != ENOENT)
		return -errno;
	snprintf(path, sizeof(path), "%s", rel);
	while ((p = strrchr(path, '/'))) {
		*p = '\0';
		if (unlinkat(d->dirfd, path, AT_REMOVEDIR) < 0)
			break;
	}
	return 0;
}

static void file_free(struct wb_area *a)
{
	struct file_dest *d = a->dest;

	if (d)
		close(d->dirfd);
	free(d);
}

static const struct wb_dest_ops file_ops = {
	.put = file_put, .del = file_del, .free = file_free,
};

static int open_file_dest(struct wb_area *a, char *err, size_t errlen)
{
	struct file_dest *d = calloc(1, sizeof(*d));
	const char *path = a->cfg->remote.path;

	if (!d)
		return -ENOMEM;
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "write-back '%s': destination file://%s: %s",
			 a->cfg->name, path, strerror(errno));
		free(d);
		return -errno;
	}
	d->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dirfd < 0) {
		snprintf(err, errlen, "write-back '%s': destination file://%s: %s",
			 a->cfg->name, path, strerror(errno));
		free(d);
		return -errno;
	}
	a->dest = d;
	a->dest_ops = &file_ops;
	return 0;
}

/* ---- s3:// ---- */

struct s3_dest {
	struct dv_s3 s3;
	char *prefix; /* "" or "prefix/" */
};

static int s3_key(struct wb_area *a, const char *rel, char *buf, size_t len)
{
	struct s3_dest *d = a->dest;

	if (snprintf(buf, len, "%s%s", d->prefix, rel) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static int s3_put(struct wb_area *a, const char *rel, int fd, uint64_t size)
{
	struct s3_dest *d = a->dest;
	char key[PATH_MAX];
	int ret = s3_key(a, rel, key, sizeof(key));

	return ret ? ret : dv_s3_put_file(&d->s3, key, fd, size);
}

static int s3_del(struct wb_area *a, const char *rel)
{
	struct s3_dest *d = a->dest;
	char key[PATH_MAX];
	int ret = s3_key(a, rel, key, sizeof(key));

	return ret ? ret : dv_s3_delete(&d->s3, key);
}

static void s3_free(struct wb_area *a)
{
	struct s3_dest *d = a->dest;

	if (!d)
		return;
	dv_s3_release(&d->s3);
	free(d->prefix);
	free(d);
}

static const struct wb_dest_ops s3_ops = {
	.put = s3_put, .del = s3_del, .free = s3_free,
};

static int open_s3_dest(struct wb_area *a, const struct dv_config *cfg,
			char *err, size_t errlen)
{
	const struct dv_tier_config *r = &a->cfg->remote;
	struct s3_dest *d = calloc(1, sizeof(*d));
	char who[300];
	struct dv_s3_config sc = {
		.who = who, .bucket = r->bucket, .region = r->region,
		.endpoint = r->endpoint, .http = &cfg->http,
	};
	int ret;

	if (!d)
		return -ENOMEM;
	snprintf(who, sizeof(who), "write-back '%s'", a->cfg->name);
	if (asprintf(&d->prefix, "%s%s", r->prefix ? r->prefix : "",
		     r->prefix && *r->prefix ? "/" : "") < 0) {
		free(d);
		return -ENOMEM;
	}
	ret = dv_s3_init(&d->s3, &sc, err, errlen);
	if (ret) {
		free(d->prefix);
		free(d);
		return ret;
	}
	a->dest = d;
	a->dest_ops = &s3_ops;
	return 0;
}

int dv_wb_dest_open(struct wb_area *a, const struct dv_config *cfg, char *err,
		    size_t errlen)
{
	switch (a->cfg->dest) {
	case DV_WB_DEST_FILE:
		return open_file_dest(a, err, errlen);
	case DV_WB_DEST_S3:
		return open_s3_dest(a, cfg, err, errlen);
	}
	snprintf(err, errlen, "write-back '%s': unknown destination",
		 a->cfg->name);
	return -EINVAL;
}
