/*
 * A small libcurl wrapper for everything in tiers/ that speaks HTTP: the
 * HTTP origin and the cloud tiers.
 *
 * One struct dv_http per remote endpoint holds the transfer settings of the
 * configuration (http: in shards.yaml) and a pool of idle easy handles. A
 * handle keeps its connections (and TLS sessions) alive between requests, so
 * a thread that makes one request after another reuses one connection.
 *
 * dv_http_perform() makes exactly one attempt and streams the body of a 2xx
 * answer to a callback; nothing is buffered in between. Retries are
 * dv_http_call_run()'s (call.h), with hooks to resume (Range) and re-sign.
 *
 * Fixed in every request: TLS verification on (with the configured CA file
 * or directory), http and https only, no signals, bounded response headers,
 * an overall deadline that grows with the bytes the request moves. Redirects
 * are followed only when the request asks (follow_redirects: plain origin
 * GETs), at most DV_HTTP_MAX_REDIRS, and only to the same scheme: a signed
 * request or a credential endpoint carries secret headers that must not
 * reach another host.
 * With CURLOPT_NOSIGNAL libcurl does not block SIGPIPE itself: the process
 * must ignore it (a peer closing a TLS connection could otherwise kill it).
 */
#ifndef DV_HTTP_H
#define DV_HTTP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

#define DV_HTTP_CONNECT_TIMEOUT 10  /* s, when the config says nothing */
#define DV_HTTP_LOW_SPEED_LIMIT 1024 /* B/s */
#define DV_HTTP_LOW_SPEED_TIME 30   /* s */
#define DV_HTTP_RETRIES 4
/*
 * The deadline of one attempt: connect_timeout + 2 * low_speed_time (the
 * answer's start) + bytes / RATE seconds: proportional to what it moves.
 */
#define DV_HTTP_DEADLINE_RATE (64u << 10) /* B/s: the slowest link served */

#define DV_HTTP_MAX_REDIRS 5
#define DV_HTTP_MAX_HEADERS 100           /* header lines per response */
#define DV_HTTP_MAX_HEADER_BYTES (64u << 10) /* per response */
#define DV_HTTP_BUFFER_SIZE (512u << 10)  /* libcurl receive buffer */
#define DV_HTTP_POOL_MAX 32               /* idle handles kept */
#define DV_HTTP_ETAG_MAX 256
#define DV_HTTP_ERRBODY_MAX 512
#define DV_HTTP_DETAIL_MAX 256

struct dv_http {
	long connect_timeout;    /* s */
	long low_speed_limit;    /* B/s */
	long low_speed_time;     /* s below the limit → -ETIMEDOUT */
	unsigned retries;        /* extra attempts the caller may make */
	char *ca_file;           /* NULL: the system's */
	char *ca_path;

	pthread_mutex_t lock;
	void *idle[DV_HTTP_POOL_MAX]; /* CURL *; protected by lock */
	size_t nidle;                 /* protected by lock */
};

/*
 * Prepares @h from @cfg (NULL, or zero timeouts: the defaults above) and
 * initializes libcurl once per process. Opens no connection. 0 or -ENOMEM.
 */
int dv_http_init(struct dv_http *h, const struct dv_http_config *cfg);

/* Frees the idle handles. No request may be running. */
void dv_http_release(struct dv_http *h);

struct dv_http_response;

/*
 * Called once per request, when the headers of a 2xx answer are complete
 * and before its first body byte. 0, or -errno to abort the transfer.
 */
typedef int (*dv_http_start_fn)(void *arg,
				const struct dv_http_response *resp);

/*
 * Called with each piece of the body of a 2xx answer (bodies of other
 * answers go to resp->errbody). @buf is valid during the call only.
 * 0, or -errno to abort the transfer.
 */
typedef int (*dv_http_body_fn)(void *arg, const void *buf, size_t len);

/*
 * Called with each header line ("Name: value", CRLF removed) of each
 * answer, redirects and 1xx included: resp->status says whose. For headers
 * this file does not parse (Location of a GCS upload session, Range of a
 * 308). 0, or -errno to abort the transfer.
 */
typedef int (*dv_http_header_fn)(void *arg,
				 const struct dv_http_response *resp,
				 const char *line, size_t len);

struct dv_http_request {
	const char *method;          /* NULL: "GET"; "HEAD" reads no body */
	/* May carry userinfo (sent as Basic auth); never logged by this file. */
	const char *url;
	const char *const *headers;  /* "Name: value", NULL-terminated; or NULL */
	bool ranged;                 /* send Range: bytes=<range_start>- */
	uint64_t range_start;
	uint64_t range_len;          /* with ranged: bytes asked for; 0: to the end */
	uint64_t max_body;           /* 2xx body larger than this: -EFBIG; 0: no limit */
	bool decompress;             /* Accept-Encoding with what libcurl decodes */
	bool follow_redirects;       /* same scheme only; never on signed calls */
	/*
	 * Bytes the answer is expected to carry (the part of a shard asked
	 * for), for the deadline; 0: max_body or the request body's length.
	 */
	uint64_t expect_bytes;

	/*
	 * Request body (PUT, POST…): @body_fd_len bytes read from @body_fd
	 * at offset 0 when @body_fd_len > 0, else @body_len bytes of @body.
	 */
	int body_fd;
	uint64_t body_fd_len;
	const void *body;
	size_t body_len;

	dv_http_start_fn on_start;   /* may be NULL */
	dv_http_body_fn on_body;     /* may be NULL: the body is dropped */
	void *arg;
	dv_http_header_fn on_header; /* may be NULL; gets arg too */
};

/* What came back. Header fields describe the last (final) answer. */
struct dv_http_response {
	long status;                 /* 0 when no answer arrived */
	bool has_length;
	uint64_t content_length;
	bool has_range;              /* Content-Range: bytes S-E/T */
	uint64_t range_start;
	uint64_t range_end;
	uint64_t range_total;        /* 0 when the server said "*" */
	char etag[DV_HTTP_ETAG_MAX]; /* "" when absent or not printable */
	unsigned retry_after_ms;     /* Retry-After (seconds or a date); 0: none */
	uint64_t body_bytes;         /* 2xx body bytes handed to on_body */
	char errbody[DV_HTTP_ERRBODY_MAX]; /* start of a non-2xx body */
	char detail[DV_HTTP_DETAIL_MAX];   /* libcurl's message on failure */
};

/*
 * Makes one attempt at @req. Returns 0 when a complete answer arrived,
 * whatever its status (see resp->status and dv_http_status_errno()), else:
 *   -ETIMEDOUT     connect timeout, slower than the low-speed limit, or
 *                  past the deadline
 *   -ECONNREFUSED  could not connect;  -EHOSTUNREACH  name not resolved
 *   -ECONNRESET    connection reset or dropped, TLS handshake failure
 *   -EPIPE         the body ended before its announced length
 *   -EPROTO        a bad answer: too many or too large headers, too many
 *                  redirects, a redirect to another protocol, bad TLS peer
 * A redirect that is not followed is a complete answer (status 3xx).
 *   -EFBIG         the 2xx body passed req->max_body
 *   -ENOMEM, -EIO, or what on_start / on_body returned.
 * @resp is always filled (resp->detail says more on failure). Thread-safe.
 */
int dv_http_perform(struct dv_http *h, const struct dv_http_request *req,
		    struct dv_http_response *resp);

/*
 * An HTTP status as an errno: 2xx → 0; 404, 410 → -ENOENT; 401, 403 →
 * -EACCES; 408, 429, 5xx → -EAGAIN (worth a retry); anything else → -EIO.
 */
int dv_http_status_errno(long status);

/* Is @err (from perform or dv_http_status_errno) worth another attempt? */
bool dv_http_transient(int err);

/*
 * What to report once attempts are over: network and protocol failures
 * (-EAGAIN, -ECONNREFUSED, -ECONNRESET, -EHOSTUNREACH, -EPIPE, -EPROTO)
 * become -EIO; the rest (-ENOENT, -EACCES, -ETIMEDOUT, -EFBIG, local
 * errors such as -ENOSPC) stays.
 */
int dv_http_final_errno(int err);

/*
 * The pause before retry number @retry (0 = the first retry): 200 ms ·
 * 2^retry, capped at 5 s, with jitter (between half and all of it), in ms.
 */
unsigned dv_http_backoff_ms(unsigned retry);

/* The same from @first_ms, doubling, capped at @max_ms, with jitter. */
unsigned dv_http_backoff_from(unsigned first_ms, unsigned retry,
			       unsigned max_ms);

/*
 * Can @etag (a validator kept from an earlier answer) go back into an
 * If-None-Match header? Only when it cannot break the header: non-empty,
 * shorter than DV_HTTP_ETAG_MAX, printable ASCII.
 */
bool dv_http_etag_sendable(const char *etag);

/* Sleeps @ms milliseconds (restarts after signals). */
void dv_http_sleep_ms(unsigned ms);

/*
 * Says why an attempt was refused: formats into @problem (of
 * DV_HTTP_DETAIL_MAX bytes) and returns @err. For the body callbacks.
 */
__attribute__((format(printf, 3, 4)))
int dv_http_refuse(char *problem, int err, const char *fmt, ...);

/*
 * Writes @url into @buf for a log line: no userinfo, no query, no
 * fragment (either may hold a secret). Always NUL-terminates. Returns @buf.
 */
char *dv_http_redact(const char *url, char *buf, size_t len);

/*
 * A bounded growing buffer to collect a body (documents, XML answers):
 * pass dv_http_buf_append as on_body and the buffer as arg. Kept
 * NUL-terminated. Appending past @max returns -EFBIG.
 */
struct dv_http_buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max;
};

void dv_http_buf_init(struct dv_http_buf *b, size_t max);
void dv_http_buf_release(struct dv_http_buf *b);
int dv_http_buf_append(void *arg, const void *buf, size_t len);
/* Hands the data (malloc'd, NUL-terminated, never NULL on 0) to the caller. */
int dv_http_buf_take(struct dv_http_buf *b, char **out, size_t *len);

#endif
