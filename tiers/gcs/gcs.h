/*
 * The Google Cloud Storage tier (type: gcs): one bucket shared by every
 * machine of a region, between their local tiers and the origin (the hierarchy's
 * cloud topology). Shards are objects <prefix>/<content_hash>.tar, spoken
 * to through the JSON API:
 *
 *   lookup    GET  /storage/v1/b/B/o/NAME?fields=size   (the metadata)
 *   download  GET  /storage/v1/b/B/o/NAME?alt=media     (Range to resume)
 *   install   POST /upload/storage/v1/b/B/o?uploadType=media&name=NAME
 *             below DV_GCS_RESUMABLE_THRESHOLD, else uploadType=resumable
 *             and PUTs of DV_GCS_CHUNK bytes (a multiple of 256 KiB)
 *
 * Where: the tier's endpoint, else $STORAGE_EMULATOR_HOST, else
 * https://storage.googleapis.com. Who: Application Default Credentials
 * (gcs_creds.h), resolved on first use; none when $STORAGE_EMULATOR_HOST
 * is set, as Google's client libraries do for the emulator.
 *
 * Errors: 404 is -ENOENT (a miss); 401 and 403 are -EACCES with a log line
 * that says access was denied (a 401 first gets one fresh token), never a
 * miss; 5xx, 408, 429, resets and timeouts are retried (http.retries, with
 * backoff), then -EIO or -ETIMEDOUT. Never evicts (R9).
 */
#ifndef DV_GCS_H
#define DV_GCS_H

#include "tiers/core/tier.h"

#define DV_GCS_API "https://storage.googleapis.com"
#define DV_GCS_RESUMABLE_THRESHOLD (8u << 20)
#define DV_GCS_CHUNK_UNIT (256u << 10)   /* resumable chunks are multiples */
#define DV_GCS_CHUNK (16u << 20)       /* as Go's client; buffered per upload */

extern const struct dv_tier_ops dv_tier_gcs_ops;

/* Creates a gcs tier from its config entry. Opens no connection. */
int dv_gcs_tier_new(const struct dv_tier_config *tc,
		    const struct dv_config *cfg, struct dv_tier **out,
		    char *err, size_t errlen);

/*
 * Sets the upload sizes of @t (tests): media below @threshold bytes, else
 * resumable in chunks of @chunk bytes (rounded down to a multiple of
 * DV_GCS_CHUNK_UNIT, at least one unit).
 */
void dv_gcs_tier_set_upload_sizes(struct dv_tier *t, uint64_t threshold,
				  uint64_t chunk);

#endif
