/*
 * The namespace: datasets on the origin as a tree of directories and tar
 * shards. It reads datasets.json and each dataset's manifest.json (parsed
 * with libyaml, validated whole: a bad manifest is refused with a log line
 * and never half applied), caches them on disk under a state directory so
 * a remount works with the origin down (B7), and refreshes them on a TTL,
 * preparing the new tree fully before swapping it in.
 *
 * Inode numbers are stable across remounts: a directory's is derived from
 * its path, a shard's from its path and content hash, so a new revision of
 * a shard gets a new inode (and a fresh page cache), while an inode handed
 * to the kernel stays valid for as long as the kernel holds it.
 *
 * `<dataset>@<N>` (e.g. "train@1" inside "demo") pins revision N, read from
 * revisions/<N>.json on first lookup. A pinned revision stays loaded while
 * the kernel references one of its inodes (FUSE lookup counts, open
 * handles: dv_ns_lookup_ref(), dv_ns_ref(), dv_ns_forget()); of the others
 * the namespace keeps the pins_kept used last, and a later lookup loads an
 * evicted one again (disk cache first) under the same inode numbers.
 * The tree never fetches shard payload. All functions are thread-safe.
 */
#ifndef DV_NAMESPACE_H
#define DV_NAMESPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "tiers/origin/origin.h"

struct dv_manifest;

#define DV_NS_ROOT_INO 1
/*
 * Every other inode the namespace hands out is at least this: the FUSE
 * front may use 2 .. DV_NS_FIRST_INO - 1 for its own files (.datavo/).
 */
#define DV_NS_FIRST_INO 16
/*
 * The namespace never hands out an inode with this bit set: the write-back
 * areas (fs/writeback/) number their entries with it.
 */
#define DV_NS_FOREIGN_INO (1ULL << 63)

/* Unreferenced pinned revisions kept loaded by default (LRU). */
#define DV_NS_PINS_KEPT 64

enum dv_ns_kind { DV_NS_DIR, DV_NS_SHARD };

/* One entry, copied out to the caller. */
struct dv_ns_entry {
	uint64_t ino;
	enum dv_ns_kind kind;
	char name[256];
	uint64_t size;            /* shards */
	char hash[65];            /* shards: content_hash */
	uint8_t sha256[32];       /* shards */
	bool has_chunks;          /* shards: the manifest pins a chunk list */
	uint8_t chunks_pin[32];   /* shards, when has_chunks */
	char dataset[512];        /* shards and dataset dirs: "demo/train@1" */
	uint64_t revision;        /* shards */
	uint64_t index;           /* shards: the manifest's "index" */
	time_t mtime;             /* manifest time (stable) */
};

struct dv_namespace;

struct dv_ns_options {
	struct dv_origin *origin;   /* borrowed */
	const char *state_dir;      /* manifest cache directory (created);
				       NULL: no disk cache */
	unsigned ttl;               /* seconds between refreshes; 0: every
				       dv_ns_maybe_refresh() refreshes */
	unsigned pins_kept;         /* pinned revisions kept loaded that no
				       inode reference holds (the ones used
				       last); 0: DV_NS_PINS_KEPT */
};

/*
 * Loads the namespace: the cached copies first, then the origin. Works with
 * the origin down when a cache exists (B7). Fails only when neither gives a
 * dataset list (-EIO, -ENOENT…), with a message in @err.
 */
int dv_ns_new(const struct dv_ns_options *opt, struct dv_namespace **out,
	      char *err, size_t errlen);
void dv_ns_free(struct dv_namespace *ns);

/*
 * Refreshes from the origin if the TTL passed; keeps the old tree on failure.
 * Only one thread refreshes at a time; the others return at once and keep
 * reading the current tree, which is replaced in one step when the new one
 * is ready.
 */
void dv_ns_maybe_refresh(struct dv_namespace *ns);

/*
 * Looks up @name in directory @parent. 0, -ENOENT, -ENOTDIR. A first
 * lookup of a pin ("train@1") reads revisions/1.json from the disk cache or
 * the origin, and may then also fail with the origin's -EIO, -ETIMEDOUT…
 */
int dv_ns_lookup(struct dv_namespace *ns, uint64_t parent, const char *name,
		 struct dv_ns_entry *out);

/*
 * Kernel references to inodes: what keeps a pinned revision loaded. FUSE
 * counts one per entry replied (lookup, each readdirplus entry but "." and
 * ".."), the kernel gives them back with forget; an open handle is one
 * more. Only a pin's inodes are counted (every other version stays for the
 * life of the namespace); other inodes are accepted and ignored.
 *
 * dv_ns_lookup_ref() is dv_ns_lookup() that, on success, counts one
 * reference to out->ino in the same step: no eviction can come between.
 */
int dv_ns_lookup_ref(struct dv_namespace *ns, uint64_t parent,
		     const char *name, struct dv_ns_entry *out);

/*
 * Counts @n more references to @ino. The caller must know @ino to be
 * loaded: it holds a reference to it, or listed it just now in a directory
 * it holds a reference to (readdirplus, whose directory the kernel holds).
 */
void dv_ns_ref(struct dv_namespace *ns, uint64_t ino, uint64_t n);

/*
 * Gives back @n references to @ino (FUSE forget, a release). A pinned
 * revision left with none joins the kept ones; the one used least long
 * ago beyond pins_kept is evicted (its inodes answer -ENOENT until a
 * lookup loads it again). More than were counted is clamped, with one
 * warning per namespace.
 */
void dv_ns_forget(struct dv_namespace *ns, uint64_t ino, uint64_t n);

/*
 * Any inode handed out in this mount, but those of a pinned revision
 * evicted (which no reference held). 0 or -ENOENT.
 */
int dv_ns_getattr(struct dv_namespace *ns, uint64_t ino,
		  struct dv_ns_entry *out);

/*
 * Lists directory @ino from position @pos (0 = start): calls @fn for each
 * entry until it returns non-zero. Positions are stable for one listing.
 * "." and ".." are not listed, nor pins. @fn runs under the namespace's
 * read lock: it must not call back into the namespace. 0, -ENOENT, -ENOTDIR.
 */
typedef int (*dv_ns_fill_fn)(void *arg, const struct dv_ns_entry *e,
			     uint64_t next_pos);
int dv_ns_readdir(struct dv_namespace *ns, uint64_t ino, uint64_t pos,
		  dv_ns_fill_fn fn, void *arg);

/* Counters for status: datasets, shards, bad manifests refused, pins. */
struct dv_ns_stats {
	uint64_t datasets;
	uint64_t shards;
	uint64_t refreshes;
	uint64_t refresh_errors;
	uint64_t rejected_manifests;
	uint64_t pins_loaded;     /* pinned revisions in memory now */
	uint64_t pins_referenced; /* of which inode references hold */
	uint64_t pins_evicted;    /* since the namespace was made */
};
void dv_ns_stats(struct dv_namespace *ns, struct dv_ns_stats *out);

/*
 * Reads one file of the manifest cache the namespace keeps under its
 * state directory (<state>/origin/<relpath>: a one-line "datavo-cache/1
 * <etag>" header, then the document as the origin sent it). The document
 * goes to *@body (NUL-terminated; free() it), *@len bytes; its etag to
 * *@etag (may be NULL; gets NULL when none was cached); its fetch time to
 * *@mtime (may be NULL). 0, -ENOENT, -EBADMSG (not a cache file: damaged),
 * -EFBIG, -ENOMEM or -errno.
 */
int dv_ns_cache_file_read(const char *path, char **body, size_t *len,
			  char **etag, time_t *mtime);

/*
 * Called for each cached manifest: @m is borrowed for the call, NULL when
 * the file could not be parsed, @why then says why. Non-zero stops the walk.
 */
typedef int (*dv_ns_manifest_fn)(void *arg, const char *path,
				 const struct dv_manifest *m, const char *why);

/*
 * Calls @fn for every manifest cached under @base, the directory that holds
 * one state directory per origin (what the daemons of a machine share):
 * each dataset's manifest.json and pinned revisions/<N>.json. A missing
 * @base has none. Returns 0, -ENOMEM, or what @fn returned.
 */
int dv_ns_cached_manifests(const char *base, dv_ns_manifest_fn fn, void *arg);

#endif
