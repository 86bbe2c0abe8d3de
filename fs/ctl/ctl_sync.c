/*
 * datavoctl sync PATH [--timeout S]: waits until everything closed under
 * PATH (a file or a directory inside a write-back area of a mount) is in
 * the area's destination. It asks the mount through the user.datavo.sync
 * xattr of PATH (writeback.h): "synced", "pending", "uploading" or
 * "failed: why", polled until it settles.
 *
 * Exit: 0 synced, 1 an upload failed for good (the reason is printed),
 * 2 timeout, 3 PATH is not in a write-back area or not readable.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

#define POLL_MS 100

static const char usage_text[] =
	"usage: datavoctl sync [--timeout SECONDS] PATH\n"
	"  waits until every closed file under PATH (inside a write-back area\n"
	"  of a datavofs mount) is in its destination.\n"
	"  exit 0: synced; 1: an upload failed (reason printed); 2: timeout\n";

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The state of @path into @buf: 0, or -errno. */
static int state_of(const char *path, char *buf, size_t len)
{
	ssize_t n = getxattr(path, "user.datavo.sync", buf, len - 1);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

int dv_ctl_sync(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	double timeout = -1, start;
	char state[1024], *end;
	int c, ret;

	while ((c = getopt_long(argc, argv, "t:h", opts, NULL)) != -1) {
		if (c == 't') {
			timeout = strtod(optarg, &end);
			if (*end || timeout < 0)
				return dv_ctl_usage(usage_text, false);
		} else {
			return dv_ctl_usage(usage_text, c == 'h');
		}
	}
	if (optind + 1 != argc)
		return dv_ctl_usage(usage_text, false);
	start = now_s();
	for (;;) {
		ret = state_of(argv[optind], state, sizeof(state));
		if (ret) {
			fprintf(stderr, "datavoctl sync: %s: %s\n", argv[optind],
				ret == -ENODATA ?
					"not inside a write-back area of a datavofs mount" :
					strerror(-ret));
			return 3;
		}
		if (strcmp(state, "synced") == 0)
			return 0;
		if (strncmp(state, "failed", 6) == 0) {
			fprintf(stderr, "datavoctl sync: %s: %s\n", argv[optind],
				state);
			return 1;
		}
		if (timeout >= 0 && now_s() - start >= timeout) {
			fprintf(stderr, "datavoctl sync: %s: still %s after %g s\n",
				argv[optind], state, timeout);
			return 2;
		}
		usleep(POLL_MS * 1000);
	}
}
