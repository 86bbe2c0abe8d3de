/*
 * The s3 tier (type: s3): a bucket shared by every VM of a region (seed
 * 000's cloud topology). A remote tier: lookup is a HEAD, download a GET
 * into the hierarchy's verifying sink (resumed with a Range when the
 * connection breaks), install an upload from the installed local file
 * (multipart above 64 MiB), run by the background upload queue (B5).
 * Objects are <prefix>/<content_hash>.tar. It never evicts (R9): max_bytes
 * only makes it skip larger shards.
 *
 * Settings: bucket (required), region, prefix, endpoint (S3-compatible
 * stores; path-style). Credentials: the AWS SDKs' chain (aws_creds.h),
 * resolved on first use; creating the tier touches no network.
 */
#ifndef DV_S3_H
#define DV_S3_H

#include "tiers/core/tier.h"

extern const struct dv_tier_ops dv_tier_s3_ops;

/* Creates an s3 tier from its config entry (no network). */
int dv_s3_tier_new(const struct dv_tier_config *tc,
		   const struct dv_config *cfg, struct dv_tier **out,
		   char *err, size_t errlen);

/*
 * Tests and tools: uploads larger than @threshold bytes go multipart in
 * parts of @part_size bytes (at least 5 MiB on real S3) sent by @threads
 * threads. Call before the tier is used.
 */
void dv_s3_tier_tune(struct dv_tier *t, uint64_t threshold,
		     uint64_t part_size, unsigned threads);

/* The object key of @hash in this tier: "<prefix>/<hash>.tar". */
int dv_s3_tier_key(struct dv_tier *t, const char *hash, char *buf,
		   size_t len);

#endif
