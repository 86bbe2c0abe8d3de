/*
 * The FUSE operations of write-back areas (wb_fuse.c): they wrap the
 * read-only table of fuse_ops.c. Calls on write-back inodes (and the
 * lookup of an area's name at the root) are served from the landing
 * folders; every other call goes to the read-only table, and every call
 * that would change the tree outside the areas gets EROFS.
 */
#ifndef DV_WB_FUSE_H
#define DV_WB_FUSE_H

#include <fuse_lowlevel.h>

/* @out = @ro wrapped; @ro must outlive the session (it is static). */
void dv_wb_fuse_ops(const struct fuse_lowlevel_ops *ro,
		    struct fuse_lowlevel_ops *out);

/* Inside fs/writeback/: the directory, statfs and xattr calls (wb_fuse_dir.c). */
void dv_wb_fuse_dir_ops(const struct fuse_lowlevel_ops *ro,
			struct fuse_lowlevel_ops *out);

#endif
