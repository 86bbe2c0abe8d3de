/*
 * Inside the folder tier: what folder.c (the read and install path) and
 * folder_disk.c (what the tier shows of its directory: scan, describe,
 * check, sweep) share. Not for other files.
 */
#ifndef DV_FOLDER_IMPL_H
#define DV_FOLDER_IMPL_H

#include <stdbool.h>

#include "folder.h"

/* The hash of an installed object's file name "<hash>.tar", or false. */
bool dv_folder_hash_of_name(const char *name, char *hash);

/* The folder tier's scan, describe, check and sweep ops (tier.h). */
int dv_folder_scan(struct dv_tier *t, dv_tier_scan_fn fn, void *arg);
void dv_folder_describe(struct dv_tier *t, struct dv_tier_desc *d);
int dv_folder_check(struct dv_tier *t, const char *hash, uint64_t size,
		    const uint8_t sha256[32]);
int dv_folder_sweep(struct dv_tier *t, bool fix, dv_tier_leftover_fn fn,
		    void *arg);

#endif
