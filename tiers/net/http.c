/*
 * The libcurl wrapper (see http.h). One attempt per dv_http_perform():
 * an easy handle is taken from the endpoint's pool (or created), reset,
 * configured, run, and put back so its live connection serves the next
 * request. The pool is a LIFO stack: the handle a thread just returned is
 * the one it gets next, which keeps a thread on one connection.
 *
 * Not here: retries (the caller's), signing, anything about shards.
 * libcurl errors become errno in this file, with libcurl's message kept
 * in resp->detail for the caller's log line.
 */
#include "http.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define USER_AGENT "datavofs/1"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

static long or_default(unsigned v, long def)
{
	return v ? (long)v : def;
}

int dv_http_init(struct dv_http *h, const struct dv_http_config *cfg)
{
	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->lock, NULL);
	h->connect_timeout = DV_HTTP_CONNECT_TIMEOUT;
	h->low_speed_limit = DV_HTTP_LOW_SPEED_LIMIT;
	h->low_speed_time = DV_HTTP_LOW_SPEED_TIME;
	h->retries = DV_HTTP_RETRIES;
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		goto out_nomem;
	if (!cfg)
		return 0;
	/* Zero timeouts would switch the checks off: take the defaults. */
	h->connect_timeout = or_default(cfg->connect_timeout,
					DV_HTTP_CONNECT_TIMEOUT);
	h->low_speed_limit = or_default(cfg->low_speed_limit,
					DV_HTTP_LOW_SPEED_LIMIT);
	h->low_speed_time = or_default(cfg->low_speed_time,
				       DV_HTTP_LOW_SPEED_TIME);
	h->retries = cfg->retries;
	h->ca_file = dup_or_null(cfg->ca_file);
	h->ca_path = dup_or_null(cfg->ca_path);
	if ((cfg->ca_file && *cfg->ca_file && !h->ca_file) ||
	    (cfg->ca_path && *cfg->ca_path && !h->ca_path))
		goto out_nomem;
	return 0;
out_nomem:
	dv_http_release(h);
	return -ENOMEM;
}

void dv_http_release(struct dv_http *h)
{
	for (size_t i = 0; i < h->nidle; i++)
		curl_easy_cleanup(h->idle[i]);
	h->nidle = 0;
	free(h->ca_file);
	free(h->ca_path);
	h->ca_file = NULL;
	h->ca_path = NULL;
	pthread_mutex_destroy(&h->lock);
}

/* ---- the handle pool ---- */

static CURL *handle_get(struct dv_http *h)
{
	CURL *c = NULL;

	pthread_mutex_lock(&h->lock);
	if (h->nidle > 0)
		c = h->idle[--h->nidle];
	pthread_mutex_unlock(&h->lock);
	if (!c)
		return curl_easy_init();
	/* Clears options, keeps live connections and TLS sessions. */
	curl_easy_reset(c);
	return c;
}

static void handle_put(struct dv_http *h, CURL *c)
{
	pthread_mutex_lock(&h->lock);
	if (h->nidle < DV_HTTP_POOL_MAX) {
		h->idle[h->nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	if (c)
		curl_easy_cleanup(c);
}

/* ---- one transfer ---- */

struct xfer {
	const struct dv_http_request *req;
	struct dv_http_response *resp;
	int cb_err;             /* why a callback stopped the transfer */
	bool started;           /* on_start ran for the current answer */
	size_t nheaders;        /* of the current answer */
	size_t header_bytes;    /* of the current answer */
	size_t errbody_len;
	uint64_t up_off;        /* request body bytes sent */
};

static bool header_name_is(const char *line, size_t len, const char *name,
			   const char **val, size_t *vlen)
{
	size_t n = strlen(name);

	if (len <= n || line[n] != ':' || strncasecmp(line, name, n) != 0)
		return false;
	line += n + 1;
	len -= n + 1;
	while (len > 0 && (*line == ' ' || *line == '\t')) {
		line++;
		len--;
	}
	while (len > 0 && isspace((unsigned char)line[len - 1]))
		len--;
	*val = line;
	*vlen = len;
	return true;
}

/* Parses a decimal number that fills exactly @len bytes. */
static bool parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 19)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return true;
}

/* "bytes S-E/T", or "bytes S-E/" and a star when the length is unknown */
static void parse_content_range(struct dv_http_response *r, const char *v,
				 size_t len)
{
	const char *dash, *slash, *end = v + len;

	if (len < 6 || strncasecmp(v, "bytes ", 6) != 0)
		return;
	v += 6;
	dash = memchr(v, '-', (size_t)(end - v));
	slash = dash ? memchr(dash, '/', (size_t)(end - dash)) : NULL;
	if (!slash)
		return;
	if (!parse_u64(v, (size_t)(dash - v), &r->range_start) ||
	    !parse_u64(dash + 1, (size_t)(slash - dash - 1), &r->range_end))
		return;
	r->range_total = 0;
	if (!(end - slash == 2 && slash[1] == '*') &&
	    !parse_u64(slash + 1, (size_t)(end - slash - 1), &r->range_total))
		return;
	r->has_range = true;
}

/* Keeps an ETag only when it can be sent back verbatim in a header. */
static void keep_etag(struct dv_http_response *r, const char *v, size_t len)
{
	r->etag[0] = '\0';
	if (len == 0 || len >= sizeof(r->etag))
		return;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < 0x20 || v[i] > 0x7e)
			return;
	}
	memcpy(r->etag, v, len);
	r->etag[len] = '\0';
}

/* Retry-After: delay-seconds or an HTTP-date. */
static void parse_retry_after(struct dv_http_response *r, const char *v,
			      size_t len)
{
	char buf[64];
	uint64_t secs = 0;
	time_t when, now;

	if (parse_u64(v, len, &secs)) {
		r->retry_after_ms = secs > 3600 ? 3600000u : (unsigned)secs * 1000u;
		return;
	}
	if (len >= sizeof(buf))
		return;
	memcpy(buf, v, len);
	buf[len] = '\0';
	when = curl_getdate(buf, NULL);
	now = time(NULL);
	if (when > now)
		r->retry_after_ms = when - now > 3600 ? 3600000u
						      : (unsigned)(when - now) * 1000u;
}

static void parse_header(struct xfer *x, const char *line, size_t len)
{
	struct dv_http_response *r = x->resp;
	const char *v;
	size_t vlen;

	if (header_name_is(line, len, "content-length", &v, &vlen))
		r->has_length = parse_u64(v, vlen, &r->content_length);
	else if (header_name_is(line, len, "content-range", &v, &vlen))
		parse_content_range(r, v, vlen);
	else if (header_name_is(line, len, "etag", &v, &vlen))
		keep_etag(r, v, vlen);
	else if (header_name_is(line, len, "retry-after", &v, &vlen))
		parse_retry_after(r, v, vlen);
}

/* A status line starts a new answer (1xx, a redirect, the final one). */
static void new_answer(struct xfer *x, const char *line, size_t len)
{
	struct dv_http_response *r = x->resp;
	const char *sp = memchr(line, ' ', len);
	size_t n = 0;
	uint64_t code = 0;

	/*
	 * Three digits after the first space, read within @len: the line is
	 * not a C string, and strtol() would skip the CRLF as blanks and read
	 * past it (found by tests/fuzz/fuzz_http.c).
	 */
	if (sp) {
		sp++;
		while (n < 3 && sp + n < line + len &&
		       isdigit((unsigned char)sp[n]))
			n++;
	}
	r->status = n == 3 && parse_u64(sp, n, &code) ? (long)code : 0;
	r->has_length = false;
	r->has_range = false;
	r->etag[0] = '\0';
	r->retry_after_ms = 0;
	r->errbody[0] = '\0';
	x->errbody_len = 0;
	x->started = false;
	x->nheaders = 0;
	x->header_bytes = 0;
}

/* The headers of an answer are complete: a 2xx one is the final answer. */
static int headers_done(struct xfer *x)
{
	const struct dv_http_request *req = x->req;
	struct dv_http_response *r = x->resp;

	if (r->status < 200 || r->status > 299 || x->started)
		return 0;
	x->started = true;
	if (req->max_body && r->has_length && r->content_length > req->max_body &&
	    !req->decompress)
		return -EFBIG;
	return req->on_start ? req->on_start(req->arg, r) : 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;

	if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
		new_answer(x, buf, len);
		return len;
	}
	x->nheaders++;
	x->header_bytes += len;
	if (x->nheaders > DV_HTTP_MAX_HEADERS ||
	    x->header_bytes > DV_HTTP_MAX_HEADER_BYTES) {
		snprintf(x->resp->detail, sizeof(x->resp->detail),
			 "more than %u header lines or %u header bytes",
			 DV_HTTP_MAX_HEADERS, DV_HTTP_MAX_HEADER_BYTES);
		x->cb_err = -EPROTO;
		return 0;
	}
	if (len <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
		x->cb_err = headers_done(x);
		return x->cb_err ? 0 : len;
	}
	parse_header(x, buf, len);
	if (x->req->on_header) {
		size_t linelen = len;

		while (linelen > 0 && (buf[linelen - 1] == '\r' ||
				       buf[linelen - 1] == '\n'))
			linelen--;
		x->cb_err = x->req->on_header(x->req->arg, x->resp, buf,
					      linelen);
		if (x->cb_err)
			return 0;
	}
	return len;
}

static void keep_errbody(struct xfer *x, const char *buf, size_t len)
{
	size_t room = sizeof(x->resp->errbody) - 1 - x->errbody_len;

	if (len > room)
		len = room;
	memcpy(x->resp->errbody + x->errbody_len, buf, len);
	x->errbody_len += len;
	x->resp->errbody[x->errbody_len] = '\0';
}

static size_t on_write(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	const struct dv_http_request *req = x->req;
	size_t len = size * n;
	int ret;

	if (!x->started) {
		keep_errbody(x, buf, len);
		return len;
	}
	if (req->max_body && len > req->max_body - x->resp->body_bytes) {
		x->cb_err = -EFBIG;
		return 0;
	}
	if (req->on_body) {
		ret = req->on_body(req->arg, buf, len);
		if (ret) {
			x->cb_err = ret;
			return 0;
		}
	}
	x->resp->body_bytes += len;
	return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	const struct dv_http_request *req = x->req;
	uint64_t total = req->body_fd_len ? req->body_fd_len : req->body_len;
	size_t len = size * n;
	ssize_t got;

	if (len > total - x->up_off)
		len = (size_t)(total - x->up_off);
	if (len == 0)
		return 0;
	if (!req->body_fd_len) {
		memcpy(buf, (const char *)req->body + x->up_off, len);
		x->up_off += len;
		return len;
	}
	do {
		got = pread(req->body_fd, buf, len, (off_t)x->up_off);
	} while (got < 0 && errno == EINTR);
	if (got <= 0) {
		x->cb_err = got < 0 ? -errno : -EIO;
		return CURL_READFUNC_ABORT;
	}
	x->up_off += (uint64_t)got;
	return (size_t)got;
}

/* libcurl rewinds the request body for a redirect or an auth round. */
static int on_seek(void *arg, curl_off_t off, int origin)
{
	struct xfer *x = arg;
	uint64_t total = x->req->body_fd_len ? x->req->body_fd_len
					     : x->req->body_len;

	if (origin != SEEK_SET || off < 0 || (uint64_t)off > total)
		return CURL_SEEKFUNC_CANTSEEK;
	x->up_off = (uint64_t)off;
	return CURL_SEEKFUNC_OK;
}

/* The attempt's deadline: a base, plus the time its bytes take at RATE. */
static long deadline_s(const struct dv_http *h, const struct dv_http_request *req)
{
	uint64_t bytes = req->expect_bytes;

	if (!bytes)
		bytes = req->max_body;
	if (req->body_fd_len > bytes)
		bytes = req->body_fd_len;
	if (req->body_len > bytes)
		bytes = req->body_len;
	return (long)(h->connect_timeout + 2 * h->low_speed_time +
		      bytes / DV_HTTP_DEADLINE_RATE);
}

static void setup_common(CURL *c, const struct dv_http *h,
			 const struct dv_http_request *req)
{
	const char *url = req->url;
	bool tls = strncasecmp(url, "https://", 8) == 0;

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, USER_AGENT);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	/* A redirect keeps the scheme: never https down to http, nor up. */
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, tls ? "https" : "http");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION,
			 req->follow_redirects ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, (long)DV_HTTP_MAX_REDIRS);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, deadline_s(h, req));
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->connect_timeout);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, h->low_speed_limit);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, h->low_speed_time);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (h->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
	if (h->ca_path)
		curl_easy_setopt(c, CURLOPT_CAPATH, h->ca_path);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, (long)DV_HTTP_BUFFER_SIZE);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	/* A proxy's CONNECT answer is not the server's answer. */
	curl_easy_setopt(c, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
}

static void setup_body(CURL *c, const struct dv_http_request *req,
		       const char *method, struct xfer *x)
{
	curl_off_t len = (curl_off_t)(req->body_fd_len ? req->body_fd_len
						       : req->body_len);

	curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
	curl_easy_setopt(c, CURLOPT_READDATA, x);
	curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
	curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, len);
		return;
	}
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, len);
	if (strcmp(method, "PUT") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
}

static bool has_body(const struct dv_http_request *req)
{
	return req->body_fd_len > 0 || req->body ||
	       (req->method && (!strcmp(req->method, "PUT") ||
				!strcmp(req->method, "POST")));
}

static void setup_method(CURL *c, const struct dv_http_request *req,
			 struct xfer *x)
{
	const char *method = req->method ? req->method : "GET";

	if (has_body(req))
		setup_body(c, req, method, x);
	else if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
}

static struct curl_slist *build_headers(const struct dv_http_request *req,
					int *err)
{
	struct curl_slist *list = NULL, *next;

	*err = 0;
	/* No "Expect: 100-continue" pause before a body. */
	if (has_body(req)) {
		list = curl_slist_append(NULL, "Expect:");
		if (!list)
			goto out_nomem;
	}
	for (size_t i = 0; req->headers && req->headers[i]; i++) {
		next = curl_slist_append(list, req->headers[i]);
		if (!next)
			goto out_nomem;
		list = next;
	}
	return list;
out_nomem:
	curl_slist_free_all(list);
	*err = -ENOMEM;
	return NULL;
}

static void setup_transfer(CURL *c, const struct dv_http_request *req,
			   struct xfer *x, char *range, size_t rangelen)
{
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->resp->detail);
	if (req->ranged && req->range_len) {
		snprintf(range, rangelen, "%llu-%llu",
			 (unsigned long long)req->range_start,
			 (unsigned long long)(req->range_start + req->range_len - 1));
		curl_easy_setopt(c, CURLOPT_RANGE, range);
	} else if (req->ranged) {
		snprintf(range, rangelen, "%llu-",
			 (unsigned long long)req->range_start);
		curl_easy_setopt(c, CURLOPT_RANGE, range);
	}
	if (req->decompress)
		curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
}

static int map_curl(CURLcode rc, int cb_err)
{
	switch (rc) {
	case CURLE_OK:
		return 0;
	case CURLE_WRITE_ERROR:
	case CURLE_READ_ERROR:
	case CURLE_ABORTED_BY_CALLBACK:
		return cb_err ? cb_err : -EIO;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_PARTIAL_FILE:
		return -EPIPE;
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return -ECONNRESET;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_FILESIZE_EXCEEDED:
		return -EFBIG;
	case CURLE_TOO_MANY_REDIRECTS:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
		return -EPROTO;
	default:
		return -EIO;
	}
}

static int run(CURL *c, struct dv_http *h, const struct dv_http_request *req,
	       struct xfer *x)
{
	struct curl_slist *headers;
	char range[32];
	CURLcode rc;
	int ret;

	headers = build_headers(req, &ret);
	if (ret)
		return ret;
	setup_common(c, h, req);
	setup_method(c, req, x);
	setup_transfer(c, req, x, range, sizeof(range));
	if (headers)
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	rc = curl_easy_perform(c);
	ret = map_curl(rc, x->cb_err);
	if (ret && !x->resp->detail[0])
		snprintf(x->resp->detail, sizeof(x->resp->detail), "%s",
			 curl_easy_strerror(rc));
	/* The handle must not keep pointers into this stack frame. */
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(headers);
	return ret;
}

int dv_http_perform(struct dv_http *h, const struct dv_http_request *req,
		    struct dv_http_response *resp)
{
	struct xfer x = { .req = req, .resp = resp };
	CURL *c;
	int ret;

	memset(resp, 0, sizeof(*resp));
	c = handle_get(h);
	if (!c) {
		snprintf(resp->detail, sizeof(resp->detail), "out of memory");
		return -ENOMEM;
	}
	ret = run(c, h, req, &x);
	handle_put(h, c);
	return ret;
}

/* ---- errors and retries ---- */

int dv_http_status_errno(long status)
{
	if (status >= 200 && status <= 299)
		return 0;
	if (status == 404 || status == 410)
		return -ENOENT;
	if (status == 401 || status == 403)
		return -EACCES;
	if (status == 408 || status == 429 || (status >= 500 && status <= 599))
		return -EAGAIN;
	return -EIO;
}

bool dv_http_transient(int err)
{
	switch (err) {
	case -EAGAIN:
	case -ETIMEDOUT:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -EHOSTUNREACH:
	case -EPIPE:
		return true;
	default:
		return false;
	}
}

int dv_http_final_errno(int err)
{
	switch (err) {
	case -EAGAIN:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -EHOSTUNREACH:
	case -EPIPE:
	case -EPROTO:
		return -EIO;
	default:
		return err;
	}
}

static uint32_t jitter_random(void)
{
	static __thread uint32_t state;
	struct timespec ts;

	if (!state) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		state = (uint32_t)ts.tv_nsec ^ (uint32_t)(uintptr_t)&ts ^
			(uint32_t)getpid();
		state |= 1;
	}
	state ^= state << 13;
	state ^= state >> 17;
	state ^= state << 5;
	return state;
}

unsigned dv_http_backoff_from(unsigned first_ms, unsigned retry,
			       unsigned max_ms)
{
	unsigned ms = max_ms;

	if (retry < 16 && ((uint64_t)first_ms << retry) < max_ms)
		ms = first_ms << retry;
	/* Between half and all of it, so racing clients spread out. */
	return ms / 2 + jitter_random() % (ms / 2 + 1);
}

unsigned dv_http_backoff_ms(unsigned retry)
{
	return dv_http_backoff_from(200, retry, 5000);
}

bool dv_http_etag_sendable(const char *etag)
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

void dv_http_sleep_ms(unsigned ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

char *dv_http_redact(const char *url, char *buf, size_t len)
{
	const char *sep = strstr(url, "://");
	const char *auth = sep ? sep + 3 : url;
	const char *auth_end = auth + strcspn(auth, "/?#");
	const char *at = memrchr(auth, '@', (size_t)(auth_end - auth));
	const char *host = at ? at + 1 : auth;
	const char *path_end = auth_end + strcspn(auth_end, "?#");

	/* The scheme, the host without userinfo, the path: no query. */
	if (len > 0)
		snprintf(buf, len, "%.*s%.*s", (int)(auth - url), url,
			 (int)(path_end - host), host);
	return buf;
}

/* ---- a bounded body buffer ---- */

void dv_http_buf_init(struct dv_http_buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void dv_http_buf_release(struct dv_http_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

static int buf_grow(struct dv_http_buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 64 << 10;
	char *p;

	while (cap < need)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	p = realloc(b->data, cap + 1);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int dv_http_buf_append(void *arg, const void *buf, size_t len)
{
	struct dv_http_buf *b = arg;
	int ret;

	if (len > b->max - b->len)
		return -EFBIG;
	if (b->len + len > b->cap || !b->data) {
		ret = buf_grow(b, b->len + len);
		if (ret)
			return ret;
	}
	memcpy(b->data + b->len, buf, len);
	b->len += len;
	b->data[b->len] = '\0';
	return 0;
}

int dv_http_buf_take(struct dv_http_buf *b, char **out, size_t *len)
{
	if (!b->data) {
		b->data = malloc(1);
		if (!b->data)
			return -ENOMEM;
		b->data[0] = '\0';
	}
	*out = b->data;
	*len = b->len;
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	return 0;
}

int dv_http_refuse(char *problem, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(problem, DV_HTTP_DETAIL_MAX, fmt, ap);
	va_end(ap);
	return err;
}
