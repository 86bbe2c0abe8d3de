/*
 * Reading an open stripe object (engine.h: dv_stripe_reader).
 *
 * Two paths. A large read into an aligned buffer that covers at least one
 * whole chunk per device goes straight to the caller's memory, every chunk
 * in flight at once. Anything else (FUSE reads of 128 KiB..1 MiB, the
 * hierarchy's promotion buffer) goes through chunk-sized slots: a chunk is
 * read whole, checked against its XXH3 once, and copied out from as many
 * times as readers need. A read that spans several chunks submits all of
 * them before it waits for the first.
 *
 * Read-ahead. A reader whose reads start where earlier ones ended (the
 * kernel's own read-ahead sends several FUSE reads at once, which arrive
 * out of order) is sequential from its second such read; then a window of the next chunks (two per device, at most RA_MAX_BYTES)
 * is kept in flight, and the next reads find their chunk there. A read
 * anywhere else starts the count again: a random reader gets no
 * read-ahead, only the chunks it asks for.
 *
 * Memory. A reader has at most nslots chunk buffers (the window and a
 * few for the reads in progress); buffers come lazily from the tier's
 * budget (io->buffers against io->buffer_budget, all handles), past it only
 * for the chunk a read needs now, so a tight budget costs read-ahead, never
 * correctness. Every buffer is freed at close, after what is in flight.
 *
 * Threads. The mutex protects the slots and the ring's bookkeeping; it is
 * not held while a thread waits in the kernel for I/O (one thread at a
 * time does, the reaper: others wait on the condition), while a chunk is
 * checked, or while bytes are copied out: a slot is pinned for that and is
 * never reused while pinned. A thread pins one slot at a time, so threads
 * never wait for each other's pins in a cycle.
 */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 40u
#define RA_MAX_BYTES (32ULL << 20)
#define SPAN_MAX 8u     /* chunks one round of a read submits */
#define RECENT 16u      /* reads whose ends a sequential read may follow */

enum slot_state { SLOT_EMPTY, SLOT_LOADING, SLOT_READY };

struct slot {
	int64_t chunk;          /* -1: none */
	enum slot_state state;
	bool checked;           /* compared with its checksum */
	bool checking;          /* by a thread without the lock */
	bool ahead;             /* loaded by read-ahead, not read yet */
	int err;                /* of the load or the check */
	unsigned pins;          /* threads copying from it, lock dropped */
	void *buf;              /* chunk_bytes, aligned; NULL until needed */
	struct dv_io *ios;
	struct dv_io_batch batch;
	uint64_t used;          /* reader tick of its last use */
};

struct dv_stripe_reader {
	struct dv_stripe_io *io;
	struct dv_stripe_entry *e;
	pthread_mutex_t lock;   /* everything below, and the ring */
	pthread_cond_t cond;    /* a reap, a check or an unpin happened */
	struct dv_ring *ring;   /* this reader's */
	bool reaping;           /* a thread waits in the kernel for the ring */
	uint64_t tick;
	uint64_t hi;            /* the end of the furthest read of the run */
	uint64_t ends[RECENT];  /* where the last reads ended */
	unsigned nends;
	unsigned streak;        /* reads of the run that followed another */
	unsigned ra;            /* chunks of the read-ahead window */
	unsigned nslots;
	struct dv_stripe_reader_stats st;
	struct slot slots[MAX_SLOTS];
};

static size_t pieces(const struct dv_stripe_io *io)
{
	return (size_t)((io->chunk_bytes + (4u << 20) - 1) / (4u << 20));
}

/* The window: two chunks per device (at least two), within RA_MAX_BYTES. */
static unsigned window_of(const struct dv_stripe_io *io)
{
	uint64_t cap = RA_MAX_BYTES / io->chunk_bytes;
	uint64_t w = 2 * (uint64_t)io->ndev;

	if (w > cap)
		w = cap;
	if (w < 2)
		w = 2;
	if (w > MAX_SLOTS - 4)
		w = MAX_SLOTS - 4;
	return (unsigned)w;
}

int dv_stripe_reader_new(struct dv_stripe_io *io, struct dv_stripe_entry *e,
			 struct dv_stripe_reader **out)
{
	struct dv_stripe_reader *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->io = io;
	r->e = e;
	r->ra = window_of(io);
	/* The window, the chunk being read, and room for reads out of order. */
	r->nslots = r->ra + 4;
	if (r->nslots > e->nchunks + 1)
		r->nslots = e->nchunks + 1;
	if (r->ra > e->nchunks)
		r->ra = (unsigned)e->nchunks;
	ret = dv_ring_new(io->fds, io->ndev, io->qd, &r->ring);
	if (ret) {
		free(r);
		return ret;
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	for (unsigned i = 0; i < r->nslots; i++) {
		r->slots[i].chunk = -1;
		dv_io_batch_init(&r->slots[i].batch);
	}
	r->st.max_buffers = r->nslots;
	*out = r;
	return 0;
}

static void slot_free_buf(struct dv_stripe_reader *r, struct slot *s)
{
	if (!s->buf)
		return;
	free(s->buf);
	free(s->ios);
	s->buf = NULL;
	s->ios = NULL;
	r->st.buffers--;
	__atomic_fetch_sub(&r->io->buffers, r->io->chunk_bytes, __ATOMIC_RELAXED);
}

void dv_stripe_reader_free(struct dv_stripe_reader *r)
{
	if (!r)
		return;
	dv_ring_free(r->ring); /* waits for read-ahead still in flight */
	for (unsigned i = 0; i < r->nslots; i++)
		slot_free_buf(r, &r->slots[i]);
	pthread_cond_destroy(&r->cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void dv_stripe_reader_stats(struct dv_stripe_reader *r,
			    struct dv_stripe_reader_stats *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->st;
	pthread_mutex_unlock(&r->lock);
}

/*
 * With the lock held: waits until batch @b is done, reaping as the one
 * reaper (the lock dropped while in the kernel) or waiting for the reaper.
 * 0 or -errno of the ring.
 */
static int wait_batch(struct dv_stripe_reader *r, struct dv_io_batch *b)
{
	int ret = 0;

	while (b->pending && !ret) {
		if (r->reaping) {
			pthread_cond_wait(&r->cond, &r->lock);
			continue;
		}
		r->reaping = true;
		pthread_mutex_unlock(&r->lock);
		ret = dv_ring_wait_event(r->ring);
		pthread_mutex_lock(&r->lock);
		if (!ret)
			ret = dv_ring_reap(r->ring);
		r->reaping = false;
		pthread_cond_broadcast(&r->cond);
	}
	return ret;
}

/* Gives @s a buffer: within the budget, or because @must. */
static bool slot_buffer(struct dv_stripe_reader *r, struct slot *s, bool must)
{
	uint64_t cb = r->io->chunk_bytes;
	uint64_t now;

	if (s->buf)
		return true;
	now = __atomic_add_fetch(&r->io->buffers, cb, __ATOMIC_RELAXED);
	if (!must && now > r->io->buffer_budget) {
		__atomic_fetch_sub(&r->io->buffers, cb, __ATOMIC_RELAXED);
		return false;
	}
	s->buf = dv_stripe_buf_alloc((size_t)cb);
	s->ios = calloc(pieces(r->io), sizeof(*s->ios));
	if (!s->buf || !s->ios) {
		free(s->buf);
		free(s->ios);
		s->buf = NULL;
		s->ios = NULL;
		__atomic_fetch_sub(&r->io->buffers, cb, __ATOMIC_RELAXED);
		return false;
	}
	r->st.buffers++;
	return true;
}

static struct slot *find_slot(struct dv_stripe_reader *r, uint64_t c)
{
	for (unsigned i = 0; i < r->nslots; i++) {
		if (r->slots[i].chunk == (int64_t)c)
			return &r->slots[i];
	}
	return NULL;
}

/* Preference for reuse: lower is better. */
static int slot_rank(const struct slot *s)
{
	if (s->chunk < 0)
		return s->buf ? 0 : 3; /* a new buffer costs budget */
	return s->ahead ? 2 : 1;       /* keep the window while we can */
}

/* A load whose I/O is all done becomes ready, its error kept. */
static void settle(struct slot *s)
{
	if (s->state == SLOT_LOADING && !s->batch.pending) {
		s->err = s->batch.err;
		s->batch.err = 0;
		s->state = SLOT_READY;
	}
}

static bool slot_idle(const struct slot *s)
{
	return s->state != SLOT_LOADING && !s->pins && !s->checking;
}

/*
 * With the lock held: a slot to load a chunk into, not holding one of
 * [@keep_lo, @keep_hi]: an empty one with a buffer, else the least
 * recently used idle one, else a new buffer. @must: this read needs it
 * now: past the budget if need be, waiting for a busy slot rather than
 * giving up. Without @must, NULL when there is none to spare.
 */
static struct slot *claim_slot(struct dv_stripe_reader *r, uint64_t keep_lo,
			       uint64_t keep_hi, bool must)
{
	for (;;) {
		struct slot *best = NULL, *loading = NULL;

		for (unsigned i = 0; i < r->nslots; i++) {
			struct slot *s = &r->slots[i];

			if (s->chunk >= (int64_t)keep_lo && s->chunk <= (int64_t)keep_hi)
				continue;
			settle(s);
			if (!slot_idle(s)) {
				if (s->state == SLOT_LOADING && !s->pins &&
				    (!loading || s->used < loading->used))
					loading = s;
			} else if (!best || slot_rank(s) < slot_rank(best) ||
				   (slot_rank(s) == slot_rank(best) && s->used < best->used)) {
				best = s;
			}
		}
		if (best && !must && best->ahead)
			return NULL; /* read-ahead never evicts read-ahead */
		if (best && slot_buffer(r, best, must)) {
			best->chunk = -1;
			best->state = SLOT_EMPTY;
			best->ahead = false;
			return best;
		}
		if (!must)
			return NULL;
		if (loading)
			wait_batch(r, &loading->batch); /* then look again */
		else
			pthread_cond_wait(&r->cond, &r->lock); /* for an unpin */
	}
}

static void start_load(struct dv_stripe_reader *r, struct slot *s, uint64_t c,
		       bool ahead)
{
	struct dv_stripe_io *io = r->io;
	const struct dv_stripe_entry *e = r->e;
	uint64_t len = dv_stripe_io_len(dv_stripe_chunk_len(e->size,
							   io->chunk_bytes, c));
	uint64_t off = dv_stripe_slot_offset(io->data_offset, io->chunk_bytes,
					     e->chunks[c].slot);
	struct dv_io *v[64];
	size_t n = 0;

	s->chunk = (int64_t)c;
	s->state = SLOT_LOADING;
	s->checked = false;
	s->ahead = ahead;
	s->err = 0;
	s->used = ++r->tick;
	r->st.loads++;
	if (ahead)
		r->st.ahead_loads++;
	for (uint64_t at = 0; at < len; at += 4u << 20, n++) {
		s->ios[n] = (struct dv_io){
			.dev = e->chunks[c].dev,
			.buf = (char *)s->buf + at,
			.len = (size_t)(len - at < (4u << 20) ? len - at : (4u << 20)),
			.off = off + at,
			.batch = &s->batch,
		};
		v[n % 64] = &s->ios[n];
		if ((n + 1) % 64 == 0)
			dv_ring_submit(r->ring, v, 64);
	}
	if (n % 64)
		dv_ring_submit(r->ring, v, n % 64);
}

/*
 * With the lock held and @s pinned: waits for @s and checks it once, the
 * lock dropped while hashing. 0, -EBADMSG or -errno.
 */
static int slot_ready(struct dv_stripe_reader *r, struct slot *s)
{
	if (s->state == SLOT_LOADING) {
		int ret = wait_batch(r, &s->batch);

		settle(s);
		if (ret && !s->err)
			s->err = ret;
	}
	while (s->checking)
		pthread_cond_wait(&r->cond, &r->lock);
	if (!s->err && !s->checked) {
		bool ok;

		s->checking = true;
		pthread_mutex_unlock(&r->lock);
		ok = dv_stripe_chunk_ok(r->io, r->e, (uint64_t)s->chunk, s->buf);
		pthread_mutex_lock(&r->lock);
		s->checking = false;
		s->checked = true;
		if (!ok)
			s->err = -EBADMSG;
		pthread_cond_broadcast(&r->cond);
	}
	s->used = ++r->tick;
	return s->err;
}

/* Loads chunks [@lo, @hi] that are not there yet, as slots allow. */
static void start_range(struct dv_stripe_reader *r, uint64_t lo, uint64_t hi,
			uint64_t keep_lo, bool ahead)
{
	if (hi >= r->e->nchunks)
		hi = r->e->nchunks - 1;
	for (uint64_t c = lo; c <= hi; c++) {
		struct slot *s;

		if (find_slot(r, c))
			continue;
		s = claim_slot(r, keep_lo, hi, false);
		if (!s)
			return;
		start_load(r, s, c, ahead);
	}
}

/*
 * Notes a read at [@off, @off + @len); true when the reader is
 * sequential. A read that starts where one of the last RECENT reads ended
 * continues the run; one near the furthest end read (at most one chunk
 * past it, or behind it within the window: the kernel sends its own
 * read-ahead as several reads at once, which arrive out of order) leaves
 * the run as it is; any other read ends it. A random reader so never
 * starts one.
 */
static bool note_access(struct dv_stripe_reader *r, uint64_t off, size_t len)
{
	uint64_t cb = r->io->chunk_bytes;
	uint64_t behind = (uint64_t)(r->ra + 1) * cb;
	bool follows = false;

	for (unsigned i = 0; i < RECENT && !follows; i++)
		follows = r->ends[i] == off && off > 0;
	if (follows) {
		r->streak++;
	} else if (!(r->hi && off <= r->hi + cb && off + behind >= r->hi)) {
		r->streak = 0;
		r->hi = 0;
	}
	r->ends[r->nends++ % RECENT] = off + len;
	if (off + len > r->hi)
		r->hi = off + len;
	return r->streak >= 1;
}

/* Copies chunk @c's bytes [@from, @from + @n) out, the lock dropped. */
static int copy_chunk(struct dv_stripe_reader *r, uint64_t c, uint64_t first,
		      uint64_t last, char *dst, uint64_t from, uint64_t n)
{
	struct slot *s = find_slot(r, c);
	int ret;

	if (!s) {
		struct slot *fresh = claim_slot(r, first, last, true);

		s = find_slot(r, c); /* loaded by another thread meanwhile? */
		if (!s) {
			s = fresh;
			start_load(r, s, c, false);
		}
	}
	if (s->ahead) {
		s->ahead = false;
		r->st.ahead_hits++;
	}
	s->pins++;
	ret = slot_ready(r, s);
	if (!ret) {
		pthread_mutex_unlock(&r->lock);
		memcpy(dst, (char *)s->buf + from, (size_t)n);
		pthread_mutex_lock(&r->lock);
	}
	s->pins--;
	pthread_cond_broadcast(&r->cond);
	return ret;
}

static ssize_t read_cached(struct dv_stripe_reader *r, char *buf, size_t len,
			   uint64_t off)
{
	uint64_t cb = r->io->chunk_bytes;
	uint64_t first = off / cb, last = (off + len - 1) / cb;
	unsigned span = r->nslots > SPAN_MAX + 2 ? SPAN_MAX : r->nslots / 2;
	size_t done = 0;

	if (span == 0)
		span = 1;
	if (last - first + 1 > span)
		last = first + span - 1; /* a short read; the caller loops */
	/* All of this read's chunks in flight at once, then the window. */
	start_range(r, first, last, first, false);
	if (note_access(r, off, len))
		start_range(r, last + 1, last + r->ra, first, true);
	for (uint64_t c = first; c <= last; c++) {
		uint64_t from = c == first ? off - c * cb : 0;
		uint64_t n = dv_stripe_chunk_len(r->e->size, cb, c) - from;
		int ret;

		if (n > len - done)
			n = len - done;
		ret = copy_chunk(r, c, first, last, buf + done, from, n);
		if (ret)
			return ret;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* The direct path: whole chunks into the caller's aligned buffer. */
static bool direct_ok(const struct dv_stripe_reader *r, const void *buf,
		      size_t len, uint64_t off, uint64_t *nchunks)
{
	uint64_t cb = r->io->chunk_bytes;
	uint64_t n = len / cb;

	if ((uintptr_t)buf % DV_STRIPE_ALIGN || off % cb || n < r->io->ndev)
		return false;
	/* The last chunk's rounded-up length must fit in the buffer too. */
	if (off / cb + n == r->e->nchunks &&
	    dv_stripe_io_len(r->e->size - off - (n - 1) * cb) > len - (n - 1) * cb)
		n--;
	*nchunks = n;
	return n > 0;
}

/* With the lock held: the direct path, as the ring's only user meanwhile. */
static ssize_t read_direct(struct dv_stripe_reader *r, void *buf, size_t len,
			   uint64_t off, uint64_t n)
{
	uint64_t cb = r->io->chunk_bytes;
	int ret;

	while (r->reaping)
		pthread_cond_wait(&r->cond, &r->lock);
	ret = dv_stripe_read_chunks(r->io, r->ring, r->e, off / cb, n, buf);
	pthread_cond_broadcast(&r->cond); /* it may have reaped others' I/O */
	if (ret)
		return ret;
	r->st.direct++;
	return (ssize_t)(n * cb < len ? n * cb : len);
}

ssize_t dv_stripe_reader_read(struct dv_stripe_reader *r, void *buf,
			      size_t len, uint64_t off)
{
	uint64_t size = r->e->size, n;
	size_t done = 0;
	ssize_t ret = 0;

	if (off >= size || len == 0)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	pthread_mutex_lock(&r->lock);
	if (direct_ok(r, buf, len, off, &n)) {
		ret = read_direct(r, buf, len, off, n);
		if (ret > 0) {
			note_access(r, off, (size_t)ret);
			done = (size_t)ret;
			ret = 0;
		}
	}
	while (ret == 0 && done < len) {
		ret = read_cached(r, (char *)buf + done, len - done, off + done);
		if (ret > 0) {
			done += (size_t)ret;
			ret = 0;
		}
	}
	pthread_mutex_unlock(&r->lock);
	return ret < 0 ? ret : (ssize_t)done;
}
