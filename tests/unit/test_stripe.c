/*
 * The stripe tier end to end over plain files as devices: install and read
 * back at any offset and length (both read paths), a restart keeps the
 * cache (B8) whatever the device order, a corrupt chunk is an EIO and a
 * miss (B3), open objects are never evicted (B6), foreign signatures are
 * refused unless format: true, one daemon per pool; the reader's
 * read-ahead: sequential reads find their chunks read ahead, random ones
 * cause none, bytes stay right across chunk and device boundaries and
 * with threads sharing a handle, buffers stay within their bounds and are
 * released at close.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"
#include "stripe/engine.h"
#include "stripe/layout.h"
#include "stripe/stripe.h"
#include "helpers.h"

#define MiB (1ULL << 20)
#define NDEV 4
#define DEV_BYTES (24 * MiB)

static char *root;
static char dev[NDEV][4096];
static char *devices[NDEV + 1];
static char state[4096];
static enum dv_verify_mode verify_mode;

static void setup(void)
{
	root = dv_test_tmpdir("stripe");
	snprintf(state, sizeof(state), "%s/state", root);
	for (int i = 0; i < NDEV; i++) {
		int fd;

		snprintf(dev[i], sizeof(dev[i]), "%s/dev%d", root, i);
		fd = open(dev[i], O_RDWR | O_CREAT, 0644);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(ftruncate(fd, DEV_BYTES), 0);
		close(fd);
		devices[i] = dev[i];
	}
	devices[NDEV] = NULL;
	verify_mode = DV_VERIFY_FILL;
	dv_log_set_level(getenv("DV_DEBUG") ? DV_LOG_DEBUG : DV_LOG_ERROR);
}

static void teardown(void)
{
	dv_test_rmtree(root);
	free(root);
}

/* A tier over @devs; 0 from ->open or its error. */
static int try_tier(char **devs, uint64_t max_bytes, bool format,
		    struct dv_tier **out)
{
	struct dv_tier_config tc = {
		.type = DV_TIER_TYPE_STRIPE, .name = (char *)"nvme",
		.max_bytes = max_bytes, .devices = devs, .chunk_bytes = MiB,
		.format = format,
	};
	struct dv_config cfg = { .state_dir = state, .verify = verify_mode };
	char err[512];
	int ret;

	ck_assert_int_eq(dv_stripe_tier_new(&tc, &cfg, out, err, sizeof(err)), 0);
	ret = (*out)->ops->open(*out);
	if (ret) {
		dv_tier_free(*out);
		*out = NULL;
	}
	return ret;
}

static struct dv_tier *new_tier(uint64_t max_bytes)
{
	struct dv_tier *t;

	ck_assert_int_eq(try_tier(devices, max_bytes, false, &t), 0);
	return t;
}

static void hash_n(int i, char *hash)
{
	snprintf(hash, 65, "%032x", 0x5eed00 + i);
}

static uint64_t size_n(int i)
{
	return 5 * MiB + MiB / 2 + 123 + (uint64_t)i;
}

static char *bytes_n(int i, uint64_t size)
{
	char *b = malloc(size);

	ck_assert_ptr_nonnull(b);
	dv_test_pattern(b, size, (uint32_t)i + 1);
	return b;
}

/* Installs object @i of @size bytes from a file, as the hierarchy does. */
static int install_sized(struct dv_tier *t, int i, uint64_t size)
{
	char path[4096], hash[65];
	char *b = bytes_n(i, size);
	int fd, ret;

	snprintf(path, sizeof(path), "%s/src%d", root, i);
	dv_test_write_file(path, b, size);
	free(b);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	hash_n(i, hash);
	t->ops->lookup(t, hash, size); /* the miss that precedes a fill */
	ret = t->ops->install(t, hash, fd, path, size, 0);
	close(fd);
	unlink(path);
	return ret;
}

static int install_n(struct dv_tier *t, int i)
{
	return install_sized(t, i, size_n(i));
}

static void open_n(struct dv_tier *t, int i, uint64_t size, struct dv_object *obj)
{
	memset(obj, 0, sizeof(*obj));
	obj->fd = -1;
	hash_n(i, obj->hash);
	ck_assert_int_eq(t->ops->open_object(t, obj->hash, size, obj), 0);
	obj->tier = t;
	ck_assert_int_eq(obj->fd, -1);
}

/* Reads [off, off+len) of an open object and compares it with @want. */
static void check_range(struct dv_tier *t, struct dv_object *obj,
			const char *want, uint64_t off, size_t len, char *buf)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = t->ops->read(t, obj, buf + done, len - done, off + done);

		ck_assert_int_gt(n, 0);
		done += (size_t)n;
	}
	ck_assert(memcmp(buf, want + off, len) == 0);
}

/* Reads object @i of @size bytes whole, @step at a time, and checks it. */
static void check_sized(struct dv_tier *t, int i, uint64_t size, size_t step)
{
	char *want = bytes_n(i, size);
	char *buf = malloc(step);
	struct dv_object obj;

	open_n(t, i, size, &obj);
	for (uint64_t off = 0; off < size; off += step) {
		size_t len = size - off < step ? (size_t)(size - off) : step;

		check_range(t, &obj, want, off, len, buf);
	}
	t->ops->close_object(t, &obj);
	free(buf);
	free(want);
}

static void check_object(struct dv_tier *t, int i, size_t step)
{
	check_sized(t, i, size_n(i), step);
}

static void check_object_sized(struct dv_tier *t, int i, uint64_t size)
{
	check_sized(t, i, size, 1 << 20);
}

START_TEST(test_install_and_read_back)
{
	struct dv_tier *t = new_tier(0);
	uint64_t size = size_n(1);
	char *want = bytes_n(1, size);
	char *big = dv_stripe_buf_alloc(dv_stripe_io_len(size));
	char *buf = malloc(size + 100);
	struct dv_object obj;
	char hash[65];

	hash_n(1, hash);
	ck_assert_int_eq(t->ops->lookup(t, hash, size), -ENOENT);
	ck_assert_int_eq(install_n(t, 1), 0);
	ck_assert_int_eq(t->ops->lookup(t, hash, size), 0);
	ck_assert_int_eq(t->ops->lookup(t, hash, size + 1), -EBADMSG);
	/* Installing it again: already there, nothing to do. */
	ck_assert_int_eq(install_n(t, 1), 0);
	check_object(t, 1, 128 << 10);     /* FUSE-sized reads */
	check_object(t, 1, 4096 + 17);     /* odd sizes straddling chunks */
	check_object(t, 1, 3 * MiB + 5);

	open_n(t, 1, size, &obj);
	/* Random ranges, including the partial last chunk. */
	for (int k = 0; k < 200; k++) {
		uint64_t off = ((uint64_t)rand() * 7919) % size;
		size_t len = (size_t)(rand() % (int)(2 * MiB)) + 1;

		if (len > size - off)
			len = (size_t)(size - off);
		check_range(t, &obj, want, off, len, buf);
	}
	/* One aligned read of everything: the direct path. */
	ck_assert_int_eq(t->ops->read(t, &obj, big, size, 0), (ssize_t)size);
	ck_assert(memcmp(big, want, size) == 0);
	/* Past the end: short, then nothing. */
	ck_assert_int_eq(t->ops->read(t, &obj, buf, 100, size - 10), 10);
	ck_assert(memcmp(buf, want + size - 10, 10) == 0);
	ck_assert_int_eq(t->ops->read(t, &obj, buf, 100, size), 0);
	t->ops->close_object(t, &obj);
	free(big);
	free(buf);
	free(want);
	dv_tier_free(t);
}
END_TEST

/* Chunk 0 sits on the start device, right after its superblock. */
START_TEST(test_on_disk_placement)
{
	struct dv_tier *t = new_tier(0);
	uint64_t size = size_n(2);
	char *want = bytes_n(2, size);
	char hash[65], got[4096];
	unsigned start;
	int fd;

	hash_n(2, hash);
	ck_assert_int_eq(install_n(t, 2), 0);
	start = dv_stripe_start_device(hash, NDEV);
	for (unsigned k = 0; k < 3; k++) {
		unsigned d = dv_stripe_chunk_device(start, k, NDEV);

		fd = open(dev[d], O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, got, sizeof(got), DV_STRIPE_DATA_OFFSET),
				 (ssize_t)sizeof(got));
		ck_assert(memcmp(got, want + k * MiB, sizeof(got)) == 0);
		ck_assert_int_eq(pread(fd, got, 8, 0), 8);
		ck_assert(memcmp(got, DV_STRIPE_MAGIC, 8) == 0);
		close(fd);
	}
	free(want);
	dv_tier_free(t);
}
END_TEST

/* B8: a new tier over the same devices, listed in another order, keeps it. */
START_TEST(test_restart_keeps_cache)
{
	struct dv_tier *t = new_tier(0);
	char *shuffled[NDEV + 1] = { dev[2], dev[0], dev[3], dev[1], NULL };
	struct dv_tier_usage u;
	char hash[65];

	for (int i = 1; i <= 3; i++)
		ck_assert_int_eq(install_n(t, i), 0);
	dv_tier_free(t);
	ck_assert_int_eq(try_tier(shuffled, 0, false, &t), 0);
	for (int i = 1; i <= 3; i++) {
		hash_n(i, hash);
		ck_assert_int_eq(t->ops->lookup(t, hash, size_n(i)), 0);
		check_object(t, i, 1 << 20);
	}
	ck_assert_int_eq(t->ops->usage(t, &u), 0);
	ck_assert_uint_eq(u.objects, 3);
	ck_assert_uint_eq(u.used_bytes, size_n(1) + size_n(2) + size_n(3));
	/* Removal is durable too. */
	hash_n(2, hash);
	ck_assert_int_eq(t->ops->remove(t, hash), 0);
	ck_assert_int_eq(t->ops->remove(t, hash), -ENOENT);
	dv_tier_free(t);
	t = new_tier(0);
	ck_assert_int_eq(t->ops->lookup(t, hash, size_n(2)), -ENOENT);
	check_object(t, 3, 1 << 20);
	dv_tier_free(t);
}
END_TEST

static void corrupt_first_chunk(int i)
{
	char hash[65];
	int fd;

	hash_n(i, hash);
	fd = open(dev[dv_stripe_start_device(hash, NDEV)], O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "garbage", 7, DV_STRIPE_DATA_OFFSET + 999), 7);
	close(fd);
}

/* An EIO, a miss after it, and a good copy once installed again. */
static void expect_corrupt(struct dv_tier *t, int i)
{
	uint64_t size = size_n(i);
	struct dv_object obj;
	char hash[65], buf[4096];

	hash_n(i, hash);
	open_n(t, i, size, &obj);
	ck_assert_int_eq(t->ops->read(t, &obj, buf, sizeof(buf), 0), -EIO);
	ck_assert_int_eq(t->ops->lookup(t, hash, size), -ENOENT);
	t->ops->close_object(t, &obj);
	ck_assert_uint_eq(t->stats.verify_failures, 1);
	ck_assert_int_eq(install_n(t, i), 0);
	check_object(t, i, 1 << 20);
}

/*
 * B3: a chunk damaged while the daemon was down fails its checksum on the
 * first read: an EIO, and the object is a miss.
 */
START_TEST(test_corrupt_chunk_after_restart)
{
	struct dv_tier *t = new_tier(0);

	ck_assert_int_eq(install_n(t, 4), 0);
	dv_tier_free(t);
	corrupt_first_chunk(4);
	t = new_tier(0);
	expect_corrupt(t, 4);
	dv_tier_free(t);
}
END_TEST

/* verify: always checks every read, even of chunks written by this process. */
START_TEST(test_corrupt_chunk_verify_always)
{
	struct dv_tier *t;

	verify_mode = DV_VERIFY_ALWAYS;
	t = new_tier(0);
	ck_assert_int_eq(install_n(t, 4), 0);
	check_object(t, 4, 1 << 20);
	corrupt_first_chunk(4);
	expect_corrupt(t, 4);
	dv_tier_free(t);
}
END_TEST

/* verify: fill trusts what it wrote itself: no hashing on a steady read. */
START_TEST(test_written_chunks_count_as_checked)
{
	struct dv_tier *t = new_tier(0);
	uint64_t size = size_n(4);
	struct dv_object obj;
	char buf[4096];

	ck_assert_int_eq(install_n(t, 4), 0);
	corrupt_first_chunk(4);
	open_n(t, 4, size, &obj);
	ck_assert_int_eq(t->ops->read(t, &obj, buf, sizeof(buf), 0), sizeof(buf));
	t->ops->close_object(t, &obj);
	dv_tier_free(t);
}
END_TEST

/*
 * Space: W-TinyLFU admits popular newcomers, refuses one-hit ones when
 * full, never evicts an open object (B6); too large is -EFBIG.
 */
START_TEST(test_eviction_spares_open_objects)
{
	struct dv_tier *t = new_tier(8 * MiB);
	struct dv_tier_usage u;
	struct dv_object obj;
	char hash[65];

	for (int i = 1; i <= 4; i++)
		ck_assert_int_eq(install_sized(t, i, 2 * MiB), 0);
	open_n(t, 1, 2 * MiB, &obj); /* the least popular, but open */
	for (int i = 5; i <= 8; i++) {
		hash_n(i, hash);
		for (int k = 0; k < (i == 8 ? 12 : 6); k++)
			t->ops->lookup(t, hash, 2 * MiB);
		ck_assert_int_eq(install_sized(t, i, 2 * MiB), 0);
		ck_assert_int_eq(t->ops->usage(t, &u), 0);
		ck_assert_uint_le(u.used_bytes, 8 * MiB);
		hash_n(1, hash);
		ck_assert_int_eq(t->ops->lookup(t, hash, 2 * MiB), 0);
	}
	ck_assert_uint_eq(t->stats.evictions, 4);
	/* Seen once, against more popular objects: refused. */
	ck_assert_int_eq(install_sized(t, 9, 2 * MiB), -ENOSPC);
	t->ops->close_object(t, &obj);
	check_object_sized(t, 8, 2 * MiB);
	ck_assert_int_eq(install_sized(t, 20, 9 * MiB), -EFBIG);
	dv_tier_free(t);
}
END_TEST

/* A foreign signature is refused, unless format: true. */
START_TEST(test_foreign_signature)
{
	struct dv_tier *t;
	unsigned char magic[2] = { 0x53, 0xef }, got[2];
	int fd = open(dev[1], O_WRONLY);

	ck_assert_int_eq(pwrite(fd, magic, 2, 0x438), 2); /* ext4 */
	close(fd);
	ck_assert_int_eq(try_tier(devices, 0, false, &t), -EPERM);
	ck_assert_int_eq(try_tier(devices, 0, true, &t), 0);
	dv_tier_free(t);
	fd = open(dev[1], O_RDONLY);
	ck_assert_int_eq(pread(fd, got, 2, 0x438), 2);
	ck_assert(got[0] == 0 && got[1] == 0);
	close(fd);
	/* Ours now: accepted without format. */
	ck_assert_int_eq(try_tier(devices, 0, false, &t), 0);
	dv_tier_free(t);
}
END_TEST

/* One daemon per pool; another device list is another pool. */
START_TEST(test_ownership_and_membership)
{
	struct dv_tier *t = new_tier(0), *t2;
	char *three[NDEV] = { dev[0], dev[1], dev[2], NULL };
	char hash[65];

	ck_assert_int_eq(install_n(t, 1), 0);
	ck_assert_int_eq(try_tier(devices, 0, false, &t2), -EBUSY);
	dv_tier_free(t);
	/* Three of the four: a new pool, the old objects gone. */
	ck_assert_int_eq(try_tier(three, 0, false, &t), 0);
	hash_n(1, hash);
	ck_assert_int_eq(t->ops->lookup(t, hash, size_n(1)), -ENOENT);
	ck_assert_int_eq(install_n(t, 2), 0);
	check_object(t, 2, 1 << 20);
	dv_tier_free(t);
	/* The same device twice is refused. */
	three[1] = dev[0];
	ck_assert_int_ne(try_tier(three, 0, false, &t), 0);
}
END_TEST

/* A journal lost with its state directory: the pool is simply empty. */
START_TEST(test_lost_state_dir)
{
	struct dv_tier *t = new_tier(0);
	char hash[65], cmd[8192];

	ck_assert_int_eq(install_n(t, 1), 0);
	dv_tier_free(t);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state);
	ck_assert_int_eq(system(cmd), 0);
	t = new_tier(0);
	hash_n(1, hash);
	ck_assert_int_eq(t->ops->lookup(t, hash, size_n(1)), -ENOENT);
	ck_assert_int_eq(install_n(t, 3), 0);
	check_object(t, 3, 1 << 20);
	dv_tier_free(t);
}
END_TEST

/* Small and empty objects. */
START_TEST(test_small_objects)
{
	struct dv_tier *t = new_tier(0);
	struct dv_object obj;
	char buf[64], *want = bytes_n(7, 10);

	ck_assert_int_eq(install_sized(t, 7, 10), 0);
	ck_assert_int_eq(install_sized(t, 8, 0), 0);
	open_n(t, 7, 10, &obj);
	ck_assert_int_eq(t->ops->read(t, &obj, buf, sizeof(buf), 0), 10);
	ck_assert(memcmp(buf, want, 10) == 0);
	t->ops->close_object(t, &obj);
	open_n(t, 8, 0, &obj);
	ck_assert_int_eq(t->ops->read(t, &obj, buf, sizeof(buf), 0), 0);
	t->ops->close_object(t, &obj);
	free(want);
	dv_tier_free(t);
}
END_TEST

/* ---- read-ahead ---- */

#define RA_SIZE (20 * MiB + 4321) /* 21 chunks, the last one partial */

static struct dv_stripe_reader_stats stats_of(struct dv_object *obj)
{
	struct dv_stripe_reader_stats st;

	dv_stripe_object_stats(obj, &st);
	ck_assert_uint_le(st.buffers, st.max_buffers);
	return st;
}

START_TEST(test_readahead_sequential)
{
	struct dv_tier *t = new_tier(0);
	char *want = bytes_n(20, RA_SIZE), *buf = malloc(256 * 1024);
	uint64_t nchunks = dv_stripe_nchunks(RA_SIZE, MiB);
	struct dv_stripe_reader_stats st;
	struct dv_object obj;

	ck_assert_int_eq(install_sized(t, 20, RA_SIZE), 0);
	open_n(t, 20, RA_SIZE, &obj);
	for (uint64_t off = 0; off < RA_SIZE; off += 256 * 1024) {
		size_t len = RA_SIZE - off < 256 * 1024 ? (size_t)(RA_SIZE - off) :
							  256 * 1024;

		check_range(t, &obj, want, off, len, buf);
		st = stats_of(&obj);
	}
	/* Every chunk read once from the devices, all but the first ahead. */
	ck_assert_uint_eq(st.loads, nchunks);
	ck_assert_uint_eq(st.ahead_loads, nchunks - 1);
	ck_assert_uint_eq(st.ahead_hits, nchunks - 1);
	ck_assert_uint_eq(st.direct, 0);
	t->ops->close_object(t, &obj);
	free(buf);
	free(want);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_readahead_random_reader)
{
	static const unsigned order[] = { 17, 3, 11, 6, 19, 0, 14, 8, 1, 12, 9 };
	struct dv_tier *t = new_tier(0);
	char *want = bytes_n(21, RA_SIZE), buf[64 * 1024];
	struct dv_stripe_reader_stats st;
	struct dv_object obj;

	ck_assert_int_eq(install_sized(t, 21, RA_SIZE), 0);
	open_n(t, 21, RA_SIZE, &obj);
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		uint64_t off = order[i] * MiB + 1000 * i;

		check_range(t, &obj, want, off, sizeof(buf) - 100, buf);
	}
	st = stats_of(&obj);
	ck_assert_uint_eq(st.ahead_loads, 0);
	ck_assert_uint_eq(st.loads, sizeof(order) / sizeof(order[0]));
	/* A random reader reuses its buffers: it needs one at a time. */
	ck_assert_uint_le(st.buffers, 2);
	t->ops->close_object(t, &obj);
	free(want);
	dv_tier_free(t);
}
END_TEST

/* Reads of sizes that straddle chunks (and so devices), forwards then back. */
START_TEST(test_readahead_boundaries)
{
	static const size_t steps[] = { MiB + 4097, 777 * 1024, 3 * MiB - 1, 4096 };
	struct dv_tier *t = new_tier(0);
	char *want = bytes_n(22, RA_SIZE), *buf = malloc(3 * MiB);
	struct dv_object obj;

	ck_assert_int_eq(install_sized(t, 22, RA_SIZE), 0);
	open_n(t, 22, RA_SIZE, &obj);
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		for (uint64_t off = k * 333; off < RA_SIZE; off += steps[k]) {
			size_t len = RA_SIZE - off < steps[k] ?
					     (size_t)(RA_SIZE - off) : steps[k];

			check_range(t, &obj, want, off, len, buf);
		}
	}
	for (uint64_t end = RA_SIZE; end > 0;) {
		size_t len = end < MiB + 5 ? (size_t)end : MiB + 5;

		end -= len;
		check_range(t, &obj, want, end, len, buf);
	}
	ck_assert_int_eq(t->ops->read(t, &obj, buf, MiB, RA_SIZE - 10), 10);
	ck_assert(memcmp(buf, want + RA_SIZE - 10, 10) == 0);
	ck_assert_int_eq(t->ops->read(t, &obj, buf, MiB, RA_SIZE), 0);
	stats_of(&obj);
	t->ops->close_object(t, &obj);
	free(buf);
	free(want);
	dv_tier_free(t);
}
END_TEST

struct ra_thread {
	struct dv_tier *t;
	struct dv_object *obj;
	const char *want;
	unsigned k, n;
};

/* Thread @k of @n reads every n-th 128 KiB piece: one handle, shared. */
static void *ra_thread_main(void *arg)
{
	struct ra_thread *a = arg;
	const size_t step = 128 * 1024;
	char *buf = malloc(step);

	for (uint64_t off = a->k * step; off < RA_SIZE; off += a->n * step) {
		size_t len = RA_SIZE - off < step ? (size_t)(RA_SIZE - off) : step;

		check_range(a->t, a->obj, a->want, off, len, buf);
	}
	free(buf);
	return NULL;
}

START_TEST(test_readahead_threads_share_a_handle)
{
	struct dv_tier *t = new_tier(0);
	char *want = bytes_n(23, RA_SIZE);
	struct ra_thread a[4];
	pthread_t th[4];
	struct dv_stripe_reader_stats st;
	struct dv_object obj;

	ck_assert_int_eq(install_sized(t, 23, RA_SIZE), 0);
	open_n(t, 23, RA_SIZE, &obj);
	for (unsigned k = 0; k < 4; k++) {
		a[k] = (struct ra_thread){ t, &obj, want, k, 4 };
		ck_assert_int_eq(pthread_create(&th[k], NULL, ra_thread_main, &a[k]), 0);
	}
	for (unsigned k = 0; k < 4; k++)
		pthread_join(th[k], NULL);
	st = stats_of(&obj);
	ck_assert_uint_ge(st.loads, dv_stripe_nchunks(RA_SIZE, MiB));
	t->ops->close_object(t, &obj);
	free(want);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_readahead_released_at_close)
{
	struct dv_tier *t = new_tier(0);
	char *want = bytes_n(24, RA_SIZE), *buf = malloc(MiB);
	struct dv_object a, b;

	ck_assert_int_eq(install_sized(t, 24, RA_SIZE), 0);
	open_n(t, 24, RA_SIZE, &a);
	open_n(t, 24, RA_SIZE, &b);
	for (uint64_t off = 0; off < 6 * MiB; off += MiB / 2) {
		check_range(t, &a, want, off, MiB / 2, buf);
		check_range(t, &b, want, off, MiB / 2, buf);
	}
	/* Each holds its window (some still loading) until it is closed. */
	ck_assert_uint_eq(dv_stripe_tier_buffer_bytes(t),
			  (uint64_t)(stats_of(&a).buffers + stats_of(&b).buffers) * MiB);
	ck_assert_uint_gt(stats_of(&a).buffers, 2);
	t->ops->close_object(t, &a);
	ck_assert_uint_eq(dv_stripe_tier_buffer_bytes(t),
			  (uint64_t)stats_of(&b).buffers * MiB);
	t->ops->close_object(t, &b);
	ck_assert_uint_eq(dv_stripe_tier_buffer_bytes(t), 0);
	free(buf);
	free(want);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_readahead_memory_bounds)
{
	struct dv_tier *t = new_tier(0);
	char *want = bytes_n(25, RA_SIZE), *buf = malloc(MiB);
	struct dv_stripe_reader_stats st;
	struct dv_object obj;

	ck_assert_int_eq(install_sized(t, 25, RA_SIZE), 0);
	/* Per object: never more buffers than its bound, however it reads. */
	open_n(t, 25, RA_SIZE, &obj);
	for (uint64_t off = 0; off < RA_SIZE; off += MiB / 4) {
		size_t len = RA_SIZE - off < MiB / 4 ? (size_t)(RA_SIZE - off) : MiB / 4;

		check_range(t, &obj, want, off, len, buf);
		st = stats_of(&obj);
		ck_assert_uint_le(dv_stripe_tier_buffer_bytes(t), st.max_buffers * MiB);
	}
	ck_assert_uint_le(st.max_buffers, 2 * NDEV + 4);
	t->ops->close_object(t, &obj);
	/* Per daemon: a budget of one chunk leaves one buffer, no read-ahead. */
	dv_stripe_tier_set_buffer_budget(t, MiB);
	open_n(t, 25, RA_SIZE, &obj);
	for (uint64_t off = 0; off < RA_SIZE; off += MiB / 4) {
		size_t len = RA_SIZE - off < MiB / 4 ? (size_t)(RA_SIZE - off) : MiB / 4;

		check_range(t, &obj, want, off, len, buf);
		ck_assert_uint_le(dv_stripe_tier_buffer_bytes(t), MiB);
	}
	st = stats_of(&obj);
	ck_assert_uint_eq(st.ahead_loads, 0);
	ck_assert_uint_eq(st.buffers, 1);
	t->ops->close_object(t, &obj);
	ck_assert_uint_eq(dv_stripe_tier_buffer_bytes(t), 0);
	free(buf);
	free(want);
	dv_tier_free(t);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stripe");
	TCase *tc = tcase_create("stripe");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_install_and_read_back);
	tcase_add_test(tc, test_on_disk_placement);
	tcase_add_test(tc, test_restart_keeps_cache);
	tcase_add_test(tc, test_corrupt_chunk_after_restart);
	tcase_add_test(tc, test_corrupt_chunk_verify_always);
	tcase_add_test(tc, test_written_chunks_count_as_checked);
	tcase_add_test(tc, test_eviction_spares_open_objects);
	tcase_add_test(tc, test_foreign_signature);
	tcase_add_test(tc, test_ownership_and_membership);
	tcase_add_test(tc, test_lost_state_dir);
	tcase_add_test(tc, test_small_objects);
	tcase_add_test(tc, test_readahead_sequential);
	tcase_add_test(tc, test_readahead_random_reader);
	tcase_add_test(tc, test_readahead_boundaries);
	tcase_add_test(tc, test_readahead_threads_share_a_handle);
	tcase_add_test(tc, test_readahead_released_at_close);
	tcase_add_test(tc, test_readahead_memory_bounds);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
