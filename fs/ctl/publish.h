/*
 * `datavoctl publish`: builds or updates an origin directory (docs/design.md
 * "Origin layout") from a folder of tar shards.
 *
 *   SRC_DIR/<name>.tar, sorted by name   → shard index 0 .. n-1
 *   ORIGIN/shards/<content_hash>.tar     hard link (or copy), mode 0644
 *   ORIGIN/shards/<content_hash>.chunks  its chunk list (chunks.h), pinned
 *                                        by the manifest's "chunks" digest
 *   ORIGIN/<dataset>/revisions/<N>.json  the new revision
 *   ORIGIN/<dataset>/manifest.json       the same document
 *   ORIGIN/datasets.json                 sorted, unique, with <dataset>
 *
 * Files are written in that order, each atomically (temporary file, fsync,
 * rename), so a reader never sees a manifest naming a missing shard. One
 * publisher at a time per origin (flock on ORIGIN/.publish.lock).
 *
 * Identities (docs/design.md, "Manifests"). Encoding: a string is a
 * u64 little-endian byte length then its bytes; an integer is a u64
 * little-endian; a list is its u64 count then its items.
 *
 *   manifest_ref = lowercase hex SHA-256 of
 *                  list of (string name, string sha256-bytes) of every
 *                  source tar, in name order (not the dataset name: the
 *                  same tars published under two names at one revision
 *                  share their shard files)
 *   content_hash = lowercase hex XXH3-128 (canonical, big-endian bytes) of
 *                  string manifest_ref (the 64 hex characters),
 *                  integer revision, integer shard index,
 *                  list of strings keys (sorted, unique),
 *                  then each sample id as a string, in tar order (the
 *                  last field, so it has no count)
 *
 * A sample id is a member's path up to the first '.' of its basename
 * ("a/000017.audio.wav" → "a/000017"); consecutive equal ids count once,
 * as the members of one sample follow each other. Only regular files are
 * members; ustar prefixes, GNU long names and pax paths are understood.
 *
 * A hard link shares the source's inode: a source tar rewritten in place
 * afterwards (cp onto it, open(O_TRUNC)) silently changes the published
 * shard too, which the daemon then refuses (sha256, B2). Replace source
 * files (write + rename), or publish with @copy. A copy is a reflink where
 * the filesystem can (btrfs, xfs): instant and safe.
 *
 * Publishing the same tars and keys again changes nothing ("unchanged"):
 * the current manifest is compared with the hashes recomputed at its
 * revision. Otherwise the revision is the current one + 1 (or 1), or the
 * one asked for, which must be newer than the current one.
 */
#ifndef DV_PUBLISH_H
#define DV_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dv_publish_opts {
	const char *dataset;       /* "voice/train" */
	uint64_t revision;         /* 0: the next one */
	const char *const *keys;   /* borrowed; may be NULL when nkeys is 0 */
	size_t nkeys;
	const char *src_dir;       /* holds the *.tar shards */
	const char *origin_dir;    /* created when missing */
	bool copy;                 /* always copy; default: hard link when the
				      source is on the same filesystem and
				      world-readable, else copy */
	uint32_t chunk_size;       /* of the chunk lists; 0: the default */
	bool no_chunks;            /* publish no chunk lists */
};

struct dv_publish_result {
	uint64_t revision;         /* published, or the current one */
	bool unchanged;            /* nothing to publish */
	size_t nshards;
	uint64_t bytes;            /* of all shards */
	size_t linked;             /* shard files hard-linked, */
	size_t copied;             /* copied, */
	size_t present;            /* already in ORIGIN/shards */
	char manifest_ref[65];
};

/*
 * Publishes @o->src_dir as a revision of @o->dataset. Returns 0 and fills
 * @res (may be NULL); or -errno with one line in @err: -EINVAL (bad
 * dataset, key, shard name or tar, revision not newer, existing documents
 * that do not parse), -ENOENT (no *.tar in SRC_DIR), -EEXIST (the revision
 * file exists), -EFBIG (manifest past DV_DOC_MAX), or I/O errors.
 */
int dv_publish(const struct dv_publish_opts *o, struct dv_publish_result *res,
	       char *err, size_t errlen);

/* One line for the CLI: "demo/train: revision 3, 8 shards, 1.2 MiB …". */
void dv_publish_describe(const struct dv_publish_opts *o,
			 const struct dv_publish_result *res, char *buf,
			 size_t len);

#endif
