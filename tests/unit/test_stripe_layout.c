/*
 * Stripe layout arithmetic: start device from the
 * content hash, round-robin chunks, 4096-aligned offsets, the last partial
 * chunk; the superblock; the free map; foreign signatures discovery knows.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stripe/discovery.h"
#include "stripe/freemap.h"
#include "stripe/layout.h"
#include "helpers.h"

#define MiB (1ULL << 20)

static void hash_n(unsigned i, char *hash)
{
	snprintf(hash, 65, "%032x", i * 2654435761u + 7);
}

/* The start device is a stable function of the hash, spread over devices. */
START_TEST(test_start_device_from_hash)
{
	unsigned count[4] = { 0 };
	char hash[65];

	for (unsigned i = 0; i < 4000; i++) {
		unsigned d;

		hash_n(i, hash);
		d = dv_stripe_start_device(hash, 4);
		ck_assert_uint_lt(d, 4);
		ck_assert_uint_eq(d, dv_stripe_start_device(hash, 4));
		count[d]++;
	}
	for (unsigned d = 0; d < 4; d++) {
		ck_assert_uint_gt(count[d], 800); /* 1000 each, give or take */
		ck_assert_uint_lt(count[d], 1200);
	}
	ck_assert_uint_eq(dv_stripe_start_device(hash, 1), 0);
	/* Stable across restarts: a fixed input, a fixed answer. */
	ck_assert_uint_eq(dv_stripe_start_device("0123456789abcdef0123456789abcdef", 4),
			  dv_stripe_start_device("0123456789abcdef0123456789abcdef", 4));
}
END_TEST

/* Chunks go round-robin from the start device. */
START_TEST(test_round_robin)
{
	ck_assert_uint_eq(dv_stripe_chunk_device(2, 0, 4), 2);
	ck_assert_uint_eq(dv_stripe_chunk_device(2, 1, 4), 3);
	ck_assert_uint_eq(dv_stripe_chunk_device(2, 2, 4), 0);
	ck_assert_uint_eq(dv_stripe_chunk_device(2, 5, 4), 3);
	ck_assert_uint_eq(dv_stripe_chunk_device(0, 7, 1), 0);
}
END_TEST

/* Chunk counts and lengths, the last one partial. */
START_TEST(test_chunks_and_last_partial)
{
	uint64_t c = 4 * MiB;

	ck_assert_uint_eq(dv_stripe_nchunks(0, c), 0);
	ck_assert_uint_eq(dv_stripe_nchunks(1, c), 1);
	ck_assert_uint_eq(dv_stripe_nchunks(c, c), 1);
	ck_assert_uint_eq(dv_stripe_nchunks(c + 1, c), 2);
	ck_assert_uint_eq(dv_stripe_nchunks(10 * c, c), 10);
	ck_assert_uint_eq(dv_stripe_chunk_len(10 * c + 5, c, 0), c);
	ck_assert_uint_eq(dv_stripe_chunk_len(10 * c + 5, c, 9), c);
	ck_assert_uint_eq(dv_stripe_chunk_len(10 * c + 5, c, 10), 5);
	ck_assert_uint_eq(dv_stripe_chunk_len(10 * c + 5, c, 11), 0);
	ck_assert_uint_eq(dv_stripe_chunk_len(3, c, 0), 3);
	/* The padded I/O of a partial chunk: a whole number of 4 KiB. */
	ck_assert_uint_eq(dv_stripe_io_len(5), 4096);
	ck_assert_uint_eq(dv_stripe_io_len(4096), 4096);
	ck_assert_uint_eq(dv_stripe_io_len(4097), 8192);
	ck_assert_uint_eq(dv_stripe_io_len(c), c);
}
END_TEST

/* Slot offsets are aligned and never overlap the superblock. */
START_TEST(test_offsets_aligned)
{
	uint64_t chunks[] = { 4096, 64 << 10, 4 * MiB, 16 * MiB };

	for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
		uint64_t c = chunks[k];
		uint64_t dev = 1000 * MiB + 123;
		uint64_t n = dv_stripe_nslots(dev, DV_STRIPE_DATA_OFFSET, c);

		ck_assert_uint_gt(n, 0);
		for (uint64_t s = 0; s < n; s += 1 + n / 97) {
			uint64_t off = dv_stripe_slot_offset(DV_STRIPE_DATA_OFFSET, c, s);

			ck_assert_uint_eq(off % DV_STRIPE_ALIGN, 0);
			ck_assert_uint_ge(off, DV_STRIPE_SB_BYTES);
		}
		/* The last slot ends inside the device, one more would not. */
		ck_assert_uint_le(dv_stripe_slot_offset(DV_STRIPE_DATA_OFFSET, c, n - 1) + c,
				  dev);
		ck_assert_uint_gt(dv_stripe_slot_offset(DV_STRIPE_DATA_OFFSET, c, n) + c,
				  dev);
	}
	ck_assert_uint_eq(dv_stripe_nslots(4096, DV_STRIPE_DATA_OFFSET, 4096), 0);
	ck_assert_uint_eq(dv_stripe_slot_offset(4096, 4 * MiB, 2), 4096 + 8 * MiB);
}
END_TEST

/* The superblock round-trips; a torn one is ours but damaged. */
START_TEST(test_superblock)
{
	struct dv_stripe_sb sb = {
		.version = DV_STRIPE_VERSION, .dev_index = 2, .dev_count = 4,
		.chunk_bytes = 4 * MiB, .data_offset = DV_STRIPE_DATA_OFFSET,
		.nslots = 250, .created = 1700000000,
	}, got;
	uint8_t buf[DV_STRIPE_SB_BYTES];

	memset(sb.pool_id, 0xab, sizeof(sb.pool_id));
	memset(sb.journal_id, 0x5c, sizeof(sb.journal_id));
	dv_stripe_sb_encode(&sb, buf);
	ck_assert_mem_eq(buf, DV_STRIPE_MAGIC, 8);
	ck_assert_int_eq(dv_stripe_sb_decode(buf, sizeof(buf), &got), 0);
	ck_assert_mem_eq(got.pool_id, sb.pool_id, DV_STRIPE_ID_BYTES);
	ck_assert_mem_eq(got.journal_id, sb.journal_id, DV_STRIPE_ID_BYTES);
	ck_assert_uint_eq(got.dev_index, 2);
	ck_assert_uint_eq(got.dev_count, 4);
	ck_assert_uint_eq(got.chunk_bytes, 4 * MiB);
	ck_assert_uint_eq(got.nslots, 250);
	/* Beyond the header the block is zero: no stray signature. */
	for (size_t i = 96; i < sizeof(buf); i++)
		ck_assert_uint_eq(buf[i], 0);
	buf[50] ^= 1;
	ck_assert_int_eq(dv_stripe_sb_decode(buf, sizeof(buf), &got), -EBADMSG);
	ck_assert(dv_stripe_sb_has_magic(buf, sizeof(buf)));
	memset(buf, 0, sizeof(buf));
	ck_assert_int_eq(dv_stripe_sb_decode(buf, sizeof(buf), &got), -ENOENT);
	/* Impossible values with a valid checksum are refused too. */
	sb.dev_index = 4;
	dv_stripe_sb_encode(&sb, buf);
	ck_assert_int_eq(dv_stripe_sb_decode(buf, sizeof(buf), &got), -EBADMSG);
}
END_TEST

/* The free map prefers the asked device, then the next ones. */
START_TEST(test_freemap)
{
	uint64_t nslots[3] = { 2, 1, 70 };
	struct dv_freemap fm;
	unsigned dev;

	ck_assert_int_eq(dv_freemap_init(&fm, 3, nslots), 0);
	ck_assert_uint_eq(fm.nfree, 73);
	ck_assert_int_eq(dv_freemap_alloc(&fm, 1, &dev), 0);
	ck_assert_uint_eq(dev, 1);
	ck_assert_int_eq(dv_freemap_alloc(&fm, 1, &dev), 0); /* full: next */
	ck_assert_uint_eq(dev, 2);
	ck_assert(!dv_freemap_take(&fm, 2, 0));             /* already used */
	ck_assert(dv_freemap_take(&fm, 2, 69));
	ck_assert(!dv_freemap_take(&fm, 2, 70));            /* out of range */
	for (int i = 0; i < 68; i++)
		ck_assert_int_ge(dv_freemap_alloc(&fm, 2, &dev), 1);
	ck_assert_uint_eq(fm.dev[2].nfree, 0);
	ck_assert_int_eq(dv_freemap_alloc(&fm, 2, &dev), 0);
	ck_assert_uint_eq(dev, 0);
	ck_assert_int_eq(dv_freemap_alloc(&fm, 2, &dev), 1);
	ck_assert_int_eq(dv_freemap_alloc(&fm, 0, &dev), -1);
	ck_assert_uint_eq(fm.nfree, 0);
	dv_freemap_put(&fm, 2, 33);
	ck_assert_int_eq(dv_freemap_alloc(&fm, 0, &dev), 33);
	ck_assert_uint_eq(dev, 2);
	dv_freemap_release(&fm);
}
END_TEST

/* Discovery's probes: each foreign signature, and blank is none. */
START_TEST(test_signatures)
{
	uint8_t *b = calloc(1, DV_STRIPE_PROBE_BYTES);

	ck_assert_ptr_null(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES));
	b[0x438] = 0x53;
	b[0x439] = 0xef;
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES), "ext2/3/4");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	memcpy(b, "XFSB", 4);
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES), "xfs");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	memcpy(b + 0x10040, "_BHRfS_M", 8);
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES), "btrfs");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	b[(128 << 10) + 3 * 1024] = 0x0c;
	b[(128 << 10) + 3 * 1024 + 1] = 0xb1;
	b[(128 << 10) + 3 * 1024 + 2] = 0xba;
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES), "zfs");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	memcpy(b + 512, "LABELONE", 8);
	memcpy(b + 512 + 24, "LVM2 001", 8);
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES),
			 "LVM2 physical volume");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	memcpy(b + 4086, "SWAPSPACE2", 10);
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES), "swap");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	memcpy(b, "LUKS\xba\xbe", 6);
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES), "LUKS");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	memcpy(b + 512, "EFI PART", 8);
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES),
			 "GPT partition table");
	memset(b, 0, DV_STRIPE_PROBE_BYTES);
	b[510] = 0x55;
	b[511] = 0xaa;
	ck_assert_str_eq(dv_stripe_signature(b, DV_STRIPE_PROBE_BYTES),
			 "MBR partition table or boot sector");
	/* A short read probes what it has, without reading past it. */
	ck_assert_ptr_null(dv_stripe_signature(b, 100));
	free(b);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stripe_layout");
	TCase *tc = tcase_create("layout");

	tcase_add_test(tc, test_start_device_from_hash);
	tcase_add_test(tc, test_round_robin);
	tcase_add_test(tc, test_chunks_and_last_partial);
	tcase_add_test(tc, test_offsets_aligned);
	tcase_add_test(tc, test_superblock);
	tcase_add_test(tc, test_freemap);
	tcase_add_test(tc, test_signatures);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
