/*
 * The token services of DefaultAzureCredential's chain (azure_creds.h):
 * one request for one access token, and its JSON answer (tiers/net/json.h).
 * Which service to ask, caching and refreshing are azure_creds.c's.
 */
#ifndef DV_AZURE_TOKEN_H
#define DV_AZURE_TOKEN_H

#include <time.h>

#include "tiers/net/http.h"

#define DV_AZ_TOKEN_MAX (16u << 10)     /* bytes of one access token */
#define DV_AZ_TOKEN_DOC_MAX (64u << 10) /* a token service's answer */

/* The resource every token is for. */
#define DV_AZ_STORAGE_RESOURCE "https://storage.azure.com"
#define DV_AZ_STORAGE_SCOPE "https://storage.azure.com/.default"

enum dv_az_token_source {
	DV_AZ_TOKEN_CLIENT_SECRET, /* Entra ID, client credentials */
	DV_AZ_TOKEN_WORKLOAD,      /* Entra ID, federated client assertion */
	DV_AZ_TOKEN_APP_SERVICE,   /* managed identity, IDENTITY_ENDPOINT */
	DV_AZ_TOKEN_IMDS,          /* managed identity, instance metadata */
};

/* All strings borrowed. */
struct dv_az_token_req {
	enum dv_az_token_source source;
	const char *authority;       /* Entra ID: "https://host", no '/' at the end */
	const char *tenant;          /* Entra ID */
	const char *client_id;       /* NULL: the system-assigned identity */
	const char *secret;          /* CLIENT_SECRET */
	const char *assertion_file;  /* WORKLOAD: read on every request */
	const char *endpoint;        /* APP_SERVICE: IDENTITY_ENDPOINT;
				      * IMDS: scheme and host */
	const char *identity_header; /* APP_SERVICE: IDENTITY_HEADER */
};

struct dv_az_token {
	char *access_token;  /* a secret: dv_az_token_release() wipes it */
	time_t obtained;     /* wall clock */
	time_t expires;      /* wall clock */
};

/*
 * Asks the service of @r for a token, retrying transient failures
 * (@h->retries times, with backoff). @tier names the tier in log lines.
 * 0, -EACCES (the service refused: bad secret, unknown client, no identity
 * assigned), -EIO (unreachable, 5xx, an answer that is not a token),
 * -ENOMEM.
 */
int dv_az_token_fetch(struct dv_http *h, const char *tier,
		      const struct dv_az_token_req *r, struct dv_az_token *out);

void dv_az_token_release(struct dv_az_token *t);

/*
 * Reads a token service's JSON answer (@text, @len bytes) into @out;
 * @now is the wall clock. 0, or -EPROTO when it is not a JSON object with
 * an access_token and a lifetime (expires_in, or expires_on as epoch
 * seconds). On error, @why (if not NULL) gets the service's "error" and
 * "error_description" when present, else the reason.
 */
int dv_az_token_parse(const char *text, size_t len, time_t now,
		      struct dv_az_token *out, char *why, size_t whylen);

const char *dv_az_token_source_name(enum dv_az_token_source s);

#endif
