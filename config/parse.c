/*
 * shards.yaml → struct dv_config: the YAML walk.
 *
 * libyaml's document API loads the whole file first, so every node knows
 * its line; the walk over the tree is table-driven: one table of the keys
 * outside tiers (by section: top level, `http`, `fill`), one for tier
 * entries (with the tier types that accept each key). A scalar key names
 * the kind of its value, whose row in the table of kinds holds its parser
 * and its messages; other keys have a setter of their own. Every error is
 * one line, "FILE:LINE: key 'KEY': what is wrong (what is expected)".
 *
 * What it does not do: create directories, probe devices, resolve hosts or
 * open connections. Values are checked for form only; the tiers check that
 * a path is usable when they open it. Loading the YAML document, its nodes
 * and the messages are parse_yaml.c's; reading files, resolution (R10),
 * the built-in default and the names of enums are config.c's.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_impl.h"
#include "parse_impl.h"
#include "log.h"
#include "perms.h"
#include "util.h"

#define CHUNK_ALIGN 4096ULL        /* O_DIRECT alignment of stripe chunks */
#define CHUNK_MAX (1ULL << 30)
#define SECONDS_MAX 86400
#define RETRIES_MAX 100

#define TYPE_BIT(t) (1u << DV_TIER_TYPE_##t)
#define ALL_TYPES 0x3fu
#define FOLDER_TYPES (TYPE_BIT(FOLDER) | TYPE_BIT(RAM))
#define CLOUD_TYPES (TYPE_BIT(S3) | TYPE_BIT(AZURE_BLOB) | TYPE_BIT(GCS))

/* Values */

/* A non-negative decimal number; strtod alone would take hex, inf, nan. */
static int parse_price(const char *s, double *out)
{
	char *end;
	double v;

	if (!*s || strspn(s, "0123456789.eE+") != strlen(s))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

static bool has_http_scheme(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

static bool valid_origin(const char *s)
{
	return has_http_scheme(s) || strncmp(s, "file://", 7) == 0 ||
	       strncmp(s, "s3://", 5) == 0 || s[0] == '/';
}

static const char *type_article(enum dv_tier_type type)
{
	return type == DV_TIER_TYPE_S3 || type == DV_TIER_TYPE_AZURE_BLOB ?
		       "an" :
		       "a";
}

/*
 * Setters: each checks one value and stores it at f->off in obj. Most
 * values are one scalar read by a parser of its kind; set_scalar() reads,
 * parses and words the failure for all of them from the kind's table row.
 * The setters below it take values that fail in more than one way.
 */

static void *field_slot(void *obj, const struct field *f)
{
	return (char *)obj + f->off;
}

static int replace_str(char **slot, const char *s)
{
	char *copy = strdup(s);

	if (!copy)
		return -ENOMEM;
	free(*slot);
	*slot = copy;
	return 0;
}

static int store_str(struct parse_ctx *ctx, char **slot, const char *s)
{
	return replace_str(slot, s) < 0 ? dv_cfgparse_fail_nomem(ctx) : 0;
}

static int parse_string(const struct field *f, const char *s, void *obj)
{
	return replace_str(field_slot(obj, f), s);
}

static int parse_url(const struct field *f, const char *s, void *obj)
{
	return has_http_scheme(s) ? parse_string(f, s, obj) : -EINVAL;
}

static int parse_origin(const struct field *f, const char *s, void *obj)
{
	return valid_origin(s) ? parse_string(f, s, obj) : -EINVAL;
}

static int parse_name(const struct field *f, const char *s, void *obj)
{
	return dv_valid_name_part(s) ? parse_string(f, s, obj) : -EINVAL;
}

static int parse_bool(const struct field *f, const char *s, void *obj)
{
	return dv_parse_bool(s, field_slot(obj, f));
}

static int parse_unsigned(const struct field *f, const char *s, void *obj)
{
	uint64_t v;
	int ret = dv_parse_uint(s, f->max, &v);

	if (ret == 0)
		*(unsigned *)field_slot(obj, f) = (unsigned)v;
	return ret;
}

static int parse_mode(const struct field *f, const char *s, void *obj)
{
	return dv_parse_dir_mode(s, field_slot(obj, f));
}

static int parse_group(const struct field *f, const char *s, void *obj)
{
	struct dv_tier_config *t = obj;
	int ret = dv_parse_group(s, &t->gid);

	if (ret == 0)
		t->has_group = true;
	return ret;
}

static int parse_verify(const struct field *f, const char *s, void *obj)
{
	return dv_config_lookup_verify_mode(s, field_slot(obj, f));
}

static int parse_fuse_uring(const struct field *f, const char *s, void *obj)
{
	return dv_config_lookup_fuse_uring(s, field_slot(obj, f));
}

static int parse_dollars(const struct field *f, const char *s, void *obj)
{
	return parse_price(s, field_slot(obj, f));
}

/* Negative sizes are refused here: strtoull would wrap them. */
static int parse_size(const struct field *f, const char *s, void *obj)
{
	return s[0] == '-' ? -EDOM : dv_parse_size(s, field_slot(obj, f));
}

/* R12: ~ and $VAR expand; the result must be absolute (the daemon chdirs). */
static int parse_path(const struct field *f, const char *s, void *obj)
{
	char **slot = field_slot(obj, f);
	int ret;

	free(*slot);
	*slot = NULL;
	ret = dv_expand_path(s, slot);
	if (ret < 0)
		return ret;
	if ((*slot)[0] != '/') {
		free(*slot);
		*slot = NULL;
		return -EDOM;
	}
	return 0;
}

/*
 * The kinds of scalar values. @what words a refusal: a format given the
 * value (at most 64 bytes shown with %.64s) and then f->max as unsigned
 * long long; either may go unused. URLs are not echoed: a pasted one may
 * carry a SAS signature.
 */
const struct value_kind dv_cfgparse_kinds[] = {
	[KIND_STRING] = { parse_string, true, NULL },
	[KIND_URL] = { parse_url, true, "is not a URL (use one that starts with https:// or http://)" },
	[KIND_ORIGIN] = { parse_origin, true, "is not an origin (use http://, https://, file://, s3://BUCKET/PREFIX or an absolute path)" },
	[KIND_NAME] = { parse_name, true, "'%.64s' is not a tier name (use letters, digits, '.', '_' and '-')" },
	[KIND_GROUP] = { parse_group, true, "'%.64s' is not a group of this machine (use a group name or a gid)" },
	[KIND_BOOL] = { parse_bool, false, "'%.64s' is not a boolean (use true or false)" },
	[KIND_UINT] = { parse_unsigned, false, "'%.64s' is not a whole number from 0 to %llu" },
	[KIND_MODE] = { parse_mode, false, "'%.64s' is not an octal mode of directories with rwx for their owner (e.g. 0770; files get it less the x bits)" },
	[KIND_VERIFY] = { parse_verify, false, "'%.64s' is not a verify mode (use fill, always or off)" },
	[KIND_FUSE_URING] = { parse_fuse_uring, false, "'%.64s' is not a choice (use auto, on or off)" },
	[KIND_PRICE] = { parse_dollars, false, "'%.64s' is not a price (use dollars per GB, 0 or more, e.g. 0.09)" },
	[KIND_SIZE] = { parse_size, false, "'%.64s' is not a size (use an integer or a suffix B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)" },
	[KIND_PATH] = { parse_path, true, "'%.128s' has a malformed ${...} (use $VAR or ${VAR})" },
};

/* Refusals a kind words by the error its parser gave. */
static const struct refusal {
	enum kind_id kind;
	int err;
	const char *what;
} refusals[] = {
	{ KIND_SIZE, -EDOM, "'%.64s' is negative (use 0 for unbounded, or a positive size)" },
	{ KIND_SIZE, -ERANGE, "'%.64s' is too large (a size must fit in 64 bits)" },
	{ KIND_PATH, -ENOENT, "'%.128s' uses an environment variable that is not set (set it, or HOME for ~, or write the path out)" },
	{ KIND_PATH, -ENAMETOOLONG, "'%.128s' is too long once expanded" },
	{ KIND_PATH, -EDOM, "'%.128s' is not an absolute path (start it with /, ~/ or $VAR)" },
};

static const char *refusal_of(const struct value_kind *kind, int err)
{
	size_t i;

	for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		if (&dv_cfgparse_kinds[refusals[i].kind] == kind && refusals[i].err == err)
			return refusals[i].what;
	}
	return kind->what;
}

static int nonempty_scalar(struct parse_ctx *ctx, const char *key,
			   yaml_node_t *val, const char **out)
{
	int ret = dv_cfgparse_get_scalar(ctx, key, val, out);

	if (ret == 0 && **out == '\0')
		return fail(ctx, val, key,
			    "is empty (give a value or remove the key)");
	return ret;
}

static int set_scalar(struct parse_ctx *ctx, const struct field *f,
		      const char *key, yaml_node_t *val, void *obj)
{
	const struct value_kind *kind = f->kind;
	const char *s = NULL;
	int ret = kind->nonempty ? nonempty_scalar(ctx, key, val, &s) :
				   dv_cfgparse_get_scalar(ctx, key, val, &s);

	if (ret < 0)
		return ret;
	ret = kind->parse(f, s, obj);
	if (ret == -ENOMEM)
		return dv_cfgparse_fail_nomem(ctx);
	if (ret < 0)
		return fail(ctx, val, key, refusal_of(kind, ret), s,
			    (unsigned long long)f->max);
	return 0;
}

/* A value that is not a field of its own, such as a list item, at @out. */
static int set_value(struct parse_ctx *ctx, enum kind_id id, const char *key,
		     yaml_node_t *val, void *out)
{
	const struct field f = { .kind = &dv_cfgparse_kinds[id] };

	return set_scalar(ctx, &f, key, val, out);
}

static int set_chunk(struct parse_ctx *ctx, const struct field *f,
		     const char *key, yaml_node_t *val, void *obj)
{
	uint64_t v;
	int ret = set_value(ctx, KIND_SIZE, key, val, &v);

	if (ret < 0)
		return ret;
	if (v == 0 || v % CHUNK_ALIGN || v > CHUNK_MAX)
		return fail(ctx, val, key,
			    "%llu bytes is not a valid chunk size (use a multiple of 4096 from 4KiB to 1GiB)",
			    (unsigned long long)v);
	*(uint64_t *)field_slot(obj, f) = v;
	return 0;
}

/* The type was read before the walk (it decides which keys are valid). */
static int set_type(struct parse_ctx *ctx, const struct field *f,
		    const char *key, yaml_node_t *val, void *obj)
{
	return 0;
}

/*
 * The items of the list @val, else a message: @expected (a format given
 * the kind of node found) when it is not a list, @empty when it is empty.
 */
static int get_list(struct parse_ctx *ctx, const char *key, yaml_node_t *val,
		    const char *expected, const char *empty,
		    yaml_node_item_t **items, size_t *n)
{
	if (val->type != YAML_SEQUENCE_NODE)
		return fail(ctx, val, key, expected, dv_cfgparse_node_kind(val));
	*items = val->data.sequence.items.start;
	*n = (size_t)(val->data.sequence.items.top - *items);
	if (*n == 0)
		return fail(ctx, val, key, "is an empty list (%s)", empty);
	return 0;
}

static int add_device(struct parse_ctx *ctx, const char *key,
		      yaml_node_t *item, char **devices, size_t i)
{
	size_t j;
	int ret = set_value(ctx, KIND_PATH, key, item, &devices[i]);

	for (j = 0; ret == 0 && j < i; j++) {
		if (strcmp(devices[i], devices[j]) == 0)
			return fail(ctx, item, key, "'%.128s' is listed twice",
				    devices[i]);
	}
	return ret;
}

static int set_devices(struct parse_ctx *ctx, const struct field *f,
		       const char *key, yaml_node_t *val, void *obj)
{
	struct dv_tier_config *t = obj;
	yaml_node_item_t *items;
	size_t i, n;
	int ret;

	if (val->type == YAML_SCALAR_NODE && strcmp(dv_cfgparse_scalar(val), "auto") == 0) {
		t->devices_auto = true;
		return 0;
	}
	ret = get_list(ctx, key, val, "expected a list of block devices or 'auto', found %s",
		       "list block devices, or write auto", &items, &n);
	if (ret < 0)
		return ret;
	t->devices = calloc(n + 1, sizeof(*t->devices));
	if (!t->devices)
		return dv_cfgparse_fail_nomem(ctx);
	for (i = 0; ret == 0 && i < n; i++)
		ret = add_device(ctx, key, dv_cfgparse_node_at(ctx, items[i]), t->devices,
				 i);
	return ret;
}

static int set_metrics(struct parse_ctx *ctx, const struct field *f,
		       const char *key, yaml_node_t *val, void *obj)
{
	struct dv_config *cfg = obj;
	const char *s = NULL;
	bool on;
	int ret = dv_cfgparse_get_scalar(ctx, key, val, &s);

	if (ret < 0)
		return ret;
	if (dv_parse_bool(s, &on) == 0) {
		free(cfg->metrics);
		cfg->metrics = NULL;
		return on ? store_str(ctx, &cfg->metrics,
				      DV_DEFAULT_METRICS_ADDR) :
			    0;
	}
	if (!dv_valid_addr_port(s))
		return fail(ctx, val, key,
			    "'%.64s' is not ADDR:PORT (use e.g. %s, true for that address, or false)",
			    s, DV_DEFAULT_METRICS_ADDR);
	return store_str(ctx, &cfg->metrics, s);
}

/* R11 */
static int set_root(struct parse_ctx *ctx, const struct field *f,
		    const char *key, yaml_node_t *val, void *obj)
{
	dv_warn("%s:%zu: key '%s' is ignored (a legacy key: the origin is the source of truth; set 'origin' instead)",
		ctx->path, dv_cfgparse_node_line(val), key);
	return 0;
}

static int set_http(struct parse_ctx *ctx, const struct field *f,
		    const char *key, yaml_node_t *val, void *obj);
static int set_fill(struct parse_ctx *ctx, const struct field *f,
		    const char *key, yaml_node_t *val, void *obj);
static int set_tiers(struct parse_ctx *ctx, const struct field *f,
		     const char *key, yaml_node_t *val, void *obj);

/* Tables */

/* How a field is set: a setter of its own, or set_scalar() with a kind. */
#define SET(fn) .set = fn
#define VALUE(id) .kind = &dv_cfgparse_kinds[id]
#define UINT_UPTO(max_) .kind = &dv_cfgparse_kinds[KIND_UINT], .max = max_

#define TIER_FIELD(k, how, member, types_)                              \
	{ .key = k, how, .types = types_,                               \
	  .off = offsetof(struct dv_tier_config, member) }

static const struct field tier_fields[] = {
	TIER_FIELD("name", VALUE(KIND_NAME), name, ALL_TYPES),
	TIER_FIELD("type", SET(set_type), type, ALL_TYPES),
	TIER_FIELD("max_bytes", VALUE(KIND_SIZE), max_bytes, ALL_TYPES),
	TIER_FIELD("path", VALUE(KIND_PATH), path, FOLDER_TYPES),
	TIER_FIELD("mode", VALUE(KIND_MODE), mode, FOLDER_TYPES),
	TIER_FIELD("group", VALUE(KIND_GROUP), gid, FOLDER_TYPES),
	TIER_FIELD("devices", SET(set_devices), devices, TYPE_BIT(STRIPE)),
	TIER_FIELD("chunk_bytes", SET(set_chunk), chunk_bytes,
		   TYPE_BIT(STRIPE)),
	TIER_FIELD("format", VALUE(KIND_BOOL), format, TYPE_BIT(STRIPE)),
	TIER_FIELD("bucket", VALUE(KIND_STRING), bucket,
		   TYPE_BIT(S3) | TYPE_BIT(GCS)),
	TIER_FIELD("region", VALUE(KIND_STRING), region, TYPE_BIT(S3)),
	TIER_FIELD("project", VALUE(KIND_STRING), project, TYPE_BIT(GCS)),
	TIER_FIELD("container_url", VALUE(KIND_URL), container_url,
		   TYPE_BIT(AZURE_BLOB)),
	TIER_FIELD("sas_token", VALUE(KIND_STRING), sas_token,
		   TYPE_BIT(AZURE_BLOB)),
	TIER_FIELD("managed_identity_client_id", VALUE(KIND_STRING),
		   managed_identity_client_id, TYPE_BIT(AZURE_BLOB)),
	TIER_FIELD("prefix", VALUE(KIND_STRING), prefix, CLOUD_TYPES),
	TIER_FIELD("endpoint", VALUE(KIND_URL), endpoint, CLOUD_TYPES),
};

/*
 * Every key outside tier entries, each in its section: NULL for the top
 * level, "http." for those of the `http:` mapping and so on (the prefix
 * messages give them). Offsets are inside struct dv_config.
 */
#define CFG_FIELD(section_, k, how, member)                             \
	{ .section = section_, .key = k, how,                           \
	  .off = offsetof(struct dv_config, member) }

static const struct field cfg_fields[] = {
	CFG_FIELD(NULL, "tiers", SET(set_tiers), tiers),
	CFG_FIELD(NULL, "origin", VALUE(KIND_ORIGIN), origin),
	CFG_FIELD(NULL, "verify", VALUE(KIND_VERIFY), verify),
	CFG_FIELD(NULL, "fuse_io_uring", VALUE(KIND_FUSE_URING), fuse_io_uring),
	CFG_FIELD(NULL, "writeback", SET(dv_cfgparse_set_writeback), writebacks),
	CFG_FIELD(NULL, "manifest_ttl", UINT_UPTO(UINT32_MAX), manifest_ttl),
	CFG_FIELD(NULL, "metrics", SET(set_metrics), metrics),
	CFG_FIELD(NULL, "dollars_per_gb", VALUE(KIND_PRICE), dollars_per_gb),
	CFG_FIELD(NULL, "state_dir", VALUE(KIND_PATH), state_dir),
	CFG_FIELD(NULL, "http", SET(set_http), http),
	CFG_FIELD(NULL, "fill", SET(set_fill), fill),
	{ .key = "root", .set = set_root, .legacy = true },
	CFG_FIELD("http.", "connect_timeout", UINT_UPTO(SECONDS_MAX),
		  http.connect_timeout),
	CFG_FIELD("http.", "low_speed_time", UINT_UPTO(SECONDS_MAX),
		  http.low_speed_time),
	CFG_FIELD("http.", "low_speed_limit", UINT_UPTO(UINT32_MAX),
		  http.low_speed_limit),
	CFG_FIELD("http.", "retries", UINT_UPTO(RETRIES_MAX), http.retries),
	CFG_FIELD("http.", "ca_file", VALUE(KIND_PATH), http.ca_file),
	CFG_FIELD("http.", "ca_path", VALUE(KIND_PATH), http.ca_path),
	CFG_FIELD("fill.", "streaming", VALUE(KIND_BOOL), fill.streaming),
	CFG_FIELD("fill.", "parallel", UINT_UPTO(32), fill.parallel),
	CFG_FIELD("fill.", "connections", UINT_UPTO(1024), fill.connections),
	CFG_FIELD("fill.", "timeout", UINT_UPTO(SECONDS_MAX), fill.timeout),
};

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* The walk */

/* Whether @f is a key of the mapping being walked (ctx->prefix). */
static bool in_section(const struct field *f, const char *section)
{
	if (!f->section || !section)
		return f->section == section;
	return strcmp(f->section, section) == 0;
}

static const struct field *find_field(const struct field *fields, size_t n,
				      const char *section, const char *key)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (in_section(&fields[i], section) &&
		    strcmp(fields[i].key, key) == 0)
			return &fields[i];
	}
	return NULL;
}

/* "name, type, max_bytes, path": the keys valid for @type (0: all). */
static void list_keys(const struct field *fields, size_t n,
		      const char *section, unsigned type, char *buf, size_t len)
{
	size_t i, used = 0;

	buf[0] = '\0';
	for (i = 0; i < n && used < len; i++) {
		if (fields[i].legacy || !in_section(&fields[i], section) ||
		    (type && !(fields[i].types & type)))
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
					 used ? ", " : "", fields[i].key);
	}
}

static int fail_key(struct parse_ctx *ctx, yaml_node_t *k, const char *key,
		    const struct field *f, const struct field *fields,
		    size_t n, unsigned type)
{
	enum dv_tier_type t = (enum dv_tier_type)__builtin_ctz(type ? type : 1);
	char valid[256];

	list_keys(fields, n, ctx->prefix, type, valid, sizeof(valid));
	if (f)
		return fail(ctx, k, key,
			    "not valid for %s %s tier (valid keys: %s)",
			    type_article(t), dv_tier_type_name(t), valid);
	return fail(ctx, k, key, "unknown key (valid keys: %s)", valid);
}

static void key_name(struct parse_ctx *ctx, yaml_node_t *k, char *buf,
		     size_t len)
{
	snprintf(buf, len, "%s%.64s", ctx->prefix ? ctx->prefix : "",
		 k->type == YAML_SCALAR_NODE ? dv_cfgparse_scalar(k) : "?");
}

static int check_duplicates(struct parse_ctx *ctx, yaml_node_t *map)
{
	yaml_node_pair_t *start = map->data.mapping.pairs.start;
	yaml_node_pair_t *a, *b;
	yaml_node_t *ka, *kb;
	char key[96];

	for (a = start; a < map->data.mapping.pairs.top; a++) {
		ka = dv_cfgparse_node_at(ctx, a->key);
		for (b = start; b < a; b++) {
			kb = dv_cfgparse_node_at(ctx, b->key);
			if (ka->type != YAML_SCALAR_NODE ||
			    kb->type != YAML_SCALAR_NODE ||
			    strcmp(dv_cfgparse_scalar(ka), dv_cfgparse_scalar(kb)) != 0)
				continue;
			key_name(ctx, ka, key, sizeof(key));
			return fail(ctx, ka, key,
				    "duplicate key (first given on line %zu)",
				    dv_cfgparse_node_line(kb));
		}
	}
	return 0;
}

/* @type: the bit of the tier type for tier entries, 0 elsewhere. */
static int walk_pair(struct parse_ctx *ctx, yaml_node_pair_t *pair,
		     const struct field *fields, size_t n, unsigned type,
		     void *obj)
{
	yaml_node_t *k = dv_cfgparse_node_at(ctx, pair->key);
	yaml_node_t *v = dv_cfgparse_node_at(ctx, pair->value);
	const struct field *f;
	char key[96];

	key_name(ctx, k, key, sizeof(key));
	if (k->type != YAML_SCALAR_NODE)
		return fail(ctx, k, NULL, "a key must be a word, found %s",
			    dv_cfgparse_node_kind(k));
	f = find_field(fields, n, ctx->prefix, dv_cfgparse_scalar(k));
	if (!f || (type && !(f->types & type)))
		return fail_key(ctx, k, key, f, fields, n, type);
	if (dv_cfgparse_is_null(v) && !f->legacy)
		return 0;
	return f->set ? f->set(ctx, f, key, v, obj) :
			set_scalar(ctx, f, key, v, obj);
}

static int walk_pairs(struct parse_ctx *ctx, yaml_node_t *map,
		      const struct field *fields, size_t n, unsigned type,
		      void *obj)
{
	yaml_node_pair_t *pair;
	int ret = 0;

	for (pair = map->data.mapping.pairs.start;
	     ret == 0 && pair < map->data.mapping.pairs.top; pair++)
		ret = walk_pair(ctx, pair, fields, n, type, obj);
	return ret;
}

static int walk_mapping(struct parse_ctx *ctx, yaml_node_t *map,
			const struct field *fields, size_t n, void *obj)
{
	int ret = check_duplicates(ctx, map);

	if (ret < 0)
		return ret;
	return walk_pairs(ctx, map, fields, n, 0, obj);
}

/*
 * A nested mapping such as `http:`, its keys the fields of cfg_fields in
 * section @prefix; @expected is a format given the kind of node found
 * instead of a mapping.
 */
static int walk_section(struct parse_ctx *ctx, const char *key,
			yaml_node_t *val, const char *prefix,
			const char *expected, struct dv_config *cfg)
{
	int ret;

	if (val->type != YAML_MAPPING_NODE)
		return fail(ctx, val, key, expected, dv_cfgparse_node_kind(val));
	ctx->prefix = prefix;
	ret = walk_mapping(ctx, val, cfg_fields, NFIELDS(cfg_fields), cfg);
	ctx->prefix = NULL;
	return ret;
}

static int set_http(struct parse_ctx *ctx, const struct field *f,
		    const char *key, yaml_node_t *val, void *obj)
{
	return walk_section(ctx, key, val, "http.",
			    "expected a mapping (connect_timeout: 10, retries: 4, ...), found %s",
			    obj);
}

static int set_fill(struct parse_ctx *ctx, const struct field *f,
		    const char *key, yaml_node_t *val, void *obj)
{
	struct dv_config *cfg = obj;
	int ret = walk_section(ctx, key, val, "fill.",
			       "expected a mapping (parallel: 8, connections: 32, ...), found %s",
			       cfg);

	if (ret == 0 && (cfg->fill.parallel == 0 || cfg->fill.timeout == 0))
		ret = fail(ctx, val, key,
			   "parallel and timeout must be at least 1");
	return ret;
}

/* Tiers */

static int parse_type(struct parse_ctx *ctx, yaml_node_t *map,
		      enum dv_tier_type *out)
{
	yaml_node_t *val = dv_cfgparse_map_get(ctx, map, "type");
	const char *s = NULL;
	int ret;

	*out = DV_TIER_TYPE_FOLDER;
	if (!val)
		return 0;
	ret = dv_cfgparse_get_scalar(ctx, "type", val, &s);
	if (ret < 0)
		return ret;
	if (dv_config_lookup_tier_type(s, out) == 0)
		return 0;
	return fail(ctx, val, "type",
		    "'%.64s' is not a tier type (use folder, ram, stripe, s3, azure_blob or gcs)",
		    s);
}

static int fail_missing(struct parse_ctx *ctx, const struct dv_tier_config *t,
			const char *key, const char *what)
{
	return dv_cfgparse_fail_line(ctx, (size_t)t->line, key,
			 "missing (%s %s tier needs %s)", type_article(t->type),
			 dv_tier_type_name(t->type), what);
}

static int default_ram(struct parse_ctx *ctx, yaml_node_t *map,
		       struct dv_tier_config *t)
{
	if (!dv_cfgparse_map_get(ctx, map, "max_bytes"))
		t->max_bytes = dv_physical_memory() / 4;
	if (t->path)
		return 0;
	return store_str(ctx, &t->path, DV_DEFAULT_RAM_PATH);
}

/* Defaults that depend on the type, then the keys a type requires. */
static int finish_tier(struct parse_ctx *ctx, yaml_node_t *map,
		       struct dv_tier_config *t)
{
	switch (t->type) {
	case DV_TIER_TYPE_FOLDER:
		return t->path ? 0 :
				 fail_missing(ctx, t, "path",
					      "the directory that holds its shards");
	case DV_TIER_TYPE_RAM:
		return default_ram(ctx, map, t);
	case DV_TIER_TYPE_STRIPE:
		return t->devices || t->devices_auto ?
			       0 :
			       fail_missing(ctx, t, "devices",
					    "a list of block devices, or auto");
	case DV_TIER_TYPE_S3:
	case DV_TIER_TYPE_GCS:
		return t->bucket ? 0 : fail_missing(ctx, t, "bucket", "a bucket");
	case DV_TIER_TYPE_AZURE_BLOB:
		return t->container_url ?
			       0 :
			       fail_missing(ctx, t, "container_url",
					    "a container URL");
	}
	return 0;
}

static int default_name(struct parse_ctx *ctx, struct dv_tier_config *t,
			size_t index)
{
	if (t->name)
		return 0;
	if (asprintf(&t->name, "%s%zu", dv_tier_type_name(t->type), index) < 0) {
		t->name = NULL;
		return dv_cfgparse_fail_nomem(ctx);
	}
	return 0;
}

static int parse_tier(struct parse_ctx *ctx, yaml_node_t *map, size_t index,
		      struct dv_tier_config *t)
{
	int ret;

	if (map->type != YAML_MAPPING_NODE)
		return fail(ctx, map, "tiers",
			    "entry %zu is %s, not a mapping (write each tier as '- path: ...' with one key per line)",
			    index, dv_cfgparse_node_kind(map));
	t->line = (int)dv_cfgparse_node_line(map);
	t->chunk_bytes = DV_DEFAULT_CHUNK_BYTES;
	ret = check_duplicates(ctx, map);
	if (ret == 0)
		ret = parse_type(ctx, map, &t->type);
	if (ret == 0)
		ret = walk_pairs(ctx, map, tier_fields, NFIELDS(tier_fields),
				 1u << t->type, t);
	if (ret == 0)
		ret = finish_tier(ctx, map, t);
	if (ret == 0)
		ret = default_name(ctx, t, index);
	return ret;
}

static int check_tier_names(struct parse_ctx *ctx, const struct dv_config *cfg)
{
	const struct dv_tier_config *a, *b;

	for (a = cfg->tiers; a < cfg->tiers + cfg->ntiers; a++) {
		for (b = cfg->tiers; b < a; b++) {
			if (strcmp(a->name, b->name) == 0)
				return dv_cfgparse_fail_line(ctx, (size_t)a->line, "name",
						 "duplicate tier name '%s' (also the name of the tier on line %d)",
						 a->name, b->line);
		}
	}
	return 0;
}

/* R6: a remote hit needs a local file to hand to the reader. */
static int check_folder_tier(struct parse_ctx *ctx, yaml_node_t *list,
			     const struct dv_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->ntiers; i++) {
		if (dv_tier_type_is_folder(cfg->tiers[i].type))
			return 0;
	}
	return fail(ctx, list, "tiers",
		    "no folder-backed tier (add a tier of type folder or ram: remote tiers need a local landing zone)");
}

static int set_tiers(struct parse_ctx *ctx, const struct field *f,
		     const char *key, yaml_node_t *val, void *obj)
{
	struct dv_config *cfg = obj;
	yaml_node_item_t *items;
	size_t i, n;
	int ret = get_list(ctx, key, val,
			   "expected a list of tiers, found %s (start each tier with '- ')",
			   "at least one tier is required", &items, &n);

	if (ret < 0)
		return ret;
	cfg->tiers = calloc(n, sizeof(*cfg->tiers));
	if (!cfg->tiers)
		return dv_cfgparse_fail_nomem(ctx);
	cfg->ntiers = n;
	for (i = 0; ret == 0 && i < n; i++)
		ret = parse_tier(ctx, dv_cfgparse_node_at(ctx, items[i]), i,
				 &cfg->tiers[i]);
	if (ret == 0)
		ret = check_tier_names(ctx, cfg);
	if (ret == 0)
		ret = check_folder_tier(ctx, val, cfg);
	return ret;
}

static int parse_root(struct parse_ctx *ctx, yaml_node_t *root)
{
	int ret;

	if (!root)
		return dv_cfgparse_fail_line(ctx, 1, "tiers",
				 "missing: the file is empty (a non-empty list of tiers is required)");
	if (root->type != YAML_MAPPING_NODE)
		return fail(ctx, root, NULL,
			    "expected a mapping of keys such as 'tiers:', found %s",
			    dv_cfgparse_node_kind(root));
	ret = walk_mapping(ctx, root, cfg_fields, NFIELDS(cfg_fields),
			   ctx->cfg);
	if (ret == 0 && !ctx->cfg->tiers)
		ret = fail(ctx, root, "tiers",
			   "missing (a non-empty list of tiers is required)");
	return ret;
}

int dv_config_parse(const char *text, size_t len, const char *path,
		    struct dv_config **out, char *err, size_t errlen)
{
	struct parse_ctx ctx = { .path = path ? path : "<config>",
				 .err = err, .errlen = errlen };
	yaml_document_t doc;
	int ret;

	*out = NULL;
	ctx.cfg = dv_config_new();
	if (!ctx.cfg)
		return dv_cfgparse_fail_nomem(&ctx);
	ret = dv_cfgparse_load_document(&ctx, text, len, &doc);
	if (ret < 0)
		goto out_free;
	ctx.doc = &doc;
	ret = parse_root(&ctx, yaml_document_get_root_node(&doc));
	yaml_document_delete(&doc);
	if (ret < 0)
		goto out_free;
	*out = ctx.cfg;
	return 0;
out_free:
	dv_config_free(ctx.cfg);
	return ret;
}

/* For parse_wb.c (parse_impl.h): the walk and strings. */

int dv_cfgparse_store_str(struct parse_ctx *ctx, char **slot, const char *s)
{
	return store_str(ctx, slot, s);
}

int dv_cfgparse_nonempty(struct parse_ctx *ctx, const char *key,
			 yaml_node_t *val, const char **out)
{
	return nonempty_scalar(ctx, key, val, out);
}

int dv_cfgparse_walk_mapping(struct parse_ctx *ctx, yaml_node_t *map,
			     const struct field *fields, size_t n, void *obj)
{
	return walk_mapping(ctx, map, fields, n, obj);
}
