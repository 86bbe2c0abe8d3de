/*
 * Inside the azure_blob tier: what azure.c (requests, lookup, download)
 * and azure_put.c (uploads) share. Not for other files.
 */
#ifndef DV_AZURE_IMPL_H
#define DV_AZURE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "azure.h"
#include "azure_creds.h"
#include "tiers/net/call.h"
#include "tiers/net/http.h"

struct azure_tier {
	struct dv_tier base;
	char *base_url;        /* scheme://host[:port]/path of the container,
				* no query, no '/' at the end: never secret */
	const char *base_path; /* its path part, inside base_url */
	char *blob_prefix;     /* encoded "<prefix>/" or "" */
	bool plain_http;       /* base_url is http: (no bearer unless loopback) */
	bool loopback;
	struct dv_http http;
	struct dv_az_creds *creds;
	struct dv_http_denied denied; /* limits the detailed 401/403 lines */
};

struct azure_tier *dv_azure_downcast(struct dv_tier *t);

/* One request to the container; the tier adds date, version and auth. */
struct az_call {
	const char *method;
	const char *hash;             /* the blob <prefix><hash>.tar */
	const char *query;            /* "comp=block&…" or NULL */
	const char *headers[4];       /* more headers, NULL-terminated */
	const char *range;            /* "bytes=S-E" or NULL: signed, so ours */
	uint64_t expect_bytes;        /* of the answer, for the deadline */
	int body_fd;                  /* body: @body_fd_len bytes of this fd… */
	uint64_t body_fd_len;
	const void *body;             /* …or these */
	size_t body_len;
	dv_http_start_fn on_start;
	dv_http_body_fn on_body;
	void *arg;
};

/*
 * Makes one attempt at @c (signed now, with a fresh x-ms-date) and maps
 * the outcome: 0 for a 2xx answer, else -errno (-ENOENT for 404, -EACCES
 * for 401/403, -EAGAIN for 5xx/429/408, -EIO for 416, what
 * dv_http_perform() returned). Logs nothing but local refusals.
 */
int dv_azure_attempt(struct azure_tier *a, struct az_call *c,
		     struct dv_http_response *resp);

/*
 * Runs the attempts of @ops (with @ctx) through dv_http_call_run(): the
 * retries of http:, then one final line unless the call ended in -ENOENT
 * (a refusal names the credential in use, rate-limited by a->denied). @c
 * names the request in log lines. Returns 0 or -errno mapped by
 * dv_http_final_errno().
 */
int dv_azure_run(struct azure_tier *a, const struct az_call *c,
		 const struct dv_http_call_ops *ops, void *ctx,
		 struct dv_http_response *resp);

/* dv_azure_run() of dv_azure_attempt(@c): nothing to resume, a body
 * (fd or buffer) that is sent whole again. */
int dv_azure_request(struct azure_tier *a, struct az_call *c,
		     struct dv_http_response *resp);

/* "<base_url>/<prefix><hash>.tar" for log lines (no query: no SAS). */
void dv_azure_shown(struct azure_tier *a, const char *hash, char *buf,
		    size_t len);

/* Put Blob or the block list (azure_put.c): the tier's install op. */
int dv_azure_install(struct dv_tier *t, const char *hash, int src_fd,
		     const char *src_path, uint64_t size, unsigned flags);

/* The tier's lookup op (azure.c), used by install to skip known blobs. */
int dv_azure_lookup(struct dv_tier *t, const char *hash, uint64_t size);

#endif
