/* Helpers shared by datavoctl's subcommands (ctl.h). */
#include "ctl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/util.h"

int dv_ctl_load_config(const char *cmd, const char *path,
		       struct dv_config **out)
{
	char err[1024];
	int ret = dv_config_resolve(path, NULL, out, err, sizeof(err));

	if (ret)
		fprintf(stderr, "datavoctl %s: %s\n", cmd, err);
	return ret;
}

int dv_ctl_usage(const char *text, bool asked)
{
	fputs(text, asked ? stdout : stderr);
	return asked ? 0 : 2;
}

double dv_ctl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

char *dv_ctl_format_duration(double seconds, char *buf, size_t len)
{
	unsigned long s = seconds > 0 && seconds < 1e9 ? (unsigned long)(seconds + 0.5) : 0;

	if (s >= 3600)
		snprintf(buf, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, len, "%lu:%02lu", s / 60, s % 60);
	return buf;
}

void dv_progress_init(struct dv_progress *p, FILE *out, uint64_t items,
		      uint64_t bytes)
{
	memset(p, 0, sizeof(*p));
	p->out = out;
	p->tty = isatty(fileno(out)) == 1;
	p->start = dv_ctl_now();
	p->total_items = items;
	p->total_bytes = bytes;
}

void dv_progress_draw(struct dv_progress *p, bool force)
{
	char done[32], total[32], rate[32], eta[32];
	double now = dv_ctl_now(), elapsed = now - p->start, bps;
	unsigned filled, width = 24;
	char bar[32];

	if (!p->tty || (!force && now - p->last_draw < 0.2))
		return;
	p->last_draw = now;
	bps = elapsed > 0 ? (double)p->done_bytes / elapsed : 0;
	filled = p->total_bytes ?
			 (unsigned)((double)p->done_bytes / (double)p->total_bytes * width) : 0;
	if (filled > width)
		filled = width;
	memset(bar, '#', filled);
	memset(bar + filled, '.', width - filled);
	bar[width] = '\0';
	if (bps > 0 && p->total_bytes > p->done_bytes)
		dv_ctl_format_duration((double)(p->total_bytes - p->done_bytes) / bps,
				       eta, sizeof(eta));
	else
		snprintf(eta, sizeof(eta), "--:--");
	fprintf(p->out, "\r[%s] %llu/%llu shards  %s / %s  %s/s  ETA %s%s\033[K",
		bar, (unsigned long long)p->done_items,
		(unsigned long long)p->total_items,
		dv_format_bytes(p->done_bytes, done, sizeof(done)),
		dv_format_bytes(p->total_bytes, total, sizeof(total)),
		dv_format_bytes((uint64_t)bps, rate, sizeof(rate)), eta,
		p->failed_items ? "  (failures)" : "");
	fflush(p->out);
}

void dv_progress_end(struct dv_progress *p)
{
	if (!p->tty)
		return;
	dv_progress_draw(p, true);
	fprintf(p->out, "\n");
	fflush(p->out);
}
