/*
 * Tar members without their payload: the ustar header walker used by the
 * publisher to find the sample ids of a shard (publish.h "Identities").
 * Reads headers only; never extracts, never writes.
 */
#ifndef DV_TAR_H
#define DV_TAR_H

#include <stddef.h>
#include <stdint.h>

/* The longest member path reported, from any header kind (bytes). */
#define DV_TAR_NAME_MAX 4096

/*
 * Called once per regular member, in archive order. @name is the member's
 * full path (ustar prefix, GNU long name or pax path applied), at most
 * DV_TAR_NAME_MAX bytes, valid only during the call.
 */
typedef void (*dv_tar_member_fn)(void *arg, const char *name);

/*
 * Calls @fn with the path of each regular member of the tar @fd of @fsize
 * bytes, in order. Stops at the end-of-archive block or at @fsize. 0, or
 * -EINVAL (not a tar, truncated, bad extended header), -ENOMEM or the read
 * error, with one line starting with @label in @err (when @err is not NULL
 * and @errlen not 0). @fd is borrowed and read with pread() only.
 */
int dv_tar_members(int fd, uint64_t fsize, const char *label,
		   dv_tar_member_fn fn, void *arg, char *err, size_t errlen);

#endif
