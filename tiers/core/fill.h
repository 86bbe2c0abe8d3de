/*
 * A streaming fill: a cold shard fetched chunk by chunk into its staging
 * file, several ranged fetches in flight, every chunk checked against the
 * shard's chunk list (chunks.h) before anyone may read it.
 *
 * Readers do not wait for the whole shard: dv_fill_wait() returns as soon
 * as the chunks under a byte range are in and verified, and moves them to
 * the front of the queue. Nothing is fetched before the first read (or the
 * opener's close). Workers fetch what readers wait for first, then
 * onward from where the last read ended (a sequential reader's
 * read-ahead), then whatever is left: the fill runs to the end whether or
 * not anyone still reads, because the next epoch wants the whole shard.
 *
 * A chunk whose bytes do not match is fetched once more; if they still do
 * not match, the reads that need it fail with EIO and the fill ends
 * without the shard (other chunks are still served). A staging file left
 * by a killed daemon (resume) is reused: each chunk is first checked in
 * place, and only the ones that fail are fetched.
 *
 * When every chunk is settled, the whole file is checked against the
 * manifest's sha256, and done() is called once, from a worker, with 0
 * (the file is the shard) or -errno. What to do then (install, unlock) is
 * the caller's: this file knows no tier.
 *
 * Not here: where the staging file lives (the hierarchy), the network
 * (the fetcher's fetch_range), FUSE.
 */
#ifndef DV_FILL_H
#define DV_FILL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "chunks.h"
#include "fetcher.h"

#define DV_FILL_MAX_PARALLEL 32

struct dv_fill;

/* Connections of a whole daemon: fills take one per fetch in flight. */
struct dv_fill_limit {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned max;            /* 0: no limit */
	unsigned used;           /* protected by lock */
};

void dv_fill_limit_init(struct dv_fill_limit *l, unsigned max);
void dv_fill_limit_release(struct dv_fill_limit *l);

struct dv_fill_params {
	int fd;                         /* the staging file; borrowed */
	const struct dv_shard_ref *ref; /* copied */
	const struct dv_fetcher *fetcher; /* copied; needs fetch_range */
	struct dv_chunks *chunks;       /* taken (emptied) */
	bool resume;                    /* @fd may hold good chunks already */
	unsigned parallel;              /* fetches in flight, 1..MAX */
	unsigned timeout_ms;            /* a read waits at most this long */
	struct dv_fill_limit *limit;    /* borrowed; may be NULL */
	/* Called once, from a worker, when every chunk is settled. */
	void (*done)(void *arg, struct dv_fill *f, int result);
	void *arg;
};

/* Counters of one fill, for status and metrics. */
struct dv_fill_progress {
	uint32_t chunks;         /* in the shard */
	uint32_t done;           /* verified and written */
	uint32_t failed;
	uint32_t in_flight;
	uint32_t reused;         /* found good in a resumed staging file */
	uint64_t waits;          /* reads that had to wait for a chunk */
	uint64_t fetched_bytes;  /* from the fetcher, refetches included */
	uint64_t ttfb_ns;        /* start to the first read answered; 0: none yet */
};

/*
 * Starts the workers. The caller holds one reference (dv_fill_put when
 * done with it). 0, or -ENOMEM / -EAGAIN (no thread): then nothing ran and
 * done() is not called.
 */
int dv_fill_start(const struct dv_fill_params *p, struct dv_fill **out);

void dv_fill_get(struct dv_fill *f);
void dv_fill_put(struct dv_fill *f);

/*
 * Waits until bytes [@off, @off + @len) of the shard are in the staging
 * file and verified. 0; -EIO when a chunk under them failed; -ETIMEDOUT
 * after timeout_ms; -ECANCELED when the fill was cancelled. Counts as a
 * read for the read-ahead. Thread-safe.
 */
int dv_fill_wait(struct dv_fill *f, uint64_t off, uint64_t len);

/*
 * The workers wait for the first dv_fill_wait() (so that the first chunks
 * fetched are the reader's, wherever it starts) or for this call, which
 * the last handle makes when it closes: the fill then runs to its end.
 */
void dv_fill_go(struct dv_fill *f);

/*
 * Asks the workers to stop after the fetches in flight; done() then gets
 * -ECANCELED unless every chunk was in already. Does not wait.
 */
void dv_fill_cancel(struct dv_fill *f);

/* Whether done() has been called (the result, then, in *@result). */
bool dv_fill_finished(struct dv_fill *f, int *result);

void dv_fill_progress(struct dv_fill *f, struct dv_fill_progress *out);

/* The shard this fill is for (the ref given to dv_fill_start, copied). */
const char *dv_fill_hash(const struct dv_fill *f);
const char *dv_fill_label(const struct dv_fill *f);
uint64_t dv_fill_size(const struct dv_fill *f);

#endif
