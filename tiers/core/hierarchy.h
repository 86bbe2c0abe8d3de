/*
 * The shard cache hierarchy (docs/design.md): an ordered list of tiers, fastest
 * first. get_or_fetch() is the whole read path of the cache:
 *
 *   R1  walk fastest → slowest; the first tier holding the shard serves it;
 *   R5  a hit never calls the fetcher;
 *   R3  a hit in a slower tier is promoted into the faster ones lacking it;
 *   R4  a remote hit is downloaded into the landing tier's .staging/,
 *       verified (B2), installed into the faster folder tiers, served locally;
 *   R2  a full miss runs the fetcher into a staging file and installs it
 *       into every tier that can hold it;
 *   B1  the per-hash lock of every lockable tier is taken before fetching,
 *       and the tiers are checked again once it is held.
 *
 * The landing tier is the topmost folder tier (R6 guarantees one).
 */
#ifndef DV_HIERARCHY_H
#define DV_HIERARCHY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fetcher.h"
#include "tier.h"
#include "upload.h"

struct dv_fill_config;
struct dv_hierarchy;

struct dv_hierarchy_stats {
	uint64_t fetches;        /* fetcher calls */
	uint64_t fetch_bytes;    /* bytes the fetcher delivered and kept */
	uint64_t fetch_errors;
	uint64_t verify_failures;
	uint64_t promotions;
	uint64_t fill_ns_total;
	/* Streaming fills (fill.h): ended ones and those running now. */
	uint64_t chunks_fetched; /* chunks fetched and verified */
	uint64_t chunk_waits;    /* reads that waited for a chunk */
	uint64_t streams;        /* fills streaming now (gauge) */
	uint64_t chunks_in_flight; /* ranged fetches running now (gauge) */
	uint64_t ttfb_ns_total;  /* open to first byte, summed over streams */
	uint64_t ttfb_count;
};

/* Fill latency buckets (seconds, upper bounds) for the histogram. */
#define DV_FILL_BUCKETS 12
extern const double dv_fill_bucket_bounds[DV_FILL_BUCKETS];

/*
 * Builds the hierarchy from @cfg: creates and opens every tier (which
 * cleans stale leftovers, B4). Fails when no folder tier exists (R6) or a
 * tier cannot be created; @err then says which and why.
 */
int dv_hierarchy_new(const struct dv_config *cfg, struct dv_hierarchy **out,
		     char *err, size_t errlen);

/*
 * Builds a hierarchy from tiers that are already created; takes them (they
 * are freed with the hierarchy, also on failure). Opens each. For tests and
 * tools. @verify as in the config.
 */
int dv_hierarchy_from_tiers(struct dv_tier **tiers, size_t ntiers,
			    enum dv_verify_mode verify,
			    struct dv_hierarchy **out, char *err,
			    size_t errlen);

void dv_hierarchy_free(struct dv_hierarchy *h);

size_t dv_hierarchy_ntiers(const struct dv_hierarchy *h);
struct dv_tier *dv_hierarchy_tier(const struct dv_hierarchy *h, size_t i);

/*
 * Returns the shard as a local object in @out (R1-R5, B1, B2). On success
 * @out is open (release with dv_object_release) and out->tier is the tier
 * that serves the read: a DIRECT_READ tier with an open fd, or a local
 * non-file tier. A cold shard with a chunk list (ref->chunks_pin, and a
 * fetcher with ranges) may come back still filling: out->fill is then
 * set, out->fd is its staging file, and a read must first
 * dv_fill_wait() for its bytes (fill.h). Errors: -EINVAL bad hash; -EIO fetch or verification
 * failed; -ENOSPC no tier accepted the shard; other -errno from the
 * fetcher (-ENOENT, -ETIMEDOUT, -EACCES); -EACCES also when a remote tier
 * refuses our credentials. Remote tiers are filled in the background (B5).
 * Thread-safe.
 */
int dv_hierarchy_get_or_fetch(struct dv_hierarchy *h,
			      const struct dv_shard_ref *ref,
			      const struct dv_fetcher *fetcher,
			      struct dv_object *out);

/*
 * How shards with a chunk list are filled (config's fill:): streaming on
 * or off, fetches per shard and per daemon, how long a read waits. Call
 * before the first get_or_fetch; the defaults are DV_FILL_*.
 */
void dv_hierarchy_set_fill(struct dv_hierarchy *h,
			   const struct dv_fill_config *cfg);

/* Fills streaming now, for status: calls @fn once for each. */
void dv_hierarchy_streams(struct dv_hierarchy *h,
			  void (*fn)(void *arg, struct dv_fill *f), void *arg);

/* Closes an object returned by get_or_fetch; unpins it (B6). */
void dv_object_release(struct dv_object *obj);

/* Reads from an object, whatever its tier. Bytes read or -errno. */
ssize_t dv_object_pread(struct dv_object *obj, void *buf, size_t len,
			uint64_t off);

/*
 * Which tier holds @hash with @size bytes now: the index of the fastest
 * one, or -ENOENT. Only looks: fetches, promotes and refreshes nothing (a
 * stripe tier's policy still counts the lookup as an access). A tier whose
 * lookup fails counts as not holding it. Thread-safe.
 */
ssize_t dv_hierarchy_holder(struct dv_hierarchy *h, const char *hash,
			    uint64_t size);

/* Waits until the background uploads (B5) queued so far are done. */
void dv_hierarchy_flush_uploads(struct dv_hierarchy *h);
void dv_hierarchy_upload_stats(struct dv_hierarchy *h,
			       struct dv_upload_stats *out);

/*
 * A snapshot of the hierarchy-wide counters. @fill_buckets (may be NULL)
 * gets per-bucket fill counts, not cumulative; the last one counts fills
 * slower than the largest bound.
 */
void dv_hierarchy_stats(struct dv_hierarchy *h,
			struct dv_hierarchy_stats *out,
			uint64_t fill_buckets[DV_FILL_BUCKETS + 1]);

/*
 * Time to first byte of streaming fills (from the open to the first read
 * answered), per bucket of dv_fill_bucket_bounds, like fill_buckets.
 */
void dv_hierarchy_ttfb(struct dv_hierarchy *h,
		       uint64_t buckets[DV_FILL_BUCKETS + 1]);

#endif
