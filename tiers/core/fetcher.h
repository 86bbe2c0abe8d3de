/*
 * What fills a shard on a full miss: the interface between the hierarchy,
 * which calls it, and the origins (tiers/origin/), which implement it. Kept
 * apart from hierarchy.h so that an origin, and the namespace that uses
 * one, need not see the tier interface.
 */
#ifndef DV_FETCHER_H
#define DV_FETCHER_H

#include <stdint.h>

struct dv_sink;
struct dv_sink_tap;

/* What get_or_fetch needs to know of a shard. Strings are borrowed. */
struct dv_shard_ref {
	const char *hash;        /* [0-9a-f]{32,64} */
	uint64_t size;
	const uint8_t *sha256;   /* 32 bytes, or NULL: nothing to verify */
	const char *label;       /* for log lines, e.g. "demo/train/shard-3.tar" */
	const struct dv_sink_tap *tap; /* optional: sees a fill's bytes (sink.h) */
};

/*
 * Writes the shard's bytes into @sink (dv_sink_write), and nothing else.
 * Returns 0 or -errno (-ENOENT, -EIO, -ETIMEDOUT, -EACCES…).
 */
struct dv_fetcher {
	int (*fetch)(void *arg, const struct dv_shard_ref *ref,
		     struct dv_sink *sink);
	void *arg;
};

#endif
