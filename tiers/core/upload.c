/*
 * The upload queue (B5): a bounded FIFO of jobs and a few worker threads.
 * See upload.h for the contract.
 */
#include "upload.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/net/call.h"

#define UPLOAD_ATTEMPTS 4
#define MAX_WORKERS 8

struct job {
	struct job *next;
	struct dv_tier *tier;
	char hash[65];
	char label[256];
	int fd;
	uint64_t size;
};

struct dv_uploader {
	pthread_mutex_t lock;
	pthread_cond_t cond;       /* jobs queued, job done, or stopping */
	struct job *head, *tail;   /* protected by lock */
	unsigned queued, running;  /* protected by lock */
	unsigned max_jobs;
	bool stop;                 /* protected by lock */
	pthread_t workers[MAX_WORKERS];
	unsigned nworkers;         /* started; protected by lock */
	unsigned want_workers;
	struct dv_upload_stats stats; /* atomic */
};

static void run_job(struct dv_uploader *u, struct job *j)
{
	struct dv_tier *t = j->tier;
	int ret = -EIO;

	for (int attempt = 1; attempt <= UPLOAD_ATTEMPTS; attempt++) {
		ret = dv_tier_install(t, j->hash, j->fd, NULL, j->size, 0);
		if (ret == 0 || ret == -EFBIG)
			break;
		dv_warn("tier '%s': upload of %s (%s) failed (attempt %d of %d): %s",
			t->name, j->label, j->hash, attempt, UPLOAD_ATTEMPTS,
			strerror(-ret));
		dv_stat_add(&t->stats.errors, 1);
		if (attempt < UPLOAD_ATTEMPTS) {
			dv_stat_add(&u->stats.retries, 1);
			dv_net_pause((unsigned)attempt);
		}
	}
	if (ret == 0) {
		dv_stat_add(&u->stats.done, 1);
		dv_debug("tier '%s': uploaded %s (%s)", t->name, j->label, j->hash);
	} else {
		dv_stat_add(&u->stats.failed, 1);
		dv_err("tier '%s': gave up uploading %s (%s): %s", t->name,
		       j->label, j->hash, strerror(-ret));
	}
}

static void *worker_main(void *arg)
{
	struct dv_uploader *u = arg;

	pthread_mutex_lock(&u->lock);
	for (;;) {
		struct job *j;

		while (!u->head && !u->stop)
			pthread_cond_wait(&u->cond, &u->lock);
		if (!u->head)
			break;
		j = u->head;
		u->head = j->next;
		if (!u->head)
			u->tail = NULL;
		u->queued--;
		u->running++;
		pthread_mutex_unlock(&u->lock);
		run_job(u, j);
		close(j->fd);
		free(j);
		pthread_mutex_lock(&u->lock);
		u->running--;
		pthread_cond_broadcast(&u->cond);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

int dv_uploader_new(unsigned max_jobs, unsigned threads,
		    struct dv_uploader **out)
{
	struct dv_uploader *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->cond, NULL);
	u->max_jobs = max_jobs ? max_jobs : 1;
	u->want_workers = threads == 0 ? 1 : threads > MAX_WORKERS ? MAX_WORKERS : threads;
	*out = u;
	return 0;
}

/*
 * Workers start with the first job, not with the queue: the daemon builds
 * its hierarchy before it forks into the background, and threads do not
 * survive a fork. Called with u->lock held. 0 or -EAGAIN.
 */
static int start_workers(struct dv_uploader *u)
{
	for (; u->nworkers < u->want_workers; u->nworkers++) {
		if (pthread_create(&u->workers[u->nworkers], NULL, worker_main, u))
			break;
	}
	return u->nworkers ? 0 : -EAGAIN;
}

static void drop_queued(struct dv_uploader *u)
{
	struct job *j = u->head;

	while (j) {
		struct job *next = j->next;

		dv_warn("tier '%s': upload of %s (%s) dropped at shutdown",
			j->tier->name, j->label, j->hash);
		dv_stat_add(&u->stats.dropped, 1);
		close(j->fd);
		free(j);
		j = next;
	}
	u->head = u->tail = NULL;
	u->queued = 0;
}

void dv_uploader_free(struct dv_uploader *u, unsigned grace_ms)
{
	struct timespec deadline;

	if (!u)
		return;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += grace_ms / 1000;
	deadline.tv_nsec += (long)(grace_ms % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&u->lock);
	while ((u->head || u->running) &&
	       pthread_cond_timedwait(&u->cond, &u->lock, &deadline) == 0)
		;
	drop_queued(u);
	u->stop = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	for (unsigned i = 0; i < u->nworkers; i++)
		pthread_join(u->workers[i], NULL);
	pthread_mutex_destroy(&u->lock);
	pthread_cond_destroy(&u->cond);
	free(u);
}

int dv_uploader_enqueue(struct dv_uploader *u, struct dv_tier *t,
			const char *hash, int fd, uint64_t size,
			const char *label)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j) {
		close(fd);
		return -ENOMEM;
	}
	j->tier = t;
	j->fd = fd;
	j->size = size;
	snprintf(j->hash, sizeof(j->hash), "%s", hash);
	snprintf(j->label, sizeof(j->label), "%s", label ? label : hash);
	pthread_mutex_lock(&u->lock);
	if (u->queued >= u->max_jobs || u->stop || start_workers(u)) {
		pthread_mutex_unlock(&u->lock);
		dv_warn("tier '%s': upload queue full, %s (%s) not uploaded",
			t->name, j->label, hash);
		dv_stat_add(&u->stats.dropped, 1);
		close(fd);
		free(j);
		return -EAGAIN;
	}
	if (u->tail)
		u->tail->next = j;
	else
		u->head = j;
	u->tail = j;
	u->queued++;
	dv_stat_add(&u->stats.queued, 1);
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	return 0;
}

void dv_uploader_flush(struct dv_uploader *u)
{
	pthread_mutex_lock(&u->lock);
	while (u->head || u->running)
		pthread_cond_wait(&u->cond, &u->lock);
	pthread_mutex_unlock(&u->lock);
}

void dv_uploader_stats(struct dv_uploader *u, struct dv_upload_stats *out)
{
	out->queued = dv_stat_get(&u->stats.queued);
	out->done = dv_stat_get(&u->stats.done);
	out->failed = dv_stat_get(&u->stats.failed);
	out->dropped = dv_stat_get(&u->stats.dropped);
	out->retries = dv_stat_get(&u->stats.retries);
}
