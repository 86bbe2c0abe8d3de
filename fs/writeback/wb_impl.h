/*
 * Internals of the write-back areas, shared by wb_area.c (areas, inodes),
 * wb_queue.c (the upload state of paths and the uploaders), wb_journal.c
 * (the on-disk queue), wb_dest.c (destinations) and wb_fuse.c (the FUSE
 * operations). Private to fs/writeback/.
 *
 * Locks: wb->nodes_lock protects the inode table; area->lock protects the
 * area's files list and counters. Never take nodes_lock inside
 * area->lock.
 */
#ifndef DV_WB_IMPL_H
#define DV_WB_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "writeback.h"

#define WB_AREA_SHIFT 56
#define WB_INO_MASK ((1ULL << WB_AREA_SHIFT) - 1)
#define WB_MAX_AREAS 127
#define WB_JOURNAL_DIR ".datavo-journal"
#define WB_SYNCED_XATTR "user.datavo.synced"
#define WB_SETTLE_MS 500      /* a closed file waits this long (x.tmp → x) */
#define WB_WORKERS 2          /* uploads in flight per area */
#define WB_NODE_BUCKETS 4096

struct wb_area;

/* A destination: where an area's files go. */
struct wb_dest_ops {
	/* Uploads @size bytes of @fd (borrowed) as @rel. 0 or -errno. */
	int (*put)(struct wb_area *a, const char *rel, int fd, uint64_t size);
	/* Removes @rel; a missing object is success. 0 or -errno. */
	int (*del)(struct wb_area *a, const char *rel);
	void (*free)(struct wb_area *a);
};

/* Sets up a->dest and a->dest_ops from a->cfg. 0 or -errno, @err says. */
int dv_wb_dest_open(struct wb_area *a, const struct dv_config *cfg, char *err,
		    size_t errlen);

/* Transient failures are retried forever; the others are failed for good. */
bool dv_wb_transient(int err);

enum wb_op { WB_OP_PUT, WB_OP_DELETE };
enum wb_state { WB_PENDING, WB_UPLOADING, WB_SYNCED, WB_FAILED };

/*
 * A path of an area with something to do or open for writing. Protected
 * by its area's lock.
 */
struct wb_file {
	char *rel;             /* "dir/name" inside the area */
	enum wb_op op;
	enum wb_state state;
	bool journalled;       /* a close recorded it: op is to be done */
	bool busy;             /* an uploader runs op now */
	bool remote;           /* the destination may hold this path */
	unsigned writers;      /* handles open for writing */
	uint64_t size;         /* at the close recorded */
	int64_t mtime_ns;
	uint64_t gen;          /* grows at every change of the path */
	time_t since;          /* when it became pending */
	int64_t not_before;    /* ms (CLOCK_MONOTONIC) of the next attempt */
	unsigned attempts;
	char reason[256];      /* of the last failure */
	struct wb_file *next;
};

struct wb_area {
	struct dv_wb *wb;
	unsigned index;
	const struct dv_writeback_config *cfg; /* borrowed from the config */
	int dirfd;             /* the landing folder */
	int jfd;               /* its journal directory */
	uint64_t root_ino;
	const struct wb_dest_ops *dest_ops;
	void *dest;

	pthread_mutex_t lock;
	pthread_cond_t cond;   /* work for the uploaders */
	struct wb_file *files; /* protected by lock */
	struct dv_wb_stats st; /* protected by lock; pending_* computed */
	bool stop;             /* protected by lock */
	pthread_t workers[WB_WORKERS];
	unsigned nworkers;
};

struct wb_node {
	uint64_t ino;
	struct wb_area *area;
	char *rel;             /* "" for the area's root */
	uint64_t nlookup;
	bool pinned;           /* an area root: never forgotten */
	struct wb_node *next;
};

struct dv_wb {
	struct wb_area *areas;
	size_t n;
	pthread_mutex_t nodes_lock;
	struct wb_node *buckets[WB_NODE_BUCKETS]; /* protected by nodes_lock */
};

static inline uint64_t dv_wb_make_ino(const struct wb_area *a, ino_t st_ino)
{
	return DV_NS_FOREIGN_INO | ((uint64_t)a->index << WB_AREA_SHIFT) |
	       ((uint64_t)st_ino & WB_INO_MASK);
}

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t dv_wb_now_ms(void);

/* A directory stream over @fd (taken: closed on failure too). 0 or -errno. */
int dv_wb_opendir(int fd, DIR **out);

/* ---- inodes (wb_area.c) ---- */

/*
 * Records that the kernel knows @rel of @a as the inode of @st (its
 * st_ino is rewritten to the mount's number), counting @nlookup
 * references. 0 or -ENOMEM.
 */
int dv_wb_node_add(struct dv_wb *wb, struct wb_area *a, const char *rel,
		   struct stat *st, uint64_t nlookup);

/*
 * The area and path of @ino into @rel (@len bytes). 0, -ENOENT (not
 * known), -ENAMETOOLONG.
 */
int dv_wb_node_path(struct dv_wb *wb, uint64_t ino, struct wb_area **a,
		    char *rel, size_t len);

void dv_wb_node_forget(struct dv_wb *wb, uint64_t ino, uint64_t n);

/* Every node of @a at @from or under it is now at @to. */
void dv_wb_node_rename(struct dv_wb *wb, struct wb_area *a, const char *from,
		       const char *to);

/* "dir" + "name" → "dir/name" (or "name" at the root). 0 or -ENAMETOOLONG. */
int dv_wb_join(char *out, size_t len, const char *dir, const char *name);

/* The area whose root directory is named @name, or NULL. */
struct wb_area *dv_wb_area_named(struct dv_wb *wb, const char *name);

/* ---- the queue (wb_queue.c); every call takes a->lock ---- */

int dv_wb_queue_start(struct wb_area *a);
void dv_wb_queue_stop(struct wb_area *a);

/* A handle open for writing on @rel: @fresh when it created the file. */
int dv_wb_queue_writer(struct wb_area *a, const char *rel, bool fresh);
/* That handle closed (release). */
void dv_wb_queue_writer_done(struct wb_area *a, const char *rel);
/* The number of handles open for writing on @rel. */
unsigned dv_wb_queue_writers(struct wb_area *a, const char *rel);

/*
 * @rel was closed (or fsync'd) with @st: journalled, then queued. 0 or
 * -errno (the journal could not be written: the close must fail).
 */
int dv_wb_queue_closed(struct wb_area *a, const char *rel,
		       const struct stat *st);

/* @rel was unlinked from the landing folder. 0 or -errno. */
int dv_wb_queue_unlinked(struct wb_area *a, const char *rel);

/* @from (a file or a directory) was renamed to @to. 0 or -errno. */
int dv_wb_queue_renamed(struct wb_area *a, const char *from, const char *to);

/*
 * What user.datavo.sync says of @rel ("" for the area): for a file
 * pending, uploading, synced or "failed: why"; for a directory the same
 * of everything under it (failed first, then uploading, then pending).
 */
void dv_wb_queue_state(struct wb_area *a, const char *rel, bool is_dir,
		       char *buf, size_t len);

/* Frees up to @want bytes of synced, closed files, oldest use first. */
uint64_t dv_wb_queue_evict(struct wb_area *a, uint64_t want);

/* ---- the journal (wb_journal.c) ---- */

int dv_wb_journal_open(struct wb_area *a);
/* Writes (atomically, with fsync) what is to be done for @f. */
int dv_wb_journal_put(struct wb_area *a, const struct wb_file *f);
void dv_wb_journal_drop(struct wb_area *a, const char *rel);

/* Calls @fn for each entry read back, under no lock (at start-up). */
typedef void (*dv_wb_journal_fn)(struct wb_area *a, enum wb_op op,
				 const char *rel, uint64_t size,
				 int64_t mtime_ns);
int dv_wb_journal_load(struct wb_area *a, dv_wb_journal_fn fn);

#endif
