/*
 * Folder tiers: R7 (per-hash locks, rename installs, racers
 * discard), R8 (LRU by mtime, opens refresh mtime, unbounded by default),
 * R12 (created on first use), our B6 (open files are not evicted), and
 * the durability markers of B4/B8 (an install reaches the disk in the
 * background; what a crash may have left unsynced is settled at open).
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/folder/folder.h"
#include "tiers/folder/syncer.h"
#include "helpers.h"

#define SZ 4096

static char *root;
static unsigned char payload[SZ];

static void setup(void)
{
	root = dv_test_tmpdir("folder");
	dv_test_pattern(payload, sizeof(payload), 3);
	dv_log_set_level(DV_LOG_ERROR);
}

static void teardown(void)
{
	dv_test_rmtree(root);
	free(root);
}

static struct dv_tier *open_tier(const char *sub, uint64_t max)
{
	char path[PATH_MAX];
	struct dv_tier *t;

	snprintf(path, sizeof(path), "%s/%s", root, sub);
	ck_assert_int_eq(dv_folder_tier_create(path, sub, max, &t), 0);
	ck_assert_int_eq(t->ops->open(t), 0);
	return t;
}

static void hash_n(int i, char *hash)
{
	snprintf(hash, 65, "%032x", i + 1);
}

/* Stages and installs shard @i (payload, SZ bytes). */
static int install_n(struct dv_tier *t, int i)
{
	struct dv_staged st;
	char hash[65];
	int ret;

	hash_n(i, hash);
	ck_assert_int_eq(t->ops->stage_open(t, hash, &st), 0);
	ck_assert_int_eq(write(st.fd, payload, SZ), SZ);
	ret = t->ops->install(t, hash, st.fd, st.path, SZ, DV_INSTALL_MOVE);
	t->ops->stage_discard(t, &st);
	return ret;
}

static void set_mtime(struct dv_tier *t, int i, time_t when)
{
	char path[PATH_MAX], hash[65];
	struct timespec ts[2] = { { when, 0 }, { when, 0 } };

	hash_n(i, hash);
	snprintf(path, sizeof(path), "%s/%s.tar", dv_folder_tier_path(t), hash);
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static bool holds(struct dv_tier *t, int i)
{
	char hash[65];

	hash_n(i, hash);
	return t->ops->lookup(t, hash, SZ) == 0;
}

/* R12: the directory and its .staging/ and .locks/ appear on first use. */
START_TEST(test_r12_created_on_first_use)
{
	char p[PATH_MAX];
	struct dv_tier *t = open_tier("deep/er/tier", 0);

	snprintf(p, sizeof(p), "%s/deep/er/tier/.staging", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/deep/er/tier/.locks", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	dv_tier_free(t);
}
END_TEST

/* R7: the lock is a file in .locks/ held with flock, per hash. */
START_TEST(test_r7_lock_is_per_hash_flock)
{
	struct dv_tier *t = open_tier("t", 0);
	char p[PATH_MAX], h1[65], h2[65];
	int fd1, fd2, probe;

	hash_n(1, h1);
	hash_n(2, h2);
	fd1 = t->ops->lock(t, h1);
	ck_assert_int_ge(fd1, 0);
	snprintf(p, sizeof(p), "%s/t/.locks/%s.lock", root, h1);
	probe = open(p, O_RDONLY);
	ck_assert_int_ge(probe, 0);
	ck_assert_int_eq(flock(probe, LOCK_EX | LOCK_NB), -1);
	ck_assert_int_eq(errno, EWOULDBLOCK);
	/* Another shard is not blocked by it. */
	fd2 = t->ops->lock(t, h2);
	ck_assert_int_ge(fd2, 0);
	t->ops->unlock(t, h2, fd2);
	t->ops->unlock(t, h1, fd1);
	close(probe);
	ck_assert_int_eq(access(p, F_OK), -1); /* nothing left behind */
	dv_tier_free(t);
}
END_TEST

/* R7: a racer that finds the shard installed discards its staged copy. */
START_TEST(test_r7_racer_discards_staged_copy)
{
	struct dv_tier *t = open_tier("t", 0);
	struct dv_staged st;
	char hash[65], p[PATH_MAX];

	ck_assert_int_eq(install_n(t, 0), 0);
	hash_n(0, hash);
	ck_assert_int_eq(t->ops->stage_open(t, hash, &st), 0);
	ck_assert_int_eq(write(st.fd, "different", 9), 9);
	ck_assert_int_eq(t->ops->install(t, hash, st.fd, st.path, SZ,
					 DV_INSTALL_MOVE), 0);
	ck_assert_int_eq(access(st.path, F_OK), 0); /* left for the caller */
	t->ops->stage_discard(t, &st);
	snprintf(p, sizeof(p), "%s/t/.staging", root);
	ck_assert_int_eq(dv_test_count_entries(p), 0);
	snprintf(p, sizeof(p), "%s/t/%s.tar", root, hash);
	{
		size_t n;
		char *got = dv_test_read_file(p, &n);

		ck_assert_uint_eq(n, SZ);
		ck_assert_mem_eq(got, payload, SZ);
		free(got);
	}
	dv_tier_free(t);
}
END_TEST

/* R7: a waiter on a lock whose holder unlinks it gets a fresh lock. */
START_TEST(test_r7_lock_survives_unlink_race)
{
	struct dv_tier *t = open_tier("t", 0);
	char hash[65];
	int pipefd[2], gofd[2], fd;
	struct timespec t0, t1;
	pid_t pid;
	int status;
	char c;

	hash_n(5, hash);
	ck_assert_int_eq(pipe(pipefd), 0);
	ck_assert_int_eq(pipe(gofd), 0);
	/* Forked before the lock is taken: a child must not share its fd. */
	pid = fork();
	if (pid == 0) {
		int lfd;

		ck_assert_int_eq(read(gofd[0], &c, 1), 1);
		lfd = t->ops->lock(t, hash); /* waits for the parent */
		ck_assert_int_eq(write(pipefd[1], "l", 1), 1);
		sleep(1);
		t->ops->unlock(t, hash, lfd);
		_exit(0);
	}
	fd = t->ops->lock(t, hash);
	ck_assert_int_eq(write(gofd[1], "g", 1), 1);
	usleep(100 * 1000);
	t->ops->unlock(t, hash, fd);
	ck_assert_int_eq(read(pipefd[0], &c, 1), 1);
	/* The child holds it now, for a second: we must wait for it. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = t->ops->lock(t, hash);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_ge((t1.tv_sec - t0.tv_sec) * 1000 +
			 (t1.tv_nsec - t0.tv_nsec) / 1000000, 800);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	t->ops->unlock(t, hash, fd);
	close(pipefd[0]);
	close(pipefd[1]);
	close(gofd[0]);
	close(gofd[1]);
	dv_tier_free(t);
}
END_TEST

/* R8: opening an object refreshes its mtime. */
START_TEST(test_r8_open_refreshes_mtime)
{
	struct dv_tier *t = open_tier("t", 0);
	struct dv_object o = { .fd = -1 };
	char hash[65];
	struct stat st;

	ck_assert_int_eq(install_n(t, 0), 0);
	set_mtime(t, 0, 1000000);
	hash_n(0, hash);
	snprintf(o.hash, sizeof(o.hash), "%s", hash);
	ck_assert_int_eq(t->ops->open_object(t, hash, SZ, &o), 0);
	ck_assert_int_eq(fstat(o.fd, &st), 0);
	ck_assert_int_gt(st.st_mtime, time(NULL) - 60);
	t->ops->close_object(t, &o);
	dv_tier_free(t);
}
END_TEST

/* R8: LRU evicts the oldest first, and only as much as needed. */
START_TEST(test_r8_lru_evicts_oldest_only_as_needed)
{
	struct dv_tier *t = open_tier("t", 4 * SZ);

	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(install_n(t, i), 0);
		set_mtime(t, i, 1000000 + (time_t)(i == 0 ? 500 : i) * 10);
	}
	/* 0 was used most recently; 1 is the oldest. */
	ck_assert_int_eq(install_n(t, 4), 0);
	ck_assert(!holds(t, 1));
	ck_assert(holds(t, 0));
	ck_assert(holds(t, 2));
	ck_assert(holds(t, 3));
	ck_assert(holds(t, 4));
	ck_assert_uint_eq(t->stats.evictions, 1);
	dv_tier_free(t);
}
END_TEST

/* R8: 0 or missing max_bytes is unbounded. */
START_TEST(test_r8_zero_max_bytes_unbounded)
{
	struct dv_tier *t = open_tier("t", 0);
	struct dv_tier_usage u;

	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(install_n(t, i), 0);
	ck_assert_int_eq(t->ops->usage(t, &u), 0);
	ck_assert_uint_eq(u.objects, 64);
	ck_assert_uint_eq(u.used_bytes, 64 * SZ);
	ck_assert_uint_eq(u.capacity, 0);
	ck_assert_uint_eq(t->stats.evictions, 0);
	dv_tier_free(t);
}
END_TEST

/* A shard larger than the tier is refused, nothing evicted for it. */
START_TEST(test_r2_too_large_refused)
{
	struct dv_tier *t = open_tier("t", SZ / 2);
	char hash[65];
	struct dv_staged st;

	hash_n(0, hash);
	ck_assert_int_eq(t->ops->stage_open(t, hash, &st), 0);
	ck_assert_int_eq(write(st.fd, payload, SZ), SZ);
	ck_assert_int_eq(t->ops->install(t, hash, st.fd, st.path, SZ,
					 DV_INSTALL_MOVE), -EFBIG);
	t->ops->stage_discard(t, &st);
	dv_tier_free(t);
}
END_TEST

/* B6: a file open here is not chosen while others can be... */
START_TEST(test_b6_open_file_not_evicted)
{
	struct dv_tier *t = open_tier("t", 2 * SZ);
	struct dv_object o = { .fd = -1 };
	char hash[65];

	ck_assert_int_eq(install_n(t, 0), 0);
	ck_assert_int_eq(install_n(t, 1), 0);
	set_mtime(t, 0, 1000000); /* 0 is the oldest, but it is open */
	set_mtime(t, 1, 2000000);
	hash_n(0, hash);
	snprintf(o.hash, sizeof(o.hash), "%s", hash);
	ck_assert_int_eq(t->ops->open_object(t, hash, SZ, &o), 0);
	set_mtime(t, 0, 1000000);
	ck_assert_int_eq(install_n(t, 2), 0);
	ck_assert(holds(t, 0));
	ck_assert(!holds(t, 1));
	ck_assert(holds(t, 2));
	t->ops->close_object(t, &o);
	dv_tier_free(t);
}
END_TEST

/* ...and when only open files remain, their space is not counted free. */
START_TEST(test_b6_open_space_not_counted_free)
{
	struct dv_tier *t = open_tier("t", 2 * SZ);
	struct dv_object o[2] = { { .fd = -1 }, { .fd = -1 } };

	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(install_n(t, i), 0);
		hash_n(i, o[i].hash);
		ck_assert_int_eq(t->ops->open_object(t, o[i].hash, SZ, &o[i]), 0);
	}
	ck_assert_int_eq(install_n(t, 2), -ENOSPC);
	ck_assert(holds(t, 0));
	ck_assert(holds(t, 1));
	ck_assert(!holds(t, 2));
	/* Once closed, the room is there. */
	t->ops->close_object(t, &o[0]);
	t->ops->close_object(t, &o[1]);
	ck_assert_int_eq(install_n(t, 2), 0);
	dv_tier_free(t);
}
END_TEST

/* Stages and installs @size bytes as @hash (copies of payload). */
static int install_sized(struct dv_tier *t, const char *hash, uint64_t size)
{
	struct dv_staged st;
	int ret;

	ck_assert_int_eq(t->ops->stage_open(t, hash, &st), 0);
	for (uint64_t off = 0; off < size; off += SZ)
		ck_assert_int_eq(write(st.fd, payload, SZ), SZ);
	ret = t->ops->install(t, hash, st.fd, st.path, size, DV_INSTALL_MOVE);
	t->ops->stage_discard(t, &st);
	return ret;
}

/*
 * R8, B6: when evicting every shard not open could not make room, nothing
 * is evicted. 12 shards in a tier of 16; 6 of them open; one of 11 more.
 */
START_TEST(test_r8_no_eviction_that_cannot_make_room)
{
	struct dv_tier *t = open_tier("t", 16 * SZ);
	struct dv_object o[6];
	char big[65];

	for (int i = 0; i < 12; i++)
		ck_assert_int_eq(install_n(t, i), 0);
	for (int i = 0; i < 6; i++) {
		memset(&o[i], 0, sizeof(o[i]));
		hash_n(i, o[i].hash);
		ck_assert_int_eq(t->ops->open_object(t, o[i].hash, SZ, &o[i]), 0);
	}
	hash_n(100, big);
	ck_assert_int_eq(install_sized(t, big, 11 * SZ), -ENOSPC);
	for (int i = 0; i < 12; i++)
		ck_assert(holds(t, i));
	ck_assert_uint_eq(t->stats.evictions, 0);
	/* What can make room still does: 6 closed shards go for one of 10. */
	ck_assert_int_eq(install_sized(t, big, 10 * SZ), 0);
	ck_assert_uint_eq(t->stats.evictions, 6);
	for (int i = 0; i < 6; i++) {
		ck_assert(holds(t, i));
		t->ops->close_object(t, &o[i]);
	}
	dv_tier_free(t);
}
END_TEST

/* The same for the filesystem: room no eviction can free evicts nothing. */
START_TEST(test_r8_no_eviction_for_more_than_the_filesystem)
{
	struct dv_tier *t = open_tier("t", 16 * SZ);

	for (int i = 0; i < 12; i++)
		ck_assert_int_eq(install_n(t, i), 0);
	ck_assert_int_eq(t->ops->free_space(t, UINT64_MAX / 4), -ENOSPC);
	for (int i = 0; i < 12; i++)
		ck_assert(holds(t, i));
	ck_assert_uint_eq(t->stats.evictions, 0);
	dv_tier_free(t);
}
END_TEST

/* Pins count opens per hash; lookups see exactly the pinned hashes. */
START_TEST(test_b6_pins_count_and_lookup)
{
	struct dv_tier *t = open_tier("t", 0);
	char hash[65];

	hash_n(0, hash);
	ck_assert(!dv_tier_is_pinned(t, hash));
	ck_assert_int_eq(dv_tier_pin(t, hash), 0);
	ck_assert_int_eq(dv_tier_pin(t, hash), 0);
	dv_tier_unpin(t, hash);
	ck_assert(dv_tier_is_pinned(t, hash));
	dv_tier_unpin(t, hash);
	ck_assert(!dv_tier_is_pinned(t, hash));
	dv_tier_unpin(t, hash); /* not pinned: nothing happens */
	ck_assert(!dv_tier_is_pinned(t, hash));
	/* Many: the table grows, and every even hash stays found. */
	for (int i = 0; i < 5000; i++) {
		hash_n(i, hash);
		ck_assert_int_eq(dv_tier_pin(t, hash), 0);
	}
	for (int i = 1; i < 5000; i += 2) {
		hash_n(i, hash);
		dv_tier_unpin(t, hash);
	}
	for (int i = 0; i < 6000; i++) {
		hash_n(i, hash);
		ck_assert_int_eq(dv_tier_is_pinned(t, hash), i < 5000 && i % 2 == 0);
	}
	for (int i = 0; i < 5000; i += 2) {
		hash_n(i, hash);
		dv_tier_unpin(t, hash);
		ck_assert(!dv_tier_is_pinned(t, hash));
	}
	dv_tier_free(t); /* frees a table that held pins */
}
END_TEST

/*
 * futimens() is where an open refreshes recency (R8): while it runs, the
 * file is open. The test makes an eviction run right there, as a fill on
 * another thread could.
 */
static struct dv_tier *evict_in_futimens;

int futimens(int fd, const struct timespec times[2])
{
	int (*real)(int, const struct timespec *) =
		(int (*)(int, const struct timespec *))dlsym(RTLD_NEXT,
							     "futimens");
	struct dv_tier *t = evict_in_futimens;

	if (t) {
		evict_in_futimens = NULL;
		ck_assert_int_eq(t->ops->free_space(t, 0), 0);
	}
	return real(fd, times);
}

/* B6: a shard being opened is pinned first, so no eviction takes it. */
START_TEST(test_b6_eviction_never_takes_a_shard_being_opened)
{
	struct dv_tier *t = open_tier("t", SZ);
	struct dv_object o = { .fd = -1 };
	char path[PATH_MAX];
	struct stat st;

	ck_assert_int_eq(install_n(t, 0), 0);
	/* Shard 1 put there by hand: the tier is over its max by one. */
	hash_n(1, o.hash);
	snprintf(path, sizeof(path), "%s/%s.tar", dv_folder_tier_path(t), o.hash);
	dv_test_write_file(path, payload, SZ);
	set_mtime(t, 0, 1000000); /* 0 is the oldest: the first to go */
	set_mtime(t, 1, 2000000);
	hash_n(0, o.hash);
	evict_in_futimens = t;
	ck_assert_int_eq(t->ops->open_object(t, o.hash, SZ, &o), 0);
	ck_assert_ptr_null(evict_in_futimens);
	ck_assert(holds(t, 0));
	ck_assert(!holds(t, 1));
	ck_assert_int_eq(fstat(o.fd, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 1);
	t->ops->close_object(t, &o);
	dv_tier_free(t);
}
END_TEST

static unsigned mode_of(const char *path)
{
	struct stat st;

	ck_assert_msg(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
	return (unsigned)(st.st_mode & 07777);
}

/* Checks the modes of the tier at @dir, and of shard @i in it. */
static void assert_modes(const char *dir, int i, unsigned dmode,
			 unsigned fmode)
{
	static const char *const subs[] = { "", "/.staging", "/.locks",
					    "/.unsynced" };
	char p[PATH_MAX], hash[65];

	for (size_t k = 0; k < sizeof(subs) / sizeof(subs[0]); k++) {
		snprintf(p, sizeof(p), "%s%s", dir, subs[k]);
		ck_assert_msg(mode_of(p) == dmode, "%s: %04o, not %04o", p,
			      mode_of(p), dmode);
	}
	hash_n(i, hash);
	snprintf(p, sizeof(p), "%s/%s.tar", dir, hash);
	ck_assert_msg(mode_of(p) == fmode, "%s: %04o, not %04o", p, mode_of(p),
		      fmode);
}

/* By default the umask decides: under 077 the cache is the user's alone. */
START_TEST(test_umask_decides_modes)
{
	mode_t old = umask(077);
	struct dv_tier *t = open_tier("deep/tier", 0);
	char p[PATH_MAX];
	struct dv_staged st;
	char hash[65];

	ck_assert_int_eq(install_n(t, 0), 0);
	hash_n(1, hash);
	ck_assert_int_eq(t->ops->stage_open(t, hash, &st), 0);
	ck_assert_uint_eq(mode_of(st.path), 0600);
	t->ops->stage_discard(t, &st);
	snprintf(p, sizeof(p), "%s/deep", root);
	ck_assert_uint_eq(mode_of(p), 0700);
	assert_modes(dv_folder_tier_path(t), 0, 0700, 0600);
	dv_tier_free(t);
	/* Under 022, what it always was. */
	umask(022);
	t = open_tier("other", 0);
	ck_assert_int_eq(install_n(t, 0), 0);
	assert_modes(dv_folder_tier_path(t), 0, 0755, 0644);
	dv_tier_free(t);
	umask(old);
}
END_TEST

/* A tier's mode and group: setgid directories, files less the x bits. */
START_TEST(test_tier_mode_and_group_applied)
{
	mode_t old = umask(077);
	char path[PATH_MAX], err[256], name[] = "t";
	struct dv_tier_config tc = { .type = DV_TIER_TYPE_FOLDER, .name = name,
				     .path = path, .mode = 0770,
				     .gid = getegid(), .has_group = true };
	struct dv_tier *t;
	struct stat st;
	char hash[65];
	int fd;

	snprintf(path, sizeof(path), "%s/shared", root);
	ck_assert_int_eq(dv_folder_tier_new(&tc, NULL, &t, err, sizeof(err)), 0);
	ck_assert_int_eq(t->ops->open(t), 0);
	ck_assert_int_eq(install_n(t, 0), 0);
	hash_n(0, hash);
	/* The lock a second daemon of another user must open read-write. */
	fd = t->ops->lock(t, hash);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0660);
	t->ops->unlock(t, hash, fd);
	umask(old);
	assert_modes(path, 0, 02770, 0660);
	snprintf(path, sizeof(path), "%s/shared/%s.tar", root, hash);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_gid, getegid());
	dv_tier_free(t);

	/* A group alone: the umask gives the mode, the group adds setgid. */
	old = umask(022);
	snprintf(path, sizeof(path), "%s/grouped", root);
	tc.mode = 0;
	ck_assert_int_eq(dv_folder_tier_new(&tc, NULL, &t, err, sizeof(err)), 0);
	ck_assert_int_eq(t->ops->open(t), 0);
	ck_assert_int_eq(install_n(t, 0), 0);
	umask(old);
	assert_modes(path, 0, 02755, 0644);
	dv_tier_free(t);
}
END_TEST

/* B4: stale staging files and locks of dead processes go at open. */
START_TEST(test_b4_stale_leftovers_cleaned)
{
	char p[PATH_MAX];
	struct dv_tier *t = open_tier("t", 0);

	dv_tier_free(t);
	snprintf(p, sizeof(p), "%s/t/.staging/%032x.abcdef", root, 9);
	dv_test_write_file(p, "partial", 7);
	snprintf(p, sizeof(p), "%s/t/.locks/%032x.lock", root, 9);
	dv_test_write_file(p, "", 0);
	t = open_tier("t", 0);
	snprintf(p, sizeof(p), "%s/t/.staging", root);
	ck_assert_int_eq(dv_test_count_entries(p), 0);
	snprintf(p, sizeof(p), "%s/t/.locks", root);
	ck_assert_int_eq(dv_test_count_entries(p), 0);
	dv_tier_free(t);
}
END_TEST

/* @sub/.unsynced/<hash of shard i>.abcdef, holding @boot. */
static void leave_marker(const char *sub, int i, const char *boot)
{
	char p[PATH_MAX], hash[65];

	hash_n(i, hash);
	snprintf(p, sizeof(p), "%s/%s/.unsynced/%s.abcdef", root, sub, hash);
	dv_test_write_file(p, boot, strlen(boot));
}

static bool has_shard(const char *sub, int i)
{
	char p[PATH_MAX], hash[65];

	hash_n(i, hash);
	snprintf(p, sizeof(p), "%s/%s/%s.tar", root, sub, hash);
	return access(p, F_OK) == 0;
}

static int unsynced(const char *sub)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s/.unsynced", root, sub);
	return dv_test_count_entries(p);
}

START_TEST(test_b8_install_reaches_disk_in_background)
{
	struct dv_tier *t = open_tier("t", 0);

	ck_assert_int_eq(install_n(t, 0), 0);
	ck_assert(has_shard("t", 0));
	ck_assert_int_eq(unsynced("t"), 1); /* the sync waits a few seconds */
	dv_syncer_flush();
	ck_assert_int_eq(unsynced("t"), 0); /* synced, marker gone */
	dv_tier_free(t);
	ck_assert(has_shard("t", 0));
}
END_TEST

START_TEST(test_b8_waiting_syncs_run_when_the_tier_closes)
{
	struct dv_tier *t = open_tier("t", 0);

	ck_assert_int_eq(install_n(t, 0), 0);
	ck_assert_int_eq(install_n(t, 1), 0);
	ck_assert_int_eq(unsynced("t"), 2);
	dv_tier_free(t);
	ck_assert_int_eq(unsynced("t"), 0);
}
END_TEST

/* Many installs at once: the syncer stops waiting until half are left. */
START_TEST(test_b8_a_long_queue_syncs_without_waiting)
{
	struct dv_tier *t = open_tier("t", 0);
	int i, left = 0;

	for (i = 0; i < 20; i++)
		ck_assert_int_eq(install_n(t, i), 0);
	/* Well before the usual wait of 5 s is over. */
	for (i = 0; i < 300; i++) {
		left = unsynced("t");
		if (left <= 15)
			break;
		usleep(10 * 1000);
	}
	ck_assert_int_eq(left, 15);
	dv_tier_free(t);
	ck_assert_int_eq(unsynced("t"), 0);
}
END_TEST

/* A daemon killed before its sync ran: same boot, the bytes are good. */
START_TEST(test_b4_unsynced_same_boot_synced_and_kept)
{
	struct dv_tier *t = open_tier("t", 0);

	ck_assert_int_eq(install_n(t, 0), 0);
	dv_tier_free(t);
	ck_assert_str_ne(dv_boot_id(), "");
	leave_marker("t", 0, dv_boot_id());
	t = open_tier("t", 0);
	ck_assert(has_shard("t", 0));
	ck_assert_int_eq(unsynced("t"), 0);
	dv_tier_free(t);
}
END_TEST

/* The machine restarted before the sync: the file may hold anything. */
START_TEST(test_b4_unsynced_other_boot_removed)
{
	struct dv_tier *t = open_tier("t", 0);

	ck_assert_int_eq(install_n(t, 0), 0);
	ck_assert_int_eq(install_n(t, 1), 0);
	dv_tier_free(t);
	leave_marker("t", 0, "00000000-0000-0000-0000-000000000000");
	t = open_tier("t", 0);
	ck_assert(!has_shard("t", 0));
	ck_assert(has_shard("t", 1)); /* no marker: on disk */
	ck_assert_int_eq(unsynced("t"), 0);
	dv_tier_free(t);
}
END_TEST

/* A marker whose shard is being installed right now is its installer's. */
START_TEST(test_b4_unsynced_of_a_running_install_untouched)
{
	char p[PATH_MAX], hash[65];
	struct dv_tier *t = open_tier("t", 0);
	int fd;

	ck_assert_int_eq(install_n(t, 0), 0);
	dv_tier_free(t);
	leave_marker("t", 0, "00000000-0000-0000-0000-000000000000");
	hash_n(0, hash);
	snprintf(p, sizeof(p), "%s/t/.locks/%s.lock", root, hash);
	fd = open(p, O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	t = open_tier("t", 0);
	ck_assert(has_shard("t", 0));
	ck_assert_int_eq(unsynced("t"), 1);
	dv_tier_free(t);
	close(fd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("folder");
	TCase *tc = tcase_create("folder");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_r12_created_on_first_use);
	tcase_add_test(tc, test_r7_lock_is_per_hash_flock);
	tcase_add_test(tc, test_r7_racer_discards_staged_copy);
	tcase_add_test(tc, test_r7_lock_survives_unlink_race);
	tcase_add_test(tc, test_r8_open_refreshes_mtime);
	tcase_add_test(tc, test_r8_lru_evicts_oldest_only_as_needed);
	tcase_add_test(tc, test_r8_zero_max_bytes_unbounded);
	tcase_add_test(tc, test_r2_too_large_refused);
	tcase_add_test(tc, test_b6_open_file_not_evicted);
	tcase_add_test(tc, test_b6_open_space_not_counted_free);
	tcase_add_test(tc, test_r8_no_eviction_that_cannot_make_room);
	tcase_add_test(tc, test_r8_no_eviction_for_more_than_the_filesystem);
	tcase_add_test(tc, test_b6_pins_count_and_lookup);
	tcase_add_test(tc, test_b6_eviction_never_takes_a_shard_being_opened);
	tcase_add_test(tc, test_umask_decides_modes);
	tcase_add_test(tc, test_tier_mode_and_group_applied);
	tcase_add_test(tc, test_b4_stale_leftovers_cleaned);
	tcase_add_test(tc, test_b8_install_reaches_disk_in_background);
	tcase_add_test(tc, test_b8_waiting_syncs_run_when_the_tier_closes);
	tcase_add_test(tc, test_b8_a_long_queue_syncs_without_waiting);
	tcase_add_test(tc, test_b4_unsynced_same_boot_synced_and_kept);
	tcase_add_test(tc, test_b4_unsynced_other_boot_removed);
	tcase_add_test(tc, test_b4_unsynced_of_a_running_install_untouched);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
