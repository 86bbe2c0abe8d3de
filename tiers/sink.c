/*
 * The verifying sink (B2). Bytes are hashed as they are written, so a shard
 * is read once from the network and never re-read to check it.
 *
 * Hashing and writing run on a worker thread fed by a small ring of
 * buffers: the caller (a libcurl callback) only copies into the ring, so
 * receiving, hashing and writing overlap, and a fill runs at the speed of
 * the slowest of the three rather than their sum. A shard that fits in one
 * buffer never starts the thread. Writeback of finished ranges is started
 * as the stream goes, so the final fdatasync() has little left to do.
 */
#include "sink.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITEBACK_STEP (32ULL << 20)
#define PIPE_BUFS 8
#define PIPE_BUF_SIZE (1u << 20)

struct dv_sink_pipe {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_t worker;
	bool started;
	bool stop;               /* protected by lock */
	int error;               /* first worker error; protected by lock */
	unsigned head, tail;     /* filled = tail - head; protected by lock */
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

static void start_writeback(struct dv_sink *s)
{
	if (s->stored - s->synced < WRITEBACK_STEP)
		return;
	/* Best effort: not every filesystem supports it, and that is fine. */
	sync_file_range(s->fd, (off_t)s->synced, (off_t)(s->stored - s->synced),
			SYNC_FILE_RANGE_WRITE);
	s->synced = s->stored;
}

/* Writes and hashes one buffer; the worker's (or the caller's) job. */
static int store(struct dv_sink *s, const char *buf, size_t len)
{
	int ret = write_all(s->fd, buf, len);

	if (ret)
		return ret;
	EVP_DigestUpdate(s->md, buf, len);
	s->stored += len;
	start_writeback(s);
	return 0;
}

static void *worker_main(void *arg)
{
	struct dv_sink *s = arg;
	struct dv_sink_pipe *p = s->pipe;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		unsigned slot;
		int ret;

		while (p->head == p->tail && !p->stop)
			pthread_cond_wait(&p->cond, &p->lock);
		if (p->head == p->tail)
			break;
		slot = p->head % PIPE_BUFS;
		pthread_mutex_unlock(&p->lock);
		ret = store(s, p->buf[slot], p->fill[slot]);
		pthread_mutex_lock(&p->lock);
		if (ret && !p->error)
			p->error = ret;
		p->head++;
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

/* Waits until the worker stored everything queued. Returns its error. */
static int pipe_drain(struct dv_sink_pipe *p)
{
	int ret;

	pthread_mutex_lock(&p->lock);
	while (p->head != p->tail)
		pthread_cond_wait(&p->cond, &p->lock);
	ret = p->error;
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* Hands the current buffer to the worker, starting it the first time. */
static int pipe_push(struct dv_sink *s)
{
	struct dv_sink_pipe *p = s->pipe;
	int ret;

	if (p->cur == 0)
		return 0;
	if (!p->started) {
		if (pthread_create(&p->worker, NULL, worker_main, s))
			return -EAGAIN;
		p->started = true;
	}
	pthread_mutex_lock(&p->lock);
	p->fill[p->tail % PIPE_BUFS] = p->cur;
	p->tail++;
	pthread_cond_broadcast(&p->cond);
	while (p->tail - p->head == PIPE_BUFS && !p->error)
		pthread_cond_wait(&p->cond, &p->lock);
	ret = p->error;
	pthread_mutex_unlock(&p->lock);
	p->cur = 0;
	return ret;
}

/* Stores what the ring still holds and stops the worker. */
static int pipe_flush(struct dv_sink *s)
{
	struct dv_sink_pipe *p = s->pipe;
	int ret;

	if (!p->started) {
		/* Everything fit in one buffer: store it on this thread. */
		ret = p->cur ? store(s, p->buf[p->tail % PIPE_BUFS], p->cur) : 0;
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
	if (p->started) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->worker, NULL);
	}
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
	s->synced = 0;
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
	if (fdatasync(s->fd) && errno != EINVAL)
		return -errno;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int dv_hex_decode(const char *hex, uint8_t *out, size_t outlen)
{
	if (strlen(hex) != outlen * 2)
		return -EINVAL;
	for (size_t i = 0; i < outlen; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

void dv_hex_encode(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

int dv_sha256_fd(int fd, uint8_t out[32])
{
	static const size_t bufsize = 1 << 20;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned int dlen = 0;
	uint64_t off = 0;
	char *buf = NULL;
	int ret = -ENOMEM;

	if (!md)
		return -ENOMEM;
	buf = malloc(bufsize);
	if (!buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
		goto out;
	for (;;) {
		ssize_t n = pread(fd, buf, bufsize, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(md, buf, (size_t)n);
		off += (uint64_t)n;
	}
	ret = EVP_DigestFinal_ex(md, out, &dlen) == 1 ? 0 : -EIO;
out:
	free(buf);
	EVP_MD_CTX_free(md);
	return ret;
}
