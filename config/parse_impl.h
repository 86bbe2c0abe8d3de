/*
 * Internals of the config parser, shared by parse.c (the schema: key
 * tables, value setters, the walk) and parse_yaml.c (libyaml documents,
 * nodes and messages). Private to config/.
 */
#ifndef DV_PARSE_IMPL_H
#define DV_PARSE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "config.h"

#define MSG_MAX 512

struct parse_ctx {
	const char *path;   /* for messages */
	yaml_document_t *doc;
	struct dv_config *cfg;
	const char *prefix; /* "http." while inside the http mapping */
	const char *text;   /* the whole file, for encoding errors */
	size_t len;
	char *err;
	size_t errlen;
};

struct field;

/* Checks @val and stores it into @obj; @key is the name for messages. */
typedef int (*field_set_fn)(struct parse_ctx *ctx, const struct field *f,
			    const char *key, yaml_node_t *val, void *obj);

/*
 * Parses the scalar @s of field @f into @obj (at f->off unless the kind
 * says otherwise). 0, -ENOMEM, or another -errno for a value it refuses.
 */
typedef int (*field_parse_fn)(const struct field *f, const char *s,
			      void *obj);

/* A kind of scalar value, for the setter shared by all of them. */
struct value_kind {
	field_parse_fn parse;
	bool nonempty;    /* "" is refused before parse() sees it */
	const char *what; /* the refusal: a format of the value and f->max */
};

/* The kinds of scalar values (parse.c), indexes of dv_cfgparse_kinds. */
enum kind_id {
	KIND_STRING, KIND_URL, KIND_ORIGIN, KIND_NAME, KIND_GROUP, KIND_BOOL,
	KIND_UINT, KIND_MODE, KIND_VERIFY, KIND_FUSE_URING, KIND_PRICE,
	KIND_SIZE, KIND_PATH,
};

extern const struct value_kind dv_cfgparse_kinds[];

struct field {
	const char *section; /* NULL, or the prefix of a nested mapping */
	const char *key;
	field_set_fn set;               /* NULL: the scalar setter, by kind */
	const struct value_kind *kind; /* for the scalar setter */
	size_t off;     /* where set() stores, inside obj */
	unsigned types; /* tier keys: bits of the types that accept the key */
	uint64_t max;   /* whole numbers: the largest value */
	bool legacy;    /* accepted but not listed; set() sees null values too */
};

/* "FILE:LINE: key 'KEY': message" into ctx->err. Returns -EINVAL. */
int dv_cfgparse_fail_line(struct parse_ctx *ctx, size_t line, const char *key,
			  const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The 1-based line of @node. */
size_t dv_cfgparse_node_line(const yaml_node_t *node);

#define fail(ctx, node, key, ...) \
	dv_cfgparse_fail_line(ctx, dv_cfgparse_node_line(node), key, __VA_ARGS__)

/* "FILE: out of memory" into ctx->err. Returns -ENOMEM. */
int dv_cfgparse_fail_nomem(struct parse_ctx *ctx);

/* The text of a scalar node. */
const char *dv_cfgparse_scalar(const yaml_node_t *node);

/* "a list", "a mapping" or "a value", for messages. */
const char *dv_cfgparse_node_kind(const yaml_node_t *node);

/* `key:`, `key: ~`, `key: null`: treated as if the key were absent. */
bool dv_cfgparse_is_null(const yaml_node_t *node);

yaml_node_t *dv_cfgparse_node_at(struct parse_ctx *ctx, yaml_node_item_t item);

/* The value of @key in @map, NULL when absent or null. */
yaml_node_t *dv_cfgparse_map_get(struct parse_ctx *ctx, yaml_node_t *map,
				 const char *key);

/* @val as one string without NUL bytes, else a message. 0 or -EINVAL. */
int dv_cfgparse_get_scalar(struct parse_ctx *ctx, const char *key,
			   yaml_node_t *val, const char **out);

/*
 * Loads the one YAML document of @text (a second one is refused). On
 * success *@doc must be deleted by the caller. 0, -EINVAL or -ENOMEM.
 */
int dv_cfgparse_load_document(struct parse_ctx *ctx, const char *text,
			      size_t len, yaml_document_t *doc);

/* writeback: (parse_wb.c) */
int dv_cfgparse_set_writeback(struct parse_ctx *ctx, const struct field *f,
			      const char *key, yaml_node_t *val, void *obj);

/* Replaces *@slot by a copy of @s. 0 or -ENOMEM. */
int dv_cfgparse_store_str(struct parse_ctx *ctx, char **slot, const char *s);

/* @val as a non-empty string, else a message. 0 or -EINVAL. */
int dv_cfgparse_nonempty(struct parse_ctx *ctx, const char *key,
			 yaml_node_t *val, const char **out);

/* Walks @map against @fields (duplicates and unknown keys are errors). */
int dv_cfgparse_walk_mapping(struct parse_ctx *ctx, yaml_node_t *map,
			     const struct field *fields, size_t n, void *obj);

#endif
