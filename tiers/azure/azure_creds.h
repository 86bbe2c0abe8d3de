/*
 * How an azure_blob tier authorizes its requests, found on first use and
 * kept for the life of the tier. The order, first that applies wins:
 *
 *   1. sas_token in shards.yaml                                  → SAS
 *   2. AZURE_STORAGE_KEY, for the account of the container URL (or
 *      AZURE_STORAGE_ACCOUNT when the URL names none)            → Shared Key
 *   3. AZURE_STORAGE_CONNECTION_STRING: AccountKey (→ Shared Key) or
 *      SharedAccessSignature (→ SAS)
 *   4. AZURE_STORAGE_SAS_TOKEN                                   → SAS
 *   5. DefaultAzureCredential's chain, for a bearer token (Microsoft Entra
 *      ID, scope https://storage.azure.com/.default):
 *      a. environment client secret: AZURE_TENANT_ID, AZURE_CLIENT_ID,
 *         AZURE_CLIENT_SECRET → POST <authority>/<tenant>/oauth2/v2.0/token;
 *      b. workload identity: AZURE_FEDERATED_TOKEN_FILE, AZURE_CLIENT_ID,
 *         AZURE_TENANT_ID → the same endpoint, the file's token as a
 *         client_assertion (re-read on every refresh: it rotates);
 *      c. managed identity, with managed_identity_client_id (else
 *         AZURE_CLIENT_ID) as client_id: App Service when IDENTITY_ENDPOINT
 *         and IDENTITY_HEADER are set, else IMDS at
 *         AZURE_POD_IDENTITY_AUTHORITY_HOST (default http://169.254.169.254).
 *      <authority> is AZURE_AUTHORITY_HOST (default
 *      https://login.microsoftonline.com); plain http is refused there
 *      except on a loopback host, since the request carries a secret.
 *
 * Tokens are cached and refreshed before they expire (5 minutes before, or
 * at half their life when shorter); a failed refresh keeps a token that is
 * still valid. After a failure with no usable token, the same error is
 * returned for a few seconds without asking again.
 *
 * Errors: -EACCES when a source refused us or none applies (an auth
 * failure: the tier must not treat it as a miss); -EIO when a token
 * service could not be reached or answered badly; -ENOMEM.
 *
 * Secrets (keys, SAS, client secrets, assertions, tokens) never reach a
 * log line: messages name sources and variables, never values.
 */
#ifndef DV_AZURE_CREDS_H
#define DV_AZURE_CREDS_H

#include "config/config.h"
#include "azure_sign.h"

enum dv_az_auth_kind {
	DV_AZ_AUTH_SAS,
	DV_AZ_AUTH_SHARED_KEY,
	DV_AZ_AUTH_BEARER,
};

struct dv_az_creds_opts {
	const char *tier;         /* name for log lines */
	const char *sas_token;    /* from shards.yaml, or NULL */
	const char *sas_source;   /* where it was written, for log lines;
				   * NULL: "sas_token in shards.yaml" */
	const char *account;      /* named by the container URL, or NULL */
	const char *mi_client_id; /* managed_identity_client_id, or NULL */
	const struct dv_http_config *http; /* may be NULL */
};

/* What one request needs; release with dv_az_auth_release(). */
struct dv_az_auth {
	enum dv_az_auth_kind kind;
	const char *sas;             /* SAS: borrowed from the creds */
	const struct dv_az_key *key; /* SHARED_KEY: borrowed from the creds */
	char *header;                /* BEARER: "Authorization: Bearer …" */
};

struct dv_az_creds;

/*
 * Copies @o. Reads no environment variable and makes no request: that
 * happens on the first dv_az_creds_get(). 0 or -ENOMEM.
 */
int dv_az_creds_new(const struct dv_az_creds_opts *o,
		    struct dv_az_creds **out);

/* Wipes and frees; NULL is a no-op. No dv_az_creds_get() may be running. */
void dv_az_creds_free(struct dv_az_creds *c);

/*
 * Fills @a for one request: resolves the source on the first call, gets
 * or refreshes a token when the source gives bearer tokens. Thread-safe;
 * callers wait while one of them refreshes. 0 or -errno (see above).
 */
int dv_az_creds_get(struct dv_az_creds *c, struct dv_az_auth *a);

/* Wipes and frees what dv_az_creds_get() gave. */
void dv_az_auth_release(struct dv_az_auth *a);

/*
 * The source in use, for log lines: "Shared Key (AZURE_STORAGE_KEY,
 * account 'x')", "bearer token (managed identity, IMDS)"… or "not yet
 * resolved". Never a secret. Writes into @buf and returns it.
 */
const char *dv_az_creds_describe(struct dv_az_creds *c, char *buf,
				 size_t len);

/* A hint for an operator after a 403: which setting to check. */
const char *dv_az_creds_hint(struct dv_az_creds *c);

#endif
