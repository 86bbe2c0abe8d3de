/*
 * The tier interface. A tier holds shards by content hash. Backends export
 * one const struct dv_tier_ops; the hierarchy (hierarchy.c) is the only code
 * that walks tiers, promotes and populates: backends never call each other.
 *
 * Three shapes fit this one table:
 *   - folder tiers (folder, ram): plain files <path>/<hash>.tar, readable in
 *     place (DV_TIER_DIRECT_READ), with .staging/ and .locks/ (stage_open,
 *     lock); they are the local landing zones (R6);
 *   - local non-file tiers (stripe): objects read through ->read;
 *   - remote tiers (s3, azure_blob, gcs: DV_TIER_REMOTE): ->download into a
 *     verifying sink, ->install uploads from a local file; never evict (R9).
 */
#ifndef DV_TIER_H
#define DV_TIER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"
#include "sink.h"

enum dv_tier_caps {
	DV_TIER_DIRECT_READ = 1 << 0, /* objects are plain files with a path */
	DV_TIER_REMOTE = 1 << 1,      /* network: materialized locally (R4) */
	DV_TIER_EVICTS = 1 << 2,      /* enforces max_bytes by eviction (R8) */
};

/* install() flags */
enum dv_install_flags {
	/* @src_path is this tier's own staging file: rename it in (R7). */
	DV_INSTALL_MOVE = 1 << 0,
};

struct dv_tier;

/* A shard opened for reading from one tier. */
struct dv_object {
	struct dv_tier *tier;    /* borrowed from the hierarchy */
	int tier_index;          /* position in the hierarchy, 0 = fastest */
	int fd;                  /* DIRECT_READ tiers: open file, else -1 */
	char path[PATH_MAX];     /* DIRECT_READ tiers: the file's path */
	char hash[65];
	uint64_t size;
	void *handle;            /* backend state for non-file objects */
};

/* A staging file in a folder tier: exclusive, flocked while alive (B4). */
struct dv_staged {
	int fd;
	char path[PATH_MAX];
};

struct dv_tier_usage {
	uint64_t used_bytes;    /* bytes of installed objects */
	uint64_t objects;
	uint64_t capacity;      /* max_bytes; 0 = unbounded */
	uint64_t fs_free;       /* free bytes of the backing filesystem, or 0 */
};

/* Counters, updated with __atomic builtins; read for status and metrics. */
struct dv_tier_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t bytes_served;  /* added by the reader (fs/) */
	uint64_t bytes_in;      /* bytes installed or uploaded */
	uint64_t installs;
	uint64_t evictions;
	uint64_t errors;
	uint64_t verify_failures;
};

struct dv_tier_ops {
	const char *type;
	unsigned caps; /* enum dv_tier_caps */

	/*
	 * Prepares the tier for use: creates its directories (R12) and removes
	 * leftovers of dead processes (B4). Called once, before any other op.
	 * Remote tiers must not touch the network here. NULL: nothing to do.
	 */
	int (*open)(struct dv_tier *t);

	/* Frees the tier, base included. Never NULL. */
	void (*destroy)(struct dv_tier *t);

	/*
	 * Does the tier hold @hash with @size bytes? 0: yes; -ENOENT: no;
	 * -EBADMSG: it holds a copy of the wrong size (treated as a miss and
	 * replaced); any other -errno is an error (e.g. -EACCES from a bucket)
	 * that the hierarchy logs and treats as a miss of this tier.
	 */
	int (*lookup)(struct dv_tier *t, const char *hash, uint64_t size);

	/*
	 * Opens a held object for reading into @obj (fd and path for
	 * DIRECT_READ tiers, handle otherwise) and refreshes its recency (R8).
	 * The object is pinned until close_object (B6). Remote tiers: NULL.
	 */
	int (*open_object)(struct dv_tier *t, const char *hash, uint64_t size,
			   struct dv_object *obj);
	void (*close_object)(struct dv_tier *t, struct dv_object *obj);

	/* Reads an object that has no fd. Returns bytes read or -errno. */
	ssize_t (*read)(struct dv_tier *t, struct dv_object *obj, void *buf,
			size_t len, uint64_t off);

	/*
	 * Installs the verified local file @src_fd / @src_path of @size bytes
	 * as @hash. 0: installed, or an intact copy was already there (the
	 * source is then left alone for the caller to discard). -EFBIG: larger
	 * than max_bytes; -ENOSPC: no room even after eviction (when eviction
	 * could not make the room, nothing is evicted); other -errno on
	 * failure. Never leaves a partial <hash> visible. The caller holds the
	 * hash lock of every lockable tier. Remote tiers upload here, from a
	 * worker thread, reading @src_fd with pread; @src_path is then NULL.
	 */
	int (*install)(struct dv_tier *t, const char *hash, int src_fd,
		       const char *src_path, uint64_t size, unsigned flags);

	/* Remote tiers: streams @hash into @sink. 0, -ENOENT or -errno. */
	int (*download)(struct dv_tier *t, const char *hash, uint64_t size,
			struct dv_sink *sink);

	/*
	 * Takes the per-hash lock (R7, B1): blocks until held, across threads
	 * and processes. Returns an fd to pass to unlock, or -errno. NULL for
	 * tiers without local locks.
	 */
	int (*lock)(struct dv_tier *t, const char *hash);
	void (*unlock)(struct dv_tier *t, const char *hash, int lock_fd);

	/* Folder tiers: a new staging file for @hash in .staging/. */
	int (*stage_open)(struct dv_tier *t, const char *hash,
			  struct dv_staged *st);
	/* Removes and closes a staging file that was not installed. */
	void (*stage_discard)(struct dv_tier *t, struct dv_staged *st);

	/*
	 * Folder tiers: evicts least recently used objects that are not open
	 * (R8, B6) until @bytes are free on the tier's filesystem, for a
	 * staging file. 0, or -ENOSPC when that cannot be done; then nothing
	 * was evicted. May be NULL.
	 */
	int (*free_space)(struct dv_tier *t, uint64_t bytes);

	/* Removes @hash (scrub, B3). 0, -ENOENT or -errno. */
	int (*remove)(struct dv_tier *t, const char *hash);

	/* Current use. NULL: all zero. */
	int (*usage)(struct dv_tier *t, struct dv_tier_usage *u);
};

/* The base every backend embeds first. */
struct dv_tier {
	const struct dv_tier_ops *ops;
	char *name;
	enum dv_tier_type type;
	uint64_t max_bytes;    /* 0 = unbounded */
	char *lock_key;        /* orders lock taking across tiers; may be NULL */
	struct dv_tier_stats stats;

	pthread_mutex_t pin_lock;
	struct dv_pin **pins;  /* protected by pin_lock: a hash table */
	size_t pin_buckets;    /* protected by pin_lock: 0 or a power of two */
	size_t npins;          /* protected by pin_lock */
};

static inline bool dv_tier_has(const struct dv_tier *t, unsigned cap)
{
	return (t->ops->caps & cap) != 0;
}

/* True for tiers that can be a landing zone (R6): they have staging. */
static inline bool dv_tier_is_folder(const struct dv_tier *t)
{
	return t->ops->stage_open != NULL;
}

/* Initializes the base. @name is copied. 0 or -ENOMEM. */
int dv_tier_init(struct dv_tier *t, const struct dv_tier_ops *ops,
		 const char *name, enum dv_tier_type type, uint64_t max_bytes);
void dv_tier_release(struct dv_tier *t);

/*
 * Creates the backend of @tc. Cloud and stripe types whose backend is not
 * in this build fail with -ENOTSUP and a message in @err.
 */
int dv_tier_new(const struct dv_tier_config *tc, const struct dv_config *cfg,
		struct dv_tier **out, char *err, size_t errlen);

/* Destroys @t; NULL is a no-op. */
void dv_tier_free(struct dv_tier *t);

/*
 * Open-handle pins (B6): eviction avoids pinned hashes. A pin counts: each
 * dv_tier_pin() that returned 0 needs one dv_tier_unpin(); unpinning a hash
 * that is not pinned does nothing. Pin before opening the file, so that an
 * eviction (dv_tier_unless_pinned) either ran before the open, which then
 * fails, or sees the pin. O(1) on average; thread-safe. dv_tier_pin: 0 or
 * -ENOMEM (then nothing is pinned).
 */
int dv_tier_pin(struct dv_tier *t, const char *hash);
void dv_tier_unpin(struct dv_tier *t, const char *hash);
bool dv_tier_is_pinned(struct dv_tier *t, const char *hash);

/*
 * Runs @fn(@t, @hash, @arg) (an eviction) with the pins held still, unless
 * @hash is pinned: @fn's result, or -EBUSY. @fn must not pin or unpin.
 */
int dv_tier_unless_pinned(struct dv_tier *t, const char *hash,
			  int (*fn)(struct dv_tier *t, const char *hash,
				    void *arg),
			  void *arg);

static inline void dv_stat_add(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static inline uint64_t dv_stat_get(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

#endif
