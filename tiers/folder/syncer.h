/*
 * Durability off the read path.
 *
 * A file installed in a folder tier must reach stable storage before its
 * name can be trusted after a power loss, but its first reader need not
 * wait for the disk: the bytes are verified and in the page cache. So an
 * install first leaves a marker, <tier>/.unsynced/<hash>.XXXXXX holding
 * the boot id, then renames the file into place and hands the syncer the
 * job: fdatasync() the file, fsync() the directory, remove the marker.
 * The job opens the file by name when it runs, so that a file evicted
 * meanwhile frees its space at once (it is then not synced at all).
 * (The marker is created before the rename and both are journaled in that
 * order, as ext4 and XFS do, so the name never outlives its marker.)
 *
 * A marker found when a tier is opened (folder.c) means the job never ran:
 * on the same boot the page cache still holds the bytes and they are
 * synced; after a reboot the file may hold anything and is removed.
 *
 * A job waits about 5 s before it runs, as the kernel's own writeback
 * waits: a burst of fills is not slowed by syncing the first ones, and
 * the marker covers the wait. It runs at once when the queue is half
 * full, on dv_syncer_flush() and when the last user goes (not when one
 * of several tiers closes: its jobs keep their turn).
 *
 * One worker per process, started with the first job (threads do not
 * survive fork(), and the daemon forks after building its tiers). When
 * the queue is full the caller does the job itself, so dirty data cannot
 * pile up without bound.
 */
#ifndef DV_SYNCER_H
#define DV_SYNCER_H

#include <stddef.h>

/*
 * The current boot id (36 characters), or "" when the kernel does not say
 * (markers then never match, and files they name are refetched).
 */
const char *dv_boot_id(void);

/*
 * Syncs the file @path (if it is still there), then its directory, then
 * unlinks @marker (a path), in the background. Never fails: when no
 * worker can run, the job runs on the caller's thread.
 */
void dv_syncer_queue(const char *path, const char *marker);

/*
 * The same job, now, on the caller's thread; a failure is logged and
 * leaves the marker.
 */
void dv_syncer_run(const char *path, const char *marker);

/* Waits until every job queued so far is done. */
void dv_syncer_flush(void);

/*
 * A user of the syncer (a folder tier) comes and goes. When the last one
 * goes, the queue is done and the worker stops.
 */
void dv_syncer_hold(void);
void dv_syncer_release(void);

#endif
