/*
 * What gcs.c (the tier, lookups, downloads) and gcs_upload.c (installs)
 * share. Not for other files.
 */
#ifndef DV_GCS_IMPL_H
#define DV_GCS_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "gcs.h"
#include "gcs_creds.h"
#include "tiers/net/call.h"
#include "tiers/net/http.h"

#define DV_GCS_META_MAX (64u << 10)   /* an object's JSON metadata */
#define DV_GCS_SHOWN_MAX 512          /* "gs://bucket/name" in log lines */
#define DV_GCS_WHO_MAX 256

struct gcs_tier {
	struct dv_tier base;
	struct dv_http http;
	char who[DV_GCS_WHO_MAX];   /* "tier 'name'": the log prefix */
	struct dv_http_denied denied; /* rate of "access denied" lines */
	char *api;          /* scheme://host[:port][/path], no trailing '/' */
	char *bucket;
	char *bucket_enc;   /* percent-encoded for a URL path */
	char *prefix;       /* "" or "team-a/" */
	char *project;      /* informational */
	struct dv_gcs_creds *creds; /* NULL: anonymous (the emulator) */
	uint64_t resumable_threshold;
	uint64_t chunk_bytes;
};

struct gcs_tier *dv_gcs_downcast(struct dv_tier *t);

/* Percent-encodes all but [A-Za-z0-9-._~] (so '/' too). NULL: no memory. */
char *dv_gcs_encode(const char *s);

/* The object name of @hash, percent-encoded. NULL: no memory. */
char *dv_gcs_object_enc(const struct gcs_tier *g, const char *hash);

/* "gs://bucket/<prefix><hash>.tar" for log lines. */
void dv_gcs_shown(const struct gcs_tier *g, const char *hash, char *buf,
		  size_t len);

/*
 * One attempt of a request. @auth is the Authorization header line, or
 * NULL for an anonymous tier. Returns ≥ 0 when done, or -errno
 * (dv_http_status_errno() of the answer, or perform's error).
 */
typedef int (*dv_gcs_attempt_fn)(struct gcs_tier *g, void *ctx,
				 const char *auth,
				 struct dv_http_response *resp);

/*
 * Runs @fn with a token through dv_http_call_run() (call.h): retries what
 * is transient, fetches the token again once after a 401. @what ("GET
 * gs://b/o") names it in log lines. Failures are logged, except -ENOENT;
 * access denied (rate-limited per tier) names the credentials in use. A
 * token that cannot be had ends the call with gcs_creds.c's error.
 * Returns @fn's result, failures mapped by dv_http_final_errno().
 */
int dv_gcs_request(struct gcs_tier *g, const char *what,
		   dv_gcs_attempt_fn fn, void *ctx,
		   struct dv_http_response *resp);

/*
 * The error_code hook of the GCS calls: the attempt's own detail (a 308
 * that kept nothing), else the reason of a JSON error body.
 */
void dv_gcs_error_code(const struct dv_http_response *resp, char *buf,
		       size_t len);

/* The size of the stored object @hash: 0, -ENOENT, -EACCES or -errno. */
int dv_gcs_stat(struct gcs_tier *g, const char *hash, uint64_t *size);

/* Parses the "size" of an object's JSON metadata. 0 or -EPROTO. */
int dv_gcs_meta_size(const char *json, size_t len, uint64_t *size);

/* The install op (gcs_upload.c). */
int dv_gcs_install(struct dv_tier *t, const char *hash, int src_fd,
		   const char *src_path, uint64_t size, unsigned flags);

#endif
