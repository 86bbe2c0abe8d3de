/*
 * The HTTP(S) origin: any static server or CDN that serves the origin
 * layout. Documents are small: read whole (at most DV_DOC_MAX), revalidated
 * with If-None-Match. Shards stream straight into the verifying sink; a
 * transfer that breaks resumes where it stopped with a Range request, and a
 * server that answers a Range with the whole body starts the sink over.
 *
 * Retries are the network layer's (tiers/net/call.h): transient failures
 * (5xx, 408, 429, resets, timeouts, bodies cut short) are retried, 4xx
 * answers and bad answers (wrong length, wrong range) are not. Redirects
 * are followed, within the scheme: these GETs carry no signature.
 *
 * Not here: parsing documents (fs/namespace/namespace.c), checking the digest (the
 * sink does, and the hierarchy reads its verdict), libcurl (http.c).
 */
#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"
#include "config/util.h"
#include "tiers/net/call.h"
#include "tiers/net/http.h"
#include "tiers/net/http_range.h"
#include "tiers/net/http_sink.h"
#include "origin_impl.h"
#include "origin.h"
#include "tiers/core/sink.h"

#define SHOWN_MAX 1024

struct http_origin {
	struct dv_origin base;
	struct dv_http http;
	char *prefix;  /* URL up to its query, no trailing '/'; may hold userinfo */
	char *query;   /* appended to every request URL, or NULL */
};

static const struct dv_origin_ops http_origin_ops;

static struct http_origin *downcast(struct dv_origin *o)
{
	assert(o->ops == &http_origin_ops);
	return (struct http_origin *)o;
}

static char *request_url(const struct http_origin *o, const char *relpath)
{
	char *url;

	if (asprintf(&url, "%s/%s%s%s", o->prefix, relpath, o->query ? "?" : "",
		     o->query ? o->query : "") < 0)
		return NULL;
	return url;
}

/* What log lines show: base.url has neither credentials nor query. */
static void shown_url(const struct http_origin *o, const char *relpath,
		      char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", o->base.url, relpath);
}

/* ---- requests ---- */

/* Runs one request through the network layer's retries (call.h). */
static int run(struct http_origin *o, const struct dv_http_call_ops *ops,
	       void *ctx, const char *shown, struct dv_http_response *resp,
	       enum dv_log_level enoent_level)
{
	char what[SHOWN_MAX + 8];
	struct dv_http_call call = {
		.http = &o->http, .ops = ops, .ctx = ctx, .who = "origin",
		.what = what, .enoent_level = enoent_level,
	};
	int ret;

	snprintf(what, sizeof(what), "GET %s", shown);
	ret = dv_http_call_run(&call, resp);
	if (ret < 0)
		__atomic_fetch_add(&o->base.errors, 1, __ATOMIC_RELAXED);
	return ret;
}

/* ---- documents ---- */

struct doc_ctx {
	struct http_origin *o;
	const char *url;
	const char *const *headers;
	bool conditional;
	struct dv_http_buf buf;
};

static int doc_attempt(void *arg, struct dv_http_response *resp)
{
	struct doc_ctx *d = arg;
	struct dv_http_request req = {
		.url = d->url,
		.follow_redirects = true,
		.headers = d->headers,
		.max_body = DV_DOC_MAX,
		.decompress = true,
		.on_body = dv_http_buf_append,
		.arg = &d->buf,
	};
	int ret;

	/* A retry starts the document over. */
	d->buf.len = 0;
	if (d->buf.data)
		d->buf.data[0] = '\0';
	ret = dv_http_perform(&d->o->http, &req, resp);
	if (ret < 0)
		return ret;
	if (resp->status == 304 && d->conditional)
		return 1;
	return dv_http_status_errno(resp->status);
}

static const struct dv_http_call_ops doc_ops = { .attempt = doc_attempt };

static int doc_result(struct doc_ctx *d, const struct dv_http_response *resp,
		      char **body, size_t *len, char **etag_out)
{
	int ret = dv_http_buf_take(&d->buf, body, len);

	if (ret || !etag_out || !resp->etag[0])
		return ret;
	*etag_out = strdup(resp->etag);
	if (!*etag_out) {
		free(*body);
		*body = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int http_get_doc(struct dv_origin *base, const char *relpath,
			const char *etag, char **body, size_t *len,
			char **etag_out)
{
	struct http_origin *o = downcast(base);
	struct doc_ctx d = { .o = o, .conditional = false };
	char inm[DV_HTTP_ETAG_MAX + 32], shown[SHOWN_MAX];
	const char *headers[2] = { NULL, NULL };
	struct dv_http_response resp;
	char *url;
	int ret;

	if (etag && dv_http_etag_sendable(etag)) {
		snprintf(inm, sizeof(inm), "If-None-Match: %s", etag);
		headers[0] = inm;
		d.conditional = true;
	}
	url = request_url(o, relpath);
	if (!url)
		return -ENOMEM;
	d.url = url;
	d.headers = headers;
	dv_http_buf_init(&d.buf, DV_DOC_MAX);
	shown_url(o, relpath, shown, sizeof(shown));
	ret = run(o, &doc_ops, &d, shown, &resp, DV_LOG_INFO);
	if (ret == 0)
		ret = doc_result(&d, &resp, body, len, etag_out);
	dv_http_buf_release(&d.buf);
	free(url);
	return ret;
}

/* ---- shards, whole or in parts ---- */

/* A GET of a shard: whole into a sink, or a part into a buffer. */
struct shard_ctx {
	struct http_origin *o;
	const char *url;
	struct dv_http_sink_get *whole;  /* one of the two */
	struct dv_http_range_get *part;
};

static int shard_attempt(void *arg, struct dv_http_response *resp)
{
	struct shard_ctx *s = arg;
	struct dv_http_request req = { .url = s->url, .follow_redirects = true };
	bool done = s->part ? dv_http_range_prepare(s->part, &req) :
			      dv_http_sink_prepare(s->whole, &req);
	int ret;

	if (done)
		return 0;
	ret = dv_http_perform(&s->o->http, &req, resp);
	if (ret == 0)
		ret = dv_http_status_errno(resp->status);
	return s->part ? dv_http_range_finish(s->part, ret, resp) :
			 dv_http_sink_finish(s->whole, ret, resp);
}

static const struct dv_http_call_ops shard_ops = { .attempt = shard_attempt };

/* GETs shards/HASH.tar, counted as one origin request. */
static int get_shard(struct dv_origin *base, const char *hash,
		     struct dv_http_sink_get *whole,
		     struct dv_http_range_get *part)
{
	struct http_origin *o = downcast(base);
	struct shard_ctx s = { .o = o, .whole = whole, .part = part };
	char rel[80], shown[SHOWN_MAX];
	struct dv_http_response resp;
	char *url;
	int ret;

	__atomic_fetch_add(&base->requests, 1, __ATOMIC_RELAXED);
	snprintf(rel, sizeof(rel), "shards/%s.tar", hash);
	url = request_url(o, rel);
	if (!url)
		return -ENOMEM;
	shown_url(o, rel, shown, sizeof(shown));
	s.url = url;
	if (whole)
		whole->shown = shown;
	ret = run(o, &shard_ops, &s, shown, &resp, DV_LOG_WARNING);
	free(url);
	return ret;
}

static int http_fetch_shard(struct dv_origin *base, const char *hash,
			    uint64_t size, struct dv_sink *sink)
{
	struct dv_http_sink_get get = { .sink = sink, .size = size,
					.who = "origin",
					.bytes = &base->bytes };

	if (!dv_valid_hash(hash)) {
		dv_warn("origin: refusing a malformed content hash");
		return -EINVAL;
	}
	return get_shard(base, hash, &get, NULL);
}

static int http_fetch_range(struct dv_origin *base, const char *hash,
			    uint64_t size, uint64_t off, uint64_t len,
			    void *buf)
{
	struct dv_http_range_get get = { .buf = buf, .off = off, .len = len,
					 .size = size,
					 .bytes = &base->bytes };

	if (!dv_valid_hash(hash) || len == 0 || off + len > size)
		return -EINVAL;
	return get_shard(base, hash, NULL, &get);
}

/* ---- lifecycle ---- */

static void http_release(struct dv_origin *base)
{
	struct http_origin *o = downcast(base);

	dv_http_release(&o->http);
	free(o->prefix);
	free(o->query);
}

static const struct dv_origin_ops http_origin_ops = {
	.kind = "http",
	.get_doc = http_get_doc,
	.fetch_shard = http_fetch_shard,
	.fetch_range = http_fetch_range,
	.release = http_release,
};

static void strip_slashes(char *s)
{
	size_t len = strlen(s);

	while (len > 0 && s[len - 1] == '/')
		s[--len] = '\0';
}

/* The URL without userinfo, query or fragment, for o->base.url. */
static int display_url(CURLU *u, char **out)
{
	char *s = NULL;

	curl_url_set(u, CURLUPART_USER, NULL, 0);
	curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
	curl_url_set(u, CURLUPART_OPTIONS, NULL, 0);
	curl_url_set(u, CURLUPART_QUERY, NULL, 0);
	curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
	if (curl_url_get(u, CURLUPART_URL, &s, 0) != CURLUE_OK)
		return -ENOMEM;
	*out = strdup(s);
	curl_free(s);
	if (!*out)
		return -ENOMEM;
	strip_slashes(*out);
	return 0;
}

static int check_url(const char *url, char **shown, char *err, size_t errlen)
{
	char redacted[512];
	CURLU *u = curl_url();
	CURLUcode rc;
	char *host = NULL;
	int ret = -EINVAL;

	if (!u)
		return -ENOMEM;
	rc = curl_url_set(u, CURLUPART_URL, url, 0);
	if (rc == CURLUE_OK)
		rc = curl_url_get(u, CURLUPART_HOST, &host, 0);
	if (rc != CURLUE_OK || !host || !*host) {
		snprintf(err, errlen, "origin \"%s\" is not a valid URL: %s",
			 dv_http_redact(url, redacted, sizeof(redacted)),
			 rc != CURLUE_OK ? curl_url_strerror(rc) : "no host");
		goto out;
	}
	ret = display_url(u, shown);
out:
	curl_free(host);
	curl_url_cleanup(u);
	return ret;
}

/* Splits the URL as given into the request prefix and query. */
static int split_url(struct http_origin *o, const char *url)
{
	size_t end = strcspn(url, "#");
	size_t qpos = strcspn(url, "?#");

	o->prefix = strndup(url, qpos);
	if (!o->prefix)
		return -ENOMEM;
	strip_slashes(o->prefix);
	if (qpos + 1 < end) {
		o->query = strndup(url + qpos + 1, end - qpos - 1);
		if (!o->query)
			return -ENOMEM;
	}
	return 0;
}

int dv_origin_http_new(const char *url, const struct dv_http_config *http,
		       struct dv_origin **out, char *err, size_t errlen)
{
	struct http_origin *o;
	int ret;

	*out = NULL;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->base.ops = &http_origin_ops;
	ret = dv_http_init(&o->http, http);
	if (ret) {
		snprintf(err, errlen, "origin: cannot initialize libcurl");
		free(o);
		return ret;
	}
	ret = check_url(url, &o->base.url, err, errlen);
	if (ret == 0)
		ret = split_url(o, url);
	if (ret) {
		if (ret == -ENOMEM)
			snprintf(err, errlen, "origin: out of memory");
		dv_origin_free(&o->base);
		return ret;
	}
	*out = &o->base;
	return 0;
}
