/*
 * A small S3 client shared by the s3 tier (s3.c) and the s3:// origin
 * (origin_s3.c): signed requests (sigv4.c) with credentials from the AWS
 * chain (aws_creds.c), over the libcurl wrapper (http.c).
 *
 * Addressing: with an endpoint (S3-compatible stores, emulators) requests
 * are path-style, <endpoint>/<bucket>/<key>; without one they go to AWS,
 * virtual-hosted (https://<bucket>.s3.<region>.amazonaws.com/<key>), or
 * path-style when the bucket name has a dot (TLS names cannot match it).
 *
 * Errors: 404 → -ENOENT; 401/403 and auth error codes → -EACCES, logged
 * with the bucket and the credential source, at most once per
 * DV_HTTP_DENIED_EVERY seconds per client (never a secret; error bodies
 * are reduced to their <Code>, since S3 echoes the canonical request, and
 * with it the session token, in some of them); 5xx, 429, 408, SlowDown,
 * resets and timeouts are retried by the network layer
 * (tiers/net/call.h), then -EIO or -ETIMEDOUT. Every attempt is signed
 * anew; redirects are never followed (a signed request carries the
 * session token).
 *
 * Payloads: GET and HEAD sign the empty body; a PUT streamed from a file
 * is UNSIGNED-PAYLOAD over https (TLS protects it) and carries its real
 * SHA-256 over plain http, as the AWS SDKs do; multipart parts and small
 * XML bodies always carry their real SHA-256.
 *
 * Nothing here touches the network before the first request.
 */
#ifndef DV_S3_CLIENT_H
#define DV_S3_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "aws_creds.h"
#include "tiers/net/call.h"
#include "tiers/net/http.h"
#include "tiers/net/http_range.h"
#include "tiers/net/http_sink.h"
#include "tiers/core/sink.h"

#define DV_S3_MULTIPART_THRESHOLD (64ull << 20) /* larger: multipart */
#define DV_S3_PART_SIZE (16ull << 20)           /* S3's minimum is 5 MiB */
#define DV_S3_PART_THREADS 4
#define DV_S3_MAX_PARTS 10000

struct dv_s3_config {
	const char *who;       /* "tier 'name'" or "origin": log lines */
	const char *bucket;
	const char *region;    /* NULL: AWS_REGION…, config file, us-east-1 */
	const char *endpoint;  /* NULL: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS */
	const struct dv_http_config *http; /* may be NULL */
};

struct dv_s3 {
	char *who;
	char *bucket;
	char *region;
	char *base;            /* scheme://host[:port], no trailing '/' */
	char *host;            /* the Host header */
	char *root;            /* raw path before the key: "/bucket/" or "/" */
	bool sign_payload;     /* plain http: PUT bodies carry their SHA-256 */
	struct dv_http http;
	struct dv_aws_chain *creds;
	/*
	 * Rate of "refused access" lines, one limiter per kind of request
	 * (HEAD, GET, writes): each needs its own permission, and a refused
	 * write must not hide behind refused reads.
	 */
	struct dv_http_denied denied[3];

	/* multipart tuning (tests lower them) */
	uint64_t multipart_threshold;
	uint64_t part_size;
	unsigned part_threads;
};

/*
 * Prepares @s. Reads the environment and the AWS config file (for the
 * region), opens no connection. 0, or -EINVAL / -ENOMEM with a message
 * in @err.
 */
int dv_s3_init(struct dv_s3 *s, const struct dv_s3_config *cfg, char *err,
	       size_t errlen);
void dv_s3_release(struct dv_s3 *s);

/* HEAD @key: 0 with *@size set, -ENOENT, -EACCES, -EIO, -ETIMEDOUT. */
int dv_s3_head(struct dv_s3 *s, const char *key, uint64_t *size);

/*
 * GET @key (@size bytes) into @sink, resuming with a Range after a
 * transient failure. 0 or -errno as above; the sink judges the bytes.
 */
int dv_s3_get(struct dv_s3 *s, const char *key, uint64_t size,
	      struct dv_sink *sink);

/*
 * GET bytes [@off, @off + @len) of @key (@size bytes) into @buf, resumed
 * where a broken attempt stopped (http_range.h). 0, -EINVAL for a range
 * outside the object, -EPROTO when S3 does not answer with exactly that
 * part, else as dv_s3_get; the caller verifies the bytes.
 */
int dv_s3_get_range(struct dv_s3 *s, const char *key, uint64_t size,
		    uint64_t off, uint64_t len, void *buf);

/*
 * GET a small object whole (at most @max bytes), with If-None-Match when
 * @etag is given: 1 when unchanged (*@body NULL), else 0 with a malloc'd
 * NUL-terminated *@body and, when S3 gave one, a malloc'd *@etag_out.
 */
int dv_s3_get_doc(struct dv_s3 *s, const char *key, const char *etag,
		  size_t max, char **body, size_t *len, char **etag_out);

/*
 * Uploads @size bytes of @fd (read with pread) as @key: one PUT up to
 * multipart_threshold, else a multipart upload whose parts go up in
 * parallel; a multipart upload that fails is aborted. 0 or -errno.
 */
int dv_s3_put_file(struct dv_s3 *s, const char *key, int fd, uint64_t size);

/* DELETE @key; a missing object is success. 0 or -errno as above. */
int dv_s3_delete(struct dv_s3 *s, const char *key);

/* ---- for s3_client.c and s3_upload.c ---- */

/* One signed request: the parts the signer needs, and the transfer. */
struct dv_s3_call {
	const char *method;
	const char *key;                     /* NULL: the bucket itself */
	const struct dv_sigv4_param *params;
	size_t nparams;
	const char *const *headers;          /* extra, signed; or NULL */
	const char *payload_sha256;          /* NULL: empty body */
	struct dv_http_request req;          /* body, callbacks, range */
	/* The answer's body, emptied before each attempt; or NULL. */
	struct dv_http_buf *buf;
	/* A GET into a sink, resumed with a Range; or NULL. */
	struct dv_http_sink_get *get;
	/* A GET of one part into a buffer (http_range.h); or NULL. */
	struct dv_http_range_get *range;
	bool conditional;                    /* If-None-Match: a 304 is 1 */
	/* Out: where the credentials of the last attempt came from. */
	const char *source;
};

/*
 * Runs @call through the network layer's retries, each attempt signed
 * anew with the current credentials. @verb names it in log lines ("GET",
 * "UploadPart"); a final -ENOENT is logged at @enoent_level (a missing
 * bucket always as an error). Returns 0 for a 2xx answer (@resp holds it),
 * 1 for a 304 when @call->conditional, else -errno as this file's header
 * says (a 304 that was not asked for is -EPROTO). An expired session
 * token invalidates the cached credentials and is retried.
 */
int dv_s3_run(struct dv_s3 *s, struct dv_s3_call *call, const char *verb,
	      enum dv_log_level enoent_level, struct dv_http_response *resp);

/* "s3://bucket/key" for log lines. */
void dv_s3_shown(const struct dv_s3 *s, const char *key, char *buf,
		 size_t len);

#endif
