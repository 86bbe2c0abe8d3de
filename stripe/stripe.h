/*
 * The striped raw-device tier (`type: stripe`): shards striped in fixed
 * chunks over several block devices (or files), read with O_DIRECT through
 * io_uring. A local tier whose objects are not files: the hierarchy reads
 * them through ->read (promotion, FUSE reads). See stripe.c for the design.
 */
#ifndef DV_STRIPE_H
#define DV_STRIPE_H

#include "tiers/core/tier.h"
#include "discovery.h"
#include "engine.h"

extern const struct dv_tier_ops dv_tier_stripe_ops;

/*
 * Creates a stripe tier from its config entry. Touches no device: that is
 * ->open's job (discovery, assembly or format, index replay). 0, or -errno
 * with a message in @err.
 */
int dv_stripe_tier_new(const struct dv_tier_config *tc,
		       const struct dv_config *cfg, struct dv_tier **out,
		       char *err, size_t errlen);

/* The state directory of an opened stripe tier (its index journal). */
const char *dv_stripe_tier_state_dir(struct dv_tier *t);

/* What the reader of @obj, an object open in a stripe tier, did so far. */
void dv_stripe_object_stats(struct dv_object *obj,
			    struct dv_stripe_reader_stats *out);

/* Bytes of chunk buffers the readers of the tier @t hold now. */
uint64_t dv_stripe_tier_buffer_bytes(struct dv_tier *t);

/* Sets the tier's budget of reader buffers (all handles), for tests. */
void dv_stripe_tier_set_buffer_budget(struct dv_tier *t, uint64_t bytes);

/*
 * Test hook: when this environment variable names a file, and while that
 * file exists, an install that has written half its chunks (durably)
 * creates "<file>.stalled" and sleeps for a minute, so that a test can kill
 * the daemon in the middle of a stripe install.
 */
#define DV_STRIPE_STALL_ENV "DATAVO_TEST_STRIPE_STALL"

#endif
