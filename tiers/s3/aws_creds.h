/*
 * AWS credentials, found as the AWS SDKs find them (the "default chain"),
 * first source that has them wins:
 *
 *   1. environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, and
 *      AWS_SESSION_TOKEN when temporary;
 *   2. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
 *      ~/.aws/credentials), then the config file (AWS_CONFIG_FILE, else
 *      ~/.aws/config), profile AWS_PROFILE or "default";
 *   3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (and
 *      AWS_ROLE_SESSION_NAME) through STS AssumeRoleWithWebIdentity, at
 *      AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else the regional STS;
 *   4. ECS container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
 *      (on 169.254.170.2) or _FULL_URI (https, or http to a loopback or
 *      ECS/EKS agent address), with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
 *      or AWS_CONTAINER_AUTHORIZATION_TOKEN as Authorization;
 *   5. EC2 instance metadata, IMDSv2 only (a session token first), at
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT or 169.254.169.254, unless
 *      AWS_EC2_METADATA_DISABLED=true.
 *
 * A source that is configured but fails (STS refuses the token, the ECS
 * agent answers 403) stops the chain with its error, as the SDKs do: the
 * operator gets that error, not a confusing one from a later source.
 *
 * Nothing is read until the first dv_aws_chain_get() (a mount never
 * waits for a metadata service). Credentials are cached; temporary ones
 * are fetched again when dv_http_refresh_at() says (DV_HTTP_REFRESH_AHEAD
 * seconds before they expire, or half-way through a shorter life), and if
 * that fails while the old ones are still valid, the old ones are used.
 * A failed resolution is remembered for DV_AWS_RETRY_AFTER seconds, so a
 * missing metadata service does not slow every read.
 *
 * Secrets (secret keys, session tokens, web identity tokens, container
 * authorization tokens) are never logged; log lines name the source only.
 * JSON answers (ECS, IMDS) are read with dv_json_get (tiers/net/json.h),
 * STS's XML by a small bounded scanner of the few elements needed.
 */
#ifndef DV_AWS_CREDS_H
#define DV_AWS_CREDS_H

#include <stddef.h>
#include <time.h>

#include "config/config.h"
#include "tiers/net/call.h"

#define DV_AWS_KEY_MAX 256
#define DV_AWS_TOKEN_MAX 8192
/* The most a refresh comes before Expiration: the network layer's policy. */
#define DV_AWS_REFRESH_AHEAD DV_HTTP_REFRESH_AHEAD
#define DV_AWS_RETRY_AFTER 10    /* s a failed resolution is remembered */
#define DV_AWS_DOC_MAX (64u << 10) /* largest answer of a token service */

struct dv_aws_creds {
	char access_key[DV_AWS_KEY_MAX];
	char secret_key[DV_AWS_KEY_MAX];
	char session_token[DV_AWS_TOKEN_MAX]; /* "" when not temporary */
	time_t expiration;                    /* 0: does not expire */
	const char *source;                   /* static: "environment"… */
};

struct dv_aws_chain;

/*
 * A new chain; @http (may be NULL) gives STS its timeouts and CA. Reads
 * nothing yet. 0 or -ENOMEM.
 */
int dv_aws_chain_new(const struct dv_http_config *http,
		     struct dv_aws_chain **out);

/* NULL is a no-op. Wipes the cached secrets. */
void dv_aws_chain_free(struct dv_aws_chain *c);

/*
 * Copies the current credentials into @out, resolving or refreshing them
 * first when needed. Thread-safe; callers wait while one resolves.
 * 0; -ENOKEY when no source has credentials; -EACCES when a source
 * refused (STS, ECS agent); -EIO, -ETIMEDOUT or -EPROTO (a bad answer)
 * when a configured source failed. Every failure is logged once per
 * resolution, naming the source.
 */
int dv_aws_chain_get(struct dv_aws_chain *c, struct dv_aws_creds *out);

/*
 * Forgets the cached credentials (after a server said they expired), so
 * that the next dv_aws_chain_get() resolves again.
 */
void dv_aws_chain_invalidate(struct dv_aws_chain *c);

/*
 * The region as the SDKs find it: AWS_REGION, AWS_DEFAULT_REGION, then
 * "region" in the config file's profile. 0 with @buf filled, or -ENOENT.
 */
int dv_aws_region(char *buf, size_t len);

/*
 * The <Code> of an AWS XML error body (e.g. "AccessDenied") into @out, or
 * "" when there is none or it is not a plain word. Error bodies may echo
 * the request, session token included: log this code, never the body.
 */
void dv_aws_error_code(const char *body, char *out, size_t cap);

/*
 * dv_aws_error_code of a failed answer's body: the error_code hook of
 * dv_http_call_ops for S3 and the token services.
 */
void dv_aws_http_error_code(const struct dv_http_response *resp, char *buf,
			    size_t len);

/* Wipes @c's secrets (before it goes out of scope). */
void dv_aws_creds_wipe(struct dv_aws_creds *c);

/* For tests: the clock the chain uses to judge expiry (NULL: time()). */
void dv_aws_chain_set_clock(struct dv_aws_chain *c, time_t (*now)(void));

/*
 * For tests: the host of AWS_CONTAINER_CREDENTIALS_RELATIVE_URI, which the
 * SDKs fix at 169.254.170.2. NULL restores it.
 */
void dv_aws_chain_set_ecs_host(struct dv_aws_chain *c, const char *host);

#endif
