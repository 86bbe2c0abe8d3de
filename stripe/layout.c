/*
 * Stripe layout arithmetic and the superblock encoding (layout.h).
 *
 * Superblock bytes (little endian), then zeros up to 4096:
 *   0 magic "DVSTRIPE"   8 version     12 header bytes (72)
 *  16 pool id (16)      32 journal id (16)
 *  48 device index      52 device count
 *  56 chunk bytes       64 data offset  72 slots  80 created
 *  88 XXH3-64 of bytes [0, 88)
 */
#include "layout.h"

#include <errno.h>
#include <string.h>
#include <xxhash.h>

#define SB_SUM_OFF 88u

void dv_stripe_sb_encode(const struct dv_stripe_sb *sb, void *buf)
{
	uint8_t *p = buf;

	memset(p, 0, DV_STRIPE_SB_BYTES);
	memcpy(p, DV_STRIPE_MAGIC, 8);
	dv_put_le32(p + 8, sb->version);
	dv_put_le32(p + 12, SB_SUM_OFF);
	memcpy(p + 16, sb->pool_id, DV_STRIPE_ID_BYTES);
	memcpy(p + 32, sb->journal_id, DV_STRIPE_ID_BYTES);
	dv_put_le32(p + 48, sb->dev_index);
	dv_put_le32(p + 52, sb->dev_count);
	dv_put_le64(p + 56, sb->chunk_bytes);
	dv_put_le64(p + 64, sb->data_offset);
	dv_put_le64(p + 72, sb->nslots);
	dv_put_le64(p + 80, sb->created);
	dv_put_le64(p + SB_SUM_OFF, XXH3_64bits(p, SB_SUM_OFF));
}

bool dv_stripe_sb_has_magic(const void *buf, size_t len)
{
	return len >= 8 && memcmp(buf, DV_STRIPE_MAGIC, 8) == 0;
}

static bool sane(const struct dv_stripe_sb *sb)
{
	return sb->version == DV_STRIPE_VERSION && sb->dev_count > 0 &&
	       sb->dev_count <= DV_STRIPE_MAX_DEVICES &&
	       sb->dev_index < sb->dev_count && sb->chunk_bytes > 0 &&
	       sb->chunk_bytes % DV_STRIPE_ALIGN == 0 &&
	       sb->data_offset >= DV_STRIPE_SB_BYTES &&
	       sb->data_offset % DV_STRIPE_ALIGN == 0 && sb->nslots > 0;
}

int dv_stripe_sb_decode(const void *buf, size_t len, struct dv_stripe_sb *sb)
{
	const uint8_t *p = buf;

	if (!dv_stripe_sb_has_magic(buf, len))
		return -ENOENT;
	if (len < SB_SUM_OFF + 8 || dv_get_le32(p + 12) != SB_SUM_OFF ||
	    dv_get_le64(p + SB_SUM_OFF) != XXH3_64bits(p, SB_SUM_OFF))
		return -EBADMSG;
	sb->version = dv_get_le32(p + 8);
	memcpy(sb->pool_id, p + 16, DV_STRIPE_ID_BYTES);
	memcpy(sb->journal_id, p + 32, DV_STRIPE_ID_BYTES);
	sb->dev_index = dv_get_le32(p + 48);
	sb->dev_count = dv_get_le32(p + 52);
	sb->chunk_bytes = dv_get_le64(p + 56);
	sb->data_offset = dv_get_le64(p + 64);
	sb->nslots = dv_get_le64(p + 72);
	sb->created = dv_get_le64(p + 80);
	return sane(sb) ? 0 : -EBADMSG;
}

unsigned dv_stripe_start_device(const char *hash, unsigned ndev)
{
	if (ndev <= 1)
		return 0;
	return (unsigned)(XXH32(hash, strlen(hash), 0) % ndev);
}

uint64_t dv_stripe_chunk_len(uint64_t size, uint64_t chunk, uint64_t i)
{
	uint64_t start = i * chunk;

	if (start >= size)
		return 0;
	return size - start < chunk ? size - start : chunk;
}

uint64_t dv_stripe_nslots(uint64_t dev_bytes, uint64_t data_offset,
			  uint64_t chunk)
{
	if (dev_bytes <= data_offset || chunk == 0)
		return 0;
	return (dev_bytes - data_offset) / chunk;
}

void dv_stripe_id_hex(const uint8_t *id, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (unsigned i = 0; i < DV_STRIPE_ID_BYTES; i++) {
		out[2 * i] = hex[id[i] >> 4];
		out[2 * i + 1] = hex[id[i] & 15];
	}
	out[2 * DV_STRIPE_ID_BYTES] = '\0';
}
