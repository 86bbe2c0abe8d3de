/*
 * A GET into a verifying sink, resumed with a Range (see http_sink.h). The
 * sink refuses bytes past the size itself; here the answer's headers are
 * checked before the first body byte, so that a part of another object or
 * from the wrong offset never reaches it.
 */
#include "http_sink.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config/log.h"

bool dv_http_sink_prepare(struct dv_http_sink_get *g,
			  struct dv_http_request *req)
{
	uint64_t have = g->sink->written;

	g->problem[0] = '\0';
	if (g->size > 0 && have == g->size)
		return true;
	g->ranged = have > 0;
	if (g->ranged)
		dv_info("%s: GET %s: resuming at byte %" PRIu64, g->who,
			g->shown, have);
	if (!req)
		return false;
	req->ranged = g->ranged;
	req->range_start = have;
	req->expect_bytes = g->size - have;
	req->on_start = dv_http_sink_start;
	req->on_body = dv_http_sink_body;
	req->arg = g;
	return false;
}

static int check_partial(struct dv_http_sink_get *g,
			 const struct dv_http_response *resp)
{
	uint64_t have = g->sink->written;

	if (!g->ranged || !resp->has_range)
		return dv_http_refuse(g->problem, -EPROTO,
			      "HTTP 206 without a Content-Range we asked for");
	if (resp->range_start != have ||
	    (resp->range_total && resp->range_total != g->size))
		return dv_http_refuse(g->problem, -EPROTO, "Content-Range %" PRIu64 "-%" PRIu64
			      "/%" PRIu64 " does not answer bytes=%" PRIu64
			      "- of %" PRIu64, resp->range_start,
			      resp->range_end, resp->range_total, have,
			      g->size);
	return 0;
}

int dv_http_sink_start(void *arg, const struct dv_http_response *resp)
{
	struct dv_http_sink_get *g = arg;
	int ret;

	if (resp->status == 206)
		return check_partial(g, resp);
	if (resp->status != 200)
		return dv_http_refuse(g->problem, -EPROTO, "unexpected HTTP %ld", resp->status);
	if (resp->has_length && resp->content_length != g->size)
		return dv_http_refuse(g->problem, -EPROTO,
			      "Content-Length %" PRIu64 ", expected %" PRIu64,
			      resp->content_length, g->size);
	if (g->sink->written == 0)
		return 0;
	dv_info("%s: GET %s: the range was answered with the whole object, starting over",
		g->who, g->shown);
	ret = dv_sink_reset(g->sink);
	if (ret)
		dv_http_refuse(g->problem, ret, "cannot restart the staging file: %s",
		       strerror(-ret));
	return ret;
}

int dv_http_sink_body(void *arg, const void *buf, size_t len)
{
	struct dv_http_sink_get *g = arg;
	int ret = dv_sink_write(g->sink, buf, len);

	if (ret == -EFBIG)
		return dv_http_refuse(g->problem, -EPROTO,
			      "body longer than the expected %" PRIu64 " bytes",
			      g->size);
	if (ret)
		return dv_http_refuse(g->problem, ret, "writing the staging file: %s",
			      strerror(-ret));
	if (g->bytes)
		__atomic_fetch_add(g->bytes, len, __ATOMIC_RELAXED);
	return 0;
}

int dv_http_sink_finish(struct dv_http_sink_get *g, int ret,
			struct dv_http_response *resp)
{
	if (ret == 0 && g->sink->written < g->size)
		ret = dv_http_refuse(g->problem, -EPIPE, "body ended at byte %" PRIu64
			     " of %" PRIu64, g->sink->written, g->size);
	if (ret < 0 && g->problem[0])
		snprintf(resp->detail, sizeof(resp->detail), "%s", g->problem);
	return ret;
}
