/*
 * Kernel passthrough backing files, one per inode. The kernel lets an inode
 * have a single backing file at a time: a second open of the same inode
 * must name the same backing id, or its reads fail. So opens of one inode
 * share one id, counted, and the last release closes it.
 */
#ifndef DV_PASSTHROUGH_H
#define DV_PASSTHROUGH_H

#include <fuse_lowlevel.h>
#include <stdint.h>

/*
 * The backing id for @ino, registering @fd (borrowed; the kernel keeps its
 * own reference) on first use. > 0, or -errno when refused.
 */
int dv_backing_get(fuse_req_t req, uint64_t ino, int fd);

/* Drops one use of @ino's backing id; the last closes it. */
void dv_backing_put(fuse_req_t req, uint64_t ino);

#endif
