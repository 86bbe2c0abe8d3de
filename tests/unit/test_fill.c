/*
 * Streaming fills (tiers/core/fill.h) over an in-memory fetcher: what is
 * fetched, in which order, how often; what a reader waits for and gets;
 * what done() is told; what a resumed staging file saves.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/util.h"
#include "tiers/core/chunks.h"
#include "tiers/core/fill.h"
#include "helpers.h"

#define CS (64u << 10)
#define NCHUNKS 10
#define SIZE (NCHUNKS * CS - 1000)

static uint8_t data[SIZE];
static uint8_t whole[32];

struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned calls[NCHUNKS];
	int order[64];
	unsigned norder;
	int corrupt;             /* chunk whose bytes are wrong, or -1 */
	unsigned corrupt_times;  /* how many fetches of it are wrong; 0: all */
	int fail;                /* chunk whose fetch fails, or -1 */
	int gate;                /* chunk whose fetch waits for @open, or -1 */
	bool open;
};

static struct fake fk;

static int fake_range(void *arg, const struct dv_shard_ref *ref,
		      uint64_t off, uint64_t len, void *buf)
{
	int i = (int)(off / CS);
	unsigned n;

	pthread_mutex_lock(&fk.lock);
	n = ++fk.calls[i];
	if (fk.norder < 64)
		fk.order[fk.norder++] = i;
	while (i == fk.gate && !fk.open)
		pthread_cond_wait(&fk.cond, &fk.lock);
	pthread_mutex_unlock(&fk.lock);
	if (i == fk.fail)
		return -EIO;
	memcpy(buf, data + off, len);
	if (i == fk.corrupt && (!fk.corrupt_times || n <= fk.corrupt_times))
		((uint8_t *)buf)[len / 2] ^= 1;
	return 0;
}

static void reset_fake(void)
{
	pthread_mutex_init(&fk.lock, NULL);
	pthread_cond_init(&fk.cond, NULL);
	memset(fk.calls, 0, sizeof(fk.calls));
	fk.norder = 0;
	fk.corrupt = fk.fail = fk.gate = -1;
	fk.corrupt_times = 0;
	fk.open = false;
}

static void open_gate(void)
{
	pthread_mutex_lock(&fk.lock);
	fk.open = true;
	pthread_cond_broadcast(&fk.cond);
	pthread_mutex_unlock(&fk.lock);
}

static struct dv_chunks make_chunks(void)
{
	struct dv_chunks c = { .size = SIZE, .chunk_size = CS, .n = NCHUNKS };

	c.sha256 = malloc(NCHUNKS * 32);
	for (uint32_t i = 0; i < NCHUNKS; i++)
		SHA256(data + (uint64_t)i * CS, dv_chunks_len(&c, i), c.sha256[i]);
	return c;
}

/* What done() was told. */
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done_calls, done_result;

static void on_done(void *arg, struct dv_fill *f, int result)
{
	pthread_mutex_lock(&done_lock);
	done_calls++;
	done_result = result;
	pthread_cond_broadcast(&done_cond);
	pthread_mutex_unlock(&done_lock);
}

static int wait_done(void)
{
	pthread_mutex_lock(&done_lock);
	while (!done_calls)
		pthread_cond_wait(&done_cond, &done_lock);
	pthread_mutex_unlock(&done_lock);
	return done_result;
}

struct run {
	char *dir;
	int fd;
	struct dv_fill *f;
};

static void start(struct run *r, unsigned parallel, bool resume,
		  const uint8_t *sha, unsigned timeout_ms)
{
	struct dv_fetcher fetcher = { .fetch_range = fake_range };
	struct dv_shard_ref ref = { .hash = "00112233445566778899aabbccddeeff",
				    .size = SIZE, .sha256 = sha, .label = "t" };
	struct dv_chunks c = make_chunks();
	struct dv_fill_params p = {
		.fd = r->fd, .ref = &ref, .fetcher = &fetcher, .chunks = &c,
		.resume = resume, .parallel = parallel,
		.timeout_ms = timeout_ms ? timeout_ms : 10000, .done = on_done,
	};

	done_calls = 0;
	ck_assert_int_eq(dv_fill_start(&p, &r->f), 0);
	ck_assert_uint_eq(c.n, 0); /* taken */
}

static void setup_run(struct run *r)
{
	char path[512];

	reset_fake();
	r->dir = dv_test_tmpdir("fill");
	snprintf(path, sizeof(path), "%s/staging", r->dir);
	r->fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(r->fd, 0);
	ck_assert_int_eq(ftruncate(r->fd, SIZE), 0);
}

static void end_run(struct run *r)
{
	dv_fill_put(r->f);
	close(r->fd);
	dv_test_rmtree(r->dir);
	free(r->dir);
}

static void assert_file_is_shard(int fd)
{
	uint8_t *got = malloc(SIZE);

	ck_assert_int_eq(dv_pread_full(fd, got, SIZE, 0), 0);
	ck_assert_mem_eq(got, data, SIZE);
	free(got);
}

START_TEST(test_whole_fill)
{
	struct run r;
	struct dv_fill_progress p;

	setup_run(&r);
	start(&r, 3, false, whole, 0);
	for (uint64_t off = 0; off < SIZE; off += 5000)
		ck_assert_int_eq(dv_fill_wait(r.f, off, 5000), 0);
	ck_assert_int_eq(wait_done(), 0);
	for (int i = 0; i < NCHUNKS; i++)
		ck_assert_uint_eq(fk.calls[i], 1);
	assert_file_is_shard(r.fd);
	dv_fill_progress(r.f, &p);
	ck_assert_uint_eq(p.done, NCHUNKS);
	ck_assert_uint_eq(p.failed, 0);
	ck_assert_uint_gt(p.ttfb_ns, 0);
	ck_assert_int_eq(dv_fill_wait(r.f, 0, SIZE), 0);
	end_run(&r);
}
END_TEST

START_TEST(test_nothing_before_the_first_read)
{
	struct run r;

	setup_run(&r);
	start(&r, 2, false, whole, 0);
	usleep(100000);
	ck_assert_uint_eq(fk.norder, 0);
	dv_fill_go(r.f); /* the opener closed: the fill runs to its end */
	ck_assert_int_eq(wait_done(), 0);
	ck_assert_uint_eq(fk.norder, NCHUNKS);
	end_run(&r);
}
END_TEST

/* With one worker, the chunk a reader waits for comes next. */
START_TEST(test_reader_first)
{
	struct run r;

	setup_run(&r);
	start(&r, 1, false, whole, 0);
	ck_assert_int_eq(dv_fill_wait(r.f, SIZE - 10, 10), 0);
	ck_assert_int_eq(fk.order[0], NCHUNKS - 1);
	ck_assert_int_eq(wait_done(), 0);
	ck_assert_uint_eq(fk.norder, NCHUNKS);
	end_run(&r);
}
END_TEST

START_TEST(test_bad_chunk_refetched_once)
{
	struct run r;

	setup_run(&r);
	fk.corrupt = 3;
	fk.corrupt_times = 1;
	start(&r, 2, false, whole, 0);
	ck_assert_int_eq(dv_fill_wait(r.f, 0, SIZE), 0);
	ck_assert_int_eq(wait_done(), 0);
	ck_assert_uint_eq(fk.calls[3], 2);
	assert_file_is_shard(r.fd);
	end_run(&r);
}
END_TEST

START_TEST(test_bad_chunk_fails_its_reads_only)
{
	struct run r;
	struct dv_fill_progress p;

	setup_run(&r);
	fk.corrupt = 3;
	start(&r, 2, false, whole, 0);
	ck_assert_int_eq(dv_fill_wait(r.f, 3 * CS + 1, 10), -EIO);
	ck_assert_int_eq(dv_fill_wait(r.f, 0, 3 * CS), 0);
	ck_assert_int_eq(dv_fill_wait(r.f, 4 * CS, SIZE - 4 * CS), 0);
	ck_assert_int_eq(wait_done(), -EIO);
	ck_assert_uint_eq(fk.calls[3], 2);
	dv_fill_progress(r.f, &p);
	ck_assert_uint_eq(p.failed, 1);
	ck_assert_uint_eq(p.done, NCHUNKS - 1);
	end_run(&r);
}
END_TEST

START_TEST(test_fetch_error)
{
	struct run r;

	setup_run(&r);
	fk.fail = 5;
	start(&r, 2, false, whole, 0);
	ck_assert_int_eq(dv_fill_wait(r.f, 5 * CS, 1), -EIO);
	ck_assert_int_eq(wait_done(), -EIO);
	end_run(&r);
}
END_TEST

/* Every chunk matches its list but the whole does not: never installed. */
START_TEST(test_whole_digest_checked)
{
	struct run r;
	uint8_t other[32];

	memcpy(other, whole, 32);
	other[0] ^= 1;
	setup_run(&r);
	start(&r, 2, false, other, 0);
	ck_assert_int_eq(dv_fill_wait(r.f, 0, SIZE), 0);
	ck_assert_int_eq(wait_done(), -EBADMSG);
	end_run(&r);
}
END_TEST

START_TEST(test_resume_reuses_good_chunks)
{
	struct run r;
	struct dv_fill_progress p;

	setup_run(&r);
	/* A killed fill left chunks 0-4 whole, chunk 5 half written. */
	ck_assert_int_eq(dv_pwrite_full(r.fd, data, 5 * CS + CS / 2, 0), 0);
	start(&r, 2, true, whole, 0);
	ck_assert_int_eq(dv_fill_wait(r.f, 0, SIZE), 0);
	ck_assert_int_eq(wait_done(), 0);
	for (int i = 0; i < NCHUNKS; i++)
		ck_assert_uint_eq(fk.calls[i], i < 5 ? 0 : 1);
	dv_fill_progress(r.f, &p);
	ck_assert_uint_eq(p.reused, 5);
	/* Chunk 5: only the half that was not written is fetched again. */
	ck_assert_uint_eq(p.fetched_bytes, SIZE - 5 * CS - CS / 2);
	assert_file_is_shard(r.fd);
	end_run(&r);
}
END_TEST

START_TEST(test_timeout_then_served)
{
	struct run r;

	setup_run(&r);
	fk.gate = 2;
	start(&r, 2, false, whole, 200);
	ck_assert_int_eq(dv_fill_wait(r.f, 2 * CS, 10), -ETIMEDOUT);
	ck_assert_int_eq(dv_fill_wait(r.f, 0, 2 * CS), 0);
	open_gate();
	ck_assert_int_eq(dv_fill_wait(r.f, 2 * CS, 10), 0);
	ck_assert_int_eq(wait_done(), 0);
	end_run(&r);
}
END_TEST

START_TEST(test_cancel)
{
	struct run r;

	setup_run(&r);
	fk.gate = 0;
	start(&r, 1, false, whole, 0);
	dv_fill_go(r.f);
	usleep(50000);
	dv_fill_cancel(r.f);
	open_gate();
	ck_assert_int_eq(wait_done(), -ECANCELED);
	ck_assert_int_eq(dv_fill_wait(r.f, SIZE - 1, 1), -ECANCELED);
	ck_assert_uint_eq(fk.norder, 1);
	end_run(&r);
}
END_TEST

static Suite *fill_suite(void)
{
	Suite *s = suite_create("fill");
	TCase *tc = tcase_create("core");

	dv_test_pattern(data, SIZE, 11);
	SHA256(data, SIZE, whole);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_whole_fill);
	tcase_add_test(tc, test_nothing_before_the_first_read);
	tcase_add_test(tc, test_reader_first);
	tcase_add_test(tc, test_bad_chunk_refetched_once);
	tcase_add_test(tc, test_bad_chunk_fails_its_reads_only);
	tcase_add_test(tc, test_fetch_error);
	tcase_add_test(tc, test_whole_digest_checked);
	tcase_add_test(tc, test_resume_reuses_good_chunks);
	tcase_add_test(tc, test_timeout_then_served);
	tcase_add_test(tc, test_cancel);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(fill_suite());
}
