/*
 * Background uploads into remote tiers (B5). A fill or promotion installs
 * locally, hands the verified file to this queue and returns: readers never
 * wait for a bucket. Each job holds an open fd of the installed file, so an
 * eviction meanwhile does not lose the bytes. Failed uploads are retried
 * with backoff and logged; a full queue drops new jobs with a warning. None
 * of this can fail a read.
 */
#ifndef DV_UPLOAD_H
#define DV_UPLOAD_H

#include <stdint.h>

#include "tier.h"

struct dv_uploader;

struct dv_upload_stats {
	uint64_t queued;
	uint64_t done;
	uint64_t failed;    /* gave up after every retry */
	uint64_t dropped;   /* queue full, or pending at shutdown */
	uint64_t retries;
};

/*
 * A queue of at most @max_jobs, served by @threads workers that start with
 * the first job (so a process may fork after creating it). 0 or -errno.
 */
int dv_uploader_new(unsigned max_jobs, unsigned threads,
		    struct dv_uploader **out);

/*
 * Stops the workers after the jobs already started; waits at most
 * @grace_ms for the queue to drain, then drops what is left (logged).
 */
void dv_uploader_free(struct dv_uploader *u, unsigned grace_ms);

/*
 * Queues an upload of @size bytes read from @fd (taken: closed by the
 * queue) as @hash into remote tier @t (borrowed; must outlive the queue).
 * @label is for log lines. Never blocks on the network. 0, or -EAGAIN when
 * the queue is full (the fd is closed then too).
 */
int dv_uploader_enqueue(struct dv_uploader *u, struct dv_tier *t,
			const char *hash, int fd, uint64_t size,
			const char *label);

/* Waits until no job is queued or running. For tests and tools. */
void dv_uploader_flush(struct dv_uploader *u);

void dv_uploader_stats(struct dv_uploader *u, struct dv_upload_stats *out);

#endif
