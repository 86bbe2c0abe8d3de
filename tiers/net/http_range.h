/*
 * A GET of one part of an object into a caller's buffer: the chunk fetches
 * of a streaming fill (tiers/core/fill.h). The request asks for exactly
 * the bytes the buffer still lacks (Range: bytes=S-E); only a 206 that
 * answers exactly that part of an object of the expected size is taken.
 * A 200 means the server ignored the Range: -EPROTO, and the caller falls
 * back to fetching the object whole. A body cut short is -EPIPE, which
 * the retry loop (call.h) resumes where it stopped. Verifying the bytes
 * is the caller's (a chunk list, chunks.h); the URL and signing too.
 */
#ifndef DV_HTTP_RANGE_H
#define DV_HTTP_RANGE_H

#include <stdbool.h>
#include <stdint.h>

#include "http.h"

struct dv_http_range_get {
	void *buf;               /* borrowed; @len bytes */
	uint64_t off;            /* of the part, in the object */
	uint64_t len;
	uint64_t size;           /* of the whole object */
	uint64_t got;            /* bytes in @buf so far */
	uint64_t *bytes;         /* counts body bytes (atomic) or NULL */
	char problem[DV_HTTP_DETAIL_MAX]; /* why this attempt was refused */
};

/*
 * Starts an attempt: clears the problem and, when @req is not NULL, sets
 * its Range (the bytes still missing), expect_bytes and callbacks. A
 * caller that signs its own Range passes NULL and uses
 * dv_http_range_header(). True when every byte is in already.
 */
bool dv_http_range_prepare(struct dv_http_range_get *g,
			   struct dv_http_request *req);

/* "Range: bytes=S-E" of the missing bytes, for a signed request. */
void dv_http_range_header(const struct dv_http_range_get *g, char *buf,
			  size_t len);

/* on_start and on_body of dv_http_request; @arg is the dv_http_range_get. */
int dv_http_range_start(void *arg, const struct dv_http_response *resp);
int dv_http_range_body(void *arg, const void *buf, size_t len);

/*
 * Ends an attempt that gave @ret (0 for a 2xx answer, or -errno): a part
 * that stopped short is -EPIPE; the problem goes to resp->detail when the
 * result is < 0. Returns the result.
 */
int dv_http_range_finish(struct dv_http_range_get *g, int ret,
			 struct dv_http_response *resp);

#endif
