/*
 * The FUSE transport: what the machine offers, read from sysfs and
 * procfs, never written (transport.h).
 */
#include "transport.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The first line of @path into @buf; -errno when it cannot be read. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	int ret = 0;

	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		ret = -EIO;
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return ret;
}

/* NULL when the kernel side offers io_uring, else why not. */
static const char *kernel_why(void)
{
	char v[32];
	int ret = read_line(DV_ENABLE_URING_PATH, v, sizeof(v));

	if (ret == -ENOENT && access("/sys/module/fuse/parameters", F_OK) == 0)
		return "the kernel has no FUSE over io_uring (Linux >= 6.14 with CONFIG_FUSE_IO_URING has it)";
	/* No fuse module yet: the mount loads it; INIT tells. */
	if (ret == 0 && v[0] != 'Y' && v[0] != 'y' && v[0] != '1')
		return "enable_uring is off";
	if (read_line("/proc/sys/kernel/io_uring_disabled", v, sizeof(v)) == 0 &&
	    v[0] == '2')
		return "io_uring is disabled (kernel.io_uring_disabled = 2)";
	return NULL;
}

int dv_transport_probe(enum dv_fuse_uring mode, const char **why)
{
	static char libfuse_why[96];

	if (mode == DV_FUSE_URING_OFF) {
		*why = "fuse_io_uring is off";
		return 0;
	}
	if (!DV_TRANSPORT_LIBFUSE_URING) {
		snprintf(libfuse_why, sizeof(libfuse_why),
			 "libfuse %s has no io_uring (3.18 built with liburing and libnuma has it)",
			 fuse_pkgversion());
		*why = libfuse_why;
	} else {
		*why = kernel_why();
	}
	if (!*why)
		return 1;
	return mode == DV_FUSE_URING_ON ? -ENOTSUP : 0;
}

size_t dv_transport_request_bytes(void)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long pages = 256;
	char v[32];
	size_t bytes;

	if (page <= 0)
		page = 4096;
	if (read_line(DV_MAX_PAGES_LIMIT_PATH, v, sizeof(v)) == 0 &&
	    sscanf(v, "%lu", &pages) != 1)
		pages = 256;
	if (pages == 0)
		pages = 1;
	bytes = pages > DV_REQUEST_MAX_BYTES / (unsigned long)page ?
			DV_REQUEST_MAX_BYTES : (size_t)(pages * (unsigned long)page);
	return bytes;
}
