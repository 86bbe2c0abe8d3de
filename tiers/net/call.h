/*
 * One request to a server, as many attempts as it takes: the only retry
 * loop of datavofs. Every origin, cloud tier, upload and credential
 * endpoint runs its requests through dv_http_call_run(), so the policy is
 * written once:
 *
 *   - what is retried: dv_http_transient() (408, 429, 5xx, connection
 *     failures, cuts); everything else fails at once;
 *   - how many attempts: 1 + http->retries (the config's http.retries);
 *   - how long between them: dv_http_backoff_ms() (exponential, jitter),
 *     or the server's Retry-After when it asks for longer (capped);
 *   - a 401 with credentials in use: the token is dropped once
 *     (ops->refresh) and the request made again, outside the count;
 *   - what is logged: a warning per retry, one line at the end (a
 *     missing object at the caller's level, "access denied" through the
 *     caller's rate limiter), and the errno the caller gets
 *     (dv_http_final_errno()).
 *
 * What differs between backends is in the hooks: an attempt builds and
 * signs its own request (so a retry is signed anew, with a fresh date),
 * and rewind() says how to resume (a sink asks for the bytes it lacks with
 * Range; a buffer starts over).
 *
 * This file knows no backend and does no I/O of its own.
 */
#ifndef DV_HTTP_CALL_H
#define DV_HTTP_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "config/log.h"
#include "http.h"

#define DV_HTTP_RETRY_AFTER_MAX_MS 30000u /* a longer Retry-After is cut */
#define DV_HTTP_DENIED_EVERY 30 /* s between two detailed "denied" lines */
#define DV_HTTP_REFRESH_AHEAD 300 /* s before expiry, at most half the life */

struct dv_http_call_ops {
	/*
	 * One attempt: builds (and signs) the request, sends it with
	 * dv_http_perform() and maps the answer (dv_http_status_errno(), or
	 * the service's own reading). Returns the call's result (≥ 0) or
	 * -errno; fills @resp. Required.
	 */
	int (*attempt)(void *ctx, struct dv_http_response *resp);
	/*
	 * Before each retry: undoes what the failed attempt consumed (a
	 * buffer empties; a sink resumes where it stopped). Returns true when
	 * nothing is left to ask for: the call then succeeds with 0. May be
	 * NULL (nothing to undo).
	 */
	bool (*rewind)(void *ctx);
	/*
	 * After an HTTP 401 with credentials in use: forgets the cached token
	 * so that the next attempt fetches a new one. Called at most once per
	 * call; that attempt is not counted as a retry. NULL: a 401 is final.
	 */
	void (*refresh)(void *ctx);
	/*
	 * The service's own error code in a failed answer (S3's <Code>, a
	 * JSON "error"), for the description: writes it into @buf ("" for
	 * none). May be NULL.
	 */
	void (*error_code)(const struct dv_http_response *resp, char *buf,
			   size_t len);
};

/* Limits "access denied" lines to one per DV_HTTP_DENIED_EVERY seconds. */
struct dv_http_denied {
	time_t last;          /* atomic */
	unsigned suppressed;  /* atomic: lines left out since the last one */
};

enum dv_http_call_flags {
	/* The caller logs the final failure itself (its own wording). */
	DV_HTTP_CALL_QUIET = 1 << 0,
};

struct dv_http_call {
	struct dv_http *http;             /* borrowed; gives the retry count */
	const struct dv_http_call_ops *ops;
	void *ctx;                        /* handed to every hook */
	const char *who;                  /* log prefix: "origin", "tier 'x'" */
	const char *what;                 /* "GET <object>"; never a secret */
	enum dv_log_level enoent_level;   /* a final -ENOENT is logged so */
	struct dv_http_denied *denied;    /* NULL: every -EACCES is logged */
	unsigned flags;                   /* enum dv_http_call_flags */
	/* Out: the attempts made (refreshes included) and the last error. */
	unsigned attempts;
	int last_err;
};

/*
 * Runs @c to its end. Returns the attempt's result (≥ 0), or the last
 * failure mapped by dv_http_final_errno() (-ENOENT, -EACCES, -ETIMEDOUT,
 * -EFBIG and local errors stay; network failures become -EIO). @resp
 * holds the last answer. Sleeps between attempts; thread-safe as far as
 * the hooks are.
 */
int dv_http_call_run(struct dv_http_call *c, struct dv_http_response *resp);

/*
 * The pause before retry @retry after @resp: the backoff, or the
 * server's Retry-After if longer (at most DV_HTTP_RETRY_AFTER_MAX_MS).
 */
unsigned dv_http_retry_delay_ms(unsigned retry,
				const struct dv_http_response *resp);

/*
 * Sleeps the pause before retry @retry of work made of whole calls (a
 * background upload tried again after its requests gave up): the same
 * backoff as between attempts, so that one policy spaces every retry.
 */
void dv_net_pause(unsigned retry);

/*
 * When to try a background job again whose requests gave up (an upload
 * whose destination is down): 1 s doubling with each retry, at most
 * DV_NET_LATER_MAX_MS, with jitter (between half and all of it), in ms.
 * The caller waits however it waits (a condition variable's deadline).
 */
#define DV_NET_LATER_MAX_MS 30000u
unsigned dv_net_later_ms(unsigned retry);

/*
 * Why an attempt failed, for a log line: "HTTP 503 (SlowDown)" for an
 * answer that is not 2xx (@code may be NULL or ""), else libcurl's or the
 * attempt's detail, else strerror. Returns @buf.
 */
char *dv_http_describe(int err, const struct dv_http_response *resp,
		       const char *code, char *buf, size_t len);

/*
 * Logs "WHO: access denied: MESSAGE" at error level, at most once per
 * DV_HTTP_DENIED_EVERY seconds per @d (NULL: always), saying how many
 * lines were left out since. The message must hold no secret.
 */
__attribute__((format(printf, 3, 4)))
void dv_http_log_denied(struct dv_http_denied *d, const char *who,
			const char *fmt, ...);

/*
 * When to fetch a new token that was obtained at @obtained and expires at
 * @expires: DV_HTTP_REFRESH_AHEAD seconds before expiry, or half-way
 * through its life if that is shorter. The one refresh-ahead policy of
 * every credential source.
 */
time_t dv_http_refresh_at(time_t obtained, time_t expires);

#endif
