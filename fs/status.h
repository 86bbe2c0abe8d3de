/* MOUNTPOINT/.datavo/status: a JSON snapshot of the mount's counters. */
#ifndef DV_STATUS_H
#define DV_STATUS_H

#include <stddef.h>

#include "datavofs.h"

/*
 * Returns a malloc'd, NUL-terminated JSON document describing @fs now:
 * origin, read path, tiers (use, capacity, hits, misses, bytes), origin
 * requests and bytes, bytes and dollars saved, open files, errors. No
 * secret is ever part of it. NULL when out of memory.
 */
char *dv_status_json(struct dv_fs *fs, size_t *len);

#endif
