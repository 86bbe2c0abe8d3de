/*
 * A growing text buffer for the documents the daemon generates (status
 * JSON, Prometheus text). It has a maximum (DV_TEXT_MAX): past it, or when
 * memory runs out, the buffer is marked failed and every later call is a
 * no-op, so callers check once, at the end.
 */
#ifndef DV_TEXT_H
#define DV_TEXT_H

#include <stdbool.h>
#include <stddef.h>

#define DV_TEXT_MAX (16u << 20)

struct dv_text {
	char *buf;     /* NUL-terminated while not failed */
	size_t len, cap;
	bool failed;
};

/* Appends formatted text. */
void dv_text_printf(struct dv_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Appends @s as a JSON string literal, quotes included; NULL gives null. */
void dv_text_json_str(struct dv_text *t, const char *s);

/*
 * Hands over the buffer: a malloc'd NUL-terminated string (caller frees)
 * and its length in *@len, or NULL when the buffer failed (then freed).
 */
char *dv_text_finish(struct dv_text *t, size_t *len);

#endif
