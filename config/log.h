/*
 * Logging: one line per event, with a level. Everything in datavofs logs
 * through dv_log(); the daemon decides where lines go (stderr in the
 * foreground, syslog when daemonized). Never pass a secret to dv_log().
 */
#ifndef DV_LOG_H
#define DV_LOG_H

#include <stdarg.h>

enum dv_log_level {
	DV_LOG_ERROR = 0,
	DV_LOG_WARNING = 1,
	DV_LOG_INFO = 2,
	DV_LOG_DEBUG = 3,
};

/* Receives every line at or above the current level, without newline. */
typedef void (*dv_log_sink_fn)(enum dv_log_level level, const char *line);

void dv_log(enum dv_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Lines above @level are dropped. Default: DV_LOG_WARNING. */
void dv_log_set_level(enum dv_log_level level);
enum dv_log_level dv_log_get_level(void);

/* NULL restores the default sink (stderr, "datavofs: LEVEL: line"). */
void dv_log_set_sink(dv_log_sink_fn sink);

/* Parses "error", "warning", "info", "debug". Returns 0 or -EINVAL. */
int dv_log_parse_level(const char *s, enum dv_log_level *out);

const char *dv_log_level_name(enum dv_log_level level);

#define dv_err(...) dv_log(DV_LOG_ERROR, __VA_ARGS__)
#define dv_warn(...) dv_log(DV_LOG_WARNING, __VA_ARGS__)
#define dv_info(...) dv_log(DV_LOG_INFO, __VA_ARGS__)
#define dv_debug(...) dv_log(DV_LOG_DEBUG, __VA_ARGS__)

#endif
