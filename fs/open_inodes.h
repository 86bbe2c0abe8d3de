/*
 * Open handles by inode: how many there are, and on the passthrough path
 * the backing id they share. The kernel lets an inode have a single
 * backing file at a time: a second open of the same inode must name the
 * same backing id, or its reads fail. So the handles of one inode share
 * one id, counted, and the last of them to go closes it.
 */
#ifndef DV_OPEN_INODES_H
#define DV_OPEN_INODES_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

/* How many handles of @ino are open now. */
unsigned dv_inode_opens(uint64_t ino);

/* Counts one more open handle of @ino. 0 or -ENOMEM. */
int dv_inode_open(uint64_t ino);

/*
 * The backing id for @ino, registering @fd (borrowed; the kernel keeps its
 * own reference) on first use. The handle asking must have been counted by
 * dv_inode_open(). > 0, or -errno when refused: -EBUSY when another
 * handle of @ino is open without it (the kernel allows no mix).
 */
int dv_inode_backing(fuse_req_t req, uint64_t ino, int fd);

/*
 * Ends one open handle of @ino. @backed: it used the backing id (the last
 * such handle closes it).
 */
void dv_inode_close(fuse_req_t req, uint64_t ino, bool backed);

#endif
