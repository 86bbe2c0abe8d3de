/*
 * The azure_blob tier: a container in Azure Blob Storage (or Azurite) that
 * every VM of a region shares, between its local tiers and the origin.
 *
 *   <container_url>/<prefix>/<hash>.tar     one block blob per shard
 *
 * (prefix: letters, digits, - . _ ~ and /, so that no name needs encoding)
 *
 * lookup   Get Blob Properties (HEAD): 200 with the right length is a hit,
 *          404 a miss, 401/403 -EACCES (never a miss), else -EIO.
 * download Get Blob with Range, resumed where a broken transfer stopped.
 * install  (B5, on an upload worker) Put Blob up to DV_AZURE_PUT_BLOB_MAX
 *          bytes, above it Put Block in parallel + Put Block List; a blob
 *          that is already there with the right length is not sent again.
 *
 * Requests are authorized as azure_creds.h says (SAS, Shared Key or a
 * bearer token), resolved on first use: creating and opening the tier
 * makes no request and reads no credential. A query in container_url is
 * taken as a SAS token. `endpoint`, when set, is where requests go instead
 * of container_url's host (a blob service URL such as Azurite's
 * http://127.0.0.1:10000/devstoreaccount1); the container is then the last
 * path segment of container_url.
 *
 * Never evicts (R9); max_bytes only skips larger shards (the hierarchy).
 */
#ifndef DV_AZURE_H
#define DV_AZURE_H

#include "tiers/core/tier.h"

#define DV_AZURE_PUT_BLOB_MAX (64ull << 20) /* larger: block list */
#define DV_AZURE_BLOCK_BYTES (8u << 20)     /* at least; ≤ 50,000 blocks */
#define DV_AZURE_BLOCK_THREADS 4
#define DV_AZURE_VERSION "2021-08-06"       /* x-ms-version */

extern const struct dv_tier_ops dv_tier_azure_ops;

/* Creates an azure_blob tier from its config entry. No network. */
int dv_azure_tier_new(const struct dv_tier_config *tc,
		      const struct dv_config *cfg, struct dv_tier **out,
		      char *err, size_t errlen);

/*
 * The storage account a blob service or container URL names: the first
 * label of a "<account>.blob.<suffix>" host, or the first path segment of
 * a path-style URL (an IP address or localhost host, as emulators use).
 * *@account is a new string, or NULL when the URL names none. 0 or -ENOMEM.
 */
int dv_azure_url_account(const char *url, char **account);

#endif
