/*
 * The GCS tier (see gcs.h): construction, the request shared with the
 * uploads (a token per attempt, the log line of a failure; the retries
 * and the one token refresh after a 401 are dv_http_call_run()'s),
 * lookups and downloads.
 *
 * A download streams into the hierarchy's verifying sink; a transfer that
 * breaks resumes with a Range request from the first byte it lacks, and an
 * answer of 200 with the whole object (what the emulator does to a range
 * it does not serve) starts the sink over. A part of an object (a chunk
 * of a streaming fill) goes into a buffer the same way, and a 200 there is
 * -EPROTO: the caller then downloads the object whole.
 *
 * Not here: uploads (gcs_upload.c), tokens (gcs_creds.c), libcurl
 * (http.c), verifying bytes (the sink and the hierarchy).
 */
#include "gcs_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/log.h"
#include "config/util.h"
#include "tiers/net/call.h"
#include "tiers/net/http_range.h"
#include "tiers/net/http_sink.h"
#include "tiers/net/json.h"

#define REASON_MAX 200

struct gcs_tier *dv_gcs_downcast(struct dv_tier *t)
{
	return dv_tier_downcast(t, &dv_tier_gcs_ops);
}

/* ---- names ---- */

char *dv_gcs_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = malloc(strlen(s) * 3 + 1), *p = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			*p++ = (char)ch;
		} else {
			*p++ = '%';
			*p++ = hex[ch >> 4];
			*p++ = hex[ch & 15];
		}
	}
	*p = '\0';
	return out;
}

char *dv_gcs_object_enc(const struct gcs_tier *g, const char *hash)
{
	char *name, *enc;

	if (asprintf(&name, "%s%s.tar", g->prefix, hash) < 0)
		return NULL;
	enc = dv_gcs_encode(name);
	free(name);
	return enc;
}

void dv_gcs_shown(const struct gcs_tier *g, const char *hash, char *buf,
		  size_t len)
{
	snprintf(buf, len, "gs://%s/%s%s%s", g->bucket, g->prefix,
		 hash ? hash : "", hash ? ".tar" : "");
}

/* ---- the request loop ---- */

/* One request through the network layer (call.h), with a token per try. */
struct request {
	struct gcs_tier *g;
	dv_gcs_attempt_fn fn;
	void *ctx;
	int auth_err;      /* the token could not be had: the call's result */
};

/*
 * A token that cannot be had ends the call: gcs_creds.c has retried,
 * logged and remembers the failure, so another try would only wait.
 */
static int with_token(void *arg, struct dv_http_response *resp)
{
	struct request *r = arg;
	char auth[DV_GCS_AUTH_HEADER_MAX];
	int ret;

	if (!r->g->creds)
		return r->fn(r->g, r->ctx, NULL, resp);
	ret = dv_gcs_creds_header(r->g->creds, auth, sizeof(auth));
	if (ret) {
		r->auth_err = ret;
		return dv_http_transient(ret) ? -EIO : ret;
	}
	ret = r->fn(r->g, r->ctx, auth, resp);
	OPENSSL_cleanse(auth, sizeof(auth));
	return ret;
}

/* A token revoked or expired early: the next try fetches a new one. */
static void drop_token(void *arg)
{
	struct request *r = arg;

	dv_gcs_creds_invalidate(r->g->creds);
}

void dv_gcs_error_code(const struct dv_http_response *resp, char *buf,
		       size_t len)
{
	size_t n = strnlen(resp->detail, len - 1);

	if (n) {
		memcpy(buf, resp->detail, n); /* may be cut: a log line */
		buf[n] = '\0';
	} else {
		dv_json_reason(resp->errbody, strlen(resp->errbody), buf, len);
	}
}

static const struct dv_http_call_ops signed_ops = {
	.attempt = with_token,
	.refresh = drop_token,
	.error_code = dv_gcs_error_code,
};

/* The emulator: no token, so a 401 is final. */
static const struct dv_http_call_ops anonymous_ops = {
	.attempt = with_token,
	.error_code = dv_gcs_error_code,
};

/* "HTTP 403: <reason>; credentials: <source>": says whom to fix. */
static void log_denied(struct gcs_tier *g, const char *what,
		       const struct dv_http_response *resp)
{
	char reason[REASON_MAX], who[512];

	dv_json_reason(resp->errbody, strlen(resp->errbody), reason,
		       sizeof(reason));
	if (g->creds)
		dv_gcs_creds_describe(g->creds, who, sizeof(who));
	else
		snprintf(who, sizeof(who), "none (STORAGE_EMULATOR_HOST)");
	dv_http_log_denied(&g->denied, g->who, "%s: HTTP %ld%s%s; credentials: %s",
			   what, resp->status, reason[0] ? ": " : "", reason,
			   who);
}

static void log_failure(struct gcs_tier *g, const struct dv_http_call *c,
			int err, const struct dv_http_response *resp)
{
	char why[DV_HTTP_DETAIL_MAX + 96], code[64] = "";

	if (err == -ENOENT || err == -ENOMEM)
		return;
	if (err == -EACCES) {
		/* Token failures were logged by gcs_creds.c. */
		if (resp->status == 401 || resp->status == 403)
			log_denied(g, c->what, resp);
		return;
	}
	if (resp->status >= 300)
		dv_gcs_error_code(resp, code, sizeof(code));
	dv_http_describe(err, resp, code, why, sizeof(why));
	if (c->attempts > 1)
		dv_warn("%s: %s failed after %u attempts: %s", g->who, c->what,
			c->attempts, why);
	else
		dv_warn("%s: %s failed: %s", g->who, c->what, why);
}

int dv_gcs_request(struct gcs_tier *g, const char *what,
		   dv_gcs_attempt_fn fn, void *ctx,
		   struct dv_http_response *resp)
{
	struct request r = { .g = g, .fn = fn, .ctx = ctx };
	/* Quiet: an access denied line names the credentials. */
	struct dv_http_call call = {
		.http = &g->http,
		.ops = g->creds ? &signed_ops : &anonymous_ops,
		.ctx = &r,
		.who = g->who,
		.what = what,
		.flags = DV_HTTP_CALL_QUIET,
	};
	int ret;

	ret = dv_http_call_run(&call, resp);
	if (r.auth_err && ret < 0) {
		memset(resp, 0, sizeof(*resp));
		ret = r.auth_err;
	}
	if (ret < 0)
		log_failure(g, &call, r.auth_err ? r.auth_err : call.last_err,
			    resp);
	return ret;
}

/* ---- lookup ---- */

int dv_gcs_meta_size(const char *json, size_t len, uint64_t *size)
{
	struct dv_json_field f = { .key = "size" };
	int ret;

	ret = dv_json_get(json, len, &f, 1, NULL, 0);
	if (ret == 0 && (!f.value || dv_parse_uint(f.value, UINT64_MAX, size)))
		ret = -EPROTO;
	dv_json_release(&f, 1);
	return ret == -EINVAL ? -EPROTO : ret;
}

struct meta_ctx {
	const char *url;
	struct dv_http_buf buf;
};

/* The JSON API's URL of the object of @hash with @query, or NULL. */
static char *object_url(const struct gcs_tier *g, const char *hash,
			const char *query)
{
	char *name = dv_gcs_object_enc(g, hash);
	char *url = NULL;

	if (name && asprintf(&url, "%s/storage/v1/b/%s/o/%s?%s", g->api,
			     g->bucket_enc, name, query) < 0)
		url = NULL;
	free(name);
	return url;
}

/*
 * A GET as this tier: @req carries no header but the token's (none when
 * anonymous); the answer's status becomes an errno.
 */
static int get_as_tier(struct gcs_tier *g, struct dv_http_request *req,
		       const char *auth, struct dv_http_response *resp)
{
	const char *headers[] = { auth, NULL };
	int ret;

	req->headers = headers;
	ret = dv_http_perform(&g->http, req, resp);
	return ret ? ret : dv_http_status_errno(resp->status);
}

static int meta_attempt(struct gcs_tier *g, void *arg, const char *auth,
			struct dv_http_response *resp)
{
	struct meta_ctx *m = arg;
	struct dv_http_request req = {
		.url = m->url,
		.max_body = DV_GCS_META_MAX,
		.on_body = dv_http_buf_append,
		.arg = &m->buf,
	};

	m->buf.len = 0;
	return get_as_tier(g, &req, auth, resp);
}

int dv_gcs_stat(struct gcs_tier *g, const char *hash, uint64_t *size)
{
	struct meta_ctx m;
	struct dv_http_response resp;
	char shown[DV_GCS_SHOWN_MAX], what[DV_GCS_SHOWN_MAX + 16];
	char *url = object_url(g, hash, "fields=size");
	int ret;

	if (!url)
		return -ENOMEM;
	dv_gcs_shown(g, hash, shown, sizeof(shown));
	snprintf(what, sizeof(what), "metadata of %s", shown);
	m.url = url;
	dv_http_buf_init(&m.buf, DV_GCS_META_MAX);
	ret = dv_gcs_request(g, what, meta_attempt, &m, &resp);
	if (ret == 0) {
		ret = dv_gcs_meta_size(m.buf.data ? m.buf.data : "", m.buf.len,
				       size);
		if (ret == -EPROTO) {
			dv_warn("tier '%s': %s: the answer has no object size",
				g->base.name, what);
			ret = -EIO;
		}
	}
	dv_http_buf_release(&m.buf);
	free(url);
	return ret;
}

static int gcs_lookup(struct dv_tier *t, const char *hash, uint64_t size)
{
	struct gcs_tier *g = dv_gcs_downcast(t);
	char shown[DV_GCS_SHOWN_MAX];
	uint64_t have = 0;
	int ret;

	if (!dv_valid_hash(hash))
		return -EINVAL;
	ret = dv_gcs_stat(g, hash, &have);
	if (ret)
		return ret;
	if (have != size) {
		dv_gcs_shown(g, hash, shown, sizeof(shown));
		dv_warn("tier '%s': %s holds %" PRIu64 " bytes, expected %"
			PRIu64 ": a miss, to be replaced", t->name, shown, have,
			size);
		return -EBADMSG;
	}
	return 0;
}

/* ---- download ---- */

struct get_ctx {
	const char *url;
	struct dv_http_sink_get get;
};

static int get_attempt(struct gcs_tier *g, void *arg, const char *auth,
		       struct dv_http_response *resp)
{
	struct get_ctx *s = arg;
	struct dv_http_request req = { .url = s->url };

	if (dv_http_sink_prepare(&s->get, &req))
		return 0;
	return dv_http_sink_finish(&s->get, get_as_tier(g, &req, auth, resp),
				   resp);
}

/* GET @hash's media with the attempt @fn over @ctx, whose url it sets. */
static int get_media(struct gcs_tier *g, const char *hash, const char *shown,
		     dv_gcs_attempt_fn fn, void *ctx, const char **url_field)
{
	char what[DV_GCS_SHOWN_MAX + 8];
	struct dv_http_response resp;
	char *url;
	int ret;

	if (!dv_valid_hash(hash))
		return -EINVAL;
	url = object_url(g, hash, "alt=media");
	if (!url)
		return -ENOMEM;
	snprintf(what, sizeof(what), "GET %s", shown);
	*url_field = url;
	ret = dv_gcs_request(g, what, fn, ctx, &resp);
	free(url);
	return ret;
}

static int gcs_download(struct dv_tier *t, const char *hash, uint64_t size,
			struct dv_sink *sink)
{
	struct gcs_tier *g = dv_gcs_downcast(t);
	char shown[DV_GCS_SHOWN_MAX];
	struct get_ctx s = { .get = { .sink = sink, .size = size, .who = g->who,
				      .shown = shown } };

	dv_gcs_shown(g, hash, shown, sizeof(shown));
	return get_media(g, hash, shown, get_attempt, &s, &s.url);
}

/* ---- a part of an object ---- */

struct part_ctx {
	const char *url;
	struct dv_http_range_get get;
};

static int part_attempt(struct gcs_tier *g, void *arg, const char *auth,
			struct dv_http_response *resp)
{
	struct part_ctx *p = arg;
	const char *headers[] = { auth, NULL };
	struct dv_http_request req = { .url = p->url, .headers = headers };
	int ret;

	if (dv_http_range_prepare(&p->get, &req))
		return 0;
	ret = dv_http_perform(&g->http, &req, resp);
	if (ret == 0)
		ret = dv_http_status_errno(resp->status);
	return dv_http_range_finish(&p->get, ret, resp);
}

static int gcs_download_range(struct dv_tier *t, const char *hash,
			      uint64_t size, uint64_t off, uint64_t len,
			      void *buf)
{
	struct gcs_tier *g = dv_gcs_downcast(t);
	char shown[DV_GCS_SHOWN_MAX];
	struct part_ctx p = { .get = { .buf = buf, .off = off, .len = len,
				       .size = size } };

	if (len == 0 || off > size || len > size - off)
		return -EINVAL;
	dv_gcs_shown(g, hash, shown, sizeof(shown));
	return get_media(g, hash, shown, part_attempt, &p, &p.url);
}

/* ---- lifecycle ---- */

static int gcs_open(struct dv_tier *t)
{
	struct gcs_tier *g = dv_gcs_downcast(t);
	char shown[DV_GCS_SHOWN_MAX];

	/* No network here: credentials and the bucket are met on first use. */
	dv_gcs_shown(g, NULL, shown, sizeof(shown));
	dv_info("tier '%s': GCS bucket %s at %s%s%s%s", t->name, shown, g->api,
		g->project ? ", project " : "", g->project ? g->project : "",
		g->creds ? "" : ", anonymous (STORAGE_EMULATOR_HOST)");
	return 0;
}

static void gcs_destroy(struct dv_tier *t)
{
	struct gcs_tier *g = dv_gcs_downcast(t);

	dv_gcs_creds_free(g->creds);
	dv_http_release(&g->http);
	free(g->api);
	free(g->bucket);
	free(g->bucket_enc);
	free(g->prefix);
	free(g->project);
	dv_tier_release(t);
	free(g);
}

static void gcs_describe(struct dv_tier *t, struct dv_tier_desc *d)
{
	dv_gcs_shown(dv_gcs_downcast(t), NULL, d->where, sizeof(d->where));
	d->capacity = t->max_bytes;
	d->note = "remote: never evicts (R9)";
}

const struct dv_tier_ops dv_tier_gcs_ops = {
	.type = "gcs",
	.caps = DV_TIER_REMOTE,
	.open = gcs_open,
	.destroy = gcs_destroy,
	.lookup = gcs_lookup,
	.install = dv_gcs_install,
	.download = gcs_download,
	.download_range = gcs_download_range,
	.describe = gcs_describe,
};

void dv_gcs_tier_set_upload_sizes(struct dv_tier *t, uint64_t threshold,
				  uint64_t chunk)
{
	struct gcs_tier *g = dv_gcs_downcast(t);

	chunk -= chunk % DV_GCS_CHUNK_UNIT;
	g->resumable_threshold = threshold;
	g->chunk_bytes = chunk ? chunk : DV_GCS_CHUNK_UNIT;
}

/* Bucket names: 3-222 of [a-z0-9._-], starting and ending alphanumeric. */
static bool valid_bucket(const char *b)
{
	size_t len = strlen(b);

	if (len < 3 || len > 222 || strspn(b, "abcdefghijklmnopqrstuvwxyz"
					      "0123456789._-") != len)
		return false;
	return strchr("._-", b[0]) == NULL && strchr("._-", b[len - 1]) == NULL;
}

/* "team-a", "/team-a/" → "team-a/"; none → "". */
static int set_prefix(struct gcs_tier *g, const char *p, char *err,
		      size_t errlen)
{
	size_t len;

	p = p ? p : "";
	while (*p == '/')
		p++;
	len = strlen(p);
	while (len > 0 && p[len - 1] == '/')
		len--;
	for (size_t i = 0; i < len; i++) {
		if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) {
			snprintf(err, errlen,
				 "tier '%s': prefix holds a control character",
				 g->base.name);
			return -EINVAL;
		}
	}
	if (asprintf(&g->prefix, "%.*s%s", (int)len, p, len ? "/" : "") < 0) {
		g->prefix = NULL;
		return -ENOMEM;
	}
	return 0;
}

/*
 * The endpoint, else $STORAGE_EMULATOR_HOST ("host:port" or a URL, as the
 * client libraries take it), else Google's; no trailing "/" and no
 * "/storage/v1", which the requests add.
 */
static int set_api(struct gcs_tier *g, const char *endpoint,
		   const char *emulator)
{
	const char *base = endpoint && *endpoint ? endpoint :
			   emulator && *emulator ? emulator : DV_GCS_API;
	size_t len;

	if (asprintf(&g->api, "%s%s", strstr(base, "://") ? "" : "http://",
		     base) < 0) {
		g->api = NULL;
		return -ENOMEM;
	}
	len = strlen(g->api);
	while (len > 0 && g->api[len - 1] == '/')
		g->api[--len] = '\0';
	if (len >= 11 && strcmp(g->api + len - 11, "/storage/v1") == 0)
		g->api[len - 11] = '\0';
	return 0;
}

static int setup(struct gcs_tier *g, const struct dv_tier_config *tc,
		 const struct dv_config *cfg, char *err, size_t errlen)
{
	const char *emulator = getenv("STORAGE_EMULATOR_HOST");
	int ret;

	if (!tc->bucket || !valid_bucket(tc->bucket)) {
		snprintf(err, errlen,
			 "tier '%s': bucket '%.64s' is not a GCS bucket name (3-222 of a-z, 0-9, '.', '_', '-')",
			 g->base.name, tc->bucket ? tc->bucket : "");
		return -EINVAL;
	}
	ret = set_prefix(g, tc->prefix, err, errlen);
	if (ret)
		return ret;
	g->bucket = strdup(tc->bucket);
	g->bucket_enc = dv_gcs_encode(tc->bucket);
	g->project = tc->project ? strdup(tc->project) : NULL;
	if (!g->bucket || !g->bucket_enc || (tc->project && !g->project) ||
	    set_api(g, tc->endpoint, emulator))
		return -ENOMEM;
	/* The emulator takes no credentials, as with Google's libraries. */
	if (!emulator || !*emulator)
		ret = dv_gcs_creds_new(&g->http, g->base.name, &g->creds);
	return ret;
}

int dv_gcs_tier_new(const struct dv_tier_config *tc,
		    const struct dv_config *cfg, struct dv_tier **out,
		    char *err, size_t errlen)
{
	struct gcs_tier *g = calloc(1, sizeof(*g));
	int ret;

	*out = NULL;
	if (!g || dv_tier_init(&g->base, &dv_tier_gcs_ops, tc->name,
			       DV_TIER_TYPE_GCS, tc->max_bytes)) {
		free(g);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	snprintf(g->who, sizeof(g->who), "tier '%s'", g->base.name);
	/* destroy releases http: it comes before anything that can fail. */
	if (dv_http_init(&g->http, cfg ? &cfg->http : NULL)) {
		dv_tier_release(&g->base);
		free(g);
		snprintf(err, errlen, "tier '%s': cannot initialize libcurl",
			 tc->name ? tc->name : "gcs");
		return -ENOMEM;
	}
	g->resumable_threshold = DV_GCS_RESUMABLE_THRESHOLD;
	g->chunk_bytes = DV_GCS_CHUNK;
	ret = setup(g, tc, cfg, err, errlen);
	if (ret) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "tier '%s': out of memory",
				 g->base.name);
		gcs_destroy(&g->base);
		return ret;
	}
	*out = &g->base;
	return 0;
}
