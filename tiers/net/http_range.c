/* A ranged GET into a buffer (http_range.h). */
#include "http_range.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool dv_http_range_prepare(struct dv_http_range_get *g,
			   struct dv_http_request *req)
{
	g->problem[0] = '\0';
	if (g->got >= g->len)
		return true;
	if (!req)
		return false;
	req->ranged = true;
	req->range_start = g->off + g->got;
	req->range_len = g->len - g->got;
	req->expect_bytes = g->len - g->got;
	req->on_start = dv_http_range_start;
	req->on_body = dv_http_range_body;
	req->arg = g;
	return false;
}

void dv_http_range_header(const struct dv_http_range_get *g, char *buf,
			  size_t len)
{
	snprintf(buf, len, "Range: bytes=%" PRIu64 "-%" PRIu64,
		 g->off + g->got, g->off + g->len - 1);
}

int dv_http_range_start(void *arg, const struct dv_http_response *resp)
{
	struct dv_http_range_get *g = arg;
	uint64_t want = g->off + g->got, last = g->off + g->len - 1;

	if (resp->status == 200)
		return dv_http_refuse(g->problem, -EPROTO, "the server ignored the Range (HTTP 200)");
	if (resp->status != 206)
		return dv_http_refuse(g->problem, -EPROTO, "unexpected HTTP %ld", resp->status);
	if (!resp->has_range || resp->range_start != want ||
	    resp->range_end != last ||
	    (resp->range_total && resp->range_total != g->size))
		return dv_http_refuse(g->problem, -EPROTO, "Content-Range %" PRIu64 "-%" PRIu64
			      "/%" PRIu64 " does not answer bytes=%" PRIu64
			      "-%" PRIu64 " of %" PRIu64, resp->range_start,
			      resp->range_end, resp->range_total, want, last,
			      g->size);
	return 0;
}

int dv_http_range_body(void *arg, const void *buf, size_t len)
{
	struct dv_http_range_get *g = arg;

	if (len > g->len - g->got)
		return dv_http_refuse(g->problem, -EPROTO, "more than the %" PRIu64
			      " bytes asked for", g->len);
	memcpy((char *)g->buf + g->got, buf, len);
	g->got += len;
	if (g->bytes)
		__atomic_fetch_add(g->bytes, len, __ATOMIC_RELAXED);
	return 0;
}

int dv_http_range_finish(struct dv_http_range_get *g, int ret,
			 struct dv_http_response *resp)
{
	if (ret == 0 && g->got < g->len)
		ret = dv_http_refuse(g->problem, -EPIPE, "part ended at byte %" PRIu64 " of %" PRIu64,
			     g->got, g->len);
	if (ret < 0 && g->problem[0])
		snprintf(resp->detail, sizeof(resp->detail), "%s", g->problem);
	return ret;
}
