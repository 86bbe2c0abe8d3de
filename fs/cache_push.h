/*
 * Pushing a filling shard into the kernel's page cache (keep_cache path).
 *
 * Without it the first read of a cold shard waits for the whole fill, then
 * pulls every page through the daemon. With it the bytes enter the inode's
 * page cache as they arrive (FUSE_NOTIFY_STORE, from the fill's sink tap),
 * so the first read is a page-cache read; and those pages have then been
 * used twice, so the kernel has already promoted them to its active list
 * rather than doing it, page by page, during the second epoch.
 *
 * The bytes pushed are not verified yet. No one can read them: the push
 * starts only when the inode has no open handle, and every new open waits
 * for the fill (B1). A fill that fails has the inode's pages dropped by
 * dv_push_end() before the open is answered.
 */
#ifndef DV_CACHE_PUSH_H
#define DV_CACHE_PUSH_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "tiers/core/sink.h"

struct dv_push {
	struct dv_sink_tap tap;  /* hand &tap to the fill (dv_shard_ref) */
	struct fuse_session *se;
	uint64_t ino;
	bool pushed;             /* the kernel took at least one page */
	bool stopped;            /* the kernel refused one: push no more */
};

/* Prepares @p to push @ino's bytes through session @se. */
void dv_push_begin(struct dv_push *p, struct fuse_session *se, uint64_t ino);

/*
 * Ends the push. @fill_result: the open's result, 0 or -errno; on an error
 * every page of the inode is dropped from the kernel's cache. 0, or -errno
 * when they could not be: the kernel's cache of the inode is then not to
 * be trusted (open it without keep_cache).
 */
int dv_push_end(struct dv_push *p, int fill_result);

#endif
