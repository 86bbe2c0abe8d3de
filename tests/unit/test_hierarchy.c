/*
 * The hierarchy's rules (R1-R9, B1-B3, B8 of docs/design.md), on real folder
 * tiers in temporary directories and an in-memory fake remote tier.
 */
#include <check.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/folder/folder.h"
#include "tiers/core/hierarchy.h"
#include "fake_remote.h"
#include "helpers.h"

#define HASH_A "0123456789abcdef0123456789abcdef"
#define HASH_B "fedcba9876543210fedcba9876543210"
#define SHARD 65536

static char *root;
static unsigned char payload[SHARD];
static uint8_t digest[32];

/* Fetcher state: how often it ran, and what it sends. */
struct fetch_state {
	unsigned calls;
	const unsigned char *data;
	size_t len;
	int fail;
};

static int test_fetch(void *arg, const struct dv_shard_ref *ref,
		      struct dv_sink *sink)
{
	struct fetch_state *fs = arg;

	fs->calls++;
	if (fs->fail)
		return fs->fail;
	return dv_sink_write(sink, fs->data, fs->len);
}

static struct fetch_state fstate;
static struct dv_fetcher fetcher = { .fetch = test_fetch, .arg = &fstate };

/* Log capture: counts warnings and keeps the last one. */
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
	root = dv_test_tmpdir("hier");
	dv_test_pattern(payload, sizeof(payload), 7);
	SHA256(payload, sizeof(payload), digest);
	memset(&fstate, 0, sizeof(fstate));
	fstate.data = payload;
	fstate.len = sizeof(payload);
	warnings = 0;
	last_warning[0] = '\0';
	dv_log_set_sink(capture);
	dv_log_set_level(DV_LOG_WARNING);
}

static void teardown(void)
{
	dv_log_set_sink(NULL);
	dv_test_rmtree(root);
	free(root);
}

static struct dv_tier *folder(const char *name, uint64_t max)
{
	struct dv_tier *t;
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, name);
	ck_assert_int_eq(dv_folder_tier_create(path, name, max, &t), 0);
	return t;
}

static struct dv_hierarchy *make(struct dv_tier **tiers, size_t n,
				 enum dv_verify_mode verify)
{
	struct dv_hierarchy *h;
	char err[256];

	ck_assert_int_eq(dv_hierarchy_from_tiers(tiers, n, verify, &h, err,
						 sizeof(err)), 0);
	return h;
}

static struct dv_shard_ref ref_a(void)
{
	struct dv_shard_ref r = { .hash = HASH_A, .size = SHARD, .sha256 = digest,
				  .label = "demo/shard-0.tar" };

	return r;
}

static void tier_file(const char *tier, const char *hash, char *buf)
{
	snprintf(buf, PATH_MAX, "%s/%s/%s.tar", root, tier, hash);
}

static bool tier_has(const char *tier, const char *hash)
{
	char p[PATH_MAX];

	tier_file(tier, hash, p);
	return access(p, F_OK) == 0;
}

static void put_in_tier(const char *tier, const char *hash)
{
	char p[PATH_MAX];

	tier_file(tier, hash, p);
	dv_test_write_file(p, payload, sizeof(payload));
}

static void assert_object_bytes(struct dv_object *o)
{
	unsigned char *buf = malloc(SHARD + 1);

	ck_assert_int_eq(dv_object_pread(o, buf, SHARD + 1, 0), SHARD);
	ck_assert_mem_eq(buf, payload, SHARD);
	free(buf);
}

static int staging_entries(const char *tier)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s/.staging", root, tier);
	return dv_test_count_entries(p);
}

static int lock_entries(const char *tier)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s/.locks", root, tier);
	return dv_test_count_entries(p);
}

/* R1: the first tier holding the shard serves it. */
START_TEST(test_r1_fastest_hit_serves)
{
	struct dv_tier *t[2] = { folder("fast", 0), folder("slow", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	put_in_tier("fast", HASH_A);
	put_in_tier("slow", HASH_A);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_ptr_eq(o.tier, t[0]);
	ck_assert_int_eq(o.tier_index, 0);
	assert_object_bytes(&o);
	ck_assert_uint_eq(fstate.calls, 0);
	ck_assert_uint_eq(t[0]->stats.hits, 1);
	ck_assert_uint_eq(t[1]->stats.hits, 0);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* R2: a full miss fetches once and installs into every tier. */
START_TEST(test_r2_miss_populates_every_tier)
{
	struct dv_tier *t[3] = { folder("a", 0), folder("b", 0),
				 fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 3, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;
	size_t len;

	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	dv_hierarchy_flush_uploads(h); /* B5: uploads run in the background */
	ck_assert_uint_eq(fstate.calls, 1);
	ck_assert_int_eq(o.tier_index, 0); /* the topmost installed */
	ck_assert(strstr(o.path, "/a/" HASH_A ".tar") != NULL);
	assert_object_bytes(&o);
	ck_assert(tier_has("a", HASH_A));
	ck_assert(tier_has("b", HASH_A));
	ck_assert_ptr_nonnull(fake_remote_get(t[2], HASH_A, &len));
	ck_assert_uint_eq(len, SHARD);
	ck_assert_int_eq(staging_entries("a"), 0);
	ck_assert_int_eq(staging_entries("b"), 0);
	ck_assert_int_eq(lock_entries("a"), 0);
	ck_assert_uint_eq(t[0]->stats.misses, 1);
	ck_assert_uint_eq(t[1]->stats.misses, 1);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* R2: a tier smaller than the shard is skipped with a warning. */
START_TEST(test_r2_capacity_skip_warns_and_goes_on)
{
	struct dv_tier *t[2] = { folder("small", SHARD / 2), folder("big", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_int_eq(o.tier_index, 1);
	ck_assert(!tier_has("small", HASH_A));
	ck_assert(tier_has("big", HASH_A));
	ck_assert_uint_ge(warnings, 1);
	ck_assert(strstr(last_warning, "small") != NULL);
	ck_assert(strstr(last_warning, "max_bytes") != NULL);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* R2: no tier accepts → an error, and nothing is left behind. */
START_TEST(test_r2_no_tier_accepts_is_error)
{
	struct dv_tier *t[2] = { folder("s1", 100), folder("s2", 200) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o),
			 -ENOSPC);
	ck_assert_int_eq(o.fd, -1);
	ck_assert(!tier_has("s1", HASH_A));
	ck_assert(!tier_has("s2", HASH_A));
	ck_assert_int_eq(staging_entries("s1"), 0);
	dv_hierarchy_free(h);
}
END_TEST

/* R3: a slow hit is promoted into the faster tier, without a fetch (R5). */
START_TEST(test_r3_promote_on_hit)
{
	struct dv_tier *t[2] = { folder("fast", 0), folder("slow", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	put_in_tier("slow", HASH_A);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_int_eq(o.tier_index, 0);
	ck_assert(tier_has("fast", HASH_A));
	ck_assert(tier_has("slow", HASH_A));
	assert_object_bytes(&o);
	ck_assert_uint_eq(fstate.calls, 0);
	ck_assert_uint_eq(t[1]->stats.hits, 1);
	ck_assert_uint_eq(t[0]->stats.misses, 1);
	dv_object_release(&o);
	/* Promotion happens once: the next read hits the fast tier. */
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_uint_eq(t[0]->stats.hits, 1);
	ck_assert_uint_eq(t[1]->stats.hits, 1);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* R3: every faster folder tier rejects → served from the slow folder hit. */
START_TEST(test_r3_promote_subject_to_capacity)
{
	struct dv_tier *t[2] = { folder("tiny", 1000), folder("slow", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	put_in_tier("slow", HASH_A);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_int_eq(o.tier_index, 1);
	ck_assert(!tier_has("tiny", HASH_A));
	assert_object_bytes(&o);
	ck_assert_uint_eq(fstate.calls, 0);
	ck_assert_uint_ge(warnings, 1);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* R3/R4: a remote hit with no folder room is an error, not a fetch. */
START_TEST(test_r3_remote_hit_without_folder_room_is_error)
{
	struct dv_tier *t[2] = { folder("tiny", 1000),
				 fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	fake_remote_put(t[1], HASH_A, payload, SHARD);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o),
			 -ENOSPC);
	ck_assert_uint_eq(fstate.calls, 0);
	ck_assert_int_eq(staging_entries("tiny"), 0);
	dv_hierarchy_free(h);
}
END_TEST

/* R4: a remote hit lands through the top folder tier's staging. */
START_TEST(test_r4_remote_hit_materialized_locally)
{
	struct dv_tier *t[3] = { folder("nvme", 0), fake_remote_new("bucket", 0),
				 folder("scratch", 0) };
	struct dv_hierarchy *h = make(t, 3, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	fake_remote_put(t[1], HASH_A, payload, SHARD);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_uint_eq(fstate.calls, 0);
	ck_assert_uint_eq(fake_remote_counts(t[1])->downloads, 1);
	ck_assert_int_eq(o.tier_index, 0);
	ck_assert(o.fd >= 0);
	ck_assert(tier_has("nvme", HASH_A));
	ck_assert(!tier_has("scratch", HASH_A)); /* only faster tiers */
	ck_assert_int_eq(staging_entries("nvme"), 0);
	assert_object_bytes(&o);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* R4 + B2: corrupt bytes from a bucket are never installed. */
START_TEST(test_r4_b2_corrupt_remote_is_discarded)
{
	struct dv_tier *t[2] = { folder("nvme", 0), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;
	struct dv_hierarchy_stats st;

	fake_remote_put(t[1], HASH_A, payload, SHARD);
	fake_remote_corrupt(t[1], true);
	/* The bucket's copy is refused; the origin then serves it. */
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_uint_eq(fstate.calls, 1);
	assert_object_bytes(&o);
	dv_hierarchy_stats(h, &st, NULL);
	ck_assert_uint_eq(st.verify_failures, 1);
	ck_assert_int_eq(staging_entries("nvme"), 0);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* R5: hits never call the fetcher, on any path. */
START_TEST(test_r5_hits_never_fetch)
{
	struct dv_tier *t[3] = { folder("a", 0), folder("b", 0),
				 fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 3, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	fstate.fail = -EIO; /* a fetch would fail the read */
	put_in_tier("b", HASH_A);
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
		dv_object_release(&o);
	}
	ck_assert_uint_eq(fstate.calls, 0);
	dv_hierarchy_free(h);
}
END_TEST

/* R6: at least one folder tier. */
START_TEST(test_r6_needs_folder_tier)
{
	struct dv_tier *t[1] = { fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = NULL;
	char err[256];

	ck_assert_int_eq(dv_hierarchy_from_tiers(t, 1, DV_VERIFY_FILL, &h, err,
						 sizeof(err)), -EINVAL);
	ck_assert(strstr(err, "folder") != NULL);
}
END_TEST

/* R9: a remote tier's max_bytes only skips larger shards. */
START_TEST(test_r9_cloud_max_bytes_only_skips)
{
	struct dv_tier *t[2] = { folder("a", 0), fake_remote_new("bucket", 1000) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;
	size_t len;

	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	dv_hierarchy_flush_uploads(h);
	ck_assert_ptr_null(fake_remote_get(t[1], HASH_A, &len));
	ck_assert_uint_eq(fake_remote_counts(t[1])->uploads, 0);
	ck_assert(strstr(last_warning, "bucket") != NULL);
	ck_assert_uint_eq(t[1]->stats.evictions, 0);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* B2: wrong bytes, too many or too few: EIO and nothing installed. */
START_TEST(test_b2_origin_bytes_verified)
{
	struct dv_tier *t[1] = { folder("a", 0) };
	struct dv_hierarchy *h = make(t, 1, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	unsigned char *bad = malloc(SHARD + 10);
	struct dv_object o;

	memcpy(bad, payload, SHARD);
	bad[100] ^= 1;
	fstate.data = bad;
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), -EIO);
	fstate.len = SHARD - 1;
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), -EIO);
	memcpy(bad, payload, SHARD);
	fstate.len = SHARD + 10;
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), -EIO);
	fstate.fail = -ENOENT;
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), -ENOENT);
	ck_assert(!tier_has("a", HASH_A));
	ck_assert_int_eq(staging_entries("a"), 0);
	ck_assert_int_eq(lock_entries("a"), 0);
	/* Once the origin is right, the next call succeeds. */
	fstate.fail = 0;
	fstate.data = payload;
	fstate.len = SHARD;
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	assert_object_bytes(&o);
	dv_object_release(&o);
	free(bad);
	dv_hierarchy_free(h);
}
END_TEST

/* B3: with verify: always a corrupt tier file is a miss and is replaced. */
START_TEST(test_b3_verify_always_replaces_corrupt)
{
	struct dv_tier *t[1] = { folder("a", 0) };
	struct dv_hierarchy *h = make(t, 1, DV_VERIFY_ALWAYS);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;
	char p[PATH_MAX];
	unsigned char *bad = malloc(SHARD);

	memcpy(bad, payload, SHARD);
	bad[5] ^= 0x40;
	tier_file("a", HASH_A, p);
	dv_test_write_file(p, bad, SHARD);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_uint_eq(fstate.calls, 1);
	assert_object_bytes(&o);
	dv_object_release(&o);
	/* A truncated copy is a miss too, even without verify: always. */
	dv_test_write_file(p, payload, SHARD / 2);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_uint_eq(fstate.calls, 2);
	assert_object_bytes(&o);
	dv_object_release(&o);
	free(bad);
	dv_hierarchy_free(h);
}
END_TEST

/* B8: a new hierarchy over the same directories serves what was there. */
START_TEST(test_b8_restart_reuses_tiers)
{
	struct dv_tier *t[2] = { folder("a", 0), folder("b", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	dv_object_release(&o);
	dv_hierarchy_free(h);
	t[0] = folder("a", 0);
	t[1] = folder("b", 0);
	h = make(t, 2, DV_VERIFY_FILL);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_uint_eq(fstate.calls, 1);
	assert_object_bytes(&o);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/* A counting fetcher for forked children: appends to a file under flock. */
static char count_path[PATH_MAX];

static int counting_fetch(void *arg, const struct dv_shard_ref *ref,
			  struct dv_sink *sink)
{
	int fd = open(count_path, O_WRONLY | O_APPEND | O_CREAT, 0644);

	flock(fd, LOCK_EX);
	ck_assert_int_eq(write(fd, "x", 1), 1);
	close(fd);
	usleep(200 * 1000); /* give the racers time to pile up */
	for (size_t off = 0; off < SHARD; off += 4096) {
		int ret = dv_sink_write(sink, payload + off, 4096);

		if (ret)
			return ret;
	}
	return 0;
}

/* B1: sixteen processes race on one cold hash: one fetch. */
START_TEST(test_b1_sixteen_processes_one_fetch)
{
	struct dv_fetcher f = { .fetch = counting_fetch, .arg = NULL };
	pid_t pids[16];
	size_t n;
	char *count;

	snprintf(count_path, sizeof(count_path), "%s/count", root);
	for (int i = 0; i < 16; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			struct dv_tier *t[2] = { folder("a", 0), folder("b", 0) };
			struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
			struct dv_shard_ref r = ref_a();
			struct dv_object o;
			unsigned char *buf = malloc(SHARD);
			int ok;

			ok = dv_hierarchy_get_or_fetch(h, &r, &f, &o) == 0 &&
			     dv_object_pread(&o, buf, SHARD, 0) == SHARD &&
			     memcmp(buf, payload, SHARD) == 0;
			_exit(ok ? 0 : 1);
		}
	}
	for (int i = 0; i < 16; i++) {
		int status;

		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert(WIFEXITED(status));
		ck_assert_int_eq(WEXITSTATUS(status), 0);
	}
	count = dv_test_read_file(count_path, &n);
	ck_assert_ptr_nonnull(count);
	ck_assert_uint_eq(n, 1);
	free(count);
	ck_assert_int_eq(staging_entries("a"), 0);
	ck_assert_int_eq(staging_entries("b"), 0);
	ck_assert_int_eq(lock_entries("a"), 0);
	ck_assert_int_eq(lock_entries("b"), 0);
}
END_TEST

/* B1 within one process: threads wait for the one fetch. */
struct thread_arg {
	struct dv_hierarchy *h;
	int ret;
};

static void *thread_get(void *p)
{
	struct thread_arg *a = p;
	struct dv_fetcher f = { .fetch = counting_fetch, .arg = NULL };
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	a->ret = dv_hierarchy_get_or_fetch(a->h, &r, &f, &o);
	if (a->ret == 0)
		dv_object_release(&o);
	return NULL;
}

START_TEST(test_b1_threads_one_fetch)
{
	struct dv_tier *t[1] = { folder("a", 0) };
	struct dv_hierarchy *h = make(t, 1, DV_VERIFY_FILL);
	struct thread_arg args[8];
	pthread_t th[8];
	size_t n;
	char *count;

	snprintf(count_path, sizeof(count_path), "%s/count", root);
	for (int i = 0; i < 8; i++) {
		args[i].h = h;
		ck_assert_int_eq(pthread_create(&th[i], NULL, thread_get, &args[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].ret, 0);
	}
	count = dv_test_read_file(count_path, &n);
	ck_assert_uint_eq(n, 1);
	free(count);
	dv_hierarchy_free(h);
}
END_TEST

/* B4: a fetcher killed mid-fill leaves nothing a later call trips on. */
static int stalling_fetch(void *arg, const struct dv_shard_ref *ref,
			  struct dv_sink *sink)
{
	int *pipefd = arg;

	ck_assert_int_eq(dv_sink_write(sink, payload, SHARD / 2), 0);
	ck_assert_int_eq(write(pipefd[1], "s", 1), 1);
	pause(); /* killed here */
	return -EIO;
}

START_TEST(test_b4_sigkill_in_fetcher)
{
	int pipefd[2];
	char c;
	pid_t pid;
	int status;

	ck_assert_int_eq(pipe(pipefd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct dv_tier *t[2] = { folder("a", 0), folder("b", 0) };
		struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
		struct dv_fetcher f = { .fetch = stalling_fetch, .arg = pipefd };
		struct dv_shard_ref r = ref_a();
		struct dv_object o;

		dv_hierarchy_get_or_fetch(h, &r, &f, &o);
		_exit(3);
	}
	ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
	/* Mid-fill: staged bytes exist, the shard does not. */
	ck_assert_int_eq(staging_entries("a"), 1);
	ck_assert(!tier_has("a", HASH_A));
	ck_assert(!tier_has("b", HASH_A));
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	ck_assert(WIFSIGNALED(status));
	ck_assert(!tier_has("a", HASH_A));
	ck_assert(!tier_has("b", HASH_A));
	ck_assert_int_eq(staging_entries("a"), 1);

	/* A later run cleans up and succeeds. */
	{
		struct dv_tier *t[2] = { folder("a", 0), folder("b", 0) };
		struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
		struct dv_shard_ref r = ref_a();
		struct dv_object o;

		ck_assert_int_eq(staging_entries("a"), 0);
		ck_assert_int_eq(lock_entries("a"), 0);
		ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
		assert_object_bytes(&o);
		dv_object_release(&o);
		dv_hierarchy_free(h);
	}
	close(pipefd[0]);
	close(pipefd[1]);
}
END_TEST

/* B4: a staging file another live process is writing is left alone. */
START_TEST(test_b4_live_staging_kept)
{
	struct dv_tier *t[1] = { folder("a", 0) };
	struct dv_hierarchy *h = make(t, 1, DV_VERIFY_FILL);
	struct dv_staged st;
	struct dv_tier *t2[1];
	struct dv_hierarchy *h2;

	ck_assert_int_eq(t[0]->ops->stage_open(t[0], HASH_A, &st), 0);
	t2[0] = folder("a", 0);
	h2 = make(t2, 1, DV_VERIFY_FILL); /* opening again: a cleaning pass */
	ck_assert_int_eq(access(st.path, F_OK), 0);
	t[0]->ops->stage_discard(t[0], &st);
	dv_hierarchy_free(h2);
	dv_hierarchy_free(h);
}
END_TEST

/* B5: a slow bucket never delays a read; the upload lands later. */
START_TEST(test_b5_upload_in_background)
{
	struct dv_tier *t[2] = { folder("a", 0), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;
	struct timespec t0, t1;
	size_t len;

	fake_remote_faults(t[1], 0, 0, 1500);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 1); /* not the 1.5 s upload */
	ck_assert_ptr_null(fake_remote_get(t[1], HASH_A, &len));
	assert_object_bytes(&o);
	dv_object_release(&o);
	dv_hierarchy_flush_uploads(h);
	ck_assert_ptr_nonnull(fake_remote_get(t[1], HASH_A, &len));
	dv_hierarchy_free(h);
}
END_TEST

/* B5: a bucket that refuses uploads is retried, logged, never fatal. */
START_TEST(test_b5_failed_upload_retried_not_fatal)
{
	struct dv_tier *t[2] = { folder("a", 0), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_upload_stats us;
	struct dv_object o;

	fake_remote_faults(t[1], 0, -EIO, 0);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	assert_object_bytes(&o);
	dv_object_release(&o);
	dv_hierarchy_flush_uploads(h);
	ck_assert_uint_gt(fake_remote_counts(t[1])->upload_attempts, 1);
	dv_hierarchy_upload_stats(h, &us);
	ck_assert_uint_eq(us.failed, 1);
	ck_assert_uint_gt(us.retries, 0);
	ck_assert(strstr(last_warning, "upload") != NULL);
	dv_hierarchy_free(h);
}
END_TEST

/* A bucket that refuses our credentials is EACCES, not a silent miss. */
START_TEST(test_remote_auth_error_is_eacces)
{
	struct dv_tier *t[2] = { folder("a", 0), fake_remote_new("bucket", 0) };
	struct dv_hierarchy *h = make(t, 2, DV_VERIFY_FILL);
	struct dv_shard_ref r = ref_a();
	struct dv_object o;

	fake_remote_faults(t[1], -EACCES, 0, 0);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), -EACCES);
	ck_assert_uint_eq(fstate.calls, 0);
	/* Unreachable is another matter: the origin serves. */
	fake_remote_faults(t[1], -ETIMEDOUT, 0, 0);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, &fetcher, &o), 0);
	ck_assert_uint_eq(fstate.calls, 1);
	dv_object_release(&o);
	dv_hierarchy_free(h);
}
END_TEST

/*
 * A small filesystem for one tier directory: fstatvfs() of it and every
 * fallocate() see @fake_cap bytes less what its files (and staging files)
 * hold, as on a tmpfs of that size.
 */
static char fake_dir[PATH_MAX];
static uint64_t fake_cap;

static uint64_t dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		struct stat st;

		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode))
			n += (uint64_t)st.st_size;
	}
	closedir(d);
	return n;
}

static uint64_t fake_free(void)
{
	char staging[PATH_MAX + 16];
	uint64_t used;

	snprintf(staging, sizeof(staging), "%s/.staging", fake_dir);
	used = dir_bytes(fake_dir) + dir_bytes(staging);
	return used < fake_cap ? fake_cap - used : 0;
}

int fstatvfs(int fd, struct statvfs *sv)
{
	int (*real)(int, struct statvfs *) =
		(int (*)(int, struct statvfs *))dlsym(RTLD_NEXT, "fstatvfs");
	struct stat a, b;
	int ret = real(fd, sv);

	if (ret == 0 && fake_cap && fstat(fd, &a) == 0 &&
	    stat(fake_dir, &b) == 0 && a.st_ino == b.st_ino &&
	    a.st_dev == b.st_dev) {
		sv->f_frsize = 1;
		sv->f_bavail = fake_free();
	}
	return ret;
}

/* Is @fd a file under fake_dir? */
static bool in_fake_dir(int fd)
{
	char link[64], path[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = '\0';
	return strncmp(path, fake_dir, strlen(fake_dir)) == 0 &&
	       path[strlen(fake_dir)] == '/';
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	int (*real)(int, int, off_t, off_t) =
		(int (*)(int, int, off_t, off_t))dlsym(RTLD_NEXT, "fallocate");

	if (fake_cap && in_fake_dir(fd) && (uint64_t)(off + len) > fake_free()) {
		errno = ENOSPC;
		return -1;
	}
	return real(fd, mode, off, len);
}

#define BIG_SHARD (25 * SHARD)

/*
 * A tier of 16 shards on a filesystem of 16, 12 of them cached; a miss of a
 * shard of 25. 0 with *@o from tier @expect_tier, or the error.
 */
static int fill_oversized(struct dv_tier **t, size_t n, struct dv_object *o)
{
	static unsigned char big[BIG_SHARD];
	static uint8_t big_digest[32];
	struct dv_shard_ref r = { .hash = HASH_B, .size = BIG_SHARD,
				  .sha256 = big_digest, .label = "big" };
	struct dv_hierarchy *h = make(t, n, DV_VERIFY_FILL);
	char hash[65], dir[PATH_MAX];
	int ret;

	dv_test_pattern(big, sizeof(big), 9);
	SHA256(big, sizeof(big), big_digest);
	fstate.data = big;
	fstate.len = sizeof(big);
	for (int i = 0; i < 12; i++) {
		snprintf(hash, sizeof(hash), "%032x", i + 1);
		put_in_tier("small", hash);
	}
	snprintf(dir, sizeof(dir), "%s/small", root);
	ck_assert_ptr_nonnull(realpath(dir, fake_dir));
	fake_cap = 16 * SHARD;
	ret = dv_hierarchy_get_or_fetch(h, &r, &fetcher, o);
	fake_cap = 0;
	for (int i = 0; i < 12; i++) {
		snprintf(hash, sizeof(hash), "%032x", i + 1);
		ck_assert_msg(tier_has("small", hash), "shard %d was evicted", i);
	}
	ck_assert_uint_eq(t[0]->stats.evictions, 0);
	ck_assert_int_eq(staging_entries("small"), 0);
	ck_assert(!tier_has("small", HASH_B));
	if (ret == 0)
		dv_object_release(o);
	dv_hierarchy_free(h);
	return ret;
}

/* R2, R8: a shard no eviction can make room for evicts nothing, fails. */
START_TEST(test_r8_oversized_shard_keeps_the_cache)
{
	struct dv_tier *t[1] = { folder("small", 16 * SHARD) };
	struct dv_object o;
	int ret = fill_oversized(t, 1, &o);

	ck_assert_msg(ret == -ENOSPC || ret == -EFBIG, "got %d", ret);
	ck_assert_int_eq(o.fd, -1);
}
END_TEST

/* ...and with a roomy tier below, it is served from there (R2). */
START_TEST(test_r8_oversized_shard_served_below)
{
	struct dv_tier *t[2] = { folder("small", 16 * SHARD), folder("big", 0) };
	struct dv_object o;

	ck_assert_int_eq(fill_oversized(t, 2, &o), 0);
	ck_assert(tier_has("big", HASH_B));
	ck_assert_int_eq(staging_entries("big"), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("hierarchy");
	TCase *tc = tcase_create("rules");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_r1_fastest_hit_serves);
	tcase_add_test(tc, test_r2_miss_populates_every_tier);
	tcase_add_test(tc, test_r2_capacity_skip_warns_and_goes_on);
	tcase_add_test(tc, test_r2_no_tier_accepts_is_error);
	tcase_add_test(tc, test_r3_promote_on_hit);
	tcase_add_test(tc, test_r3_promote_subject_to_capacity);
	tcase_add_test(tc, test_r3_remote_hit_without_folder_room_is_error);
	tcase_add_test(tc, test_r4_remote_hit_materialized_locally);
	tcase_add_test(tc, test_r4_b2_corrupt_remote_is_discarded);
	tcase_add_test(tc, test_r5_hits_never_fetch);
	tcase_add_test(tc, test_r6_needs_folder_tier);
	tcase_add_test(tc, test_r9_cloud_max_bytes_only_skips);
	tcase_add_test(tc, test_b2_origin_bytes_verified);
	tcase_add_test(tc, test_b3_verify_always_replaces_corrupt);
	tcase_add_test(tc, test_b8_restart_reuses_tiers);
	tcase_add_test(tc, test_b1_sixteen_processes_one_fetch);
	tcase_add_test(tc, test_b1_threads_one_fetch);
	tcase_add_test(tc, test_b4_sigkill_in_fetcher);
	tcase_add_test(tc, test_b4_live_staging_kept);
	tcase_add_test(tc, test_b5_upload_in_background);
	tcase_add_test(tc, test_b5_failed_upload_retried_not_fatal);
	tcase_add_test(tc, test_remote_auth_error_is_eacces);
	tcase_add_test(tc, test_r8_oversized_shard_keeps_the_cache);
	tcase_add_test(tc, test_r8_oversized_shard_served_below);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
