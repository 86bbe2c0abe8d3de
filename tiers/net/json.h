/*
 * The small JSON documents of the clouds and their token services (object
 * metadata, token answers, credential files, error bodies), read with
 * libyaml's event parser: JSON is YAML's flow style.
 *
 * Only what the backends need: named members of the top-level object,
 * one level of nesting ("error.message"), strings and numbers. Values are
 * never quoted in error messages, since a credential file holds secrets.
 */
#ifndef DV_JSON_H
#define DV_JSON_H

#include <stddef.h>

#define DV_JSON_MAX_DEPTH 16

struct dv_json_field {
	/* In: a member of the top-level object, or "outer.inner". */
	const char *key;
	/* Out: the text of a string or number member (malloc'd), or NULL when
	 * absent, null, or of another kind (object, array, true/false). */
	char *value;
};

/*
 * Fills the @n fields from the JSON object @text (@len bytes). Returns 0;
 * -EINVAL when @text is not one JSON object (then @err, when not NULL,
 * says where; fields found before the problem are kept); -ENOMEM.
 */
int dv_json_get(const char *text, size_t len,
		    struct dv_json_field *fields, size_t n, char *err,
		    size_t errlen);

/* Wipes and frees the values; the keys stay. */
void dv_json_release(struct dv_json_field *fields, size_t n);

/*
 * The reason in an error body, for a log line: GCS's {"error": {"message":
 * …}} or OAuth's {"error": "…", "error_description": "…"}, made printable
 * and cut to @len. "" when there is none. Returns @buf.
 */
char *dv_json_reason(const char *text, size_t len, char *buf,
			 size_t buflen);

#endif
