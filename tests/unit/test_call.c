/*
 * The one retry loop (tiers/net/call.h) without a network: scripted
 * attempts, and what the loop makes of them: how often it tries, when it
 * refreshes, rewinds or stops, what it logs and which errno it returns.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config/log.h"
#include "tiers/net/call.h"
#include "helpers.h"

#define MAX_STEPS 8

static char logbuf[8192];

static void capture(enum dv_log_level level, const char *line)
{
	size_t n = strlen(logbuf);

	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", line);
}

struct script {
	int ret[MAX_STEPS];     /* what attempt n returns */
	long status[MAX_STEPS]; /* the answer's status on attempt n */
	unsigned retry_after_ms;
	unsigned calls, rewinds, refreshes;
	unsigned rewind_done_at; /* rewind number that says "all there"; 0 never */
};

static int attempt(void *arg, struct dv_http_response *resp)
{
	struct script *s = arg;
	unsigned n = s->calls++;

	ck_assert_uint_lt(n, MAX_STEPS);
	resp->status = s->status[n];
	resp->retry_after_ms = s->retry_after_ms;
	if (s->status[n] == 404)
		snprintf(resp->errbody, sizeof(resp->errbody), "NoSuchKey");
	return s->ret[n];
}

static bool rewind_cb(void *arg)
{
	struct script *s = arg;

	return ++s->rewinds == s->rewind_done_at;
}

static void refresh_cb(void *arg)
{
	((struct script *)arg)->refreshes++;
}

static void code_cb(const struct dv_http_response *resp, char *buf, size_t len)
{
	snprintf(buf, len, "%s", resp->errbody);
}

static const struct dv_http_call_ops ops = {
	.attempt = attempt,
	.rewind = rewind_cb,
	.refresh = refresh_cb,
	.error_code = code_cb,
};

static int run(struct script *s, unsigned retries, struct dv_http_call *out)
{
	struct dv_http http = { .retries = retries };
	struct dv_http_response resp;
	struct dv_http_call c = {
		.http = &http, .ops = &ops, .ctx = s, .who = "tier 't'",
		.what = "GET obj", .enoent_level = DV_LOG_WARNING,
	};
	int ret;

	logbuf[0] = '\0';
	dv_log_set_sink(capture);
	ret = dv_http_call_run(&c, &resp);
	dv_log_set_sink(NULL);
	if (out)
		*out = c;
	return ret;
}

START_TEST(first_attempt_wins)
{
	struct script s = { .ret = { 7 }, .status = { 200 } };

	ck_assert_int_eq(run(&s, 3, NULL), 7);
	ck_assert_uint_eq(s.calls, 1);
	ck_assert_uint_eq(s.rewinds, 0);
	ck_assert_str_eq(logbuf, "");
}
END_TEST

START_TEST(transient_is_retried_after_a_rewind)
{
	struct script s = { .ret = { -EAGAIN, -ECONNRESET, 0 },
			    .status = { 503, 0, 200 } };
	struct dv_http_call c;

	ck_assert_int_eq(run(&s, 3, &c), 0);
	ck_assert_uint_eq(s.calls, 3);
	ck_assert_uint_eq(c.attempts, 3);
	ck_assert_uint_eq(s.rewinds, 2);
	ck_assert_ptr_nonnull(strstr(logbuf, "tier 't': GET obj: HTTP 503 (attempt 1 of 4), retrying in "));
	ck_assert_ptr_nonnull(strstr(logbuf, "(attempt 2 of 4)"));
}
END_TEST

START_TEST(retries_run_out)
{
	struct script s = { .ret = { -EAGAIN, -EAGAIN, -EAGAIN },
			    .status = { 500, 500, 500 } };

	/* A server error is reported as an I/O error once attempts are over. */
	ck_assert_int_eq(run(&s, 2, NULL), -EIO);
	ck_assert_uint_eq(s.calls, 3);
	ck_assert_ptr_nonnull(strstr(logbuf, "tier 't': GET obj failed after 3 attempts: HTTP 500"));
}
END_TEST

START_TEST(final_errors_are_not_retried)
{
	struct script s = { .ret = { -ENOENT }, .status = { 404 } };
	struct script t = { .ret = { -ETIMEDOUT } };

	ck_assert_int_eq(run(&s, 3, NULL), -ENOENT);
	ck_assert_uint_eq(s.calls, 1);
	ck_assert_ptr_nonnull(strstr(logbuf, "tier 't': GET obj: not found (HTTP 404 (NoSuchKey))"));
	/* A timeout is worth another try, and stays a timeout at the end. */
	ck_assert_int_eq(run(&t, 0, NULL), -ETIMEDOUT);
	ck_assert_uint_eq(t.calls, 1);
}
END_TEST

START_TEST(unauthorized_refreshes_once)
{
	struct script s = { .ret = { -EACCES, 0 }, .status = { 401, 200 } };
	struct script t = { .ret = { -EACCES, -EACCES, 0 },
			    .status = { 401, 401, 200 } };

	/* With no retries left, the refreshed attempt still happens. */
	ck_assert_int_eq(run(&s, 0, NULL), 0);
	ck_assert_uint_eq(s.calls, 2);
	ck_assert_uint_eq(s.refreshes, 1);
	/* A second 401 is final: no refresh loop. */
	ck_assert_int_eq(run(&t, 3, NULL), -EACCES);
	ck_assert_uint_eq(t.calls, 2);
	ck_assert_uint_eq(t.refreshes, 1);
	ck_assert_ptr_nonnull(strstr(logbuf, "tier 't': access denied: GET obj: HTTP 401"));
}
END_TEST

START_TEST(forbidden_does_not_refresh)
{
	struct script s = { .ret = { -EACCES }, .status = { 403 } };

	ck_assert_int_eq(run(&s, 3, NULL), -EACCES);
	ck_assert_uint_eq(s.calls, 1);
	ck_assert_uint_eq(s.refreshes, 0);
}
END_TEST

START_TEST(rewind_with_nothing_left_succeeds)
{
	struct script s = { .ret = { -EPIPE, -EPIPE }, .rewind_done_at = 1 };

	ck_assert_int_eq(run(&s, 3, NULL), 0);
	ck_assert_uint_eq(s.calls, 1);
}
END_TEST

START_TEST(retry_after_lengthens_the_pause)
{
	struct dv_http_response r = { .retry_after_ms = 9000 };
	struct dv_http_response none = { 0 };
	struct dv_http_response huge = { .retry_after_ms = 3600000 };

	ck_assert_uint_eq(dv_http_retry_delay_ms(0, &r), 9000);
	ck_assert_uint_le(dv_http_retry_delay_ms(0, &none), 200);
	ck_assert_uint_ge(dv_http_retry_delay_ms(0, &none), 100);
	ck_assert_uint_eq(dv_http_retry_delay_ms(0, &huge),
			  DV_HTTP_RETRY_AFTER_MAX_MS);
}
END_TEST

/* Background retries: 1 s doubling, at most 30 s, with jitter. */
START_TEST(later_spacing)
{
	for (int i = 0; i < 50; i++) {
		ck_assert_uint_ge(dv_net_later_ms(0), 500);
		ck_assert_uint_le(dv_net_later_ms(0), 1000);
		ck_assert_uint_ge(dv_net_later_ms(3), 4000);
		ck_assert_uint_le(dv_net_later_ms(3), 8000);
		ck_assert_uint_ge(dv_net_later_ms(40), DV_NET_LATER_MAX_MS / 2);
		ck_assert_uint_le(dv_net_later_ms(40), DV_NET_LATER_MAX_MS);
		ck_assert_uint_le(dv_http_backoff_ms(9), 5000);
	}
}
END_TEST

START_TEST(describe_prefers_the_status)
{
	struct dv_http_response r = { .status = 503 };
	struct dv_http_response d = { .status = 200 };
	struct dv_http_response e = { 0 };
	char buf[128];

	snprintf(r.detail, sizeof(r.detail), "ignored");
	ck_assert_str_eq(dv_http_describe(-EAGAIN, &r, "SlowDown", buf, sizeof(buf)),
			 "HTTP 503 (SlowDown)");
	ck_assert_str_eq(dv_http_describe(-EAGAIN, &r, NULL, buf, sizeof(buf)),
			 "HTTP 503");
	snprintf(d.detail, sizeof(d.detail), "body cut short");
	ck_assert_str_eq(dv_http_describe(-EPIPE, &d, "", buf, sizeof(buf)),
			 "body cut short");
	ck_assert_str_eq(dv_http_describe(-ECONNREFUSED, &e, NULL, buf, sizeof(buf)),
			 strerror(ECONNREFUSED));
}
END_TEST

START_TEST(denied_lines_are_rate_limited)
{
	struct dv_http_denied d = { 0 };

	logbuf[0] = '\0';
	dv_log_set_sink(capture);
	dv_http_log_denied(&d, "tier 'a'", "GET %s", "one");
	dv_http_log_denied(&d, "tier 'a'", "GET %s", "two");
	dv_http_log_denied(&d, "tier 'a'", "GET %s", "three");
	ck_assert_ptr_nonnull(strstr(logbuf, "tier 'a': access denied: GET one\n"));
	ck_assert_ptr_null(strstr(logbuf, "two"));
	/* Once the interval has passed, the next line says what was left out. */
	d.last -= DV_HTTP_DENIED_EVERY;
	dv_http_log_denied(&d, "tier 'a'", "GET %s", "four");
	dv_log_set_sink(NULL);
	ck_assert_ptr_nonnull(strstr(logbuf, "GET four (2 more since the last)"));
	ck_assert_uint_eq(d.suppressed, 0);
}
END_TEST

START_TEST(refresh_ahead_policy)
{
	ck_assert_int_eq(dv_http_refresh_at(1000, 1000 + 3600), 1000 + 3600 - 300);
	ck_assert_int_eq(dv_http_refresh_at(1000, 1000 + 100), 1000 + 50);
	ck_assert_int_eq(dv_http_refresh_at(1000, 1000), 1000);
}
END_TEST

static Suite *call_suite(void)
{
	Suite *s = suite_create("call");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, first_attempt_wins);
	tcase_add_test(tc, transient_is_retried_after_a_rewind);
	tcase_add_test(tc, retries_run_out);
	tcase_add_test(tc, final_errors_are_not_retried);
	tcase_add_test(tc, unauthorized_refreshes_once);
	tcase_add_test(tc, forbidden_does_not_refresh);
	tcase_add_test(tc, rewind_with_nothing_left_succeeds);
	tcase_add_test(tc, retry_after_lengthens_the_pause);
	tcase_add_test(tc, describe_prefers_the_status);
	tcase_add_test(tc, later_spacing);
	tcase_add_test(tc, denied_lines_are_rate_limited);
	tcase_add_test(tc, refresh_ahead_policy);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(call_suite());
}
