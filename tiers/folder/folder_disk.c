/*
 * What a folder tier shows of its directory (folder.h has the layout):
 * the list of its objects, a description with use and free space, the
 * check of one object against its SHA-256, and the sweep of what dead
 * processes left in .staging/ and .locks/ (B4). All work on a tier that
 * was not opened, beside a daemon using the same directory: they create
 * nothing, and remove only what a sweep with fix finds.
 *
 * Not here: reads, installs, eviction (folder.c).
 */
#include "folder_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "config/util.h"
#include "tiers/core/digest.h"
#include "tiers/core/sink.h"

/* A staging file younger than this may be between its create and flock. */
#define STALE_AGE_S 10

bool dv_folder_hash_of_name(const char *name, char *hash)
{
	size_t len = strlen(name);

	if (len < 5 || len - 4 > 64 || strcmp(name + len - 4, ".tar") != 0)
		return false;
	memcpy(hash, name, len - 4);
	hash[len - 4] = '\0';
	return dv_valid_hash(hash);
}

int dv_folder_scan(struct dv_tier *t, dv_tier_scan_fn fn, void *arg)
{
	DIR *d = opendir(dv_folder_tier_path(t));
	struct dirent *de;
	int ret = 0;

	if (!d)
		return -errno;
	while (ret == 0 && (de = readdir(d)) != NULL) {
		struct dv_tier_entry e;
		struct stat st;

		if (!dv_folder_hash_of_name(de->d_name, e.hash) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue; /* not an object, or evicted meanwhile */
		e.size = (uint64_t)st.st_size;
		e.mtime = (int64_t)st.st_mtime;
		ret = fn(arg, &e);
	}
	closedir(d);
	return ret;
}

int dv_folder_check(struct dv_tier *t, const char *hash, uint64_t size,
		    const uint8_t sha256[32])
{
	char path[PATH_MAX];
	uint8_t digest[32];
	struct stat st;
	int fd, ret;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s.tar",
			     dv_folder_tier_path(t), hash) >= sizeof(path))
		return -ENAMETOOLONG;
	/* No futimens: a check is not a use, the LRU order stays (R8). */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		ret = -errno;
	else if (!S_ISREG(st.st_mode))
		ret = -ENOENT;
	else if ((uint64_t)st.st_size != size)
		ret = -EBADMSG;
	else
		ret = dv_sha256_fd(fd, digest);
	close(fd);
	if (ret == 0 && memcmp(digest, sha256, 32) != 0)
		ret = -EBADMSG;
	return ret;
}

/* The entries of .staging/ or .locks/ that no live process holds. */
static int sweep_dir(struct dv_tier *t, const char *sub, const char *what,
		     bool fix, dv_tier_leftover_fn fn, void *arg)
{
	char path[PATH_MAX], name[PATH_MAX];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", dv_folder_tier_path(t), sub);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		int fd, removed = 1;

		if (de->d_name[0] == '.')
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) || time(NULL) - st.st_mtime < STALE_AGE_S ||
		    flock(fd, LOCK_EX | LOCK_NB)) {
			close(fd); /* in use: a fill or a lock of a live process */
			continue;
		}
		if (fix)
			removed = unlinkat(dirfd(d), de->d_name, 0) ? -errno : 0;
		close(fd);
		snprintf(name, sizeof(name), "%s/%s", sub, de->d_name);
		fn(arg, name, what, removed);
	}
	closedir(d);
	return 0;
}

int dv_folder_sweep(struct dv_tier *t, bool fix, dv_tier_leftover_fn fn,
		    void *arg)
{
	int ret = sweep_dir(t, ".staging", "staging file of no live process",
			    fix, fn, arg);

	if (ret == 0)
		ret = sweep_dir(t, ".locks", "lock of no live process", fix, fn,
				arg);
	return ret;
}

/* Free and total bytes of @path's filesystem, or of its nearest parent. */
static bool fs_space(const char *path, uint64_t *avail, uint64_t *size)
{
	char buf[PATH_MAX];
	struct statvfs sv;

	snprintf(buf, sizeof(buf), "%s", path);
	for (;;) {
		char *slash;

		if (statvfs(buf, &sv) == 0) {
			*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
			*size = (uint64_t)sv.f_blocks * sv.f_frsize;
			return true;
		}
		slash = strrchr(buf, '/');
		if (!slash || slash == buf)
			return false;
		*slash = '\0';
	}
}

static int count_object(void *arg, const struct dv_tier_entry *e)
{
	struct dv_tier_usage *u = arg;

	u->used_bytes += e->size;
	u->objects++;
	return 0;
}

static void describe_warnings(struct dv_tier *t, struct dv_tier_desc *d,
			      uint64_t fs_size)
{
	const char *dir = d->where;
	char a[32], b[32];
	struct statfs sf;

	if (t->max_bytes && fs_size &&
	    t->max_bytes > d->usage.fs_free + d->usage.used_bytes)
		dv_tier_desc_line(d, DV_DESC_WARNING,
				  "tier '%s': max_bytes %s but its filesystem has %s free: it fills the disk first",
				  t->name, dv_format_bytes(t->max_bytes, a, sizeof(a)),
				  dv_format_bytes(d->usage.fs_free, b, sizeof(b)));
	if (d->exists && access(dir, W_OK) != 0)
		dv_tier_desc_line(d, DV_DESC_WARNING,
				  "tier '%s': %s is not writable by this user",
				  t->name, dir);
	if (t->type == DV_TIER_TYPE_RAM && d->exists && statfs(dir, &sf) == 0 &&
	    sf.f_type != TMPFS_MAGIC && sf.f_type != RAMFS_MAGIC)
		dv_tier_desc_line(d, DV_DESC_WARNING,
				  "tier '%s': type ram but %s is not on tmpfs",
				  t->name, dir);
}

void dv_folder_describe(struct dv_tier *t, struct dv_tier_desc *d)
{
	uint64_t fs_size = 0;
	struct stat st;

	snprintf(d->where, sizeof(d->where), "%s", dv_folder_tier_path(t));
	d->capacity = t->max_bytes;
	d->exists = stat(d->where, &st) == 0 && S_ISDIR(st.st_mode);
	d->has_usage = true;
	d->usage.capacity = t->max_bytes;
	if (d->exists)
		dv_folder_scan(t, count_object, &d->usage);
	if (!fs_space(d->where, &d->usage.fs_free, &fs_size))
		d->usage.fs_free = 0;
	describe_warnings(t, d, fs_size);
}
