/*
 * The state of one mount, shared by the FUSE operations (fuse_ops.c) and
 * the start-up code (main.c). Everything here is set up before the session
 * starts and read-only afterwards, except the counters.
 */
#ifndef DV_DATAVOFS_H
#define DV_DATAVOFS_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "tiers/core/hierarchy.h"
#include "tiers/origin/origin.h"
#include "fs/namespace/namespace.h"

struct fuse_session;

struct dv_metrics;
struct dv_wb;

/* Inodes of the hidden control directory; the namespace never uses 2-15. */
#define DV_CTL_DIR_INO 2
#define DV_CTL_STATUS_INO 3
#define DV_CTL_DIR_NAME ".datavo"

struct dv_fs {
	struct dv_config *cfg;
	struct dv_origin *origin;
	struct dv_hierarchy *hier;
	struct dv_namespace *ns;
	struct dv_fetcher fetcher;
	double entry_timeout;    /* seconds the kernel may cache names */
	bool passthrough;        /* atomic: granted at init, until refused */
	bool want_passthrough;   /* asked for (-o passthrough, default on) */
	const char *read_path_why; /* atomic: why keep_cache, NULL on passthrough */
	enum dv_fuse_uring uring_mode; /* fuse_io_uring: auto, on, off */
	bool uring_asked;        /* libfuse was handed -o io_uring */
	bool uring;              /* atomic: io_uring granted at INIT */
	const char *transport_why; /* atomic: why /dev/fuse, NULL on io_uring */
	uint32_t request_bytes;  /* the largest request asked for at INIT */
	struct fuse_session *se; /* for notifications (cache_push.h) */
	bool cache_suspect;      /* atomic: unverified pages may be cached */
	uint64_t open_files;     /* atomic */
	uint64_t read_errors;    /* atomic */
	uint64_t read_bytes;     /* atomic: bytes read through the daemon */
	uint64_t read_bytes_uring; /* atomic: those of them over io_uring */
	uint64_t started;        /* time(NULL) at start */
	struct dv_metrics *metrics; /* the Prometheus exporter, or NULL */
	struct dv_wb *wb;        /* the write-back areas, or NULL */
};

#endif
