/*
 * Internals of the hierarchy, shared by hierarchy.c (the walk, promotion,
 * whole fills) and stream.c (streaming fills of shards with a chunk
 * list). Private to tiers/core/.
 */
#ifndef DV_HIERARCHY_IMPL_H
#define DV_HIERARCHY_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "fill.h"
#include "hierarchy.h"

struct dv_stream;

struct dv_hierarchy {
	struct dv_tier **tiers;
	size_t n;
	enum dv_verify_mode verify;
	size_t landing;          /* topmost folder tier (R6) */
	size_t *lock_order;      /* lockable tiers, by lock_key, no twins */
	size_t nlocks;
	struct dv_uploader *up;  /* NULL without remote tiers (B5) */
	struct dv_hierarchy_stats stats;           /* atomic counters */
	uint64_t fill_buckets[DV_FILL_BUCKETS + 1]; /* last: +Inf */

	/* Streaming fills (stream.c). */
	struct dv_fill_config fill_cfg;
	struct dv_fill_limit fill_limit;
	pthread_mutex_t streams_lock;
	pthread_cond_t streams_cond;   /* a stream ended */
	struct dv_stream *streams;     /* protected by streams_lock */
	unsigned streams_alive;        /* started, done() not yet over; same */
	uint64_t ttfb_buckets[DV_FILL_BUCKETS + 1]; /* last: +Inf; atomic */
	uint64_t chunks_done;          /* of ended streams; atomic */
	uint64_t chunk_waits;          /* of ended streams; atomic */
	uint64_t ttfb_ns_total;        /* atomic */
	uint64_t ttfb_count;           /* atomic */
};

/* The locks of one get_or_fetch call. */
struct held_locks {
	size_t tier[16];
	int fd[16];
	size_t n;
};

const char *dv_hier_label(const struct dv_shard_ref *ref);
bool dv_hier_is_remote(const struct dv_tier *t);
void dv_hier_lock_all(struct dv_hierarchy *h, const char *hash,
		      struct held_locks *held);
void dv_hier_unlock_all(struct dv_hierarchy *h, const char *hash,
			struct held_locks *held);

/*
 * Installs the verified file @fd/@path into tiers [0, @limit) except
 * @skip: local tiers first, then remote ones from the installed copy.
 * @move_into, when < limit, is the tier whose staging file @path is: it is
 * renamed in last. Returns the topmost local tier that accepted, or -1.
 */
ssize_t dv_hier_install_all(struct dv_hierarchy *h,
			    const struct dv_shard_ref *ref, int fd,
			    const char *path, size_t limit, size_t move_into,
			    ssize_t skip);

/* Reserves @size bytes for staging file @st of tier @t. 0 or -ENOSPC. */
int dv_hier_reserve(struct dv_tier *t, struct dv_staged *st, uint64_t size);

double dv_hier_now(void);
void dv_hier_observe_fill(struct dv_hierarchy *h, double seconds);

/*
 * Where a streaming fill gets what it needs: the chunk list from @list's
 * chunks hook (the origin's: a small document), the bytes from @bytes's
 * fetch_range (copied into the fill: its arg must outlive it). On a full
 * miss both are the origin's and @remote is -1; for a hit in remote tier
 * @remote (R4), @bytes reads that tier (download_range), the shard is
 * installed only into the tiers above it, and its counters are the
 * promotion's.
 */
struct dv_stream_src {
	const struct dv_fetcher *list;
	const struct dv_fetcher *bytes;
	ssize_t remote;
};

/*
 * stream.c. With the locks @held, for a shard with a chunk list: starts a
 * streaming fill from @src and opens it into @out. 1 when it did (the
 * fill now owns @held: the caller must not unlock; out->fill is NULL if
 * the opener's descriptor could not be made); 0 when streaming does not
 * apply here (the caller fills whole; from a remote tier, also when the
 * chunk list cannot be had); -errno for the reader.
 */
int dv_hier_stream(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
		   const struct dv_stream_src *src, struct held_locks *held,
		   struct dv_object *out);

/* A fill of @ref->hash already streaming in this daemon, opened into @out. */
bool dv_hier_stream_join(struct dv_hierarchy *h,
			 const struct dv_shard_ref *ref, struct dv_object *out);

/* The streaming counters of dv_hierarchy_stats(). */
void dv_hier_stream_stats(struct dv_hierarchy *h,
			  struct dv_hierarchy_stats *out);

void dv_hier_streams_init(struct dv_hierarchy *h,
			  const struct dv_fill_config *cfg);
/* Cancels the streams and waits for them to end. */
void dv_hier_streams_release(struct dv_hierarchy *h);

#endif
