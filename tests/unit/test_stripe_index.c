/*
 * The stripe index journal: replayed after a
 * truncation at every byte of its last record, nothing committed is lost
 * and nothing half-written is visible; a torn tail is cut off so that the
 * next append follows the last good record; compaction keeps the entries.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/log.h"
#include "stripe/index.h"
#include "helpers.h"

#define CHUNK (1ULL << 20)

static char *root;
static char jpath[4096];
static struct dv_stripe_journal_hdr hdr;

static void setup(void)
{
	root = dv_test_tmpdir("stripe-index");
	snprintf(jpath, sizeof(jpath), "%s/journal", root);
	memset(&hdr, 0, sizeof(hdr));
	memset(hdr.pool_id, 0x11, sizeof(hdr.pool_id));
	memset(hdr.journal_id, 0x22, sizeof(hdr.journal_id));
	hdr.chunk_bytes = CHUNK;
	dv_log_set_level(DV_LOG_ERROR);
}

static void teardown(void)
{
	dv_test_rmtree(root);
	free(root);
}

static void hash_n(int i, char *hash)
{
	snprintf(hash, 65, "%032x", 0xabc000 + i);
}

/* Object @i: i chunks and a few bytes, chunks placed as a function of i. */
static uint64_t size_n(int i)
{
	return (uint64_t)i * CHUNK + 1000 + (uint64_t)i;
}

static struct dv_stripe_entry *entry_n(int i)
{
	char hash[65];
	uint64_t size = size_n(i);
	struct dv_stripe_entry *e;

	hash_n(i, hash);
	e = dv_stripe_entry_new(hash, size, (uint32_t)dv_stripe_nchunks(size, CHUNK));
	ck_assert_ptr_nonnull(e);
	for (uint32_t k = 0; k < e->nchunks; k++) {
		e->chunks[k].dev = (uint16_t)((i + k) % 4);
		e->chunks[k].slot = 100ULL * (uint64_t)i + k;
		e->chunks[k].xxh = 0x1234567890abcdefULL ^ ((uint64_t)i << 32) ^ k;
	}
	return e;
}

static void commit_n(struct dv_stripe_index *ix, int i)
{
	ck_assert_int_eq(dv_stripe_index_commit(ix, entry_n(i)), 0);
}

static void delete_n(struct dv_stripe_index *ix, int i)
{
	char hash[65];
	struct dv_stripe_entry *e;

	hash_n(i, hash);
	e = dv_stripe_index_find(ix, hash);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(dv_stripe_index_delete(ix, &e, 1), 0);
	free(e);
}

/* The index holds exactly the objects of @want (terminated by -1), intact. */
static void check_holds(struct dv_stripe_index *ix, const int *want)
{
	size_t n = 0;

	for (; want[n] >= 0; n++) {
		struct dv_stripe_entry *x = entry_n(want[n]);
		struct dv_stripe_entry *e = dv_stripe_index_find(ix, x->hash);

		ck_assert_msg(e != NULL, "object %d is missing", want[n]);
		ck_assert_uint_eq(e->size, x->size);
		ck_assert_uint_eq(e->nchunks, x->nchunks);
		for (uint32_t k = 0; k < e->nchunks; k++) {
			ck_assert_uint_eq(e->chunks[k].dev, x->chunks[k].dev);
			ck_assert_uint_eq(e->chunks[k].slot, x->chunks[k].slot);
			ck_assert_uint_eq(e->chunks[k].xxh, x->chunks[k].xxh);
		}
		free(x);
	}
	ck_assert_uint_eq(ix->n, n);
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

static void write_prefix(const char *path, const char *buf, size_t len)
{
	dv_test_write_file(path, buf, len);
}

/*
 * Builds a journal whose records are @ops (i > 0: commit object i, i < 0:
 * delete object -i), the last one apart; returns the file's bytes and
 * where the last record starts.
 */
static char *build(const int *ops, size_t nops, size_t *len, size_t *last_at)
{
	struct dv_stripe_index ix;

	ck_assert_int_eq(dv_stripe_index_create(&ix, jpath, &hdr), 0);
	for (size_t k = 0; k < nops; k++) {
		if (k == nops - 1)
			*last_at = (size_t)file_size(jpath);
		if (ops[k] > 0)
			commit_n(&ix, ops[k]);
		else
			delete_n(&ix, -ops[k]);
	}
	dv_stripe_index_close(&ix);
	return dv_test_read_file(jpath, len);
}

/*
 * Every truncation inside the last record: the state before it, the file
 * cut back to the last good record, and a new append replayed after it.
 */
static void truncate_everywhere(const int *ops, size_t nops, const int *before,
				const int *after, const int *then)
{
	size_t len, last_at;
	char *full = build(ops, nops, &len, &last_at);
	struct dv_stripe_index ix;

	ck_assert_ptr_nonnull(full);
	ck_assert_uint_gt(len, last_at);
	for (size_t cut = last_at; cut < len; cut++) {
		write_prefix(jpath, full, cut);
		ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &hdr), 0);
		check_holds(&ix, before);
		ck_assert_uint_eq(ix.bytes, last_at);
		ck_assert_uint_eq(ix.dropped_bytes, cut - last_at);
		ck_assert_uint_eq(file_size(jpath), last_at);
		/* Appending after a torn tail: the new record is replayed too. */
		commit_n(&ix, 9);
		dv_stripe_index_close(&ix);
		ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &hdr), 0);
		check_holds(&ix, then);
		ck_assert_uint_eq(ix.dropped_bytes, 0);
		dv_stripe_index_close(&ix);
	}
	write_prefix(jpath, full, len);
	ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &hdr), 0);
	check_holds(&ix, after);
	dv_stripe_index_close(&ix);
	free(full);
}

/* A torn ADD: the object is absent, every earlier one intact. */
START_TEST(test_torn_add_every_byte)
{
	const int ops[] = { 1, 2, 3, -2, 5 };

	truncate_everywhere(ops, 5, (const int[]){ 1, 3, -1 },
			    (const int[]){ 1, 3, 5, -1 },
			    (const int[]){ 1, 3, 9, -1 });
}
END_TEST

/* A torn DEL: the object is still there (its slots were not reused). */
START_TEST(test_torn_del_every_byte)
{
	const int ops[] = { 1, 2, 3, -3 };

	truncate_everywhere(ops, 4, (const int[]){ 1, 2, 3, -1 },
			    (const int[]){ 1, 2, -1 },
			    (const int[]){ 1, 2, 3, 9, -1 });
}
END_TEST

/* A flipped byte anywhere in the last record: it is dropped. */
START_TEST(test_corrupt_last_record)
{
	const int ops[] = { 1, 2, 4 };
	size_t len, last_at;
	char *full = build(ops, 3, &len, &last_at);
	struct dv_stripe_index ix;

	for (size_t at = last_at; at < len; at++) {
		full[at] ^= 0x40;
		write_prefix(jpath, full, len);
		full[at] ^= 0x40;
		ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &hdr), 0);
		check_holds(&ix, (const int[]){ 1, 2, -1 });
		dv_stripe_index_close(&ix);
	}
	free(full);
}
END_TEST

/* A journal of another pool or journal is not ours; a torn header is bad. */
START_TEST(test_foreign_or_damaged_header)
{
	const int ops[] = { 1, 2 };
	struct dv_stripe_journal_hdr other = hdr;
	struct dv_stripe_index ix;
	size_t len, last_at;
	char *full = build(ops, 2, &len, &last_at);

	other.pool_id[3] ^= 1;
	ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &other), -ENOENT);
	other = hdr;
	other.journal_id[0] ^= 1;
	ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &other), -ENOENT);
	other = hdr;
	other.chunk_bytes *= 2;
	ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &other), -ENOENT);
	for (size_t cut = 0; cut < 64; cut += 7) {
		write_prefix(jpath, full, cut);
		ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &hdr), -EBADMSG);
	}
	unlink(jpath);
	ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &hdr), -ENOENT);
	free(full);
}
END_TEST

/* Compaction keeps the live entries, in order, and shrinks the file. */
START_TEST(test_compaction)
{
	struct dv_stripe_index ix;
	uint64_t before;

	ck_assert_int_eq(dv_stripe_index_create(&ix, jpath, &hdr), 0);
	for (int round = 0; round < 20; round++) {
		for (int i = 1; i <= 6; i++)
			commit_n(&ix, i);
		for (int i = 1; i <= 6; i++) {
			if (round == 19 && i % 2)
				continue;
			delete_n(&ix, i);
		}
	}
	before = file_size(jpath);
	ck_assert_int_eq(dv_stripe_index_compact(&ix), 0);
	ck_assert_uint_lt(file_size(jpath), before / 10);
	commit_n(&ix, 8);
	dv_stripe_index_close(&ix);
	ck_assert_int_eq(dv_stripe_index_load(&ix, jpath, &hdr), 0);
	check_holds(&ix, (const int[]){ 1, 3, 5, 8, -1 });
	dv_stripe_index_close(&ix);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stripe_index");
	TCase *tc = tcase_create("journal");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_torn_add_every_byte);
	tcase_add_test(tc, test_torn_del_every_byte);
	tcase_add_test(tc, test_corrupt_last_record);
	tcase_add_test(tc, test_foreign_or_damaged_header);
	tcase_add_test(tc, test_compaction);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
