/*
 * Folder tiers (type folder and ram): a directory of <hash>.tar files.
 *
 *   <path>/<hash>.tar            installed shards, 0666 less the umask,
 *                                or the tier's mode and group (perms.h)
 *   <path>/.staging/<hash>.XXXXXX in-flight files, flocked by their writer
 *   <path>/.locks/<hash>.lock    per-hash locks (flock), removed on unlock
 *
 * Install is a rename inside the tier (a copy into .staging/ first when the
 * source lives elsewhere), so a <hash>.tar is whole or absent. Eviction is
 * LRU by mtime; opens refresh mtime (R8). Files open in this process are
 * never evicted, since unlinking them would free nothing (B6).
 */
#ifndef DV_FOLDER_H
#define DV_FOLDER_H

#include "tiers/core/tier.h"

extern const struct dv_tier_ops dv_tier_folder_ops;

/* Creates a folder or ram tier from its config entry. */
int dv_folder_tier_new(const struct dv_tier_config *tc,
		       const struct dv_config *cfg, struct dv_tier **out,
		       char *err, size_t errlen);

/* Creates a folder tier directly (tests, tools). @path is copied. */
int dv_folder_tier_create(const char *path, const char *name,
			  uint64_t max_bytes, struct dv_tier **out);

/* The directory of a folder tier (borrowed). */
const char *dv_folder_tier_path(struct dv_tier *t);

#endif
