/*
 * A streaming walk over a JSON text with libyaml's event parser (JSON is
 * YAML's flow style), shared by the readers of manifests and of the
 * clouds' small JSON answers. Never a tree in memory: the caller pulls
 * one event at a time, reads the current one with the typed accessors and
 * skips what it does not know, whole.
 *
 * What it does not do: decide what a document means, or quote values in
 * its own messages (a credential file holds secrets). Messages are one
 * line, "line L: what", into the caller's buffer.
 */
#ifndef DV_JSON_WALK_H
#define DV_JSON_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

struct dv_json_walk {
	yaml_parser_t parser;
	yaml_event_t ev;      /* the current event, when have */
	bool have;
	bool open;            /* the parser is initialized */
	unsigned max_depth;   /* deeper values are refused */
	char *err;            /* borrowed; may be NULL */
	size_t errlen;
};

/*
 * Called for each member of an object with the key (at most 63 bytes; a
 * longer one is given as "") and the first event of the value current:
 * consumes the value (an array or object up to its end) and returns 0 or
 * -errno, or returns 1 to have the walk skip it.
 */
typedef int (*dv_json_member_fn)(struct dv_json_walk *w, const char *key,
				 void *ctx);

/* Calls @fn for each element of an array, its first event current. */
typedef int (*dv_json_item_fn)(struct dv_json_walk *w, void *ctx);

/*
 * Starts a walk over @text (@len bytes, borrowed until release); messages
 * go to @err. 0 or -ENOMEM. Release it either way.
 */
int dv_json_walk_init(struct dv_json_walk *w, const char *text, size_t len,
		      unsigned max_depth, char *err, size_t errlen);
void dv_json_walk_release(struct dv_json_walk *w);

/* Writes the one-line reason into w->err. Returns -EINVAL. */
int dv_json_walk_fail(struct dv_json_walk *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The 1-based line of the current event. */
size_t dv_json_walk_line(const struct dv_json_walk *w);

/* Moves to the next event: 0, -EINVAL (not JSON, or an alias), -ENOMEM. */
int dv_json_walk_next(struct dv_json_walk *w);

/*
 * Consumes the rest of the value whose first event is current, @depth
 * levels down (refused from max_depth on). 0 or -errno.
 */
int dv_json_walk_skip(struct dv_json_walk *w, unsigned depth);

/* Whether the current event is a quoted scalar (a JSON string). */
bool dv_json_walk_quoted(const struct dv_json_walk *w);

/* The current event as a JSON string (quoted, no NUL inside), or NULL. */
const char *dv_json_walk_string(const struct dv_json_walk *w, size_t *len);

/* The current event as a JSON integer ≥ 0 that fits 64 bits. 0 or -EINVAL. */
int dv_json_walk_uint(const struct dv_json_walk *w, uint64_t *out);

/*
 * Walks the object whose MAPPING_START is current, @depth levels down,
 * calling @fn for each member. 0 or -errno.
 */
int dv_json_walk_object(struct dv_json_walk *w, unsigned depth,
			dv_json_member_fn fn, void *ctx);

/*
 * Walks the array whose first event is current, calling @fn for each
 * element; when it is not an array, "\"@name\" is not an array". 0 or
 * -errno.
 */
int dv_json_walk_array(struct dv_json_walk *w, const char *name,
		       dv_json_item_fn fn, void *ctx);

/*
 * A whole JSON text: exactly one document holding one object, each of
 * whose members goes to @fn. 0, -EINVAL (then @err says why) or -ENOMEM.
 */
int dv_json_walk_document(const char *text, size_t len, unsigned max_depth,
			  dv_json_member_fn fn, void *ctx, char *err,
			  size_t errlen);

#endif
