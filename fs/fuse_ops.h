/* The FUSE operations table of datavofs (fuse_ops.c). */
#ifndef DV_FUSE_OPS_H
#define DV_FUSE_OPS_H

#include <fuse_lowlevel.h>

/* Userdata of the session: struct dv_fs (datavofs.h). */
extern const struct fuse_lowlevel_ops dv_fuse_ops;

#endif
