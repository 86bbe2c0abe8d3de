/*
 * The verifying sink (B2). Bytes are hashed as they are written, so a shard
 * is read once from the network and never re-read to check it.
 *
 * Hashing and writing run on two worker threads fed by a small ring of
 * buffers: the caller (a libcurl callback) only copies into the ring, one
 * worker hashes each buffer, the other writes it (and hands it to the
 * tap). Receiving, hashing and writing overlap, and a fill runs at the
 * speed of the slowest of the three rather than their sum. A shard that
 * fits in one buffer never starts the threads.
 *
 * The sink does not sync: bytes reach the disk when a tier installs the
 * file (folder.c, syncer.h), in the background.
 */
#include "sink.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PIPE_BUFS 8
#define PIPE_BUF_SIZE (1u << 20)

/* What the workers do to each buffer, each in stream order. */
enum stage { STAGE_HASH, STAGE_STORE, STAGES };

struct dv_sink_pipe;

struct worker {
	struct dv_sink *sink;
	enum stage stage;
	pthread_t thread;
};

struct dv_sink_pipe {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct worker workers[STAGES];
	bool started;
	bool stop;               /* protected by lock */
	int error;               /* first worker error; protected by lock */
	/* Buffer i is filled when i < tail and done by stage k when i < head[k]. */
	unsigned head[STAGES], tail; /* protected by lock */
	size_t fill[PIPE_BUFS];
	char *buf[PIPE_BUFS];
	size_t cur;              /* bytes in buf[tail % PIPE_BUFS], caller's */
};

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Writes one buffer and shows it to the tap. */
static int store(struct dv_sink *s, const char *buf, size_t len)
{
	int ret = write_all(s->fd, buf, len);

	if (ret)
		return ret;
	if (s->tap)
		s->tap->fn(s->tap->arg, buf, len, s->stored);
	s->stored += len;
	return 0;
}

static int run_stage(struct dv_sink *s, enum stage stage, const char *buf,
		     size_t len)
{
	if (stage == STAGE_HASH)
		return EVP_DigestUpdate(s->md, buf, len) == 1 ? 0 : -EIO;
	return store(s, buf, len);
}

/* The oldest buffer some stage still needs. */
static unsigned oldest_head(const struct dv_sink_pipe *p)
{
	unsigned h = p->head[0];

	for (int k = 1; k < STAGES; k++)
		if (p->tail - p->head[k] > p->tail - h)
			h = p->head[k];
	return h;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct dv_sink *s = w->sink;
	struct dv_sink_pipe *p = s->pipe;
	unsigned *head = &p->head[w->stage];

	pthread_mutex_lock(&p->lock);
	for (;;) {
		unsigned slot;
		int ret;

		while (*head == p->tail && !p->stop)
			pthread_cond_wait(&p->cond, &p->lock);
		if (*head == p->tail)
			break;
		slot = *head % PIPE_BUFS;
		pthread_mutex_unlock(&p->lock);
		ret = run_stage(s, w->stage, p->buf[slot], p->fill[slot]);
		pthread_mutex_lock(&p->lock);
		if (ret && !p->error)
			p->error = ret;
		(*head)++;
		pthread_cond_broadcast(&p->cond);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static int pipe_new(struct dv_sink *s)
{
	struct dv_sink_pipe *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	for (int i = 0; i < PIPE_BUFS; i++) {
		p->buf[i] = malloc(PIPE_BUF_SIZE);
		if (!p->buf[i]) {
			while (i-- > 0)
				free(p->buf[i]);
			free(p);
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	s->pipe = p;
	return 0;
}

/* Waits until the workers are done with everything queued. Their error. */
static int pipe_drain(struct dv_sink_pipe *p)
{
	int ret;

	pthread_mutex_lock(&p->lock);
	while (oldest_head(p) != p->tail)
		pthread_cond_wait(&p->cond, &p->lock);
	ret = p->error;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* Stops and joins the workers started so far. */
static void pipe_stop(struct dv_sink_pipe *p, int started)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (int k = 0; k < started; k++)
		pthread_join(p->workers[k].thread, NULL);
}

static int pipe_start(struct dv_sink *s)
{
	struct dv_sink_pipe *p = s->pipe;

	for (int k = 0; k < STAGES; k++) {
		p->workers[k].sink = s;
		p->workers[k].stage = (enum stage)k;
		if (pthread_create(&p->workers[k].thread, NULL, worker_main,
				   &p->workers[k])) {
			pipe_stop(p, k);
			p->stop = false;
			return -EAGAIN;
		}
	}
	p->started = true;
	return 0;
}

/* Hands the current buffer to the workers, starting them the first time. */
static int pipe_push(struct dv_sink *s)
{
	struct dv_sink_pipe *p = s->pipe;
	int ret;

	if (p->cur == 0)
		return 0;
	if (!p->started) {
		ret = pipe_start(s);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&p->lock);
	p->fill[p->tail % PIPE_BUFS] = p->cur;
	p->tail++;
	pthread_cond_broadcast(&p->cond);
	while (p->tail - oldest_head(p) == PIPE_BUFS && !p->error)
		pthread_cond_wait(&p->cond, &p->lock);
	ret = p->error;
	pthread_mutex_unlock(&p->lock);
	p->cur = 0;
	return ret;
}

/* Finishes what the ring still holds. */
static int pipe_flush(struct dv_sink *s)
{
	struct dv_sink_pipe *p = s->pipe;
	int ret = 0;

	if (!p->started) {
		/* Everything fit in one buffer: finish it on this thread. */
		const char *buf = p->buf[p->tail % PIPE_BUFS];

		for (int k = 0; k < STAGES && !ret && p->cur; k++)
			ret = run_stage(s, (enum stage)k, buf, p->cur);
		p->cur = 0;
		return ret;
	}
	ret = pipe_push(s);
	if (!ret)
		ret = pipe_drain(p);
	return ret;
}

static void pipe_free(struct dv_sink *s)
{
	struct dv_sink_pipe *p = s->pipe;

	if (!p)
		return;
	if (p->started)
		pipe_stop(p, STAGES);
	for (int i = 0; i < PIPE_BUFS; i++)
		free(p->buf[i]);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
	s->pipe = NULL;
}

int dv_sink_init(struct dv_sink *s, int fd, uint64_t size,
		 const uint8_t *sha256)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->expected_size = size;
	if (sha256) {
		s->check_digest = true;
		memcpy(s->expected_sha256, sha256, 32);
	}
	s->md = EVP_MD_CTX_new();
	if (!s->md || EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1 ||
	    pipe_new(s)) {
		EVP_MD_CTX_free(s->md);
		s->md = NULL;
		return -ENOMEM;
	}
	return 0;
}

void dv_sink_release(struct dv_sink *s)
{
	pipe_free(s);
	EVP_MD_CTX_free(s->md);
	s->md = NULL;
}

int dv_sink_write(struct dv_sink *s, const void *buf, size_t len)
{
	struct dv_sink_pipe *p = s->pipe;
	const char *src = buf;

	if (len > s->expected_size - s->written)
		return -EFBIG;
	while (len > 0) {
		size_t n = PIPE_BUF_SIZE - p->cur;
		int ret;

		if (n > len)
			n = len;
		memcpy(p->buf[p->tail % PIPE_BUFS] + p->cur, src, n);
		p->cur += n;
		src += n;
		len -= n;
		s->written += n;
		if (p->cur == PIPE_BUF_SIZE) {
			ret = pipe_push(s);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int dv_sink_reset(struct dv_sink *s)
{
	int ret;

	ret = pipe_flush(s);
	pipe_free(s);
	if (pipe_new(s))
		return -ENOMEM;
	if (ret != 0 && ret != -ENOSPC && ret != -EIO)
		return ret;
	if (ftruncate(s->fd, 0) || lseek(s->fd, 0, SEEK_SET) < 0)
		return -errno;
	s->written = 0;
	s->stored = 0;
	if (EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1)
		return -ENOMEM;
	return 0;
}

int dv_sink_finish(struct dv_sink *s)
{
	uint8_t digest[32];
	unsigned int dlen = 0;
	int ret;

	ret = pipe_flush(s);
	if (ret)
		return ret;
	if (s->written != s->expected_size || s->stored != s->written)
		return -EIO;
	if (EVP_DigestFinal_ex(s->md, digest, &dlen) != 1 || dlen != 32)
		return -EIO;
	if (s->check_digest && memcmp(digest, s->expected_sha256, 32) != 0)
		return -EBADMSG;
	return 0;
}
