/*
 * Stripe layout: where the chunks of an object go and what a device's
 * superblock says. Pure arithmetic and encoding: no I/O here.
 *
 * A device of a pool:
 *
 *   [0, 4096)                   superblock (struct dv_stripe_sb, padded)
 *   [data_offset + s*chunk, …)  slot s: one chunk of some object
 *
 * An object of `size` bytes has ceil(size / chunk) chunks; chunk i holds
 * bytes [i*chunk, min((i+1)*chunk, size)). Chunk 0 goes to the object's
 * start device, chosen from a checksum of its content hash so that objects
 * smaller than a stripe still spread over the pool; chunk i prefers device
 * (start + i) mod ndev. Every chunk records the device and slot it really
 * got (index.h), so placement is a preference, never a rule a reader relies
 * on. Offsets and I/O lengths are multiples of DV_STRIPE_ALIGN (O_DIRECT);
 * a last partial chunk is padded with zeros up to the next multiple.
 */
#ifndef DV_STRIPE_LAYOUT_H
#define DV_STRIPE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DV_STRIPE_ALIGN 4096u
#define DV_STRIPE_SB_BYTES 4096u
#define DV_STRIPE_DATA_OFFSET 4096u /* a 4096-byte margin */
#define DV_STRIPE_MAGIC "DVSTRIPE"
#define DV_STRIPE_VERSION 1u
#define DV_STRIPE_MAX_DEVICES 64u
#define DV_STRIPE_ID_BYTES 16u

/* One device's superblock. */
struct dv_stripe_sb {
	uint32_t version;
	uint8_t pool_id[DV_STRIPE_ID_BYTES];    /* random, set at format */
	uint8_t journal_id[DV_STRIPE_ID_BYTES]; /* the index that owns the data */
	uint32_t dev_index;                     /* 0 .. dev_count-1 */
	uint32_t dev_count;
	uint64_t chunk_bytes;
	uint64_t data_offset;
	uint64_t nslots;                        /* chunk slots on this device */
	uint64_t created;                       /* unix seconds */
};

/*
 * Encodes @sb into @buf (DV_STRIPE_SB_BYTES, zero padded, little endian,
 * with a checksum).
 */
void dv_stripe_sb_encode(const struct dv_stripe_sb *sb, void *buf);

/*
 * Decodes a superblock from the first DV_STRIPE_SB_BYTES of @buf.
 * 0: valid; -ENOENT: not ours (no magic); -EBADMSG: our magic but a bad
 * checksum or impossible values (a torn or damaged superblock).
 */
int dv_stripe_sb_decode(const void *buf, size_t len, struct dv_stripe_sb *sb);

/* True when @buf starts with our magic, valid or not. */
bool dv_stripe_sb_has_magic(const void *buf, size_t len);

/* The device chunk 0 of @hash prefers: a checksum of the hash, mod @ndev. */
unsigned dv_stripe_start_device(const char *hash, unsigned ndev);

/* The device chunk @i prefers, given the object's start device. */
static inline unsigned dv_stripe_chunk_device(unsigned start, uint64_t i,
					      unsigned ndev)
{
	return (unsigned)((start + i) % ndev);
}

/* Chunks of an object of @size bytes (0 for an empty object). */
static inline uint64_t dv_stripe_nchunks(uint64_t size, uint64_t chunk)
{
	return size / chunk + (size % chunk != 0);
}

/* Bytes of the object in chunk @i (the last one may be partial). */
uint64_t dv_stripe_chunk_len(uint64_t size, uint64_t chunk, uint64_t i);

/* @len rounded up to DV_STRIPE_ALIGN: what is read or written on disk. */
static inline uint64_t dv_stripe_io_len(uint64_t len)
{
	return (len + DV_STRIPE_ALIGN - 1) & ~(uint64_t)(DV_STRIPE_ALIGN - 1);
}

/* Byte offset on its device of slot @slot. */
static inline uint64_t dv_stripe_slot_offset(uint64_t data_offset,
					     uint64_t chunk, uint64_t slot)
{
	return data_offset + slot * chunk;
}

/* Slots that fit on a device of @dev_bytes bytes. */
uint64_t dv_stripe_nslots(uint64_t dev_bytes, uint64_t data_offset,
			  uint64_t chunk);

/* Lower-case hex of an id (2 * DV_STRIPE_ID_BYTES + 1 bytes). */
void dv_stripe_id_hex(const uint8_t *id, char *out);

/* Little-endian helpers shared by the superblock and the journal. */
static inline void dv_put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void dv_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void dv_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t dv_get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t dv_get_le32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline uint64_t dv_get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#endif
