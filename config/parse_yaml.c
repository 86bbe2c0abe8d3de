/*
 * The YAML side of the config parser (parse_impl.h): loading one document
 * with libyaml, reaching its nodes, and the one-line error messages with
 * file and line. The schema (which keys, which values) is parse.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "config_impl.h"
#include "parse_impl.h"

/* Messages */

int dv_cfgparse_fail_line(struct parse_ctx *ctx, size_t line, const char *key,
		     const char *fmt, ...)
{
	char msg[MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (key)
		dv_config_set_error(ctx->err, ctx->errlen,
				    "%s:%zu: key '%s': %s", ctx->path, line,
				    key, msg);
	else
		dv_config_set_error(ctx->err, ctx->errlen, "%s:%zu: %s",
				    ctx->path, line, msg);
	return -EINVAL;
}

size_t dv_cfgparse_node_line(const yaml_node_t *node)
{
	return node->start_mark.line + 1;
}

int dv_cfgparse_fail_nomem(struct parse_ctx *ctx)
{
	dv_config_set_error(ctx->err, ctx->errlen, "%s: out of memory",
			    ctx->path);
	return -ENOMEM;
}

/* Nodes */

const char *dv_cfgparse_scalar(const yaml_node_t *node)
{
	return (const char *)node->data.scalar.value;
}

const char *dv_cfgparse_node_kind(const yaml_node_t *node)
{
	switch (node->type) {
	case YAML_SEQUENCE_NODE:
		return "a list";
	case YAML_MAPPING_NODE:
		return "a mapping";
	default:
		return "a value";
	}
}

/* `key:`, `key: ~`, `key: null`: treated as if the key were absent. */
bool dv_cfgparse_is_null(const yaml_node_t *node)
{
	const char *s = NULL;

	if (node->type != YAML_SCALAR_NODE ||
	    node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	s = dv_cfgparse_scalar(node);
	return *s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
	       strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

yaml_node_t *dv_cfgparse_node_at(struct parse_ctx *ctx, yaml_node_item_t item)
{
	return yaml_document_get_node(ctx->doc, item);
}

/* The value of @key in @map, NULL when absent or null. */
yaml_node_t *dv_cfgparse_map_get(struct parse_ctx *ctx, yaml_node_t *map,
			    const char *key)
{
	yaml_node_pair_t *pair;
	yaml_node_t *k;

	for (pair = map->data.mapping.pairs.start;
	     pair < map->data.mapping.pairs.top; pair++) {
		k = dv_cfgparse_node_at(ctx, pair->key);
		if (k->type == YAML_SCALAR_NODE && strcmp(dv_cfgparse_scalar(k), key) == 0)
			return dv_cfgparse_is_null(dv_cfgparse_node_at(ctx, pair->value)) ?
				       NULL :
				       dv_cfgparse_node_at(ctx, pair->value);
	}
	return NULL;
}

int dv_cfgparse_get_scalar(struct parse_ctx *ctx, const char *key,
		      yaml_node_t *val, const char **out)
{
	if (val->type != YAML_SCALAR_NODE)
		return fail(ctx, val, key, "expected a single value, found %s",
			    dv_cfgparse_node_kind(val));
	/* "\0" in a double-quoted string would silently cut the value. */
	if (strlen(dv_cfgparse_scalar(val)) != val->data.scalar.length)
		return fail(ctx, val, key, "contains a NUL byte");
	*out = dv_cfgparse_scalar(val);
	return 0;
}

/* Documents */

/* The 1-based line of byte @offset of @text. */
static size_t count_lines(const char *text, size_t len, size_t offset)
{
	size_t i, line = 1;

	for (i = 0; i < offset && i < len; i++)
		line += text[i] == '\n';
	return line;
}

/*
 * The line a user should look at: where libyaml gave up, except for an
 * unterminated key or quoted string, which start on the context's line.
 */
static size_t syntax_error_line(const yaml_parser_t *parser)
{
	const char *context = parser->context;

	if (context && (strstr(context, "simple key") ||
			strstr(context, "quoted scalar")))
		return parser->context_mark.line + 1;
	return parser->problem_mark.line + 1;
}

static int syntax_error(struct parse_ctx *ctx, const yaml_parser_t *parser)
{
	const char *problem = parser->problem ? parser->problem : "error";
	size_t line = syntax_error_line(parser);

	if (parser->error == YAML_MEMORY_ERROR)
		return dv_cfgparse_fail_nomem(ctx);
	if (parser->error == YAML_READER_ERROR)
		return dv_cfgparse_fail_line(ctx, count_lines(ctx->text, ctx->len,
						  parser->problem_offset),
				 NULL,
				 "not UTF-8 text: %s at byte %zu", problem,
				 parser->problem_offset);
	if (parser->context)
		return dv_cfgparse_fail_line(ctx, line, NULL,
				 "YAML syntax error: %s (%s on line %zu)",
				 problem, parser->context,
				 parser->context_mark.line + 1);
	return dv_cfgparse_fail_line(ctx, line, NULL, "YAML syntax error: %s", problem);
}

/* A second document ("---") would be silently dropped: refuse it. */
static int check_single_document(struct parse_ctx *ctx, yaml_parser_t *parser)
{
	yaml_document_t extra;
	yaml_node_t *root;
	int ret = 0;

	if (!yaml_parser_load(parser, &extra))
		return syntax_error(ctx, parser);
	root = yaml_document_get_root_node(&extra);
	if (root)
		ret = fail(ctx, root, NULL,
			   "a second YAML document starts here (keep one document per file)");
	yaml_document_delete(&extra);
	return ret;
}

/* On success *@doc must be deleted by the caller. */
int dv_cfgparse_load_document(struct parse_ctx *ctx, const char *text, size_t len,
			 yaml_document_t *doc)
{
	yaml_parser_t parser;
	int ret = 0;

	if (!yaml_parser_initialize(&parser))
		return dv_cfgparse_fail_nomem(ctx);
	ctx->text = text;
	ctx->len = len;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	/* On failure the loader deletes the partial document itself. */
	if (!yaml_parser_load(&parser, doc)) {
		ret = syntax_error(ctx, &parser);
		goto out;
	}
	ret = check_single_document(ctx, &parser);
	if (ret < 0)
		yaml_document_delete(doc);
out:
	yaml_parser_delete(&parser);
	return ret;
}

