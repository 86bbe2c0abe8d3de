/*
 * datavoctl inspect [-c CONFIG]: which configuration the daemon would use
 * and why (R10), what it says, each tier with its capacity, use and free
 * space, and warnings an operator should act on. Read-only: it creates no
 * directory and contacts no server.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config/util.h"
#include "stripe/discovery.h"
#include "ctl.h"

/* The search of dv_config_resolve() (config.h, R10). */
#define SYSTEM_CONFIG "/etc/datavo/shards.yaml"
#define USER_CONFIG "~/.config/datavo/shards.yaml"

struct usage {
	bool exists;
	uint64_t used, objects;
	uint64_t fs_free, fs_size;   /* of the directory or its nearest parent */
};

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
	printf("  state_dir:      %s\n", cfg->state_dir ? cfg->state_dir :
	       dv_ctl_default_state_base(base, sizeof(base)));
	printf("  http:           connect_timeout %u s, low_speed %u B/s for %u s, %u retries\n",
	       cfg->http.connect_timeout, cfg->http.low_speed_limit,
	       cfg->http.low_speed_time, cfg->http.retries);
}

/* Free space of @path, or of its nearest existing parent. */
static void fs_space(const char *path, struct usage *u)
{
	char buf[4096];
	struct statvfs sv;

	snprintf(buf, sizeof(buf), "%s", path);
	for (;;) {
		char *slash;

		if (statvfs(buf, &sv) == 0) {
			u->fs_free = (uint64_t)sv.f_bavail * sv.f_frsize;
			u->fs_size = (uint64_t)sv.f_blocks * sv.f_frsize;
			return;
		}
		slash = strrchr(buf, '/');
		if (!slash || slash == buf)
			return;
		*slash = '\0';
	}
}

static void folder_usage(const char *dir, struct usage *u)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	memset(u, 0, sizeof(*u));
	fs_space(dir, u);
	if (!d)
		return;
	u->exists = true;
	while ((de = readdir(d)) != NULL) {
		size_t len = strlen(de->d_name);
		struct stat st;

		if (len < 5 || strcmp(de->d_name + len - 4, ".tar") ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode))
			continue;
		u->used += (uint64_t)st.st_size;
		u->objects++;
	}
	closedir(d);
}

static void tier_warnings(const struct dv_config *cfg, size_t i,
			  const struct usage *u, const char *dir)
{
	const struct dv_tier_config *tc = &cfg->tiers[i];
	char a[32], b[32];
	struct statfs sf;

	if (tc->max_bytes && u->fs_size && tc->max_bytes > u->fs_free + u->used)
		warn("tier '%s': max_bytes %s but its filesystem has %s free: it fills the disk first",
		     tc->name, dv_format_bytes(tc->max_bytes, a, sizeof(a)),
		     dv_format_bytes(u->fs_free, b, sizeof(b)));
	if (u->exists && access(dir, W_OK) != 0)
		warn("tier '%s': %s is not writable by this user", tc->name, dir);
	if (tc->type == DV_TIER_TYPE_RAM && u->exists && statfs(dir, &sf) == 0 &&
	    sf.f_type != TMPFS_MAGIC && sf.f_type != RAMFS_MAGIC)
		warn("tier '%s': type ram but %s is not on tmpfs", tc->name, dir);
	for (size_t j = 0; j < i; j++) {
		const struct dv_tier_config *o = &cfg->tiers[j];

		if (dv_tier_type_is_folder(o->type) && o->path && tc->path &&
		    strcmp(o->path, tc->path) == 0)
			warn("tiers '%s' and '%s' are the same directory", o->name, tc->name);
	}
}

/* The devices discovery accepts and refuses for a stripe tier, and why. */
static void print_stripe_devices(const struct dv_tier_config *tc)
{
	struct dv_stripe_device *d = NULL;
	char size[32];
	size_t n = 0;
	int ret = dv_stripe_discover(tc, &d, &n);

	if (ret) {
		warn("tier '%s': device discovery failed: %s", tc->name,
		     strerror(-ret));
		return;
	}
	for (size_t k = 0; k < n; k++)
		printf("      %-8s %-24s %10s  %s\n",
		       d[k].accepted ? "accepted" : "refused", d[k].path,
		       dv_format_bytes(d[k].bytes, size, sizeof(size)),
		       d[k].accepted ? d[k].what : d[k].reason);
	free(d);
}

static void print_tier(const struct dv_config *cfg, size_t i)
{
	const struct dv_tier_config *tc = &cfg->tiers[i];
	char cap[32], used[32], fr[32];
	const char *where = tc->path;
	struct usage u = { 0 };

	if (tc->type == DV_TIER_TYPE_RAM && !where)
		where = DV_DEFAULT_RAM_PATH;
	dv_format_bytes(tc->max_bytes, cap, sizeof(cap));
	if (!dv_tier_type_is_folder(tc->type)) {
		const char *w = tc->bucket ? tc->bucket : tc->container_url;

		if (tc->type == DV_TIER_TYPE_STRIPE)
			w = tc->devices_auto ? "devices: auto" : "devices: listed";
		printf("  %-16s %-10s %-36s %12s   (%s)\n", tc->name,
		       dv_tier_type_name(tc->type), w ? w : "-",
		       tc->max_bytes ? cap : "unbounded",
		       tc->type == DV_TIER_TYPE_STRIPE ? "use shown by datavoctl status"
						       : "remote: never evicts (R9)");
		if (tc->type == DV_TIER_TYPE_STRIPE)
			print_stripe_devices(tc);
		return;
	}
	folder_usage(where, &u);
	printf("  %-16s %-10s %-36s %12s %12s %8" PRIu64 " %12s%s\n", tc->name,
	       dv_tier_type_name(tc->type), where,
	       tc->max_bytes ? cap : "unbounded",
	       dv_format_bytes(u.used, used, sizeof(used)), u.objects,
	       dv_format_bytes(u.fs_free, fr, sizeof(fr)),
	       u.exists ? "" : "  (created on first use)");
	tier_warnings(cfg, i, &u, where);
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
			fprintf(c == 'h' ? stdout : stderr,
				"usage: datavoctl inspect [-c CONFIG]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: datavoctl inspect [-c CONFIG]\n");
		return 2;
	}
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
