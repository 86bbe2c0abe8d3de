/*
 * shards.yaml: finding, reading and owning a configuration (config.h).
 *
 * Resolution (R10) tries an explicit path, then the system file, then the
 * user's, then builds the default of one folder tier; a file is read whole
 * (bounded) and handed to dv_config_parse() (parse.c). Also here: the one
 * constructor and destructor of struct dv_config, and the names of the
 * enums in both directions, so that messages and the parser agree.
 *
 * What it does not do: look inside YAML (parse.c), create directories or
 * check that paths are usable (the tiers do when they open them).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_impl.h"
#include "secret.h"
#include "util.h"

#define SYSTEM_PATH "/etc/datavo/shards.yaml"
#define USER_PATH "~/.config/datavo/shards.yaml"
#define DEFAULT_TIER_DIR "~/.cache/altavo/datavo/shards"
#define DEFAULT_TIER_NAME "default"

#define CONFIG_MAX_BYTES (1 << 20) /* a shards.yaml is a few hundred bytes */

static const char *const tier_type_names[] = {
	[DV_TIER_TYPE_FOLDER] = "folder",
	[DV_TIER_TYPE_RAM] = "ram",
	[DV_TIER_TYPE_STRIPE] = "stripe",
	[DV_TIER_TYPE_S3] = "s3",
	[DV_TIER_TYPE_AZURE_BLOB] = "azure_blob",
	[DV_TIER_TYPE_GCS] = "gcs",
};
#define NTYPES (sizeof(tier_type_names) / sizeof(tier_type_names[0]))

static const char *const verify_names[] = {
	[DV_VERIFY_FILL] = "fill",
	[DV_VERIFY_ALWAYS] = "always",
	[DV_VERIFY_OFF] = "off",
};

static const char *const fuse_uring_names[] = {
	[DV_FUSE_URING_AUTO] = "auto",
	[DV_FUSE_URING_ON] = "on",
	[DV_FUSE_URING_OFF] = "off",
};

static const char *const source_names[] = {
	[DV_CONFIG_EXPLICIT] = "explicit",
	[DV_CONFIG_SYSTEM] = "system",
	[DV_CONFIG_USER] = "user",
	[DV_CONFIG_DEFAULT] = "default",
};

/* Messages */

void dv_config_set_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Files */

static int read_text(const char *path, char **text, size_t *len, char *err,
		     size_t errlen)
{
	int ret = dv_read_file(path, CONFIG_MAX_BYTES, text, len);

	if (ret == -EFBIG)
		dv_config_set_error(err, errlen,
				    "%s: too large (a config is at most %d bytes)",
				    path, CONFIG_MAX_BYTES);
	else if (ret == -EISDIR || ret == -EINVAL)
		dv_config_set_error(err, errlen,
				    "%s: not a regular file (expected a YAML file)",
				    path);
	else if (ret < 0)
		dv_config_set_error(err, errlen, "%s: cannot read: %s", path,
				    strerror(-ret));
	return ret;
}

int dv_config_load_file(const char *path, struct dv_config **out, char *err,
			size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	int ret;

	*out = NULL;
	ret = read_text(path, &text, &len, err, errlen);
	if (ret < 0)
		return ret;
	ret = dv_config_parse(text, len, path, out, err, errlen);
	dv_secret_free_n(text, len); /* may hold a sas_token */
	if (ret < 0)
		return ret;
	(*out)->path = strdup(path);
	if (!(*out)->path) {
		dv_config_free(*out);
		*out = NULL;
		dv_config_set_error(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	return 0;
}

/* Resolution (R10) */

static int load_as(const char *path, enum dv_config_source source,
		   struct dv_config **out, char *err, size_t errlen)
{
	int ret = dv_config_load_file(path, out, err, errlen);

	if (ret == 0)
		(*out)->source = source;
	return ret;
}

/* 1 when nothing is at @path; else what loading it returned. */
static int load_if_present(const char *path, enum dv_config_source source,
			   struct dv_config **out, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0 && (errno == ENOENT || errno == ENOTDIR))
		return 1;
	return load_as(path, source, out, err, errlen);
}

int dv_config_resolve(const char *explicit_path,
		      const struct dv_config_paths *paths,
		      struct dv_config **out, char *err, size_t errlen)
{
	const char *system_path = SYSTEM_PATH;
	const char *user_path = USER_PATH;
	char *expanded;
	int ret;

	*out = NULL;
	if (explicit_path)
		return load_as(explicit_path, DV_CONFIG_EXPLICIT, out, err,
			       errlen);
	if (paths && paths->system_path)
		system_path = paths->system_path;
	if (paths && paths->user_path)
		user_path = paths->user_path;
	ret = load_if_present(system_path, DV_CONFIG_SYSTEM, out, err, errlen);
	if (ret <= 0)
		return ret;
	/* Without a home directory there is no per-user file to find. */
	if (dv_expand_path(user_path, &expanded) == 0) {
		ret = load_if_present(expanded, DV_CONFIG_USER, out, err,
				      errlen);
		free(expanded);
		if (ret <= 0)
			return ret;
	}
	return dv_config_default(out, err, errlen);
}

static int default_tier_path(char **path, char *err, size_t errlen)
{
	const char *env = getenv("DATAVO_SHARD_CACHE_DIR");
	const char *dir = env && *env ? env : DEFAULT_TIER_DIR;
	int ret = dv_expand_path(dir, path);

	if (ret == -ENOMEM) {
		dv_config_set_error(err, errlen, "out of memory");
		return ret;
	}
	if (ret < 0) {
		dv_config_set_error(err, errlen,
				    "default tier: cannot expand '%.128s' (set DATAVO_SHARD_CACHE_DIR to an absolute path, or HOME)",
				    dir);
		return ret;
	}
	if ((*path)[0] != '/') {
		dv_config_set_error(err, errlen,
				    "default tier: DATAVO_SHARD_CACHE_DIR='%.128s' is not an absolute path",
				    *path);
		free(*path);
		*path = NULL;
		return -EINVAL;
	}
	return 0;
}

int dv_config_default(struct dv_config **out, char *err, size_t errlen)
{
	struct dv_config *cfg = dv_config_new();
	struct dv_tier_config *t;
	int ret = -ENOMEM;

	*out = NULL;
	if (!cfg)
		goto out_nomem;
	cfg->source = DV_CONFIG_DEFAULT;
	cfg->tiers = calloc(1, sizeof(*cfg->tiers));
	if (!cfg->tiers)
		goto out_nomem;
	cfg->ntiers = 1;
	t = &cfg->tiers[0];
	t->type = DV_TIER_TYPE_FOLDER;
	t->max_bytes = DV_DEFAULT_TIER_BYTES;
	t->chunk_bytes = DV_DEFAULT_CHUNK_BYTES;
	t->name = strdup(DEFAULT_TIER_NAME);
	if (!t->name)
		goto out_nomem;
	ret = default_tier_path(&t->path, err, errlen);
	if (ret < 0)
		goto out_free;
	*out = cfg;
	return 0;
out_nomem:
	dv_config_set_error(err, errlen, "out of memory");
out_free:
	dv_config_free(cfg);
	return ret;
}

/* Lifetime and names */

struct dv_config *dv_config_new(void)
{
	struct dv_config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->source = DV_CONFIG_EXPLICIT;
	cfg->verify = DV_VERIFY_FILL;
	cfg->manifest_ttl = DV_DEFAULT_MANIFEST_TTL;
	cfg->dollars_per_gb = DV_DEFAULT_DOLLARS_PER_GB;
	cfg->http.connect_timeout = 10;
	cfg->http.low_speed_time = 30;
	cfg->http.low_speed_limit = 1024;
	cfg->http.retries = 4;
	cfg->fill.streaming = true;
	cfg->fill.parallel = DV_FILL_PARALLEL;
	cfg->fill.connections = DV_FILL_CONNECTIONS;
	cfg->fill.timeout = DV_FILL_TIMEOUT;
	return cfg;
}

static void tier_release(struct dv_tier_config *t)
{
	char **d;

	for (d = t->devices; d && *d; d++)
		free(*d);
	free(t->devices);
	free(t->name);
	free(t->path);
	free(t->bucket);
	free(t->region);
	free(t->project);
	dv_secret_free(t->container_url); /* may carry a SAS query */
	dv_secret_free(t->sas_token);
	free(t->managed_identity_client_id);
	free(t->prefix);
	free(t->endpoint);
}

void dv_config_free(struct dv_config *cfg)
{
	size_t i;

	if (!cfg)
		return;
	for (i = 0; i < cfg->ntiers; i++)
		tier_release(&cfg->tiers[i]);
	free(cfg->tiers);
	for (i = 0; i < cfg->nwritebacks; i++) {
		free(cfg->writebacks[i].name);
		free(cfg->writebacks[i].destination);
		free(cfg->writebacks[i].path);
		tier_release(&cfg->writebacks[i].remote);
	}
	free(cfg->writebacks);
	free(cfg->path);
	dv_secret_free(cfg->origin); /* may carry userinfo or a token */
	free(cfg->metrics);
	free(cfg->state_dir);
	free(cfg->http.ca_file);
	free(cfg->http.ca_path);
	free(cfg);
}

const char *dv_tier_type_name(enum dv_tier_type type)
{
	if ((unsigned)type >= NTYPES)
		return "?";
	return tier_type_names[type];
}

const char *dv_config_source_name(enum dv_config_source source)
{
	if ((unsigned)source >= sizeof(source_names) / sizeof(source_names[0]))
		return "?";
	return source_names[source];
}

const char *dv_verify_mode_name(enum dv_verify_mode mode)
{
	if ((unsigned)mode >= sizeof(verify_names) / sizeof(verify_names[0]))
		return "?";
	return verify_names[mode];
}

const char *dv_fuse_uring_name(enum dv_fuse_uring mode)
{
	if ((unsigned)mode >= sizeof(fuse_uring_names) / sizeof(fuse_uring_names[0]))
		return "?";
	return fuse_uring_names[mode];
}

int dv_config_lookup_fuse_uring(const char *s, enum dv_fuse_uring *out)
{
	size_t i;

	for (i = 0; i < sizeof(fuse_uring_names) / sizeof(fuse_uring_names[0]); i++) {
		if (strcmp(s, fuse_uring_names[i]) == 0) {
			*out = (enum dv_fuse_uring)i;
			return 0;
		}
	}
	return -EINVAL;
}

bool dv_tier_type_is_folder(enum dv_tier_type type)
{
	return type == DV_TIER_TYPE_FOLDER || type == DV_TIER_TYPE_RAM;
}

int dv_config_lookup_tier_type(const char *s, enum dv_tier_type *out)
{
	size_t i;

	for (i = 0; i < NTYPES; i++) {
		if (strcmp(s, tier_type_names[i]) == 0) {
			*out = (enum dv_tier_type)i;
			return 0;
		}
	}
	return -EINVAL;
}

int dv_config_lookup_verify_mode(const char *s, enum dv_verify_mode *out)
{
	size_t i;

	for (i = 0; i < sizeof(verify_names) / sizeof(verify_names[0]); i++) {
		if (strcmp(s, verify_names[i]) == 0) {
			*out = (enum dv_verify_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *dv_config_default_state_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char *home = NULL;

	if (geteuid() == 0) {
		snprintf(buf, len, "/var/cache/datavo");
	} else if (dv_expand_path("~/.cache/altavo/datavo", &home) == 0) {
		snprintf(buf, len, "%s", home);
		free(home);
	} else if (xdg && xdg[0] == '/') {
		snprintf(buf, len, "%s/datavo", xdg);
	} else {
		return NULL; /* never a shared, predictable path such as /tmp */
	}
	return buf;
}

const char *dv_config_manifest_base(const struct dv_config *cfg, char *buf,
				    size_t len)
{
	char base[PATH_MAX];

	if (cfg->state_dir)
		snprintf(buf, len, "%s", cfg->state_dir);
	else if (dv_config_default_state_dir(base, sizeof(base)))
		snprintf(buf, len, "%s/manifests", base);
	else
		return NULL;
	return buf;
}

/* File mode */

/* The name of the first secret @cfg holds, or NULL. */
static const char *secret_field(const struct dv_config *cfg)
{
	const char *auth;

	for (size_t i = 0; i < cfg->ntiers; i++) {
		if (cfg->tiers[i].sas_token)
			return "sas_token";
	}
	auth = cfg->origin ? strstr(cfg->origin, "://") : NULL;
	if (auth && memchr(auth, '@', strcspn(auth + 3, "/?#") + 3))
		return "origin credentials";
	return NULL;
}

void dv_config_file_warnings(const struct dv_config *cfg, dv_config_warn_fn fn,
			     void *arg)
{
	const char *secret;
	char msg[PATH_MAX + 256];
	struct stat st;

	if (!cfg->path || stat(cfg->path, &st))
		return;
	secret = secret_field(cfg);
	if (secret && (st.st_mode & (S_IROTH | S_IRGRP))) {
		snprintf(msg, sizeof(msg),
			 "%s holds a secret (%s) and is readable by %s (mode %04o): chmod 600 %s",
			 cfg->path, secret,
			 st.st_mode & S_IROTH ? "everyone" : "its group",
			 (unsigned)(st.st_mode & 07777), cfg->path);
		fn(arg, msg);
	}
	if (st.st_mode & S_IWOTH) {
		snprintf(msg, sizeof(msg),
			 "%s is writable by everyone (mode %04o): anyone can redirect the cache",
			 cfg->path, (unsigned)(st.st_mode & 07777));
		fn(arg, msg);
	}
}
