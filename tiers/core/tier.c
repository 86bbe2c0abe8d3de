/*
 * The tier base: what every backend shares (name, capacity, counters, the
 * pins of open handles) and the dispatcher that creates a backend from its
 * config entry. Backends a build does not have are refused here, by type.
 */
#include "tier.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int dv_tier_pin(struct dv_tier *t, const char *hash)
{
	int ret;

	pthread_mutex_lock(&t->pin_lock);
	ret = pin_locked(t, hash);
	pthread_mutex_unlock(&t->pin_lock);
	return ret;
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

/* Called with pin_lock held. */
static bool pinned_locked(struct dv_tier *t, const char *hash)
{
	return t->pin_buckets && *pin_slot(t, pin_key(hash), hash);
}

bool dv_tier_is_pinned(struct dv_tier *t, const char *hash)
{
	bool pinned;

	pthread_mutex_lock(&t->pin_lock);
	pinned = pinned_locked(t, hash);
	pthread_mutex_unlock(&t->pin_lock);
	return pinned;
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
	snprintf(err, errlen,
		 "tier '%s': type '%s' is not available in this build of datavofs",
		 tc->name ? tc->name : "?", dv_tier_type_name(tc->type));
	return -ENOTSUP;
}
