/*
 * Reading an open stripe object (engine.h: dv_stripe_reader).
 *
 * Two paths. A large read into an aligned buffer that covers at least one
 * whole chunk per device goes straight to the caller's memory, every chunk
 * in flight at once. Anything else (FUSE reads of 128 KiB..1 MiB, the
 * hierarchy's promotion buffer) goes through a few chunk-sized slots: a
 * chunk is read whole, checked against its XXH3 once, and copied out from
 * as many times as readers need. When reads move forward, the reader
 * starts the next `ra` chunks (one per device, at least two) so that every
 * device stays busy ahead of a sequential reader.
 *
 * Slots are allocated lazily within the tier's buffer budget; a reader
 * always gets one, so a tight budget costs read-ahead, never correctness.
 * One mutex per reader: concurrent reads of one handle take turns (the
 * kernel's own read-ahead sends those; they then find their chunk ready).
 */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SLOTS 18u

enum slot_state { SLOT_EMPTY, SLOT_LOADING, SLOT_READY };

struct slot {
	int64_t chunk;          /* -1: none */
	enum slot_state state;
	bool checked;           /* compared with its checksum */
	int err;                /* of the load or the check */
	void *buf;              /* chunk_bytes, aligned; NULL until needed */
	struct dv_io *ios;
	struct dv_io_batch batch;
	uint64_t used;          /* reader tick of its last use */
};

struct dv_stripe_reader {
	struct dv_stripe_io *io;
	struct dv_stripe_entry *e;
	pthread_mutex_t lock;   /* serializes reads, and use of the ring */
	struct dv_ring *ring;   /* this reader's: reaped by whoever reads */
	uint64_t tick;
	uint64_t next_chunk;    /* where a sequential reader goes next */
	unsigned ra;            /* chunks to read ahead */
	unsigned nslots;
	struct slot slots[MAX_SLOTS];
};

static size_t pieces(const struct dv_stripe_io *io)
{
	return (size_t)((io->chunk_bytes + (4u << 20) - 1) / (4u << 20));
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
	r->ra = io->ndev < 2 ? 2 : io->ndev;
	r->nslots = r->ra + 2;
	if (r->nslots > MAX_SLOTS)
		r->nslots = MAX_SLOTS;
	if (r->nslots > e->nchunks + 1)
		r->nslots = e->nchunks + 1;
	ret = dv_ring_new(io->fds, io->ndev, io->qd, &r->ring);
	if (ret) {
		free(r);
		return ret;
	}
	pthread_mutex_init(&r->lock, NULL);
	for (unsigned i = 0; i < r->nslots; i++) {
		r->slots[i].chunk = -1;
		dv_io_batch_init(&r->slots[i].batch);
	}
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
	__atomic_fetch_sub(&r->io->buffers, r->io->chunk_bytes, __ATOMIC_RELAXED);
}

void dv_stripe_reader_free(struct dv_stripe_reader *r)
{
	if (!r)
		return;
	dv_ring_free(r->ring); /* waits for read-ahead still in flight */
	for (unsigned i = 0; i < r->nslots; i++)
		slot_free_buf(r, &r->slots[i]);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* Gives @s a buffer: within the budget, or because it is the first. */
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
		return s->buf ? 0 : 2; /* a new buffer costs budget */
	return 1;
}

/*
 * A slot to load a chunk into, not holding one of [@keep_lo, @keep_hi]:
 * an empty one with a buffer, else the least recently used idle one, else
 * a new buffer. @must: wait for a loading one rather than give up.
 */
static struct slot *claim_slot(struct dv_stripe_reader *r, uint64_t keep_lo,
			       uint64_t keep_hi, bool must)
{
	struct slot *best = NULL, *loading = NULL;

	for (unsigned i = 0; i < r->nslots; i++) {
		struct slot *s = &r->slots[i];

		if (s->chunk >= (int64_t)keep_lo && s->chunk <= (int64_t)keep_hi)
			continue;
		if (s->state == SLOT_LOADING) {
			if (!loading || s->used < loading->used)
				loading = s;
		} else if (!best || slot_rank(s) < slot_rank(best) ||
			   (slot_rank(s) == slot_rank(best) && s->used < best->used)) {
			best = s;
		}
	}
	if (best && !slot_buffer(r, best, must))
		best = NULL;
	if (!best && must && loading) {
		dv_ring_wait(r->ring, &loading->batch);
		best = loading;
	}
	if (best) {
		best->chunk = -1;
		best->state = SLOT_EMPTY;
	}
	return best;
}

static void start_load(struct dv_stripe_reader *r, struct slot *s, uint64_t c)
{
	struct dv_stripe_io *io = r->io;
	const struct dv_stripe_entry *e = r->e;
	uint64_t len = dv_stripe_io_len(dv_stripe_chunk_len(e->size,
							   io->chunk_bytes, c));
	uint64_t off = dv_stripe_slot_offset(io->data_offset, io->chunk_bytes,
					     e->chunks[c].slot);
	size_t n = 0;
	struct dv_io *v[MAX_SLOTS * 8];

	s->chunk = (int64_t)c;
	s->state = SLOT_LOADING;
	s->checked = false;
	s->err = 0;
	s->used = ++r->tick;
	for (uint64_t at = 0; at < len; at += 4u << 20, n++) {
		s->ios[n] = (struct dv_io){
			.dev = e->chunks[c].dev,
			.buf = (char *)s->buf + at,
			.len = (size_t)(len - at < (4u << 20) ? len - at : (4u << 20)),
			.off = off + at,
			.batch = &s->batch,
		};
		v[n % (sizeof(v) / sizeof(v[0]))] = &s->ios[n];
		if ((n + 1) % (sizeof(v) / sizeof(v[0])) == 0)
			dv_ring_submit(r->ring, v, sizeof(v) / sizeof(v[0]));
	}
	if (n % (sizeof(v) / sizeof(v[0])))
		dv_ring_submit(r->ring, v, n % (sizeof(v) / sizeof(v[0])));
}

/* Waits for @s and checks it once. 0, -EBADMSG or -errno. */
static int slot_ready(struct dv_stripe_reader *r, struct slot *s)
{
	if (s->state == SLOT_LOADING) {
		s->err = dv_ring_wait(r->ring, &s->batch);
		s->state = SLOT_READY;
	}
	if (!s->err && !s->checked) {
		if (!dv_stripe_chunk_ok(r->io, r->e, (uint64_t)s->chunk, s->buf))
			s->err = -EBADMSG;
		s->checked = true;
	}
	s->used = ++r->tick;
	return s->err;
}

/* Starts chunks after @last that are not loaded yet, as slots allow. */
static void read_ahead(struct dv_stripe_reader *r, uint64_t first, uint64_t last)
{
	uint64_t end = last + r->ra;

	if (end >= r->e->nchunks)
		end = r->e->nchunks - 1;
	for (uint64_t c = last + 1; c <= end; c++) {
		struct slot *s;

		if (find_slot(r, c))
			continue;
		s = claim_slot(r, first, end, false);
		if (!s)
			return;
		start_load(r, s, c);
	}
}

static ssize_t read_cached(struct dv_stripe_reader *r, char *buf, size_t len,
			   uint64_t off)
{
	uint64_t cb = r->io->chunk_bytes;
	uint64_t first = off / cb, last = (off + len - 1) / cb;
	bool sequential = first == r->next_chunk || first + 1 == r->next_chunk;
	size_t done = 0;

	if (last - first + 1 > r->nslots)
		last = first + r->nslots - 1; /* a short read; the caller loops */
	for (uint64_t c = first; c <= last; c++) {
		struct slot *s = find_slot(r, c);

		if (!s) {
			s = claim_slot(r, first, last, true);
			if (!s)
				return -ENOMEM;
			start_load(r, s, c);
		}
	}
	if (sequential || first == 0)
		read_ahead(r, first, last);
	for (uint64_t c = first; c <= last; c++) {
		struct slot *s = find_slot(r, c);
		uint64_t from = c == first ? off - c * cb : 0;
		uint64_t clen = dv_stripe_chunk_len(r->e->size, cb, c);
		uint64_t n = clen - from;
		int ret = slot_ready(r, s);

		if (ret)
			return ret;
		if (n > len - done)
			n = len - done;
		memcpy(buf + done, (char *)s->buf + from, (size_t)n);
		done += (size_t)n;
	}
	r->next_chunk = (off + done) / cb;
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
		ret = dv_stripe_read_chunks(r->io, r->ring, r->e,
					    off / r->io->chunk_bytes, n, buf);
		if (ret == 0)
			done = (size_t)(n * r->io->chunk_bytes);
		if (done > len)
			done = len;
		r->next_chunk = (off + done) / r->io->chunk_bytes;
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
