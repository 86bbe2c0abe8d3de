#include "fake_remote.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct blob {
	struct blob *next;
	char hash[65];
	size_t len;
	unsigned char *data;
};

struct fake_remote {
	struct dv_tier base;
	pthread_mutex_t lock;
	struct blob *blobs;
	struct fake_remote_counts counts;
	bool corrupt;
	int lookup_err, upload_err;
	unsigned upload_delay_ms;
};

static const struct dv_tier_ops fake_ops;

static struct fake_remote *fr(struct dv_tier *t)
{
	if (t->ops != &fake_ops)
		abort();
	return (struct fake_remote *)t;
}

static struct blob *find_blob(struct fake_remote *f, const char *hash)
{
	for (struct blob *b = f->blobs; b; b = b->next) {
		if (strcmp(b->hash, hash) == 0)
			return b;
	}
	return NULL;
}

void fake_remote_put(struct dv_tier *t, const char *hash, const void *buf,
		     size_t len)
{
	struct fake_remote *f = fr(t);
	struct blob *b = calloc(1, sizeof(*b));

	strcpy(b->hash, hash);
	b->len = len;
	b->data = malloc(len ? len : 1);
	memcpy(b->data, buf, len);
	pthread_mutex_lock(&f->lock);
	b->next = f->blobs;
	f->blobs = b;
	pthread_mutex_unlock(&f->lock);
}

const void *fake_remote_get(struct dv_tier *t, const char *hash, size_t *len)
{
	struct blob *b = find_blob(fr(t), hash);

	if (!b)
		return NULL;
	*len = b->len;
	return b->data;
}

struct fake_remote_counts *fake_remote_counts(struct dv_tier *t)
{
	return &fr(t)->counts;
}

void fake_remote_faults(struct dv_tier *t, int lookup_err, int upload_err,
			unsigned upload_delay_ms)
{
	struct fake_remote *f = fr(t);

	f->lookup_err = lookup_err;
	f->upload_err = upload_err;
	f->upload_delay_ms = upload_delay_ms;
}

void fake_remote_corrupt(struct dv_tier *t, bool on)
{
	fr(t)->corrupt = on;
}

static int fake_lookup(struct dv_tier *t, const char *hash, uint64_t size)
{
	struct fake_remote *f = fr(t);
	struct blob *b;

	f->counts.lookups++;
	if (f->lookup_err)
		return f->lookup_err;
	b = find_blob(f, hash);
	if (!b)
		return -ENOENT;
	return b->len == size ? 0 : -EBADMSG;
}

static int fake_download(struct dv_tier *t, const char *hash, uint64_t size,
			 struct dv_sink *sink)
{
	struct fake_remote *f = fr(t);
	struct blob *b = find_blob(f, hash);
	unsigned char *copy;
	int ret;

	f->counts.downloads++;
	if (!b)
		return -ENOENT;
	copy = malloc(b->len ? b->len : 1);
	memcpy(copy, b->data, b->len);
	if (f->corrupt && b->len)
		copy[b->len / 2] ^= 0xff;
	ret = dv_sink_write(sink, copy, b->len);
	free(copy);
	return ret;
}

static int fake_download_range(struct dv_tier *t, const char *hash,
			       uint64_t size, uint64_t off, uint64_t len,
			       void *buf)
{
	struct fake_remote *f = fr(t);
	struct blob *b = find_blob(f, hash);

	__atomic_fetch_add(&f->counts.ranges, 1, __ATOMIC_SEQ_CST);
	if (!b)
		return -ENOENT;
	if (b->len != size || off > size || len > size - off)
		return -EINVAL;
	memcpy(buf, b->data + off, len);
	if (f->corrupt && len)
		((unsigned char *)buf)[len / 2] ^= 0xff;
	return 0;
}

static int fake_install(struct dv_tier *t, const char *hash, int src_fd,
			const char *src_path, uint64_t size, unsigned flags)
{
	struct fake_remote *f = fr(t);
	unsigned char *buf;

	if (t->max_bytes && size > t->max_bytes)
		return -EFBIG;
	__atomic_fetch_add(&f->counts.upload_attempts, 1, __ATOMIC_SEQ_CST);
	if (f->upload_delay_ms)
		usleep(f->upload_delay_ms * 1000);
	if (f->upload_err)
		return f->upload_err;
	f->counts.uploads++;
	if (find_blob(f, hash))
		return 0;
	buf = malloc(size ? size : 1);
	if (pread(src_fd, buf, size, 0) != (ssize_t)size) {
		free(buf);
		return -EIO;
	}
	fake_remote_put(t, hash, buf, size);
	free(buf);
	return 0;
}

static void fake_destroy(struct dv_tier *t)
{
	struct fake_remote *f = fr(t);
	struct blob *b = f->blobs;

	while (b) {
		struct blob *next = b->next;

		free(b->data);
		free(b);
		b = next;
	}
	pthread_mutex_destroy(&f->lock);
	dv_tier_release(t);
	free(f);
}

static const struct dv_tier_ops fake_ops = {
	.type = "fake_remote",
	.caps = DV_TIER_REMOTE,
	.destroy = fake_destroy,
	.lookup = fake_lookup,
	.download = fake_download,
	.download_range = fake_download_range,
	.install = fake_install,
};

struct dv_tier *fake_remote_new(const char *name, uint64_t max_bytes)
{
	struct fake_remote *f = calloc(1, sizeof(*f));

	dv_tier_init(&f->base, &fake_ops, name, DV_TIER_TYPE_S3, max_bytes);
	pthread_mutex_init(&f->lock, NULL);
	return &f->base;
}
