/*
 * writeback: in shards.yaml, the list of write-back areas
 * (struct dv_writeback_config). Same table-driven walk as parse.c: each key
 * has a setter, every error names file, line and key.
 *
 * The destination decides the kind of upload: file:///path or
 * s3://bucket/prefix. The keys of the matching tier type that carry
 * credentials and addressing (region, endpoint) are taken as they are for
 * that tier. What it does not check: whether a name collides with a
 * dataset (the origin is only known at mount; fs/writeback/ checks it).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_impl.h"
#include "parse_impl.h"
#include "util.h"

#define WB_FIELD(k, how, member)                                          \
	{ .section = "writeback.", .key = k, how,                          \
	  .off = offsetof(struct dv_writeback_config, member) }
#define WB_SET(fn) .set = fn
#define WB_VALUE(id) .kind = &dv_cfgparse_kinds[id]

static int set_destination(struct parse_ctx *ctx, const struct field *f,
			   const char *key, yaml_node_t *val, void *obj);

static const struct field wb_fields[] = {
	WB_FIELD("name", WB_VALUE(KIND_NAME), name),
	WB_FIELD("destination", WB_SET(set_destination), destination),
	WB_FIELD("path", WB_VALUE(KIND_PATH), path),
	WB_FIELD("max_bytes", WB_VALUE(KIND_SIZE), max_bytes),
	WB_FIELD("region", WB_VALUE(KIND_STRING), remote.region),
	WB_FIELD("endpoint", WB_VALUE(KIND_URL), remote.endpoint),
};

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* "bucket/prefix/" → bucket and prefix (without the slashes around it). */
static int split_bucket(struct parse_ctx *ctx, const char *rest,
			struct dv_tier_config *t)
{
	const char *slash = strchr(rest, '/');
	size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
	const char *p = slash ? slash + 1 : "";
	size_t plen;

	if (blen == 0)
		return -EINVAL;
	t->bucket = strndup(rest, blen);
	while (*p == '/')
		p++;
	plen = strlen(p);
	while (plen > 0 && p[plen - 1] == '/')
		plen--;
	t->prefix = strndup(p, plen);
	if (!t->bucket || !t->prefix)
		return dv_cfgparse_fail_nomem(ctx);
	return 0;
}

static int parse_destination(struct parse_ctx *ctx, const char *s,
			     struct dv_writeback_config *w)
{
	if (strncmp(s, "file://", 7) == 0) {
		if (s[7] != '/' || s[8] == '\0')
			return -EINVAL;
		w->dest = DV_WB_DEST_FILE;
		w->remote.type = DV_TIER_TYPE_FOLDER;
		return dv_cfgparse_store_str(ctx, &w->remote.path, s + 7);
	}
	if (strncmp(s, "s3://", 5) == 0) {
		w->dest = DV_WB_DEST_S3;
		w->remote.type = DV_TIER_TYPE_S3;
		return split_bucket(ctx, s + 5, &w->remote);
	}
	return -EINVAL;
}

static int set_destination(struct parse_ctx *ctx, const struct field *f,
			   const char *key, yaml_node_t *val, void *obj)
{
	struct dv_writeback_config *w = obj;
	const char *s = NULL;
	int ret = dv_cfgparse_nonempty(ctx, key, val, &s);

	if (ret < 0)
		return ret;
	ret = parse_destination(ctx, s, w);
	if (ret == -ENOMEM)
		return ret;
	if (ret < 0)
		return fail(ctx, val, key,
			    "'%.128s' is not a write-back destination (use s3://BUCKET/PREFIX or file:///PATH)",
			    s);
	return dv_cfgparse_store_str(ctx, &w->destination, s);
}

static int missing(struct parse_ctx *ctx, const struct dv_writeback_config *w,
		   const char *key, const char *what)
{
	return dv_cfgparse_fail_line(ctx, (size_t)w->line, key,
				     "missing (a write-back entry needs %s)",
				     what);
}

static int finish_entry(struct parse_ctx *ctx, yaml_node_t *map,
			struct dv_writeback_config *w)
{
	if (!w->name)
		return missing(ctx, w, "name", "the name of its directory");
	if (strcmp(w->name, ".datavo") == 0)
		return fail(ctx, dv_cfgparse_map_get(ctx, map, "name"), "name",
			    "'.datavo' is the control directory (pick another name)");
	if (!w->destination)
		return missing(ctx, w, "destination",
			       "a destination (s3://BUCKET/PREFIX or file:///PATH)");
	if (!w->path)
		return missing(ctx, w, "path", "a local landing folder");
	if (w->dest == DV_WB_DEST_FILE && w->remote.endpoint)
		return fail(ctx, dv_cfgparse_map_get(ctx, map, "endpoint"),
			    "endpoint", "not valid for a file:// destination");
	if (w->dest == DV_WB_DEST_FILE && w->remote.region)
		return fail(ctx, dv_cfgparse_map_get(ctx, map, "region"),
			    "region", "not valid for a file:// destination");
	return 0;
}

static int parse_entry(struct parse_ctx *ctx, yaml_node_t *map,
		       struct dv_writeback_config *w)
{
	int ret;

	if (map->type != YAML_MAPPING_NODE)
		return fail(ctx, map, "writeback",
			    "an entry is %s, not a mapping (write each as '- name: ...' with one key per line)",
			    dv_cfgparse_node_kind(map));
	w->line = (int)dv_cfgparse_node_line(map);
	ctx->prefix = "writeback.";
	ret = dv_cfgparse_walk_mapping(ctx, map, wb_fields, NFIELDS(wb_fields),
				       w);
	ctx->prefix = NULL;
	if (ret == 0)
		ret = finish_entry(ctx, map, w);
	if (ret == 0 && !w->remote.name)
		ret = dv_cfgparse_store_str(ctx, &w->remote.name, w->name);
	return ret;
}

static int check_names(struct parse_ctx *ctx, const struct dv_config *cfg)
{
	const struct dv_writeback_config *a, *b;

	for (a = cfg->writebacks; a < cfg->writebacks + cfg->nwritebacks; a++) {
		for (b = cfg->writebacks; b < a; b++) {
			if (strcmp(a->name, b->name) == 0)
				return dv_cfgparse_fail_line(ctx, (size_t)a->line, "name",
					"duplicate write-back name '%s' (also on line %d)",
					a->name, b->line);
			if (strcmp(a->path, b->path) == 0)
				return dv_cfgparse_fail_line(ctx, (size_t)a->line, "path",
					"'%s' is the landing folder of '%s' too (give each its own)",
					a->path, b->name);
		}
	}
	return 0;
}

int dv_cfgparse_set_writeback(struct parse_ctx *ctx, const struct field *f,
			      const char *key, yaml_node_t *val, void *obj)
{
	struct dv_config *cfg = obj;
	yaml_node_item_t *items;
	size_t i, n;
	int ret = 0;

	if (val->type != YAML_SEQUENCE_NODE)
		return fail(ctx, val, key,
			    "expected a list of write-back areas, found %s (start each with '- ')",
			    dv_cfgparse_node_kind(val));
	items = val->data.sequence.items.start;
	n = (size_t)(val->data.sequence.items.top - items);
	if (n == 0)
		return 0;
	cfg->writebacks = calloc(n, sizeof(*cfg->writebacks));
	if (!cfg->writebacks)
		return dv_cfgparse_fail_nomem(ctx);
	cfg->nwritebacks = n;
	for (i = 0; ret == 0 && i < n; i++)
		ret = parse_entry(ctx, dv_cfgparse_node_at(ctx, items[i]),
				  &cfg->writebacks[i]);
	if (ret == 0)
		ret = check_names(ctx, cfg);
	return ret;
}
