/*
 * The retry loop (call.h). Nothing here knows a backend: the hooks build,
 * sign and read each attempt.
 */
#include "call.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

char *dv_http_describe(int err, const struct dv_http_response *resp,
		       const char *code, char *buf, size_t len)
{
	bool has_code = code && code[0];

	if (resp->status && (resp->status < 200 || resp->status > 299))
		snprintf(buf, len, "HTTP %ld%s%s%s", resp->status,
			 has_code ? " (" : "", has_code ? code : "",
			 has_code ? ")" : "");
	else if (resp->detail[0])
		snprintf(buf, len, "%s", resp->detail);
	else
		snprintf(buf, len, "%s", strerror(err < 0 ? -err : err));
	return buf;
}

unsigned dv_http_retry_delay_ms(unsigned retry,
				const struct dv_http_response *resp)
{
	unsigned delay = dv_http_backoff_ms(retry);
	unsigned asked = resp->retry_after_ms;

	if (asked > DV_HTTP_RETRY_AFTER_MAX_MS)
		asked = DV_HTTP_RETRY_AFTER_MAX_MS;
	return asked > delay ? asked : delay;
}

unsigned dv_net_later_ms(unsigned retry)
{
	return dv_http_backoff_from(1000, retry, DV_NET_LATER_MAX_MS);
}

void dv_net_pause(unsigned retry)
{
	dv_http_sleep_ms(dv_http_backoff_ms(retry));
}

void dv_http_log_denied(struct dv_http_denied *d, const char *who,
			const char *fmt, ...)
{
	char msg[768], more[64] = "";
	time_t now = time(NULL);
	va_list ap;

	if (d) {
		time_t last = __atomic_load_n(&d->last, __ATOMIC_RELAXED);
		unsigned left;

		if (last && now - last < DV_HTTP_DENIED_EVERY) {
			__atomic_fetch_add(&d->suppressed, 1, __ATOMIC_RELAXED);
			return;
		}
		/* One thread wins the slot; the others count as left out. */
		if (!__atomic_compare_exchange_n(&d->last, &last, now, false,
						 __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED)) {
			__atomic_fetch_add(&d->suppressed, 1, __ATOMIC_RELAXED);
			return;
		}
		left = __atomic_exchange_n(&d->suppressed, 0, __ATOMIC_RELAXED);
		if (left)
			snprintf(more, sizeof(more), " (%u more since the last)",
				 left);
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dv_err("%s: access denied: %s%s", who, msg, more);
}

time_t dv_http_refresh_at(time_t obtained, time_t expires)
{
	time_t life = expires - obtained;
	time_t margin = life / 2 < DV_HTTP_REFRESH_AHEAD ? life / 2
						     : DV_HTTP_REFRESH_AHEAD;

	return expires - (margin > 0 ? margin : 0);
}

static void code_of(const struct dv_http_call *c,
		    const struct dv_http_response *resp, char *buf, size_t len)
{
	buf[0] = '\0';
	if (c->ops->error_code && resp->status >= 300)
		c->ops->error_code(resp, buf, len);
}

static void log_outcome(const struct dv_http_call *c, int err,
			const struct dv_http_response *resp, unsigned tries)
{
	char why[DV_HTTP_DETAIL_MAX + 96], code[64];

	if (c->flags & DV_HTTP_CALL_QUIET)
		return;
	code_of(c, resp, code, sizeof(code));
	dv_http_describe(err, resp, code, why, sizeof(why));
	if (err == -ENOENT)
		dv_log(c->enoent_level, "%s: %s: not found (%s)", c->who,
		       c->what, why);
	else if (err == -EACCES)
		dv_http_log_denied(c->denied, c->who, "%s: %s", c->what, why);
	else if (tries > 1)
		dv_err("%s: %s failed after %u attempts: %s", c->who, c->what,
		       tries, why);
	else
		dv_err("%s: %s failed: %s", c->who, c->what, why);
}

int dv_http_call_run(struct dv_http_call *c, struct dv_http_response *resp)
{
	char why[DV_HTTP_DETAIL_MAX + 96], code[64];
	unsigned retry = 0, delay;
	bool refreshed = false;
	int ret;

	c->attempts = 0;
	for (;;) {
		memset(resp, 0, sizeof(*resp));
		c->attempts++;
		ret = c->ops->attempt(c->ctx, resp);
		c->last_err = ret < 0 ? ret : 0;
		if (ret >= 0)
			return ret;
		if (ret == -EACCES && resp->status == 401 && c->ops->refresh &&
		    !refreshed) {
			dv_info("%s: %s: HTTP 401, fetching new credentials",
				c->who, c->what);
			c->ops->refresh(c->ctx);
			refreshed = true;
		} else if (!dv_http_transient(ret) ||
			   retry >= c->http->retries) {
			break;
		} else {
			delay = dv_http_retry_delay_ms(retry, resp);
			code_of(c, resp, code, sizeof(code));
			dv_warn("%s: %s: %s (attempt %u of %u), retrying in %u ms",
				c->who, c->what,
				dv_http_describe(ret, resp, code, why, sizeof(why)),
				retry + 1, c->http->retries + 1, delay);
			dv_http_sleep_ms(delay);
			retry++;
		}
		if (c->ops->rewind && c->ops->rewind(c->ctx))
			return 0; /* nothing is left to ask for */
	}
	log_outcome(c, ret, resp, c->attempts);
	return dv_http_final_errno(ret);
}
