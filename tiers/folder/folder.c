/*
 * Folder tiers: plain files in a directory (see folder.h for the layout).
 *
 * Locks. A lock is an flock on .locks/<hash>.lock. The holder unlinks the
 * file before releasing it, so the directory does not fill with lock files;
 * a waiter that wakes on an unlinked inode sees that the path no longer
 * names its fd and starts over. flock conflicts between two open file
 * descriptions of one process too, so threads serialize like processes.
 *
 * Staging files are flocked by the process writing them. Whatever in
 * .staging/ or .locks/ can be flocked at open time belongs to nobody alive
 * and is removed (B4), but for the .partial files of streaming fills less
 * than a day old: every chunk in them is checked again before it is used,
 * so a fill killed halfway resumes where it stopped.
 *
 * Durability. An install does not wait for the disk: it leaves a marker in
 * .unsynced/ and the syncer makes the file durable in the background
 * (syncer.h). Markers left by a killed daemon or a crash are settled when
 * the tier is opened.
 *
 * What this file does not do: decide where a shard goes (hierarchy.c), or
 * check bytes (the sink did before install is called).
 */
#include "folder_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "config/perms.h"
#include "config/util.h"
#include "syncer.h"

#define PARTIAL_KEEP (24 * 3600) /* s a streaming fill's staging file is kept */

struct folder_tier {
	struct dv_tier base;
	char *path;
	int dirfd;                 /* the tier directory, for fsync */
	struct dv_perms perms;     /* how its files and directories are made */
	bool syncer_held;          /* dv_syncer_hold() done */
	pthread_mutex_t room_lock;
	uint64_t reserved;         /* protected by room_lock: room promised
				      to installs still copying */
};

static struct folder_tier *folder_downcast(struct dv_tier *t)
{
	return dv_tier_downcast(t, &dv_tier_folder_ops);
}

const char *dv_folder_tier_path(struct dv_tier *t)
{
	return folder_downcast(t)->path;
}

static int sub_path(struct folder_tier *ft, char *buf, const char *sub,
		    const char *name, const char *suffix)
{
	int n = snprintf(buf, PATH_MAX, "%s%s%s%s", ft->path, sub, name, suffix);

	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int object_path(struct folder_tier *ft, char *buf, const char *hash)
{
	return sub_path(ft, buf, "/", hash, ".tar");
}

/* Removes whatever in @dir nobody holds an flock on (B4). */
/* A streaming fill's staging file, kept for a resume (fill.h). */
static bool young_partial(int dirfd, const char *name)
{
	size_t len = strlen(name);
	struct stat st;

	return len > 8 && strcmp(name + len - 8, ".partial") == 0 &&
	       fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode) && time(NULL) - st.st_mtime < PARTIAL_KEEP;
}

static void clean_unlocked(const char *dir, const char *what)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	unsigned removed = 0;

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		int fd;

		if (de->d_name[0] == '.' || young_partial(dirfd(d), de->d_name))
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (unlinkat(dirfd(d), de->d_name, 0) == 0)
				removed++;
		}
		close(fd);
	}
	closedir(d);
	if (removed)
		dv_info("%s: removed %u stale %s", dir, removed, what);
}

/*
 * Creates the tier directory, .staging/, .locks/ and .unsynced/ (R12). At open, and
 * again when an operator deleted or replaced the directory under a running
 * daemon: the tier then starts over empty rather than failing every fill.
 */
static int make_dirs(struct folder_tier *ft)
{
	char buf[PATH_MAX];
	int ret;

	ret = dv_mkdir_p_perms(ft->path, &ft->perms);
	if (ret) {
		dv_err("tier '%s': cannot create %s: %s", ft->base.name,
		       ft->path, strerror(-ret));
		return ret;
	}
	static const char *const subs[] = { "/.staging", "/.locks", "/.unsynced" };

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		ret = sub_path(ft, buf, subs[i], "", "");
		if (!ret)
			ret = dv_mkdir_perms(buf, &ft->perms);
		if (ret) {
			dv_err("tier '%s': cannot create %s: %s", ft->base.name,
			       buf, strerror(-ret));
			return ret;
		}
	}
	return 0;
}

static void settle_unsynced(struct folder_tier *ft);

static int folder_open(struct dv_tier *t)
{
	struct folder_tier *ft = folder_downcast(t);
	char buf[PATH_MAX];
	char real[PATH_MAX];
	int ret;

	ret = make_dirs(ft);
	if (ret)
		return ret;
	for (int i = 0; i < 2; i++) {
		sub_path(ft, buf, i ? "/.locks" : "/.staging", "", "");
		clean_unlocked(buf, i ? "locks" : "staging files");
	}
	ft->dirfd = open(ft->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ft->dirfd < 0)
		return -errno;
	settle_unsynced(ft);
	dv_syncer_hold();
	ft->syncer_held = true;
	if (realpath(ft->path, real)) {
		free(t->lock_key);
		t->lock_key = strdup(real);
		if (!t->lock_key)
			return -ENOMEM;
	}
	return 0;
}

static void folder_destroy(struct dv_tier *t)
{
	struct folder_tier *ft = folder_downcast(t);

	if (ft->syncer_held)
		dv_syncer_release();
	if (ft->dirfd >= 0)
		close(ft->dirfd);
	pthread_mutex_destroy(&ft->room_lock);
	free(ft->path);
	dv_tier_release(t);
	free(ft);
}

static int folder_lookup(struct dv_tier *t, const char *hash, uint64_t size)
{
	struct folder_tier *ft = folder_downcast(t);
	char path[PATH_MAX];
	struct stat st;
	int ret;

	ret = object_path(ft, path, hash);
	if (ret)
		return ret;
	if (stat(path, &st))
		return errno == ENOENT ? -ENOENT : -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOENT;
	return (uint64_t)st.st_size == size ? 0 : -EBADMSG;
}

static int folder_open_object(struct dv_tier *t, const char *hash,
			      uint64_t size, struct dv_object *obj)
{
	struct folder_tier *ft = folder_downcast(t);
	struct stat st;
	int ret, fd;

	ret = object_path(ft, obj->path, hash);
	if (ret)
		return ret;
	/* Pinned before it is open: no eviction takes it in between (B6). */
	ret = dv_tier_pin(t, hash);
	if (ret)
		return ret;
	fd = open(obj->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		ret = -errno;
		dv_tier_unpin(t, hash);
		return ret;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != size) {
		close(fd);
		dv_tier_unpin(t, hash);
		return -EBADMSG;
	}
	/* R8: an open refreshes recency. A read-only share may refuse. */
	if (futimens(fd, NULL))
		dv_debug("tier '%s': cannot refresh mtime of %s: %s", t->name,
			 obj->path, strerror(errno));
	obj->fd = fd;
	obj->size = size;
	return 0;
}

static void folder_close_object(struct dv_tier *t, struct dv_object *obj)
{
	dv_tier_unpin(t, obj->hash);
	if (obj->fd >= 0)
		close(obj->fd);
	obj->fd = -1;
}

/* The flock of @hash; -EWOULDBLOCK when held and !@wait. */
static int lock_hash(struct folder_tier *ft, const char *hash, bool wait)
{
	char path[PATH_MAX];
	struct stat fst, pst;
	int ret = sub_path(ft, path, "/.locks/", hash, ".lock");

	if (ret)
		return ret;
	for (bool remade = false;;) {
		int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);

		if (fd < 0 && errno == ENOENT && !remade) {
			/* The tier directory is gone: make it again. */
			remade = true;
			if (make_dirs(ft) == 0)
				continue;
		}
		if (fd < 0)
			return -errno;
		/* Another user's daemon sharing the tier opens it too. */
		ret = dv_perms_apply_fd(fd, &ft->perms);
		if (ret) {
			close(fd);
			return ret;
		}
		while (flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB)) {
			if (errno != EINTR) {
				ret = -errno;
				close(fd);
				return ret;
			}
		}
		/* The holder before us may have unlinked it: start over. */
		if (fstat(fd, &fst) == 0 && stat(path, &pst) == 0 &&
		    fst.st_ino == pst.st_ino && fst.st_dev == pst.st_dev)
			return fd;
		close(fd);
	}
}

static int folder_lock(struct dv_tier *t, const char *hash)
{
	return lock_hash(folder_downcast(t), hash, true);
}

static void folder_unlock(struct dv_tier *t, const char *hash, int lock_fd)
{
	struct folder_tier *ft = folder_downcast(t);
	char path[PATH_MAX];

	if (sub_path(ft, path, "/.locks/", hash, ".lock") == 0)
		unlink(path);
	close(lock_fd);
}

/* The hash a marker name "<hash>.XXXXXX" is for, or false. */
static bool marker_hash(const char *name, char *hash)
{
	size_t n = strspn(name, "0123456789abcdef");

	if (n < 32 || n > 64 || name[n] != '.')
		return false;
	memcpy(hash, name, n);
	hash[n] = '\0';
	return true;
}

/*
 * Settles @marker, of @hash, whose lock we hold: on the boot that wrote it
 * the page cache holds the file's bytes, so they are synced (the job the
 * syncer never ran); after a reboot they may be anything, so the file
 * goes. True when it went.
 */
static bool settle_marker(struct folder_tier *ft, const char *marker,
			  const char *hash)
{
	char path[PATH_MAX], boot[40] = "";
	bool removed;
	int fd = open(marker, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd >= 0) {
		ssize_t n = read(fd, boot, sizeof(boot) - 1);

		boot[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	if (object_path(ft, path, hash))
		return false;
	if (boot[0] && strcmp(boot, dv_boot_id()) == 0) {
		dv_syncer_run(path, marker);
		return false;
	}
	removed = unlink(path) == 0;
	fsync(ft->dirfd);
	unlink(marker);
	return removed;
}

/* Settles the markers nobody is working on (see syncer.h). At open. */
static void settle_unsynced(struct folder_tier *ft)
{
	char dir[PATH_MAX], marker[PATH_MAX], hash[65];
	unsigned removed = 0;
	struct dirent *de;
	DIR *d;

	if (sub_path(ft, dir, "/.unsynced", "", "") || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)) != NULL) {
		int lock_fd;

		if (!marker_hash(de->d_name, hash) ||
		    (size_t)snprintf(marker, sizeof(marker), "%s/%s", dir,
				     de->d_name) >= sizeof(marker))
			continue;
		lock_fd = lock_hash(ft, hash, false);
		if (lock_fd < 0)
			continue; /* an install of it is running: it syncs */
		if (settle_marker(ft, marker, hash))
			removed++;
		folder_unlock(&ft->base, hash, lock_fd);
	}
	closedir(d);
	if (removed)
		dv_warn("tier '%s': removed %u shards that may not have reached the disk before the machine restarted",
			ft->base.name, removed);
}

/*
 * Leaves the marker of an install of @hash not yet on disk (syncer.h) in
 * @marker. 0 or -errno.
 */
static int mark_unsynced(struct folder_tier *ft, const char *hash,
			 char *marker)
{
	const char *boot = dv_boot_id();
	int ret = sub_path(ft, marker, "/.unsynced/", hash, ".XXXXXX");
	int fd;

	if (ret)
		return ret;
	fd = dv_mkstemp(marker, O_CLOEXEC);
	if (fd < 0)
		return fd;
	/* 36 bytes: one write or none. */
	if (write(fd, boot, strlen(boot)) != (ssize_t)strlen(boot))
		ret = errno ? -errno : -EIO;
	if (!ret)
		ret = dv_perms_apply_fd(fd, &ft->perms);
	close(fd);
	if (ret)
		unlink(marker);
	return ret;
}

/* Locks the staging file (ours while we live; clean_unlocked()'s after)
 * and gives it the tier's permissions; else closes (@remove: unlinks) it. */
static int claim_staging(struct folder_tier *ft, struct dv_staged *st,
			 bool remove)
{
	int ret = flock(st->fd, LOCK_EX | LOCK_NB) ? -errno : 0;

	if (!ret)
		ret = dv_perms_apply_fd(st->fd, &ft->perms);
	if (ret) {
		if (remove)
			unlink(st->path);
		close(st->fd);
		st->fd = -1;
	}
	return ret;
}

static int folder_stage_open(struct dv_tier *t, const char *hash,
			     struct dv_staged *st)
{
	struct folder_tier *ft = folder_downcast(t);
	int ret = sub_path(ft, st->path, "/.staging/", hash, ".XXXXXX");

	if (ret)
		return ret;
	st->fd = dv_mkstemp(st->path, O_CLOEXEC);
	if (st->fd == -ENOENT && make_dirs(ft) == 0) {
		/* Deleted or replaced under us: made again, try once more. */
		dv_warn("tier '%s': %s/.staging was gone; made it again",
			t->name, ft->path);
		sub_path(ft, st->path, "/.staging/", hash, ".XXXXXX");
		st->fd = dv_mkstemp(st->path, O_CLOEXEC);
	}
	if (st->fd < 0) {
		ret = st->fd;
		st->fd = -1;
		dv_warn("tier '%s': cannot create a staging file in %s/.staging: %s",
			t->name, ft->path, strerror(-ret));
		return ret;
	}
	return claim_staging(ft, st, true);
}

static int folder_stage_resume(struct dv_tier *t, const char *hash,
			       struct dv_staged *st, bool *resumed)
{
	struct folder_tier *ft = folder_downcast(t);
	struct stat sb;
	int ret = sub_path(ft, st->path, "/.staging/", hash, ".partial");

	if (ret)
		return ret;
	*resumed = lstat(st->path, &sb) == 0 && S_ISREG(sb.st_mode);
	st->fd = open(st->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
	if (st->fd < 0) {
		ret = -errno;
		dv_warn("tier '%s': cannot open %s: %s", t->name, st->path,
			strerror(-ret));
		return ret;
	}
	return claim_staging(ft, st, false); /* a .partial stays to resume */
}

static void folder_stage_discard(struct dv_tier *t, struct dv_staged *st)
{
	if (st->fd < 0)
		return;
	unlink(st->path);
	close(st->fd);
	st->fd = -1;
}

struct entry {
	char hash[65];
	uint64_t size;
	struct timespec mtime;
};

struct scan {
	struct entry *v;
	size_t n, cap;
	uint64_t used;
};

/* Lists the installed objects of the tier. 0 or -errno. */
static int scan_tier(struct folder_tier *ft, struct scan *s)
{
	DIR *d = opendir(ft->path);
	struct dirent *de;
	int ret = 0;

	memset(s, 0, sizeof(*s));
	if (!d)
		return -errno;
	while ((de = readdir(d)) != NULL) {
		struct entry *v;
		struct stat st;
		char hash[65];

		if (!dv_folder_hash_of_name(de->d_name, hash))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		v = dv_grow(s->v, s->n, &s->cap, sizeof(*v), 64);
		if (!v) {
			ret = -ENOMEM;
			break;
		}
		s->v = v;
		memcpy(s->v[s->n].hash, hash, sizeof(hash));
		s->v[s->n].size = (uint64_t)st.st_size;
		s->v[s->n].mtime = st.st_mtim;
		s->used += (uint64_t)st.st_size;
		s->n++;
	}
	closedir(d);
	return ret;
}

static int by_mtime(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
	return strcmp(x->hash, y->hash);
}

static uint64_t fs_free_bytes(struct folder_tier *ft)
{
	struct statvfs sv;

	if (fstatvfs(ft->dirfd, &sv))
		return UINT64_MAX;
	return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/*
 * Would @need more bytes of objects fit under max_bytes, and @fs_need more
 * bytes on the filesystem? A rename of a staged file needs no new space.
 */
static bool has_room(struct folder_tier *ft, uint64_t used, uint64_t need,
		     uint64_t fs_need)
{
	uint64_t max = ft->base.max_bytes;

	if (max && used + ft->reserved + need > max)
		return false;
	return fs_free_bytes(ft) >= ft->reserved + fs_need;
}

/*
 * Could evicting every object of @s that may go (not @hash, not pinned:
 * B6) make has_room() true? If not, nothing is evicted: emptying the tier
 * for a shard that still would not fit loses the cache and gains nothing.
 */
static bool could_make_room(struct folder_tier *ft, const struct scan *s,
			    const char *hash, uint64_t need, uint64_t fs_need)
{
	uint64_t max = ft->base.max_bytes, freeable = 0, fs_free;

	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->v[i].hash, hash) != 0 &&
		    !dv_tier_is_pinned(&ft->base, s->v[i].hash))
			freeable += s->v[i].size;
	}
	if (max && s->used - freeable + ft->reserved + need > max)
		return false;
	fs_free = fs_free_bytes(ft);
	return fs_free + freeable < fs_free || /* unknown: UINT64_MAX */
	       fs_free + freeable >= ft->reserved + fs_need;
}

/* Unlinks the object @arg, its path, under the pin lock (tier.h). */
static int evict_unpinned(struct dv_tier *t, const char *hash, void *arg)
{
	return unlink(arg) ? -errno : 0;
}

/*
 * Evicts least recently used objects until @need more bytes fit (R8), and
 * only when evicting can make them fit. A pinned object (open here) is
 * never chosen: its space would stay held (B6). Called with room_lock
 * held; on success the room is reserved.
 */
static int make_room(struct folder_tier *ft, const char *hash, uint64_t need,
		     uint64_t fs_need)
{
	struct dv_tier *t = &ft->base;
	struct scan s;
	uint64_t used;
	int ret;

	if (!t->max_bytes && has_room(ft, 0, need, fs_need))
		goto reserve;
	ret = scan_tier(ft, &s);
	if (ret)
		return ret;
	used = s.used;
	if (!has_room(ft, used, need, fs_need) &&
	    !could_make_room(ft, &s, hash, need, fs_need)) {
		dv_info("tier '%s': evicting every shard not in use would not make room for %" PRIu64
			" bytes; keeping all %zu", t->name, need ? need : fs_need,
			s.n);
		free(s.v);
		return -ENOSPC;
	}
	if (s.n > 1) /* s.v is NULL in an empty tier: qsort(NULL) is UB */
		qsort(s.v, s.n, sizeof(*s.v), by_mtime);
	for (size_t i = 0; i < s.n && !has_room(ft, used, need, fs_need); i++) {
		char path[PATH_MAX];

		if (strcmp(s.v[i].hash, hash) == 0 ||
		    object_path(ft, path, s.v[i].hash) ||
		    dv_tier_unless_pinned(t, s.v[i].hash, evict_unpinned, path))
			continue;
		used -= s.v[i].size;
		dv_stat_add(&t->stats.evictions, 1);
		dv_info("tier '%s': evicted %s (%" PRIu64 " bytes)", t->name,
			s.v[i].hash, s.v[i].size);
	}
	free(s.v);
	if (!has_room(ft, used, need, fs_need))
		return -ENOSPC;
reserve:
	ft->reserved += need;
	return 0;
}

static void unreserve(struct folder_tier *ft, uint64_t n)
{
	pthread_mutex_lock(&ft->room_lock);
	ft->reserved -= n;
	pthread_mutex_unlock(&ft->room_lock);
}

static int copy_fd(int src, int dst, uint64_t size)
{
	loff_t in = 0, out = 0;
	char *buf;

	while ((uint64_t)in < size) {
		ssize_t n = copy_file_range(src, &in, dst, &out,
					    (size_t)(size - (uint64_t)in), 0);

		if (n > 0)
			continue;
		if (n == 0)
			return -EIO; /* the source shrank */
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != EINVAL && errno != ENOSYS &&
		    errno != EOPNOTSUPP)
			return -errno;
		break;
	}
	if ((uint64_t)in == size)
		return 0;
	buf = malloc(1 << 20);
	if (!buf)
		return -ENOMEM;
	while ((uint64_t)in < size) {
		ssize_t n = pread(src, buf, 1 << 20, in);

		if (n <= 0 || pwrite(dst, buf, (size_t)n, out) != n) {
			int ret = n == 0 ? -EIO : -errno;

			free(buf);
			return ret;
		}
		in += n;
		out += n;
	}
	free(buf);
	return 0;
}

/* Copies @src into a staging file of this tier; leaves it in @st. */
static int stage_copy(struct dv_tier *t, const char *hash, int src_fd,
		      uint64_t size, struct dv_staged *st)
{
	int ret = folder_stage_open(t, hash, st);

	if (ret)
		return ret;
	ret = copy_fd(src_fd, st->fd, size);
	if (ret)
		folder_stage_discard(t, st);
	return ret;
}

/*
 * Renames @from (open as @fd) to @final, the file to reach the disk in the
 * background behind a marker (syncer.h), or before the rename when no
 * marker can be left. 0 or -errno.
 */
static int rename_durably(struct folder_tier *ft, const char *hash,
			  const char *from, const char *final, int fd)
{
	char marker[PATH_MAX] = "";
	int ret = 0;

	if (mark_unsynced(ft, hash, marker))
		marker[0] = '\0';
	if (!marker[0] && fdatasync(fd) && errno != EINVAL)
		ret = -errno;
	if (!ret && rename(from, final))
		ret = -errno;
	if (!ret && marker[0]) {
		dv_syncer_queue(final, marker);
		return 0;
	}
	if (!ret)
		fsync(ft->dirfd);
	if (marker[0])
		unlink(marker);
	return ret;
}

static int folder_install(struct dv_tier *t, const char *hash, int src_fd,
			  const char *src_path, uint64_t size, unsigned flags)
{
	struct folder_tier *ft = folder_downcast(t);
	struct dv_staged st = { .fd = -1 };
	char final[PATH_MAX];
	const char *from = src_path;
	int ret;

	if (t->max_bytes && size > t->max_bytes)
		return -EFBIG;
	ret = object_path(ft, final, hash);
	if (ret)
		return ret;
	if (folder_lookup(t, hash, size) == 0)
		return 0; /* R7: installed by a racer; caller discards */

	pthread_mutex_lock(&ft->room_lock);
	ret = make_room(ft, hash, size, flags & DV_INSTALL_MOVE ? 0 : size);
	pthread_mutex_unlock(&ft->room_lock);
	if (ret)
		return ret;

	if (!(flags & DV_INSTALL_MOVE)) {
		ret = stage_copy(t, hash, src_fd, size, &st);
		if (ret)
			goto out;
		from = st.path;
	}
	ret = rename_durably(ft, hash, from, final,
			     flags & DV_INSTALL_MOVE ? src_fd : st.fd);
	if (ret)
		goto out;
	dv_stat_add(&t->stats.installs, 1);
	dv_stat_add(&t->stats.bytes_in, size);
out:
	if (st.fd >= 0) {
		if (ret)
			folder_stage_discard(t, &st);
		else
			close(st.fd);
	}
	unreserve(ft, size);
	return ret;
}

static int folder_free_space(struct dv_tier *t, uint64_t bytes)
{
	struct folder_tier *ft = folder_downcast(t);
	int ret;

	pthread_mutex_lock(&ft->room_lock);
	ret = make_room(ft, "", 0, bytes); /* reserves nothing: need is 0 */
	pthread_mutex_unlock(&ft->room_lock);
	return ret;
}

static int folder_remove(struct dv_tier *t, const char *hash)
{
	struct folder_tier *ft = folder_downcast(t);
	char path[PATH_MAX];
	int ret = object_path(ft, path, hash);

	if (ret)
		return ret;
	return unlink(path) ? -errno : 0;
}

static int folder_usage(struct dv_tier *t, struct dv_tier_usage *u)
{
	struct folder_tier *ft = folder_downcast(t);
	struct scan s;
	int ret = scan_tier(ft, &s);

	if (ret)
		return ret;
	free(s.v);
	u->used_bytes = s.used;
	u->objects = s.n;
	u->capacity = t->max_bytes;
	u->fs_free = ft->dirfd >= 0 ? fs_free_bytes(ft) : 0;
	return 0;
}

const struct dv_tier_ops dv_tier_folder_ops = {
	.type = "folder",
	.caps = DV_TIER_DIRECT_READ | DV_TIER_EVICTS,
	.open = folder_open,
	.destroy = folder_destroy,
	.lookup = folder_lookup,
	.open_object = folder_open_object,
	.close_object = folder_close_object,
	.install = folder_install,
	.lock = folder_lock,
	.unlock = folder_unlock,
	.stage_open = folder_stage_open,
	.stage_discard = folder_stage_discard,
	.stage_resume = folder_stage_resume,
	.free_space = folder_free_space,
	.remove = folder_remove,
	.usage = folder_usage,
	.scan = dv_folder_scan,
	.describe = dv_folder_describe,
	.check = dv_folder_check,
	.sweep = dv_folder_sweep,
};

static int folder_new(const char *path, const char *name,
		      enum dv_tier_type type, uint64_t max_bytes,
		      const struct dv_perms *perms, struct dv_tier **out)
{
	struct folder_tier *ft = calloc(1, sizeof(*ft));
	int ret;

	if (!ft)
		return -ENOMEM;
	ret = dv_tier_init(&ft->base, &dv_tier_folder_ops, name, type,
			   max_bytes);
	if (ret) {
		free(ft);
		return ret;
	}
	ft->dirfd = -1;
	if (perms)
		ft->perms = *perms;
	pthread_mutex_init(&ft->room_lock, NULL);
	ft->path = strdup(path);
	if (!ft->path) {
		folder_destroy(&ft->base);
		return -ENOMEM;
	}
	/* A trailing slash would double in every path we build. */
	for (size_t n = strlen(ft->path); n > 1 && ft->path[n - 1] == '/'; n--)
		ft->path[n - 1] = '\0';
	*out = &ft->base;
	return 0;
}

int dv_folder_tier_create(const char *path, const char *name,
			  uint64_t max_bytes, struct dv_tier **out)
{
	return folder_new(path, name, DV_TIER_TYPE_FOLDER, max_bytes, NULL, out);
}

int dv_folder_tier_new(const struct dv_tier_config *tc,
		       const struct dv_config *cfg, struct dv_tier **out,
		       char *err, size_t errlen)
{
	const struct dv_perms perms = { .mode = tc->mode, .gid = tc->gid,
					.has_group = tc->has_group };
	const char *path = tc->path;
	int ret;

	if (!path && tc->type == DV_TIER_TYPE_RAM)
		path = DV_DEFAULT_RAM_PATH;
	if (!path || path[0] != '/') {
		snprintf(err, errlen, "tier '%s': path '%s' is not absolute",
			 tc->name, path ? path : "");
		return -EINVAL;
	}
	ret = folder_new(path, tc->name, tc->type, tc->max_bytes, &perms, out);
	if (ret)
		snprintf(err, errlen, "tier '%s': %s", tc->name, strerror(-ret));
	return ret;
}
