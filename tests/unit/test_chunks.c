/*
 * Chunk lists (tiers/core/chunks.h): computed from a file in one pass,
 * written, read back only when they match their pin, and refused when
 * malformed, truncated or for another size.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiers/core/chunks.h"
#include "helpers.h"

#define CS (64u << 10)

static char err[256];

/* A file of @size pattern bytes; its fd, opened for reading. */
static int pattern_file(const char *dir, uint64_t size, uint8_t **data)
{
	char path[512];
	int fd;

	*data = malloc(size ? size : 1);
	ck_assert_ptr_nonnull(*data);
	dv_test_pattern(*data, size, 7);
	snprintf(path, sizeof(path), "%s/f", dir);
	dv_test_write_file(path, *data, size);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	return fd;
}

START_TEST(test_of_fd_sizes)
{
	static const uint64_t sizes[] = { 0, 1, CS - 1, CS, CS + 1, 3 * CS,
					  5 * CS + 17 };
	char *dir = dv_test_tmpdir("chunks");

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint8_t whole[32], want[32], *data;
		struct dv_chunks c;
		int fd = pattern_file(dir, sizes[k], &data);

		ck_assert_int_eq(dv_chunks_of_fd(fd, CS, whole, &c), 0);
		SHA256(data, sizes[k], want);
		ck_assert_mem_eq(whole, want, 32);
		ck_assert_uint_eq(c.size, sizes[k]);
		ck_assert_uint_eq(c.n, dv_chunks_count(sizes[k], CS));
		for (uint32_t i = 0; i < c.n; i++) {
			SHA256(data + (uint64_t)i * CS, dv_chunks_len(&c, i), want);
			ck_assert_mem_eq(c.sha256[i], want, 32);
			ck_assert(dv_chunks_check(&c, i, data + (uint64_t)i * CS));
		}
		if (c.n) {
			data[0] ^= 1;
			ck_assert(!dv_chunks_check(&c, 0, data));
		}
		dv_chunks_release(&c);
		close(fd);
		free(data);
	}
	dv_test_rmtree(dir);
	free(dir);
}
END_TEST

/* A list of @n chunks for a shard of @size bytes, as text, and its pin. */
static char *list_of(uint64_t size, uint8_t pin[32], size_t *len)
{
	struct dv_chunks c = { .size = size, .chunk_size = CS };
	char *text;

	c.n = (uint32_t)dv_chunks_count(size, CS);
	c.sha256 = calloc(c.n + 1, 32);
	for (uint32_t i = 0; i < c.n; i++)
		memset(c.sha256[i], (int)i + 1, 32);
	ck_assert_int_eq(dv_chunks_format(&c, &text, len, pin), 0);
	dv_chunks_release(&c);
	return text;
}

static void repin(const char *text, size_t len, uint8_t pin[32])
{
	SHA256((const unsigned char *)text, len, pin);
}

START_TEST(test_round_trip)
{
	uint8_t pin[32];
	struct dv_chunks c;
	size_t len;
	char *text = list_of(2 * CS + 5, pin, &len);

	ck_assert_int_eq(dv_chunks_parse(text, len, pin, 2 * CS + 5, &c, err,
					 sizeof(err)), 0);
	ck_assert_uint_eq(c.n, 3);
	ck_assert_uint_eq(c.chunk_size, CS);
	ck_assert_uint_eq(dv_chunks_len(&c, 2), 5);
	ck_assert_uint_eq(c.sha256[2][0], 3);
	dv_chunks_release(&c);
	free(text);
}
END_TEST

START_TEST(test_refused)
{
	uint8_t pin[32], other[32];
	struct dv_chunks c;
	size_t len;
	char *text = list_of(3 * CS, pin, &len), *bad;

	/* Another pin: nothing in the list is believed. */
	memcpy(other, pin, 32);
	other[0] ^= 1;
	ck_assert_int_eq(dv_chunks_parse(text, len, other, 3 * CS, &c, err,
					 sizeof(err)), -EBADMSG);
	/* The manifest says another size. */
	ck_assert_int_eq(dv_chunks_parse(text, len, pin, 3 * CS + 1, &c, err,
					 sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "size"));
	/* Truncated by one line, pinned as it is. */
	repin(text, len - 65, other);
	ck_assert_int_eq(dv_chunks_parse(text, len - 65, other, 3 * CS, &c, err,
					 sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "chunk 2"));
	/* Cut inside a line. */
	repin(text, len - 3, other);
	ck_assert_int_eq(dv_chunks_parse(text, len - 3, other, 3 * CS, &c, err,
					 sizeof(err)), -EINVAL);
	/* A line too many. */
	bad = malloc(len + 66);
	memcpy(bad, text, len);
	memcpy(bad + len, text + len - 65, 65);
	repin(bad, len + 65, other);
	ck_assert_int_eq(dv_chunks_parse(bad, len + 65, other, 3 * CS, &c, err,
					 sizeof(err)), -EINVAL);
	/* A chunk size that is not a power of two. */
	memcpy(bad, text, len);
	bad[strlen(DV_CHUNKS_FORMAT) + 1 + strlen("chunk_size ")] = '9';
	repin(bad, len, other);
	ck_assert_int_eq(dv_chunks_parse(bad, len, other, 3 * CS, &c, err,
					 sizeof(err)), -EINVAL);
	/* Upper-case or non-hex digits. */
	memcpy(bad, text, len);
	bad[len - 2] = 'g';
	repin(bad, len, other);
	ck_assert_int_eq(dv_chunks_parse(bad, len, other, 3 * CS, &c, err,
					 sizeof(err)), -EINVAL);
	free(bad);
	free(text);
}
END_TEST

START_TEST(test_valid_sizes)
{
	ck_assert(dv_chunks_valid_size(64u << 10));
	ck_assert(dv_chunks_valid_size(4u << 20));
	ck_assert(dv_chunks_valid_size(64u << 20));
	ck_assert(!dv_chunks_valid_size(32u << 10));
	ck_assert(!dv_chunks_valid_size(128u << 20));
	ck_assert(!dv_chunks_valid_size(3u << 20));
	ck_assert(!dv_chunks_valid_size(0));
}
END_TEST

static Suite *chunks_suite(void)
{
	Suite *s = suite_create("chunks");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_of_fd_sizes);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_valid_sizes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(chunks_suite());
}
