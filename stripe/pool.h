/*
 * A stripe pool: the devices of one stripe tier, opened for O_DIRECT,
 * identified by their superblocks, and the state directory holding the
 * pool's index journal.
 *
 * Assembly. Devices are ordered by the index in their superblocks, not by
 * the config, so that renamed device nodes (/dev/sdb becoming /dev/sdc)
 * change nothing. A pool is reused when every configured device carries a
 * valid superblock of one pool, with the configured count and chunk size;
 * otherwise the devices (all accepted by discovery first) are formatted
 * into a new pool: signature areas zeroed, superblocks written, the old
 * pool's cached objects dropped.
 *
 * Ownership. Each device is opened with an exclusive flock (and O_EXCL for
 * block devices): a second daemon cannot open the same pool.
 *
 * The journal. Its header names the pool and a journal id; every
 * superblock names the journal id that owns the data. A journal that is
 * missing, damaged or another one (a state directory of another machine,
 * a pool reused under another state_dir) is replaced by a new empty one,
 * and the superblocks are pointed at it before any object is written.
 */
#ifndef DV_STRIPE_POOL_H
#define DV_STRIPE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "index.h"
#include "layout.h"

struct dv_stripe_pool {
	unsigned ndev;
	int fds[DV_STRIPE_MAX_DEVICES];          /* superblock order */
	char *paths[DV_STRIPE_MAX_DEVICES];
	struct dv_stripe_sb sb[DV_STRIPE_MAX_DEVICES];
	uint64_t chunk_bytes;
	uint64_t data_offset;
	char *state_dir;                         /* <base>/stripe-<pool id> */
	bool created;                            /* formatted by this open */
};

/*
 * Opens the @n devices @paths (already accepted by discovery) as a pool of
 * @chunk_bytes chunks whose state lives under @state_base, and loads or
 * starts its index into @ix. @name is the tier's, for messages. 0, or
 * -errno with a message in @err.
 */
int dv_stripe_pool_open(struct dv_stripe_pool *p, char *const *paths, size_t n,
			uint64_t chunk_bytes, const char *state_base,
			const char *name, struct dv_stripe_index *ix, char *err,
			size_t errlen);

/* Closes the devices. The index is the caller's to close. */
void dv_stripe_pool_close(struct dv_stripe_pool *p);

#endif
