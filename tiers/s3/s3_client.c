/*
 * The S3 client (see s3_client.h): addressing, signing, one signed
 * attempt and its error mapping, the final log lines, and the reads
 * (HEAD, GET into a sink or of a part into a buffer, small documents).
 * Uploads are in s3_upload.c; the retries are the network layer's
 * (tiers/net/call.h).
 *
 * Every attempt is signed anew (a fresh x-amz-date, and credentials that
 * may have been refreshed meanwhile). A GET that breaks resumes where the
 * sink (or the part's buffer) stopped with a Range, as origin_http.c
 * does; an answer that ignores the Range starts the sink over, and fails
 * a part with -EPROTO. SigV4 need not sign the Range: it is left out.
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

/* ---- one attempt ---- */

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

static int map_status(struct dv_s3 *s, const struct dv_s3_call *call,
		      const struct dv_http_response *resp)
{
	char code[64];
	int ret;

	if (resp->status >= 200 && resp->status <= 299)
		return 0;
	if (resp->status == 304)
		return call->conditional ? 1 : -EPROTO;
	dv_aws_http_error_code(resp, code, sizeof(code));
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
	if (resp->status == 400 && auth_code(code))
		return -EACCES;
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

/* Signs and performs @call once; maps the answer as map_status says. */
static int call_once(struct dv_s3 *s, struct dv_s3_call *call,
		     struct dv_http_response *resp)
{
	const char *headers[MAX_CALL_HEADERS];
	struct dv_sigv4_result sig;
	struct dv_aws_creds *cr;
	char *url = NULL;
	int ret;

	memset(&sig, 0, sizeof(sig));
	cr = malloc(sizeof(*cr));
	if (!cr)
		return -ENOMEM;
	ret = get_creds(s, cr, resp);
	if (ret)
		goto out;
	call->source = cr->source;
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
		ret = map_status(s, call, resp);
out:
	dv_aws_creds_wipe(cr);
	free(cr);
	dv_sigv4_result_release(&sig);
	free(url);
	return ret;
}

/* ---- the network layer's hooks ---- */

struct run_ctx {
	struct dv_s3 *s;
	struct dv_s3_call *call;
};

static int attempt(void *arg, struct dv_http_response *resp)
{
	struct run_ctx *r = arg;
	struct dv_s3_call *call = r->call;
	int ret;

	if (call->get && dv_http_sink_prepare(call->get, &call->req))
		return 0;
	if (call->range && dv_http_range_prepare(call->range, &call->req))
		return 0;
	if (call->buf) {
		call->buf->len = 0;
		if (call->buf->data)
			call->buf->data[0] = '\0';
		call->req.on_body = dv_http_buf_append;
		call->req.arg = call->buf;
		if (!call->req.max_body)
			call->req.max_body = call->buf->max;
	}
	ret = call_once(r->s, call, resp);
	if (call->get)
		ret = dv_http_sink_finish(call->get, ret, resp);
	if (call->range)
		ret = dv_http_range_finish(call->range, ret, resp);
	return ret;
}

/* After a 401: the cached credentials may be the reason. */
static void refresh(void *arg)
{
	struct run_ctx *r = arg;

	dv_aws_chain_invalidate(r->s->creds);
}

static const struct dv_http_call_ops s3_ops = {
	.attempt = attempt,
	.refresh = refresh,
	.error_code = dv_aws_http_error_code,
};

static struct dv_http_denied *denied_of(struct dv_s3 *s, const char *method)
{
	if (strcmp(method, "HEAD") == 0)
		return &s->denied[0];
	if (strcmp(method, "GET") == 0)
		return &s->denied[1];
	return &s->denied[2];
}

/*
 * The final line, in S3's words (the tests and the operators read them):
 * a missing bucket is an error whatever the level; a refusal names the
 * bucket and the credential source, through the rate limiter.
 */
static void report(struct dv_s3 *s, const struct dv_s3_call *call,
		   const struct dv_http_call *c, int err,
		   const struct dv_http_response *resp,
		   enum dv_log_level enoent_level)
{
	char why[DV_HTTP_DETAIL_MAX + 96], code[64] = "", who[1024];

	if (resp->status >= 300)
		dv_aws_http_error_code(resp, code, sizeof(code));
	dv_http_describe(err, resp, code, why, sizeof(why));
	if (err == -ENOENT && strcmp(code, "NoSuchBucket") == 0) {
		dv_err("%s: bucket '%s' does not exist (%s)", s->who, s->bucket,
		       c->what);
	} else if (err == -ENOENT) {
		dv_log(enoent_level, "%s: %s: not found (%s)", s->who, c->what,
		       why);
	} else if (err == -EACCES && resp->status) {
		snprintf(who, sizeof(who), "%s: bucket '%s' refused access: %s on %s",
			 s->who, s->bucket, why, c->what);
		dv_http_log_denied(denied_of(s, call->method), who,
				   "check the credentials (%s)",
				   call->source ? call->source : "none");
	} else if (err == -EACCES) {
		dv_http_log_denied(denied_of(s, call->method), s->who, "%s: %s",
				   c->what, why);
	} else if (c->attempts > 1) {
		dv_err("%s: %s failed after %u attempts: %s", s->who, c->what,
		       c->attempts, why);
	} else {
		dv_err("%s: %s failed: %s", s->who, c->what, why);
	}
}

int dv_s3_run(struct dv_s3 *s, struct dv_s3_call *call, const char *verb,
	      enum dv_log_level enoent_level, struct dv_http_response *resp)
{
	char what[600], shown[512];
	struct run_ctx r = { .s = s, .call = call };
	struct dv_http_call c = {
		.http = &s->http, .ops = &s3_ops, .ctx = &r, .who = s->who,
		.what = what, .flags = DV_HTTP_CALL_QUIET,
	};
	int ret;

	dv_s3_shown(s, call->key, shown, sizeof(shown));
	snprintf(what, sizeof(what), "%s %s", verb, shown);
	ret = dv_http_call_run(&c, resp);
	if (ret < 0)
		report(s, call, &c, c.last_err, resp, enoent_level);
	return ret;
}

/* ---- HEAD ---- */

int dv_s3_head(struct dv_s3 *s, const char *key, uint64_t *size)
{
	struct dv_s3_call call = { .method = "HEAD", .key = key };
	struct dv_http_response resp;
	int ret = dv_s3_run(s, &call, "HEAD", DV_LOG_DEBUG, &resp);

	if (ret == 0 && !resp.has_length) {
		dv_err("%s: HEAD s3://%s/%s: the answer has no Content-Length",
		       s->who, s->bucket, key);
		ret = -EPROTO;
	}
	if (ret == 0)
		*size = resp.content_length;
	return ret;
}

int dv_s3_delete(struct dv_s3 *s, const char *key)
{
	struct dv_s3_call call = { .method = "DELETE", .key = key };
	struct dv_http_response resp;
	int ret = dv_s3_run(s, &call, "DELETE", DV_LOG_DEBUG, &resp);

	return ret == -ENOENT ? 0 : ret;
}

/* ---- GET into a sink ---- */

int dv_s3_get(struct dv_s3 *s, const char *key, uint64_t size,
	      struct dv_sink *sink)
{
	char shown[512];
	struct dv_http_sink_get get = { .sink = sink, .size = size,
					.who = s->who, .shown = shown };
	struct dv_s3_call call = { .method = "GET", .key = key, .get = &get };
	struct dv_http_response resp;

	dv_s3_shown(s, key, shown, sizeof(shown));
	return dv_s3_run(s, &call, "GET", DV_LOG_WARNING, &resp);
}

/* ---- GET of a part into a buffer ---- */

int dv_s3_get_range(struct dv_s3 *s, const char *key, uint64_t size,
		    uint64_t off, uint64_t len, void *buf)
{
	struct dv_http_range_get range = { .buf = buf, .off = off, .len = len,
					   .size = size };
	struct dv_s3_call call = { .method = "GET", .key = key,
				   .range = &range };
	struct dv_http_response resp;

	if (len == 0 || off > size || len > size - off)
		return -EINVAL;
	return dv_s3_run(s, &call, "GET", DV_LOG_WARNING, &resp);
}

/* ---- small documents ---- */

int dv_s3_get_doc(struct dv_s3 *s, const char *key, const char *etag,
		  size_t max, char **body, size_t *len, char **etag_out)
{
	char inm[DV_HTTP_ETAG_MAX + 32];
	const char *headers[2] = { NULL, NULL };
	struct dv_http_buf buf;
	struct dv_s3_call call = { .method = "GET", .key = key,
				   .headers = headers, .buf = &buf };
	struct dv_http_response resp;
	int ret;

	*body = NULL;
	*len = 0;
	if (etag_out)
		*etag_out = NULL;
	if (etag && dv_http_etag_sendable(etag)) {
		snprintf(inm, sizeof(inm), "If-None-Match: %s", etag);
		headers[0] = inm;
		call.conditional = true;
	}
	dv_http_buf_init(&buf, max);
	ret = dv_s3_run(s, &call, "GET", DV_LOG_INFO, &resp);
	if (ret == 0)
		ret = dv_http_buf_take(&buf, body, len);
	dv_http_buf_release(&buf);
	if (ret == 0 && etag_out && resp.etag[0]) {
		*etag_out = strdup(resp.etag);
		if (!*etag_out) {
			free(*body);
			*body = NULL;
			ret = -ENOMEM;
		}
	}
	return ret;
}
