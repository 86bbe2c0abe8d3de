/*
 * The origin: file and HTTP backends, against a local directory and
 * tests/unit/httpd_fixture.py (an HTTP/1.1 server with faults chosen by
 * URL path). The server runs once per test case, on an ephemeral port,
 * and is killed by PID at teardown.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/net/http.h"
#include "tiers/origin/origin_impl.h"
#include "tiers/origin/origin.h"
#include "tiers/core/sink.h"
#include "helpers.h"

#define HASH_A "0123456789abcdef0123456789abcdef"
#define HASH_B "fedcba9876543210fedcba9876543210aa"
#define HASH_MISSING "00000000000000000000000000000000"
#define SIZE_A ((3u << 20) + 12345)
#define SIZE_B 1000u
#define DATASETS "{\"datasets\": [\"voice/train\"]}\n"

static char *root;          /* the origin directory */
static pid_t server_pid;
static int server_port;
static uint8_t sha_a[32], sha_b[32];
static char *data_a;

static const struct dv_http_config test_http = {
	.connect_timeout = 5,
	.low_speed_time = 10,
	.low_speed_limit = 1024,
	.retries = 3,
};

/* ---- fixtures ---- */

static void sha256(const void *buf, size_t len, uint8_t out[32])
{
	unsigned int n = 0;

	ck_assert_int_eq(EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL), 1);
}

static void write_under(const char *rel, const void *buf, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	dv_test_write_file(path, buf, len);
}

static void make_origin(void)
{
	char path[PATH_MAX];
	char *b = malloc(SIZE_B);

	root = dv_test_tmpdir("origin");
	snprintf(path, sizeof(path), "%s/shards", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/voice", root);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	write_under("datasets.json", DATASETS, strlen(DATASETS));
	data_a = malloc(SIZE_A);
	ck_assert_ptr_nonnull(data_a);
	ck_assert_ptr_nonnull(b);
	dv_test_pattern(data_a, SIZE_A, 1);
	dv_test_pattern(b, SIZE_B, 2);
	write_under("shards/" HASH_A ".tar", data_a, SIZE_A);
	write_under("shards/" HASH_B ".tar", b, SIZE_B);
	sha256(data_a, SIZE_A, sha_a);
	sha256(b, SIZE_B, sha_b);
	free(b);
}

static void drop_origin(void)
{
	dv_test_rmtree(root);
	free(root);
	free(data_a);
	root = NULL;
	data_a = NULL;
}

static void fixture_script(char *buf, size_t len)
{
	const char *dir = getenv("DV_TEST_SRCDIR");
	const char *slash = strrchr(__FILE__, '/');

	if (dir)
		snprintf(buf, len, "%s/httpd_fixture.py", dir);
	else
		snprintf(buf, len, "%.*s/httpd_fixture.py",
			 slash ? (int)(slash - __FILE__) : 1,
			 slash ? __FILE__ : ".");
}

static void start_server(void)
{
	char script[PATH_MAX], line[32];
	int pfd[2];
	FILE *f;

	make_origin();
	fixture_script(script, sizeof(script));
	ck_assert_int_eq(access(script, R_OK), 0);
	ck_assert_int_eq(pipe(pfd), 0);
	server_pid = fork();
	ck_assert_int_ge(server_pid, 0);
	if (server_pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execlp("python3", "python3", script, root, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	server_port = atoi(line);
	ck_assert_int_gt(server_port, 0);
}

static void stop_server(void)
{
	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
		server_pid = 0;
	}
	drop_origin();
}

/* ---- helpers ---- */

struct staged {
	char path[PATH_MAX];
	int fd;
	struct dv_sink sink;
};

static void stage(struct staged *st, uint64_t size, const uint8_t *sha)
{
	snprintf(st->path, sizeof(st->path), "%s/stage-XXXXXX", root);
	st->fd = mkstemp(st->path);
	ck_assert_int_ge(st->fd, 0);
	ck_assert_int_eq(dv_sink_init(&st->sink, st->fd, size, sha), 0);
}

static void unstage(struct staged *st)
{
	dv_sink_release(&st->sink);
	close(st->fd);
	unlink(st->path);
}

/* Fetches @hash; returns the fetch result, *finish the sink's verdict. */
static int fetch(struct dv_origin *o, const char *hash, uint64_t size,
		 const uint8_t *sha, int *finish)
{
	struct staged st;
	int ret;

	stage(&st, size, sha);
	ret = o->ops->fetch_shard(o, hash, size, &st.sink);
	*finish = dv_sink_finish(&st.sink);
	if (*finish == 0 && size == SIZE_A) {
		size_t len;
		char *got = dv_test_read_file(st.path, &len);

		ck_assert_ptr_nonnull(got);
		ck_assert_uint_eq(len, SIZE_A);
		ck_assert(memcmp(got, data_a, SIZE_A) == 0);
		free(got);
	}
	ck_assert_uint_le(st.sink.written, size);
	unstage(&st);
	return ret;
}

static struct dv_origin *http_origin(const char *path,
				     const struct dv_http_config *cfg)
{
	struct dv_origin *o = NULL;
	char url[256], err[256];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", server_port, path);
	ck_assert_int_eq(dv_origin_new(url, cfg, &o, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(o->ops->kind, "http");
	return o;
}

static struct dv_origin *file_origin(const char *prefix)
{
	struct dv_origin *o = NULL;
	char url[PATH_MAX], err[256];

	snprintf(url, sizeof(url), "%s%s", prefix, root);
	ck_assert_int_eq(dv_origin_new(url, NULL, &o, err, sizeof(err)), 0);
	ck_assert_str_eq(o->ops->kind, "file");
	return o;
}

/* The fixture's request log. */
static char *server_log(void)
{
	struct dv_origin *o = http_origin("", &test_http);
	char *body = NULL;
	size_t len;

	ck_assert_int_eq(dv_origin_get_doc(o, "_log", NULL, &body, &len, NULL),
			 0);
	dv_origin_free(o);
	return body;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- dv_origin_new ---- */

START_TEST(test_new_rejects)
{
	static const char *const bad[] = {
		"ftp://x", "relative/path", "http://", "", "s3x://b",
		"file://relative", "https://u:secret@[::1",
	};
	struct dv_origin *o = (struct dv_origin *)1;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_int_eq(dv_origin_new(bad[i], NULL, &o, err, sizeof(err)),
				 -EINVAL);
		ck_assert_ptr_null(o);
		ck_assert_msg(err[0] != '\0', "no message for %s", bad[i]);
		ck_assert_ptr_null(strstr(err, "secret"));
	}
	ck_assert_int_eq(dv_origin_new("ftp://u:secret@x/", NULL, &o, err,
				       sizeof(err)), -EINVAL);
	ck_assert_ptr_null(strstr(err, "secret"));
	ck_assert_ptr_nonnull(strstr(err, "ftp://x/"));
	dv_origin_free(NULL);
}
END_TEST

START_TEST(test_new_strips_credentials)
{
	struct dv_origin *o = NULL;
	char err[256];

	ck_assert_int_eq(dv_origin_new("https://user:secret@cdn.example/datavo/?sig=abc",
				       NULL, &o, err, sizeof(err)), 0);
	ck_assert_str_eq(o->url, "https://cdn.example/datavo");
	dv_origin_free(o);
	ck_assert_int_eq(dv_origin_new("/srv/datavo/", NULL, &o, err,
				       sizeof(err)), 0);
	ck_assert_str_eq(o->url, "file:///srv/datavo");
	dv_origin_free(o);
}
END_TEST

START_TEST(test_redact)
{
	char buf[128];

	ck_assert_str_eq(dv_http_redact("https://u:p@h:1/a/b?x=1#f", buf,
					sizeof(buf)), "https://h:1/a/b");
	ck_assert_str_eq(dv_http_redact("http://h/a@b", buf, sizeof(buf)),
			 "http://h/a@b");
	ck_assert_str_eq(dv_http_redact("http://a@b@h?q", buf, sizeof(buf)),
			 "http://h");
	ck_assert_str_eq(dv_http_redact("https://u:p@h/x", buf, 10),
			 "https://h");
}
END_TEST

START_TEST(test_relpath_rules)
{
	ck_assert(dv_origin_relpath_ok("voice/train/manifest.json"));
	ck_assert(dv_origin_relpath_ok("datasets.json"));
	ck_assert(!dv_origin_relpath_ok("../etc/passwd"));
	ck_assert(!dv_origin_relpath_ok("a/../b"));
	ck_assert(!dv_origin_relpath_ok("/etc/passwd"));
	ck_assert(!dv_origin_relpath_ok("a//b"));
	ck_assert(!dv_origin_relpath_ok("a?b"));
	ck_assert(!dv_origin_relpath_ok(""));
}
END_TEST

START_TEST(test_backoff_bounds)
{
	for (unsigned n = 0; n < 12; n++) {
		unsigned full = n >= 5 ? 5000 : 200u << n;
		unsigned ms = dv_http_backoff_ms(n);

		if (full > 5000)
			full = 5000;
		ck_assert_uint_ge(ms, full / 2);
		ck_assert_uint_le(ms, full);
	}
	ck_assert_int_eq(dv_http_status_errno(404), -ENOENT);
	ck_assert_int_eq(dv_http_status_errno(410), -ENOENT);
	ck_assert_int_eq(dv_http_status_errno(401), -EACCES);
	ck_assert_int_eq(dv_http_status_errno(403), -EACCES);
	ck_assert_int_eq(dv_http_status_errno(503), -EAGAIN);
	ck_assert_int_eq(dv_http_status_errno(400), -EIO);
	ck_assert(dv_http_transient(-ETIMEDOUT));
	ck_assert(!dv_http_transient(-EACCES));
	ck_assert_int_eq(dv_http_final_errno(-ECONNRESET), -EIO);
	ck_assert_int_eq(dv_http_final_errno(-ETIMEDOUT), -ETIMEDOUT);
}
END_TEST

/* ---- file origin ---- */

START_TEST(test_file_get_doc)
{
	struct dv_origin *o = file_origin("file://");
	char *body = NULL, *etag = NULL, *etag2 = NULL;
	struct timespec times[2] = { { 0, UTIME_OMIT }, { 12345, 678 } };
	char path[PATH_MAX];
	size_t len = 0;

	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body,
					   &len, &etag), 0);
	ck_assert_str_eq(body, DATASETS);
	ck_assert_uint_eq(len, strlen(DATASETS));
	ck_assert_ptr_nonnull(etag);
	free(body);
	body = (char *)1;
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", etag, &body,
					   &len, &etag2), 1);
	ck_assert_ptr_null(body);
	ck_assert_ptr_null(etag2);

	/* A new mtime is a new version. */
	snprintf(path, sizeof(path), "%s/datasets.json", root);
	ck_assert_int_eq(utimensat(AT_FDCWD, path, times, 0), 0);
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", etag, &body,
					   &len, &etag2), 0);
	ck_assert_str_eq(body, DATASETS);
	ck_assert_str_ne(etag, etag2);
	free(body);
	free(etag);
	free(etag2);

	ck_assert_int_eq(dv_origin_get_doc(o, "nope.json", NULL, &body, &len,
					   NULL), -ENOENT);
	ck_assert_int_eq(dv_origin_get_doc(o, "../x", NULL, &body, &len, NULL),
			 -EINVAL);
	ck_assert_int_eq(dv_origin_get_doc(o, "/etc/passwd", NULL, &body, &len,
					   NULL), -EINVAL);
	ck_assert_int_eq(dv_origin_get_doc(o, "voice//x", NULL, &body, &len,
					   NULL), -EINVAL);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_file_doc_too_large)
{
	struct dv_origin *o = file_origin("");
	char path[PATH_MAX], *body = NULL;
	size_t len;
	int fd;

	snprintf(path, sizeof(path), "%s/huge.json", root);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)DV_DOC_MAX + 1), 0);
	close(fd);
	ck_assert_int_eq(dv_origin_get_doc(o, "huge.json", NULL, &body, &len,
					   NULL), -EFBIG);
	ck_assert_ptr_null(body);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_file_fetch)
{
	struct dv_origin *o = file_origin("");
	struct dv_fetcher fetcher;
	struct dv_shard_ref ref = {
		.hash = HASH_B, .size = SIZE_B, .sha256 = sha_b, .label = "b",
	};
	struct staged st;
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	ck_assert_int_eq(fin, 0);
	ck_assert_uint_eq(o->requests, 1);
	ck_assert_uint_eq(o->bytes, SIZE_A);
	/* The manifest's size is checked before any byte moves. */
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A - 1, NULL, &fin), -EIO);
	ck_assert_int_eq(fetch(o, HASH_MISSING, 10, NULL, &fin), -ENOENT);
	ck_assert_int_eq(fetch(o, "../../etc/passwd", 10, NULL, &fin), -EINVAL);
	ck_assert_int_eq(fetch(o, "ABCDEF0123456789ABCDEF0123456789", 10, NULL,
			       &fin), -EINVAL);
	ck_assert_uint_ge(o->errors, 2);

	dv_origin_fetcher(o, &fetcher);
	stage(&st, SIZE_B, sha_b);
	ck_assert_int_eq(fetcher.fetch(fetcher.arg, &ref, &st.sink), 0);
	ck_assert_int_eq(dv_sink_finish(&st.sink), 0);
	unstage(&st);
	dv_origin_free(o);
}
END_TEST

/*
 * Symlinks that lead out of the origin's root are refused, for documents
 * and shards; one that stays inside serves.
 */
START_TEST(test_file_symlinks)
{
	struct dv_origin *o = file_origin("");
	char *outside = dv_test_tmpdir("outside"), *body = NULL;
	char link[PATH_MAX], target[PATH_MAX];
	size_t len = 0;
	int fin;

	snprintf(target, sizeof(target), "%s/secret.json", outside);
	dv_test_write_file(target, "{\"datasets\": []}\n", 17);
	snprintf(link, sizeof(link), "%s/escape.json", root);
	ck_assert_int_eq(symlink(target, link), 0);
	ck_assert_int_eq(dv_origin_get_doc(o, "escape.json", NULL, &body, &len,
					   NULL), -EACCES);
	ck_assert_ptr_null(body);
	unlink(link);
	ck_assert_int_eq(symlink("../outside-rel.json", link), 0);
	ck_assert_int_eq(dv_origin_get_doc(o, "escape.json", NULL, &body, &len,
					   NULL), -EACCES);
	unlink(link);
	/* inside the root: served */
	ck_assert_int_eq(symlink("datasets.json", link), 0);
	ck_assert_int_eq(dv_origin_get_doc(o, "escape.json", NULL, &body, &len,
					   NULL), 0);
	free(body);
	unlink(link);
	/* a shard whose file is a symlink out of the root */
	snprintf(target, sizeof(target), "%s/shards/%s.tar", root, HASH_A);
	snprintf(link, sizeof(link), "%s/a.tar", outside);
	ck_assert_int_eq(rename(target, link), 0);
	ck_assert_int_eq(symlink(link, target), 0);
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), -EACCES);
	unlink(target);
	ck_assert_int_eq(rename(link, target), 0);
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	dv_test_rmtree(outside);
	free(outside);
	dv_origin_free(o);
}
END_TEST

/* ---- http origin ---- */

START_TEST(test_http_get_doc)
{
	struct dv_origin *o = http_origin("/", &test_http);
	char *body = NULL, *etag = NULL, *etag2 = NULL;
	size_t len = 0;

	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body,
					   &len, &etag), 0);
	ck_assert_str_eq(body, DATASETS);
	ck_assert_uint_eq(len, strlen(DATASETS));
	ck_assert_ptr_nonnull(etag);
	free(body);
	body = (char *)1;
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", etag, &body,
					   &len, &etag2), 1);
	ck_assert_ptr_null(body);
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", "\"stale\"",
					   &body, &len, &etag2), 0);
	ck_assert_str_eq(etag, etag2);
	free(body);
	free(etag);
	free(etag2);
	ck_assert_int_eq(dv_origin_get_doc(o, "a/../datasets.json", NULL,
					   &body, &len, NULL), -EINVAL);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_not_found_forbidden)
{
	struct dv_origin *o = http_origin("", &test_http);
	char *body = NULL;
	size_t len;
	int fin;

	ck_assert_int_eq(dv_origin_get_doc(o, "nope.json", NULL, &body, &len,
					   NULL), -ENOENT);
	ck_assert_int_eq(fetch(o, HASH_MISSING, 10, NULL, &fin), -ENOENT);
	dv_origin_free(o);

	o = http_origin("/m/403", &test_http);
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body,
					   &len, NULL), -EACCES);
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), -EACCES);
	ck_assert_ptr_null(body);
	ck_assert_uint_eq(o->errors, 2);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_500_then_200)
{
	struct dv_origin *o = http_origin("/m/500once-doc", &test_http);
	char *body = NULL, *log;
	size_t len;
	int fin;

	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body,
					   &len, NULL), 0);
	ck_assert_str_eq(body, DATASETS);
	free(body);
	dv_origin_free(o);

	o = http_origin("/m/500once-shard", &test_http);
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	ck_assert_int_eq(fin, 0);
	ck_assert_uint_eq(o->requests, 1);
	ck_assert_uint_eq(o->errors, 0);
	dv_origin_free(o);

	log = server_log();
	ck_assert_ptr_nonnull(strstr(log, "500once shards/" HASH_A ".tar - 500\n"
					  "500once shards/" HASH_A ".tar - 200\n"));
	free(log);
}
END_TEST

/*
 * A transfer that stays above the low-speed limit still ends by its
 * deadline: 1 + 2 * 1 s here, for a part of 40 KB sent at 4 KiB/s.
 */
START_TEST(test_http_deadline)
{
	static const struct dv_http_config quick = {
		.connect_timeout = 1, .low_speed_time = 1,
		.low_speed_limit = 1024, .retries = 0,
	};
	struct dv_origin *o = http_origin("/m/trickle", &quick);
	struct timespec t0, t1;
	char *buf = malloc(40000);
	double took;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(o->ops->fetch_range(o, HASH_A, SIZE_A, 0, 40000, buf),
			 -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	took = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* Not the 10 s the body would take. */
	ck_assert_double_lt(took, 8.0);
	free(buf);
	dv_origin_free(o);
}
END_TEST

/* The server's Retry-After outweighs the backoff (about 0.2 s here). */
START_TEST(test_http_retry_after)
{
	struct dv_origin *o = http_origin("/m/429wait-shard", &test_http);
	struct timespec t0, t1;
	double waited;
	char *log;
	int fin;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_eq(fin, 0);
	waited = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_double_ge(waited, 0.95);
	dv_origin_free(o);
	log = server_log();
	ck_assert_ptr_nonnull(strstr(log, "429wait shards/" HASH_A ".tar - 429\n"
					  "429wait shards/" HASH_A ".tar - 200\n"));
	free(log);
}
END_TEST

START_TEST(test_http_resume_after_reset)
{
	struct dv_origin *o = http_origin("/m/reset", &test_http);
	char *log;
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	ck_assert_int_eq(fin, 0);
	ck_assert_uint_eq(o->bytes, SIZE_A);
	dv_origin_free(o);

	log = server_log();
	ck_assert_ptr_nonnull(strstr(log, "reset shards/" HASH_A ".tar - 200\n"));
	ck_assert_ptr_nonnull(strstr(log, "reset shards/" HASH_A ".tar bytes="));
	ck_assert_ptr_nonnull(strstr(log, "- 206\n"));
	ck_assert_ptr_null(strstr(log, "reset shards/" HASH_A ".tar bytes=0-"));
	free(log);
}
END_TEST

START_TEST(test_http_resume_after_rst)
{
	struct dv_origin *o = http_origin("/m/rst", &test_http);
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	ck_assert_int_eq(fin, 0);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_range_ignored)
{
	struct dv_origin *o = http_origin("/m/reset200", &test_http);
	int fin;

	/* The server answers the resume with the whole body: start over. */
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	ck_assert_int_eq(fin, 0);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_bad_content_range)
{
	struct dv_origin *o = http_origin("/m/badrange", &test_http);
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), -EIO);
	ck_assert_int_ne(fin, 0);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_too_large)
{
	struct dv_origin *o = http_origin("/m/big", &test_http);
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), -EIO);
	ck_assert_int_ne(fin, 0);
	dv_origin_free(o);

	/* Without a Content-Length the sink catches it. */
	o = http_origin("/m/bigclose", &test_http);
	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), -EIO);
	ck_assert_int_ne(fin, 0);
	ck_assert_uint_eq(o->errors, 1);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_wrong_bytes)
{
	struct dv_origin *o = http_origin("/m/wrong", &test_http);
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	ck_assert_int_eq(fin, -EBADMSG);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_hang_times_out)
{
	struct dv_http_config cfg = {
		.connect_timeout = 2,
		.low_speed_time = 1,
		.low_speed_limit = 1024,
		.retries = 1,
	};
	struct dv_origin *o = http_origin("/m/hang", &cfg);
	double t0 = now();
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), -ETIMEDOUT);
	/* Two attempts of ~1-2 s and one short backoff. */
	ck_assert_double_lt(now() - t0, 8.0);
	ck_assert_int_ne(fin, 0);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_redirects)
{
	struct dv_origin *o = http_origin("/m/redirect", &test_http);
	char *body = NULL;
	size_t len;
	int fin;

	ck_assert_int_eq(fetch(o, HASH_A, SIZE_A, sha_a, &fin), 0);
	ck_assert_int_eq(fin, 0);
	dv_origin_free(o);

	o = http_origin("/m/redirftp", &test_http);
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body,
					   &len, NULL), -EIO);
	dv_origin_free(o);
}
END_TEST

START_TEST(test_http_connection_refused)
{
	struct dv_http_config cfg = test_http;
	struct dv_origin *o = NULL;
	char *body = NULL, err[256];
	size_t len;

	cfg.retries = 1;
	/* Port 1 on loopback: nothing listens there. */
	ck_assert_int_eq(dv_origin_new("http://127.0.0.1:1/x", &cfg, &o, err,
				       sizeof(err)), 0);
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body,
					   &len, NULL), -EIO);
	dv_origin_free(o);
}
END_TEST

static char captured[8192];

static void capture(enum dv_log_level level, const char *line)
{
	size_t len = strlen(captured);

	snprintf(captured + len, sizeof(captured) - len, "%s\n", line);
}

START_TEST(test_http_no_secrets_logged)
{
	struct dv_origin *o = NULL;
	char url[256], err[256], *body = NULL;
	size_t len;

	snprintf(url, sizeof(url),
		 "http://alice:hunter2@127.0.0.1:%d/m/403?token=sekrit",
		 server_port);
	ck_assert_int_eq(dv_origin_new(url, &test_http, &o, err, sizeof(err)),
			 0);
	ck_assert_ptr_null(strstr(o->url, "hunter2"));
	ck_assert_ptr_null(strstr(o->url, "sekrit"));
	dv_log_set_sink(capture);
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body,
					   &len, NULL), -EACCES);
	dv_log_set_sink(NULL);
	ck_assert_ptr_nonnull(strstr(captured, "403"));
	ck_assert_ptr_nonnull(strstr(captured, "/m/403/datasets.json"));
	ck_assert_ptr_null(strstr(captured, "hunter2"));
	ck_assert_ptr_null(strstr(captured, "alice"));
	ck_assert_ptr_null(strstr(captured, "sekrit"));
	dv_origin_free(o);
}
END_TEST

struct worker {
	pthread_t thread;
	struct dv_origin *o;
	int failures;
};

static void *fetch_many(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 10; i++) {
		struct staged st;

		stage(&st, SIZE_B, sha_b);
		if (w->o->ops->fetch_shard(w->o, HASH_B, SIZE_B, &st.sink) ||
		    dv_sink_finish(&st.sink))
			w->failures++;
		unstage(&st);
	}
	return NULL;
}

START_TEST(test_http_threads_share_origin)
{
	struct dv_origin *o = http_origin("", &test_http);
	struct worker w[4];

	/* One origin, several threads: pooled handles, no lost counts. */
	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .o = o };
		ck_assert_int_eq(pthread_create(&w[i].thread, NULL, fetch_many,
						&w[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(w[i].thread, NULL);
		ck_assert_int_eq(w[i].failures, 0);
	}
	ck_assert_uint_eq(o->requests, 40);
	ck_assert_uint_eq(o->bytes, 40 * SIZE_B);
	dv_origin_free(o);
}
END_TEST

static Suite *origin_suite(void)
{
	Suite *s = suite_create("origin");
	TCase *tc = tcase_create("new");

	tcase_add_test(tc, test_new_rejects);
	tcase_add_test(tc, test_new_strips_credentials);
	tcase_add_test(tc, test_redact);
	tcase_add_test(tc, test_relpath_rules);
	tcase_add_test(tc, test_backoff_bounds);
	suite_add_tcase(s, tc);

	tc = tcase_create("file");
	tcase_add_unchecked_fixture(tc, make_origin, drop_origin);
	tcase_add_test(tc, test_file_get_doc);
	tcase_add_test(tc, test_file_doc_too_large);
	tcase_add_test(tc, test_file_fetch);
	tcase_add_test(tc, test_file_symlinks);
	suite_add_tcase(s, tc);

	tc = tcase_create("http");
	tcase_add_unchecked_fixture(tc, start_server, stop_server);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_http_get_doc);
	tcase_add_test(tc, test_http_not_found_forbidden);
	tcase_add_test(tc, test_http_500_then_200);
	tcase_add_test(tc, test_http_resume_after_reset);
	tcase_add_test(tc, test_http_resume_after_rst);
	tcase_add_test(tc, test_http_range_ignored);
	tcase_add_test(tc, test_http_bad_content_range);
	tcase_add_test(tc, test_http_too_large);
	tcase_add_test(tc, test_http_wrong_bytes);
	tcase_add_test(tc, test_http_hang_times_out);
	tcase_add_test(tc, test_http_redirects);
	tcase_add_test(tc, test_http_retry_after);
	tcase_add_test(tc, test_http_deadline);
	tcase_add_test(tc, test_http_connection_refused);
	tcase_add_test(tc, test_http_no_secrets_logged);
	tcase_add_test(tc, test_http_threads_share_origin);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(origin_suite());
}
