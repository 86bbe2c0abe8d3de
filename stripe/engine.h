/*
 * The stripe I/O engine: O_DIRECT reads and writes of aligned buffers on
 * the pool's devices through io_uring.
 *
 * A ring (struct dv_ring) belongs to one user at a time: an open object's
 * reader, under its lock, or one install. That user submits and reaps
 * itself, so a completion wakes the very thread that waits for it, with no
 * hand-off through a reaper thread (on a small machine those extra wake-ups
 * cost a third of the throughput). Each device has at most qd I/Os in
 * flight per ring (sized from the core count, clamped to
 * 16..64); more wait in the ring's per-device FIFOs.
 *
 * On top of it: writing an object's chunks (install), reading whole
 * chunks into a caller's buffer, and the per-handle reader with its chunk
 * cache and read-ahead (reader.c).
 */
#ifndef DV_STRIPE_ENGINE_H
#define DV_STRIPE_ENGINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "index.h"

struct dv_ring;

/* A set of I/Os its ring's user waits for as one. */
struct dv_io_batch {
	unsigned pending;
	int err;          /* the first error */
};

/* One transfer. The caller owns it until its batch is done. */
struct dv_io {
	unsigned dev;
	bool write;
	void *buf;        /* DV_STRIPE_ALIGN aligned */
	size_t len;       /* a multiple of DV_STRIPE_ALIGN */
	uint64_t off;     /* a multiple of DV_STRIPE_ALIGN */
	struct dv_io_batch *batch;
	/* the ring's */
	size_t done;
	struct dv_io *next;
};

static inline void dv_io_batch_init(struct dv_io_batch *b)
{
	b->pending = 0;
	b->err = 0;
}

/* Queue depth per device for this machine: clamp(4 x cores, 16, 64). */
unsigned dv_ring_default_qd(void);

/*
 * A ring over @ndev open O_DIRECT descriptors (borrowed: they must outlive
 * it), @qd I/Os in flight per device. 0 or -errno.
 */
int dv_ring_new(const int *fds, unsigned ndev, unsigned qd,
		struct dv_ring **out);
/* Waits for everything in flight, then frees the ring. NULL is a no-op. */
void dv_ring_free(struct dv_ring *r);

/* Queues @n I/Os (each counted in its batch) and submits what fits. */
void dv_ring_submit(struct dv_ring *r, struct dv_io **ios, size_t n);

/* Reaps completions until @b is done. 0 or its first -errno. */
int dv_ring_wait(struct dv_ring *r, struct dv_io_batch *b);

/*
 * The two halves of dv_ring_wait, for a ring shared by threads under a
 * lock of theirs. dv_ring_wait_event blocks until a completion is there
 * without consuming it or touching the ring's bookkeeping, so it may run
 * without that lock while other threads submit; only one thread may wait
 * or reap at a time. dv_ring_reap, under the lock, handles every
 * completion there is (never blocking) and submits what they made room for.
 * 0 or -errno (the ring is broken).
 */
int dv_ring_wait_event(struct dv_ring *r);
int dv_ring_reap(struct dv_ring *r);

/* When a chunk read from a device is compared with its xxh3. */
enum dv_stripe_check {
	DV_STRIPE_CHECK_FIRST,  /* the first time this process reads it (verify: fill) */
	DV_STRIPE_CHECK_ALWAYS, /* every read (verify: always, B3) */
	DV_STRIPE_CHECK_NEVER,  /* verify: off */
};

/* What reads and writes of objects need to know about the pool. */
struct dv_stripe_io {
	enum dv_stripe_check check;
	unsigned qd;                 /* per device, per ring */
	const int *fds;
	unsigned ndev;
	uint64_t chunk_bytes;
	uint64_t data_offset;
	uint64_t buffer_budget;      /* bytes of read-ahead buffers, all handles */
	uint64_t buffers;            /* in use now (atomic) */
};

/* An aligned buffer of @len bytes (a multiple of DV_STRIPE_ALIGN), or NULL. */
void *dv_stripe_buf_alloc(size_t len);

/*
 * Writes the chunks of @e (devices and slots chosen) from @src_fd through
 * a ring of its own, several in flight per device, fills in each chunk's checksum, and makes them
 * durable (fdatasync of every device written). @stall, if not NULL, is a
 * test hook: when half the chunks are durable and the file @stall exists,
 * it creates "@stall.stalled" and sleeps for a minute, so that a test can
 * kill the process mid-install. 0 or -errno.
 */
int dv_stripe_write_object(struct dv_stripe_io *io, struct dv_stripe_entry *e,
			   int src_fd, const char *stall);

/*
 * Reads chunks [@first, @first + @n) of @e through @ring into @buf (aligned; room for
 * the rounded-up I/O length of each), all in flight at once, and checks
 * each (as io->check says) as soon as it arrives, while the others are
 * still in flight. 0, -EBADMSG (a chunk does not match) or -errno.
 */
int dv_stripe_read_chunks(struct dv_stripe_io *io, struct dv_ring *ring,
			  struct dv_stripe_entry *e, uint64_t first, uint64_t n,
			  void *buf);

/*
 * True when chunk @i of @e as read into @buf may be served: it matches its
 * xxh3, or io->check says it need not be compared (again).
 */
bool dv_stripe_chunk_ok(const struct dv_stripe_io *io,
			struct dv_stripe_entry *e, uint64_t i, const void *buf);

/*
 * A reader of one open object: a bounded set of chunk buffers, a window
 * of chunks read ahead of a sequential reader (none for a random one).
 * Safe for concurrent reads of one handle: they share its chunks and
 * wait for each other only for the same chunk (reader.c).
 */
struct dv_stripe_reader;

/* What a reader did, for tests and benchmarks. */
struct dv_stripe_reader_stats {
	uint64_t loads;        /* chunks read from the devices into buffers */
	uint64_t ahead_loads;  /* of which started by read-ahead */
	uint64_t ahead_hits;   /* reads that found their chunk read ahead */
	uint64_t direct;       /* reads that went straight to the caller */
	unsigned buffers;      /* chunk buffers held now */
	unsigned max_buffers;  /* the most it may ever hold */
};

/* A reader of @e (borrowed: the caller holds a reference). 0 or -errno. */
int dv_stripe_reader_new(struct dv_stripe_io *io, struct dv_stripe_entry *e,
			 struct dv_stripe_reader **out);
/* Waits for its read-ahead, frees its buffers. NULL is a no-op. */
void dv_stripe_reader_free(struct dv_stripe_reader *r);

/* A snapshot of @r's counts. */
void dv_stripe_reader_stats(struct dv_stripe_reader *r,
			    struct dv_stripe_reader_stats *out);

/*
 * pread of the object: bytes read (short only at the end) or -errno;
 * -EBADMSG when a chunk fails its checksum.
 */
ssize_t dv_stripe_reader_read(struct dv_stripe_reader *r, void *buf,
			      size_t len, uint64_t off);

#endif
