/*
 * The Prometheus exporter and the status document (fs/metrics.c,
 * fs/status.c, fs/text.c): the exposition text for known counters, label
 * escaping, the address rules, and the HTTP server on a loopback port.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "fs/metrics.h"
#include "fs/status.h"
#include "fs/text.h"
#include "tiers/folder/folder.h"
#include "helpers.h"

static char err[1024];

struct env {
	char *dir;
	struct dv_config cfg;
	struct dv_fs fs;
};

static void env_open(struct env *env, const char *tier_name)
{
	struct dv_ns_options opt = { 0 };
	struct dv_tier *t;
	char path[4096];

	memset(env, 0, sizeof(*env));
	env->dir = dv_test_tmpdir("metrics");
	snprintf(path, sizeof(path), "%s/origin", env->dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/origin/datasets.json", env->dir);
	dv_test_write_file(path, "{\"datasets\": []}\n", 17);
	snprintf(path, sizeof(path), "%s/origin", env->dir);
	ck_assert_int_eq(dv_origin_new(path, NULL, &env->fs.origin, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/tier", env->dir);
	ck_assert_int_eq(dv_folder_tier_create(path, tier_name, 1 << 20, &t), 0);
	ck_assert_int_eq(dv_hierarchy_from_tiers(&t, 1, DV_VERIFY_FILL, &env->fs.hier,
						 err, sizeof(err)), 0);
	opt.origin = env->fs.origin;
	ck_assert_int_eq(dv_ns_new(&opt, &env->fs.ns, err, sizeof(err)), 0);
	env->cfg.dollars_per_gb = 0.09;
	env->cfg.source = DV_CONFIG_DEFAULT;
	env->fs.cfg = &env->cfg;
}

static void env_close(struct env *env)
{
	dv_metrics_free(env->fs.metrics);
	dv_ns_free(env->fs.ns);
	dv_hierarchy_free(env->fs.hier);
	dv_origin_free(env->fs.origin);
	dv_test_rmtree(env->dir);
	free(env->dir);
}

/* The value of the sample named exactly @series, or -1. */
static long long sample_of(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, series, n) == 0 && l[n] == ' ')
			return strtoll(l + n + 1, NULL, 10);
	}
	return -1;
}

START_TEST(test_text_counts)
{
	struct dv_tier *t;
	struct env env;
	size_t len;
	char *text;

	env_open(&env, "local");
	t = dv_hierarchy_tier(env.fs.hier, 0);
	dv_stat_add(&t->stats.hits, 8);
	dv_stat_add(&t->stats.misses, 8);
	dv_stat_add(&t->stats.bytes_served, 2000000000);
	dv_stat_add(&env.fs.origin->requests, 8);
	dv_stat_add(&env.fs.origin->bytes, 1000000000);
	dv_stat_add(&env.fs.open_files, 2);
	text = dv_metrics_text(&env.fs, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert_uint_eq(strlen(text), len);
	ck_assert_int_eq(sample_of(text, "datavofs_tier_hits_total{tier=\"local\"}"), 8);
	ck_assert_int_eq(sample_of(text, "datavofs_tier_misses_total{tier=\"local\"}"), 8);
	ck_assert_int_eq(sample_of(text, "datavofs_origin_requests_total"), 8);
	ck_assert_int_eq(sample_of(text, "datavofs_open_files"), 2);
	ck_assert_int_eq(sample_of(text, "datavofs_pins_loaded"), 0);
	ck_assert_int_eq(sample_of(text, "datavofs_pin_evictions_total"), 0);
	ck_assert_int_eq(sample_of(text, "datavofs_tier_capacity_bytes{tier=\"local\"}"), 1 << 20);
	/* served 2e9, fetched 0 (no fill ran): 2e9 saved, $0.18 */
	ck_assert_int_eq(sample_of(text, "datavofs_egress_saved_bytes_total"), 2000000000);
	ck_assert_ptr_nonnull(strstr(text, "\ndatavofs_egress_saved_dollars_total 0.18\n"));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE datavofs_fill_duration_seconds histogram\n"));
	ck_assert_int_eq(sample_of(text, "datavofs_fill_duration_seconds_bucket{le=\"+Inf\"}"), 0);
	ck_assert_int_eq(sample_of(text, "datavofs_fill_duration_seconds_count"), 0);
	/* every sample's family has HELP and TYPE before it */
	for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
		char fam[128], want[160];
		size_t n = strcspn(l, "{ ");

		if (*l == '#')
			continue;
		ck_assert_uint_lt(n, sizeof(fam));
		memcpy(fam, l, n);
		fam[n] = '\0';
		for (const char *suf = "_bucket"; suf; suf = NULL) {
			size_t fl = strlen(fam);

			if (fl > 7 && strcmp(fam + fl - 7, suf) == 0)
				fam[fl - 7] = '\0';
		}
		if (strstr(fam, "_seconds_sum") || strstr(fam, "_seconds_count"))
			*strrchr(fam, '_') = '\0';
		snprintf(want, sizeof(want), "# TYPE %s ", fam);
		ck_assert_msg(strstr(text, want) && strstr(text, want) < l,
			      "no TYPE before %s", fam);
	}
	free(text);
	env_close(&env);
}
END_TEST

START_TEST(test_label_escaping)
{
	struct env env;
	size_t len;
	char *text;

	env_open(&env, "a\"b\\c");
	text = dv_metrics_text(&env.fs, &len);
	ck_assert_ptr_nonnull(strstr(text, "datavofs_tier_hits_total{tier=\"a\\\"b\\\\c\"} 0\n"));
	free(text);
	text = dv_status_json(&env.fs, &len);
	ck_assert_ptr_nonnull(strstr(text, "\"name\": \"a\\\"b\\\\c\""));
	ck_assert_ptr_nonnull(strstr(text, "\"metrics\": null"));
	free(text);
	env_close(&env);
}
END_TEST

START_TEST(test_addresses)
{
	char host[64], port[8];

	ck_assert_int_eq(dv_metrics_parse_addr(NULL, host, sizeof(host), port, sizeof(port), err, sizeof(err)), 0);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_str_eq(port, "9110");
	ck_assert_int_eq(dv_metrics_parse_addr("9200", host, sizeof(host), port, sizeof(port), err, sizeof(err)), 0);
	ck_assert_str_eq(host, "127.0.0.1");
	ck_assert_str_eq(port, "9200");
	ck_assert_int_eq(dv_metrics_parse_addr("[::1]:0", host, sizeof(host), port, sizeof(port), err, sizeof(err)), 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_str_eq(port, "0");
	ck_assert_int_eq(dv_metrics_parse_addr("0.0.0.0:80", host, sizeof(host), port, sizeof(port), err, sizeof(err)), 0);
	ck_assert_str_eq(host, "0.0.0.0");
	ck_assert_int_eq(dv_metrics_parse_addr("::1:80", host, sizeof(host), port, sizeof(port), err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dv_metrics_parse_addr("host:99999", host, sizeof(host), port, sizeof(port), err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(dv_metrics_parse_addr(":80", host, sizeof(host), port, sizeof(port), err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "use PORT, ADDR:PORT"));
	ck_assert(dv_metrics_spec_is_off("off"));
	ck_assert(dv_metrics_spec_is_off("false"));
	ck_assert(!dv_metrics_spec_is_off("9110"));
	ck_assert(!dv_metrics_spec_is_off(NULL));
}
END_TEST

static int connect_to(const char *addr)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	/* A generous bound: an answer that does not come fails the test. */
	struct timeval tv = { .tv_sec = 15 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_port = htons((uint16_t)atoi(strrchr(addr, ':') + 1));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* One HTTP/1.0 exchange with the exporter; returns the response. */
static char *http(const char *addr, const char *request)
{
	static char buf[1 << 16];
	size_t got = 0;
	ssize_t n;
	int fd = connect_to(addr);

	ck_assert_int_eq(write(fd, request, strlen(request)), (ssize_t)strlen(request));
	while ((n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

START_TEST(test_server)
{
	struct env env;
	char *r;

	env_open(&env, "local");
	ck_assert_int_eq(dv_metrics_listen(&env.fs, "127.0.0.1:0", &env.fs.metrics, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(dv_metrics_address(env.fs.metrics), "127.0.0.1:"));
	ck_assert_int_eq(dv_metrics_start(env.fs.metrics), 0);
	r = http(dv_metrics_address(env.fs.metrics), "GET /metrics HTTP/1.0\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(r, "HTTP/1.0 200 OK\r\n"));
	ck_assert_ptr_nonnull(strstr(r, "Content-Type: text/plain; version=0.0.4"));
	ck_assert_ptr_nonnull(strstr(r, "datavofs_tier_hits_total{tier=\"local\"} 0\n"));
	r = http(dv_metrics_address(env.fs.metrics), "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(r, "200 OK"));
	r = http(dv_metrics_address(env.fs.metrics), "HEAD /metrics HTTP/1.0\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(r, "200 OK"));
	ck_assert_ptr_null(strstr(r, "datavofs_"));
	r = http(dv_metrics_address(env.fs.metrics), "GET /other HTTP/1.0\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(r, "404 Not Found"));
	r = http(dv_metrics_address(env.fs.metrics), "DELETE /metrics HTTP/1.0\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(r, "405"));
	/*
	 * A request line libmicrohttpd 0.9.75 cannot split (no space) is
	 * closed unanswered; one it can split but not accept gets a 400.
	 */
	r = http(dv_metrics_address(env.fs.metrics), "garbage\r\n\r\n");
	ck_assert(r[0] == '\0' || strstr(r, "400"));
	r = http(dv_metrics_address(env.fs.metrics), "GET /metrics\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(r, "400"));
	/* the status document names the exporter */
	{
		size_t len;
		char *s = dv_status_json(&env.fs, &len);

		ck_assert_ptr_nonnull(strstr(s, dv_metrics_address(env.fs.metrics)));
		free(s);
	}
	env_close(&env); /* stops the thread */
}
END_TEST

/* A slow-loris client: a request head that never ends, a byte at a time. */
struct loris {
	int fd;
	volatile bool stop;
};

static void *loris_run(void *arg)
{
	struct loris *l = arg;
	static const char head[] = "GET /metrics HTTP/1.0\r\nX-Slow: ";

	if (send(l->fd, head, sizeof(head) - 1, MSG_NOSIGNAL) < 0)
		return NULL;
	while (!l->stop) {
		/* every second, well inside any per-recv timeout */
		for (int i = 0; i < 10 && !l->stop; i++)
			usleep(100 * 1000);
		if (send(l->fd, "a", 1, MSG_NOSIGNAL) < 0)
			break;
	}
	return NULL;
}

static void *free_metrics(void *arg)
{
	dv_metrics_free(arg);
	return NULL;
}

START_TEST(test_slow_client)
{
	struct loris l = { .stop = false };
	pthread_t lt, ft;
	struct timespec deadline;
	struct env env;
	char *r;

	env_open(&env, "local");
	ck_assert_int_eq(dv_metrics_listen(&env.fs, "127.0.0.1:0", &env.fs.metrics, err, sizeof(err)), 0);
	ck_assert_int_eq(dv_metrics_start(env.fs.metrics), 0);
	l.fd = connect_to(dv_metrics_address(env.fs.metrics));
	ck_assert_int_eq(pthread_create(&lt, NULL, loris_run, &l), 0);
	sleep(2); /* the server has taken the slow connection */
	/* a scrape beside it is answered */
	r = http(dv_metrics_address(env.fs.metrics), "GET /metrics HTTP/1.0\r\n\r\n");
	ck_assert_ptr_nonnull(strstr(r, "200 OK"));
	ck_assert_ptr_nonnull(strstr(r, "datavofs_tier_hits_total{tier=\"local\"} 0\n"));
	/* and shutdown does not wait for the slow client (a generous bound) */
	ck_assert_int_eq(pthread_create(&ft, NULL, free_metrics, env.fs.metrics), 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 20;
	ck_assert_int_eq(pthread_timedjoin_np(ft, NULL, &deadline), 0);
	env.fs.metrics = NULL;
	l.stop = true;
	pthread_join(lt, NULL);
	close(l.fd);
	env_close(&env);
}
END_TEST

START_TEST(test_port_in_use)
{
	struct dv_metrics *a = NULL, *b = NULL;
	struct env env;
	char spec[64];

	env_open(&env, "local");
	ck_assert_int_eq(dv_metrics_listen(&env.fs, "127.0.0.1:0", &a, err, sizeof(err)), 0);
	snprintf(spec, sizeof(spec), "%s", dv_metrics_address(a));
	ck_assert_int_eq(dv_metrics_listen(&env.fs, spec, &b, err, sizeof(err)), -EADDRINUSE);
	ck_assert_ptr_nonnull(strstr(err, "cannot listen on"));
	ck_assert_int_eq(dv_metrics_listen(&env.fs, "nonsense", &b, err, sizeof(err)), -EINVAL);
	dv_metrics_free(a);
	dv_metrics_free(NULL);
	env_close(&env);
}
END_TEST

START_TEST(test_text_buffer)
{
	struct dv_text t = { 0 };
	size_t len;
	char *s;

	dv_text_printf(&t, "%s", "x");
	dv_text_json_str(&t, "a\"\n");
	dv_text_json_str(&t, NULL);
	s = dv_text_finish(&t, &len);
	ck_assert_str_eq(s, "x\"a\\\"\\u000a\"null");
	ck_assert_uint_eq(len, strlen(s));
	free(s);
	/* past the maximum the buffer fails as a whole */
	for (int i = 0; i < 5000 && !t.failed; i++)
		dv_text_printf(&t, "%4096s", "");
	ck_assert(t.failed);
	ck_assert_ptr_null(dv_text_finish(&t, &len));
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_text_counts);
	tcase_add_test(tc, test_label_escaping);
	tcase_add_test(tc, test_addresses);
	tcase_add_test(tc, test_server);
	tcase_add_test(tc, test_slow_client);
	tcase_add_test(tc, test_port_in_use);
	tcase_add_test(tc, test_text_buffer);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	dv_log_set_level(getenv("DV_TEST_VERBOSE") ? DV_LOG_DEBUG : DV_LOG_ERROR);
	return dv_test_run(metrics_suite());
}
