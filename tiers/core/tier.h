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
 *     verifying sink, or ->download_range a part into a buffer (a streaming
 *     fill), ->install uploads from a local file; never evict (R9).
 */
#ifndef DV_TIER_H
#define DV_TIER_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
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

struct dv_fill;
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
	struct dv_fill *fill;    /* still filling (hierarchy.h); or NULL */
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

/* One object a scan found. */
struct dv_tier_entry {
	char hash[65];
	uint64_t size;
	int64_t mtime;          /* recency, seconds since the epoch; 0: none kept */
};

/* Called by scan for each object; non-zero stops the scan and is its result. */
typedef int (*dv_tier_scan_fn)(void *arg, const struct dv_tier_entry *e);

/*
 * Called by sweep for each leftover: @name relative to the tier
 * (".staging/<hash>.XXXXXX"), @what it is for people, @removed 0 when it
 * was removed, -errno when removing it failed, 1 when not asked to.
 */
typedef void (*dv_tier_leftover_fn)(void *arg, const char *name,
				    const char *what, int removed);

enum dv_desc_line {
	DV_DESC_DETAIL,   /* more about the tier: "accepted /dev/nvme1n1 …" */
	DV_DESC_WARNING,  /* something an operator should act on */
};

/* What a tier says of itself, for people (datavoctl inspect, verify, bench). */
struct dv_tier_desc {
	char where[PATH_MAX];   /* its directory, bucket or container, devices */
	uint64_t capacity;      /* bytes it may hold; 0: unbounded */
	bool exists;            /* its storage exists (false: made on first use) */
	bool has_usage;         /* @usage was measured (local tiers) */
	struct dv_tier_usage usage;
	const char *note;       /* static text for when !has_usage, or NULL */
	/* Set by the caller, may be NULL: receives lines without '\n'. */
	void (*line)(void *arg, enum dv_desc_line kind, const char *text);
	void *arg;
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

/*
 * Threads. "Concurrent" below means: any number of threads of the daemon
 * (FUSE workers, upload workers, the status and metrics readers) may call
 * it at once, on the same tier, and other processes (datavoctl, daemons
 * sharing the tier) may work on the same storage meanwhile. The caller
 * holds none of the tier's own locks unless the op says so. Optional
 * members may be NULL: callers go through the dv_tier_<op>() wrappers
 * below, which supply the core's default (tier.c), never through ->op.
 */
struct dv_tier_ops {
	const char *type;
	unsigned caps; /* enum dv_tier_caps */

	/*
	 * Prepares the tier for use: creates its directories (R12) and removes
	 * leftovers of dead processes (B4). Called once, before any op but
	 * describe, scan, check, sweep and remove, from one thread. Remote
	 * tiers must not touch the network here. Default: nothing to do.
	 */
	int (*open)(struct dv_tier *t);

	/* Frees the tier, base included. No other op may be running. Required. */
	void (*destroy)(struct dv_tier *t);

	/*
	 * Does the tier hold @hash with @size bytes? 0: yes; -ENOENT: no;
	 * -EBADMSG: it holds a copy of the wrong size (treated as a miss and
	 * replaced); any other -errno is an error (e.g. -EACCES from a bucket)
	 * that the hierarchy logs and treats as a miss of this tier.
	 * Concurrent, with or without the hash lock. Required.
	 */
	int (*lookup)(struct dv_tier *t, const char *hash, uint64_t size);

	/*
	 * Opens a held object for reading into @obj (fd and path for
	 * DIRECT_READ tiers, handle otherwise) and refreshes its recency (R8).
	 * The object is pinned until close_object (B6). Concurrent. Default
	 * (remote tiers): -ENOTSUP.
	 */
	int (*open_object)(struct dv_tier *t, const char *hash, uint64_t size,
			   struct dv_object *obj);
	/* Concurrent, once per open. Default: closes obj->fd. */
	void (*close_object)(struct dv_tier *t, struct dv_object *obj);

	/*
	 * Reads an object that has no fd. Returns bytes read or -errno.
	 * Concurrent, also on one object. Default: -ENOTSUP.
	 */
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
	 * Concurrent for different hashes. Default: -ENOTSUP.
	 */
	int (*install)(struct dv_tier *t, const char *hash, int src_fd,
		       const char *src_path, uint64_t size, unsigned flags);

	/*
	 * Remote tiers: streams @hash into @sink. 0, -ENOENT or -errno.
	 * Concurrent. Default: -ENOTSUP.
	 */
	int (*download)(struct dv_tier *t, const char *hash, uint64_t size,
			struct dv_sink *sink);

	/*
	 * Remote tiers: bytes [@off, @off + @len) of @hash, an object of
	 * @size bytes, into @buf (@len bytes), unverified: the chunks of a
	 * streaming fill (fill.h), each checked by the caller against the
	 * shard's chunk list. 0 with every byte in; -ENOENT; -EPROTO when the
	 * store does not answer with exactly that range; -EINVAL when the
	 * range is not inside the object; other -errno as download.
	 * Concurrent, also on one object. Default: -ENOTSUP.
	 */
	int (*download_range)(struct dv_tier *t, const char *hash,
			      uint64_t size, uint64_t off, uint64_t len,
			      void *buf);

	/*
	 * Takes the per-hash lock (R7, B1): blocks until held, across threads
	 * and processes. Returns an fd to pass to unlock, or -errno.
	 * Concurrent. NULL (dv_tier_has_locks() false) for tiers without
	 * local locks; the wrapper then returns -ENOTSUP.
	 */
	int (*lock)(struct dv_tier *t, const char *hash);
	void (*unlock)(struct dv_tier *t, const char *hash, int lock_fd);

	/*
	 * Folder tiers: a new staging file for @hash in .staging/. Concurrent.
	 * NULL (dv_tier_is_folder() false) elsewhere: the wrapper returns
	 * -ENOTSUP.
	 */
	int (*stage_open)(struct dv_tier *t, const char *hash,
			  struct dv_staged *st);
	/* Removes and closes a staging file that was not installed. */
	void (*stage_discard)(struct dv_tier *t, struct dv_staged *st);
	/*
	 * Folder tiers: the staging file of a streaming fill of @hash,
	 * .staging/<hash>.partial, opened as it is when a killed daemon left
	 * one (*@resumed true; its chunks are checked before use, fill.h),
	 * else created empty. The caller holds @hash's lock. Concurrent.
	 * Default: -ENOTSUP.
	 */
	int (*stage_resume)(struct dv_tier *t, const char *hash,
			    struct dv_staged *st, bool *resumed);

	/*
	 * Folder tiers: evicts least recently used objects that are not open
	 * (R8, B6) until @bytes are free on the tier's filesystem, for a
	 * staging file. 0, or -ENOSPC when that cannot be done; then nothing
	 * was evicted. Concurrent. Default: -ENOSPC (nothing can be freed).
	 */
	int (*free_space)(struct dv_tier *t, uint64_t bytes);

	/*
	 * Removes @hash (scrub, B3). 0, -ENOENT or -errno. Concurrent; a
	 * caller that must not race an install holds the hash lock. Default:
	 * -ENOTSUP.
	 */
	int (*remove)(struct dv_tier *t, const char *hash);

	/* Current use. Concurrent. Default: all zero, 0. */
	int (*usage)(struct dv_tier *t, struct dv_tier_usage *u);

	/*
	 * Calls @fn for each installed object, in no order, without holding
	 * any lock of the tier: @fn may call the tier's other ops. Objects
	 * installed or removed meanwhile may or may not be seen. Returns 0,
	 * what @fn returned when it stopped the scan, -ENOENT when the tier's
	 * storage does not exist, or -errno. Works on a tier that was not
	 * opened when the backend can list from outside the daemon (folder);
	 * otherwise (stripe: the index lives in the daemon) -ENOTSUP until
	 * open. Concurrent. Default (remote tiers): -ENOTSUP.
	 */
	int (*scan)(struct dv_tier *t, dv_tier_scan_fn fn, void *arg);

	/*
	 * Fills @d (d->line and d->arg are set by the caller and kept) with
	 * what the tier is. Read-only: creates nothing, contacts no server,
	 * writes to no device; works on a tier that was not opened.
	 * Concurrent. Default: where = the type, capacity = max_bytes.
	 */
	void (*describe)(struct dv_tier *t, struct dv_tier_desc *d);

	/*
	 * Reads the held object @hash of @size bytes whole and compares its
	 * SHA-256 with @sha256 (B3), leaving its recency alone where the
	 * backend can. 0: intact; -EBADMSG: wrong size or wrong bytes;
	 * -ENOENT: not held; other -errno. Concurrent. Default: open_object,
	 * read, close_object; -ENOTSUP for tiers that cannot open objects.
	 */
	int (*check)(struct dv_tier *t, const char *hash, uint64_t size,
		     const uint8_t sha256[32]);

	/*
	 * Finds what dead processes left in the tier's storage (staging
	 * files, locks: B4), reports each to @fn and, with @fix, removes it.
	 * Never touches what a live process holds. 0 or -errno. Works on a
	 * tier that was not opened. Concurrent. Default: nothing left, 0.
	 */
	int (*sweep)(struct dv_tier *t, bool fix, dv_tier_leftover_fn fn,
		     void *arg);
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

/* True for tiers with per-hash locks (R7, B1). */
static inline bool dv_tier_has_locks(const struct dv_tier *t)
{
	return t->ops->lock != NULL;
}

/*
 * @t as the private struct of the backend of @ops, which embeds the base
 * first (git's files_downcast). A tier of another backend here is a bug:
 * abort, in release builds too, rather than read the wrong struct.
 */
static inline void *dv_tier_downcast(struct dv_tier *t,
				     const struct dv_tier_ops *ops)
{
	if (t->ops != ops)
		abort();
	return t;
}

/* Initializes the base. @name is copied. 0 or -ENOMEM. */
int dv_tier_init(struct dv_tier *t, const struct dv_tier_ops *ops,
		 const char *name, enum dv_tier_type type, uint64_t max_bytes);
void dv_tier_release(struct dv_tier *t);

/*
 * Creates the backend of @tc; touches no storage and no network (that is
 * open's job). Every backend is part of every build: a type no backend
 * takes is a bug of the config parser, -EINVAL with a message in @err.
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

/*
 * The core's defaults of the optional ops (tier.c), as documented on each
 * member of struct dv_tier_ops. Only the wrappers below call them.
 */
int dv_tier_def_open(struct dv_tier *t);
int dv_tier_def_open_object(struct dv_tier *t, const char *hash,
			    uint64_t size, struct dv_object *obj);
void dv_tier_def_close_object(struct dv_tier *t, struct dv_object *obj);
ssize_t dv_tier_def_read(struct dv_tier *t, struct dv_object *obj,
			 void *buf, size_t len, uint64_t off);
int dv_tier_def_install(struct dv_tier *t, const char *hash, int src_fd,
			const char *src_path, uint64_t size, unsigned flags);
int dv_tier_def_download(struct dv_tier *t, const char *hash, uint64_t size,
			 struct dv_sink *sink);
int dv_tier_def_download_range(struct dv_tier *t, const char *hash,
			       uint64_t size, uint64_t off, uint64_t len,
			       void *buf);
int dv_tier_def_lock(struct dv_tier *t, const char *hash);
void dv_tier_def_unlock(struct dv_tier *t, const char *hash, int lock_fd);
int dv_tier_def_stage_open(struct dv_tier *t, const char *hash,
			   struct dv_staged *st);
void dv_tier_def_stage_discard(struct dv_tier *t, struct dv_staged *st);
int dv_tier_def_stage_resume(struct dv_tier *t, const char *hash,
			     struct dv_staged *st, bool *resumed);
int dv_tier_def_free_space(struct dv_tier *t, uint64_t bytes);
int dv_tier_def_remove(struct dv_tier *t, const char *hash);
int dv_tier_def_usage(struct dv_tier *t, struct dv_tier_usage *u);
int dv_tier_def_scan(struct dv_tier *t, dv_tier_scan_fn fn, void *arg);
void dv_tier_def_describe(struct dv_tier *t, struct dv_tier_desc *d);
int dv_tier_def_check(struct dv_tier *t, const char *hash, uint64_t size,
		      const uint8_t sha256[32]);
int dv_tier_def_sweep(struct dv_tier *t, bool fix, dv_tier_leftover_fn fn,
		      void *arg);

/* The backend's op, else the default: pick it with one expression. */
#define DV_TIER_OP(t, op) ((t)->ops->op ? (t)->ops->op : dv_tier_def_##op)

/* The ops, for callers: contracts on the members of struct dv_tier_ops. */
static inline int dv_tier_open(struct dv_tier *t)
{
	return DV_TIER_OP(t, open)(t);
}

static inline int dv_tier_lookup(struct dv_tier *t, const char *hash,
				 uint64_t size)
{
	return t->ops->lookup(t, hash, size);
}

static inline int dv_tier_open_object(struct dv_tier *t, const char *hash,
				      uint64_t size, struct dv_object *obj)
{
	return DV_TIER_OP(t, open_object)(t, hash, size, obj);
}

static inline void dv_tier_close_object(struct dv_tier *t,
					struct dv_object *obj)
{
	DV_TIER_OP(t, close_object)(t, obj);
}

static inline ssize_t dv_tier_read(struct dv_tier *t, struct dv_object *obj,
				   void *buf, size_t len, uint64_t off)
{
	return DV_TIER_OP(t, read)(t, obj, buf, len, off);
}

static inline int dv_tier_install(struct dv_tier *t, const char *hash,
				  int src_fd, const char *src_path,
				  uint64_t size, unsigned flags)
{
	return DV_TIER_OP(t, install)(t, hash, src_fd, src_path, size, flags);
}

static inline int dv_tier_download(struct dv_tier *t, const char *hash,
				   uint64_t size, struct dv_sink *sink)
{
	return DV_TIER_OP(t, download)(t, hash, size, sink);
}

static inline int dv_tier_download_range(struct dv_tier *t, const char *hash,
					 uint64_t size, uint64_t off,
					 uint64_t len, void *buf)
{
	return DV_TIER_OP(t, download_range)(t, hash, size, off, len, buf);
}

/* Can @t serve parts of its objects (download_range)? */
static inline bool dv_tier_has_ranges(const struct dv_tier *t)
{
	return t->ops->download_range != NULL;
}

static inline int dv_tier_lock(struct dv_tier *t, const char *hash)
{
	return DV_TIER_OP(t, lock)(t, hash);
}

static inline void dv_tier_unlock(struct dv_tier *t, const char *hash,
				  int lock_fd)
{
	DV_TIER_OP(t, unlock)(t, hash, lock_fd);
}

static inline int dv_tier_stage_open(struct dv_tier *t, const char *hash,
				     struct dv_staged *st)
{
	return DV_TIER_OP(t, stage_open)(t, hash, st);
}

static inline void dv_tier_stage_discard(struct dv_tier *t,
					 struct dv_staged *st)
{
	DV_TIER_OP(t, stage_discard)(t, st);
}

static inline int dv_tier_stage_resume(struct dv_tier *t, const char *hash,
				       struct dv_staged *st, bool *resumed)
{
	return DV_TIER_OP(t, stage_resume)(t, hash, st, resumed);
}

static inline int dv_tier_free_space(struct dv_tier *t, uint64_t bytes)
{
	return DV_TIER_OP(t, free_space)(t, bytes);
}

static inline int dv_tier_remove(struct dv_tier *t, const char *hash)
{
	return DV_TIER_OP(t, remove)(t, hash);
}

static inline int dv_tier_usage(struct dv_tier *t, struct dv_tier_usage *u)
{
	return DV_TIER_OP(t, usage)(t, u);
}

static inline int dv_tier_scan(struct dv_tier *t, dv_tier_scan_fn fn,
			       void *arg)
{
	return DV_TIER_OP(t, scan)(t, fn, arg);
}

/*
 * Describes @t into @d; d->line and d->arg (may be NULL) are kept, the
 * rest is cleared first.
 */
void dv_tier_describe(struct dv_tier *t, struct dv_tier_desc *d);

static inline int dv_tier_check(struct dv_tier *t, const char *hash,
				uint64_t size, const uint8_t sha256[32])
{
	return DV_TIER_OP(t, check)(t, hash, size, sha256);
}

static inline int dv_tier_sweep(struct dv_tier *t, bool fix,
				dv_tier_leftover_fn fn, void *arg)
{
	return DV_TIER_OP(t, sweep)(t, fix, fn, arg);
}

/* For backends' describe: one line to d->line, printf-style. */
void dv_tier_desc_line(const struct dv_tier_desc *d, enum dv_desc_line kind,
		       const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline void dv_stat_add(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static inline uint64_t dv_stat_get(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

#endif
