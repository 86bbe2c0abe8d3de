/*
 * A GET of one object into a verifying sink (sink.h), shared by the HTTP
 * origin and the cloud tiers. An attempt after a cut asks for the bytes
 * the sink lacks (Range: bytes=<written>-); a 206 must answer exactly that
 * part of an object of the expected size, a 200 must be the whole object
 * (the Range was ignored: the sink starts over), any other answer is
 * refused with -EPROTO and a problem saying why. The retries, the URL and
 * the signing stay the caller's.
 */
#ifndef DV_HTTP_SINK_H
#define DV_HTTP_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include "http.h"
#include "tiers/core/sink.h"

struct dv_http_sink_get {
	struct dv_sink *sink;    /* borrowed */
	uint64_t size;           /* of the whole object */
	const char *who;         /* for log lines: "origin", "tier 'name'" */
	const char *shown;       /* for log lines: the object, no secret */
	uint64_t *bytes;         /* counts stored body bytes (atomic) or NULL */
	bool ranged;             /* this attempt asked for bytes=<written>- */
	char problem[DV_HTTP_DETAIL_MAX]; /* why this attempt was refused */
};

/*
 * Starts an attempt: clears the problem, sets ranged when the sink holds
 * bytes already (logged as a resume) and, when @req is not NULL, sets its
 * Range, expect_bytes (the deadline) and points its on_start, on_body and
 * arg here. A caller that signs its own Range header passes NULL, sets the
 * callbacks once, and ranged and expect_bytes itself. Returns true when the sink already holds every byte (a
 * connection that broke after the last one): there is nothing to ask
 * for, and the attempt has succeeded.
 */
bool dv_http_sink_prepare(struct dv_http_sink_get *g,
			  struct dv_http_request *req);

/* on_start and on_body of dv_http_request; @arg is the dv_http_sink_get. */
int dv_http_sink_start(void *arg, const struct dv_http_response *resp);
int dv_http_sink_body(void *arg, const void *buf, size_t len);

/*
 * Ends an attempt that gave @ret (0 for a 2xx answer, or -errno): a body
 * that stopped short of the size is -EPIPE. The problem, if any, goes to
 * resp->detail when the result is < 0. Returns the result.
 */
int dv_http_sink_finish(struct dv_http_sink_get *g, int ret,
			struct dv_http_response *resp);

#endif
