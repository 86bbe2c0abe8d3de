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

#include "tiers/azure/azure.h"
#include "tiers/folder/folder.h"
#include "tiers/gcs/gcs.h"
#include "tiers/s3/s3.h"
#include "stripe/stripe.h"

/* One pinned hash: open handles of this process read it (B6). */
struct dv_pin {
	struct dv_pin *next;
	unsigned count;
	char hash[65];
};

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
	struct dv_pin *p = t->pins;

	while (p) {
		struct dv_pin *next = p->next;

		free(p);
		p = next;
	}
	t->pins = NULL;
	pthread_mutex_destroy(&t->pin_lock);
	free(t->name);
	free(t->lock_key);
}

void dv_tier_free(struct dv_tier *t)
{
	if (t)
		t->ops->destroy(t);
}

void dv_tier_pin(struct dv_tier *t, const char *hash)
{
	struct dv_pin *p;

	pthread_mutex_lock(&t->pin_lock);
	for (p = t->pins; p; p = p->next) {
		if (strcmp(p->hash, hash) == 0)
			break;
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (p) {
			snprintf(p->hash, sizeof(p->hash), "%s", hash);
			p->next = t->pins;
			t->pins = p;
		}
	}
	if (p)
		p->count++;
	pthread_mutex_unlock(&t->pin_lock);
}

void dv_tier_unpin(struct dv_tier *t, const char *hash)
{
	struct dv_pin **pp;

	pthread_mutex_lock(&t->pin_lock);
	for (pp = &t->pins; *pp; pp = &(*pp)->next) {
		struct dv_pin *p = *pp;

		if (strcmp(p->hash, hash) != 0)
			continue;
		if (--p->count == 0) {
			*pp = p->next;
			free(p);
		}
		break;
	}
	pthread_mutex_unlock(&t->pin_lock);
}

bool dv_tier_is_pinned(struct dv_tier *t, const char *hash)
{
	bool pinned = false;

	pthread_mutex_lock(&t->pin_lock);
	for (struct dv_pin *p = t->pins; p; p = p->next) {
		if (strcmp(p->hash, hash) == 0) {
			pinned = true;
			break;
		}
	}
	pthread_mutex_unlock(&t->pin_lock);
	return pinned;
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
