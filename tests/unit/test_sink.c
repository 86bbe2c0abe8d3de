/*
 * The verifying sink (B2): size and SHA-256 checks, the two-stage worker
 * pipeline that hashes and writes off the caller's thread, and the tap
 * that sees every stored byte in stream order (the mount's page-cache
 * push relies on it).
 */
#include <check.h>
#include <errno.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tiers/core/sink.h"
#include "helpers.h"

/* Over several of the sink's 1 MiB buffers, and not a multiple of one. */
#define BIG ((5u << 20) + 12345)

static unsigned char *data;
static uint8_t digest[32];

/* What a tap saw, rebuilt at the offsets it was told. */
struct seen {
	unsigned char *bytes;
	uint64_t next;          /* offset the next call must start at */
	unsigned calls;
	unsigned restarts;      /* calls at offset 0 after the first */
	bool out_of_order;
};

static void record(void *arg, const void *buf, size_t len, uint64_t off)
{
	struct seen *s = arg;

	if (off == 0 && s->calls > 0) {
		s->restarts++;
		s->next = 0;
	}
	if (off != s->next || off + len > BIG)
		s->out_of_order = true;
	else
		memcpy(s->bytes + off, buf, len);
	s->next = off + len;
	s->calls++;
}

static void setup(void)
{
	data = malloc(BIG);
	ck_assert_ptr_nonnull(data);
	dv_test_pattern(data, BIG, 7);
	SHA256(data, BIG, digest);
}

static void teardown(void)
{
	free(data);
}

/* Feeds @len bytes of data in odd-sized pieces, as libcurl would. */
static int feed(struct dv_sink *s, size_t from, size_t len)
{
	static const size_t piece = 7919;

	for (size_t off = from; off < from + len; off += piece) {
		size_t n = from + len - off < piece ? from + len - off : piece;
		int ret = dv_sink_write(s, data + off, n);

		if (ret)
			return ret;
	}
	return 0;
}

static int memfd(void)
{
	int fd = memfd_create("sink", 0);

	ck_assert_int_ge(fd, 0);
	return fd;
}

/* A sink with a tap recording what it sees. */
struct run {
	struct seen seen;
	struct dv_sink_tap tap;
	struct dv_sink s;
	int fd;
};

static void run_start(struct run *r, uint64_t size, const uint8_t *sha)
{
	memset(r, 0, sizeof(*r));
	r->seen.bytes = calloc(1, BIG);
	ck_assert_ptr_nonnull(r->seen.bytes);
	r->tap.fn = record;
	r->tap.arg = &r->seen;
	r->fd = memfd();
	ck_assert_int_eq(dv_sink_init(&r->s, r->fd, size, sha), 0);
	r->s.tap = &r->tap;
}

/*
 * Finishes a stream of the first @size bytes of data that must verify;
 * checks that the file and the tap hold exactly them.
 */
static void run_finish(struct run *r, size_t size)
{
	unsigned char *back = malloc(size + 1);

	ck_assert_int_eq(dv_sink_finish(&r->s), 0);
	dv_sink_release(&r->s);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(pread(r->fd, back, size + 1, 0), (ssize_t)size);
	ck_assert_int_eq(memcmp(back, data, size), 0);
	free(back);
	ck_assert(!r->seen.out_of_order);
	ck_assert_uint_eq(r->seen.next, size);
	ck_assert_int_eq(memcmp(r->seen.bytes, data, size), 0);
}

static void run_free(struct run *r)
{
	free(r->seen.bytes);
	close(r->fd);
}

START_TEST(test_b2_stream_verified_and_tapped)
{
	struct run r;

	run_start(&r, BIG, digest);
	ck_assert_int_eq(feed(&r.s, 0, BIG), 0);
	run_finish(&r, BIG);
	ck_assert_uint_ge(r.seen.calls, 6); /* one per buffer */
	run_free(&r);
}
END_TEST

START_TEST(test_b2_wrong_bytes_refused)
{
	struct dv_sink s;
	int fd = memfd();

	data[BIG / 2] ^= 1;
	ck_assert_int_eq(dv_sink_init(&s, fd, BIG, digest), 0);
	ck_assert_int_eq(feed(&s, 0, BIG), 0);
	ck_assert_int_eq(dv_sink_finish(&s), -EBADMSG);
	dv_sink_release(&s);
	close(fd);
}
END_TEST

START_TEST(test_b2_short_and_long_streams)
{
	struct dv_sink s;
	int fd = memfd();

	ck_assert_int_eq(dv_sink_init(&s, fd, BIG, digest), 0);
	ck_assert_int_eq(feed(&s, 0, BIG - 1), 0);
	ck_assert_int_eq(dv_sink_finish(&s), -EIO);
	dv_sink_release(&s);

	ck_assert_int_eq(dv_sink_init(&s, fd, BIG - 1, NULL), 0);
	ck_assert_int_eq(feed(&s, 0, BIG), -EFBIG);
	dv_sink_release(&s);
	close(fd);
}
END_TEST

/* A server that ignores a Range: the stream starts over, and so does the tap. */
START_TEST(test_b2_reset_starts_over)
{
	struct run r;

	run_start(&r, BIG, digest);
	ck_assert_int_eq(feed(&r.s, 0, 3u << 20), 0);
	ck_assert_int_eq(dv_sink_reset(&r.s), 0);
	ck_assert_int_eq(feed(&r.s, 0, BIG), 0);
	run_finish(&r, BIG);
	ck_assert_uint_eq(r.seen.restarts, 1);
	run_free(&r);
}
END_TEST

/* A shard that fits one buffer is finished on the caller's thread. */
START_TEST(test_b2_small_shard)
{
	const size_t small = 4096 + 17;
	uint8_t small_digest[32];
	struct run r;

	SHA256(data, small, small_digest);
	run_start(&r, small, small_digest);
	ck_assert_int_eq(feed(&r.s, 0, small), 0);
	run_finish(&r, small);
	ck_assert_uint_eq(r.seen.calls, 1);
	run_free(&r);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sink");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_b2_stream_verified_and_tapped);
	tcase_add_test(tc, test_b2_wrong_bytes_refused);
	tcase_add_test(tc, test_b2_short_and_long_streams);
	tcase_add_test(tc, test_b2_reset_starts_over);
	tcase_add_test(tc, test_b2_small_shard);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
