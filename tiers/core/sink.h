/*
 * A verifying sink: where every byte entering a tier from the origin or a
 * remote tier goes (B2). It writes to a staging fd, hashes with SHA-256 as
 * the bytes stream, and refuses anything past the expected size, so a
 * server can neither grow a file without bound nor slip in wrong bytes.
 */
#ifndef DV_SINK_H
#define DV_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct dv_sink_pipe;

/*
 * Sees every byte a sink stores, in order, as it is stored: before the
 * stream is verified. Whoever reads through a tap must forget what it saw
 * unless dv_sink_finish() returns 0. A stream that restarts (reset) is
 * seen again from offset 0. Called on the sink's worker thread.
 */
struct dv_sink_tap {
	void (*fn)(void *arg, const void *buf, size_t len, uint64_t off);
	void *arg;
};

struct dv_sink {
	int fd;                  /* borrowed staging fd */
	uint64_t expected_size;
	uint64_t written;        /* bytes accepted so far */
	bool check_digest;
	uint8_t expected_sha256[32];
	void *md;                /* EVP_MD_CTX; owned by the hashing worker */
	uint64_t stored;         /* bytes written to fd (worker) */
	struct dv_sink_pipe *pipe; /* hashing and writing off the caller's thread */
	const struct dv_sink_tap *tap; /* optional; borrowed */
};

/*
 * Prepares @s to receive @size bytes into @fd. @sha256 (32 bytes) may be
 * NULL when nothing is known to check against. 0 or -ENOMEM.
 */
int dv_sink_init(struct dv_sink *s, int fd, uint64_t size,
		 const uint8_t *sha256);
void dv_sink_release(struct dv_sink *s);

/*
 * Appends @len bytes. Returns 0, -EFBIG when they would pass the expected
 * size (nothing is written), or -errno from the write (-ENOSPC…).
 */
int dv_sink_write(struct dv_sink *s, const void *buf, size_t len);

/* Starts again from byte 0 (a retry that cannot resume). 0 or -errno. */
int dv_sink_reset(struct dv_sink *s);

/*
 * Ends the stream: 0 when exactly expected_size bytes arrived and their
 * SHA-256 matches; -EIO when short; -EBADMSG on a digest mismatch. It does
 * not sync the file: installing it does (syncer.h).
 */
int dv_sink_finish(struct dv_sink *s);

#endif
