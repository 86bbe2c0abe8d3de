/*
 * Streaming fills in the hierarchy (tiers/core/stream.c) from a remote
 * tier: a shard found in a bucket streams chunk by chunk from it, as a cold
 * shard streams from the origin, with the chunk list from the origin; it
 * is installed only above the bucket (R4), never uploaded back; without a
 * chunk list it is downloaded whole, as before. On real folder tiers and
 * the in-memory fake remote tier (fake_remote.c), whose download_range
 * calls are counted.
 */
#include <check.h>
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "tiers/core/chunks.h"
#include "tiers/core/fill.h"
#include "tiers/core/hierarchy.h"
#include "tiers/folder/folder.h"
#include "fake_remote.h"
#include "helpers.h"

#define HASH "0123456789abcdef0123456789abcdef"
#define CS (64u << 10)
#define NCHUNKS 5
#define SIZE (NCHUNKS * CS - 100)

static char *root;
static unsigned char payload[SIZE];
static uint8_t digest[32];
static uint8_t pin[32];
static char *list_text;
static size_t list_len;

/* The origin: a chunk list, and counters that must stay at 0 for bytes. */
struct origin {
	unsigned lists, fetches, ranges;
	int list_err;            /* what chunks() answers, or 0 */
};

static struct origin org;

static int origin_fetch(void *arg, const struct dv_shard_ref *ref,
			struct dv_sink *sink)
{
	org.fetches++;
	return dv_sink_write(sink, payload, SIZE);
}

static int origin_chunks(void *arg, const struct dv_shard_ref *ref,
			 struct dv_chunks *out)
{
	char why[160];

	org.lists++;
	if (org.list_err)
		return org.list_err;
	return dv_chunks_parse(list_text, list_len, ref->chunks_pin, ref->size,
			       out, why, sizeof(why));
}

static int origin_range(void *arg, const struct dv_shard_ref *ref,
			uint64_t off, uint64_t len, void *buf)
{
	__atomic_fetch_add(&org.ranges, 1, __ATOMIC_SEQ_CST);
	memcpy(buf, payload + off, len);
	return 0;
}

static const struct dv_fetcher origin = {
	.fetch = origin_fetch, .chunks = origin_chunks,
	.fetch_range = origin_range,
};

static unsigned warnings;
static char last_warning[1024];

static void capture(enum dv_log_level level, const char *line)
{
	if (level == DV_LOG_WARNING) {
		warnings++;
		snprintf(last_warning, sizeof(last_warning), "%s", line);
	}
}

static void setup(void)
{
	struct dv_chunks c = { .size = SIZE, .chunk_size = CS, .n = NCHUNKS };

	root = dv_test_tmpdir("stream");
	dv_test_pattern(payload, sizeof(payload), 11);
	SHA256(payload, sizeof(payload), digest);
	c.sha256 = malloc(NCHUNKS * 32);
	for (uint32_t i = 0; i < NCHUNKS; i++)
		SHA256(payload + (uint64_t)i * CS, dv_chunks_len(&c, i),
		       c.sha256[i]);
	ck_assert_int_eq(dv_chunks_format(&c, &list_text, &list_len, pin), 0);
	dv_chunks_release(&c);
	memset(&org, 0, sizeof(org));
	warnings = 0;
	last_warning[0] = '\0';
	dv_log_set_sink(capture);
	dv_log_set_level(DV_LOG_WARNING);
}

static void teardown(void)
{
	dv_log_set_sink(NULL);
	free(list_text);
	dv_test_rmtree(root);
	free(root);
}

static struct dv_tier *folder(const char *name)
{
	struct dv_tier *t;
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, name);
	ck_assert_int_eq(dv_folder_tier_create(path, name, 0, &t), 0);
	return t;
}

static struct dv_hierarchy *make(struct dv_tier **tiers, size_t n)
{
	struct dv_hierarchy *h;
	char err[256];

	ck_assert_int_eq(dv_hierarchy_from_tiers(tiers, n, DV_VERIFY_FILL, &h,
						 err, sizeof(err)), 0);
	return h;
}

static struct dv_shard_ref ref(bool chunked)
{
	struct dv_shard_ref r = { .hash = HASH, .size = SIZE, .sha256 = digest,
				  .label = "demo/shard-0.tar",
				  .chunks_pin = chunked ? pin : NULL };

	return r;
}

static bool tier_has(const char *tier)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s/%s.tar", root, tier, HASH);
	return access(p, F_OK) == 0;
}

/* Reads @len bytes at @off as fs/ does: waits for a streaming object's chunks. */
static int read_at(struct dv_object *o, uint64_t off, size_t len, void *buf)
{
	int ret = o->fill ? dv_fill_wait(o->fill, off, len) : 0;

	if (ret)
		return ret;
	return dv_pread_full(o->fd, buf, len, off);
}

static void assert_reads_whole(struct dv_object *o)
{
	unsigned char *got = malloc(SIZE);

	ck_assert_int_eq(read_at(o, 0, SIZE, got), 0);
	ck_assert_mem_eq(got, payload, SIZE);
	free(got);
}

/* Until no fill streams any more (installs are done by then). */
static void wait_streams_end(struct dv_hierarchy *h)
{
	struct dv_hierarchy_stats st;

	for (int i = 0; i < 1000; i++) {
		dv_hierarchy_stats(h, &st, NULL);
		if (st.streams == 0)
			return;
		usleep(10000);
	}
	ck_abort_msg("the fill did not end");
}

/* A bucket hit streams: the first chunk before the rest, from the bucket. */
START_TEST(test_bucket_hit_streams_from_the_bucket)
{
	struct dv_tier *t[2] = { folder("nvme"), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2);
	struct dv_shard_ref r = ref(true);
	struct fake_remote_counts *fc = fake_remote_counts(t[1]);
	struct dv_hierarchy_stats st;
	unsigned char first[CS];
	struct dv_object o;

	fake_remote_put(t[1], HASH, payload, SIZE);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	ck_assert_ptr_nonnull(o.fill);
	ck_assert_uint_eq(fc->ranges, 0); /* nothing before the first read */
	ck_assert_int_eq(read_at(&o, 0, CS, first), 0);
	ck_assert_mem_eq(first, payload, CS);
	ck_assert_uint_ge(fc->ranges, 1);
	assert_reads_whole(&o);
	dv_object_release(&o);
	wait_streams_end(h);
	dv_hierarchy_flush_uploads(h);

	ck_assert(tier_has("nvme"));
	ck_assert_uint_eq(fc->ranges, NCHUNKS);    /* one GET per chunk */
	ck_assert_uint_eq(fc->downloads, 0);       /* never whole */
	ck_assert_uint_eq(fc->upload_attempts, 0); /* never back up */
	ck_assert_uint_eq(org.lists, 1);
	ck_assert_uint_eq(org.ranges, 0);
	ck_assert_uint_eq(org.fetches, 0);
	ck_assert_uint_eq(t[1]->stats.hits, 1);
	ck_assert_uint_eq(t[0]->stats.misses, 1);
	dv_hierarchy_stats(h, &st, NULL);
	ck_assert_uint_eq(st.fetches, 0);
	ck_assert_uint_eq(st.promotions, 1);
	ck_assert_uint_eq(st.chunks_fetched, NCHUNKS);

	/* The next open is local, from the installed file. */
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	ck_assert_ptr_null(o.fill);
	ck_assert_ptr_eq(o.tier, t[0]);
	assert_reads_whole(&o);
	dv_object_release(&o);
	ck_assert_uint_eq(fc->ranges, NCHUNKS);
	dv_hierarchy_free(h);
}
END_TEST

/* R4: into every faster folder tier; remote tiers above get an upload. */
START_TEST(test_bucket_stream_installs_above_only)
{
	struct dv_tier *t[4] = { folder("ram"), folder("nvme"),
				 fake_remote_new("near", 0),
				 fake_remote_new("far", 0) };
	struct dv_hierarchy *h = make(t, 4);
	struct dv_shard_ref r = ref(true);
	struct dv_object o;
	size_t len;

	fake_remote_put(t[3], HASH, payload, SIZE);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	ck_assert_ptr_nonnull(o.fill);
	assert_reads_whole(&o);
	dv_object_release(&o);
	wait_streams_end(h);
	dv_hierarchy_flush_uploads(h);
	ck_assert(tier_has("ram"));
	ck_assert(tier_has("nvme"));
	ck_assert_ptr_nonnull(fake_remote_get(t[2], HASH, &len));
	ck_assert_uint_eq(len, SIZE);
	ck_assert_uint_eq(fake_remote_counts(t[3])->ranges, NCHUNKS);
	ck_assert_uint_eq(fake_remote_counts(t[3])->upload_attempts, 0);
	ck_assert_uint_eq(org.fetches + org.ranges, 0);
	dv_hierarchy_free(h);
}
END_TEST

/* B1 and the registry: a second open joins the fill; chunks come once. */
START_TEST(test_bucket_stream_joined)
{
	struct dv_tier *t[2] = { folder("nvme"), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2);
	struct dv_shard_ref r = ref(true);
	struct dv_object a, b;

	fake_remote_put(t[1], HASH, payload, SIZE);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &a), 0);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &b), 0);
	ck_assert_ptr_nonnull(a.fill);
	ck_assert_ptr_eq(b.fill, a.fill);
	assert_reads_whole(&b);
	assert_reads_whole(&a);
	dv_object_release(&a);
	dv_object_release(&b);
	wait_streams_end(h);
	ck_assert(tier_has("nvme"));
	ck_assert_uint_eq(fake_remote_counts(t[1])->ranges, NCHUNKS);
	ck_assert_uint_eq(fake_remote_counts(t[1])->lookups, 1);
	ck_assert_uint_eq(org.lists, 1);
	dv_hierarchy_free(h);
}
END_TEST

/* No chunk list to be had: the bucket's whole download, as before. */
START_TEST(test_no_chunk_list_downloads_whole)
{
	struct dv_tier *t[2] = { folder("nvme"), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2);
	struct dv_shard_ref r = ref(true);
	struct fake_remote_counts *fc = fake_remote_counts(t[1]);
	struct dv_object o;

	fake_remote_put(t[1], HASH, payload, SIZE);
	org.list_err = -EIO;
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	ck_assert_ptr_null(o.fill);
	ck_assert_ptr_eq(o.tier, t[0]);
	assert_reads_whole(&o);
	dv_object_release(&o);
	ck_assert_uint_eq(org.lists, 1);
	ck_assert_uint_eq(fc->downloads, 1);
	ck_assert_uint_eq(fc->ranges, 0);
	ck_assert_uint_eq(org.fetches + org.ranges, 0);
	ck_assert_ptr_nonnull(strstr(last_warning, "no usable chunk list"));
	ck_assert_ptr_nonnull(strstr(last_warning, "whole from tier 'bucket'"));
	ck_assert(tier_has("nvme"));
	dv_hierarchy_free(h);
}
END_TEST

/* A manifest without a pin: the whole download, no chunk list asked for. */
START_TEST(test_unpinned_shard_downloads_whole)
{
	struct dv_tier *t[2] = { folder("nvme"), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2);
	struct dv_shard_ref r = ref(false);
	struct dv_object o;

	fake_remote_put(t[1], HASH, payload, SIZE);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	ck_assert_ptr_null(o.fill);
	assert_reads_whole(&o);
	dv_object_release(&o);
	ck_assert_uint_eq(org.lists, 0);
	ck_assert_uint_eq(fake_remote_counts(t[1])->downloads, 1);
	ck_assert_uint_eq(fake_remote_counts(t[1])->ranges, 0);
	dv_hierarchy_free(h);
}
END_TEST

/* B2: chunks that do not match fail their reads; nothing is installed. */
START_TEST(test_bucket_bad_bytes_install_nothing)
{
	struct dv_tier *t[2] = { folder("nvme"), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2);
	struct dv_shard_ref r = ref(true);
	unsigned char buf[CS];
	struct dv_object o;

	fake_remote_put(t[1], HASH, payload, SIZE);
	fake_remote_corrupt(t[1], true);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	ck_assert_ptr_nonnull(o.fill);
	ck_assert_int_eq(read_at(&o, 0, CS, buf), -EIO);
	dv_object_release(&o);
	wait_streams_end(h);
	ck_assert(!tier_has("nvme"));
	ck_assert_uint_eq(fake_remote_counts(t[1])->ranges, 2 * NCHUNKS);
	ck_assert_uint_eq(t[1]->stats.errors, 1);
	ck_assert_uint_eq(org.fetches + org.ranges, 0);

	/* The bucket fixed: the next open streams again and installs. */
	fake_remote_corrupt(t[1], false);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	assert_reads_whole(&o);
	dv_object_release(&o);
	wait_streams_end(h);
	ck_assert(tier_has("nvme"));
	dv_hierarchy_free(h);
}
END_TEST

/* fill: streaming: false keeps the whole download from buckets too. */
START_TEST(test_streaming_off_downloads_whole)
{
	struct dv_tier *t[2] = { folder("nvme"), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2);
	struct dv_fill_config cfg = { .streaming = false, .parallel = 4,
				      .connections = 8, .timeout = 10 };
	struct dv_shard_ref r = ref(true);
	struct dv_object o;

	dv_hierarchy_set_fill(h, &cfg);
	fake_remote_put(t[1], HASH, payload, SIZE);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &origin, &o), 0);
	ck_assert_ptr_null(o.fill);
	assert_reads_whole(&o);
	dv_object_release(&o);
	ck_assert_uint_eq(fake_remote_counts(t[1])->downloads, 1);
	ck_assert_uint_eq(fake_remote_counts(t[1])->ranges, 0);
	dv_hierarchy_free(h);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("stream");
	TCase *tc = tcase_create("bucket");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_bucket_hit_streams_from_the_bucket);
	tcase_add_test(tc, test_bucket_stream_installs_above_only);
	tcase_add_test(tc, test_bucket_stream_joined);
	tcase_add_test(tc, test_no_chunk_list_downloads_whole);
	tcase_add_test(tc, test_unpinned_shard_downloads_whole);
	tcase_add_test(tc, test_bucket_bad_bytes_install_nothing);
	tcase_add_test(tc, test_streaming_off_downloads_whole);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
