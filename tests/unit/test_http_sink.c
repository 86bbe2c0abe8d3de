/*
 * A GET into a sink (http_sink.h) without a network: the answers a server
 * may give to a first or a resumed request, handed to the callbacks as
 * dv_http_perform() would, and what the attempt concludes.
 */
#include <check.h>
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/net/http_sink.h"
#include "helpers.h"

#define SIZE 1000

static uint8_t data[2 * SIZE];
static char logbuf[4096];

static void capture(enum dv_log_level level, const char *line)
{
	size_t n = strlen(logbuf);

	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", line);
}

static const struct answer {
	uint64_t have;         /* bytes in the sink before the attempt */
	long status;
	uint64_t length;       /* Content-Length; 0: none */
	int64_t range;         /* Content-Range <range>-999/1000; -1: none */
	size_t body;           /* body bytes, from offset range (or 0) */
	int ret;
	const char *said;      /* in the log (ret 0) or resp.detail */
} answers[] = {
	{ 0, 200, SIZE, -1, SIZE, 0, "" },
	{ 400, 206, 600, 400, 600, 0,
	  "origin: GET http://o/x.tar: resuming at byte 400" },
	{ 400, 200, SIZE, -1, SIZE, 0,
	  "origin: GET http://o/x.tar: the range was answered with the whole object, starting over" },
	{ 400, 206, 0, 300, 0, -EPROTO,
	  "Content-Range 300-999/1000 does not answer bytes=400- of 1000" },
	{ 0, 206, 0, 0, 0, -EPROTO,
	  "HTTP 206 without a Content-Range we asked for" },
	{ 400, 206, 0, -1, 0, -EPROTO,
	  "HTTP 206 without a Content-Range we asked for" },
	{ 0, 204, 0, -1, 0, -EPROTO, "unexpected HTTP 204" },
	{ 0, 200, SIZE + 1, -1, 0, -EPROTO,
	  "Content-Length 1001, expected 1000" },
	{ 500, 206, 0, 500, 600, -EPROTO,
	  "body longer than the expected 1000 bytes" },
	{ 0, 200, 0, -1, SIZE - 1, -EPIPE, "body ended at byte 999 of 1000" },
};

START_TEST(test_answer)
{
	const struct answer *a = &answers[_i];
	struct dv_http_request req = { .url = "http://o/x.tar" };
	struct dv_http_response resp = { .status = a->status };
	struct dv_sink sink;
	struct dv_http_sink_get g = { .sink = &sink, .size = SIZE,
				      .who = "origin", .shown = req.url };
	uint64_t bytes = 0, from = a->range >= 0 ? (uint64_t)a->range : 0;
	uint8_t digest[32];
	int fd = memfd_create("http_sink", 0), ret;

	dv_test_pattern(data, sizeof(data), 3);
	SHA256(data, SIZE, digest);
	dv_log_set_level(DV_LOG_INFO);
	dv_log_set_sink(capture);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dv_sink_init(&sink, fd, SIZE, digest), 0);
	ck_assert_int_eq(dv_sink_write(&sink, data, a->have), 0);
	g.bytes = &bytes;
	ck_assert(!dv_http_sink_prepare(&g, &req));
	ck_assert(req.ranged == (a->have > 0));
	ck_assert_uint_eq(req.range_start, a->have);
	resp.has_length = a->length > 0;
	resp.content_length = a->length;
	resp.has_range = a->range >= 0;
	resp.range_start = from;
	resp.range_end = SIZE - 1;
	resp.range_total = SIZE;
	ret = req.on_start(req.arg, &resp);
	if (ret == 0 && a->body)
		ret = req.on_body(req.arg, data + from, a->body);
	ck_assert_int_eq(dv_http_sink_finish(&g, ret, &resp), a->ret);
	if (a->ret == 0) {
		ck_assert_msg(strstr(logbuf, a->said), "%s", logbuf);
		ck_assert_uint_eq(bytes, a->body);
		ck_assert_int_eq(dv_sink_finish(&sink), 0);
	} else {
		ck_assert_str_eq(resp.detail, a->said);
	}
	dv_sink_release(&sink);
	close(fd);
}
END_TEST

/* The connection broke after the last byte: nothing is left to ask for. */
START_TEST(test_complete_sink_asks_nothing)
{
	struct dv_http_request req = { .url = "http://o/x.tar" };
	struct dv_sink sink;
	struct dv_http_sink_get g = { .sink = &sink, .size = SIZE,
				      .who = "origin", .shown = req.url };
	uint8_t digest[32];
	int fd = memfd_create("http_sink", 0);

	dv_test_pattern(data, sizeof(data), 3);
	SHA256(data, SIZE, digest);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dv_sink_init(&sink, fd, SIZE, digest), 0);
	ck_assert_int_eq(dv_sink_write(&sink, data, SIZE), 0);
	ck_assert(dv_http_sink_prepare(&g, &req));
	ck_assert(!req.ranged);
	ck_assert_int_eq(dv_sink_finish(&sink), 0);
	dv_sink_release(&sink);
	close(fd);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("http_sink");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_answer, 0,
			    sizeof(answers) / sizeof(answers[0]));
	tcase_add_test(tc, test_complete_sink_asks_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
