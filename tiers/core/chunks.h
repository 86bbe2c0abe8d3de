/*
 * Chunk lists: the SHA-256 of every fixed-size chunk of a shard, so that a
 * fill can be verified piece by piece as it streams, in any order, and a
 * reader served each chunk as soon as it is checked.
 *
 * A list lives beside the payload, ORIGIN/shards/<content_hash>.chunks
 * (datavo-origin(5)), and the manifest pins it with the SHA-256 of the
 * list's bytes. So a manifest grows by one digest per shard, however
 * large the shard, and a list that does not match its pin is refused
 * before anything in it is believed. Text, one line each:
 *
 *   datavo-chunks/1
 *   chunk_size 4194304            a power of two, DV_CHUNK_SIZE_MIN..MAX
 *   size 134217728                the shard's size, as in the manifest
 *   <64 hex>                      chunk 0: bytes [0, chunk_size)
 *   …                             the last chunk may be shorter
 *
 * The whole-shard sha256 of the manifest stays, and is still checked
 * before a shard is installed.
 */
#ifndef DV_CHUNKS_H
#define DV_CHUNKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DV_CHUNKS_FORMAT "datavo-chunks/1"
#define DV_CHUNK_SIZE_DEFAULT (4u << 20)
#define DV_CHUNK_SIZE_MIN (64u << 10)
#define DV_CHUNK_SIZE_MAX (64u << 20)
/* 64 + 1 bytes a chunk, plus the header: a 1 TiB shard at 4 MiB is 17 MB. */
#define DV_CHUNKS_MAX_COUNT (1u << 20)

struct dv_chunks {
	uint64_t size;           /* of the shard */
	uint32_t chunk_size;
	uint32_t n;              /* chunks: ceil(size / chunk_size) */
	uint8_t (*sha256)[32];   /* n digests (malloc'd) */
};

/* How many chunks a shard of @size bytes has. */
static inline uint64_t dv_chunks_count(uint64_t size, uint32_t chunk_size)
{
	return size / chunk_size + (size % chunk_size != 0);
}

/* Bytes in chunk @i (the last one may be short). */
static inline uint32_t dv_chunks_len(const struct dv_chunks *c, uint32_t i)
{
	uint64_t off = (uint64_t)i * c->chunk_size;

	return c->size - off < c->chunk_size ? (uint32_t)(c->size - off)
					     : c->chunk_size;
}

/* Is @chunk_size a power of two within the bounds? */
bool dv_chunks_valid_size(uint64_t chunk_size);

/*
 * Reads a list of @len bytes. Its SHA-256 must be @pin (the manifest's),
 * its size field @size (the manifest's), its chunk count what they make.
 * 0 with *@out filled (dv_chunks_release), -EBADMSG for a list that does
 * not match its pin, -EINVAL for one that is malformed (then @err says
 * where), -ENOMEM.
 */
int dv_chunks_parse(const char *text, size_t len, const uint8_t pin[32],
		    uint64_t size, struct dv_chunks *out, char *err,
		    size_t errlen);

/*
 * The text of @c, malloc'd (NUL-terminated) in *@text with its length in
 * *@len, and its SHA-256 (the pin) in @pin. 0 or -ENOMEM.
 */
int dv_chunks_format(const struct dv_chunks *c, char **text, size_t *len,
		     uint8_t pin[32]);

/*
 * Reads the file @fd from offset 0 to its end once: its whole SHA-256 into
 * @whole and, when @chunk_size is not 0, its chunk list into *@out. 0 or
 * -errno.
 */
int dv_chunks_of_fd(int fd, uint32_t chunk_size, uint8_t whole[32],
		    struct dv_chunks *out);

/* Does @buf (dv_chunks_len(c, i) bytes) match chunk @i? */
bool dv_chunks_check(const struct dv_chunks *c, uint32_t i, const void *buf);

void dv_chunks_release(struct dv_chunks *c);

#endif
