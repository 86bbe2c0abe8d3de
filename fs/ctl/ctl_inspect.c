/*
 * datavoctl inspect [-c CONFIG]: which configuration the daemon would use
 * and why (R10), what it says, each tier with its capacity, use and free
 * space, and warnings an operator should act on. Read-only: it creates no
 * directory and contacts no server. What a tier is and holds, each tier
 * says itself (dv_tier_describe): nothing here knows a backend's storage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/util.h"
#include "tiers/core/tier.h"
#include "ctl.h"

#define INSPECT_USAGE "usage: datavoctl inspect [-c CONFIG]\n"

/* The search of dv_config_resolve() (config.h, R10). */
#define SYSTEM_CONFIG "/etc/datavo/shards.yaml"
#define USER_CONFIG "~/.config/datavo/shards.yaml"

static unsigned nwarnings;

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void warn(const char *fmt, ...)
{
	va_list ap;

	printf("  warning: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	nwarnings++;
}

static const char *exists_word(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0)
		return "found";
	return errno == ENOENT || errno == ENOTDIR ? "not found" : strerror(errno);
}

/* R10: the candidates in order, the winner marked. */
static void explain_source(const char *explicit_path, const struct dv_config *cfg)
{
	char *user = NULL;
	const char *env = getenv("DATAVO_SHARD_CACHE_DIR");
	enum dv_config_source s = cfg->source;

	dv_expand_path(USER_CONFIG, &user);
	printf("config: %s\n", cfg->path ? cfg->path : "built-in default");
	printf("  resolution (R10: the first that exists wins):\n");
	printf("    1. -c CONFIG                      %s%s\n",
	       explicit_path ? explicit_path : "not given",
	       s == DV_CONFIG_EXPLICIT ? "  <- used" : "");
	printf("    2. %-30s %s%s\n", SYSTEM_CONFIG,
	       s == DV_CONFIG_EXPLICIT ? "not searched" : exists_word(SYSTEM_CONFIG),
	       s == DV_CONFIG_SYSTEM ? "  <- used" : "");
	printf("    3. %-30s %s%s\n", user ? user : USER_CONFIG,
	       s < DV_CONFIG_USER ? "not searched" :
	       user ? exists_word(user) : "no home directory",
	       s == DV_CONFIG_USER ? "  <- used" : "");
	printf("    4. built-in default               %s\n",
	       s == DV_CONFIG_DEFAULT ? "used" : "not needed");
	if (s == DV_CONFIG_DEFAULT)
		printf("       one folder tier at %s, 50 GiB\n",
		       env && *env ? "$DATAVO_SHARD_CACHE_DIR" :
				     "~/.cache/altavo/datavo/shards");
	free(user);
}

static void print_settings(const struct dv_config *cfg)
{
	const char *env = getenv("DATAVO_ORIGIN");
	char base[4096];

	printf("settings:\n");
	if (cfg->origin)
		printf("  origin:         %s\n", cfg->origin);
	else if (env && *env)
		printf("  origin:         not in the config; $DATAVO_ORIGIN=%s\n", env);
	else
		printf("  origin:         not set (give it to datavofs, or set 'origin:')\n");
	printf("  verify:         %s\n", dv_verify_mode_name(cfg->verify));
	printf("  manifest_ttl:   %u s\n", cfg->manifest_ttl);
	printf("  metrics:        %s\n", cfg->metrics ? cfg->metrics : "off (-o metrics turns it on)");
	printf("  dollars_per_gb: %.4f\n", cfg->dollars_per_gb);
	printf("  state_dir:      %s\n",
	       dv_config_manifest_base(cfg, base, sizeof(base)) ? base :
	       "(none: HOME and XDG_RUNTIME_DIR are unset)");
	printf("  http:           connect_timeout %u s, low_speed %u B/s for %u s, %u retries\n",
	       cfg->http.connect_timeout, cfg->http.low_speed_limit,
	       cfg->http.low_speed_time, cfg->http.retries);
}

/* A tier's lines, kept to print under its row. */
#define MAX_LINES 1024

struct lines {
	char *text[MAX_LINES];
	enum dv_desc_line kind[MAX_LINES];
	size_t n;
};

static void keep_line(void *arg, enum dv_desc_line kind, const char *text)
{
	struct lines *l = arg;

	if (l->n == MAX_LINES)
		return;
	l->text[l->n] = strdup(text);
	l->kind[l->n] = kind;
	if (l->text[l->n])
		l->n++;
}

/* Details indented under the row, warnings as every other warning. */
static void print_lines(struct lines *l)
{
	for (size_t k = 0; k < l->n; k++) {
		if (l->kind[k] == DV_DESC_WARNING)
			warn("%s", l->text[k]);
		else
			printf("      %s\n", l->text[k]);
		free(l->text[k]);
	}
	l->n = 0;
}

static void same_directory_warnings(const struct dv_config *cfg, size_t i)
{
	const struct dv_tier_config *tc = &cfg->tiers[i];

	for (size_t j = 0; j < i; j++) {
		const struct dv_tier_config *o = &cfg->tiers[j];

		if (dv_tier_type_is_folder(o->type) && o->path && tc->path &&
		    strcmp(o->path, tc->path) == 0)
			warn("tiers '%s' and '%s' are the same directory", o->name, tc->name);
	}
}

static void print_tier(const struct dv_config *cfg, size_t i)
{
	const struct dv_tier_config *tc = &cfg->tiers[i];
	static struct lines lines;
	struct dv_tier_desc d = { .line = keep_line, .arg = &lines };
	char cap[32], used[32], fr[32], err[512];
	struct dv_tier *t;

	if (dv_tier_new(tc, cfg, &t, err, sizeof(err))) {
		printf("  %-16s %-10s\n", tc->name, dv_tier_type_name(tc->type));
		warn("%s", err);
		return;
	}
	dv_tier_describe(t, &d);
	dv_format_bytes(d.capacity, cap, sizeof(cap));
	if (d.has_usage)
		printf("  %-16s %-10s %-36s %12s %12s %8" PRIu64 " %12s%s\n", tc->name,
		       dv_tier_type_name(tc->type), d.where,
		       d.capacity ? cap : "unbounded",
		       dv_format_bytes(d.usage.used_bytes, used, sizeof(used)),
		       d.usage.objects,
		       dv_format_bytes(d.usage.fs_free, fr, sizeof(fr)),
		       d.exists ? "" : "  (created on first use)");
	else
		printf("  %-16s %-10s %-36s %12s   (%s)\n", tc->name,
		       dv_tier_type_name(tc->type), d.where,
		       d.capacity ? cap : "unbounded", d.note ? d.note : "-");
	print_lines(&lines);
	same_directory_warnings(cfg, i);
	dv_tier_free(t);
}

static void warn_line(void *arg, const char *msg)
{
	warn("%s", msg);
}

static void file_warnings(const struct dv_config *cfg)
{
	dv_config_file_warnings(cfg, warn_line, NULL);
}

int dv_ctl_inspect(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL;
	struct dv_config *cfg;
	bool any_folder = false;
	int c;

	while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		if (c == 'c') {
			config = optarg;
		} else {
			return dv_ctl_usage(INSPECT_USAGE, c == 'h');
		}
	}
	if (optind != argc)
		return dv_ctl_usage(INSPECT_USAGE, false);
	if (dv_ctl_load_config("inspect", config, &cfg))
		return 1;
	nwarnings = 0;
	explain_source(config, cfg);
	print_settings(cfg);
	printf("tiers (fastest first):\n  %-16s %-10s %-36s %12s %12s %8s %12s\n",
	       "NAME", "TYPE", "WHERE", "CAPACITY", "USED", "OBJECTS", "FS FREE");
	for (size_t i = 0; i < cfg->ntiers; i++) {
		print_tier(cfg, i);
		any_folder |= dv_tier_type_is_folder(cfg->tiers[i].type);
	}
	printf("checks:\n");
	file_warnings(cfg);
	if (!any_folder)
		warn("no folder or ram tier: the daemon refuses this config (R6)");
	if (nwarnings == 0)
		printf("  no warnings\n");
	dv_config_free(cfg);
	return 0;
}
