/*
 * The tier interface (tier.h) beyond reads and installs: scan, describe,
 * check and sweep as the folder and stripe backends implement them, the
 * core's defaults for a backend that has none of them (a remote tier),
 * the downcast that refuses a foreign tier, and the hierarchy's answer to
 * "which tier holds this".
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "stripe/stripe.h"
#include "tiers/core/hierarchy.h"
#include "tiers/folder/folder.h"
#include "fake_remote.h"
#include "helpers.h"

#define MiB (1024 * 1024)
#define NOBJ 3

static char *root;

static void setup(void)
{
	root = dv_test_tmpdir("tier");
	dv_log_set_level(DV_LOG_ERROR);
}

static void teardown(void)
{
	dv_test_rmtree(root);
	free(root);
}

static void hash_n(int i, char *hash)
{
	snprintf(hash, 65, "%032x", 0xab00 + i);
}

static uint64_t size_n(int i)
{
	return 1000 + 777 * (uint64_t)i;
}

/* The bytes of object @i and their SHA-256. */
static char *bytes_n(int i, uint8_t sha[32])
{
	char *b = malloc(size_n(i));

	ck_assert_ptr_nonnull(b);
	dv_test_pattern(b, size_n(i), (uint32_t)i + 11);
	if (sha)
		SHA256((const unsigned char *)b, size_n(i), sha);
	return b;
}

/* Installs object @i into @t from a file, as the hierarchy does. */
static void install_n(struct dv_tier *t, int i)
{
	char path[PATH_MAX], hash[65];
	char *b = bytes_n(i, NULL);
	int fd;

	snprintf(path, sizeof(path), "%s/src%d", root, i);
	dv_test_write_file(path, b, size_n(i));
	free(b);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	hash_n(i, hash);
	ck_assert_int_eq(dv_tier_install(t, hash, fd, path, size_n(i), 0), 0);
	close(fd);
	unlink(path);
}

static struct dv_tier *folder(const char *name, uint64_t max, bool opened)
{
	char path[PATH_MAX];
	struct dv_tier *t;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	ck_assert_int_eq(dv_folder_tier_create(path, name, max, &t), 0);
	if (opened)
		ck_assert_int_eq(dv_tier_open(t), 0);
	return t;
}

/* What a scan saw. */
struct seen {
	struct dv_tier_entry e[16];
	int n;
	int stop_after;          /* > 0: stop with 7 after that many */
};

static int see(void *arg, const struct dv_tier_entry *e)
{
	struct seen *s = arg;

	ck_assert_int_lt(s->n, 16);
	s->e[s->n++] = *e;
	return s->stop_after && s->n == s->stop_after ? 7 : 0;
}

/* Every object 0..n-1 seen exactly once with its size, nothing else. */
static void assert_seen_all(const struct seen *s, int n, bool mtimes)
{
	ck_assert_int_eq(s->n, n);
	for (int i = 0; i < n; i++) {
		char hash[65];
		int found = 0;

		hash_n(i, hash);
		for (int k = 0; k < s->n; k++) {
			if (strcmp(s->e[k].hash, hash) != 0)
				continue;
			found++;
			ck_assert_uint_eq(s->e[k].size, size_n(i));
			if (mtimes)
				ck_assert_int_gt(s->e[k].mtime, 0);
		}
		ck_assert_int_eq(found, 1);
	}
}

/* The scan lists the installed objects and nothing else of the directory. */
START_TEST(test_folder_scan_finds_exactly_the_objects)
{
	struct dv_tier *t = folder("f", 0, true);
	struct seen s = { .n = 0 };
	char p[PATH_MAX], hash[65];
	struct dv_staged st;

	for (int i = 0; i < NOBJ; i++)
		install_n(t, i);
	/* Not objects: a bad name, a directory named like one, a symlink to
	 * one, a staging file. */
	snprintf(p, sizeof(p), "%s/f/notahash.tar", root);
	dv_test_write_file(p, "x", 1);
	snprintf(p, sizeof(p), "%s/f/%032x.tar", root, 0xdd01);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	hash_n(0, hash);
	snprintf(p, sizeof(p), "%s/f/%032x.tar", root, 0xdd02);
	ck_assert_int_eq(symlink(hash, p), 0);
	ck_assert_int_eq(dv_tier_stage_open(t, "00000000000000000000000000000fff", &st), 0);

	ck_assert_int_eq(dv_tier_scan(t, see, &s), 0);
	assert_seen_all(&s, NOBJ, true);
	dv_tier_stage_discard(t, &st);

	/* A callback's non-zero stops the scan and is its result. */
	memset(&s, 0, sizeof(s));
	s.stop_after = 2;
	ck_assert_int_eq(dv_tier_scan(t, see, &s), 7);
	ck_assert_int_eq(s.n, 2);
	dv_tier_free(t);
}
END_TEST

/* An unopened tier is scanned as it is: a missing directory is -ENOENT. */
START_TEST(test_folder_scan_missing_directory)
{
	struct dv_tier *t = folder("nothing/here", 0, false);
	struct seen s = { .n = 0 };
	char p[PATH_MAX];

	ck_assert_int_eq(dv_tier_scan(t, see, &s), -ENOENT);
	ck_assert_int_eq(s.n, 0);
	snprintf(p, sizeof(p), "%s/nothing", root);
	ck_assert_int_eq(access(p, F_OK), -1);
	dv_tier_free(t);
}
END_TEST

struct lines {
	int details, warnings;
	char last_warning[1024];
};

static void count_line(void *arg, enum dv_desc_line kind, const char *text)
{
	struct lines *l = arg;

	if (kind == DV_DESC_WARNING) {
		l->warnings++;
		snprintf(l->last_warning, sizeof(l->last_warning), "%s", text);
	} else {
		l->details++;
	}
}

START_TEST(test_folder_describe)
{
	struct dv_tier *t = folder("d", 1ULL << 50, true); /* 1 PiB */
	struct lines l = { 0 };
	struct dv_tier_desc d = { .line = count_line, .arg = &l };
	char p[PATH_MAX];
	uint64_t total = 0;

	for (int i = 0; i < NOBJ; i++) {
		install_n(t, i);
		total += size_n(i);
	}
	dv_tier_describe(t, &d);
	snprintf(p, sizeof(p), "%s/d", root);
	ck_assert_str_eq(d.where, p);
	ck_assert_uint_eq(d.capacity, 1ULL << 50);
	ck_assert(d.exists);
	ck_assert(d.has_usage);
	ck_assert_uint_eq(d.usage.objects, NOBJ);
	ck_assert_uint_eq(d.usage.used_bytes, total);
	ck_assert_uint_gt(d.usage.fs_free, 0);
	/* No filesystem here has a PiB free. */
	ck_assert_int_eq(l.warnings, 1);
	ck_assert_ptr_nonnull(strstr(l.last_warning, "tier 'd': max_bytes 1 PiB"));
	ck_assert_int_eq(l.details, 0);
	dv_tier_free(t);
}
END_TEST

/* Describing a tier not created yet creates nothing and says so. */
START_TEST(test_folder_describe_creates_nothing)
{
	struct dv_tier *t = folder("later/tier", 0, false);
	struct lines l = { 0 };
	struct dv_tier_desc d = { .line = count_line, .arg = &l };
	char p[PATH_MAX];

	dv_tier_describe(t, &d);
	ck_assert(!d.exists);
	ck_assert(d.has_usage);
	ck_assert_uint_eq(d.usage.objects, 0);
	ck_assert_uint_eq(d.capacity, 0);
	ck_assert_uint_gt(d.usage.fs_free, 0); /* of the nearest parent */
	ck_assert_int_eq(l.warnings, 0);
	snprintf(p, sizeof(p), "%s/later", root);
	ck_assert_int_eq(access(p, F_OK), -1);
	dv_tier_free(t);
}
END_TEST

static void object_file(int i, char *p)
{
	char hash[65];

	hash_n(i, hash);
	snprintf(p, PATH_MAX, "%s/c/%s.tar", root, hash);
}

/* check: intact, flipped, truncated, missing; the LRU order stays. */
START_TEST(test_folder_check)
{
	struct dv_tier *t = folder("c", 0, true);
	struct timespec old[2] = { { 1000000, 0 }, { 1000000, 0 } };
	uint8_t sha[2][32];
	char p[PATH_MAX], hash[65];
	struct stat st;
	int fd;

	for (int i = 0; i < 2; i++) {
		free(bytes_n(i, sha[i]));
		install_n(t, i);
	}
	object_file(0, p);
	ck_assert_int_eq(utimensat(AT_FDCWD, p, old, 0), 0);
	hash_n(0, hash);
	ck_assert_int_eq(dv_tier_check(t, hash, size_n(0), sha[0]), 0);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mtime, 1000000);
	ck_assert_int_eq(dv_tier_check(t, hash, size_n(0), sha[1]), -EBADMSG);
	ck_assert_int_eq(dv_tier_check(t, hash, size_n(0) + 1, sha[0]), -EBADMSG);

	fd = open(p, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "!", 1, 10), 1);
	close(fd);
	ck_assert_int_eq(dv_tier_check(t, hash, size_n(0), sha[0]), -EBADMSG);

	hash_n(1, hash);
	object_file(1, p);
	ck_assert_int_eq(truncate(p, 10), 0);
	ck_assert_int_eq(dv_tier_check(t, hash, size_n(1), sha[1]), -EBADMSG);
	ck_assert_int_eq(dv_tier_check(t, "0000000000000000000000000000dead", 10, sha[1]),
			 -ENOENT);
	dv_tier_free(t);
}
END_TEST

struct leftovers {
	int n, removed, not_asked;
	char names[8][256];
};

static void leftover(void *arg, const char *name, const char *what, int removed)
{
	struct leftovers *l = arg;

	ck_assert_int_lt(l->n, 8);
	ck_assert_ptr_nonnull(what);
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
	if (removed == 0)
		l->removed++;
	else if (removed == 1)
		l->not_asked++;
}

static void old_file(const char *sub, const char *name)
{
	struct timespec old[2] = { { time(NULL) - 3600, 0 }, { time(NULL) - 3600, 0 } };
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/s/%s/%s", root, sub, name);
	dv_test_write_file(p, "left", 4);
	ck_assert_int_eq(utimensat(AT_FDCWD, p, old, 0), 0);
}

static bool exists(const char *sub, const char *name)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/s/%s/%s", root, sub, name);
	return access(p, F_OK) == 0;
}

/* sweep: dead processes' leftovers, not a live one's, removed with fix. */
START_TEST(test_folder_sweep)
{
	struct dv_tier *t = folder("s", 0, true);
	struct leftovers l = { 0 };
	char p[PATH_MAX];
	int busy;

	old_file(".staging", "0000000000000000000000000000aaaa.DEAD01");
	old_file(".locks", "0000000000000000000000000000aaaa.lock");
	old_file(".staging", "0000000000000000000000000000bbbb.BUSY01");
	snprintf(p, sizeof(p), "%s/s/.staging/0000000000000000000000000000bbbb.BUSY01", root);
	busy = open(p, O_RDONLY);
	ck_assert_int_ge(busy, 0);
	ck_assert_int_eq(flock(busy, LOCK_EX), 0);
	/* Young: may be between its create and its flock. */
	snprintf(p, sizeof(p), "%s/s/.staging/0000000000000000000000000000cccc.YOUNG1", root);
	dv_test_write_file(p, "new", 3);

	ck_assert_int_eq(dv_tier_sweep(t, false, leftover, &l), 0);
	ck_assert_int_eq(l.n, 2);
	ck_assert_int_eq(l.not_asked, 2);
	ck_assert(strcmp(l.names[0], ".staging/0000000000000000000000000000aaaa.DEAD01") == 0 ||
		  strcmp(l.names[1], ".staging/0000000000000000000000000000aaaa.DEAD01") == 0);
	ck_assert(exists(".staging", "0000000000000000000000000000aaaa.DEAD01"));

	memset(&l, 0, sizeof(l));
	ck_assert_int_eq(dv_tier_sweep(t, true, leftover, &l), 0);
	ck_assert_int_eq(l.n, 2);
	ck_assert_int_eq(l.removed, 2);
	ck_assert(!exists(".staging", "0000000000000000000000000000aaaa.DEAD01"));
	ck_assert(!exists(".locks", "0000000000000000000000000000aaaa.lock"));
	ck_assert(exists(".staging", "0000000000000000000000000000bbbb.BUSY01"));
	ck_assert(exists(".staging", "0000000000000000000000000000cccc.YOUNG1"));
	close(busy);
	dv_tier_free(t);
}
END_TEST

static unsigned leftover_calls;

static void count_leftover(void *arg, const char *name, const char *what,
			   int removed)
{
	leftover_calls++;
}

/* A backend without the optional ops gets the core's defaults. */
START_TEST(test_defaults_of_a_remote_tier)
{
	struct dv_tier *t = fake_remote_new("bucket", 12345);
	struct dv_tier_desc d = { .line = count_line };
	struct dv_tier_usage u;
	struct seen s = { .n = 0 };
	struct dv_staged st;
	struct dv_object obj = { .fd = -1 };
	uint8_t sha[32] = { 0 };

	ck_assert_int_eq(dv_tier_open(t), 0);
	ck_assert_int_eq(dv_tier_scan(t, see, &s), -ENOTSUP);
	ck_assert_int_eq(s.n, 0);
	memset(&d, 0xff, sizeof(d.where));
	d.line = NULL;
	dv_tier_describe(t, &d);
	ck_assert_str_eq(d.where, "fake_remote");
	ck_assert_uint_eq(d.capacity, 12345);
	ck_assert(!d.has_usage);
	ck_assert(!d.exists);
	ck_assert_ptr_null(d.note);
	ck_assert_int_eq(dv_tier_check(t, "0123456789abcdef0123456789abcdef", 1, sha),
			 -ENOTSUP);
	leftover_calls = 0;
	ck_assert_int_eq(dv_tier_sweep(t, true, count_leftover, NULL), 0);
	ck_assert_uint_eq(leftover_calls, 0);
	memset(&u, 0xff, sizeof(u));
	ck_assert_int_eq(dv_tier_usage(t, &u), 0);
	ck_assert_uint_eq(u.used_bytes + u.objects + u.capacity + u.fs_free, 0);
	ck_assert(!dv_tier_has_locks(t));
	ck_assert(!dv_tier_is_folder(t));
	ck_assert_int_eq(dv_tier_lock(t, "0123456789abcdef0123456789abcdef"), -ENOTSUP);
	ck_assert_int_eq(dv_tier_stage_open(t, "0123456789abcdef0123456789abcdef", &st),
			 -ENOTSUP);
	ck_assert_int_eq(st.fd, -1);
	ck_assert_int_eq(dv_tier_free_space(t, 1), -ENOSPC);
	ck_assert_int_eq(dv_tier_remove(t, "0123456789abcdef0123456789abcdef"), -ENOTSUP);
	ck_assert_int_eq(dv_tier_open_object(t, "0123456789abcdef0123456789abcdef", 1, &obj),
			 -ENOTSUP);
	ck_assert_int_eq(dv_tier_read(t, &obj, sha, 1, 0), -ENOTSUP);
	dv_tier_free(t);
}
END_TEST

/* A backend's own helpers refuse a tier of another backend. */
START_TEST(test_downcast_refuses_a_foreign_tier)
{
	struct dv_tier *t = fake_remote_new("bucket", 0);

	dv_folder_tier_path(t); /* aborts */
}
END_TEST

/* Which tier holds a shard: none, the slow one, then after promotion the fast one. */
START_TEST(test_hierarchy_holder)
{
	struct dv_tier *tiers[2] = { folder("fast", 0, false), folder("slow", 0, false) };
	struct dv_hierarchy *h;
	struct dv_object o;
	uint8_t sha[32];
	char err[256], hash[65];
	char *b = bytes_n(0, sha);
	struct dv_shard_ref r = { .size = size_n(0), .sha256 = sha };

	free(b);
	hash_n(0, hash);
	r.hash = hash;
	ck_assert_int_eq(dv_hierarchy_from_tiers(tiers, 2, DV_VERIFY_FILL, &h, err,
						 sizeof(err)), 0);
	ck_assert_int_eq(dv_hierarchy_holder(h, hash, size_n(0)), -ENOENT);
	install_n(dv_hierarchy_tier(h, 1), 0);
	ck_assert_int_eq(dv_hierarchy_holder(h, hash, size_n(0)), 1);
	/* The wrong size is not held anywhere. */
	ck_assert_int_eq(dv_hierarchy_holder(h, hash, size_n(0) + 1), -ENOENT);
	/* A read promotes it (R3): the fast tier holds it now. */
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &r, NULL, &o), 0);
	dv_object_release(&o);
	ck_assert_int_eq(dv_hierarchy_holder(h, hash, size_n(0)), 0);
	ck_assert_int_eq(dv_tier_remove(dv_hierarchy_tier(h, 0), hash), 0);
	ck_assert_int_eq(dv_hierarchy_holder(h, hash, size_n(0)), 1);
	dv_hierarchy_free(h);
}
END_TEST

/* ---- stripe ---- */

#define NDEV 2
#define DEV_BYTES (64 * MiB)

static struct dv_tier *stripe(bool opened)
{
	static char dev[NDEV][PATH_MAX], state[PATH_MAX];
	static char *devices[NDEV + 1];
	struct dv_tier_config tc = {
		.type = DV_TIER_TYPE_STRIPE, .name = (char *)"nvme",
		.devices = devices, .chunk_bytes = MiB,
	};
	struct dv_config cfg = { .state_dir = state, .verify = DV_VERIFY_FILL };
	struct dv_tier *t;
	char err[512];

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
	ck_assert_int_eq(dv_stripe_tier_new(&tc, &cfg, &t, err, sizeof(err)), 0);
	if (opened)
		ck_assert_int_eq(dv_tier_open(t), 0);
	return t;
}

START_TEST(test_stripe_scan)
{
	struct dv_tier *t = stripe(false);
	struct seen s = { .n = 0 };

	/* Its index is the daemon's: nothing to list before open. */
	ck_assert_int_eq(dv_tier_scan(t, see, &s), -ENOTSUP);
	dv_tier_free(t);
	t = stripe(true);
	for (int i = 0; i < NOBJ; i++)
		install_n(t, i);
	ck_assert_int_eq(dv_tier_scan(t, see, &s), 0);
	assert_seen_all(&s, NOBJ, false);
	dv_tier_free(t);
}
END_TEST

/* The default check reads through the tier (stripe has no fd). */
START_TEST(test_stripe_check_by_default)
{
	struct dv_tier *t = stripe(true);
	uint8_t sha[2][32];
	char hash[65];

	for (int i = 0; i < 2; i++)
		free(bytes_n(i, sha[i]));
	install_n(t, 0);
	hash_n(0, hash);
	ck_assert_int_eq(dv_tier_check(t, hash, size_n(0), sha[0]), 0);
	ck_assert_int_eq(dv_tier_check(t, hash, size_n(0), sha[1]), -EBADMSG);
	hash_n(1, hash);
	ck_assert_int_ne(dv_tier_check(t, hash, size_n(1), sha[1]), 0);
	dv_tier_free(t);
}
END_TEST

/* The stripe tier describes its devices, unopened, as discovery sees them. */
START_TEST(test_stripe_describe)
{
	struct dv_tier *t = stripe(false);
	struct lines l = { 0 };
	struct dv_tier_desc d = { .line = count_line, .arg = &l };

	dv_tier_describe(t, &d);
	ck_assert_str_eq(d.where, "devices: listed");
	ck_assert(!d.has_usage);
	ck_assert_ptr_nonnull(d.note);
	ck_assert_int_eq(l.details, NDEV);
	ck_assert_int_eq(l.warnings, 0);
	dv_tier_free(t);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tier");
	TCase *tc = tcase_create("tier");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_folder_scan_finds_exactly_the_objects);
	tcase_add_test(tc, test_folder_scan_missing_directory);
	tcase_add_test(tc, test_folder_describe);
	tcase_add_test(tc, test_folder_describe_creates_nothing);
	tcase_add_test(tc, test_folder_check);
	tcase_add_test(tc, test_folder_sweep);
	tcase_add_test(tc, test_defaults_of_a_remote_tier);
	tcase_add_test_raise_signal(tc, test_downcast_refuses_a_foreign_tier, SIGABRT);
	tcase_add_test(tc, test_hierarchy_holder);
	tcase_add_test(tc, test_stripe_scan);
	tcase_add_test(tc, test_stripe_check_by_default);
	tcase_add_test(tc, test_stripe_describe);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
