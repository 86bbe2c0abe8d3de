/*
 * AWS Signature Version 4 (header auth), in the project's own code with
 * OpenSSL's HMAC and SHA-256.
 *
 * The signer builds the request's path and query itself, from raw
 * (unencoded) parts, so that what is sent and what is signed are the same
 * bytes: every byte but the unreserved ones (A-Z a-z 0-9 - . _ ~) is
 * percent-encoded (in the path '/' is kept), and the query is sorted by
 * encoded name, then value. The path is encoded once and never normalized,
 * as S3 wants (the generic test suite's normalize-path cases do not apply).
 *
 * libcurl 7.88's CURLOPT_AWS_SIGV4 gets unsorted queries, '/' in query
 * values and a bare "?uploads" wrong; that is why this file exists.
 *
 * Not here: where credentials come from (aws_creds.c), S3 (s3_client.c).
 */
#ifndef DV_SIGV4_H
#define DV_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#define DV_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define DV_SIGV4_EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define DV_SIGV4_MAX_HEADERS 16 /* caller headers per request */

/* Borrowed strings; @session_token may be NULL or "". */
struct dv_sigv4_key {
	const char *access_key;
	const char *secret_key;
	const char *session_token;
};

/* One query parameter, raw (not encoded). @value NULL is "". */
struct dv_sigv4_param {
	const char *name;
	const char *value;
};

struct dv_sigv4_request {
	const char *method;                 /* "GET", "PUT"… */
	const char *host;                   /* the Host header's value */
	const char *path;                   /* raw, starts with '/' */
	const struct dv_sigv4_param *params;
	size_t nparams;
	/*
	 * "Name: value" headers the caller sends; all are signed. At most
	 * DV_SIGV4_MAX_HEADERS. Must not include Host, x-amz-date,
	 * x-amz-content-sha256, x-amz-security-token or Authorization.
	 */
	const char *const *headers;
	/* Hex SHA-256 of the body, or UNSIGNED-PAYLOAD; NULL: empty body. */
	const char *payload_sha256;
	/* Send and sign x-amz-content-sha256 (S3 requires it). */
	bool content_sha256_header;
};

struct dv_sigv4_result {
	char *path;        /* encoded path for the URL */
	char *query;       /* encoded, sorted query for the URL; "" if none */
	/*
	 * Headers to add to the request (NULL-terminated): Host, x-amz-date,
	 * x-amz-content-sha256 when asked, x-amz-security-token when there is
	 * a session token, Authorization. They hold secrets: never log them.
	 */
	char *headers[6];
	/* The canonical request. Holds the session token: never log it. */
	char *canonical;
	char signature[65];
};

/*
 * Signs @req made at @when for @service in @region with @key. Fills @out
 * (release it with dv_sigv4_result_release, also on failure). 0, -EINVAL
 * (a malformed header or too many), or -ENOMEM.
 */
int dv_sigv4_sign(const struct dv_sigv4_key *key, const char *region,
		  const char *service, time_t when,
		  const struct dv_sigv4_request *req,
		  struct dv_sigv4_result *out);

void dv_sigv4_result_release(struct dv_sigv4_result *r);

/*
 * Percent-encodes @s as SigV4's UriEncode does; '/' is kept when
 * @keep_slash. A new string, or NULL when out of memory.
 */
char *dv_sigv4_uri_encode(const char *s, bool keep_slash);

/* Lower-case hex SHA-256 of @len bytes into @out (65 bytes). */
void dv_sigv4_sha256_hex(const void *buf, size_t len, char out[65]);

#endif
