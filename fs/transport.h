/*
 * How FUSE requests travel between the kernel and the daemon: read from
 * /dev/fuse by libfuse's worker threads, or FUSE over io_uring (Linux >=
 * 6.14, libfuse >= 3.18 built with liburing and libnuma), where each CPU
 * has a ring of request buffers and a request costs no read/write system
 * call pair. The kernel offers io_uring only while the fuse module's
 * enable_uring parameter is set; the daemon never sets it (it is the
 * administrator's, for every FUSE mount on the machine).
 *
 * Also the size of one request: as big as the kernel lets a FUSE server
 * ask (/proc/sys/fs/fuse/max_pages_limit, Linux >= 6.13), up to
 * DV_REQUEST_MAX_BYTES.
 */
#ifndef DV_TRANSPORT_H
#define DV_TRANSPORT_H

#include <stddef.h>

#include "config/config.h"

/*
 * The most one request carries. Each ring entry (libfuse: 8 per CPU) and
 * each /dev/fuse worker holds a buffer this big once used, so the kernel's
 * limit is followed only this far. Measured on daemon-served O_DIRECT reads
 * (dd bs=4M), 4 MiB requests ran 3-7% faster than 1 MiB over io_uring and no
 * faster over /dev/fuse; buffered reads, sized by read-ahead, did not change.
 */
#define DV_REQUEST_MAX_BYTES (4u << 20)

#define DV_ENABLE_URING_PATH "/sys/module/fuse/parameters/enable_uring"
#define DV_MAX_PAGES_LIMIT_PATH "/proc/sys/fs/fuse/max_pages_limit"

/* Whether this build's libfuse can run FUSE over io_uring at all. */
#ifdef DV_FUSE_URING
#define DV_TRANSPORT_LIBFUSE_URING 1
#else
#define DV_TRANSPORT_LIBFUSE_URING 0
#endif

/*
 * Decides, before the mount, whether to ask libfuse for io_uring under
 * @mode: looks at this build's libfuse, the kernel's enable_uring and
 * kernel.io_uring_disabled. Returns 1 to ask, 0 not to (*@why: a static
 * sentence for status and log), or -ENOTSUP when @mode is ON and io_uring
 * cannot be had (*@why says why). Changes nothing on the machine.
 */
int dv_transport_probe(enum dv_fuse_uring mode, const char **why);

/*
 * The bytes one request may carry: the kernel's max_pages_limit in bytes
 * (256 pages when it cannot be read, the limit of kernels before 6.13),
 * at most DV_REQUEST_MAX_BYTES.
 */
size_t dv_transport_request_bytes(void);

#endif
