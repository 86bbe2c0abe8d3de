/*
 * datavoctl's subcommands. Each takes its own argv (argv[0] is the
 * subcommand's name), parses it with getopt_long, prints for people on
 * stdout, errors on stderr, and returns the process exit status:
 * 0 success, 1 a failure or (verify) a finding, 2 bad usage.
 *
 * They live in the core library (no FUSE header): they work through the
 * mount (status, preload), on tier directories (verify, bench) or on the
 * config alone (inspect).
 */
#ifndef DV_CTL_H
#define DV_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config/config.h"

int dv_ctl_status(int argc, char **argv);
int dv_ctl_preload(int argc, char **argv);
int dv_ctl_verify(int argc, char **argv);
int dv_ctl_inspect(int argc, char **argv);
int dv_ctl_bench(int argc, char **argv);
int dv_ctl_sync(int argc, char **argv);

/* ---- shared helpers (ctl_common.c) ---- */

/*
 * Loads the config as the daemon would (R10): @path, else the search.
 * On failure prints "datavoctl CMD: why" and returns -errno.
 */
int dv_ctl_load_config(const char *cmd, const char *path,
		       struct dv_config **out);

/*
 * The usage line(s) @text: on stdout when the user asked (-h, @asked),
 * else on stderr. Returns the exit status that goes with it: 0 or 2.
 */
int dv_ctl_usage(const char *text, bool asked);

/* Seconds on a monotonic clock. */
double dv_ctl_now(void);

/* "1:02:03" or "2:03" into @buf. */
char *dv_ctl_format_duration(double seconds, char *buf, size_t len);

/*
 * A progress display: a bar redrawn in place on a terminal, nothing
 * otherwise (callers print plain lines then). Thread-compatible, not
 * thread-safe: one thread draws.
 */
struct dv_progress {
	FILE *out;
	bool tty;
	double start, last_draw;
	uint64_t total_bytes, done_bytes;
	uint64_t total_items, done_items, failed_items;
};

void dv_progress_init(struct dv_progress *p, FILE *out, uint64_t items,
		      uint64_t bytes);
/* Redraws when at least 0.2 s passed, or always with @force. */
void dv_progress_draw(struct dv_progress *p, bool force);
/* Clears the bar (terminal only). */
void dv_progress_end(struct dv_progress *p);

#endif
