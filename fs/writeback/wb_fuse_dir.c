/*
 * Listings, statfs and xattrs inside write-back areas (the rest of the
 * FUSE side is wb_fuse.c). A listing reads the landing directory anew at
 * each call, resuming from the landing filesystem's own d_off; with plus
 * every entry but "." and ".." is a reference counted before the reply.
 * user.datavo.sync says what the upload of a file (or of everything under
 * a directory) has come to (wb_queue.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "wb_fuse.h"
#include "wb_impl.h"
#include "fs/datavofs.h"

#define XATTR_SYNC "user.datavo.sync"
#define TIMEOUT 1.0

static const struct fuse_lowlevel_ops *ro;

static struct dv_wb *wb_of(fuse_req_t req)
{
	return ((struct dv_fs *)fuse_req_userdata(req))->wb;
}

static bool is_wb(fuse_req_t req, fuse_ino_t ino)
{
	return wb_of(req) && dv_wb_is_ino(ino);
}

struct listing {
	fuse_req_t req;
	struct wb_area *a;
	const char *dir;
	bool plus;
	char *buf;
	size_t size, used;
};

/* Adds one entry; 1 when the buffer is full (the entry is left out). */
static int add(struct listing *l, struct dirent *de, int dfd)
{
	struct fuse_entry_param ep;
	char rel[PATH_MAX];
	bool dots = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
	size_t n;

	memset(&ep, 0, sizeof(ep));
	ep.attr.st_ino = dv_wb_make_ino(l->a, de->d_ino);
	ep.attr.st_mode = (mode_t)DTTOIF(de->d_type);
	if (!l->plus) {
		n = fuse_add_direntry(l->req, l->buf + l->used,
				      l->size - l->used, de->d_name, &ep.attr,
				      de->d_off);
		if (n > l->size - l->used)
			return 1;
		l->used += n;
		return 0;
	}
	if (!dots) {
		if (dv_wb_join(rel, sizeof(rel), l->dir, de->d_name) ||
		    fstatat(dfd, de->d_name, &ep.attr, AT_SYMLINK_NOFOLLOW) < 0)
			return 0; /* gone meanwhile */
		if (dv_wb_node_add(l->a->wb, l->a, rel, &ep.attr, 1))
			return 1;
		ep.ino = ep.attr.st_ino;
		ep.generation = 1;
		ep.attr_timeout = ep.entry_timeout = TIMEOUT;
	}
	n = fuse_add_direntry_plus(l->req, l->buf + l->used, l->size - l->used,
				   de->d_name, &ep, de->d_off);
	if (n > l->size - l->used) {
		if (!dots)
			dv_wb_node_forget(l->a->wb, ep.ino, 1);
		return 1;
	}
	l->used += n;
	return 0;
}

static int list(struct listing *l, off_t off)
{
	struct dirent *de;
	int fd = openat(l->a->dirfd, *l->dir ? l->dir : ".",
			O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	int ret = dv_wb_opendir(fd, &d);

	if (ret)
		return ret;
	if (off)
		seekdir(d, off);
	while ((de = readdir(d))) {
		if (!*l->dir && strcmp(de->d_name, WB_JOURNAL_DIR) == 0)
			continue;
		if (add(l, de, dirfd(d)))
			break;
	}
	closedir(d);
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi, bool plus)
{
	char dir[PATH_MAX];
	struct listing l = { .req = req, .dir = dir, .plus = plus,
			     .size = size };
	int ret;

	if (!is_wb(req, ino)) {
		if (plus)
			ro->readdirplus(req, ino, size, off, fi);
		else
			ro->readdir(req, ino, size, off, fi);
		return;
	}
	ret = dv_wb_node_path(wb_of(req), ino, &l.a, dir, sizeof(dir));
	l.buf = ret ? NULL : malloc(size);
	if (!ret && !l.buf)
		ret = -ENOMEM;
	if (!ret)
		ret = list(&l, off);
	if (ret)
		fuse_reply_err(req, -ret);
	else
		fuse_reply_buf(req, l.buf, l.used);
	free(l.buf);
}

static void wb_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void wb_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void wb_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct wb_area *a;
	char rel[PATH_MAX];
	struct statvfs sv;

	if (!is_wb(req, ino) ||
	    dv_wb_node_path(wb_of(req), ino, &a, rel, sizeof(rel))) {
		ro->statfs(req, ino);
		return;
	}
	if (fstatvfs(a->dirfd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void reply_value(fuse_req_t req, const char *val, size_t size)
{
	size_t len = strlen(val);

	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void wb_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	char rel[PATH_MAX], state[512];
	struct wb_area *a;
	struct stat st;

	if (!is_wb(req, ino)) {
		ro->getxattr(req, ino, name, size);
		return;
	}
	if (strcmp(name, XATTR_SYNC) != 0 ||
	    dv_wb_node_path(wb_of(req), ino, &a, rel, sizeof(rel)) ||
	    fstatat(a->dirfd, *rel ? rel : ".", &st, AT_SYMLINK_NOFOLLOW) < 0) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	dv_wb_queue_state(a, rel, S_ISDIR(st.st_mode), state, sizeof(state));
	reply_value(req, state, size);
}

static void wb_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char names[] = XATTR_SYNC;

	if (!is_wb(req, ino)) {
		ro->listxattr(req, ino, size);
		return;
	}
	if (size == 0)
		fuse_reply_xattr(req, sizeof(names));
	else if (size < sizeof(names))
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, sizeof(names));
}

void dv_wb_fuse_dir_ops(const struct fuse_lowlevel_ops *base,
			struct fuse_lowlevel_ops *out)
{
	ro = base;
	out->readdir = wb_readdir;
	out->readdirplus = wb_readdirplus;
	out->statfs = wb_statfs;
	out->getxattr = wb_getxattr;
	out->listxattr = wb_listxattr;
}
