/*
 * The FUSE low-level operations of datavofs: a read-only tree of datasets
 * and tar shards (namespace.c) whose opens go through the cache hierarchy.
 *
 * Read path: when the kernel grants passthrough (libfuse >= 3.17 and
 * CAP_SYS_ADMIN), an open hands the kernel the tier file and reads never
 * enter the daemon. dv_init decides once and says why (status, log); the
 * kernel checks CAP_SYS_ADMIN only when a backing file is opened, so the
 * first refusal (EPERM) switches the mount to keep_cache for good. Otherwise reads are spliced from the tier file with
 * keep_cache set: a shard's bytes never change under one inode (a new
 * revision is a new inode), so the page cache serves every later epoch,
 * and a cold open's fill pushes the bytes into it as they stream
 * (cache_push.h), so even the first epoch reads from memory.
 *
 * Lookup counts: every entry the kernel is given (a lookup's, each
 * readdirplus entry but "." and "..") is one reference the namespace
 * counts before the reply goes out, and gives back if the reply fails;
 * forget and forget_multi give them back, as do releases for opens
 * (fuse_lowlevel.h's contract). That is how the namespace knows a pinned
 * revision no inode of which the kernel holds any more, and may evict it.
 *
 * Errors from the layers below are -errno; they are converted here once.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config/log.h"
#include "datavofs.h"
#include "fuse_ops.h"
#include "cache_push.h"
#include "open_inodes.h"
#include "status.h"
#include "tiers/core/fill.h"
#include "transport.h"
#include "writeback/writeback.h"

/* Listing offsets of the write-back areas at the root: past any dataset's. */
#define WB_DIR_OFF (1ULL << 62)

#define XATTR_HASH "user.datavo.content_hash"
#define XATTR_TIER "user.datavo.tier"
#define XATTR_INDEX "user.datavo.index"

/* What an open file handle holds. */
struct handle {
	struct dv_object obj;  /* shards */
	int backing_id;        /* > 0 when passed through */
	char *text;            /* control files: the generated content */
	size_t text_len;
};

static struct dv_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_attr(const struct dv_ns_entry *e, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = e->ino;
	st->st_uid = 0;
	st->st_gid = 0;
	st->st_mtime = st->st_ctime = st->st_atime = e->mtime;
	if (e->kind == DV_NS_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)e->size;
		st->st_blocks = (blkcnt_t)((e->size + 511) / 512);
	}
	st->st_blksize = 1 << 20;
}

/* The hidden control directory and its files (see status.c). */
static bool ctl_entry(struct dv_fs *fs, uint64_t ino, struct dv_ns_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->mtime = (time_t)fs->started;
	if (ino == DV_CTL_DIR_INO) {
		e->kind = DV_NS_DIR;
		snprintf(e->name, sizeof(e->name), "%s", DV_CTL_DIR_NAME);
		return true;
	}
	if (ino == DV_CTL_STATUS_INO) {
		e->kind = DV_NS_SHARD;
		snprintf(e->name, sizeof(e->name), "status");
		return true;
	}
	return false;
}

static int get_entry(struct dv_fs *fs, uint64_t ino, struct dv_ns_entry *e)
{
	if (ctl_entry(fs, ino, e))
		return 0;
	return dv_ns_getattr(fs->ns, ino, e);
}

/* 0, or -errno when the reply did not reach the kernel. */
static int reply_entry(fuse_req_t req, const struct dv_ns_entry *e)
{
	struct dv_fs *fs = fs_of(req);
	struct fuse_entry_param ep;

	memset(&ep, 0, sizeof(ep));
	ep.ino = e->ino;
	ep.generation = 1;
	fill_attr(e, &ep.attr);
	ep.entry_timeout = fs->entry_timeout;
	/* A shard inode's bytes never change: its attributes may be cached. */
	ep.attr_timeout = e->kind == DV_NS_SHARD ? 3600 : fs->entry_timeout;
	if (e->ino < 16)
		ep.attr_timeout = ep.entry_timeout = 0;
	return fuse_reply_entry(req, &ep);
}

static void dv_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct dv_fs *fs = fs_of(req);
	struct dv_ns_entry e;
	int ret;

	if (parent == FUSE_ROOT_ID && strcmp(name, DV_CTL_DIR_NAME) == 0) {
		ctl_entry(fs, DV_CTL_DIR_INO, &e);
		reply_entry(req, &e);
		return;
	}
	if (parent == DV_CTL_DIR_INO) {
		if (strcmp(name, "status") == 0) {
			ctl_entry(fs, DV_CTL_STATUS_INO, &e);
			reply_entry(req, &e);
		} else {
			fuse_reply_err(req, ENOENT);
		}
		return;
	}
	dv_ns_maybe_refresh(fs->ns);
	ret = dv_ns_lookup_ref(fs->ns, parent, name, &e);
	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	/* Counted before the reply: its forget may come at once. */
	if (reply_entry(req, &e))
		dv_ns_forget(fs->ns, e.ino, 1);
}

static void dv_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	dv_ns_forget(fs_of(req)->ns, ino, nlookup);
	fuse_reply_none(req);
}

static void dv_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	struct dv_fs *fs = fs_of(req);

	for (size_t i = 0; i < count; i++)
		dv_ns_forget(fs->ns, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void dv_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct dv_fs *fs = fs_of(req);
	struct dv_ns_entry e;
	struct stat st;
	int ret = get_entry(fs, ino, &e);

	if (ret) {
		fuse_reply_err(req, -ret);
		return;
	}
	fill_attr(&e, &st);
	fuse_reply_attr(req, &st, e.kind == DV_NS_SHARD ? 3600 : fs->entry_timeout);
}

struct dir_fill {
	fuse_req_t req;
	char *buf;
	size_t size, used;
	bool plus;
	struct dv_fs *fs;
	uint64_t *inos;        /* plus: the namespace entries in buf */
	size_t ninos, inos_cap;
	bool full;             /* an entry did not fit */
};

static int add_dirent(struct dir_fill *df, const struct dv_ns_entry *e,
		      off_t next)
{
	struct stat st;
	size_t n;

	fill_attr(e, &st);
	if (dv_wb_is_ino(e->ino))
		dv_wb_root_stat(df->fs->wb, e->index, &st);
	if (df->plus) {
		struct fuse_entry_param ep;

		memset(&ep, 0, sizeof(ep));
		ep.ino = e->ino;
		ep.generation = 1;
		ep.attr = st;
		ep.entry_timeout = df->fs->entry_timeout;
		ep.attr_timeout = e->kind == DV_NS_SHARD ? 3600 : df->fs->entry_timeout;
		n = fuse_add_direntry_plus(df->req, df->buf + df->used,
					   df->size - df->used, e->name, &ep,
					   next);
	} else {
		n = fuse_add_direntry(df->req, df->buf + df->used,
				      df->size - df->used, e->name, &st, next);
	}
	if (n > df->size - df->used) {
		df->full = true;
		return 1;
	}
	df->used += n;
	return 0;
}

/* The write-back areas, after the datasets at the root (writeback.h). */
static void wb_dirents(struct dir_fill *df, off_t off)
{
	size_t i = (uint64_t)off > WB_DIR_OFF ? (uint64_t)off - WB_DIR_OFF : 0;
	struct dv_ns_entry e;

	memset(&e, 0, sizeof(e));
	e.kind = DV_NS_DIR;
	for (; i < dv_wb_count(df->fs->wb); i++) {
		e.ino = dv_wb_root_ino(df->fs->wb, i);
		e.index = i;
		snprintf(e.name, sizeof(e.name), "%s", dv_wb_name(df->fs->wb, i));
		if (add_dirent(df, &e, (off_t)(WB_DIR_OFF + i + 1)))
			return;
	}
}

/*
 * Offsets: 1 after ".", 2 after "..", then 3 + namespace position. With
 * plus, each entry in the buffer is a lookup to count: room to note its
 * inode is made first, or the entry is left for the next call.
 */
static int ns_fill(void *arg, const struct dv_ns_entry *e, uint64_t next_pos)
{
	struct dir_fill *df = arg;
	uint64_t *p;
	size_t cap;

	if (df->plus && df->ninos == df->inos_cap) {
		cap = df->inos_cap ? df->inos_cap * 2 : 64;
		p = reallocarray(df->inos, cap, sizeof(*p));
		if (!p)
			return 1;
		df->inos = p;
		df->inos_cap = cap;
	}
	if (add_dirent(df, e, (off_t)(next_pos + 3)))
		return 1;
	if (df->plus)
		df->inos[df->ninos++] = e->ino;
	return 0;
}

/*
 * Sends a listing; with plus its entries are counted first (the directory
 * listed is the kernel's, so they cannot be evicted in between), and given
 * back when the reply did not reach the kernel.
 */
static void reply_listing(struct dir_fill *df)
{
	struct dv_namespace *ns = df->fs->ns;

	for (size_t i = 0; i < df->ninos; i++)
		dv_ns_ref(ns, df->inos[i], 1);
	if (fuse_reply_buf(df->req, df->buf, df->used) == 0)
		return;
	for (size_t i = 0; i < df->ninos; i++)
		dv_ns_forget(ns, df->inos[i], 1);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       bool plus)
{
	struct dv_fs *fs = fs_of(req);
	struct dir_fill df = { req, NULL, size, 0, plus, fs, NULL, 0, 0, false };
	struct dv_ns_entry e;
	int ret = 0;

	if (get_entry(fs, ino, &e) || e.kind != DV_NS_DIR) {
		fuse_reply_err(req, ino == DV_CTL_STATUS_INO ? ENOTDIR : ENOENT);
		return;
	}
	df.buf = malloc(size);
	if (!df.buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off < 1) {
		snprintf(e.name, sizeof(e.name), ".");
		if (add_dirent(&df, &e, 1))
			goto done;
	}
	if (off < 2) {
		struct dv_ns_entry up = e;

		snprintf(up.name, sizeof(up.name), "..");
		if (add_dirent(&df, &up, 2))
			goto done;
	}
	if (ino == DV_CTL_DIR_INO) {
		if (off < 3 && ctl_entry(fs, DV_CTL_STATUS_INO, &e))
			add_dirent(&df, &e, 3);
		goto done;
	}
	dv_ns_maybe_refresh(fs->ns);
	if ((uint64_t)off < WB_DIR_OFF)
		ret = dv_ns_readdir(fs->ns, ino, off > 3 ? (uint64_t)off - 3 : 0,
				    ns_fill, &df);
	if (ino == FUSE_ROOT_ID && ret == 0 && !df.full)
		wb_dirents(&df, off);
done:
	if (ret && df.used == 0)
		fuse_reply_err(req, -ret);
	else
		reply_listing(&df);
	free(df.inos);
	free(df.buf);
}

static void dv_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false);
}

static void dv_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true);
}

static void open_status(fuse_req_t req, struct fuse_file_info *fi)
{
	struct handle *hd = calloc(1, sizeof(*hd));

	if (!hd) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	hd->obj.fd = -1;
	hd->text = dv_status_json(fs_of(req), &hd->text_len);
	if (!hd->text) {
		free(hd);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)hd;
	fi->direct_io = 1; /* its size is only known once generated */
	fuse_reply_open(req, fi);
}

/* The kernel checks CAP_SYS_ADMIN in the initial namespace, at each backing open. */
static const char why_refused[] =
	"the kernel refused a backing file: no CAP_SYS_ADMIN in the initial user namespace";

/* After an EPERM every other open would be refused too: keep_cache from now on. */
static void passthrough_refused(struct dv_fs *fs)
{
	__atomic_store_n(&fs->read_path_why, why_refused, __ATOMIC_RELEASE);
	if (__atomic_exchange_n(&fs->passthrough, false, __ATOMIC_ACQ_REL))
		dv_warn("read path: keep_cache (%s)", why_refused);
}

static void try_passthrough(fuse_req_t req, struct dv_fs *fs, uint64_t ino,
			    struct handle *hd, struct fuse_file_info *fi)
{
	int id;

	/* A shard still filling is read through the daemon, chunk by chunk. */
	if (!__atomic_load_n(&fs->passthrough, __ATOMIC_ACQUIRE) ||
	    hd->obj.fd < 0 || hd->obj.fill)
		return;
	id = dv_inode_backing(req, ino, hd->obj.fd);
	if (id == -EPERM) {
		passthrough_refused(fs);
		return;
	}
	if (id == -EBUSY)
		return; /* the inode is open through the daemon already */
	if (id < 0) {
		dv_warn("passthrough refused for %s (%s); reading through the daemon",
			hd->obj.path, strerror(-id));
		return;
	}
	hd->backing_id = id;
#ifdef FUSE_CAP_PASSTHROUGH
	fi->backing_id = id;
#endif
	/* With keep_cache the kernel failed passthrough reads (EIO). */
	fi->keep_cache = 0;
}

/* Whether a failed push may have left unverified pages in the kernel. */
static bool cache_suspect(struct dv_fs *fs)
{
	return __atomic_load_n(&fs->cache_suspect, __ATOMIC_RELAXED);
}

/* Ends an open whose answer did not reach the kernel. */
static void open_undo(fuse_req_t req, struct dv_fs *fs, uint64_t ino,
		      struct handle *hd)
{
	dv_ns_forget(fs->ns, ino, 1);
	dv_inode_close(req, ino, hd->backing_id > 0);
	dv_stat_add(&hd->obj.tier->stats.bytes_served, -hd->obj.size);
	dv_object_release(&hd->obj);
	dv_stat_add(&fs->open_files, (uint64_t)-1);
	free(hd);
}

static void dv_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dv_fs *fs = fs_of(req);
	struct dv_shard_ref ref;
	struct dv_ns_entry e;
	struct dv_push push;
	struct handle *hd;
	char label[800];
	int ret;

	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (ino == DV_CTL_STATUS_INO) {
		open_status(req, fi);
		return;
	}
	ret = get_entry(fs, ino, &e);
	if (ret || e.kind != DV_NS_SHARD) {
		fuse_reply_err(req, ret ? -ret : EISDIR);
		return;
	}
	hd = calloc(1, sizeof(*hd));
	if (!hd) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	snprintf(label, sizeof(label), "%s/%s", e.dataset, e.name);
	memset(&ref, 0, sizeof(ref));
	ref.hash = e.hash;
	ref.size = e.size;
	ref.sha256 = fs->cfg->verify == DV_VERIFY_OFF ? NULL : e.sha256;
	ref.chunks_pin = e.has_chunks ? e.chunks_pin : NULL;
	ref.label = label;
	/* A fill pushes its bytes into a page cache nobody is reading. */
	dv_push_begin(&push, fs->se, ino);
	if (!__atomic_load_n(&fs->passthrough, __ATOMIC_ACQUIRE) && fs->se &&
	    !cache_suspect(fs) &&
	    dv_inode_opens(ino) == 0)
		ref.tap = &push.tap;
	ret = dv_hierarchy_get_or_fetch(fs->hier, &ref, &fs->fetcher, &hd->obj);
	if (dv_push_end(&push, ret))
		__atomic_store_n(&fs->cache_suspect, true, __ATOMIC_RELAXED);
	if (!ret && dv_inode_open(ino)) {
		dv_object_release(&hd->obj);
		ret = -ENOMEM;
	}
	if (ret) {
		free(hd);
		dv_stat_add(&fs->read_errors, 1);
		/* The reader sees a clear errno; the log says why. */
		fuse_reply_err(req, ret == -EINVAL || ret == -EBADMSG ? EIO : -ret);
		return;
	}
	dv_stat_add(&fs->open_files, 1);
	/* An open handle holds its pinned revision too (the kernel's inode does). */
	dv_ns_ref(fs->ns, ino, 1);
	/*
	 * Bytes served are counted per open, the shard's size: with
	 * passthrough and keep_cache most reads never reach the daemon, so
	 * counting reads would count almost nothing (status.h).
	 */
	dv_stat_add(&hd->obj.tier->stats.bytes_served, hd->obj.size);
	fi->fh = (uint64_t)(uintptr_t)hd;
	/* Not when a failed push may have left unverified pages behind. */
	fi->keep_cache = !cache_suspect(fs);
	try_passthrough(req, fs, ino, hd, fi);
	if (fuse_reply_open(req, fi) == -ENOENT)
		open_undo(req, fs, ino, hd); /* the opener was interrupted */
}

static void read_text(fuse_req_t req, struct handle *hd, size_t size,
		      off_t off)
{
	char *copy;

	if ((size_t)off >= hd->text_len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > hd->text_len - (size_t)off)
		size = hd->text_len - (size_t)off;
	/*
	 * From a copy: the reply wakes the reader, whose close may free the
	 * text on another thread while this one is still returning from the
	 * write (AddressSanitizer checks the iovec after writev() returns).
	 */
	copy = malloc(size);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, hd->text + off, size);
	fuse_reply_buf(req, copy, size);
	free(copy);
}

/*
 * A reply buffer per FUSE thread for objects read through their tier (the
 * stripe tier's). A malloc per read hands 1 MiB back to the kernel at each
 * free and faults it in, zeroed, at the next: a third of the daemon's time.
 */
static pthread_key_t reply_buf_key;
static pthread_once_t reply_buf_once = PTHREAD_ONCE_INIT;

struct reply_buf {
	size_t cap;
	char data[];
};

static void reply_buf_key_init(void)
{
	pthread_key_create(&reply_buf_key, free);
}

/* This thread's buffer of at least @size bytes, or NULL. */
static char *reply_buf(size_t size)
{
	struct reply_buf *b;

	pthread_once(&reply_buf_once, reply_buf_key_init);
	b = pthread_getspecific(reply_buf_key);
	if (b && b->cap >= size)
		return b->data;
	free(b);
	pthread_setspecific(reply_buf_key, NULL);
	b = malloc(sizeof(*b) + size);
	if (!b)
		return NULL;
	b->cap = size;
	pthread_setspecific(reply_buf_key, b);
	return b->data;
}

static void dv_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct handle *hd = (struct handle *)(uintptr_t)fi->fh;
	struct dv_object *obj = &hd->obj;
	char *buf;
	ssize_t n;

	if (hd->text) {
		read_text(req, hd, size, off);
		return;
	}
	if ((uint64_t)off >= obj->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > obj->size - (uint64_t)off)
		size = (size_t)(obj->size - (uint64_t)off);
	if (obj->fill) {
		int ret = dv_fill_wait(obj->fill, (uint64_t)off, size);

		if (ret) {
			fuse_reply_err(req, ret == -ECANCELED ? EIO : -ret);
			return;
		}
	}
	dv_stat_add(&fs_of(req)->read_bytes, size);
#ifdef DV_FUSE_URING
	if (fuse_req_is_uring(req))
		dv_stat_add(&fs_of(req)->read_bytes_uring, size);
#endif
	if (obj->fd >= 0) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = obj->fd;
		bv.buf[0].pos = off;
		fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
		return;
	}
	buf = reply_buf(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = dv_object_pread(obj, buf, size, (uint64_t)off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void dv_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct handle *hd = (struct handle *)(uintptr_t)fi->fh;

	if (hd->text) {
		free(hd->text);
	} else {
		dv_inode_close(req, ino, hd->backing_id > 0);
		dv_object_release(&hd->obj);
		dv_stat_add(&fs_of(req)->open_files, (uint64_t)-1);
		dv_ns_forget(fs_of(req)->ns, ino, 1);
	}
	free(hd);
	fuse_reply_err(req, 0);
}

static void dv_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct dv_fs *fs = fs_of(req);
	struct dv_ns_stats ns;
	struct statvfs sv;

	dv_ns_stats(fs->ns, &ns);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_files = ns.shards + ns.datasets;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* The first tier holding the shard now, without fetching anything. */
static const char *tier_holding(struct dv_fs *fs, const struct dv_ns_entry *e)
{
	ssize_t i = dv_hierarchy_holder(fs->hier, e->hash, e->size);

	return i < 0 ? "" : dv_hierarchy_tier(fs->hier, (size_t)i)->name;
}

static void reply_xattr_value(fuse_req_t req, const char *val, size_t size)
{
	size_t len = strlen(val);

	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void dv_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct dv_fs *fs = fs_of(req);
	struct dv_ns_entry e;
	char num[24];

	if (get_entry(fs, ino, &e) || e.kind != DV_NS_SHARD || ino < 16) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (strcmp(name, XATTR_HASH) == 0) {
		reply_xattr_value(req, e.hash, size);
	} else if (strcmp(name, XATTR_INDEX) == 0) {
		snprintf(num, sizeof(num), "%" PRIu64, e.index);
		reply_xattr_value(req, num, size);
	} else if (strcmp(name, XATTR_TIER) == 0) {
		reply_xattr_value(req, tier_holding(fs, &e), size);
	} else {
		fuse_reply_err(req, ENODATA);
	}
}

static void dv_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char names[] = XATTR_HASH "\0" XATTR_TIER "\0" XATTR_INDEX;
	struct dv_ns_entry e;

	if (get_entry(fs_of(req), ino, &e) || e.kind != DV_NS_SHARD || ino < 16) {
		if (size == 0)
			fuse_reply_xattr(req, 0);
		else
			fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size == 0)
		fuse_reply_xattr(req, sizeof(names));
	else if (size < sizeof(names))
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, sizeof(names));
}

/* Asks for @flag when the kernel offers it; says whether it was. */
static bool want_flag(struct fuse_conn_info *conn, uint64_t flag)
{
#if FUSE_USE_VERSION >= 317
	return fuse_set_feature_flag(conn, flag);
#else
	if (!(conn->capable & flag))
		return false;
	conn->want |= (uint32_t)flag;
	return true;
#endif
}

#ifdef FUSE_CAP_PASSTHROUGH
/*
 * Whether this process holds CAP_SYS_ADMIN, which the kernel wants for a
 * backing file. When capget fails, says yes and lets the kernel decide.
 */
static bool have_cap_sys_admin(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	if (syscall(SYS_capget, &hdr, data))
		return true;
	return data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &
	       CAP_TO_MASK(CAP_SYS_ADMIN);
}
#endif

#define STR_(x) #x
#define STR(x) STR_(x)

/* NULL when passthrough is granted, else why not (for people: status, log). */
static const char *negotiate_read_path(struct dv_fs *fs,
				       struct fuse_conn_info *conn)
{
#ifdef FUSE_CAP_PASSTHROUGH
	if (!fs->want_passthrough)
		return "-o no_passthrough";
	if (!have_cap_sys_admin())
		return "no CAP_SYS_ADMIN";
	if (!want_flag(conn, FUSE_CAP_PASSTHROUGH))
		return "the kernel offers no passthrough (Linux >= 6.9 with CONFIG_FUSE_PASSTHROUGH has it)";
	return NULL;
#else
	return "libfuse " STR(FUSE_MAJOR_VERSION) "." STR(FUSE_MINOR_VERSION)
	       " has no passthrough";
#endif
}

/* NULL when FUSE over io_uring is granted, else why requests use /dev/fuse. */
static const char *negotiate_transport(struct dv_fs *fs,
				       struct fuse_conn_info *conn)
{
#ifdef FUSE_CAP_OVER_IO_URING
	/* libfuse wants it wherever the kernel offers it; the config decides. */
	if (!fs->uring_asked) {
		fuse_unset_feature_flag(conn, FUSE_CAP_OVER_IO_URING);
		return fs->transport_why;
	}
	if (!want_flag(conn, FUSE_CAP_OVER_IO_URING))
		return "the kernel offered no io_uring at INIT";
	return NULL;
#else
	return fs->transport_why;
#endif
}

/* The transport, chosen here once and said in status and log. */
static void init_transport(struct dv_fs *fs, struct fuse_conn_info *conn)
{
	const char *why;

	/*
	 * libfuse sizes its buffers and the kernel's max_pages from max_write;
	 * the kernel caps it at max_pages_limit, which the daemon only reads.
	 */
	fs->request_bytes = (uint32_t)dv_transport_request_bytes();
	conn->max_write = fs->request_bytes;
	why = negotiate_transport(fs, conn);
	__atomic_store_n(&fs->transport_why, why, __ATOMIC_RELEASE);
	__atomic_store_n(&fs->uring, !why, __ATOMIC_RELEASE);
	if (!why) {
		dv_info("transport: io_uring (requests up to %u KiB)",
			fs->request_bytes >> 10);
	} else if (fs->uring_mode == DV_FUSE_URING_ON) {
		dv_err("transport: fuse_io_uring is on, but %s; unmounting", why);
		fuse_session_exit(fs->se);
	} else {
		dv_info("transport: /dev/fuse (%s; requests up to %u KiB)", why,
			fs->request_bytes >> 10);
	}
}

static void dv_init(void *userdata, struct fuse_conn_info *conn)
{
	struct dv_fs *fs = userdata;
	const char *why;

	conn->max_readahead = UINT_MAX; /* the kernel caps it */
	init_transport(fs, conn);
	if (want_flag(conn, FUSE_CAP_SPLICE_WRITE))
		want_flag(conn, FUSE_CAP_SPLICE_MOVE);
	want_flag(conn, FUSE_CAP_ASYNC_READ);
	why = negotiate_read_path(fs, conn);
	__atomic_store_n(&fs->read_path_why, why, __ATOMIC_RELEASE);
	__atomic_store_n(&fs->passthrough, !why, __ATOMIC_RELEASE);
	/* A read path slower than asked for is worth a warning; a choice is not. */
	if (!why)
		dv_info("read path: passthrough (libfuse %s)", fuse_pkgversion());
	else if (!fs->want_passthrough)
		dv_info("read path: keep_cache (%s)", why);
	else
		dv_warn("read path: keep_cache (%s)", why);
}

const struct fuse_lowlevel_ops dv_fuse_ops = {
	.init = dv_init,
	.lookup = dv_lookup,
	.forget = dv_forget,
	.forget_multi = dv_forget_multi,
	.getattr = dv_getattr,
	.readdir = dv_readdir,
	.readdirplus = dv_readdirplus,
	.open = dv_open,
	.read = dv_read,
	.release = dv_release,
	.statfs = dv_statfs,
	.getxattr = dv_getxattr,
	.listxattr = dv_listxattr,
};
