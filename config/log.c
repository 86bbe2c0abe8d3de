/*
 * The log front: formats a line, checks the level, hands it to the sink.
 * The sink is called under a mutex so lines from worker threads never
 * interleave.
 */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static enum dv_log_level current_level = DV_LOG_WARNING;
static dv_log_sink_fn current_sink;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {
	[DV_LOG_ERROR] = "error",
	[DV_LOG_WARNING] = "warning",
	[DV_LOG_INFO] = "info",
	[DV_LOG_DEBUG] = "debug",
};

const char *dv_log_level_name(enum dv_log_level level)
{
	if (level < DV_LOG_ERROR || level > DV_LOG_DEBUG)
		return "?";
	return level_names[level];
}

static void stderr_sink(enum dv_log_level level, const char *line)
{
	fprintf(stderr, "datavofs: %s: %s\n", dv_log_level_name(level), line);
}

void dv_log(enum dv_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (level > current_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	(current_sink ? current_sink : stderr_sink)(level, line);
	pthread_mutex_unlock(&log_lock);
}

void dv_log_set_level(enum dv_log_level level)
{
	current_level = level;
}

enum dv_log_level dv_log_get_level(void)
{
	return current_level;
}

void dv_log_set_sink(dv_log_sink_fn sink)
{
	pthread_mutex_lock(&log_lock);
	current_sink = sink;
	pthread_mutex_unlock(&log_lock);
}

int dv_log_parse_level(const char *s, enum dv_log_level *out)
{
	for (int i = DV_LOG_ERROR; i <= DV_LOG_DEBUG; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum dv_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}
