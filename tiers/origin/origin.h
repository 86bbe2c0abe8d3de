/*
 * The origin: where datasets are published (docs/design.md "Origin layout").
 *
 *   ORIGIN/datasets.json, ORIGIN/<dataset>/manifest.json,
 *   ORIGIN/<dataset>/revisions/<N>.json, ORIGIN/shards/<content_hash>.tar
 *
 * Kinds: http:// and https:// (libcurl, http.c), file:// or an absolute path
 * (local disk, NFS), s3://bucket/prefix (signed, origin_s3.c). Each kind is
 * an ops table; dv_origin_new() picks one from the URL. The origin fetcher of the hierarchy is dv_origin_fetcher().
 */
#ifndef DV_ORIGIN_H
#define DV_ORIGIN_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "tiers/core/fetcher.h"

struct dv_origin;

/* Largest document (datasets.json, manifest) accepted: 64 MiB. */
#define DV_DOC_MAX (64u << 20)

struct dv_origin_ops {
	const char *kind;
	/*
	 * Reads the document at @relpath (e.g. "voice/train/manifest.json"),
	 * which dv_origin_get_doc() checked, into outputs it cleared.
	 * When @etag is not NULL and the origin says it did not change,
	 * returns 1 and leaves *@body NULL. Else 0 with a NUL-terminated
	 * *@body of *@len bytes (malloc'd, caller frees) and, when the origin
	 * gives one, a new *@etag_out (malloc'd) or NULL. -ENOENT when absent,
	 * -EFBIG past DV_DOC_MAX, -EACCES, -ETIMEDOUT, -EIO.
	 */
	int (*get_doc)(struct dv_origin *o, const char *relpath,
		       const char *etag, char **body, size_t *len,
		       char **etag_out);
	/*
	 * Streams shards/<hash>.tar into @sink (which verifies size and
	 * sha256). Retries transient failures, resuming where it stopped.
	 * 0 or -errno.
	 */
	int (*fetch_shard)(struct dv_origin *o, const char *hash,
			   uint64_t size, struct dv_sink *sink);
	/*
	 * Reads bytes [@off, @off + @len) of shards/<hash>.tar, an object of
	 * @size bytes, into @buf: one ranged GET, retried and resumed like
	 * fetch_shard. Checks nothing but the length: the caller verifies
	 * (a chunk list, chunks.h). 0, or -EPROTO when the origin does not
	 * serve that range (it ignored the Range: the caller fetches the
	 * shard whole), -ENOENT, -EACCES, -ETIMEDOUT, -EIO. Thread-safe.
	 * May be NULL: the origin has no ranged reads.
	 */
	int (*fetch_range)(struct dv_origin *o, const char *hash,
			   uint64_t size, uint64_t off, uint64_t len,
			   void *buf);
	/*
	 * Frees what the backend keeps beside struct dv_origin, which its
	 * own struct embeds first; dv_origin_free() then frees ->url and
	 * the whole struct. May be NULL.
	 */
	void (*release)(struct dv_origin *o);
};

struct dv_origin {
	const struct dv_origin_ops *ops;
	char *url;                /* as given, without credentials */
	uint64_t requests;        /* shard fetches started (atomic) */
	uint64_t bytes;           /* shard bytes received (atomic) */
	uint64_t errors;          /* failed requests (atomic) */
};

/*
 * Creates the origin for @url: http(s)://…, file://… or /abs/path. @http
 * may be NULL for defaults. Does not contact the origin. 0, or -EINVAL with
 * a message in @err for an unsupported or malformed URL.
 */
int dv_origin_new(const char *url, const struct dv_http_config *http,
		  struct dv_origin **out, char *err, size_t errlen);
void dv_origin_free(struct dv_origin *o);

/*
 * ->get_doc, for a @relpath that dv_origin_relpath_ok() accepts (else
 * -EINVAL, logged); the outputs are cleared first.
 */
int dv_origin_get_doc(struct dv_origin *o, const char *relpath,
		      const char *etag, char **body, size_t *len,
		      char **etag_out);

/* A fetcher for dv_hierarchy_get_or_fetch() that reads from @o. */
void dv_origin_fetcher(struct dv_origin *o, struct dv_fetcher *out);

#endif
