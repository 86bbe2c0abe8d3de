/*
 * The io_uring rings and whole-object transfers (engine.h).
 *
 * A ring is used by one thread at a time, which both submits and reaps:
 * no locking here. The number of I/Os in flight never exceeds the ring's
 * size, so the completion queue (twice that) cannot overflow.
 *
 * The descriptors are not registered with the ring (IOSQE_FIXED_FILE): a
 * ring is torn down asynchronously by the kernel, and registered files
 * would keep the devices' flocks and O_EXCL claims alive for a moment after
 * the daemon exits, failing the next daemon's open.
 *
 * What this file does not do: choose slots (stripe.c), know what a FUSE
 * read is (reader.c).
 */
#include "engine.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "config/log.h"
#include "config/util.h"

#define QD_MIN 16u
#define QD_MAX 64u
#define RING_MAX 1024u
#define IO_PIECE (4u << 20) /* larger chunks are cut into pieces of this */
#define STALL_SECONDS 60
#define HUGE_BYTES (2u << 20)

struct dev_queue {
	struct dv_io *head, *tail; /* waiting for a free place in flight */
	unsigned inflight;
};

struct dv_ring {
	struct io_uring ring;
	const int *fds;
	unsigned ndev;
	unsigned qd;              /* per device */
	unsigned entries;         /* bound on all in flight */
	unsigned inflight;
	size_t queued;            /* in the FIFOs */
	struct dev_queue q[];
};

/* ---- rings ---- */

unsigned dv_ring_default_qd(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned qd = cpus > 0 ? (unsigned)cpus * 4 : QD_MIN;

	return qd < QD_MIN ? QD_MIN : qd > QD_MAX ? QD_MAX : qd;
}

static unsigned pow2_at_least(unsigned v)
{
	unsigned p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

int dv_ring_new(const int *fds, unsigned ndev, unsigned qd,
		struct dv_ring **out)
{
	struct dv_ring *r = calloc(1, sizeof(*r) + ndev * sizeof(r->q[0]));
	int ret;

	if (!r)
		return -ENOMEM;
	r->fds = fds;
	r->ndev = ndev;
	r->qd = qd ? qd : dv_ring_default_qd();
	r->entries = pow2_at_least(r->qd * ndev);
	if (r->entries > RING_MAX)
		r->entries = RING_MAX;
	ret = io_uring_queue_init(r->entries, &r->ring, 0);
	if (ret < 0) {
		dv_err("stripe: io_uring_queue_init(%u): %s", r->entries,
		       strerror(-ret));
		free(r);
		return ret;
	}
	*out = r;
	return 0;
}

static void enqueue(struct dev_queue *q, struct dv_io *io, bool front)
{
	io->next = NULL;
	if (!q->head) {
		q->head = q->tail = io;
	} else if (front) {
		io->next = q->head;
		q->head = io;
	} else {
		q->tail->next = io;
		q->tail = io;
	}
}

static void prep(struct dv_ring *r, struct io_uring_sqe *sqe, struct dv_io *io)
{
	char *buf = (char *)io->buf + io->done;
	unsigned len = (unsigned)(io->len - io->done);
	uint64_t off = io->off + io->done;

	if (io->write)
		io_uring_prep_write(sqe, r->fds[io->dev], buf, len, off);
	else
		io_uring_prep_read(sqe, r->fds[io->dev], buf, len, off);
	io_uring_sqe_set_data(sqe, io);
}

/* Moves queued I/Os into the SQ while devices have room; submits them. */
static void pump(struct dv_ring *r)
{
	bool any = false;

	for (unsigned d = 0; d < r->ndev && r->queued; d++) {
		struct dev_queue *q = &r->q[d];

		while (q->head && q->inflight < r->qd && r->inflight < r->entries) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
			struct dv_io *io = q->head;

			if (!sqe)
				break;
			q->head = io->next;
			if (!q->head)
				q->tail = NULL;
			prep(r, sqe, io);
			q->inflight++;
			r->inflight++;
			r->queued--;
			any = true;
		}
	}
	if (any)
		io_uring_submit(&r->ring);
}

void dv_ring_submit(struct dv_ring *r, struct dv_io **ios, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ios[i]->done = 0;
		ios[i]->batch->pending++;
		enqueue(&r->q[ios[i]->dev], ios[i], false);
	}
	r->queued += n;
	pump(r);
}

/* One completion: done (res < 0 an error), or short: the rest is requeued. */
static void complete(struct dv_ring *r, struct dv_io *io, int res)
{
	r->q[io->dev].inflight--;
	r->inflight--;
	if (res > 0 && io->done + (size_t)res < io->len) {
		io->done += (size_t)res;
		enqueue(&r->q[io->dev], io, true);
		r->queued++;
		return;
	}
	if (res <= 0 && !io->batch->err)
		io->batch->err = res < 0 ? res : -EIO; /* 0: past the end */
	io->batch->pending--;
}

/* Waits for at least one completion and handles all that are there. */
static int reap(struct dv_ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	int ret = io_uring_submit_and_wait(&r->ring, 1);

	if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
		dv_err("stripe: waiting for I/O: %s", strerror(-ret));
		return ret;
	}
	io_uring_for_each_cqe(&r->ring, head, cqe) {
		complete(r, io_uring_cqe_get_data(cqe), cqe->res);
		seen++;
	}
	io_uring_cq_advance(&r->ring, seen);
	pump(r);
	return 0;
}

int dv_ring_wait_event(struct dv_ring *r)
{
	struct io_uring_cqe *cqe;
	int ret = io_uring_wait_cqe(&r->ring, &cqe);

	if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
		dv_err("stripe: waiting for I/O: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

int dv_ring_reap(struct dv_ring *r)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;

	io_uring_for_each_cqe(&r->ring, head, cqe) {
		complete(r, io_uring_cqe_get_data(cqe), cqe->res);
		seen++;
	}
	io_uring_cq_advance(&r->ring, seen);
	pump(r);
	return 0;
}

int dv_ring_wait(struct dv_ring *r, struct dv_io_batch *b)
{
	int err;

	while (b->pending) {
		int ret = reap(r);

		if (ret)
			return ret; /* the ring is broken: nothing more completes */
	}
	err = b->err;
	b->err = 0;
	return err;
}

void dv_ring_free(struct dv_ring *r)
{
	if (!r)
		return;
	while ((r->inflight || r->queued) && reap(r) == 0)
		;
	io_uring_queue_exit(&r->ring);
	free(r);
}

/* ---- objects ---- */

void *dv_stripe_buf_alloc(size_t len)
{
	size_t align = len >= HUGE_BYTES ? HUGE_BYTES : DV_STRIPE_ALIGN;
	void *p = NULL;

	if (posix_memalign(&p, align, len ? len : DV_STRIPE_ALIGN))
		return NULL;
	/*
	 * Huge pages where the system allows them on request: pinning a
	 * chunk's pages for O_DIRECT, and the kernel's copies into them, then
	 * cost a few entries instead of a thousand (on a copying device, a
	 * loop device over tmpfs, reads go 20-40% faster).
	 */
	if (align == HUGE_BYTES)
		madvise(p, len, MADV_HUGEPAGE);
	return p;
}

/* The pieces of chunk @i: how many I/Os of at most IO_PIECE it takes. */
static size_t pieces_of(uint64_t io_len)
{
	return (size_t)((io_len + IO_PIECE - 1) / IO_PIECE);
}

/*
 * Fills @ios (pieces_of entries) for chunk @i of @e at @buf, in batch @b,
 * and appends them to @v. Returns how many.
 */
static size_t prep_chunk(struct dv_stripe_io *io, const struct dv_stripe_entry *e,
			 uint64_t i, void *buf, bool write, struct dv_io *ios,
			 struct dv_io_batch *b, struct dv_io **v)
{
	uint64_t len = dv_stripe_io_len(dv_stripe_chunk_len(e->size,
							   io->chunk_bytes, i));
	uint64_t off = dv_stripe_slot_offset(io->data_offset, io->chunk_bytes,
					     e->chunks[i].slot);
	size_t n = pieces_of(len);

	for (size_t k = 0; k < n; k++) {
		uint64_t at = (uint64_t)k * IO_PIECE;

		ios[k] = (struct dv_io){
			.dev = e->chunks[i].dev,
			.write = write,
			.buf = (char *)buf + at,
			.len = (size_t)(len - at < IO_PIECE ? len - at : IO_PIECE),
			.off = off + at,
			.batch = b,
		};
		v[k] = &ios[k];
	}
	return n;
}

/* Submits chunk @i of @e at @buf in batch @b, with @ios for its pieces. */
static int submit_chunk(struct dv_stripe_io *io, struct dv_ring *ring,
			const struct dv_stripe_entry *e, uint64_t i, void *buf,
			bool write, struct dv_io *ios, struct dv_io_batch *b)
{
	struct dv_io **v = calloc(pieces_of(io->chunk_bytes), sizeof(*v));
	size_t n;

	if (!v)
		return -ENOMEM;
	n = prep_chunk(io, e, i, buf, write, ios, b, v);
	dv_ring_submit(ring, v, n);
	free(v);
	return 0;
}

static bool is_checked(const struct dv_stripe_entry *e, uint64_t i)
{
	return (__atomic_load_n(&e->checked[i / 64], __ATOMIC_RELAXED) >>
		(i % 64)) & 1;
}

static void set_checked(struct dv_stripe_entry *e, uint64_t i)
{
	__atomic_fetch_or(&e->checked[i / 64], 1ULL << (i % 64),
			  __ATOMIC_RELAXED);
}

bool dv_stripe_chunk_ok(const struct dv_stripe_io *io,
			struct dv_stripe_entry *e, uint64_t i, const void *buf)
{
	uint64_t len = dv_stripe_chunk_len(e->size, io->chunk_bytes, i);

	if (io->check == DV_STRIPE_CHECK_NEVER ||
	    (io->check == DV_STRIPE_CHECK_FIRST && is_checked(e, i)))
		return true;
	if (XXH3_64bits(buf, (size_t)len) != e->chunks[i].xxh)
		return false;
	set_checked(e, i);
	return true;
}

int dv_stripe_read_chunks(struct dv_stripe_io *io, struct dv_ring *ring,
			  struct dv_stripe_entry *e, uint64_t first, uint64_t n,
			  void *buf)
{
	size_t per = pieces_of(io->chunk_bytes), nv = 0;
	struct dv_io *ios = calloc((size_t)n * per, sizeof(*ios));
	struct dv_io **v = calloc((size_t)n * per, sizeof(*v));
	struct dv_io_batch *b = calloc((size_t)n, sizeof(*b));
	int ret = 0;

	if (!ios || !v || !b) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint64_t k = 0; k < n; k++)
		nv += prep_chunk(io, e, first + k,
				 (char *)buf + k * io->chunk_bytes, false,
				 ios + k * per, &b[k], v + nv);
	dv_ring_submit(ring, v, nv); /* one system call for all */
	/* In order: the checksum of one overlaps the transfer of the next. */
	for (uint64_t k = 0; k < n; k++) {
		int r = dv_ring_wait(ring, &b[k]);

		if (!ret && !r && !dv_stripe_chunk_ok(io, e, first + k,
						      (char *)buf + k * io->chunk_bytes))
			r = -EBADMSG;
		if (!ret)
			ret = r;
	}
out:
	free(b);
	free(v);
	free(ios);
	return ret;
}

/* ---- install ---- */

/* One chunk buffer of the write pipeline. */
struct wbuf {
	void *buf;
	struct dv_io *ios;
	struct dv_io_batch batch;
};

static int sync_devices(struct dv_stripe_io *io, const bool *used)
{
	for (unsigned d = 0; d < io->ndev; d++) {
		if (used[d] && fdatasync(io->fds[d]))
			return -errno;
	}
	return 0;
}

/*
 * The test hook of dv_stripe_write_object: armed while the file @path
 * exists; then creates "@path.stalled" and sleeps.
 */
static void stall_here(const char *path)
{
	struct timespec ts = { STALL_SECONDS, 0 };
	char done[4096];
	int fd;

	if (access(path, F_OK) != 0)
		return;
	snprintf(done, sizeof(done), "%s.stalled", path);
	fd = open(done, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	dv_warn("stripe: test hook: install stalled (%s)", path);
	nanosleep(&ts, NULL);
}

static int write_chunks(struct dv_stripe_io *io, struct dv_ring *ring,
			struct dv_stripe_entry *e, int src_fd, const char *stall,
			struct wbuf *w, size_t nbuf, bool *used)
{
	int ret = 0;

	for (uint64_t i = 0; i < e->nchunks && !ret; i++) {
		struct wbuf *b = &w[i % nbuf];
		uint64_t len = dv_stripe_chunk_len(e->size, io->chunk_bytes, i);
		uint64_t padded = dv_stripe_io_len(len);

		ret = dv_ring_wait(ring, &b->batch);
		if (ret)
			break;
		if (stall && i == e->nchunks / 2 && i > 0) {
			for (size_t k = 0; k < nbuf; k++)
				dv_ring_wait(ring, &w[k].batch);
			ret = sync_devices(io, used);
			if (ret)
				break;
			stall_here(stall);
		}
		ret = dv_pread_full(src_fd, b->buf, (size_t)len, i * io->chunk_bytes);
		if (ret)
			break;
		memset((char *)b->buf + len, 0, (size_t)(padded - len));
		e->chunks[i].xxh = XXH3_64bits(b->buf, (size_t)len);
		used[e->chunks[i].dev] = true;
		ret = submit_chunk(io, ring, e, i, b->buf, true, b->ios,
				   &b->batch);
	}
	for (size_t k = 0; k < nbuf; k++) {
		int r = dv_ring_wait(ring, &w[k].batch);

		if (!ret)
			ret = r;
	}
	return ret;
}

int dv_stripe_write_object(struct dv_stripe_io *io, struct dv_stripe_entry *e,
			   int src_fd, const char *stall)
{
	size_t nbuf = 2 * io->ndev;
	size_t per = pieces_of(io->chunk_bytes);
	bool used[DV_STRIPE_MAX_DEVICES] = { false };
	struct dv_ring *ring;
	struct wbuf *w;
	int ret;

	if (nbuf > e->nchunks)
		nbuf = e->nchunks ? e->nchunks : 1;
	ret = dv_ring_new(io->fds, io->ndev, io->qd, &ring);
	if (ret)
		return ret;
	ret = -ENOMEM;
	w = calloc(nbuf, sizeof(*w));
	if (!w)
		goto out_ring;
	for (size_t k = 0; k < nbuf; k++) {
		w[k].buf = dv_stripe_buf_alloc((size_t)io->chunk_bytes);
		w[k].ios = calloc(per, sizeof(*w[k].ios));
		if (!w[k].buf || !w[k].ios)
			goto out;
	}
	ret = write_chunks(io, ring, e, src_fd, stall, w, nbuf, used);
	if (!ret)
		ret = sync_devices(io, used);
	for (uint64_t i = 0; i < e->nchunks && !ret; i++)
		set_checked(e, i); /* its xxh3 was computed from these bytes */
out:
	dv_ring_free(ring); /* after every write is done: buffers go next */
	ring = NULL;
	for (size_t k = 0; k < nbuf; k++) {
		free(w[k].buf);
		free(w[k].ios);
	}
	free(w);
out_ring:
	dv_ring_free(ring);
	return ret;
}
