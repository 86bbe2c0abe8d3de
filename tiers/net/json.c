/*
 * Picking members out of small JSON objects with the streaming walk of
 * config/json_walk.h (see json.h). Depth first: members whose path is
 * asked for are copied, objects that hold an asked-for path are entered,
 * everything else is skipped whole.
 */
#include "json.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/json_walk.h"

#define PATH_MAX_LEN 128

/* One object level of the walk: where it is, and what is asked for. */
struct level {
	struct dv_json_field *fields;
	size_t n;
	const char *prefix; /* the path of this object, NULL at the top */
	unsigned depth;
};

static struct dv_json_field *wanted(const struct level *lv, const char *path)
{
	for (size_t i = 0; i < lv->n; i++) {
		if (strcmp(lv->fields[i].key, path) == 0)
			return &lv->fields[i];
	}
	return NULL;
}

/* Does some field live inside the object at @path? */
static bool wanted_inside(const struct level *lv, const char *path)
{
	size_t len = strlen(path);

	for (size_t i = 0; i < lv->n; i++) {
		if (strncmp(lv->fields[i].key, path, len) == 0 &&
		    lv->fields[i].key[len] == '.')
			return true;
	}
	return false;
}

/* JSON numbers only: true, false, null and YAML's bare words are not. */
static bool is_number(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (!strchr("0123456789-+.eE", *s))
			return false;
	}
	return true;
}

static int store(struct dv_json_walk *w, struct dv_json_field *f)
{
	const yaml_event_t *e = &w->ev;
	const char *v = (const char *)e->data.scalar.value;
	char *copy;

	if (strlen(v) != e->data.scalar.length)
		return dv_json_walk_fail(w, "line %zu: a string holds a NUL byte",
					 dv_json_walk_line(w));
	if (!dv_json_walk_quoted(w) && !is_number(v))
		return 0;
	copy = strdup(v);
	if (!copy)
		return -ENOMEM;
	if (f->value) {
		OPENSSL_cleanse(f->value, strlen(f->value));
		free(f->value);
	}
	f->value = copy;
	return 0;
}

/* Members whose path is asked for are kept, objects on the way entered. */
static int member(struct dv_json_walk *w, const char *key, void *ctx)
{
	const struct level *lv = ctx;
	struct level inner = *lv;
	char path[PATH_MAX_LEN];
	struct dv_json_field *f;
	int n;

	n = snprintf(path, sizeof(path), "%s%s%s", lv->prefix ? lv->prefix : "",
		     lv->prefix ? "." : "", key);
	/* A key too long for any field: its value is skipped. */
	if (n < 0 || (size_t)n >= sizeof(path))
		path[0] = '\0';
	if (w->ev.type == YAML_SCALAR_EVENT) {
		f = wanted(lv, path);
		return f ? store(w, f) : 0;
	}
	if (w->ev.type == YAML_MAPPING_START_EVENT && wanted_inside(lv, path) &&
	    lv->depth + 1 < DV_JSON_MAX_DEPTH) {
		inner.prefix = path;
		inner.depth = lv->depth + 1;
		return dv_json_walk_object(w, inner.depth, member, &inner);
	}
	return dv_json_walk_skip(w, lv->depth + 1);
}

int dv_json_get(const char *text, size_t len,
		    struct dv_json_field *fields, size_t n, char *err,
		    size_t errlen)
{
	struct level top = { .fields = fields, .n = n };

	if (err && errlen)
		err[0] = '\0';
	for (size_t i = 0; i < n; i++)
		fields[i].value = NULL;
	return dv_json_walk_document(text, len, DV_JSON_MAX_DEPTH, member, &top,
				     err, errlen);
}

void dv_json_release(struct dv_json_field *fields, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (fields[i].value) {
			OPENSSL_cleanse(fields[i].value,
					strlen(fields[i].value));
			free(fields[i].value);
		}
		fields[i].value = NULL;
	}
}

static void printable(char *s)
{
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
	}
}

char *dv_json_reason(const char *text, size_t len, char *buf,
			 size_t buflen)
{
	struct dv_json_field f[] = {
		{ .key = "error.message" },
		{ .key = "error" },
		{ .key = "error_description" },
	};

	if (!buflen)
		return buf;
	buf[0] = '\0';
	if (!text || !len)
		return buf;
	/* A body cut short still gives what came before the cut. */
	dv_json_get(text, len, f, 3, NULL, 0);
	if (f[0].value)
		snprintf(buf, buflen, "%s", f[0].value);
	else if (f[1].value)
		snprintf(buf, buflen, "%s%s%s", f[1].value,
			 f[2].value ? ": " : "", f[2].value ? f[2].value : "");
	printable(buf);
	dv_json_release(f, 3);
	return buf;
}
