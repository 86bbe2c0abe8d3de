/*
 * What fills a shard on a full miss: the interface between the hierarchy,
 * which calls it, and the origins (tiers/origin/), which implement it. Kept
 * apart from hierarchy.h so that an origin, and the namespace that uses
 * one, need not see the tier interface.
 */
#ifndef DV_FETCHER_H
#define DV_FETCHER_H

#include <stdint.h>

struct dv_chunks;
struct dv_sink;
struct dv_sink_tap;

/* What get_or_fetch needs to know of a shard. Strings are borrowed. */
struct dv_shard_ref {
	const char *hash;        /* [0-9a-f]{32,64} */
	uint64_t size;
	const uint8_t *sha256;   /* 32 bytes, or NULL: nothing to verify */
	const char *label;       /* for log lines, e.g. "demo/train/shard-3.tar" */
	const struct dv_sink_tap *tap; /* optional: sees a fill's bytes (sink.h) */
	const uint8_t *chunks_pin; /* 32 bytes: the chunk list's (chunks.h); or NULL */
};

/*
 * Writes the shard's bytes into @sink (dv_sink_write), and nothing else.
 * Returns 0 or -errno (-ENOENT, -EIO, -ETIMEDOUT, -EACCES…).
 */
struct dv_fetcher {
	int (*fetch)(void *arg, const struct dv_shard_ref *ref,
		     struct dv_sink *sink);
	void *arg;
	/*
	 * Optional, for a streaming fill (fill.h); both or neither. chunks:
	 * the shard's chunk list, checked against ref->chunks_pin, into
	 * *@out (dv_chunks_release); -EBADMSG or -EINVAL for a list that does
	 * not match or is malformed, else as fetch. fetch_range: bytes
	 * [@off, @off + @len) of the shard into @buf, unverified; -EPROTO
	 * when ranges cannot be had. Thread-safe.
	 */
	int (*chunks)(void *arg, const struct dv_shard_ref *ref,
		      struct dv_chunks *out);
	int (*fetch_range)(void *arg, const struct dv_shard_ref *ref,
			   uint64_t off, uint64_t len, void *buf);
};

#endif
