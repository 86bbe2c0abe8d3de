/*
 * Device discovery and safety: which block devices or
 * files a stripe tier may write to, and why the others are refused.
 *
 * Never accepted, whatever the config says:
 *   - the device holding the root filesystem, its parents (the disk of a
 *     partition, the slaves of a device-mapper or RAID device), the other
 *     partitions of those disks, and whatever is stacked on them;
 *   - a mounted device, active swap, a disk one of whose partitions is
 *     mounted, a disk that has partitions at all;
 *   - a device with holders (LVM, RAID, dm-crypt use it), a read-only one,
 *     one the kernel will not let us open exclusively (O_EXCL: claimed);
 *   - a file that backs a loop device.
 * Accepted: a device carrying our own superblock; a blank one (no known
 * signature); one carrying a foreign signature (ext2/3/4, XFS, btrfs, ZFS,
 * LVM, swap, LUKS, MD RAID, NTFS, FAT, ISO 9660, GPT, MBR) only when the
 * config lists it by name and sets `format: true`.
 *
 * `devices: auto` considers the nvme* and sd* block devices only (seed
 * 002), and no removable one, so a loop device, a virtual disk, a RAM disk
 * or a USB stick is used only when listed by name. Discovery only reads:
 * it never writes to any device.
 */
#ifndef DV_STRIPE_DISCOVERY_H
#define DV_STRIPE_DISCOVERY_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

struct dv_stripe_device {
	char path[PATH_MAX];  /* as configured, or /dev/<name> under auto */
	char name[64];        /* kernel name (nvme1n1), or the file's name */
	bool is_file;         /* a regular file, not a block device */
	uint64_t bytes;       /* 0 if unknown */
	bool accepted;
	bool ours;            /* carries a datavo stripe superblock */
	bool overwrite;       /* accepted over a foreign signature (format) */
	char what[160];       /* "blank", "datavo pool <id> device 2 of 4", "ext4" */
	char reason[256];     /* why it is refused; "" when accepted */
};

/*
 * Lists what the stripe tier @tc would use: its configured devices in
 * order, or under `devices: auto` every block device of /sys/class/block
 * (only nvme* and sd* can be accepted). Reads only. Returns 0 with a new
 * array in *@out (free() it) of *@n entries, or -errno.
 *
 * For `datavoctl inspect`: print path, bytes, accepted/refused, what and
 * reason of each entry.
 */
int dv_stripe_discover(const struct dv_tier_config *tc,
		       struct dv_stripe_device **out, size_t *n);

/*
 * The foreign signature @buf (the first @len bytes of a device, at least
 * 256 KiB for every probe to run) carries, or NULL: "ext4", "xfs", …
 */
const char *dv_stripe_signature(const uint8_t *buf, size_t len);

/* Bytes of the device head dv_stripe_signature wants. */
#define DV_STRIPE_PROBE_BYTES (256u << 10)

#endif
