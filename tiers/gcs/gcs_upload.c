/*
 * Installs into a GCS bucket: uploads of a verified local file, run by the
 * background upload queue (B5), never by a reader.
 *
 * First the object's metadata: an intact copy (same size: the name is a
 * content hash) is left alone. Else, below the resumable threshold, one
 * media upload streams the file; above it, a resumable upload: a session
 * is opened (its URI comes back in Location), then the file goes in PUTs
 * of chunk_bytes (multiples of 256 KiB) with Content-Range. A 308 says how
 * much the server kept (Range: bytes=0-N) and the next PUT starts there;
 * after a failure a status query (an empty PUT whose Content-Range is
 * "bytes * / SIZE", without the blanks) asks where to go on, and a
 * session that expired (404, 410) is started over once. The retries are
 * the network layer's (tiers/net/call.h): one call per step of progress.
 * A new object is created with ifGenerationMatch=0, so that a racer's
 * finished upload (412) counts as done instead of being overwritten.
 *
 * The session URI authorizes uploads by itself (no token is sent with
 * the PUTs): it is a secret and never logged (log lines show gs:// names).
 */
#include "gcs_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"

#define CONTENT_TYPE "application/x-tar"

/* The metadata a finished upload answers with: its size must be ours. */
static int check_stored(struct gcs_tier *g, const char *shown,
			const struct dv_http_buf *meta, uint64_t size)
{
	uint64_t got = 0;
	int ret;

	ret = dv_gcs_meta_size(meta->data ? meta->data : "", meta->len, &got);
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		dv_warn("tier '%s': upload of %s: the final answer has no object size",
			g->base.name, shown);
		return -EIO;
	}
	if (got != size) {
		dv_warn("tier '%s': upload of %s: the bucket stored %" PRIu64
			" of %" PRIu64 " bytes", g->base.name, shown, got, size);
		return -EIO;
	}
	return 0;
}

/* ---- media upload ---- */

struct media_ctx {
	const char *url;
	int fd;
	uint64_t size;
	bool existed;              /* 412: a racer created it first */
	struct dv_http_buf meta;
};

static int media_attempt(struct gcs_tier *g, void *arg, const char *auth,
			 struct dv_http_response *resp)
{
	struct media_ctx *m = arg;
	const char *headers[3] = { NULL, NULL, NULL };
	struct dv_http_request req = {
		.method = "POST",
		.url = m->url,
		.headers = headers,
		.body_fd = m->fd,
		.body_fd_len = m->size,
		.body = "",
		.max_body = DV_GCS_META_MAX,
		.on_body = dv_http_buf_append,
		.arg = &m->meta,
	};
	size_t k = 0;
	int ret;

	if (auth)
		headers[k++] = auth;
	headers[k] = "Content-Type: " CONTENT_TYPE;
	m->meta.len = 0;
	ret = dv_http_perform(&g->http, &req, resp);
	if (ret)
		return ret;
	m->existed = resp->status == 412;
	return m->existed ? 0 : dv_http_status_errno(resp->status);
}

/* 0: uploaded; 1: a racer's copy was there first (412); or -errno. */
static int media_upload(struct gcs_tier *g, const char *name_enc, int fd,
			uint64_t size, bool if_absent, const char *shown)
{
	struct media_ctx m = { .fd = fd, .size = size };
	struct dv_http_response resp;
	char what[DV_GCS_SHOWN_MAX + 16], *url;
	int ret;

	if (asprintf(&url, "%s/upload/storage/v1/b/%s/o?uploadType=media&name=%s%s",
		     g->api, g->bucket_enc, name_enc,
		     if_absent ? "&ifGenerationMatch=0" : "") < 0)
		return -ENOMEM;
	snprintf(what, sizeof(what), "upload of %s", shown);
	m.url = url;
	dv_http_buf_init(&m.meta, DV_GCS_META_MAX);
	ret = dv_gcs_request(g, what, media_attempt, &m, &resp);
	if (ret == 0)
		ret = m.existed ? 1 : check_stored(g, shown, &m.meta, size);
	dv_http_buf_release(&m.meta);
	free(url);
	return ret;
}

/* ---- resumable upload ---- */

struct session {
	struct gcs_tier *g;
	const char *shown;
	const char *start_url;
	int fd;
	uint64_t size;
	char *uri;                 /* the session URI: a secret */
	uint64_t persisted;        /* bytes the server holds */
	bool reported;             /* this answer had a Range header */
	uint64_t report;           /* its end, exclusive */
	bool done, existed;
	bool lost;                 /* a step failed: where the upload is, is unknown */
	char *chunk;               /* chunk_bytes of the file */
	unsigned requests;
	struct dv_http_buf meta;   /* the final answer */
};

static void header_value(const char *line, size_t len, size_t namelen,
			 const char **v, size_t *vlen)
{
	*v = line + namelen;
	*vlen = len - namelen;
	while (*vlen > 0 && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*vlen)--;
	}
	while (*vlen > 0 && ((*v)[*vlen - 1] == ' ' || (*v)[*vlen - 1] == '\t'))
		(*vlen)--;
}

static int start_header(void *arg, const struct dv_http_response *resp,
			const char *line, size_t len)
{
	struct session *s = arg;
	const char *v;
	size_t vlen;

	if (resp->status < 200 || resp->status > 299 || len < 9 ||
	    strncasecmp(line, "location:", 9) != 0)
		return 0;
	header_value(line, len, 9, &v, &vlen);
	free(s->uri);
	s->uri = strndup(v, vlen);
	return s->uri ? 0 : -ENOMEM;
}

/* The session must be where the API is reached the same way: no token
 * goes with it, but an https API never continues over plain http. */
static bool session_ok(const struct gcs_tier *g, const char *uri)
{
	bool api_tls = strncasecmp(g->api, "https://", 8) == 0;

	for (const char *p = uri; *p; p++) {
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return false;
	}
	if (strncasecmp(uri, "https://", 8) == 0)
		return true;
	return !api_tls && strncasecmp(uri, "http://", 7) == 0;
}

static int start_attempt(struct gcs_tier *g, void *arg, const char *auth,
			 struct dv_http_response *resp)
{
	struct session *s = arg;
	char length[64];
	const char *headers[5] = { NULL };
	struct dv_http_request req = {
		.method = "POST",
		.url = s->start_url,
		.headers = headers,
		.body = "{}",
		.body_len = 2,
		.on_header = start_header,
		.arg = s,
	};
	size_t k = 0;
	int ret;

	if (auth)
		headers[k++] = auth;
	snprintf(length, sizeof(length), "X-Upload-Content-Length: %" PRIu64,
		 s->size);
	headers[k++] = length;
	headers[k++] = "X-Upload-Content-Type: " CONTENT_TYPE;
	headers[k] = "Content-Type: application/json; charset=UTF-8";
	free(s->uri);
	s->uri = NULL;
	ret = dv_http_perform(&g->http, &req, resp);
	if (ret)
		return ret;
	s->existed = resp->status == 412;
	if (s->existed)
		return 0;
	ret = dv_http_status_errno(resp->status);
	if (ret == 0 && (!s->uri || !session_ok(g, s->uri))) {
		snprintf(resp->detail, sizeof(resp->detail),
			 "no usable upload session in the answer");
		ret = -EPROTO;
	}
	return ret;
}

/* "Range: bytes=0-N" of a 308: the server holds N + 1 bytes. */
static int range_header(void *arg, const struct dv_http_response *resp,
			const char *line, size_t len)
{
	struct session *s = arg;
	const char *v, *dash;
	size_t vlen;
	char num[24];
	uint64_t end;

	if (resp->status != 308 || len < 6 || strncasecmp(line, "range:", 6))
		return 0;
	header_value(line, len, 6, &v, &vlen);
	dash = memchr(v, '-', vlen);
	if (vlen < 9 || strncasecmp(v, "bytes=0-", 8) != 0 || !dash ||
	    (size_t)(v + vlen - dash - 1) >= sizeof(num))
		return -EPROTO;
	memcpy(num, dash + 1, (size_t)(v + vlen - dash - 1));
	num[v + vlen - dash - 1] = '\0';
	if (dv_parse_uint(num, UINT64_MAX - 1, &end))
		return -EPROTO;
	s->reported = true;
	s->report = end + 1;
	return 0;
}

static int put_body(void *arg, const void *buf, size_t len)
{
	struct session *s = arg;

	return dv_http_buf_append(&s->meta, buf, len);
}

/*
 * PUTs @len bytes of s->chunk as bytes @off… of the object, or asks where
 * the upload is (@len 0). Updates s->persisted, s->done. 0 or -errno;
 * -ENOENT when the session is gone.
 */
static int put_chunk(struct session *s, uint64_t off, size_t len,
		     struct dv_http_response *resp)
{
	char range[96];
	const char *headers[] = { range, NULL };
	struct dv_http_request req = {
		.method = "PUT",
		.url = s->uri,
		.headers = headers,
		.body = s->chunk,
		.body_len = len,
		.max_body = DV_GCS_META_MAX,
		.on_body = put_body,
		.on_header = range_header,
		.arg = s,
	};
	int ret;

	if (len)
		snprintf(range, sizeof(range),
			 "Content-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
			 off, off + len - 1, s->size);
	else
		snprintf(range, sizeof(range), "Content-Range: bytes */%" PRIu64,
			 s->size);
	s->reported = false;
	s->meta.len = 0;
	s->requests++;
	ret = dv_http_perform(&s->g->http, &req, resp);
	if (ret)
		return ret;
	if (resp->status == 412 ||
	    (resp->status >= 200 && resp->status <= 299)) {
		s->existed = resp->status == 412;
		s->done = true;
		return 0;
	}
	if (resp->status != 308)
		return dv_http_status_errno(resp->status);
	if (s->reported && s->report > s->size) {
		snprintf(resp->detail, sizeof(resp->detail),
			 "the server holds more bytes than were sent");
		return -EPROTO;
	}
	s->persisted = s->reported ? s->report : 0;
	return 0;
}

/* One chunk from s->persisted; -EAGAIN when the server kept none of it. */
static int send_next(struct session *s, struct dv_http_response *resp)
{
	uint64_t off = s->persisted;
	uint64_t left = s->size - off;
	size_t len = left < s->g->chunk_bytes ? (size_t)left
					      : (size_t)s->g->chunk_bytes;
	int ret;

	ret = dv_pread_full(s->fd, s->chunk, len, off);
	if (ret) {
		memset(resp, 0, sizeof(*resp));
		snprintf(resp->detail, sizeof(resp->detail),
			 "reading the local file: %s", strerror(-ret));
		return ret;
	}
	ret = put_chunk(s, off, len, resp);
	if (ret == 0 && !s->done && s->persisted <= off) {
		snprintf(resp->detail, sizeof(resp->detail),
			 "the server kept none of bytes %" PRIu64 "-%" PRIu64, off,
			 off + len - 1);
		ret = -EAGAIN;
	}
	return ret;
}

/*
 * One step of the upload, an attempt of dv_http_call_run(): after a
 * failure, first ask where the upload stands (the server may have kept
 * the chunk whose answer was lost); then send the next chunk. A step is
 * done when the server holds more than before it, so the retries are
 * counted per step and restart with each bit of progress.
 */
static int step_attempt(void *arg, struct dv_http_response *resp)
{
	struct session *s = arg;
	uint64_t before = s->persisted;
	int ret;

	if (s->lost) {
		ret = put_chunk(s, 0, 0, resp);
		if (ret)
			return ret;
		s->lost = false;
		if (s->done || s->persisted > before)
			return 0;
	}
	return send_next(s, resp);
}

/* Where the upload stands is unknown after a failure: the step asks. */
static bool step_rewind(void *arg)
{
	struct session *s = arg;

	s->lost = true;
	return false;
}

/* The session URI authorizes the PUTs: no token, so no refresh. */
static const struct dv_http_call_ops step_ops = {
	.attempt = step_attempt,
	.rewind = step_rewind,
	.error_code = dv_gcs_error_code,
};

/*
 * Sends the file through the open session, one call per step. -ENOENT:
 * the session is gone (logged at debug level: the caller starts over).
 */
static int send_all(struct session *s)
{
	char what[DV_GCS_SHOWN_MAX + 64];
	struct dv_http_call call = {
		.http = &s->g->http,
		.ops = &step_ops,
		.ctx = s,
		.who = s->g->who,
		.what = what,
		.enoent_level = DV_LOG_DEBUG,
		.denied = &s->g->denied,
	};
	struct dv_http_response resp;
	int ret = 0;

	s->persisted = 0;
	s->done = false;
	s->lost = false;
	while (!s->done && ret == 0) {
		snprintf(what, sizeof(what), "upload of %s at byte %" PRIu64,
			 s->shown, s->persisted);
		ret = dv_http_call_run(&call, &resp);
	}
	if (ret == 0 && !s->existed)
		ret = check_stored(s->g, s->shown, &s->meta, s->size);
	return ret;
}

static void session_release(struct session *s)
{
	if (s->uri)
		OPENSSL_cleanse(s->uri, strlen(s->uri));
	free(s->uri);
	free(s->chunk);
	dv_http_buf_release(&s->meta);
}

/*
 * Opens a session and sends the file through it. -ENOENT only when the
 * session expired on the way (a bucket that is missing is -EIO).
 */
static int session_run(struct session *s, const char *what)
{
	struct dv_http_response resp;
	int ret;

	ret = dv_gcs_request(s->g, what, start_attempt, s, &resp);
	s->requests++;
	if (ret == -ENOENT)
		return -EIO;
	if (ret || s->existed)
		return ret;
	return send_all(s);
}

/* As media_upload, in chunks; *@requests counts the HTTP requests. */
static int resumable_upload(struct gcs_tier *g, const char *name_enc, int fd,
			    uint64_t size, bool if_absent, const char *shown,
			    unsigned *requests)
{
	struct session s = { .g = g, .shown = shown, .fd = fd, .size = size };
	char what[DV_GCS_SHOWN_MAX + 32], *url;
	int ret = -ENOMEM;

	if (asprintf(&url, "%s/upload/storage/v1/b/%s/o?uploadType=resumable&name=%s%s",
		     g->api, g->bucket_enc, name_enc,
		     if_absent ? "&ifGenerationMatch=0" : "") < 0)
		return -ENOMEM;
	s.start_url = url;
	s.chunk = malloc(g->chunk_bytes);
	dv_http_buf_init(&s.meta, DV_GCS_META_MAX);
	if (!s.chunk)
		goto out;
	snprintf(what, sizeof(what), "resumable upload of %s", shown);
	ret = session_run(&s, what);
	/* Sessions live about a week: one that expired is started over once. */
	if (ret == -ENOENT) {
		dv_warn("%s: %s: the upload session expired, starting over",
			g->who, what);
		ret = session_run(&s, what);
	}
	if (ret == -ENOENT)
		ret = -EIO;
	if (ret == 0 && s.existed)
		ret = 1;
	*requests = s.requests;
out:
	session_release(&s);
	free(url);
	return ret;
}

/* ---- the install op ---- */

int dv_gcs_install(struct dv_tier *t, const char *hash, int src_fd,
		   const char *src_path, uint64_t size, unsigned flags)
{
	struct gcs_tier *g = dv_gcs_downcast(t);
	char shown[DV_GCS_SHOWN_MAX], *name;
	uint64_t have = 0;
	unsigned requests = 1;
	bool media;
	int ret;

	if (!dv_valid_hash(hash))
		return -EINVAL;
	if (t->max_bytes && size > t->max_bytes)
		return -EFBIG;
	dv_gcs_shown(g, hash, shown, sizeof(shown));
	ret = dv_gcs_stat(g, hash, &have);
	if (ret == 0 && have == size) {
		dv_debug("tier '%s': %s is already there", t->name, shown);
		return 0;
	}
	if (ret && ret != -ENOENT)
		return ret;
	name = dv_gcs_object_enc(g, hash);
	if (!name)
		return -ENOMEM;
	/* A copy of the wrong size is replaced; else only a new one is made. */
	media = size < g->resumable_threshold;
	if (media)
		ret = media_upload(g, name, src_fd, size, ret == -ENOENT,
				   shown);
	else
		ret = resumable_upload(g, name, src_fd, size, ret == -ENOENT,
				       shown, &requests);
	free(name);
	if (ret == 1) {
		dv_debug("tier '%s': %s: another machine uploaded it first",
			 t->name, shown);
		return 0;
	}
	if (ret)
		return ret;
	dv_stat_add(&t->stats.installs, 1);
	dv_stat_add(&t->stats.bytes_in, size);
	dv_debug("tier '%s': uploaded %s (%" PRIu64 " bytes, %s upload, %u request%s)",
		 t->name, shown, size, media ? "media" : "resumable", requests,
		 requests > 1 ? "s" : "");
	return 0;
}
