/*
 * Origin documents: datasets.json and manifests (docs/design.md "Origin layout",
 * "Manifest (JSON)").
 *
 * Both are JSON, read with libyaml's event parser (JSON is YAML's flow
 * style): a stream of events, so a large manifest never becomes a tree of
 * nodes in memory, and nothing here scans JSON by hand. JSON types are
 * enforced: strings must be quoted, integers must be plain digits.
 *
 * A document is validated whole before anything is returned: on any
 * violation the parser returns -EINVAL and one line in @err saying where
 * ("shard 3: name '../x.tar' is not a valid name"), and no partial result.
 * Unknown keys are tolerated (skipped), at any level.
 *
 * A parsed manifest is immutable and compact: shards are fixed-size records
 * sorted by name, names live in one arena (about 140 bytes per shard).
 *
 * Also here: the atomic document writer shared by the publisher and the
 * namespace's on-disk cache.
 */
#ifndef DV_MANIFEST_H
#define DV_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#define DV_MANIFEST_FORMAT "datavo-manifest/1"

/* Bounds: a document beyond them is refused, never allocated for. */
#define DV_MANIFEST_MAX_SHARDS 10000000u
#define DV_MANIFEST_MAX_KEYS 1024u
#define DV_MAX_DATASETS 100000u
#define DV_NAME_MAX 255u         /* shard name, key, manifest_ref (bytes) */
#define DV_DATASET_MAX 400u      /* dataset name, with its '/' (bytes) */

struct dv_manifest_shard {
	uint64_t size;
	uint64_t index;          /* as published */
	uint32_t name_off;       /* NUL-terminated, in dv_manifest.names */
	uint8_t name_len;
	char hash[65];           /* content_hash, [0-9a-f]{32,64} */
	bool has_chunks;         /* pinned chunk list: dv_manifest_chunks_pin() */
	uint8_t sha256[32];
};

struct dv_manifest {
	char *dataset;
	uint64_t revision;
	char *manifest_ref;      /* "" when absent */
	char **keys;             /* as published; nkeys of them */
	size_t nkeys;
	struct dv_manifest_shard *shards;   /* sorted by name, unique */
	size_t nshards;
	char *names;             /* the name arena */
};

/*
 * Parses and validates a manifest of @len bytes (NUL not required). When
 * @dataset is not NULL, the manifest's "dataset" must equal it. Returns 0
 * with a new manifest in *@out (dv_manifest_free), -EINVAL with a reason in
 * @err, or -ENOMEM.
 */
int dv_manifest_parse(const char *text, size_t len, const char *dataset,
		      struct dv_manifest **out, char *err, size_t errlen);
void dv_manifest_free(struct dv_manifest *m);

static inline const char *dv_manifest_name(const struct dv_manifest *m,
					   const struct dv_manifest_shard *s)
{
	return m->names + s->name_off;
}

/*
 * The SHA-256 that pins the chunk list of @s (chunks.h), when
 * s->has_chunks: 32 bytes kept after the name in the arena, so shards
 * without a list cost nothing more.
 */
static inline const uint8_t *dv_manifest_chunks_pin(const struct dv_manifest *m,
						    const struct dv_manifest_shard *s)
{
	return (const uint8_t *)m->names + s->name_off + s->name_len + 1;
}

/* The shard named @name, or NULL. O(log n). */
const struct dv_manifest_shard *dv_manifest_find(const struct dv_manifest *m,
						 const char *name);

/* Position of the shard named @name in m->shards, or -1. */
ssize_t dv_manifest_find_pos(const struct dv_manifest *m, const char *name);

/*
 * Parses datasets.json ({"datasets": [...]}). Every name must be valid
 * (dv_valid_dataset_name); duplicates are merged. Returns 0 with a sorted,
 * unique, NULL-terminated array in *@out (dv_datasets_free) and its length
 * in *@n; -EINVAL with a reason in @err; -ENOMEM.
 */
int dv_datasets_parse(const char *text, size_t len, char ***out, size_t *n,
		      char *err, size_t errlen);
void dv_datasets_free(char **names);

/*
 * A dataset name: parts separated by single '/', each dv_valid_name_part()
 * (never "." or "..") of at most DV_NAME_MAX bytes, at most DV_DATASET_MAX
 * bytes in all, no leading or trailing '/'.
 */
bool dv_valid_dataset_name(const char *s);

/*
 * Writes @iov to @path atomically: a temporary file in the same directory,
 * fchmod @mode (umask does not apply; 0: 0666 less the umask), fsync,
 * rename, fsync of the directory. When @mtime is not 0 the file gets that
 * modification time.
 * The directory must exist. 0 or -errno; no temporary file is left behind.
 */
int dv_doc_write_atomic(const char *path, const struct iovec *iov, int iovcnt,
			mode_t mode, time_t mtime);


/*
 * Reads a whole regular file of at most @max bytes into a NUL-terminated
 * malloc'd buffer. 0, -EFBIG past @max, or -errno (-ENOENT…). *@mtime
 * (when not NULL) gets the file's modification time.
 */
int dv_doc_read(const char *path, size_t max, char **out, size_t *len,
		time_t *mtime);

#endif
