/* A growing text buffer with a maximum (text.h). */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool grow(struct dv_text *t, size_t need)
{
	size_t cap = t->cap ? t->cap : 4096;
	char *nb;

	while (cap < need)
		cap *= 2;
	if (cap > DV_TEXT_MAX)
		return false;
	nb = realloc(t->buf, cap);
	if (!nb)
		return false;
	t->buf = nb;
	t->cap = cap;
	return true;
}

void dv_text_printf(struct dv_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	if (!t->buf && !grow(t, 1)) {
		t->failed = true;
		return;
	}
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if ((size_t)n < t->cap - t->len)
			break;
		if (!grow(t, t->len + (size_t)n + 1)) {
			t->failed = true;
			return;
		}
	}
	t->len += (size_t)n;
}

void dv_text_json_str(struct dv_text *t, const char *s)
{
	if (!s) {
		dv_text_printf(t, "null");
		return;
	}
	dv_text_printf(t, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			dv_text_printf(t, "\\%c", c);
		else if (c < 0x20)
			dv_text_printf(t, "\\u%04x", c);
		else
			dv_text_printf(t, "%c", c);
	}
	dv_text_printf(t, "\"");
}

char *dv_text_finish(struct dv_text *t, size_t *len)
{
	char *out = t->buf;

	if (t->failed || !out) {
		free(t->buf);
		out = NULL;
	} else {
		*len = t->len;
	}
	t->buf = NULL;
	t->len = t->cap = 0;
	return out;
}
