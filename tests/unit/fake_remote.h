/*
 * An in-memory remote tier for unit tests of the hierarchy's rules. It
 * stands in for a bucket: DV_TIER_REMOTE, download into a sink or a part
 * into a buffer, upload from a file, never evicts. Integration tests use real servers instead.
 */
#ifndef DV_FAKE_REMOTE_H
#define DV_FAKE_REMOTE_H

#include <stdbool.h>

#include "tiers/core/tier.h"

struct fake_remote_counts {
	unsigned lookups, downloads, uploads, upload_attempts;
	unsigned ranges;    /* download_range calls (atomic) */
};

struct dv_tier *fake_remote_new(const char *name, uint64_t max_bytes);
/* Stores @len bytes as @hash directly (as if another VM uploaded them). */
void fake_remote_put(struct dv_tier *t, const char *hash, const void *buf,
		     size_t len);
/* The stored bytes of @hash or NULL; *len set. */
const void *fake_remote_get(struct dv_tier *t, const char *hash, size_t *len);
struct fake_remote_counts *fake_remote_counts(struct dv_tier *t);
/* Lookups fail with @lookup_err, uploads with @upload_err (0: work), and
 * every upload first sleeps @upload_delay_ms. */
void fake_remote_faults(struct dv_tier *t, int lookup_err, int upload_err,
			unsigned upload_delay_ms);
/* Makes downloads (whole or parts) deliver a flipped byte. */
void fake_remote_corrupt(struct dv_tier *t, bool on);

#endif
