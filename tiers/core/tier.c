/*
 * The tier base: what every backend shares (name, capacity, counters, the
 * pins of open handles), the defaults of the optional ops (tier.h), and
 * the dispatcher that creates a backend from its config entry.
 */
#include "tier.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "tiers/azure/azure.h"
#include "tiers/folder/folder.h"
#include "tiers/gcs/gcs.h"
#include "tiers/s3/s3.h"
#include "stripe/stripe.h"

/*
 * One pinned hash: open handles of this process read it (B6). The pins of
 * a tier are a chained hash table keyed by XXH3 of the content hash, so a
 * lookup during eviction costs the same with ten pins or ten thousand.
 */
struct dv_pin {
	struct dv_pin *next;
	uint64_t key;
	unsigned count;
	char hash[65];
};

#define PINS_MIN 64 /* buckets of a new table: a power of two */

static uint64_t pin_key(const char *hash)
{
	return XXH3_64bits(hash, strlen(hash));
}

int dv_tier_init(struct dv_tier *t, const struct dv_tier_ops *ops,
		 const char *name, enum dv_tier_type type, uint64_t max_bytes)
{
	memset(t, 0, sizeof(*t));
	t->ops = ops;
	t->type = type;
	t->max_bytes = max_bytes;
	t->name = strdup(name ? name : ops->type);
	if (!t->name)
		return -ENOMEM;
	pthread_mutex_init(&t->pin_lock, NULL);
	return 0;
}

void dv_tier_release(struct dv_tier *t)
{
	for (size_t i = 0; i < t->pin_buckets; i++) {
		struct dv_pin *p = t->pins[i];

		while (p) {
			struct dv_pin *next = p->next;

			free(p);
			p = next;
		}
	}
	free(t->pins);
	t->pins = NULL;
	t->pin_buckets = t->npins = 0;
	pthread_mutex_destroy(&t->pin_lock);
	free(t->name);
	free(t->lock_key);
}

void dv_tier_free(struct dv_tier *t)
{
	if (t)
		t->ops->destroy(t);
}

/* The slot of @key's chain. Called with pin_lock held, buckets allocated. */
static struct dv_pin **pin_slot(struct dv_tier *t, uint64_t key,
				const char *hash)
{
	struct dv_pin **pp = &t->pins[key & (t->pin_buckets - 1)];

	while (*pp && ((*pp)->key != key || strcmp((*pp)->hash, hash) != 0))
		pp = &(*pp)->next;
	return pp;
}

/* Doubles the table (or makes it). Called with pin_lock held. */
static int pins_grow(struct dv_tier *t)
{
	size_t nb = t->pin_buckets ? t->pin_buckets * 2 : PINS_MIN;
	struct dv_pin **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < t->pin_buckets; i++) {
		struct dv_pin *p = t->pins[i];

		while (p) {
			struct dv_pin *next = p->next;

			p->next = b[p->key & (nb - 1)];
			b[p->key & (nb - 1)] = p;
			p = next;
		}
	}
	free(t->pins);
	t->pins = b;
	t->pin_buckets = nb;
	return 0;
}

static int pin_locked(struct dv_tier *t, const char *hash)
{
	uint64_t key = pin_key(hash);
	struct dv_pin **pp;

	/* A full table only chains longer: once made, growing may fail. */
	if (t->npins >= t->pin_buckets && pins_grow(t) && !t->pin_buckets)
		return -ENOMEM;
	pp = pin_slot(t, key, hash);
	if (!*pp) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			return -ENOMEM;
		(*pp)->key = key;
		snprintf((*pp)->hash, sizeof((*pp)->hash), "%s", hash);
		t->npins++;
	}
	(*pp)->count++;
	return 0;
}

/* @fn's result for @hash, run with pin_lock held. */
static int with_pin_lock(struct dv_tier *t,
			 int (*fn)(struct dv_tier *t, const char *hash),
			 const char *hash)
{
	int ret;

	pthread_mutex_lock(&t->pin_lock);
	ret = fn(t, hash);
	pthread_mutex_unlock(&t->pin_lock);
	return ret;
}

int dv_tier_pin(struct dv_tier *t, const char *hash)
{
	return with_pin_lock(t, pin_locked, hash);
}

void dv_tier_unpin(struct dv_tier *t, const char *hash)
{
	struct dv_pin **pp, *p;

	pthread_mutex_lock(&t->pin_lock);
	pp = t->pin_buckets ? pin_slot(t, pin_key(hash), hash) : NULL;
	p = pp ? *pp : NULL;
	if (p && --p->count == 0) {
		*pp = p->next;
		free(p);
		t->npins--;
	}
	pthread_mutex_unlock(&t->pin_lock);
}

/* Called with pin_lock held. 1 when pinned, else 0. */
static int pinned_locked(struct dv_tier *t, const char *hash)
{
	return t->pin_buckets && *pin_slot(t, pin_key(hash), hash);
}

bool dv_tier_is_pinned(struct dv_tier *t, const char *hash)
{
	return with_pin_lock(t, pinned_locked, hash) == 1;
}

int dv_tier_unless_pinned(struct dv_tier *t, const char *hash,
			  int (*fn)(struct dv_tier *t, const char *hash,
				    void *arg),
			  void *arg)
{
	int ret = -EBUSY;

	pthread_mutex_lock(&t->pin_lock);
	if (!pinned_locked(t, hash))
		ret = fn(t, hash, arg);
	pthread_mutex_unlock(&t->pin_lock);
	return ret;
}

/* The backends of this build, by config type. */
typedef int (*tier_create_fn)(const struct dv_tier_config *tc,
			      const struct dv_config *cfg,
			      struct dv_tier **out, char *err, size_t errlen);

static const struct {
	enum dv_tier_type type;
	tier_create_fn create;
} backends[] = {
	{ DV_TIER_TYPE_FOLDER, dv_folder_tier_new },
	{ DV_TIER_TYPE_RAM, dv_folder_tier_new },
	{ DV_TIER_TYPE_AZURE_BLOB, dv_azure_tier_new },
	{ DV_TIER_TYPE_GCS, dv_gcs_tier_new },
	{ DV_TIER_TYPE_S3, dv_s3_tier_new },
	{ DV_TIER_TYPE_STRIPE, dv_stripe_tier_new },
};

int dv_tier_new(const struct dv_tier_config *tc, const struct dv_config *cfg,
		struct dv_tier **out, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		if (backends[i].type == tc->type)
			return backends[i].create(tc, cfg, out, err, errlen);
	}
	snprintf(err, errlen, "tier '%s': no backend takes type '%s'",
		 tc->name ? tc->name : "?", dv_tier_type_name(tc->type));
	return -EINVAL;
}

/* ---- defaults of the optional ops ---- */

int dv_tier_def_open(struct dv_tier *t)
{
	return 0;
}

int dv_tier_def_open_object(struct dv_tier *t, const char *hash,
			    uint64_t size, struct dv_object *obj)
{
	return -ENOTSUP;
}

void dv_tier_def_close_object(struct dv_tier *t, struct dv_object *obj)
{
	if (obj->fd >= 0)
		close(obj->fd);
	obj->fd = -1;
}

ssize_t dv_tier_def_read(struct dv_tier *t, struct dv_object *obj,
			 void *buf, size_t len, uint64_t off)
{
	return -ENOTSUP;
}

int dv_tier_def_install(struct dv_tier *t, const char *hash, int src_fd,
			const char *src_path, uint64_t size, unsigned flags)
{
	return -ENOTSUP;
}

int dv_tier_def_download(struct dv_tier *t, const char *hash, uint64_t size,
			 struct dv_sink *sink)
{
	return -ENOTSUP;
}

int dv_tier_def_download_range(struct dv_tier *t, const char *hash,
			       uint64_t size, uint64_t off, uint64_t len,
			       void *buf)
{
	return -ENOTSUP;
}

int dv_tier_def_lock(struct dv_tier *t, const char *hash)
{
	return -ENOTSUP;
}

void dv_tier_def_unlock(struct dv_tier *t, const char *hash, int lock_fd)
{
}

int dv_tier_def_stage_open(struct dv_tier *t, const char *hash,
			   struct dv_staged *st)
{
	st->fd = -1;
	return -ENOTSUP;
}

void dv_tier_def_stage_discard(struct dv_tier *t, struct dv_staged *st)
{
}

int dv_tier_def_stage_resume(struct dv_tier *t, const char *hash,
			     struct dv_staged *st, bool *resumed)
{
	return -ENOTSUP;
}

int dv_tier_def_free_space(struct dv_tier *t, uint64_t bytes)
{
	return -ENOSPC;
}

int dv_tier_def_remove(struct dv_tier *t, const char *hash)
{
	return -ENOTSUP;
}

int dv_tier_def_usage(struct dv_tier *t, struct dv_tier_usage *u)
{
	memset(u, 0, sizeof(*u));
	return 0;
}

int dv_tier_def_scan(struct dv_tier *t, dv_tier_scan_fn fn, void *arg)
{
	return -ENOTSUP;
}

void dv_tier_def_describe(struct dv_tier *t, struct dv_tier_desc *d)
{
	snprintf(d->where, sizeof(d->where), "%s", t->ops->type);
	d->capacity = t->max_bytes;
}

/* Reads @obj whole into @md; -EBADMSG when it is not @size bytes. */
static int digest_object(struct dv_tier *t, struct dv_object *obj,
			 uint64_t size, EVP_MD_CTX *md)
{
	static const size_t chunk = 1 << 20;
	char *buf = malloc(chunk);
	uint64_t off = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (obj->fd < 0) {
			n = dv_tier_read(t, obj, buf, chunk, off);
		} else {
			n = pread(obj->fd, buf, chunk, (off_t)off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				n = -errno;
		}
		if (n <= 0) {
			ret = (int)n;
			break;
		}
		EVP_DigestUpdate(md, buf, (size_t)n);
		off += (uint64_t)n;
	}
	free(buf);
	return ret == 0 && off != size ? -EBADMSG : ret;
}

int dv_tier_def_check(struct dv_tier *t, const char *hash, uint64_t size,
		      const uint8_t sha256[32])
{
	struct dv_object obj = { .tier = t, .fd = -1 };
	uint8_t digest[32];
	unsigned int dlen = 0;
	EVP_MD_CTX *md;
	int ret;

	snprintf(obj.hash, sizeof(obj.hash), "%s", hash);
	ret = dv_tier_open_object(t, hash, size, &obj);
	if (ret)
		return ret;
	md = EVP_MD_CTX_new();
	ret = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : -ENOMEM;
	if (ret == 0)
		ret = digest_object(t, &obj, size, md);
	if (ret == 0)
		ret = EVP_DigestFinal_ex(md, digest, &dlen) == 1 ? 0 : -EIO;
	if (ret == 0 && memcmp(digest, sha256, 32) != 0)
		ret = -EBADMSG;
	EVP_MD_CTX_free(md);
	dv_tier_close_object(t, &obj);
	return ret;
}

int dv_tier_def_sweep(struct dv_tier *t, bool fix, dv_tier_leftover_fn fn,
		      void *arg)
{
	return 0;
}

void dv_tier_describe(struct dv_tier *t, struct dv_tier_desc *d)
{
	void (*line)(void *, enum dv_desc_line, const char *) = d->line;
	void *arg = d->arg;

	memset(d, 0, sizeof(*d));
	d->line = line;
	d->arg = arg;
	DV_TIER_OP(t, describe)(t, d);
}

void dv_tier_desc_line(const struct dv_tier_desc *d, enum dv_desc_line kind,
		       const char *fmt, ...)
{
	char text[1024];
	va_list ap;

	if (!d->line)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	d->line(d->arg, kind, text);
}
