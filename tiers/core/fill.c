/*
 * The streaming fill (fill.h). One mutex per fill guards the chunk states;
 * workers hold it only to pick a chunk and to settle it, never across a
 * fetch, a write or a hash.
 */
#include "fill.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "digest.h"

enum chunk_state {
	C_MISSING = 0,
	C_FLIGHT,
	C_DONE,
	C_FAILED,
};

struct dv_fill {
	pthread_mutex_t lock;
	pthread_cond_t cond;     /* a chunk settled, or the fill ended */
	unsigned refs;           /* protected by lock */

	int fd;
	char hash[65];
	char label[256];
	uint64_t size;
	bool check_whole;
	uint8_t sha256[32];
	struct dv_fetcher fetcher;
	struct dv_shard_ref ref; /* points at the copies above */
	struct dv_chunks chunks;
	bool resume;
	unsigned timeout_ms;
	struct dv_fill_limit *limit;
	void (*done)(void *arg, struct dv_fill *f, int result);
	void *done_arg;

	/* protected by lock: */
	uint8_t *state;          /* enum chunk_state per chunk */
	uint8_t *wanted;         /* a reader waits for it */
	uint32_t cursor;         /* where the last read ended, in chunks */
	unsigned workers;        /* still running */
	uint64_t t_start;        /* ns, CLOCK_MONOTONIC */
	bool going;              /* a read came, or the opener left */
	bool cancelled;
	bool finished;
	int result;
	int fail_err;            /* of the first failed chunk */
	struct dv_fill_progress prog;
};

void dv_fill_limit_init(struct dv_fill_limit *l, unsigned max)
{
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	l->max = max;
	l->used = 0;
}

void dv_fill_limit_release(struct dv_fill_limit *l)
{
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
}

static void limit_take(struct dv_fill_limit *l)
{
	if (!l || !l->max)
		return;
	pthread_mutex_lock(&l->lock);
	while (l->used >= l->max)
		pthread_cond_wait(&l->cond, &l->lock);
	l->used++;
	pthread_mutex_unlock(&l->lock);
}

static void limit_give(struct dv_fill_limit *l)
{
	if (!l || !l->max)
		return;
	pthread_mutex_lock(&l->lock);
	l->used--;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The first chunk in [from, to) with @state, or UINT32_MAX. */
static uint32_t first_in(const struct dv_fill *f, uint32_t from, uint32_t to,
			 bool want_only)
{
	for (uint32_t i = from; i < to; i++) {
		if (f->state[i] == C_MISSING && (!want_only || f->wanted[i]))
			return i;
	}
	return UINT32_MAX;
}

/*
 * Under the lock: what a reader waits for, then onward from the last
 * read (read-ahead), then the rest from the start. UINT32_MAX: nothing.
 */
static uint32_t pick(struct dv_fill *f)
{
	uint32_t n = f->chunks.n, i;

	if (f->cancelled)
		return UINT32_MAX;
	i = first_in(f, 0, n, true);
	if (i == UINT32_MAX)
		i = first_in(f, f->cursor < n ? f->cursor : n, n, false);
	if (i == UINT32_MAX)
		i = first_in(f, 0, n, false);
	return i;
}

/*
 * Chunk @i of the staging file, mapped: the bytes that arrive land in the
 * file's page cache as they come, so a fill killed mid-chunk keeps what it
 * had received. NULL when the file cannot be mapped (then a buffer and a
 * write).
 */
static uint8_t *map_chunk(struct dv_fill *f, uint32_t i)
{
	uint64_t off = (uint64_t)i * f->chunks.chunk_size;
	void *p = mmap(NULL, dv_chunks_len(&f->chunks, i), PROT_READ | PROT_WRITE,
		       MAP_SHARED, f->fd, (off_t)off);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * What a killed fill left of a chunk: the bytes up to its last non-zero
 * one (a part never written is a hole, and reads as zeros), whole pages.
 * Trailing zeros that were received are fetched again: harmless.
 */
static uint32_t kept_prefix(const uint8_t *p, uint32_t len)
{
	while (len > 0 && p[len - 1] == 0)
		len--;
	return len & ~4095u;
}

static int fetch(struct dv_fill *f, uint64_t off, uint32_t len, uint8_t *dst)
{
	int ret;

	limit_take(f->limit);
	ret = f->fetcher.fetch_range(f->fetcher.arg, &f->ref, off, len, dst);
	limit_give(f->limit);
	if (ret == 0)
		__atomic_fetch_add(&f->prog.fetched_bytes, len, __ATOMIC_RELAXED);
	return ret;
}

/*
 * A resumed staging file may hold chunk @i already (*@whole), or its
 * start: then only the rest is fetched. True when @p is the chunk.
 */
static bool reuse(struct dv_fill *f, uint32_t i, uint8_t *p, bool mapped,
		  bool *whole)
{
	uint64_t off = (uint64_t)i * f->chunks.chunk_size;
	uint32_t len = dv_chunks_len(&f->chunks, i), keep;

	*whole = false;
	if (!mapped && dv_pread_full(f->fd, p, len, off))
		return false;
	if (dv_chunks_check(&f->chunks, i, p)) {
		*whole = true;
		return true;
	}
	keep = kept_prefix(p, len);
	return keep > 0 && keep < len &&
	       fetch(f, off + keep, len - keep, p + keep) == 0 &&
	       dv_chunks_check(&f->chunks, i, p);
}

/* Fetches chunk @i into @buf and checks it, twice at most. */
static int fetch_chunk(struct dv_fill *f, uint32_t i, void *buf)
{
	uint64_t off = (uint64_t)i * f->chunks.chunk_size;
	uint32_t len = dv_chunks_len(&f->chunks, i);
	int ret = -EIO;

	for (int attempt = 0; attempt < 2; attempt++) {
		ret = fetch(f, off, len, buf);
		if (ret)
			return ret;
		if (dv_chunks_check(&f->chunks, i, buf))
			return 0;
		dv_err("%s (%s): chunk %" PRIu32 " (bytes %" PRIu64 "-%" PRIu64
		       ") does not match its digest%s", f->label, f->hash, i,
		       off, off + len - 1, attempt ? "; giving up" : "; fetching it again");
		ret = -EBADMSG;
	}
	return ret;
}

static int settle_chunk(struct dv_fill *f, uint32_t i, void *buf, bool *reused)
{
	uint64_t off = (uint64_t)i * f->chunks.chunk_size;
	uint32_t len = dv_chunks_len(&f->chunks, i);
	uint8_t *map = map_chunk(f, i), *p = map ? map : buf;
	int ret = 0;

	*reused = false;
	if (!f->resume || !reuse(f, i, p, map != NULL, reused))
		ret = fetch_chunk(f, i, p);
	if (ret == 0 && !map)
		ret = dv_pwrite_full(f->fd, p, len, off);
	if (map)
		munmap(map, len);
	return ret;
}

/* The whole file against the manifest's sha256. */
static int check_whole(struct dv_fill *f)
{
	uint8_t got[32];
	int ret;

	if (!f->check_whole)
		return 0;
	ret = dv_sha256_fd(f->fd, got);
	if (ret)
		return ret;
	if (memcmp(got, f->sha256, 32) != 0) {
		dv_err("%s (%s): every chunk matched its list, but the whole shard does not match the manifest's sha256; discarded",
		       f->label, f->hash);
		return -EBADMSG;
	}
	return 0;
}

/* The last worker out: the verdict, then done(). */
static void finish(struct dv_fill *f)
{
	int result;

	pthread_mutex_lock(&f->lock);
	if (f->prog.done == f->chunks.n)
		result = 0;
	else if (f->prog.failed)
		result = f->fail_err;
	else
		result = -ECANCELED;
	pthread_mutex_unlock(&f->lock);
	if (result == 0)
		result = check_whole(f);
	f->done(f->done_arg, f, result);
	pthread_mutex_lock(&f->lock);
	f->finished = true;
	f->result = result;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void *worker(void *arg)
{
	struct dv_fill *f = arg;
	void *buf = malloc(f->chunks.chunk_size ? f->chunks.chunk_size : 1);
	bool last;

	pthread_mutex_lock(&f->lock);
	/* Nothing is fetched before it is known where the reader starts. */
	while (!f->going && !f->cancelled)
		pthread_cond_wait(&f->cond, &f->lock);
	for (;;) {
		uint32_t i = buf ? pick(f) : UINT32_MAX;
		bool reused;
		int ret;

		if (i == UINT32_MAX)
			break;
		f->state[i] = C_FLIGHT;
		f->prog.in_flight++;
		pthread_mutex_unlock(&f->lock);
		ret = settle_chunk(f, i, buf, &reused);
		pthread_mutex_lock(&f->lock);
		f->prog.in_flight--;
		if (ret == 0) {
			f->state[i] = C_DONE;
			f->prog.done++;
			f->prog.reused += reused;
		} else {
			f->state[i] = C_FAILED;
			if (!f->prog.failed++)
				f->fail_err = ret == -EBADMSG ? -EIO : ret;
		}
		pthread_cond_broadcast(&f->cond);
	}
	last = --f->workers == 0;
	pthread_mutex_unlock(&f->lock);
	free(buf);
	if (last)
		finish(f);
	dv_fill_put(f);
	return NULL;
}

static void fill_free(struct dv_fill *f)
{
	dv_chunks_release(&f->chunks);
	free(f->state);
	free(f->wanted);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

static int copy_params(struct dv_fill *f, const struct dv_fill_params *p)
{
	const struct dv_shard_ref *ref = p->ref;

	f->fd = p->fd;
	snprintf(f->hash, sizeof(f->hash), "%s", ref->hash);
	snprintf(f->label, sizeof(f->label), "%s", ref->label ? ref->label : ref->hash);
	f->size = ref->size;
	f->check_whole = ref->sha256 != NULL;
	if (ref->sha256)
		memcpy(f->sha256, ref->sha256, 32);
	f->ref.hash = f->hash;
	f->ref.size = f->size;
	f->ref.sha256 = f->check_whole ? f->sha256 : NULL;
	f->ref.label = f->label;
	f->fetcher = *p->fetcher;
	f->chunks = *p->chunks;
	memset(p->chunks, 0, sizeof(*p->chunks));
	f->resume = p->resume;
	f->timeout_ms = p->timeout_ms;
	f->limit = p->limit;
	f->done = p->done;
	f->done_arg = p->arg;
	f->prog.chunks = f->chunks.n;
	f->state = calloc(f->chunks.n ? f->chunks.n : 1, 1);
	f->wanted = calloc(f->chunks.n ? f->chunks.n : 1, 1);
	return f->state && f->wanted ? 0 : -ENOMEM;
}

int dv_fill_start(const struct dv_fill_params *p, struct dv_fill **out)
{
	unsigned n = p->parallel ? p->parallel : 1;
	struct dv_fill *f = calloc(1, sizeof(*f));
	int ret;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->refs = 1;
	f->t_start = now_ns();
	ret = copy_params(f, p);
	if (ret) {
		fill_free(f);
		return ret;
	}
	if (n > DV_FILL_MAX_PARALLEL)
		n = DV_FILL_MAX_PARALLEL;
	if (n > f->chunks.n)
		n = f->chunks.n ? f->chunks.n : 1;
	pthread_mutex_lock(&f->lock);
	for (unsigned i = 0; i < n; i++) {
		pthread_attr_t attr;
		pthread_t t;

		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		f->refs++;
		f->workers++;
		ret = pthread_create(&t, &attr, worker, f);
		pthread_attr_destroy(&attr);
		if (ret) {
			f->refs--;
			f->workers--;
			break;
		}
	}
	if (f->workers == 0) {
		pthread_mutex_unlock(&f->lock);
		fill_free(f);
		return -EAGAIN;
	}
	pthread_mutex_unlock(&f->lock);
	*out = f;
	return 0;
}

void dv_fill_get(struct dv_fill *f)
{
	pthread_mutex_lock(&f->lock);
	f->refs++;
	pthread_mutex_unlock(&f->lock);
}

void dv_fill_put(struct dv_fill *f)
{
	bool last;

	if (!f)
		return;
	pthread_mutex_lock(&f->lock);
	last = --f->refs == 0;
	pthread_mutex_unlock(&f->lock);
	if (last)
		fill_free(f);
}

/* Under the lock: 1 when [first, last] is in, -errno when it cannot be. */
static int covered(struct dv_fill *f, uint32_t first, uint32_t last)
{
	for (uint32_t i = first; i <= last; i++) {
		if (f->state[i] == C_FAILED)
			return f->fail_err ? f->fail_err : -EIO;
		if (f->state[i] != C_DONE)
			return f->finished || f->cancelled ? -ECANCELED : 0;
	}
	return 1;
}

int dv_fill_wait(struct dv_fill *f, uint64_t off, uint64_t len)
{
	uint32_t cs = f->chunks.chunk_size, first, last;
	struct timespec deadline;
	bool waited = false;
	int ret = 0;

	if (len == 0 || off >= f->size)
		return 0;
	if (len > f->size - off)
		len = f->size - off;
	first = (uint32_t)(off / cs);
	last = (uint32_t)((off + len - 1) / cs);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += f->timeout_ms / 1000;
	deadline.tv_nsec += (long)(f->timeout_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->lock);
	f->cursor = last + 1;
	for (uint32_t i = first; i <= last; i++)
		f->wanted[i] = 1;
	if (!f->going) {
		f->going = true;
		pthread_cond_broadcast(&f->cond);
	}
	while ((ret = covered(f, first, last)) == 0) {
		waited = true;
		if (pthread_cond_timedwait(&f->cond, &f->lock, &deadline) == ETIMEDOUT) {
			ret = covered(f, first, last);
			if (ret == 0)
				ret = -ETIMEDOUT;
			break;
		}
	}
	f->prog.waits += waited;
	if (ret > 0 && !f->prog.ttfb_ns)
		f->prog.ttfb_ns = now_ns() - f->t_start;
	pthread_mutex_unlock(&f->lock);
	return ret < 0 ? ret : 0;
}

void dv_fill_go(struct dv_fill *f)
{
	pthread_mutex_lock(&f->lock);
	f->going = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

void dv_fill_cancel(struct dv_fill *f)
{
	pthread_mutex_lock(&f->lock);
	f->cancelled = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

bool dv_fill_finished(struct dv_fill *f, int *result)
{
	bool fin;

	pthread_mutex_lock(&f->lock);
	fin = f->finished;
	if (fin && result)
		*result = f->result;
	pthread_mutex_unlock(&f->lock);
	return fin;
}

void dv_fill_progress(struct dv_fill *f, struct dv_fill_progress *out)
{
	pthread_mutex_lock(&f->lock);
	*out = f->prog;
	out->fetched_bytes = __atomic_load_n(&f->prog.fetched_bytes, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
}

const char *dv_fill_hash(const struct dv_fill *f)
{
	return f->hash;
}

const char *dv_fill_label(const struct dv_fill *f)
{
	return f->label;
}

uint64_t dv_fill_size(const struct dv_fill *f)
{
	return f->size;
}
