/*
 * MOUNTPOINT/.datavo/status: a JSON snapshot of the mount's counters.
 *
 * What the numbers mean (the Prometheus exporter, metrics.c, uses the
 * same):
 *   - a tier's "bytes_served" grows by a shard's size each time an open is
 *     served from that tier. Reads are not counted one by one: with kernel
 *     passthrough and keep_cache most of them never reach the daemon;
 *   - "bytes_read" counts the bytes read through the daemon (no
 *     passthrough, not in the page cache), "bytes_read_io_uring" those of
 *     them whose requests came over FUSE over io_uring;
 *   - "fuse_transport" is io_uring or /dev/fuse, with the reason for
 *     /dev/fuse in "fuse_transport_reason"; "fuse_request_bytes" is the
 *     largest request the daemon asked the kernel for;
 *   - "bytes_saved" is what was served minus what the origin sent for
 *     fills: the egress a cache-less reader would have paid for;
 *   - "dollars_saved" is bytes_saved / 1e9 * dollars_per_gb.
 */
#ifndef DV_STATUS_H
#define DV_STATUS_H

#include <stddef.h>

#include "datavofs.h"

#define DV_VERSION "0.1"

/* The totals status and metrics both report. */
struct dv_status_totals {
	struct dv_hierarchy_stats hier;
	struct dv_ns_stats ns;
	uint64_t served;       /* sum of the tiers' bytes_served */
	uint64_t tier_errors;  /* sum of the tiers' errors */
	uint64_t saved;        /* egress bytes saved */
	double dollars;        /* estimated dollars saved */
};

/* Fills @out from the live counters of @fs. */
void dv_status_snapshot(struct dv_fs *fs, struct dv_status_totals *out);

/*
 * Returns a malloc'd, NUL-terminated JSON document describing @fs now:
 * origin, config, read path, FUSE transport, metrics address, tiers (use, capacity, free,
 * hits, misses, bytes), origin requests and bytes, fills, bytes and
 * dollars saved, errors by kind, open files. No secret is ever part of
 * it. NULL when out of memory.
 */
char *dv_status_json(struct dv_fs *fs, size_t *len);

#endif
