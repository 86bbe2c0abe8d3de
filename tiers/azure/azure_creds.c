/*
 * Which credential an azure_blob tier uses, and its bearer token cache
 * (azure_creds.h has the order). The environment is read once, on first
 * use, under the lock; so is the choice of a token service. Tokens are
 * fetched by azure_token.c while the lock is held, so that concurrent
 * requests wait for one refresh instead of each asking for a token.
 */
#include "azure_creds.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/log.h"
#include "azure_token.h"
#include "tiers/net/call.h"
#include "tiers/net/http.h"

#define DEFAULT_AUTHORITY "https://login.microsoftonline.com"
#define DEFAULT_IMDS "http://169.254.169.254"
#define EXPIRY_SLACK 30      /* s: a token this close to expiry is not used */
#define FAIL_HOLD 5          /* s an error is repeated without asking */
#define TOKEN_CONNECT_TIMEOUT 5
#define PROBE_CONNECT_TIMEOUT 1

struct dv_az_creds {
	char *tier;
	char *sas_cfg;              /* secret */
	char *sas_source;
	char *url_account;
	char *mi_client_id;
	struct dv_http_config httpcfg; /* strings borrowed from the config */

	pthread_mutex_t lock;
	/* All below: protected by lock. */
	bool resolved;
	int resolve_err;            /* permanent: the environment is fixed */
	enum dv_az_auth_kind kind;
	char what[192];             /* dv_az_creds_describe() */
	const char *hint;
	char *sas;                  /* SAS: secret */
	struct dv_az_key key;       /* SHARED_KEY: secret */
	struct dv_az_token_req req; /* BEARER: strings below */
	char *authority, *tenant, *client_id, *secret, *file, *endpoint,
		*identity_header;
	bool imds_probe;            /* the default IMDS: probe it once */
	struct dv_http http;
	bool http_ready;
	struct dv_az_token token;
	time_t fail_until;
	int fail_err;
};

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int dv_az_creds_new(const struct dv_az_creds_opts *o,
		    struct dv_az_creds **out)
{
	struct dv_az_creds *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->tier = strdup(o->tier ? o->tier : "azure_blob");
	c->sas_cfg = dup_or_null(o->sas_token);
	c->sas_source = strdup(o->sas_source ? o->sas_source :
					       "sas_token in shards.yaml");
	c->url_account = dup_or_null(o->account);
	c->mi_client_id = dup_or_null(o->mi_client_id);
	if (o->http)
		c->httpcfg = *o->http;
	if (!c->tier || !c->sas_source || (o->sas_token && *o->sas_token && !c->sas_cfg) ||
	    (o->account && *o->account && !c->url_account) ||
	    (o->mi_client_id && *o->mi_client_id && !c->mi_client_id)) {
		dv_az_creds_free(c);
		return -ENOMEM;
	}
	snprintf(c->what, sizeof(c->what), "credentials not yet resolved");
	*out = c;
	return 0;
}

void dv_az_creds_free(struct dv_az_creds *c)
{
	if (!c)
		return;
	dv_az_token_release(&c->token);
	if (c->http_ready)
		dv_http_release(&c->http);
	dv_az_key_wipe(&c->key);
	dv_az_free_secret(c->sas);
	dv_az_free_secret(c->sas_cfg);
	dv_az_free_secret(c->secret);
	dv_az_free_secret(c->identity_header);
	free(c->authority);
	free(c->tenant);
	free(c->client_id);
	free(c->file);
	free(c->endpoint);
	free(c->tier);
	free(c->sas_source);
	free(c->url_account);
	free(c->mi_client_id);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* ---- resolution: keys and SAS ---- */

/*
 * A parser's result: -EINVAL (the credential is malformed) is logged as
 * "tier 'T': message" and refused with -EACCES; anything else passes.
 */
__attribute__((format(printf, 3, 4)))
static int refuse_malformed(const struct dv_az_creds *c, int ret,
			    const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (ret != -EINVAL)
		return ret;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dv_err("tier '%s': %s", c->tier, msg);
	return -EACCES;
}

static int use_sas(struct dv_az_creds *c, const char *sas, const char *from)
{
	int ret = refuse_malformed(c, dv_az_sas_clean(sas, &c->sas),
				   "the SAS token in %s is empty or holds characters a URL query cannot",
				   from);

	if (ret)
		return ret;
	c->kind = DV_AZ_AUTH_SAS;
	c->hint = "check that the SAS token is valid, not expired, and grants read, write and create on the container";
	snprintf(c->what, sizeof(c->what), "SAS token (%s)", from);
	return 0;
}

static int use_key(struct dv_az_creds *c, const char *account,
		   const char *key, const char *from)
{
	if (!account) {
		dv_err("tier '%s': %s holds an account key but the account is unknown: the container URL names none; set AZURE_STORAGE_ACCOUNT",
		       c->tier, from);
		return -EACCES;
	}
	if (dv_az_key_init(&c->key, account, key)) {
		dv_err("tier '%s': the account key in %s is not a base64 key (or the account name '%.64s' is too long)",
		       c->tier, from, account);
		return -EACCES;
	}
	c->kind = DV_AZ_AUTH_SHARED_KEY;
	c->hint = "check the account key (AZURE_STORAGE_KEY or the connection string's AccountKey) and that the account name matches the container URL";
	snprintf(c->what, sizeof(c->what), "Shared Key (%s, account '%s')",
		 from, c->key.account);
	return 0;
}

static const char *account_for_key(struct dv_az_creds *c)
{
	return c->url_account ? c->url_account : env("AZURE_STORAGE_ACCOUNT");
}

/* 1 when the connection string gave nothing usable. */
static int use_connstr(struct dv_az_creds *c, const char *s)
{
	static const char from[] = "AZURE_STORAGE_CONNECTION_STRING";
	struct dv_az_connstr cs;
	int ret = refuse_malformed(c, dv_az_connstr_parse(s, &cs),
				   "%s is not a connection string (Key=Value;…)",
				   from);

	if (ret)
		return ret;
	if (cs.key)
		ret = use_key(c, cs.account ? cs.account : account_for_key(c),
			      cs.key, from);
	else if (cs.sas)
		ret = use_sas(c, cs.sas, from);
	else
		ret = 1;
	dv_az_connstr_release(&cs);
	return ret;
}

/* ---- resolution: the token chain ---- */

static bool loopback_host(const char *host, size_t len)
{
	return (len >= 4 && strncmp(host, "127.", 4) == 0) ||
	       (len == 9 && strncmp(host, "localhost", 9) == 0) ||
	       (len >= 5 && strncmp(host, "[::1]", 5) == 0);
}

/* AZURE_AUTHORITY_HOST as the SDK reads it: https:// when no scheme is
 * given, no '/' at the end; http only to a loopback host. */
static int authority(struct dv_az_creds *c)
{
	const char *v = env("AZURE_AUTHORITY_HOST");
	const char *host;
	size_t len;

	if (!v)
		v = DEFAULT_AUTHORITY;
	if (strstr(v, "://")) {
		c->authority = strdup(v);
	} else if (asprintf(&c->authority, "https://%s", v) < 0) {
		c->authority = NULL;
	}
	if (!c->authority)
		return -ENOMEM;
	len = strlen(c->authority);
	while (len > 0 && c->authority[len - 1] == '/')
		c->authority[--len] = '\0';
	if (strncmp(c->authority, "https://", 8) == 0)
		return 0;
	host = c->authority + 7;
	if (strncmp(c->authority, "http://", 7) == 0 &&
	    loopback_host(host, strcspn(host, ":/")))
		return 0;
	dv_err("tier '%s': AZURE_AUTHORITY_HOST must be an https URL (plain http only on a loopback host)",
	       c->tier);
	return -EACCES;
}

static bool valid_tenant(const char *t)
{
	for (const char *p = t; *p; p++) {
		if (!isalnum((unsigned char)*p) && !strchr("-._", *p))
			return false;
	}
	return *t != '\0';
}

static int chain_entra(struct dv_az_creds *c, enum dv_az_token_source src)
{
	int ret;

	if (!valid_tenant(env("AZURE_TENANT_ID"))) {
		dv_err("tier '%s': AZURE_TENANT_ID is not a tenant id", c->tier);
		return -EACCES;
	}
	ret = authority(c);
	if (ret)
		return ret;
	c->tenant = strdup(env("AZURE_TENANT_ID"));
	c->client_id = strdup(env("AZURE_CLIENT_ID"));
	if (src == DV_AZ_TOKEN_CLIENT_SECRET)
		c->secret = strdup(env("AZURE_CLIENT_SECRET"));
	else
		c->file = strdup(env("AZURE_FEDERATED_TOKEN_FILE"));
	if (!c->tenant || !c->client_id || (!c->secret && !c->file))
		return -ENOMEM;
	c->req = (struct dv_az_token_req){
		.source = src, .authority = c->authority, .tenant = c->tenant,
		.client_id = c->client_id, .secret = c->secret,
		.assertion_file = c->file,
	};
	snprintf(c->what, sizeof(c->what),
		 "bearer token (%s, tenant '%.40s', client '%.40s')",
		 dv_az_token_source_name(src), c->tenant, c->client_id);
	return 0;
}

static int chain_managed(struct dv_az_creds *c)
{
	const char *id = c->mi_client_id ? c->mi_client_id :
					   env("AZURE_CLIENT_ID");
	const char *ep = env("IDENTITY_ENDPOINT");
	const char *hdr = env("IDENTITY_HEADER");
	size_t len;

	c->client_id = dup_or_null(id);
	if (ep && hdr) {
		c->req.source = DV_AZ_TOKEN_APP_SERVICE;
		c->endpoint = strdup(ep);
		c->identity_header = strdup(hdr);
	} else {
		c->req.source = DV_AZ_TOKEN_IMDS;
		ep = env("AZURE_POD_IDENTITY_AUTHORITY_HOST");
		c->imds_probe = ep == NULL;
		c->endpoint = strdup(ep ? ep : DEFAULT_IMDS);
	}
	if ((id && !c->client_id) || !c->endpoint ||
	    (c->req.source == DV_AZ_TOKEN_APP_SERVICE && !c->identity_header))
		return -ENOMEM;
	len = strlen(c->endpoint);
	while (c->req.source == DV_AZ_TOKEN_IMDS && len > 0 &&
	       c->endpoint[len - 1] == '/')
		c->endpoint[--len] = '\0';
	c->req.client_id = c->client_id;
	c->req.endpoint = c->endpoint;
	c->req.identity_header = c->identity_header;
	snprintf(c->what, sizeof(c->what), "bearer token (%s, %s%.40s%s)",
		 dv_az_token_source_name(c->req.source),
		 id ? "client '" : "system-assigned identity", id ? id : "",
		 id ? "'" : "");
	return 0;
}

static int chain(struct dv_az_creds *c)
{
	struct dv_http_config hc = c->httpcfg;
	int ret;

	if (env("AZURE_TENANT_ID") && env("AZURE_CLIENT_ID") &&
	    env("AZURE_CLIENT_SECRET"))
		ret = chain_entra(c, DV_AZ_TOKEN_CLIENT_SECRET);
	else if (env("AZURE_FEDERATED_TOKEN_FILE") && env("AZURE_CLIENT_ID") &&
		 env("AZURE_TENANT_ID"))
		ret = chain_entra(c, DV_AZ_TOKEN_WORKLOAD);
	else
		ret = chain_managed(c);
	if (ret)
		return ret;
	c->kind = DV_AZ_AUTH_BEARER;
	c->hint = "check that the identity has a Storage Blob Data Contributor role on the container";
	if (!hc.connect_timeout || hc.connect_timeout > TOKEN_CONNECT_TIMEOUT)
		hc.connect_timeout = TOKEN_CONNECT_TIMEOUT;
	ret = dv_http_init(&c->http, &hc);
	c->http_ready = ret == 0;
	return ret;
}

static int resolve(struct dv_az_creds *c)
{
	const char *v;
	int ret;

	if (c->sas_cfg)
		return use_sas(c, c->sas_cfg, c->sas_source);
	v = env("AZURE_STORAGE_KEY");
	if (v)
		return use_key(c, account_for_key(c), v, "AZURE_STORAGE_KEY");
	v = env("AZURE_STORAGE_CONNECTION_STRING");
	if (v) {
		ret = use_connstr(c, v);
		if (ret <= 0)
			return ret;
		dv_warn("tier '%s': AZURE_STORAGE_CONNECTION_STRING has neither AccountKey nor SharedAccessSignature: ignored",
			c->tier);
	}
	v = env("AZURE_STORAGE_SAS_TOKEN");
	if (v)
		return use_sas(c, v, "AZURE_STORAGE_SAS_TOKEN");
	return chain(c);
}

/* ---- tokens ---- */

static bool usable(const struct dv_az_token *t, time_t now)
{
	return t->access_token && now + EXPIRY_SLACK < t->expires;
}

/*
 * The SDK's test for the default IMDS address: any HTTP answer (even an
 * error) means an instance metadata service is there. No answer: this is
 * not an Azure machine, and there is no credential to be had.
 */
static int probe_imds(struct dv_az_creds *c)
{
	struct dv_http_config hc = { .connect_timeout = PROBE_CONNECT_TIMEOUT };
	struct dv_http_request req = { .method = "GET" };
	struct dv_http_response resp;
	struct dv_http h;
	char *url;
	int ret;

	if (asprintf(&url, "%s/metadata/identity/oauth2/token", c->endpoint) < 0)
		return -ENOMEM;
	ret = dv_http_init(&h, &hc);
	if (ret == 0) {
		req.url = url;
		ret = dv_http_perform(&h, &req, &resp);
		dv_http_release(&h);
	}
	free(url);
	if (ret == 0)
		return 0;
	dv_err("tier '%s': no credentials: none of sas_token, AZURE_STORAGE_KEY, AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_SAS_TOKEN, AZURE_CLIENT_SECRET or AZURE_FEDERATED_TOKEN_FILE is set, and no managed identity endpoint answered at %s",
	       c->tier, c->endpoint);
	return -EACCES;
}

static int fresh_token(struct dv_az_creds *c)
{
	time_t now = time(NULL);
	struct dv_az_token t;
	int ret;

	if (c->token.access_token &&
	    now < dv_http_refresh_at(c->token.obtained, c->token.expires))
		return 0;
	if (now < c->fail_until)
		return usable(&c->token, now) ? 0 : c->fail_err;
	if (c->imds_probe) {
		ret = probe_imds(c);
		if (ret) {
			c->resolve_err = ret;
			return ret;
		}
		c->imds_probe = false;
	}
	ret = dv_az_token_fetch(&c->http, c->tier, &c->req, &t);
	if (ret == 0) {
		dv_az_token_release(&c->token);
		c->token = t;
		c->fail_until = 0;
		return 0;
	}
	c->fail_until = now + FAIL_HOLD;
	c->fail_err = ret;
	if (!usable(&c->token, now))
		return ret;
	dv_warn("tier '%s': token refresh failed; the current token is valid for %lld s more",
		c->tier, (long long)(c->token.expires - now));
	return 0;
}

static int bearer_header(struct dv_az_creds *c, struct dv_az_auth *a)
{
	if (asprintf(&a->header, "Authorization: Bearer %s",
		     c->token.access_token) < 0) {
		a->header = NULL;
		return -ENOMEM;
	}
	return 0;
}

int dv_az_creds_get(struct dv_az_creds *c, struct dv_az_auth *a)
{
	int ret;

	memset(a, 0, sizeof(*a));
	pthread_mutex_lock(&c->lock);
	if (!c->resolved) {
		c->resolved = true;
		c->resolve_err = resolve(c);
		if (c->resolve_err == 0)
			dv_info("tier '%s': authorizing with %s", c->tier,
				c->what);
	}
	ret = c->resolve_err;
	if (ret)
		goto out;
	a->kind = c->kind;
	if (c->kind == DV_AZ_AUTH_SAS) {
		a->sas = c->sas;
	} else if (c->kind == DV_AZ_AUTH_SHARED_KEY) {
		a->key = &c->key;
	} else {
		ret = fresh_token(c);
		if (ret == 0)
			ret = bearer_header(c, a);
	}
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}

void dv_az_auth_release(struct dv_az_auth *a)
{
	dv_az_free_secret(a->header);
	memset(a, 0, sizeof(*a));
}

const char *dv_az_creds_describe(struct dv_az_creds *c, char *buf,
				 size_t len)
{
	pthread_mutex_lock(&c->lock);
	snprintf(buf, len, "%s", c->what);
	pthread_mutex_unlock(&c->lock);
	return buf;
}

const char *dv_az_creds_hint(struct dv_az_creds *c)
{
	const char *h;

	pthread_mutex_lock(&c->lock);
	h = c->hint ? c->hint : "check the tier's credentials";
	pthread_mutex_unlock(&c->lock);
	return h;
}
