/*
 * Google Application Default Credentials (ADC) for the GCS tier, found as
 * Google's client libraries find them, in this order:
 *
 *   1. $GOOGLE_APPLICATION_CREDENTIALS: a JSON key file, either
 *      "service_account" (an RS256-signed JWT, scope devstorage.read_write,
 *      aud = the file's token_uri, exchanged there for an access token:
 *      the jwt-bearer grant) or "authorized_user" (a refresh token, sent to
 *      its token_uri: the refresh_token grant);
 *   2. gcloud's well-known file, application_default_credentials.json in
 *      $CLOUDSDK_CONFIG, else in ~/.config/gcloud (same two types);
 *   3. the GCE metadata server (also GKE workload identity): host from
 *      $GCE_METADATA_HOST, else $GCE_METADATA_ROOT, else
 *      metadata.google.internal; GET /computeMetadata/v1/instance/
 *      service-accounts/default/token with "Metadata-Flavor: Google".
 *
 * Nothing happens at creation: the source is resolved and the first token
 * fetched on first use, so a mount costs no network. The token is cached
 * and fetched again shortly before it expires (dv_http_refresh_at(): the
 * one policy of every credential source); a failure is remembered for
 * DV_GCS_RETRY_AFTER seconds so that a dead token service does not make
 * every read wait, and a still valid token keeps being used meanwhile.
 *
 * Secrets (private keys, refresh tokens, client secrets, access tokens,
 * signed assertions) are never logged, at any level; memory holding them
 * is wiped before it is freed. Log lines name the source and the reason a
 * token service gave ("invalid_grant: Invalid JWT Signature.").
 */
#ifndef DV_GCS_CREDS_H
#define DV_GCS_CREDS_H

#include <openssl/evp.h>
#include <stddef.h>
#include <time.h>

#include "tiers/net/http.h"

#define DV_GCS_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"
#define DV_GCS_TOKEN_URI "https://oauth2.googleapis.com/token"
#define DV_GCS_METADATA_HOST "metadata.google.internal"
#define DV_GCS_METADATA_PATH \
	"/computeMetadata/v1/instance/service-accounts/default/token"
#define DV_GCS_ADC_FILE "application_default_credentials.json"
#define DV_GCS_JWT_LIFETIME 3600    /* s, as Google's libraries sign */
#define DV_GCS_RETRY_AFTER 10       /* s a failure is answered from memory */
#define DV_GCS_TOKEN_MAX 4096       /* bytes of an access token */
#define DV_GCS_KEYFILE_MAX (64u << 10)
#define DV_GCS_AUTH_HEADER_MAX (DV_GCS_TOKEN_MAX + 32)

struct dv_gcs_creds;

/*
 * A credential chain that requests tokens through @http (borrowed: must
 * outlive it). @label names it in log lines (the tier's name; copied).
 * Reads no file and opens no connection. 0 or -ENOMEM.
 */
int dv_gcs_creds_new(struct dv_http *http, const char *label,
		     struct dv_gcs_creds **out);

/* Wipes and frees; NULL is a no-op. No call may be running. */
void dv_gcs_creds_free(struct dv_gcs_creds *c);

/*
 * Writes "Authorization: Bearer <token>" into @buf (DV_GCS_AUTH_HEADER_MAX
 * is enough; the caller should wipe it after use). Resolves the source and
 * fetches or refreshes the token when needed. Thread-safe: one fetch at a
 * time, other callers wait for it. Returns 0, or:
 *   -EACCES     no credentials found, a bad key file, or the token service
 *               refused them (logged with the reason): never a bucket miss;
 *   -EIO, -ETIMEDOUT  the token service could not be reached or answered
 *               badly, after retries (logged);
 *   -ENOBUFS    @buf is too small; -ENOMEM.
 */
int dv_gcs_creds_header(struct dv_gcs_creds *c, char *buf, size_t len);

/* Drops the cached token (the bucket said 401): the next call fetches. */
void dv_gcs_creds_invalidate(struct dv_gcs_creds *c);

/*
 * Where the credentials come from, for log and status lines: "service
 * account NAME from FILE", "gcloud user credentials from FILE", "the GCE
 * metadata server at HOST", or "not resolved yet". Never a secret.
 */
void dv_gcs_creds_describe(struct dv_gcs_creds *c, char *buf, size_t len);

/* For tests: a clock to use instead of time(). */
void dv_gcs_creds_set_clock(struct dv_gcs_creds *c, time_t (*now)(void));

/*
 * The signed JWT of the jwt-bearer grant: base64url(header) "."
 * base64url(claims) "." base64url(RS256 signature), with iat = @now and
 * exp = @now + DV_GCS_JWT_LIFETIME; @key_id may be NULL (no "kid").
 * *@out is malloc'd (wipe it after use). 0, -EINVAL (not an RSA key, or
 * signing failed: logged), -ENOMEM.
 */
int dv_gcs_jwt_assertion(EVP_PKEY *key, const char *key_id,
			 const char *email, const char *scope,
			 const char *aud, time_t now, char **out);

/* base64url without padding of @len bytes into @out (NUL-terminated);
 * @outlen must be at least 4 * ceil(len / 3) + 1. Returns the length. */
size_t dv_gcs_base64url(const void *in, size_t len, char *out,
			size_t outlen);

#endif
