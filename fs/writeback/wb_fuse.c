/*
 * FUSE operations inside MOUNTPOINT/<area>/: a local filesystem backed by
 * the area's landing folder. Every path operation runs on the landing
 * folder with *at() calls from its directory descriptor; the queue
 * (wb_queue.c) is told of every close by the last writer, fsync, unlink
 * and rename. Writes go to the landing file: passed through to the kernel
 * where the read path has passthrough, else pwrite from the daemon. close()
 * and fsync() cost a journal entry (and fsync for fsync): local speed.
 *
 * Not supported inside an area: hard links, symlinks, device nodes,
 * RENAME_EXCHANGE, user xattrs (EPERM / EINVAL / ENOTSUP).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "wb_fuse.h"
#include "wb_impl.h"
#include "fs/datavofs.h"
#include "fs/open_inodes.h"

#define XATTR_SYNC "user.datavo.sync"
#define TIMEOUT 1.0 /* seconds the kernel may cache an area's names */

static const struct fuse_lowlevel_ops *ro;

struct wb_handle {
	struct wb_area *a;
	int fd;
	bool writer;
	int backing_id;
};

static struct dv_wb *wb_of(fuse_req_t req)
{
	return ((struct dv_fs *)fuse_req_userdata(req))->wb;
}

static bool is_wb(fuse_req_t req, fuse_ino_t ino)
{
	return wb_of(req) && dv_wb_is_ino(ino);
}

static int resolve(fuse_req_t req, fuse_ino_t ino, struct wb_area **a,
		   char *rel)
{
	return dv_wb_node_path(wb_of(req), ino, a, rel, PATH_MAX);
}

/* The path of @name in directory @parent; the journal is not a name. */
static int child(fuse_req_t req, fuse_ino_t parent, const char *name,
		 struct wb_area **a, char *rel)
{
	char dir[PATH_MAX];
	int ret = resolve(req, parent, a, dir);

	if (ret)
		return ret;
	if (!*dir && strcmp(name, WB_JOURNAL_DIR) == 0)
		return -EPERM;
	if (strchr(name, '\n'))
		return -EINVAL;
	return dv_wb_join(rel, PATH_MAX, dir, name);
}

static const char *at(const char *rel)
{
	return *rel ? rel : ".";
}

static int stat_rel(struct wb_area *a, const char *rel, struct stat *st)
{
	if (fstatat(a->dirfd, at(rel), st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	st->st_ino = dv_wb_make_ino(a, st->st_ino);
	return 0;
}

/* Replies the entry at @rel, counting the kernel's reference first. */
static void reply_entry(fuse_req_t req, struct wb_area *a, const char *rel)
{
	struct fuse_entry_param ep;
	int ret;

	memset(&ep, 0, sizeof(ep));
	if (fstatat(a->dirfd, at(rel), &ep.attr, AT_SYMLINK_NOFOLLOW) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	ret = dv_wb_node_add(a->wb, a, rel, &ep.attr, 1);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	ep.ino = ep.attr.st_ino;
	ep.generation = 1;
	ep.attr_timeout = ep.entry_timeout = TIMEOUT;
	if (fuse_reply_entry(req, &ep))
		dv_wb_node_forget(a->wb, ep.ino, 1);
}

static void own(fuse_req_t req, struct wb_area *a, const char *rel)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);

	if (fchownat(a->dirfd, rel, ctx->uid, ctx->gid, AT_SYMLINK_NOFOLLOW))
		(void)0; /* a landing folder without chown keeps root's */
}

static void wb_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	char rel[PATH_MAX];
	struct wb_area *a = NULL;
	int ret;

	if (parent == FUSE_ROOT_ID) {
		a = dv_wb_area_named(wb_of(req), name);
		if (a)
			reply_entry(req, a, "");
		else
			ro->lookup(req, parent, name);
		return;
	}
	if (!is_wb(req, parent)) {
		ro->lookup(req, parent, name);
		return;
	}
	ret = child(req, parent, name, &a, rel);
	if (ret)
		fuse_reply_err(req, ret == -EPERM ? ENOENT : -ret);
	else
		reply_entry(req, a, rel);
}

static void wb_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	if (!is_wb(req, ino)) {
		ro->forget(req, ino, n);
		return;
	}
	dv_wb_node_forget(wb_of(req), ino, n);
	fuse_reply_none(req);
}

static void wb_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *f)
{
	size_t i, kept = 0;

	for (i = 0; i < count; i++) {
		if (is_wb(req, f[i].ino))
			dv_wb_node_forget(wb_of(req), f[i].ino, f[i].nlookup);
		else
			f[kept++] = f[i];
	}
	if (kept)
		ro->forget_multi(req, kept, f);
	else
		fuse_reply_none(req);
}

static void wb_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	char rel[PATH_MAX];
	struct wb_area *a;
	struct stat st;
	int ret;

	if (!is_wb(req, ino)) {
		ro->getattr(req, ino, fi);
		return;
	}
	ret = resolve(req, ino, &a, rel);
	if (ret == 0)
		ret = stat_rel(a, rel, &st);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static int do_truncate(struct wb_area *a, const char *rel, off_t size,
		       struct fuse_file_info *fi)
{
	int fd, ret = 0;

	if (fi) {
		struct wb_handle *h = (struct wb_handle *)(uintptr_t)fi->fh;

		return ftruncate(h->fd, size) < 0 ? -errno : 0;
	}
	fd = openat(a->dirfd, rel, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, size) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

static struct timespec stamp(int to_set, int now_bit, int bit,
			     struct timespec t)
{
	if (to_set & now_bit)
		return (struct timespec){ .tv_nsec = UTIME_NOW };
	if (to_set & bit)
		return t;
	return (struct timespec){ .tv_nsec = UTIME_OMIT };
}

static int apply_attr(struct wb_area *a, const char *rel, struct stat *attr,
		      int to_set, struct fuse_file_info *fi)
{
	struct timespec ts[2];

	if ((to_set & FUSE_SET_ATTR_SIZE) &&
	    do_truncate(a, rel, attr->st_size, fi))
		return -errno ? -errno : -EIO;
	if ((to_set & FUSE_SET_ATTR_MODE) &&
	    fchmodat(a->dirfd, at(rel), attr->st_mode & 07777, 0) < 0)
		return -errno;
	if ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
	    fchownat(a->dirfd, at(rel),
		     to_set & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1,
		     to_set & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1,
		     AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
		      FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)) {
		ts[0] = stamp(to_set, FUSE_SET_ATTR_ATIME_NOW,
			      FUSE_SET_ATTR_ATIME, attr->st_atim);
		ts[1] = stamp(to_set, FUSE_SET_ATTR_MTIME_NOW,
			      FUSE_SET_ATTR_MTIME, attr->st_mtim);
		if (utimensat(a->dirfd, at(rel), ts, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	return 0;
}

static void wb_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	char rel[PATH_MAX];
	struct wb_area *a;
	struct stat st;
	int ret;

	if (!is_wb(req, ino)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	ret = resolve(req, ino, &a, rel);
	if (ret == 0)
		ret = apply_attr(a, rel, attr, to_set, fi);
	if (ret == 0)
		ret = stat_rel(a, rel, &st);
	/* A change made without a writer open is a close of its own. */
	if (ret == 0 && S_ISREG(st.st_mode) && *rel &&
	    (to_set & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MTIME |
		       FUSE_SET_ATTR_MTIME_NOW)) &&
	    dv_wb_queue_writers(a, rel) == 0)
		ret = dv_wb_queue_closed(a, rel, &st);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static void wb_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	char rel[PATH_MAX];
	struct wb_area *a;
	int ret;

	if (!is_wb(req, parent)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	ret = child(req, parent, name, &a, rel);
	if (ret == 0 && mkdirat(a->dirfd, rel, mode & 07777) < 0)
		ret = -errno;
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	own(req, a, rel);
	reply_entry(req, a, rel);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
			 int flags)
{
	char rel[PATH_MAX];
	struct wb_area *a;
	int ret;

	if (!is_wb(req, parent)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	ret = child(req, parent, name, &a, rel);
	if (ret == 0 && unlinkat(a->dirfd, rel, flags) < 0)
		ret = -errno;
	if (ret == 0 && !flags)
		ret = dv_wb_queue_unlinked(a, rel);
	fuse_reply_err(req, -ret);
}

static void wb_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, 0);
}

static void wb_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, AT_REMOVEDIR);
}

static void wb_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	char from[PATH_MAX], to[PATH_MAX];
	struct wb_area *a, *b;
	int ret;

	if (!is_wb(req, parent) || !is_wb(req, newparent)) {
		fuse_reply_err(req, is_wb(req, parent) || is_wb(req, newparent) ?
					    EXDEV : EROFS);
		return;
	}
	if (flags & RENAME_EXCHANGE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	ret = child(req, parent, name, &a, from);
	if (ret == 0)
		ret = child(req, newparent, newname, &b, to);
	if (ret == 0 && a != b)
		ret = -EXDEV;
	if (ret == 0 && renameat2(a->dirfd, from, a->dirfd, to, flags) < 0)
		ret = -errno;
	if (ret == 0) {
		dv_wb_node_rename(a->wb, a, from, to);
		ret = dv_wb_queue_renamed(a, from, to);
	}
	fuse_reply_err(req, -ret);
}

static void wb_not_here(fuse_req_t req, fuse_ino_t ino)
{
	fuse_reply_err(req, is_wb(req, ino) ? EPERM : EROFS);
}

static void wb_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	wb_not_here(req, parent);
}

static void wb_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	wb_not_here(req, parent);
}

static void wb_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	wb_not_here(req, newparent);
}

static void wb_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	fuse_reply_err(req, is_wb(req, ino) ? ENOTSUP : EROFS);
}

static void wb_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, is_wb(req, ino) ? ENOTSUP : EROFS);
}

/* ---- files ---- */

static bool writes(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

static void try_passthrough(fuse_req_t req, uint64_t ino,
			    struct wb_handle *h, struct fuse_file_info *fi)
{
	struct dv_fs *fs = fuse_req_userdata(req);
	int id;

	if (!__atomic_load_n(&fs->passthrough, __ATOMIC_ACQUIRE))
		return;
	id = dv_inode_backing(req, ino, h->fd);
	if (id <= 0)
		return; /* through the daemon */
	h->backing_id = id;
#ifdef FUSE_CAP_PASSTHROUGH
	fi->backing_id = id;
#endif
}

/* Opens @rel for a new handle; *@h on success. */
static int open_handle(fuse_req_t req, struct wb_area *a, const char *rel,
		       int flags, mode_t mode, bool fresh,
		       struct wb_handle **h)
{
	struct wb_handle *nh = calloc(1, sizeof(*nh));
	int ret;

	if (!nh)
		return -ENOMEM;
	nh->a = a;
	nh->fd = openat(a->dirfd, rel, flags | O_CLOEXEC | O_NOFOLLOW, mode);
	if (nh->fd < 0) {
		ret = -errno;
		free(nh);
		return ret;
	}
	nh->writer = writes(flags);
	if (nh->writer) {
		ret = dv_wb_queue_writer(a, rel, fresh);
		if (ret) {
			close(nh->fd);
			free(nh);
			return ret;
		}
	}
	*h = nh;
	return 0;
}

static void close_handle(fuse_req_t req, uint64_t ino, struct wb_handle *h,
			 const char *rel)
{
	dv_inode_close(req, ino, h->backing_id > 0);
	if (h->writer && rel)
		dv_wb_queue_writer_done(h->a, rel);
	close(h->fd);
	free(h);
}

static void wb_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param ep;
	char rel[PATH_MAX];
	struct wb_handle *h;
	struct wb_area *a;
	bool fresh;
	int ret;

	if (!is_wb(req, parent)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	ret = child(req, parent, name, &a, rel);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fresh = faccessat(a->dirfd, rel, F_OK, AT_SYMLINK_NOFOLLOW) < 0;
	ret = open_handle(req, a, rel, fi->flags | O_CREAT, mode & 07777,
			  fresh, &h);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	if (fresh)
		own(req, a, rel);
	memset(&ep, 0, sizeof(ep));
	if (fstat(h->fd, &ep.attr) < 0 ||
	    dv_wb_node_add(a->wb, a, rel, &ep.attr, 1) ||
	    dv_inode_open(ep.attr.st_ino)) {
		close_handle(req, 0, h, rel);
		fuse_reply_err(req, EIO);
		return;
	}
	ep.ino = ep.attr.st_ino;
	ep.generation = 1;
	ep.attr_timeout = ep.entry_timeout = TIMEOUT;
	fi->fh = (uint64_t)(uintptr_t)h;
	try_passthrough(req, ep.ino, h, fi);
	if (fuse_reply_create(req, &ep, fi)) {
		dv_wb_node_forget(a->wb, ep.ino, 1);
		close_handle(req, ep.ino, h, rel);
	}
}

static void wb_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char rel[PATH_MAX];
	struct wb_handle *h;
	struct wb_area *a;
	int ret;

	if (!is_wb(req, ino)) {
		ro->open(req, ino, fi);
		return;
	}
	ret = resolve(req, ino, &a, rel);
	if (ret == 0)
		ret = open_handle(req, a, rel, fi->flags & ~(O_CREAT | O_EXCL),
				  0, false, &h);
	if (ret == 0 && dv_inode_open(ino)) {
		close_handle(req, 0, h, rel);
		ret = -ENOMEM;
	}
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	try_passthrough(req, ino, h, fi);
	if (fuse_reply_open(req, fi))
		close_handle(req, ino, h, rel);
}

static void wb_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct wb_handle *h = (struct wb_handle *)(uintptr_t)fi->fh;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

	if (!is_wb(req, ino)) {
		ro->read(req, ino, size, off, fi);
		return;
	}
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = h->fd;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static void wb_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct wb_handle *h = (struct wb_handle *)(uintptr_t)fi->fh;
	ssize_t n = pwrite(h->fd, buf, size, off);

	/* A full landing folder: make room from synced files, once. */
	if (n < 0 && errno == ENOSPC && dv_wb_queue_evict(h->a, size) > 0)
		n = pwrite(h->fd, buf, size, off);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t)n);
}

/* The last writer of @h's file closed it: queue its upload. */
static int closed(fuse_req_t req, fuse_ino_t ino, struct wb_handle *h)
{
	char rel[PATH_MAX];
	struct wb_area *a;
	struct stat st;
	int ret = resolve(req, ino, &a, rel);

	if (ret)
		return ret == -ENOENT ? 0 : ret;
	if (fstat(h->fd, &st) < 0)
		return -errno;
	if (st.st_nlink == 0 || dv_wb_queue_writers(a, rel) > 1)
		return 0; /* unlinked, or another writer will close it */
	return dv_wb_queue_closed(a, rel, &st);
}

static void wb_flush(fuse_req_t req, fuse_ino_t ino,
		     struct fuse_file_info *fi)
{
	struct wb_handle *h = (struct wb_handle *)(uintptr_t)fi->fh;

	if (!is_wb(req, ino)) {
		fuse_reply_err(req, 0); /* ENOSYS would end flushes for all */
		return;
	}
	fuse_reply_err(req, h->writer ? -closed(req, ino, h) : 0);
}

static void wb_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	struct wb_handle *h = (struct wb_handle *)(uintptr_t)fi->fh;
	int ret = 0;

	if (!is_wb(req, ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	if ((datasync ? fdatasync(h->fd) : fsync(h->fd)) < 0)
		ret = -errno;
	if (ret == 0 && h->writer)
		ret = closed(req, ino, h);
	fuse_reply_err(req, -ret);
}

static void wb_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct wb_handle *h = (struct wb_handle *)(uintptr_t)fi->fh;
	char rel[PATH_MAX];
	struct wb_area *a;
	bool known;

	if (!is_wb(req, ino)) {
		ro->release(req, ino, fi);
		return;
	}
	known = resolve(req, ino, &a, rel) == 0;
	if (h->writer && known)
		closed(req, ino, h);
	close_handle(req, ino, h, known ? rel : NULL);
	fuse_reply_err(req, 0);
}

void dv_wb_fuse_ops(const struct fuse_lowlevel_ops *base,
		    struct fuse_lowlevel_ops *out)
{
	ro = base;
	*out = *base;
	out->lookup = wb_lookup;
	out->forget = wb_forget;
	out->forget_multi = wb_forget_multi;
	out->getattr = wb_getattr;
	out->setattr = wb_setattr;
	out->mknod = wb_mknod;
	out->mkdir = wb_mkdir;
	out->unlink = wb_unlink;
	out->rmdir = wb_rmdir;
	out->symlink = wb_symlink;
	out->rename = wb_rename;
	out->link = wb_link;
	out->create = wb_create;
	out->open = wb_open;
	out->read = wb_read;
	out->write = wb_write;
	out->flush = wb_flush;
	out->fsync = wb_fsync;
	out->release = wb_release;
	out->setxattr = wb_setxattr;
	out->removexattr = wb_removexattr;
	dv_wb_fuse_dir_ops(base, out);
}
