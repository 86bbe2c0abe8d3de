/*
 * The S3 client (see s3_client.h): addressing, signing, one signed call,
 * error mapping, retries, and the reads (HEAD, ranged GET into a sink,
 * small documents). Uploads are in s3_upload.c.
 *
 * Every attempt is signed anew (a fresh x-amz-date, and credentials that
 * may have been refreshed meanwhile). A GET that breaks resumes where the
 * sink stopped with a Range, as origin_http.c does; an answer that
 * ignores the Range starts the sink over.
 */
#include "s3_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "config/log.h"
#include "tiers/net/http_sink.h"
#include "sigv4.h"

#define MAX_CALL_HEADERS (DV_SIGV4_MAX_HEADERS + 8)

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* ---- set-up ---- */

static int set_aws_endpoint(struct dv_s3 *s)
{
	/* A dotted bucket would not match the TLS name *.s3…: path-style. */
	if (strchr(s->bucket, '.')) {
		if (asprintf(&s->host, "s3.%s.amazonaws.com", s->region) < 0 ||
		    asprintf(&s->root, "/%s/", s->bucket) < 0)
			return -ENOMEM;
	} else {
		if (asprintf(&s->host, "%s.s3.%s.amazonaws.com", s->bucket,
			     s->region) < 0 ||
		    !(s->root = strdup("/")))
			return -ENOMEM;
	}
	if (asprintf(&s->base, "https://%s", s->host) < 0)
		return -ENOMEM;
	return 0;
}

/* An endpoint URL: scheme://host[:port][/path], path-style below it. */
static int set_endpoint(struct dv_s3 *s, const char *url, char *err,
			size_t errlen)
{
	char *scheme = NULL, *host = NULL, *port = NULL, *path = NULL;
	CURLU *u = curl_url();
	int ret = -EINVAL;
	size_t plen;

	if (!u)
		return -ENOMEM;
	if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)) {
		snprintf(err, errlen, "%s: endpoint \"%.200s\" is not an http:// or https:// URL",
			 s->who, url);
		goto out;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	curl_url_get(u, CURLUPART_PATH, &path, 0);
	plen = path ? strlen(path) : 0;
	while (plen > 0 && path[plen - 1] == '/')
		plen--;
	ret = -ENOMEM;
	if (asprintf(&s->host, "%s%s%s", host, port ? ":" : "",
		     port ? port : "") < 0 ||
	    asprintf(&s->base, "%s://%s", scheme, s->host) < 0 ||
	    asprintf(&s->root, "%.*s/%s/", (int)plen, path ? path : "",
		     s->bucket) < 0)
		goto out;
	s->sign_payload = strcasecmp(scheme, "http") == 0;
	ret = 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_url_cleanup(u);
	return ret;
}

static int set_region(struct dv_s3 *s, const char *region)
{
	char buf[64];

	if (!region || !*region)
		region = dv_aws_region(buf, sizeof(buf)) == 0 ? buf : "us-east-1";
	s->region = strdup(region);
	return s->region ? 0 : -ENOMEM;
}

int dv_s3_init(struct dv_s3 *s, const struct dv_s3_config *cfg, char *err,
	       size_t errlen)
{
	struct dv_http_config http = { 0 };
	const char *endpoint = cfg->endpoint;
	int ret;

	memset(s, 0, sizeof(*s));
	s->multipart_threshold = DV_S3_MULTIPART_THRESHOLD;
	s->part_size = DV_S3_PART_SIZE;
	s->part_threads = DV_S3_PART_THREADS;
	if (cfg->http)
		http = *cfg->http;
	if (!http.ca_file && env("AWS_CA_BUNDLE"))
		http.ca_file = (char *)env("AWS_CA_BUNDLE");
	ret = dv_http_init(&s->http, &http);
	if (ret) {
		snprintf(err, errlen, "%s: cannot initialize libcurl", cfg->who);
		return ret;
	}
	ret = -ENOMEM;
	s->who = strdup(cfg->who);
	s->bucket = strdup(cfg->bucket);
	if (!s->who || !s->bucket || set_region(s, cfg->region) ||
	    dv_aws_chain_new(cfg->http, &s->creds))
		goto fail;
	if (!endpoint)
		endpoint = env("AWS_ENDPOINT_URL_S3");
	if (!endpoint)
		endpoint = env("AWS_ENDPOINT_URL");
	ret = endpoint ? set_endpoint(s, endpoint, err, errlen)
		       : set_aws_endpoint(s);
	if (ret)
		goto fail;
	return 0;
fail:
	if (ret == -ENOMEM)
		snprintf(err, errlen, "%s: out of memory", cfg->who);
	dv_s3_release(s);
	return ret;
}

void dv_s3_release(struct dv_s3 *s)
{
	dv_http_release(&s->http);
	dv_aws_chain_free(s->creds);
	free(s->who);
	free(s->bucket);
	free(s->region);
	free(s->base);
	free(s->host);
	free(s->root);
	memset(s, 0, sizeof(*s));
}

void dv_s3_shown(const struct dv_s3 *s, const char *key, char *buf,
		 size_t len)
{
	snprintf(buf, len, "s3://%s/%s", s->bucket, key ? key : "");
}

/* ---- one call ---- */

/* Auth failures S3 reports with a 400. */
static bool auth_code(const char *code)
{
	static const char *const codes[] = {
		"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
		"InvalidToken", "AuthorizationHeaderMalformed",
		"InvalidSecurity", "AllAccessDisabled",
	};

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		if (strcmp(code, codes[i]) == 0)
			return true;
	}
	return false;
}

static void log_denied(struct dv_s3 *s, const struct dv_s3_call *call,
		       const struct dv_http_response *resp, const char *code,
		       const char *source)
{
	char shown[512];

	dv_s3_shown(s, call->key, shown, sizeof(shown));
	dv_err("%s: bucket '%s' refused access: HTTP %ld%s%s%s on %s %s; check the credentials (%s)",
	       s->who, s->bucket, resp->status, code[0] ? " (" : "", code,
	       code[0] ? ")" : "", call->method, shown, source);
}

static int map_status(struct dv_s3 *s, const struct dv_s3_call *call,
		      const struct dv_http_response *resp, const char *source)
{
	char code[64];
	int ret;

	if (resp->status >= 200 && resp->status <= 299)
		return 0;
	if (resp->status == 304)
		return 1;
	dv_aws_error_code(resp->errbody, code, sizeof(code));
	if (strcmp(code, "ExpiredToken") == 0 ||
	    strcmp(code, "TokenRefreshRequired") == 0) {
		dv_info("%s: the session token expired; fetching new credentials",
			s->who);
		dv_aws_chain_invalidate(s->creds);
		return -EAGAIN;
	}
	if (strcmp(code, "SlowDown") == 0 || strcmp(code, "RequestTimeout") == 0)
		return -EAGAIN;
	ret = dv_http_status_errno(resp->status);
	if (ret == -EACCES || (resp->status == 400 && auth_code(code))) {
		log_denied(s, call, resp, code, source);
		return -EACCES;
	}
	return ret;
}

static int sign(struct dv_s3 *s, const struct dv_s3_call *call,
		const struct dv_aws_creds *cr, struct dv_sigv4_result *sig)
{
	struct dv_sigv4_key key = { cr->access_key, cr->secret_key,
				    cr->session_token };
	struct dv_sigv4_request req = {
		.method = call->method,
		.host = s->host,
		.params = call->params,
		.nparams = call->nparams,
		.headers = call->headers,
		.payload_sha256 = call->payload_sha256,
		.content_sha256_header = true,
	};
	char *path;
	int ret;

	if (asprintf(&path, "%s%s", s->root, call->key ? call->key : "") < 0)
		return -ENOMEM;
	req.path = path;
	ret = dv_sigv4_sign(&key, s->region, "s3", time(NULL), &req, sig);
	free(path);
	return ret;
}

static int build_headers(const struct dv_s3_call *call,
			 const struct dv_sigv4_result *sig,
			 const char **out)
{
	size_t n = 0;

	for (size_t i = 0; call->headers && call->headers[i]; i++) {
		if (n + 1 >= MAX_CALL_HEADERS)
			return -EINVAL;
		out[n++] = call->headers[i];
	}
	for (size_t i = 0; sig->headers[i]; i++) {
		if (n + 1 >= MAX_CALL_HEADERS)
			return -EINVAL;
		out[n++] = sig->headers[i];
	}
	out[n] = NULL;
	return 0;
}

static int get_creds(struct dv_s3 *s, struct dv_aws_creds *cr,
		     struct dv_http_response *resp)
{
	int ret = dv_aws_chain_get(s->creds, cr);

	if (ret == 0)
		return 0;
	snprintf(resp->detail, sizeof(resp->detail),
		 "no usable AWS credentials (%s)", strerror(-ret));
	/* Missing or refused credentials are an auth error, not a miss. */
	return ret == -ENOKEY || ret == -EACCES || ret == -EINVAL ? -EACCES : ret;
}

int dv_s3_call(struct dv_s3 *s, struct dv_s3_call *call,
	       struct dv_http_response *resp)
{
	const char *headers[MAX_CALL_HEADERS];
	struct dv_sigv4_result sig;
	struct dv_aws_creds *cr;
	char *url = NULL;
	int ret;

	memset(resp, 0, sizeof(*resp));
	memset(&sig, 0, sizeof(sig));
	cr = malloc(sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	ret = get_creds(s, cr, resp);
	if (ret)
		goto out;
	ret = sign(s, call, cr, &sig);
	if (ret == 0)
		ret = build_headers(call, &sig, headers);
	if (ret == 0 &&
	    asprintf(&url, "%s%s%s%s", s->base, sig.path, sig.query[0] ? "?" : "",
		     sig.query) < 0) {
		url = NULL;
		ret = -ENOMEM;
	}
	if (ret)
		goto out;
	call->req.method = call->method;
	call->req.url = url;
	call->req.headers = headers;
	ret = dv_http_perform(&s->http, &call->req, resp);
	if (ret == 0)
		ret = map_status(s, call, resp, cr->source);
out:
	dv_aws_creds_wipe(cr);
	free(cr);
	dv_sigv4_result_release(&sig);
	free(url);
	return ret;
}

/* ---- retries ---- */

const char *dv_s3_describe(int err, const struct dv_http_response *resp,
			   char *buf, size_t len)
{
	char code[64];

	if (resp->status && (resp->status < 200 || resp->status > 299)) {
		dv_aws_error_code(resp->errbody, code, sizeof(code));
		snprintf(buf, len, "HTTP %ld%s%s%s", resp->status,
			 code[0] ? " (" : "", code, code[0] ? ")" : "");
	} else if (resp->detail[0]) {
		snprintf(buf, len, "%s", resp->detail);
	} else {
		snprintf(buf, len, "%s", strerror(-err));
	}
	return buf;
}

typedef int (*attempt_fn)(struct dv_s3 *s, void *ctx,
			  struct dv_http_response *resp);

/*
 * Runs @fn until it succeeds (≥ 0), fails for good, or the retries are
 * spent; logs the outcome (-ENOENT at @enoent_level; -EACCES was logged
 * by map_status). Returns the result mapped by dv_http_final_errno().
 */
static int with_retries(struct dv_s3 *s, const char *verb, const char *key,
			attempt_fn fn, void *ctx, enum dv_log_level enoent_level)
{
	char why[DV_HTTP_DETAIL_MAX + 64], shown[512], code[64];
	struct dv_http_response resp;
	unsigned n, delay;
	int ret;

	dv_s3_shown(s, key, shown, sizeof(shown));
	for (n = 0;; n++) {
		ret = fn(s, ctx, &resp);
		if (ret >= 0)
			return ret;
		if (!dv_http_transient(ret) || n >= s->http.retries)
			break;
		delay = dv_http_backoff_ms(n);
		dv_warn("%s: %s %s: %s (attempt %u of %u), retrying in %u ms",
			s->who, verb, shown, dv_s3_describe(ret, &resp, why, sizeof(why)),
			n + 1, s->http.retries + 1, delay);
		dv_http_sleep_ms(delay);
	}
	dv_aws_error_code(resp.errbody, code, sizeof(code));
	if (ret == -ENOENT && strcmp(code, "NoSuchBucket") == 0)
		dv_err("%s: bucket '%s' does not exist (%s %s)", s->who,
		       s->bucket, verb, shown);
	else if (ret == -ENOENT)
		dv_log(enoent_level, "%s: %s %s: not found", s->who, verb, shown);
	else if (ret != -EACCES)
		dv_err("%s: %s %s failed%s: %s", s->who, verb, shown,
		       n ? " after retries" : "",
		       dv_s3_describe(ret, &resp, why, sizeof(why)));
	return dv_http_final_errno(ret);
}

/* ---- HEAD ---- */

struct head_ctx {
	const char *key;
	uint64_t size;
};

static int head_attempt(struct dv_s3 *s, void *arg,
			struct dv_http_response *resp)
{
	struct head_ctx *h = arg;
	struct dv_s3_call call = { .method = "HEAD", .key = h->key };
	int ret = dv_s3_call(s, &call, resp);

	if (ret == 0 && !resp->has_length) {
		snprintf(resp->detail, sizeof(resp->detail),
			 "HEAD answer without Content-Length");
		return -EPROTO;
	}
	h->size = resp->content_length;
	return ret == 1 ? -EPROTO : ret;
}

int dv_s3_head(struct dv_s3 *s, const char *key, uint64_t *size)
{
	struct head_ctx h = { .key = key };
	int ret = with_retries(s, "HEAD", key, head_attempt, &h, DV_LOG_DEBUG);

	if (ret == 0)
		*size = h.size;
	return ret;
}

/* ---- GET into a sink ---- */

struct get_ctx {
	const char *key;
	struct dv_http_sink_get get;
};

static int get_attempt(struct dv_s3 *s, void *arg,
		       struct dv_http_response *resp)
{
	struct get_ctx *g = arg;
	struct dv_s3_call call = { .method = "GET", .key = g->key };
	int ret;

	if (dv_http_sink_prepare(&g->get, &call.req))
		return 0;
	ret = dv_s3_call(s, &call, resp);
	if (ret == 1)
		ret = -EPROTO;
	return dv_http_sink_finish(&g->get, ret, resp);
}

int dv_s3_get(struct dv_s3 *s, const char *key, uint64_t size,
	      struct dv_sink *sink)
{
	char shown[512];
	struct get_ctx g = { .key = key, .get = { .sink = sink, .size = size,
						  .who = s->who,
						  .shown = shown } };

	dv_s3_shown(s, key, shown, sizeof(shown));
	return with_retries(s, "GET", key, get_attempt, &g, DV_LOG_WARNING);
}

/* ---- small documents ---- */

struct doc_ctx {
	const char *key;
	const char *const *headers;
	struct dv_http_buf buf;
	char etag[DV_HTTP_ETAG_MAX];  /* of the answer that succeeded */
};

static int doc_attempt(struct dv_s3 *s, void *arg,
		       struct dv_http_response *resp)
{
	struct doc_ctx *d = arg;
	struct dv_s3_call call = {
		.method = "GET",
		.key = d->key,
		.headers = d->headers,
		.req = { .on_body = dv_http_buf_append, .arg = &d->buf,
			 .max_body = d->buf.max },
	};
	int ret;

	d->buf.len = 0;
	ret = dv_s3_call(s, &call, resp);
	if (ret == 0)
		snprintf(d->etag, sizeof(d->etag), "%s", resp->etag);
	return ret;
}

static bool etag_sendable(const char *etag)
{
	size_t len = strlen(etag);

	if (len == 0 || len >= DV_HTTP_ETAG_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (etag[i] < 0x20 || etag[i] > 0x7e)
			return false;
	}
	return true;
}

int dv_s3_get_doc(struct dv_s3 *s, const char *key, const char *etag,
		  size_t max, char **body, size_t *len, char **etag_out)
{
	char inm[DV_HTTP_ETAG_MAX + 32];
	const char *headers[2] = { NULL, NULL };
	struct doc_ctx d = { .key = key, .headers = headers };
	int ret;

	*body = NULL;
	*len = 0;
	if (etag_out)
		*etag_out = NULL;
	if (etag && etag_sendable(etag)) {
		snprintf(inm, sizeof(inm), "If-None-Match: %s", etag);
		headers[0] = inm;
	}
	dv_http_buf_init(&d.buf, max);
	ret = with_retries(s, "GET", key, doc_attempt, &d, DV_LOG_INFO);
	if (ret == 0)
		ret = dv_http_buf_take(&d.buf, body, len);
	dv_http_buf_release(&d.buf);
	if (ret == 0 && etag_out && d.etag[0]) {
		*etag_out = strdup(d.etag);
		if (!*etag_out) {
			free(*body);
			*body = NULL;
			ret = -ENOMEM;
		}
	}
	return ret;
}
