/*
 * Write-back areas (writeback: in shards.yaml): MOUNTPOINT/<name>/ is a
 * writable directory whose bytes live in a local landing folder, and whose
 * closed files are uploaded to a destination (file:// or s3://) in the
 * background, so that a job saving a checkpoint resumes at local speed.
 *
 * What a caller may rely on:
 *   - a file is queued for upload when its last writer closes it (flush or
 *     release of the last handle open for writing), or is fsync'd; the
 *     queue is journalled in <landing>/.datavo-journal/ (one small file a
 *     path, written with fsync before the close returns), so a SIGKILLed
 *     daemon or a rebooted machine resumes at the next mount;
 *   - a file is uploaded under its name at upload time, one upload at a
 *     time per path; a newer close wins over an upload still running (its
 *     result is not counted as synced);
 *   - unlink and rename are mirrored (delete, or delete + upload);
 *   - a journal entry whose file changed after the close it recorded (a
 *     writer that never closed before the daemon died) is never uploaded:
 *     it is failed, and says why.
 * What it does not do yet: list or read back objects that are only in the
 * destination (another VM's, or evicted ones).
 *
 * Inode numbers of write-back entries have DV_NS_FOREIGN_INO set (the
 * namespace never does): bits 56-62 the area, bits 0-55 the landing
 * file's own inode number.
 */
#ifndef DV_WRITEBACK_H
#define DV_WRITEBACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "config/config.h"
#include "fs/namespace/namespace.h"
#include "fs/text.h"

struct dv_wb;

/* Counters of one area, for status and metrics. */
struct dv_wb_stats {
	uint64_t pending_files;   /* closed, not in the destination yet */
	uint64_t pending_bytes;
	uint64_t oldest_pending;  /* seconds since the oldest became pending */
	uint64_t failed_files;    /* failed for good (until retried) */
	uint64_t uploaded_files;  /* this mount */
	uint64_t uploaded_bytes;
	uint64_t deleted_files;
	uint64_t upload_errors;   /* failed attempts, retried or not */
	uint64_t evicted_files;
};

/*
 * Opens the landing folder of every write-back area of @cfg (created when
 * missing), reads its journal and starts its uploaders. @ns (borrowed) is
 * asked whether a dataset has an area's name: that is an error. *@out is
 * NULL when @cfg has no area. 0, or -errno with one line in @err.
 */
int dv_wb_new(const struct dv_config *cfg, struct dv_namespace *ns,
	      struct dv_wb **out, char *err, size_t errlen);

/* Stops the uploaders (what is pending stays journalled). NULL: no-op. */
void dv_wb_free(struct dv_wb *wb);

static inline bool dv_wb_is_ino(uint64_t ino)
{
	return (ino & DV_NS_FOREIGN_INO) != 0;
}

/* Areas: how many, and each one's name and root inode. */
size_t dv_wb_count(const struct dv_wb *wb);
const char *dv_wb_name(const struct dv_wb *wb, size_t i);
uint64_t dv_wb_root_ino(const struct dv_wb *wb, size_t i);
/* The landing folder's attributes, as area @i's root (st_ino rewritten). */
void dv_wb_root_stat(struct dv_wb *wb, size_t i, struct stat *st);
void dv_wb_stats(struct dv_wb *wb, size_t i, struct dv_wb_stats *out);

/* Appends ,\n  "writeback": [...] to the status document. */
void dv_wb_status_json(struct dv_wb *wb, struct dv_text *o);

#endif
