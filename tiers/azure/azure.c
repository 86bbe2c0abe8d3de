/*
 * The azure_blob tier (azure.h): construction, the request layer (URL,
 * x-ms-date and x-ms-version, authorization, errors, retries), lookup
 * and download (whole into a sink, or a part into a buffer). Uploads are in azure_put.c, credentials in azure_creds.c,
 * Shared Key signing in azure_sign.c.
 *
 * Errors are mapped here, once: 404 is a miss; 401/403 is -EACCES with a
 * line that names the tier, the request, the credential in use and what
 * to check (never the credential itself); the rest is -EIO or -ETIMEDOUT
 * after the retries of the http: section. Retries, backoff and resuming
 * are the network layer's (tiers/net/call.h); each attempt is signed anew.
 * Signed requests never follow redirects (the http.h default).
 */
#include "azure_impl.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/log.h"
#include "config/util.h"
#include "tiers/net/call.h"
#include "tiers/net/http_range.h"
#include "tiers/net/http_sink.h"

#define SHOWN_MAX 1024

struct azure_tier *dv_azure_downcast(struct dv_tier *t)
{
	return dv_tier_downcast(t, &dv_tier_azure_ops);
}

/* ---- URLs ---- */

static bool ip_or_localhost(const char *host)
{
	if (host[0] == '[' || strcmp(host, "localhost") == 0)
		return true;
	for (const char *p = host; *p; p++) {
		if (!isdigit((unsigned char)*p) && *p != '.')
			return false;
	}
	return true;
}

static bool loopback(const char *host)
{
	return strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
	       strcmp(host, "[::1]") == 0;
}

/* The first segment of @path ("/a/b" → "a"), or NULL. */
static char *first_segment(const char *path)
{
	size_t len;

	while (*path == '/')
		path++;
	len = strcspn(path, "/");
	return len ? strndup(path, len) : NULL;
}

int dv_azure_url_account(const char *url, char **account)
{
	CURLU *u = curl_url();
	char *host = NULL, *path = NULL;
	const char *dot;

	*account = NULL;
	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		goto out;
	dot = strchr(host, '.');
	if (ip_or_localhost(host))
		*account = first_segment(path);
	else if (dot && strncmp(dot, ".blob.", 6) == 0)
		*account = strndup(host, (size_t)(dot - host));
out:
	curl_free(host);
	curl_free(path);
	curl_url_cleanup(u);
	return 0;
}

static void strip_slashes(char *s)
{
	size_t len = strlen(s);

	while (len > 0 && s[len - 1] == '/')
		s[--len] = '\0';
}

/* scheme://host[:port]<path>, no query, no '/' at the end. */
static int url_base(CURLU *u, char **out, char **host_out)
{
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	int ret = -EINVAL;

	if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK)
		goto out;
	curl_url_get(u, CURLUPART_PORT, &port, CURLU_NO_DEFAULT_PORT);
	ret = -ENOMEM;
	if (asprintf(out, "%s://%s%s%s%s", scheme, host, port ? ":" : "",
		     port ? port : "", path) < 0) {
		*out = NULL;
		goto out;
	}
	*host_out = strdup(host);
	ret = *host_out ? 0 : -ENOMEM;
	strip_slashes(*out);
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	return ret;
}

static int parse_url(const char *url, CURLU **u)
{
	*u = curl_url();
	if (!*u)
		return -ENOMEM;
	return curl_url_set(*u, CURLUPART_URL, url, 0) == CURLUE_OK ? 0 :
								     -EINVAL;
}

/* The last non-empty path segment of @base ("…/acct/cont" → "cont"). */
static const char *last_segment(const char *base)
{
	const char *slash = strrchr(base, '/');

	return slash ? slash + 1 : base;
}

/*
 * Sets base_url, base_path, plain_http and loopback from container_url
 * (and endpoint); *@sas gets container_url's query, if any.
 */
static int setup_urls(struct azure_tier *a, const struct dv_tier_config *tc,
		      char **sas, char *err, size_t errlen)
{
	CURLU *u = NULL, *e = NULL;
	char *query = NULL, *base = NULL, *host = NULL, *ehost = NULL;
	const char *path;
	int ret;

	ret = parse_url(tc->container_url, &u);
	if (ret == 0)
		ret = url_base(u, &base, &host);
	if (ret)
		goto bad;
	if (curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK && *query &&
	    !(*sas = strdup(query)))
		ret = -ENOMEM;
	path = strstr(base, "://") + 3;
	path += strcspn(path, "/");
	if (ret == 0 && !*path) {
		snprintf(err, errlen,
			 "tier '%s': container_url names no container (https://<account>.blob.core.windows.net/<container>)",
			 a->base.name);
		ret = -EINVAL;
		goto out;
	}
	if (ret == 0 && tc->endpoint) {
		char *ebase = NULL;

		ret = parse_url(tc->endpoint, &e);
		if (ret == 0)
			ret = url_base(e, &ebase, &ehost);
		if (ret)
			goto bad;
		if (asprintf(&a->base_url, "%s/%s", ebase, last_segment(base)) < 0)
			a->base_url = NULL;
		free(ebase);
		free(host);
		host = ehost;
		ehost = NULL;
	} else if (ret == 0) {
		a->base_url = base;
		base = NULL;
	}
	if (ret == 0 && !a->base_url)
		ret = -ENOMEM;
	if (ret)
		goto out;
	a->plain_http = strncmp(a->base_url, "http://", 7) == 0;
	a->loopback = loopback(host);
	path = strstr(a->base_url, "://") + 3;
	a->base_path = path + strcspn(path, "/");
	goto out;
bad:
	if (ret == -EINVAL)
		snprintf(err, errlen, "tier '%s': %s is not a valid URL",
			 a->base.name, e ? "endpoint" : "container_url");
out:
	curl_free(query);
	free(base);
	free(host);
	free(ehost);
	curl_url_cleanup(u);
	curl_url_cleanup(e);
	return ret;
}

/*
 * The prefix is kept to characters that URLs never encode, so the path we
 * send, the path we sign and the blob name are one string: Shared Key
 * implementations differ on encoded paths, and none is at stake here.
 */
static int setup_prefix(struct azure_tier *a, const char *prefix, char *err,
			size_t errlen)
{
	while (prefix && *prefix == '/')
		prefix++;
	if (!prefix)
		prefix = "";
	for (const char *p = prefix; *p; p++) {
		if (isalnum((unsigned char)*p) || strchr("-._~/", *p))
			continue;
		snprintf(err, errlen,
			 "tier '%s': prefix may hold only letters, digits and - . _ ~ /",
			 a->base.name);
		return -EINVAL;
	}
	if (asprintf(&a->blob_prefix, "%s%s", prefix, *prefix ? "/" : "") < 0) {
		a->blob_prefix = NULL;
		return -ENOMEM;
	}
	/* "a//b/" → no empty segments, one '/' at the end */
	for (char *d = a->blob_prefix, *s = d;; s++) {
		if (*s == '/' && d > a->blob_prefix && d[-1] == '/')
			continue;
		*d++ = *s;
		if (!*s)
			break;
	}
	return 0;
}

void dv_azure_shown(struct azure_tier *a, const char *hash, char *buf,
		    size_t len)
{
	snprintf(buf, len, "%s/%s%s.tar", a->base_url, a->blob_prefix, hash);
}

/* ---- one request ---- */

static int status_errno(long status)
{
	/* 416: the blob is shorter than we were told: not this shard. */
	return status == 416 ? -EIO : dv_http_status_errno(status);
}

/* The <Code> of an error body ("AuthenticationFailed"): ops->error_code. */
static void error_code(const struct dv_http_response *resp, char *code,
		       size_t len)
{
	const char *s = strstr(resp->errbody, "<Code>");
	size_t n = 0;

	code[0] = '\0';
	if (!s)
		return;
	s += 6;
	while (n + 1 < len && isalnum((unsigned char)s[n]))
		n++;
	if (s[n] != '<')
		return;
	memcpy(code, s, n);
	code[n] = '\0';
}

/* The request URL; it may hold the SAS (a secret): free with
 * dv_az_free_secret(). */
static char *request_url(struct azure_tier *a, const struct az_call *c,
			 const char *sas)
{
	const char *q = c->query;
	char *url;

	if (asprintf(&url, "%s/%s%s.tar%s%s%s%s", a->base_url, a->blob_prefix,
		     c->hash, q || sas ? "?" : "", q ? q : "",
		     q && sas ? "&" : "", sas ? sas : "") < 0)
		return NULL;
	return url;
}

static int sign(struct azure_tier *a, const struct az_call *c,
		const struct dv_az_key *key, const char *const *headers,
		char *out, size_t outlen)
{
	struct dv_az_sign_input in = {
		.method = c->method,
		.query = c->query,
		.headers = headers,
		.content_length = c->body_fd_len ? c->body_fd_len : c->body_len,
	};
	char *path;
	int ret;

	if (asprintf(&path, "%s/%s%s.tar", a->base_path, a->blob_prefix,
		     c->hash) < 0)
		return -ENOMEM;
	in.path = path;
	ret = dv_az_sharedkey(key, &in, out, outlen);
	free(path);
	return ret;
}

/* Fills @h (at least 10 slots): version, date, the call's, Range. */
static size_t base_headers(const struct az_call *c, const char **h,
			   char *date, size_t datelen, char *range,
			   size_t rangelen)
{
	char when[64];
	size_t n = 0;

	dv_az_http_date(time(NULL), when, sizeof(when));
	snprintf(date, datelen, "x-ms-date: %s", when);
	h[n++] = "x-ms-version: " DV_AZURE_VERSION;
	h[n++] = date;
	for (size_t i = 0; i < 4 && c->headers[i]; i++)
		h[n++] = c->headers[i];
	if (c->range) {
		snprintf(range, rangelen, "Range: %s", c->range);
		h[n++] = range;
	}
	h[n] = NULL;
	return n;
}

static int authorize(struct azure_tier *a, const struct az_call *c,
		     const struct dv_az_auth *auth, const char **h, size_t n,
		     char *sig, size_t siglen)
{
	int ret;

	if (auth->kind == DV_AZ_AUTH_BEARER) {
		if (a->plain_http && !a->loopback) {
			dv_err("tier '%s': refusing to send a bearer token over plain http to %s: use https",
			       a->base.name, a->base_url);
			return -EACCES;
		}
		h[n] = auth->header;
	} else if (auth->kind == DV_AZ_AUTH_SHARED_KEY) {
		/* sig: "Authorization: SharedKey account:signature" */
		memcpy(sig, "Authorization: ", 15);
		ret = sign(a, c, auth->key, h, sig + 15, siglen - 15);
		if (ret) {
			dv_err("tier '%s': cannot sign a request: %s",
			       a->base.name, strerror(-ret));
			return ret == -ENOMEM ? ret : -EIO;
		}
		h[n] = sig;
	}
	return 0;
}

int dv_azure_attempt(struct azure_tier *a, struct az_call *c,
		     struct dv_http_response *resp)
{
	char date[96], range[96], sig[DV_AZ_AUTH_MAX + 32];
	const char *h[12];
	struct dv_az_auth auth;
	size_t n;
	char *url = NULL;
	int ret;

	memset(resp, 0, sizeof(*resp));
	ret = dv_az_creds_get(a->creds, &auth);
	if (ret) {
		snprintf(resp->detail, sizeof(resp->detail),
			 "no credentials to authorize the request");
		return ret;
	}
	n = base_headers(c, h, date, sizeof(date), range, sizeof(range));
	h[n + 1] = NULL;
	ret = authorize(a, c, &auth, h, n, sig, sizeof(sig));
	if (ret)
		goto out;
	url = request_url(a, c, auth.kind == DV_AZ_AUTH_SAS ? auth.sas : NULL);
	if (!url) {
		ret = -ENOMEM;
		goto out;
	}
	ret = dv_http_perform(&a->http, &(struct dv_http_request){
		.method = c->method, .url = url, .headers = h,
		.body_fd = c->body_fd, .body_fd_len = c->body_fd_len,
		.body = c->body, .body_len = c->body_len,
		.on_start = c->on_start, .on_body = c->on_body, .arg = c->arg,
		.expect_bytes = c->expect_bytes,
	}, resp);
	if (ret == 0)
		ret = status_errno(resp->status);
out:
	explicit_bzero(sig, sizeof(sig));
	dv_az_free_secret(url);
	dv_az_auth_release(&auth);
	return ret;
}

/*
 * The final line of a failed call (the call itself is quiet): a miss is
 * the caller's to report; a refusal names the credential in use and what
 * to check, at most once per DV_HTTP_DENIED_EVERY seconds; a refusal with
 * no answer (no credential, a bearer token over plain http) was logged
 * where it was decided.
 */
static void log_failure(struct azure_tier *a, const struct dv_http_call *call,
			const struct dv_http_response *resp)
{
	char why[DV_HTTP_DETAIL_MAX + 96], code[64], creds[192];
	int err = call->last_err;

	if (err == -ENOENT || (err == -EACCES && !resp->status))
		return;
	code[0] = '\0';
	if (resp->status >= 300)
		error_code(resp, code, sizeof(code));
	if (err == -EACCES) {
		dv_http_log_denied(&a->denied, call->who,
				   "HTTP %ld%s%s to %s with %s: %s",
				   resp->status, code[0] ? " " : "", code,
				   call->what,
				   dv_az_creds_describe(a->creds, creds,
							sizeof(creds)),
				   dv_az_creds_hint(a->creds));
		return;
	}
	dv_http_describe(err, resp, code, why, sizeof(why));
	if (call->attempts > 1)
		dv_err("%s: %s failed after %u attempts: %s", call->who,
		       call->what, call->attempts, why);
	else
		dv_err("%s: %s failed: %s", call->who, call->what, why);
}

int dv_azure_run(struct azure_tier *a, const struct az_call *c,
		 const struct dv_http_call_ops *ops, void *ctx,
		 struct dv_http_response *resp)
{
	char who[256], what[SHOWN_MAX + 16], shown[SHOWN_MAX];
	struct dv_http_call call = {
		.http = &a->http, .ops = ops, .ctx = ctx, .who = who,
		.what = what, .denied = &a->denied,
		.flags = DV_HTTP_CALL_QUIET,
	};
	int ret;

	snprintf(who, sizeof(who), "tier '%s'", a->base.name);
	dv_azure_shown(a, c->hash, shown, sizeof(shown));
	snprintf(what, sizeof(what), "%s %s", c->method, shown);
	ret = dv_http_call_run(&call, resp);
	if (ret < 0)
		log_failure(a, &call, resp);
	return ret;
}

struct plain {
	struct azure_tier *a;
	struct az_call *c;
};

static int plain_attempt(void *ctx, struct dv_http_response *resp)
{
	struct plain *p = ctx;

	return dv_azure_attempt(p->a, p->c, resp);
}

static const struct dv_http_call_ops plain_ops = {
	.attempt = plain_attempt,
	.error_code = error_code,
};

int dv_azure_request(struct azure_tier *a, struct az_call *c,
		     struct dv_http_response *resp)
{
	struct plain p = { .a = a, .c = c };

	return dv_azure_run(a, c, &plain_ops, &p, resp);
}

/* ---- lookup ---- */

int dv_azure_lookup(struct dv_tier *t, const char *hash, uint64_t size)
{
	struct azure_tier *a = dv_azure_downcast(t);
	struct az_call c = { .method = "HEAD", .hash = hash };
	struct dv_http_response resp;
	char shown[SHOWN_MAX];
	int ret;

	if (!dv_valid_hash(hash))
		return -EINVAL;
	ret = dv_azure_request(a, &c, &resp);
	if (ret)
		return ret;
	if (resp.has_length && resp.content_length == size)
		return 0;
	dv_azure_shown(a, hash, shown, sizeof(shown));
	dv_warn("tier '%s': %s holds %" PRIu64 " bytes, expected %" PRIu64
		": not this shard", t->name, shown,
		resp.has_length ? resp.content_length : 0, size);
	return -EBADMSG;
}

/* ---- download ---- */

struct download {
	struct azure_tier *a;
	struct az_call call;
	struct dv_http_sink_get get;
	char range[64];
};

/*
 * One attempt at the rest of the blob. Azure signs the Range, so it is
 * ours, not the sink's; asked for even from byte 0 (a blob of the wrong
 * size answers 416 instead of a body we would refuse).
 */
static int download_attempt(void *ctx, struct dv_http_response *resp)
{
	struct download *d = ctx;
	int ret;

	if (dv_http_sink_prepare(&d->get, NULL))
		return 0; /* every byte is in */
	d->get.ranged = d->get.size > 0;
	d->call.range = NULL;
	d->call.expect_bytes = d->get.size - d->get.sink->written;
	if (d->get.ranged) {
		snprintf(d->range, sizeof(d->range),
			 "bytes=%" PRIu64 "-%" PRIu64, d->get.sink->written,
			 d->get.size - 1);
		d->call.range = d->range;
	}
	ret = dv_azure_attempt(d->a, &d->call, resp);
	return dv_http_sink_finish(&d->get, ret, resp);
}

static const struct dv_http_call_ops download_ops = {
	.attempt = download_attempt,
	.error_code = error_code,
};

static int azure_download(struct dv_tier *t, const char *hash, uint64_t size,
			  struct dv_sink *sink)
{
	struct azure_tier *a = dv_azure_downcast(t);
	char who[256], shown[SHOWN_MAX];
	struct download d = { .a = a, .get = { .sink = sink, .size = size,
					       .who = who, .shown = shown } };
	struct dv_http_response resp;
	int ret;

	if (!dv_valid_hash(hash))
		return -EINVAL;
	snprintf(who, sizeof(who), "tier '%s'", t->name);
	dv_azure_shown(a, hash, shown, sizeof(shown));
	d.call = (struct az_call){
		.method = "GET", .hash = hash, .on_start = dv_http_sink_start,
		.on_body = dv_http_sink_body, .arg = &d.get,
	};
	ret = dv_azure_run(a, &d.call, &download_ops, &d, &resp);
	if (ret == 0)
		dv_debug("tier '%s': downloaded %s (%" PRIu64 " bytes)", t->name,
			 hash, size);
	return ret;
}

/* ---- a part of a blob ---- */

struct part {
	struct azure_tier *a;
	struct az_call call;
	struct dv_http_range_get get;
	char range[96];
};

/* One attempt at the bytes of the part still missing; the Range is signed. */
static int part_attempt(void *ctx, struct dv_http_response *resp)
{
	struct part *p = ctx;
	int ret;

	if (dv_http_range_prepare(&p->get, NULL))
		return 0; /* every byte is in */
	dv_http_range_header(&p->get, p->range, sizeof(p->range));
	p->call.range = p->range + strlen("Range: ");
	p->call.expect_bytes = p->get.len - p->get.got;
	ret = dv_azure_attempt(p->a, &p->call, resp);
	return dv_http_range_finish(&p->get, ret, resp);
}

static const struct dv_http_call_ops part_ops = {
	.attempt = part_attempt,
	.error_code = error_code,
};

static int azure_download_range(struct dv_tier *t, const char *hash,
				uint64_t size, uint64_t off, uint64_t len,
				void *buf)
{
	struct azure_tier *a = dv_azure_downcast(t);
	struct part p = { .a = a, .get = { .buf = buf, .off = off, .len = len,
					   .size = size } };
	struct dv_http_response resp;

	if (!dv_valid_hash(hash))
		return -EINVAL;
	if (len == 0 || off > size || len > size - off)
		return -EINVAL;
	p.call = (struct az_call){
		.method = "GET", .hash = hash, .on_start = dv_http_range_start,
		.on_body = dv_http_range_body, .arg = &p.get,
	};
	return dv_azure_run(a, &p.call, &part_ops, &p, &resp);
}

/* ---- lifecycle ---- */

static void azure_destroy(struct dv_tier *t)
{
	struct azure_tier *a = dv_azure_downcast(t);

	dv_az_creds_free(a->creds);
	dv_http_release(&a->http);
	free(a->base_url);
	free(a->blob_prefix);
	dv_tier_release(t);
	free(a);
}

/* The container without its query: a SAS there is a secret. */
static void azure_describe(struct dv_tier *t, struct dv_tier_desc *d)
{
	struct azure_tier *a = dv_azure_downcast(t);

	snprintf(d->where, sizeof(d->where), "%s%s%s", a->base_url,
		 a->blob_prefix[0] ? "/" : "", a->blob_prefix);
	d->capacity = t->max_bytes;
	d->note = "remote: never evicts (R9)";
}

const struct dv_tier_ops dv_tier_azure_ops = {
	.type = "azure_blob",
	.caps = DV_TIER_REMOTE,
	.destroy = azure_destroy,
	.lookup = dv_azure_lookup,
	.download = azure_download,
	.download_range = azure_download_range,
	.install = dv_azure_install,
	.describe = azure_describe,
};

static int make_creds(struct azure_tier *a, const struct dv_tier_config *tc,
		      const struct dv_config *cfg, const char *url_sas)
{
	struct dv_az_creds_opts o = {
		.tier = a->base.name,
		.sas_token = tc->sas_token ? tc->sas_token : url_sas,
		.sas_source = tc->sas_token || !url_sas ? NULL :
			      "the query of container_url",
		.mi_client_id = tc->managed_identity_client_id,
		.http = cfg ? &cfg->http : NULL,
	};
	char *account = NULL;
	int ret;

	ret = dv_azure_url_account(tc->container_url, &account);
	if (ret == 0 && !account && tc->endpoint)
		ret = dv_azure_url_account(tc->endpoint, &account);
	if (ret)
		return ret;
	o.account = account;
	ret = dv_az_creds_new(&o, &a->creds);
	free(account);
	return ret;
}

int dv_azure_tier_new(const struct dv_tier_config *tc,
		      const struct dv_config *cfg, struct dv_tier **out,
		      char *err, size_t errlen)
{
	struct azure_tier *a = calloc(1, sizeof(*a));
	char *url_sas = NULL;
	int ret;

	*out = NULL;
	if (!a || dv_tier_init(&a->base, &dv_tier_azure_ops, tc->name,
			       DV_TIER_TYPE_AZURE_BLOB, tc->max_bytes)) {
		free(a);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = dv_http_init(&a->http, cfg ? &cfg->http : NULL);
	if (ret) {
		dv_tier_release(&a->base);
		free(a);
		snprintf(err, errlen, "tier '%s': cannot initialize libcurl",
			 tc->name ? tc->name : "azure_blob");
		return ret;
	}
	if (!tc->container_url) {
		snprintf(err, errlen, "tier '%s': container_url is missing",
			 a->base.name);
		ret = -EINVAL;
	}
	if (ret == 0)
		ret = setup_urls(a, tc, &url_sas, err, errlen);
	if (ret == 0)
		ret = setup_prefix(a, tc->prefix, err, errlen);
	if (ret == 0)
		ret = make_creds(a, tc, cfg, url_sas);
	dv_az_free_secret(url_sas);
	if (ret) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		azure_destroy(&a->base);
		return ret;
	}
	*out = &a->base;
	return 0;
}
