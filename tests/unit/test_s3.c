/*
 * The s3 tier (tiers/s3/s3.c, s3_client.c, s3_upload.c) and the s3:// origin
 * (origin_s3.c) against tests/unit/s3_fixture.py, a small S3 that checks
 * every request's SigV4 signature, x-amz-content-sha256 and session token
 * (s3rver, used by the integration tests, checks none of these), and
 * injects faults on demand: a GET cut in half, a failing part, a 403, an
 * expired token, a CompleteMultipartUpload that fails inside a 200.
 *
 * Every test also checks that no log line, at debug level, holds the
 * secret key or the session token.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/folder/folder.h"
#include "tiers/core/hierarchy.h"
#include "tiers/origin/origin.h"
#include "tiers/s3/s3.h"
#include "tiers/core/sink.h"
#include "helpers.h"
#include "pyfixture.h"

#define BUCKET "dvbucket"
#define AK "AKIDS3UNITTEST"
#define SK "s3unit/SECRET+key/xyz"
#define TOKEN "SESSION/tok+en=="
#define HASH "0123456789abcdef0123456789abcdef"
#define HASH2 "fedcba9876543210fedcba9876543210"

static struct pyfixture fx;
static char *dir;
static char *logbuf;
static size_t loglen;

static const struct dv_http_config quick_http = {
	.connect_timeout = 2, .low_speed_time = 5, .low_speed_limit = 1024,
	.retries = 2,
};

static void capture(enum dv_log_level level, const char *line)
{
	size_t n = strlen(line);

	if (getenv("DV_TEST_VERBOSE"))
		fprintf(stderr, "log: %s\n", line);

	logbuf = realloc(logbuf, loglen + n + 2);
	memcpy(logbuf + loglen, line, n);
	loglen += n;
	logbuf[loglen++] = '\n';
	logbuf[loglen] = '\0';
}

static bool logged(const char *s)
{
	return logbuf && strstr(logbuf, s);
}

static void env_creds(const char *token)
{
	setenv("AWS_ACCESS_KEY_ID", AK, 1);
	setenv("AWS_SECRET_ACCESS_KEY", SK, 1);
	if (token)
		setenv("AWS_SESSION_TOKEN", token, 1);
	else
		unsetenv("AWS_SESSION_TOKEN");
}

static void start(const char *token)
{
	const char *args[] = { BUCKET, AK, SK, token, NULL };

	pyfixture_start(&fx, "s3_fixture.py", args);
}

static void setup(void)
{
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_PROFILE");
	setenv("AWS_REGION", "eu-central-1", 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	dir = dv_test_tmpdir("s3");
	setenv("HOME", dir, 1);
	env_creds(NULL);
	dv_log_set_level(DV_LOG_DEBUG);
	dv_log_set_sink(capture);
	start(NULL);
}

static void teardown(void)
{
	pyfixture_stop(&fx);
	dv_log_set_sink(NULL);
	dv_test_rmtree(dir);
	free(dir);
	free(logbuf);
	logbuf = NULL;
	loglen = 0;
}

static void no_secret_logged(void)
{
	ck_assert_msg(!logged(SK), "the secret key was logged:\n%s", logbuf);
	ck_assert_msg(!logged(TOKEN), "the session token was logged:\n%s", logbuf);
	ck_assert(!logged("echoed")); /* error bodies are never logged whole */
}

static void fault(const char *mode)
{
	char path[64];

	snprintf(path, sizeof(path), "/_fault?mode=%s", mode);
	free(pyfixture_get(&fx, path));
}

static struct dv_tier *tier_at(int port, const char *prefix)
{
	char endpoint[64], err[256];
	struct dv_tier_config tc = {
		.type = DV_TIER_TYPE_S3, .name = (char *)"region",
		.bucket = (char *)BUCKET, .prefix = (char *)prefix,
		.endpoint = endpoint,
	};
	struct dv_config cfg = { .http = quick_http };
	struct dv_tier *t = NULL;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
	ck_assert_msg(dv_tier_new(&tc, &cfg, &t, err, sizeof(err)) == 0, "%s", err);
	ck_assert_str_eq(t->ops->type, "s3");
	ck_assert(dv_tier_has(t, DV_TIER_REMOTE));
	return t;
}

static struct dv_tier *tier(void)
{
	return tier_at(fx.port, "/team-a/");
}

/* A file of @len pattern bytes; its fd (open) and sha256. */
static int make_file(const char *name, size_t len, uint32_t seed,
		     uint8_t sha[32])
{
	char path[PATH_MAX];
	char *buf = malloc(len ? len : 1);
	unsigned n = 0;
	int fd;

	dv_test_pattern(buf, len, seed);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	dv_test_write_file(path, buf, len);
	EVP_Digest(buf, len, sha, &n, EVP_sha256(), NULL);
	free(buf);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	return fd;
}

/* Downloads @hash into a staging file; returns download() then finish(). */
static int download(struct dv_tier *t, const char *hash, uint64_t size,
		    const uint8_t sha[32], int *finish)
{
	char path[PATH_MAX];
	struct dv_sink sink;
	int fd, ret;

	snprintf(path, sizeof(path), "%s/stage-XXXXXX", dir);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dv_sink_init(&sink, fd, size, sha), 0);
	ret = t->ops->download(t, hash, size, &sink);
	*finish = ret ? ret : dv_sink_finish(&sink);
	dv_sink_release(&sink);
	close(fd);
	unlink(path);
	return ret;
}

static int count(const char *needle)
{
	return pyfixture_count(&fx, needle);
}

static bool has_object(const char *key, uint64_t size)
{
	char line[256];
	char *objs = pyfixture_get(&fx, "/_objects");
	bool found;

	snprintf(line, sizeof(line), "%s %llu\n", key, (unsigned long long)size);
	found = strstr(objs, line) != NULL;
	free(objs);
	return found;
}

/* ---- the tier ---- */

START_TEST(test_miss_put_hit_get)
{
	struct dv_tier *t = tier();
	uint64_t size = (3u << 20) + 77;
	uint8_t sha[32];
	int fd = make_file("a", size, 1, sha), fin;
	char key[128];

	/* Creating the tier made no request. */
	ck_assert_int_eq(count(" "), 0);
	ck_assert_int_eq(dv_s3_tier_key(t, HASH, key, sizeof(key)), 0);
	ck_assert_str_eq(key, "team-a/" HASH ".tar");
	ck_assert_int_eq(t->ops->lookup(t, HASH, size), -ENOENT);
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, size, 0), 0);
	ck_assert(has_object("team-a/" HASH ".tar", size));
	ck_assert_int_eq(dv_stat_get(&t->stats.installs), 1);
	ck_assert_int_eq(t->ops->lookup(t, HASH, size), 0);
	ck_assert_int_eq(t->ops->lookup(t, HASH, size + 1), -EBADMSG);
	ck_assert_int_eq(download(t, HASH, size, sha, &fin), 0);
	ck_assert_int_eq(fin, 0);
	/* A second install finds it there and sends nothing. */
	ck_assert_int_eq(count("PUT /" BUCKET "/team-a/" HASH ".tar 200"), 1);
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, size, 0), 0);
	ck_assert_int_eq(count("PUT /" BUCKET "/team-a/" HASH ".tar 200"), 1);
	/* Every request passed the fixture's signature check. */
	ck_assert_int_eq(count(" 403"), 0);
	ck_assert_int_eq(count(" 400"), 0);
	/* A missing object is a miss, for download too. */
	ck_assert_int_eq(download(t, HASH2, 10, NULL, &fin), -ENOENT);
	close(fd);
	no_secret_logged();
	dv_tier_free(t);
}
END_TEST

START_TEST(test_empty_object_and_max_bytes)
{
	struct dv_tier *t = tier();
	uint8_t sha[32];
	int fd = make_file("empty", 0, 1, sha), fin;

	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, 0, 0), 0);
	ck_assert_int_eq(t->ops->lookup(t, HASH, 0), 0);
	ck_assert_int_eq(download(t, HASH, 0, sha, &fin), 0);
	ck_assert_int_eq(fin, 0);
	t->max_bytes = 10;
	ck_assert_int_eq(t->ops->install(t, HASH2, fd, NULL, 11, 0), -EFBIG);
	close(fd);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_get_resumes_with_range)
{
	struct dv_tier *t = tier();
	uint64_t size = (2u << 20) + 5;
	uint8_t sha[32];
	int fd = make_file("a", size, 2, sha), fin;

	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, size, 0), 0);
	fault("cut-get");
	ck_assert_int_eq(download(t, HASH, size, sha, &fin), 0);
	ck_assert_int_eq(fin, 0);
	/* The first GET broke half way; the second asked for the rest. */
	ck_assert_int_eq(count("GET /" BUCKET "/team-a/" HASH ".tar 200"), 1);
	ck_assert_int_eq(count("GET /" BUCKET "/team-a/" HASH ".tar 206"), 1);
	ck_assert(logged("resuming at byte"));
	close(fd);
	dv_tier_free(t);
}
END_TEST

/* download_range: a part into a buffer, resumed where a cut stopped. */
START_TEST(test_download_range)
{
	struct dv_tier *t = tier();
	uint64_t size = (1u << 20) + 11, off = 65536 + 3;
	size_t len = 200000;
	uint8_t sha[32];
	int fd = make_file("a", size, 4, sha);
	unsigned char *want = malloc(size), *got = malloc(len);

	dv_test_pattern(want, size, 4);
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, size, 0), 0);
	ck_assert_int_eq(dv_tier_download_range(t, HASH, size, off, len, got), 0);
	ck_assert_mem_eq(got, want + off, len);
	ck_assert_int_eq(count("GET /" BUCKET "/team-a/" HASH ".tar 206"), 1);
	/* The last bytes. */
	ck_assert_int_eq(dv_tier_download_range(t, HASH, size, size - 10, 10, got), 0);
	ck_assert_mem_eq(got, want + size - 10, 10);
	/* Outside the object: nothing is asked. */
	ck_assert_int_eq(dv_tier_download_range(t, HASH, size, size - 10, 11, got), -EINVAL);
	ck_assert_int_eq(count("GET /" BUCKET "/team-a/" HASH ".tar 206"), 2);
	ck_assert_int_eq(dv_tier_download_range(t, HASH2, 100, 0, 10, got), -ENOENT);
	/* A part cut half way: the next attempt asks for the rest only. */
	fault("cut-get");
	memset(got, 0, len);
	ck_assert_int_eq(dv_tier_download_range(t, HASH, size, off, len, got), 0);
	ck_assert_mem_eq(got, want + off, len);
	ck_assert_int_eq(count("GET /" BUCKET "/team-a/" HASH ".tar 206"), 4);
	ck_assert_int_eq(count(" 403"), 0);
	close(fd);
	free(want);
	free(got);
	no_secret_logged();
	dv_tier_free(t);
}
END_TEST

START_TEST(test_forbidden_is_eacces_with_a_clear_line)
{
	struct dv_tier *t = tier();
	uint8_t sha[32];
	int fd = make_file("a", 1000, 3, sha), fin;

	fault("forbid");
	ck_assert_int_eq(t->ops->lookup(t, HASH, 1000), -EACCES);
	ck_assert(logged("tier 'region': bucket 'dvbucket' refused access: HTTP 403 on HEAD"));
	ck_assert(logged("check the credentials (environment)"));
	/* A GET's answer has a body: its error code is in the line too. */
	ck_assert_int_eq(download(t, HASH, 1000, sha, &fin), -EACCES);
	ck_assert(logged("refused access: HTTP 403 (AccessDenied) on GET"));
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, 1000, 0), -EACCES);
	close(fd);
	no_secret_logged();
	dv_tier_free(t);
}
END_TEST

START_TEST(test_wrong_secret_is_eacces)
{
	struct dv_tier *t;

	setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
	t = tier();
	ck_assert_int_eq(t->ops->lookup(t, HASH, 1), -EACCES);
	ck_assert(logged("refused access"));
	ck_assert(!logged("not-the-secret"));
	dv_tier_free(t);
}
END_TEST

START_TEST(test_no_credentials_is_eacces)
{
	struct dv_tier *t;

	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	t = tier();
	ck_assert_int_eq(t->ops->lookup(t, HASH, 1), -EACCES);
	ck_assert(logged("no AWS credentials found"));
	ck_assert_int_eq(count(" "), 0);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_session_token_is_signed_and_sent)
{
	struct dv_tier *t;
	uint8_t sha[32];
	int fd;

	pyfixture_stop(&fx);
	start(TOKEN);
	env_creds(TOKEN);
	t = tier();
	fd = make_file("a", 4096, 4, sha);
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, 4096, 0), 0);
	ck_assert_int_eq(t->ops->lookup(t, HASH, 4096), 0);
	dv_tier_free(t);
	/* Another token: the fixture refuses it. */
	env_creds("SESSION/other");
	t = tier();
	ck_assert_int_eq(t->ops->lookup(t, HASH, 4096), -EACCES);
	close(fd);
	no_secret_logged();
	dv_tier_free(t);
}
END_TEST

START_TEST(test_expired_token_refreshes_and_retries)
{
	struct dv_tier *t = tier();
	int fin;

	/* S3 says ExpiredToken in the body of a GET (a HEAD has none). */
	fault("expired-once");
	ck_assert_int_eq(download(t, HASH, 1, NULL, &fin), -ENOENT);
	ck_assert(logged("session token expired"));
	dv_tier_free(t);
}
END_TEST

/*
 * A signed request carries the session token: a 307 to another listener
 * (which would accept it) is an error, never followed.
 */
START_TEST(test_redirects_are_not_followed)
{
	const char *args[] = { BUCKET, AK, SK, TOKEN, NULL };
	struct pyfixture elsewhere;
	struct dv_tier *t;
	uint8_t sha[32];
	char path[64], *log;
	int fd, fin;

	pyfixture_stop(&fx);
	start(TOKEN);
	env_creds(TOKEN);
	pyfixture_start(&elsewhere, "s3_fixture.py", args);
	snprintf(path, sizeof(path), "/_fault?mode=redirect&to=%d", elsewhere.port);
	free(pyfixture_get(&fx, path));
	t = tier();
	fd = make_file("a", 4096, 8, sha);
	ck_assert_int_eq(t->ops->lookup(t, HASH, 4096), -EIO);
	ck_assert_int_eq(download(t, HASH, 4096, sha, &fin), -EIO);
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, 4096, 0), -EIO);
	ck_assert_int_ge(count(" 307"), 3);
	log = pyfixture_get(&elsewhere, "/_log");
	ck_assert_str_eq(log, "");
	free(log);
	pyfixture_stop(&elsewhere);
	close(fd);
	no_secret_logged();
	dv_tier_free(t);
}
END_TEST

START_TEST(test_bucket_down_is_an_error_not_a_miss)
{
	struct dv_tier *t;
	int port = fx.port;

	pyfixture_stop(&fx);
	t = tier_at(port, NULL);
	ck_assert_int_eq(t->ops->lookup(t, HASH, 1), -EIO);
	ck_assert(logged("HEAD s3://dvbucket/" HASH ".tar failed"));
	dv_tier_free(t);
}
END_TEST

/* ---- multipart ---- */

START_TEST(test_multipart_in_parallel)
{
	struct dv_tier *t = tier();
	uint64_t size = (5u << 20) + (512u << 10);
	uint8_t sha[32];
	int fd = make_file("big", size, 5, sha), fin;
	char *uploads;

	dv_s3_tier_tune(t, 1u << 20, 1u << 20, 3);
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, size, 0), 0);
	ck_assert(has_object("team-a/" HASH ".tar", size));
	ck_assert_int_eq(count("POST /" BUCKET "/team-a/" HASH ".tar?uploads= 200"), 1);
	ck_assert_int_eq(count("?partNumber="), 6);
	ck_assert_int_eq(count(" 403"), 0);
	uploads = pyfixture_get(&fx, "/_uploads");
	ck_assert_str_eq(uploads, "");
	free(uploads);
	/* The assembled object has the file's bytes. */
	ck_assert_int_eq(download(t, HASH, size, sha, &fin), 0);
	ck_assert_int_eq(fin, 0);
	close(fd);
	no_secret_logged();
	dv_tier_free(t);
}
END_TEST

START_TEST(test_multipart_failure_aborts)
{
	struct dv_tier *t = tier();
	uint64_t size = (4u << 20) + 1;
	uint8_t sha[32];
	int fd = make_file("big", size, 6, sha);
	char *uploads;

	dv_s3_tier_tune(t, 1u << 20, 1u << 20, 2);
	fault("fail-part-2");
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, size, 0), -EIO);
	ck_assert(!has_object("team-a/" HASH ".tar", size));
	ck_assert_int_eq(count("DELETE /" BUCKET "/team-a/" HASH ".tar?uploadId="), 1);
	uploads = pyfixture_get(&fx, "/_uploads");
	ck_assert_str_eq(uploads, "");
	free(uploads);
	ck_assert(logged("aborted the multipart upload"));

	/* A CompleteMultipartUpload that says <Error> inside a 200. */
	fault("complete-error");
	ck_assert_int_eq(t->ops->install(t, HASH, fd, NULL, size, 0), -EIO);
	ck_assert(!has_object("team-a/" HASH ".tar", size));
	ck_assert_int_eq(count("DELETE /" BUCKET "/team-a/" HASH ".tar?uploadId="), 2);
	close(fd);
	dv_tier_free(t);
}
END_TEST

/* ---- with the hierarchy: two "VMs" share the bucket ---- */

struct counting_fetch {
	const char *path;
	unsigned calls;
};

static int file_fetch(void *arg, const struct dv_shard_ref *ref,
		      struct dv_sink *sink)
{
	struct counting_fetch *f = arg;
	size_t len;
	char *data = dv_test_read_file(f->path, &len);
	int ret;

	f->calls++;
	ret = dv_sink_write(sink, data, len);
	free(data);
	return ret;
}

static struct dv_hierarchy *vm(const char *name)
{
	char path[PATH_MAX], err[256];
	struct dv_tier *tiers[2];
	struct dv_hierarchy *h;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(dv_folder_tier_create(path, "local", 0, &tiers[0]), 0);
	tiers[1] = tier();
	ck_assert_msg(dv_hierarchy_from_tiers(tiers, 2, DV_VERIFY_FILL, &h, err,
					      sizeof(err)) == 0, "%s", err);
	return h;
}

START_TEST(test_two_vms_share_the_bucket)
{
	uint64_t size = 300000;
	uint8_t sha[32];
	int fd = make_file("shard", size, 7, sha);
	char path[PATH_MAX];
	struct counting_fetch f = { .path = path };
	struct dv_fetcher fetcher = { .fetch = file_fetch, .arg = &f };
	struct dv_shard_ref ref = { .hash = HASH, .size = size, .sha256 = sha,
				    .label = "demo/shard-0.tar" };
	struct dv_hierarchy *vm1 = vm("vm1"), *vm2;
	struct dv_object obj;

	close(fd);
	snprintf(path, sizeof(path), "%s/shard", dir);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(vm1, &ref, &fetcher, &obj), 0);
	dv_object_release(&obj);
	ck_assert_uint_eq(f.calls, 1);
	dv_hierarchy_flush_uploads(vm1);
	ck_assert(has_object("team-a/" HASH ".tar", size));

	vm2 = vm("vm2");
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(vm2, &ref, &fetcher, &obj), 0);
	ck_assert_uint_eq(f.calls, 1); /* from the bucket, not the origin */
	ck_assert_str_eq(obj.tier->name, "local");
	dv_object_release(&obj);
	snprintf(path, sizeof(path), "%s/vm2/" HASH ".tar", dir);
	ck_assert_int_eq(access(path, R_OK), 0);
	ck_assert_int_eq(count("GET /" BUCKET "/team-a/" HASH ".tar 200"), 1);
	dv_hierarchy_free(vm2);
	dv_hierarchy_free(vm1);
	no_secret_logged();
}
END_TEST

/* ---- the s3:// origin ---- */

static struct dv_origin *origin(const char *url)
{
	struct dv_origin *o = NULL;
	char endpoint[64], err[256];

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", fx.port);
	setenv("AWS_ENDPOINT_URL_S3", endpoint, 1);
	ck_assert_msg(dv_origin_new(url, &quick_http, &o, err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_str_eq(o->ops->kind, "s3");
	return o;
}

static void put_object(const char *key, const void *buf, size_t len)
{
	struct dv_http http;
	struct dv_http_response resp;
	char url[512];
	struct dv_http_request req = { .method = "PUT", .url = url,
				       .body = buf ? buf : "", .body_len = len };

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_put/%s", fx.port, key);
	ck_assert_int_eq(dv_http_init(&http, NULL), 0);
	ck_assert_int_eq(dv_http_perform(&http, &req, &resp), 0);
	ck_assert_int_eq(resp.status, 200);
	dv_http_release(&http);
}

START_TEST(test_origin_documents_and_shards)
{
	const char *doc = "{\"datasets\": [\"voice/train\"]}\n";
	uint64_t size = (1u << 20) + 3;
	char *data = malloc(size), *body = NULL, *etag = NULL, *etag2 = NULL;
	struct dv_origin *o = origin("s3://" BUCKET "/pub/origin/");
	struct dv_fetcher fetcher;
	uint8_t sha[32];
	unsigned n = 0;
	size_t len;
	char path[PATH_MAX];
	struct dv_sink sink;
	int fd;

	ck_assert_str_eq(o->url, "s3://" BUCKET "/pub/origin");
	ck_assert_int_eq(count(" "), 0); /* nothing until first use */
	put_object("pub/origin/datasets.json", doc, strlen(doc));
	dv_test_pattern(data, size, 9);
	EVP_Digest(data, size, sha, &n, EVP_sha256(), NULL);
	put_object("pub/origin/shards/" HASH ".tar", data, size);

	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", NULL, &body, &len, &etag), 0);
	ck_assert_str_eq(body, doc);
	ck_assert_ptr_nonnull(etag);
	free(body);
	/* Unchanged: 1, no body. */
	ck_assert_int_eq(dv_origin_get_doc(o, "datasets.json", etag, &body, &len, &etag2), 1);
	ck_assert_ptr_null(body);
	ck_assert_int_eq(dv_origin_get_doc(o, "voice/train/manifest.json", NULL, &body,
					   &len, NULL), -ENOENT);
	ck_assert_int_eq(dv_origin_get_doc(o, "../x", NULL, &body, &len, NULL), -EINVAL);

	snprintf(path, sizeof(path), "%s/stage-XXXXXX", dir);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dv_sink_init(&sink, fd, size, sha), 0);
	dv_origin_fetcher(o, &fetcher);
	{
		struct dv_shard_ref ref = { .hash = HASH, .size = size, .sha256 = sha };

		ck_assert_int_eq(fetcher.fetch(fetcher.arg, &ref, &sink), 0);
	}
	ck_assert_int_eq(dv_sink_finish(&sink), 0);
	dv_sink_release(&sink);
	close(fd);
	unlink(path);
	ck_assert_int_eq(o->requests, 1);
	ck_assert_int_eq(o->bytes, size);
	ck_assert_int_eq(count(" 403"), 0);
	free(etag);
	free(data);
	no_secret_logged();
	dv_origin_free(o);
}
END_TEST

START_TEST(test_origin_urls)
{
	static const char *const bad[] = {
		"s3://", "s3:///prefix", "s3://Upper/x", "s3://b?x=1", "s3://b_c/x",
	};
	struct dv_origin *o = NULL;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(dv_origin_new(bad[i], NULL, &o, err, sizeof(err)), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "s3://BUCKET"));
	}
	o = origin("s3://" BUCKET);
	ck_assert_str_eq(o->url, "s3://" BUCKET);
	dv_origin_free(o);
}
END_TEST

static Suite *s3_suite(void)
{
	Suite *s = suite_create("s3");
	TCase *tc = tcase_create("tier");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_miss_put_hit_get);
	tcase_add_test(tc, test_empty_object_and_max_bytes);
	tcase_add_test(tc, test_get_resumes_with_range);
	tcase_add_test(tc, test_download_range);
	tcase_add_test(tc, test_forbidden_is_eacces_with_a_clear_line);
	tcase_add_test(tc, test_wrong_secret_is_eacces);
	tcase_add_test(tc, test_no_credentials_is_eacces);
	tcase_add_test(tc, test_session_token_is_signed_and_sent);
	tcase_add_test(tc, test_expired_token_refreshes_and_retries);
	tcase_add_test(tc, test_redirects_are_not_followed);
	tcase_add_test(tc, test_bucket_down_is_an_error_not_a_miss);
	tcase_add_test(tc, test_multipart_in_parallel);
	tcase_add_test(tc, test_multipart_failure_aborts);
	tcase_add_test(tc, test_two_vms_share_the_bucket);
	tcase_add_test(tc, test_origin_documents_and_shards);
	tcase_add_test(tc, test_origin_urls);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(s3_suite());
}
