/*
 * The AWS credential chain (see aws_creds.h): the cache, its refresh, and
 * the local sources (environment, shared credentials and config files).
 * The network sources are in aws_creds_remote.c.
 *
 * The shared files are INI, read by hand: "[section]" lines, "key = value"
 * lines, '#' and ';' comments; indented lines belong to a nested block
 * ("s3 =" settings) and are skipped. In the config file a profile is
 * "[profile NAME]", except "[default]".
 */
#include "aws_creds_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/log.h"
#include "config/util.h"

#define INI_MAX (1u << 20)

/* ---- small helpers ---- */

int dv_aws_copy(char *dst, size_t cap, const char *src, size_t len)
{
	if (len >= cap)
		return -EPROTO;
	memcpy(dst, src, len);
	dst[len] = '\0';
	return 0;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

void dv_aws_creds_wipe(struct dv_aws_creds *c)
{
	/* volatile: a plain memset before free may be optimized away. */
	volatile char *p = (volatile char *)c;

	for (size_t i = 0; i < sizeof(*c); i++)
		p[i] = 0;
}


/* ---- INI ---- */

static const char *trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/* Is "[ ... ]" line @l the section @want? Inner blanks are not significant. */
static bool section_is(char *l, const char *want)
{
	char *end = strrchr(l, ']');
	const char *name;
	char norm[256];
	size_t n = 0;

	if (!end)
		return false;
	*end = '\0';
	name = trim(l + 1);
	/* "profile   x" and "profile x" are the same section. */
	for (const char *p = name; *p && n + 1 < sizeof(norm); p++) {
		if ((*p == ' ' || *p == '\t') && n > 0 && norm[n - 1] == ' ')
			continue;
		norm[n++] = (*p == '\t') ? ' ' : *p;
	}
	norm[n] = '\0';
	return strcmp(norm, want) == 0;
}

/* The value of @key in [@section] of @text (modified), or NULL. */
static const char *ini_lookup(char *text, const char *section, const char *key)
{
	bool inside = false;
	char *save = NULL;

	for (char *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		char *eq;

		if (*l == ' ' || *l == '\t')
			continue; /* nested block */
		if (*l == '[') {
			inside = section_is(l, section);
			continue;
		}
		if (!inside || *l == '#' || *l == ';')
			continue;
		eq = strchr(l, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (strcasecmp(trim(l), key) == 0)
			return trim(eq + 1);
	}
	return NULL;
}

/* Looks up one key (a fresh copy of the file for each lookup). */
static int ini_get(const char *path, const char *section, const char *key,
		   char *buf, size_t cap)
{
	char *text;
	const char *v;
	size_t len;
	int ret = dv_read_file(path, INI_MAX, &text, &len);

	if (ret)
		return ret;
	v = ini_lookup(text, section, key);
	ret = v && *v ? dv_aws_copy(buf, cap, v, strlen(v)) : -ENOENT;
	free(text);
	return ret;
}

static char *home_file(const char *var, const char *rel)
{
	const char *home = env("HOME");
	char *path = NULL;

	if (env(var))
		return strdup(env(var));
	if (!home || asprintf(&path, "%s/%s", home, rel) < 0)
		return NULL;
	return path;
}

static const char *profile_name(void)
{
	return env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
}

/* The config file's section for the profile. */
static void config_section(char *buf, size_t len)
{
	const char *p = profile_name();

	if (strcmp(p, "default") == 0)
		snprintf(buf, len, "default");
	else
		snprintf(buf, len, "profile %s", p);
}

int dv_aws_region(char *buf, size_t len)
{
	char section[300];
	char *path;
	int ret;

	if (env("AWS_REGION"))
		return dv_aws_copy(buf, len, env("AWS_REGION"),
				   strlen(env("AWS_REGION"))) ? -ENOENT : 0;
	if (env("AWS_DEFAULT_REGION"))
		return dv_aws_copy(buf, len, env("AWS_DEFAULT_REGION"),
				   strlen(env("AWS_DEFAULT_REGION"))) ? -ENOENT : 0;
	path = home_file("AWS_CONFIG_FILE", ".aws/config");
	if (!path)
		return -ENOENT;
	config_section(section, sizeof(section));
	ret = ini_get(path, section, "region", buf, len);
	free(path);
	return ret ? -ENOENT : 0;
}

/* ---- the local sources ---- */

static int from_env(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	const char *ak = env("AWS_ACCESS_KEY_ID");
	const char *sk = env("AWS_SECRET_ACCESS_KEY");
	const char *tok = env("AWS_SESSION_TOKEN");

	if (!ak && !sk)
		return -ENOENT;
	if (!ak || !sk) {
		dv_warn("AWS credentials: %s is set but %s is not; ignoring the environment",
			ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
			ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
		return -ENOENT;
	}
	if (dv_aws_copy(out->access_key, sizeof(out->access_key), ak, strlen(ak)) ||
	    dv_aws_copy(out->secret_key, sizeof(out->secret_key), sk, strlen(sk)) ||
	    (tok && dv_aws_copy(out->session_token, sizeof(out->session_token),
				tok, strlen(tok)))) {
		dv_warn("AWS credentials: a value in the environment is too long");
		return -EINVAL;
	}
	out->source = "environment";
	return 0;
}

/* Static keys in [@section] of @path; -ENOENT when the file or keys lack. */
static int from_ini(const char *path, const char *section,
		    struct dv_aws_creds *out)
{
	int ret = ini_get(path, section, "aws_access_key_id", out->access_key,
			  sizeof(out->access_key));

	if (ret == -ENOENT || ret == -ENOTDIR)
		return -ENOENT;
	if (ret == 0)
		ret = ini_get(path, section, "aws_secret_access_key",
			      out->secret_key, sizeof(out->secret_key));
	if (ret == -ENOENT) {
		dv_warn("AWS credentials: %s [%s] has aws_access_key_id but no aws_secret_access_key",
			path, section);
		return -ENOENT;
	}
	if (ret) {
		dv_warn("AWS credentials: cannot read %s: %s", path,
			strerror(-ret));
		return ret == -EPROTO ? -EINVAL : -ENOENT;
	}
	ret = ini_get(path, section, "aws_session_token", out->session_token,
		      sizeof(out->session_token));
	return ret == -EPROTO ? -EINVAL : 0;
}

static int from_files(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	char section[300];
	char *path = home_file("AWS_SHARED_CREDENTIALS_FILE",
			       ".aws/credentials");
	int ret = -ENOENT;

	if (path) {
		ret = from_ini(path, profile_name(), out);
		out->source = "shared credentials file";
		free(path);
	}
	if (ret != -ENOENT)
		return ret;
	path = home_file("AWS_CONFIG_FILE", ".aws/config");
	if (!path)
		return -ENOENT;
	config_section(section, sizeof(section));
	ret = from_ini(path, section, out);
	out->source = "config file";
	free(path);
	return ret;
}

/* ---- the chain ---- */

typedef int (*source_fn)(struct dv_aws_chain *c, struct dv_aws_creds *out);

static int resolve(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	static const source_fn sources[] = {
		from_env, from_files, dv_aws_from_web_identity,
		dv_aws_from_ecs, dv_aws_from_imds,
	};

	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
		int ret;

		dv_aws_creds_wipe(out);
		ret = sources[i](c, out);
		if (ret != -ENOENT)
			return ret;
	}
	dv_aws_creds_wipe(out);
	dv_err("no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
	       "a profile in ~/.aws/credentials (AWS_PROFILE), AWS_WEB_IDENTITY_TOKEN_FILE "
	       "and AWS_ROLE_ARN, or run with an ECS task role or an EC2 instance profile");
	return -ENOKEY;
}

static time_t real_now(void)
{
	return time(NULL);
}

int dv_aws_chain_new(const struct dv_http_config *http,
		     struct dv_aws_chain **out)
{
	/* Token services answer in milliseconds or not at all. */
	const struct dv_http_config meta = {
		.connect_timeout = 1, .low_speed_time = 2, .low_speed_limit = 1,
		.retries = 1,
	};
	struct dv_http_config sts = { 0 };
	struct dv_aws_chain *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	if (http)
		sts = *http;
	if (!sts.ca_file && env("AWS_CA_BUNDLE"))
		sts.ca_file = (char *)env("AWS_CA_BUNDLE");
	if (dv_http_init(&c->sts_http, &sts)) {
		free(c);
		return -ENOMEM;
	}
	if (dv_http_init(&c->meta_http, &meta)) {
		dv_http_release(&c->sts_http);
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->now = real_now;
	*out = c;
	return 0;
}

void dv_aws_chain_free(struct dv_aws_chain *c)
{
	if (!c)
		return;
	dv_http_release(&c->sts_http);
	dv_http_release(&c->meta_http);
	pthread_mutex_destroy(&c->lock);
	dv_aws_creds_wipe(&c->cached);
	free(c->ecs_host);
	free(c);
}

void dv_aws_chain_set_clock(struct dv_aws_chain *c, time_t (*now)(void))
{
	c->now = now ? now : real_now;
}

void dv_aws_chain_set_ecs_host(struct dv_aws_chain *c, const char *host)
{
	free(c->ecs_host);
	c->ecs_host = host ? strdup(host) : NULL;
}

void dv_aws_chain_invalidate(struct dv_aws_chain *c)
{
	pthread_mutex_lock(&c->lock);
	dv_aws_creds_wipe(&c->cached);
	c->have = false;
	c->failed_err = 0;
	pthread_mutex_unlock(&c->lock);
}

static bool stale(const struct dv_aws_chain *c, time_t now)
{
	return c->refresh_at && now >= c->refresh_at;
}

/* With c->lock held: resolve again and keep what is best. */
static int refresh(struct dv_aws_chain *c, time_t now)
{
	struct dv_aws_creds *fresh = malloc(sizeof(*fresh));
	int ret;

	if (!fresh)
		return -ENOMEM;
	ret = resolve(c, fresh);
	if (ret == 0) {
		if (!c->have)
			dv_info("AWS credentials from the %s", fresh->source);
		else
			dv_debug("AWS credentials refreshed from the %s",
				 fresh->source);
		c->cached = *fresh;
		c->refresh_at = fresh->expiration ?
			dv_http_refresh_at(now, fresh->expiration) : 0;
		c->have = true;
		c->failed_err = 0;
	} else if (c->have && now < c->cached.expiration) {
		dv_warn("AWS credentials: refresh failed; the current ones stay in use until they expire");
		c->failed_at = now;
		ret = 0;
	} else {
		c->have = false;
		c->failed_at = now;
		c->failed_err = ret;
	}
	dv_aws_creds_wipe(fresh);
	free(fresh);
	return ret;
}

int dv_aws_chain_get(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	time_t now;
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	now = c->now();
	if (c->have && !stale(c, now))
		goto out_copy;
	/* A failure is remembered for a while: reads must not each wait. */
	if (c->failed_at && now >= c->failed_at &&
	    now < c->failed_at + DV_AWS_RETRY_AFTER) {
		if (c->have && now < c->cached.expiration)
			goto out_copy;
		if (!c->have && c->failed_err) {
			ret = c->failed_err;
			goto out;
		}
	}
	ret = refresh(c, now);
	if (ret)
		goto out;
out_copy:
	*out = c->cached;
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}
