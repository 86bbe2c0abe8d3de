/*
 * Pushing a filling shard into the kernel's page cache (see cache_push.h).
 */
#include "cache_push.h"

#include <errno.h>
#include <string.h>

#include "config/log.h"

/* The sink tap: runs on the fill's worker thread, in stream order. */
static void push_bytes(void *arg, const void *buf, size_t len, uint64_t off)
{
	struct dv_push *p = arg;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	int ret;

	if (p->stopped)
		return;
	bv.buf[0].mem = (void *)buf;
	ret = fuse_lowlevel_notify_store(p->se, p->ino, (off_t)off, &bv, 0);
	if (ret) {
		/* Only a cache: reads go through the daemon instead. */
		dv_debug("inode %llu: the kernel refused pushed pages (%s)",
			 (unsigned long long)p->ino, strerror(-ret));
		p->stopped = true;
		return;
	}
	p->pushed = true;
}

void dv_push_begin(struct dv_push *p, struct fuse_session *se, uint64_t ino)
{
	memset(p, 0, sizeof(*p));
	p->tap.fn = push_bytes;
	p->tap.arg = p;
	p->se = se;
	p->ino = ino;
}

int dv_push_end(struct dv_push *p, int fill_result)
{
	int ret;

	if (fill_result == 0 || !p->pushed)
		return 0;
	ret = fuse_lowlevel_notify_inval_inode(p->se, p->ino, 0, 0);
	if (ret == 0 || ret == -ENOENT) /* ENOENT: the kernel forgot it all */
		return 0;
	dv_err("inode %llu: could not drop unverified pages from the kernel's cache: %s",
	       (unsigned long long)p->ino, strerror(-ret));
	return ret;
}
