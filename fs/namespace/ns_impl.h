/*
 * Internals of the namespace (namespace.h), shared by its three files:
 *   namespace.c  the tree: building, refreshing, lookup, readdir, the API;
 *   ns_inodes.c  stable inode numbers, the inode table, manifest versions;
 *   ns_cache.c   documents, from the on-disk cache or the origin;
 *   ns_pins.c    pins (<dataset>@<N>): loads, and misses remembered;
 *   ns_refs.c    kernel references to a pin's inodes, and the LRU of the
 *                pins no reference holds (eviction).
 * Private to the namespace: nothing else includes this header.
 *
 * Locking: "under the write lock" / "under the read lock" mean ns->lock.
 * ns->ref_mutex (ns_refs.c) is taken inside either, never the other way.
 */
#ifndef DV_NS_IMPL_H
#define DV_NS_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <xxhash.h>

#include "namespace.h"

#define DIR_IDX UINT32_MAX        /* an islot of a directory */

struct dir;                       /* a directory of one tree (namespace.c) */
struct tree;                      /* one immutable tree (namespace.c) */
struct dv_manifest;
struct pin_note;                  /* ns_pins.c */

/* A directory ever shown. */
struct dirinfo {
	uint64_t ino;
	char *path;               /* "" root, "demo/train", "demo/train@1" */
	const char *name;         /* last part of path */
	struct dsver *pin;        /* a pin's manifest while loaded;
				     protected by lock */
	struct dir *cur;          /* in the current tree; protected by lock */
	time_t mtime;             /* protected by lock */
};

/*
 * One accepted manifest. Immutable once committed, but for a pin's
 * reference counts. A dataset's versions stay until dv_ns_free(); a pin's
 * is evicted (under the write lock) once no reference holds it and
 * ns->pins_kept others were used later.
 */
struct dsver {
	struct dv_manifest *m;
	char *path;               /* "demo/train" or "demo/train@1" */
	uint64_t *inos;           /* per shard of m */
	uint32_t id;              /* in ns->vers once committed */
	bool committed;
	time_t mtime;
	XXH128_hash_t digest;     /* of the raw document */
	/* Pins only (refs != NULL); protected by ns->ref_mutex: */
	struct dirinfo *pin_dir;  /* set by the commit */
	uint64_t *refs;           /* per shard: kernel references */
	uint64_t dir_refs;        /* to pin_dir's inode */
	uint64_t held;            /* the sum of refs[] and dir_refs */
	bool idle;                /* held == 0: in the LRU of ns->idle */
	struct dsver *idle_prev, *idle_next;
};

struct islot {
	uint64_t ino;             /* 0: free */
	uint32_t owner;           /* ns->dirs[] or ns->vers[] */
	uint32_t idx;             /* shard, or DIR_IDX */
};

struct dv_namespace {
	struct dv_origin *origin;
	char *state_dir;
	unsigned ttl;
	pthread_rwlock_t lock;
	pthread_mutex_t refresh_mutex;  /* one refresher at a time */
	pthread_mutex_t pin_mutex;      /* protects pin_notes */
	pthread_cond_t pin_cond;        /* a pin load ended */
	struct pin_note *pin_notes;     /* DV_NS_PIN_NOTES: loads in flight,
					   recent misses (ns_pins.c) */
	pthread_mutex_t ref_mutex;      /* protects pins' counts and idle */
	struct dsver *idle_head;        /* the pin used least long ago */
	struct dsver *idle_tail;
	size_t nidle;
	size_t pins_kept;
	bool warned_forget;             /* protected by ref_mutex */
	uint64_t pins_loaded;           /* atomic; changed under the lock */
	uint64_t pins_held;             /* atomic */
	uint64_t pins_evicted;          /* atomic */
	struct tree *cur;               /* protected by lock; replaced only
					   under refresh_mutex, which may
					   read it without the lock */
	struct islot *slots;            /* protected by lock */
	size_t nslots, slots_cap;
	struct dirinfo **dirs;          /* protected by lock */
	size_t ndirs, dirs_cap;
	struct dsver **vers;            /* protected by lock; NULL: evicted */
	size_t nvers, vers_cap;
	uint32_t *free_ids;             /* protected by lock: vers[] NULL */
	size_t nfree_ids, free_ids_cap;
	uint64_t next_refresh_ms;       /* atomic */
	uint64_t refreshes;             /* atomic */
	uint64_t refresh_errors;        /* atomic */
	uint64_t rejected;              /* atomic */
};

/* ---- ns_inodes.c ---- */

/*
 * Creates the root directory, inode DV_NS_ROOT_INO, before any tree.
 * 0 or -ENOMEM; on failure dv_ns_inodes_release() still frees what exists.
 */
int dv_ns_inodes_init(struct dv_namespace *ns);

/* Frees every dirinfo and committed dsver, and the inode table. */
void dv_ns_inodes_release(struct dv_namespace *ns);

/*
 * Takes committed @v out of the inode table: its shards' inodes are found
 * no more, and its id may be reused. @ns owns it no more: the caller frees
 * it. Under the write lock.
 */
void dv_ns_dsver_uncommit(struct dv_namespace *ns, struct dsver *v);

/* The slot of @ino, or NULL. Under the read lock. */
struct islot *dv_ns_slot_find(const struct dv_namespace *ns, uint64_t ino);

/*
 * Makes @v's shards findable by inode; from then on @ns owns @v. Under the
 * write lock. 0 or -ENOMEM (@v then stays uncommitted: the caller frees it).
 */
int dv_ns_dsver_commit(struct dv_namespace *ns, struct dsver *v);

/*
 * The dirinfo of @path, created on first sight; it lives as long as @ns.
 * Under the write lock. NULL on ENOMEM.
 */
struct dirinfo *dv_ns_dir_intern(struct dv_namespace *ns, const char *path);

/* Under the read lock: the pin's dirinfo, if loaded. */
struct dirinfo *dv_ns_pin_find(const struct dv_namespace *ns,
			       const char *pin_path);

/*
 * A new, uncommitted version of manifest @m for directory @path, with the
 * stable inode of each shard. Takes @m (also on failure). NULL on ENOMEM.
 */
struct dsver *dv_ns_dsver_new(struct dv_manifest *m, const char *path,
			      time_t mtime, XXH128_hash_t digest);
/* Frees an uncommitted version; NULL is a no-op. */
void dv_ns_dsver_free(struct dsver *v);

/* ---- namespace.c ---- */

/* @e describes directory @d. Under the read lock. */
void dv_ns_entry_dir(const struct dirinfo *d, struct dv_ns_entry *e);

/* True when @dataset is in the current datasets.json. Under the read lock. */
bool dv_ns_dataset_listed(const struct dv_namespace *ns, const char *dataset);

/* ---- ns_pins.c ---- */

/* Pins remembered at once, loads in flight and misses (a bound). */
#define DV_NS_PIN_NOTES 256

void dv_ns_pins_init(struct dv_namespace *ns);
void dv_ns_pins_release(struct dv_namespace *ns);

/*
 * Looks up pin @name ("train@12") in @parent, loading the revision from
 * the disk cache or the origin on first sight. Takes no lock on entry; the
 * origin is read with no lock held, one load per pin at a time (a second
 * lookup waits for the first). A revision found missing is remembered for
 * ns->ttl seconds (-ENOENT without asking the origin again). 0 with @out
 * filled, -ENOENT, or -errno of the load.
 */
int dv_ns_pin_lookup(struct dv_namespace *ns, const struct dirinfo *parent,
		     const char *name, struct dv_ns_entry *out, bool ref);

/* ---- ns_refs.c ---- */

void dv_ns_refs_init(struct dv_namespace *ns, unsigned pins_kept);
void dv_ns_refs_release(struct dv_namespace *ns);

/* Counts @n references to @ino, if a pin's. Under the read lock. */
void dv_ns_ref_locked(struct dv_namespace *ns, uint64_t ino, uint64_t n);

/*
 * Committed pin @v of directory @d is loaded: counts it, and with @ref
 * one reference to @d's inode, else it joins the idle ones as the last
 * used; then evicts beyond the bound (never @v). Under the write lock.
 */
void dv_ns_pin_loaded(struct dv_namespace *ns, struct dsver *v,
		      struct dirinfo *d, bool ref);

/*
 * A lookup used loaded pin @v: if idle, it is now the one evicted last.
 * Under the read lock.
 */
void dv_ns_pin_touch(struct dv_namespace *ns, struct dsver *v);

/* ---- ns_cache.c ---- */

/* A document: its bytes, ETag (may be NULL) and fetch time. */
struct doc {
	char *body;
	size_t len;
	char *etag;
	time_t mtime;
};

/* Frees what @d holds and zeroes it. */
void dv_ns_doc_release(struct doc *d);

/*
 * Gets @relpath from the origin (with @etag: 1 when not modified) or, with
 * @cached, from the disk cache. 0 with @d filled, or -errno. @d must be
 * released with dv_ns_doc_release() in every case.
 */
int dv_ns_doc_get(struct dv_namespace *ns, bool cached, const char *relpath,
		  const char *etag, struct doc *d);

/*
 * Keeps an accepted document in the disk cache; a failure only costs the
 * next remount (a log line). No-op without a state directory.
 */
void dv_ns_cache_write(const struct dv_namespace *ns, const char *relpath,
		       const struct doc *d);

#endif
