/*
 * The GCS tier (tiers/gcs/gcs.c, gcs_upload.c, gcs_json.c) against
 * tests/unit/gcs_fixture.py: a JSON API bucket that checks every request
 * (bearer tokens it issued, Content-Range of resumable chunks, 256 KiB
 * multiples) and can misbehave on demand (cut bodies, ignored ranges,
 * 503s, sessions that vanish, chunks kept short, an early finalize).
 * The emulator the integration tests use cannot do multi-chunk uploads;
 * this server can. Integration tests (t_gcs_*.sh) use the real emulator.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiers/folder/folder.h"
#include "tiers/gcs/gcs.h"
#include "tiers/net/json.h"
#include "tiers/core/hierarchy.h"
#include "gcs_fixture.h"
#include "helpers.h"

#define HASH_A "0123456789abcdef0123456789abcdef"
#define HASH_B "fedcba9876543210fedcba9876543210"
#define BIG ((1u << 20) + 1234)   /* 4 chunks of 256 KiB and a tail */

static struct dv_config cfg = {
	.http = { .connect_timeout = 2, .low_speed_time = 5,
		  .low_speed_limit = 1, .retries = 2 },
};
static struct dv_tier_config tc;
static char endpoint[96];
static char *work;
static unsigned char *data;

static void setup(void)
{
	gf_reset();
	gf_ctl("/_fault", "auth=1");
	gf_use_file("sa.json");
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", gf_port);
	memset(&tc, 0, sizeof(tc));
	tc.type = DV_TIER_TYPE_GCS;
	tc.name = (char *)"region";
	tc.bucket = (char *)"datavo-cache";
	tc.prefix = (char *)"/team a/";
	tc.endpoint = endpoint;
	work = dv_test_tmpdir("gcstier");
	data = malloc(BIG);
	dv_test_pattern(data, BIG, 5);
}

static void teardown(void)
{
	dv_test_rmtree(work);
	free(work);
	free(data);
	dv_log_set_sink(NULL);
}

static struct dv_tier *new_tier(void)
{
	struct dv_tier *t = NULL;
	char err[256];

	ck_assert_msg(dv_gcs_tier_new(&tc, &cfg, &t, err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_int_eq(t->ops->open(t), 0);
	return t;
}

/* A local file of the first @len bytes of data: an open fd. */
static int local_file(size_t len)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/src-%zu", work, len);
	dv_test_write_file(path, data, len);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int install(struct dv_tier *t, const char *hash, size_t len)
{
	int fd = local_file(len), ret;

	ret = t->ops->install(t, hash, fd, NULL, len, 0);
	close(fd);
	return ret;
}

/* Downloads @hash through a verifying sink; returns download, *fin finish. */
static int download(struct dv_tier *t, const char *hash, size_t len, int *fin)
{
	char path[PATH_MAX];
	uint8_t sha[32];
	struct dv_sink sink;
	int fd, ret;

	SHA256(data, len, sha);
	snprintf(path, sizeof(path), "%s/stage-XXXXXX", work);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dv_sink_init(&sink, fd, len, sha), 0);
	ret = t->ops->download(t, hash, len, &sink);
	*fin = dv_sink_finish(&sink);
	dv_sink_release(&sink);
	close(fd);
	unlink(path);
	return ret;
}

/* ---- JSON ---- */

START_TEST(test_json_fields)
{
	static const char doc[] =
		"{\"kind\":\"storage#object\",\"size\":\"1048576\",\"n\":12,"
		"\"skip\":{\"a\":[1,{\"b\":2}]},\"nul\":null,\"t\":true,"
		"\"error\":{\"code\":403,\"message\":\"x\\u00e9\\n\\/y\"}}";
	struct dv_json_field f[] = {
		{ .key = "size" }, { .key = "n" }, { .key = "nul" },
		{ .key = "t" }, { .key = "error.message" }, { .key = "absent" },
		{ .key = "skip" },
	};

	ck_assert_int_eq(dv_json_get(doc, strlen(doc), f, 7, NULL, 0), 0);
	ck_assert_str_eq(f[0].value, "1048576");
	ck_assert_str_eq(f[1].value, "12");
	ck_assert_ptr_null(f[2].value);
	ck_assert_ptr_null(f[3].value);
	ck_assert_str_eq(f[4].value, "x\xc3\xa9\n/y");
	ck_assert_ptr_null(f[5].value);
	ck_assert_ptr_null(f[6].value);
	dv_json_release(f, 7);
}
END_TEST

START_TEST(test_json_rejects)
{
	static const char *const bad[] = {
		"", "[1]", "\"s\"", "{\"a\": 1", "{\"a\":\"\\u0000\"}",
		"{a: 1}", "{\"a\": *x}",
	};
	struct dv_json_field f = { .key = "a" };
	char err[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(dv_json_get(bad[i], strlen(bad[i]), &f, 1, err,
					      sizeof(err)) == -EINVAL,
			      "accepted %s", bad[i]);
		ck_assert(err[0] != '\0');
		dv_json_release(&f, 1);
	}
}
END_TEST

START_TEST(test_json_reason)
{
	char buf[64];
	const char *gcs = "{\"error\":{\"code\":403,\"message\":\"a@b does not have storage.objects.get access\"}}";
	const char *oauth = "{\"error\":\"invalid_grant\",\"error_description\":\"Bad\\tRequest\"}";

	ck_assert_str_eq(dv_json_reason(gcs, strlen(gcs), buf, sizeof(buf)),
			 "a@b does not have storage.objects.get access");
	ck_assert_str_eq(dv_json_reason(oauth, strlen(oauth), buf, sizeof(buf)),
			 "invalid_grant: Bad?Request");
	ck_assert_str_eq(dv_json_reason("<html>", 6, buf, sizeof(buf)), "");
	/* An error body cut short still gives what came first. */
	ck_assert_str_eq(dv_json_reason(gcs, 60, buf, sizeof(buf)), "");
}
END_TEST

/* ---- construction ---- */

START_TEST(test_new_opens_nothing)
{
	struct dv_tier *tiers[2];
	struct dv_hierarchy *h;
	char err[256], path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/local", work);
	ck_assert_int_eq(dv_folder_tier_create(path, "local", 0, &tiers[0]), 0);
	ck_assert_int_eq(dv_gcs_tier_new(&tc, &cfg, &tiers[1], err, sizeof(err)), 0);
	ck_assert_int_eq(dv_hierarchy_from_tiers(tiers, 2, DV_VERIFY_FILL, &h,
						 err, sizeof(err)), 0);
	dv_hierarchy_free(h);
	ck_assert_int_eq(gf_count("/"), 0);
}
END_TEST

START_TEST(test_bad_bucket_names)
{
	static const char *const bad[] = { "ab", "Upper", "a/b", "-ab", "ab.", "a b" };
	struct dv_tier *t;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tc.bucket = (char *)bad[i];
		ck_assert_int_eq(dv_gcs_tier_new(&tc, &cfg, &t, err, sizeof(err)),
				 -EINVAL);
		ck_assert_msg(strstr(err, "bucket") != NULL, "%s", err);
	}
}
END_TEST

/* ---- lookup, upload, download ---- */

START_TEST(test_media_upload_lookup_download)
{
	struct dv_tier *t = new_tier();
	int fin;

	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100000), -ENOENT);
	ck_assert_int_eq(install(t, HASH_A, 100000), 0);
	/* The name is <prefix>/<hash>.tar, percent-encoded in the URL. */
	ck_assert_int_eq(gf_count("POST /upload/storage/v1/b/datavo-cache/o?uploadType=media&name=team%20a%2F" HASH_A ".tar&ifGenerationMatch=0 - 200 bearer"), 1);
	ck_assert_int_eq(gf_count("GET /storage/v1/b/datavo-cache/o/team%20a%2F" HASH_A ".tar?fields=size - 404 bearer"), 2);
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100000), 0);
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 99999), -EBADMSG);
	ck_assert_int_eq(download(t, HASH_A, 100000, &fin), 0);
	ck_assert_int_eq(fin, 0);
	ck_assert_int_eq(gf_count("alt=media - 200 bearer"), 1);
	ck_assert_int_eq(gf_count("TOKEN jwt ok"), 1);
	ck_assert_uint_eq(t->stats.installs, 1);
	ck_assert_uint_eq(t->stats.bytes_in, 100000);
	ck_assert_msg(gf_logged("media upload, 1 request"), "%s", gf_lines);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_install_of_present_object_uploads_nothing)
{
	struct dv_tier *t = new_tier();

	ck_assert_int_eq(install(t, HASH_A, 5000), 0);
	ck_assert_int_eq(install(t, HASH_A, 5000), 0);
	ck_assert_int_eq(gf_count("POST /upload"), 1);
	/* A copy of the wrong size is replaced, without the precondition. */
	ck_assert_int_eq(install(t, HASH_A, 6000), 0);
	ck_assert_int_eq(gf_count("uploadType=media&name=team%20a%2F" HASH_A ".tar - 200"), 1);
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 6000), 0);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_racer_wins_is_done)
{
	struct dv_tier *t = new_tier();

	ck_assert_int_eq(install(t, HASH_A, 5000), 0);
	/* Not there at the look, there at the upload: 412, done. */
	gf_ctl("/_fault", "meta_404=1");
	ck_assert_int_eq(install(t, HASH_A, 5000), 0);
	ck_assert_int_eq(gf_count("ifGenerationMatch=0 - 412"), 1);
	ck_assert_uint_eq(t->stats.installs, 1);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_resumable_chunks)
{
	struct dv_tier *t = new_tier();
	int fin;

	dv_gcs_tier_set_upload_sizes(t, 256 << 10, 256 << 10);
	ck_assert_int_eq(install(t, HASH_B, BIG), 0);
	ck_assert_int_eq(gf_count("uploadType=resumable&name=team%20a%2F" HASH_B ".tar&ifGenerationMatch=0 - 200 bearer"), 1);
	ck_assert_int_eq(gf_count("CHUNK"), 5);
	/* The session URI is the credential: no token goes with the PUTs. */
	ck_assert_int_eq(gf_count("PUT /upload"), 5);
	ck_assert_int_eq(gf_count("308 none"), 4);
	ck_assert_int_eq(gf_count("bytes 1048576-1049809/1049810 200 none"), 1);
	ck_assert_int_eq(download(t, HASH_B, BIG, &fin), 0);
	ck_assert_int_eq(fin, 0);
	ck_assert_msg(gf_logged("resumable upload, 6 requests"), "%s", gf_lines);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_resumable_kept_short)
{
	struct dv_tier *t = new_tier();
	int fin;

	/* Chunks of 768 KiB; the server keeps 256 KiB of each non-final. */
	dv_gcs_tier_set_upload_sizes(t, 1, 768 << 10);
	gf_ctl("/_fault", "keep_short=1");
	ck_assert_int_eq(install(t, HASH_B, BIG), 0);
	ck_assert_int_eq(gf_count("CHUNK 0-786431 kept 262144"), 1);
	ck_assert_int_eq(gf_count("CHUNK 262144-1048575 kept 262144"), 1);
	ck_assert_int_eq(download(t, HASH_B, BIG, &fin), 0);
	ck_assert_int_eq(fin, 0);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_resumable_failure_asks_status)
{
	struct dv_tier *t = new_tier();
	int fin;

	dv_gcs_tier_set_upload_sizes(t, 1, 512 << 10);
	gf_ctl("/_fault", "put_503=1");
	ck_assert_int_eq(install(t, HASH_B, BIG), 0);
	ck_assert_int_eq(gf_count("CHUNK status 0"), 1);
	ck_assert_int_eq(download(t, HASH_B, BIG, &fin), 0);
	ck_assert_int_eq(fin, 0);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_resumable_session_gone_restarts)
{
	struct dv_tier *t = new_tier();
	int fin;

	dv_gcs_tier_set_upload_sizes(t, 1, 512 << 10);
	gf_ctl("/_fault", "session_gone=1");
	ck_assert_int_eq(install(t, HASH_B, BIG), 0);
	ck_assert_int_eq(gf_count("POST /upload/storage/v1/b/datavo-cache/o?uploadType=resumable"), 2);
	ck_assert_msg(gf_logged("expired, starting over"), "%s", gf_lines);
	ck_assert_int_eq(download(t, HASH_B, BIG, &fin), 0);
	ck_assert_int_eq(fin, 0);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_resumable_finalized_early_fails)
{
	struct dv_tier *t = new_tier();

	dv_gcs_tier_set_upload_sizes(t, 1, 256 << 10);
	gf_ctl("/_fault", "finalize_early=1");
	ck_assert_int_eq(install(t, HASH_B, BIG), -EIO);
	ck_assert_msg(gf_logged("stored 262144 of 1049810 bytes"), "%s", gf_lines);
	/* The short object is a miss, never served. */
	ck_assert_int_eq(t->ops->lookup(t, HASH_B, BIG), -EBADMSG);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_download_resumes_with_range)
{
	struct dv_tier *t = new_tier();
	int fin;

	ck_assert_int_eq(install(t, HASH_B, BIG), 0);
	gf_ctl("/_fault", "media_cut=1");
	ck_assert_int_eq(download(t, HASH_B, BIG, &fin), 0);
	ck_assert_int_eq(fin, 0);
	ck_assert_int_eq(gf_count("?alt=media bytes="), 1);
	ck_assert_int_eq(gf_count(" 206 bearer"), 1);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_download_whole_object_restarts_sink)
{
	struct dv_tier *t = new_tier();
	int fin;

	ck_assert_int_eq(install(t, HASH_B, BIG), 0);
	gf_ctl("/_fault", "media_cut=1\nignore_range=1");
	ck_assert_int_eq(download(t, HASH_B, BIG, &fin), 0);
	ck_assert_int_eq(fin, 0);
	ck_assert_int_eq(gf_count("?alt=media bytes="), 1);
	ck_assert_int_eq(gf_count(" 206 "), 0);
	ck_assert_msg(gf_logged("whole object, starting over"), "%s", gf_lines);
	dv_tier_free(t);
}
END_TEST

/* download_range: exactly a part; a cut resumes; a 200 is refused. */
START_TEST(test_download_range)
{
	struct dv_tier *t = new_tier();
	size_t off = 65536 + 7, len = 300000;
	unsigned char *got = malloc(len);

	ck_assert_int_eq(install(t, HASH_B, BIG), 0);
	ck_assert_int_eq(dv_tier_download_range(t, HASH_B, BIG, off, len, got), 0);
	ck_assert_mem_eq(got, data + off, len);
	ck_assert_int_eq(gf_count("?alt=media bytes=65543-365542 206 bearer"), 1);
	ck_assert_int_eq(dv_tier_download_range(t, HASH_B, BIG, BIG - 5, 5, got), 0);
	ck_assert_mem_eq(got, data + BIG - 5, 5);
	ck_assert_int_eq(dv_tier_download_range(t, HASH_B, BIG, BIG - 5, 6, got), -EINVAL);
	ck_assert_int_eq(dv_tier_download_range(t, HASH_A, 100, 0, 10, got), -ENOENT);
	gf_ctl("/_fault", "media_cut=1");
	memset(got, 0, len);
	ck_assert_int_eq(dv_tier_download_range(t, HASH_B, BIG, off, len, got), 0);
	ck_assert_mem_eq(got, data + off, len);
	ck_assert_int_eq(gf_count("?alt=media bytes=65543-365542 299"), 1);
	/* The resume asks from where the cut stopped (half the part) on. */
	ck_assert_int_eq(gf_count("?alt=media bytes=215543-365542 206"), 1);
	ck_assert_int_eq(gf_count(" 206 bearer"), 3);
	/* An emulator that answers a range with the whole object: -EPROTO. */
	gf_ctl("/_fault", "ignore_range=1");
	ck_assert_int_eq(dv_tier_download_range(t, HASH_B, BIG, off, len, got), -EIO);
	free(got);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_download_missing)
{
	struct dv_tier *t = new_tier();
	int fin;

	ck_assert_int_eq(download(t, HASH_A, 100, &fin), -ENOENT);
	dv_tier_free(t);
}
END_TEST

/* ---- errors ---- */

START_TEST(test_access_denied_is_not_a_miss)
{
	struct dv_tier *t = new_tier();

	gf_ctl("/_fault", "deny=1");
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), -EACCES);
	ck_assert_msg(gf_logged("access denied: metadata of gs://datavo-cache/team a/" HASH_A ".tar: HTTP 403: caller does not have storage.objects.create access; credentials: service account " GF_EMAIL),
		      "%s", gf_lines);
	ck_assert_int_eq(install(t, HASH_A, 100), -EACCES);
	/* Not transient: one request each. */
	ck_assert_int_eq(gf_count(" 403 "), 2);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_401_gets_one_new_token)
{
	struct dv_tier *t = new_tier();

	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), -ENOENT);
	gf_ctl("/_fault", "revoke=1");
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), -ENOENT);
	ck_assert_int_eq(gf_count("TOKEN jwt ok"), 2);
	ck_assert_int_eq(gf_count(" 401 "), 1);
	/* Every token refused: -EACCES after one new token, not a miss. */
	gf_ctl("/_fault", "reject_tokens=1");
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), -EACCES);
	ck_assert_int_eq(gf_count("TOKEN jwt ok"), 3);
	ck_assert_int_eq(gf_count(" 401 "), 3);
	ck_assert_msg(gf_logged("access denied"), "%s", gf_lines);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_transient_errors_are_retried)
{
	struct dv_tier *t = new_tier();

	ck_assert_int_eq(install(t, HASH_A, 100), 0);
	gf_ctl("/_fault", "meta_503=1");
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), 0);
	ck_assert_int_eq(gf_count(" 503 "), 1);
	gf_ctl("/_fault", "meta_503=always");
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), -EIO);
	ck_assert_msg(gf_logged("failed after 3 attempts: HTTP 503"), "%s", gf_lines);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_bucket_unreachable)
{
	struct dv_tier *t;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:1");
	t = new_tier();
	gf_ctl("/_fault", "auth=");
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), -EIO);
	ck_assert_int_eq(install(t, HASH_A, 100), -EIO);
	dv_tier_free(t);
}
END_TEST

/* ---- where and who ---- */

START_TEST(test_emulator_host_is_anonymous)
{
	struct dv_tier *t;
	char host[64];

	gf_ctl("/_fault", "auth=");
	snprintf(host, sizeof(host), "127.0.0.1:%d", gf_port);
	setenv("STORAGE_EMULATOR_HOST", host, 1);
	tc.endpoint = NULL;
	tc.prefix = NULL;
	t = new_tier();
	ck_assert_int_eq(install(t, HASH_A, 3000), 0);
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 3000), 0);
	ck_assert_int_eq(gf_count("name=" HASH_A ".tar&ifGenerationMatch=0 - 200 none"), 1);
	ck_assert_int_eq(gf_count("bearer"), 0);
	ck_assert_int_eq(gf_count("TOKEN"), 0);
	ck_assert_msg(gf_logged("anonymous (STORAGE_EMULATOR_HOST)"), "%s", gf_lines);
	dv_tier_free(t);
}
END_TEST

START_TEST(test_endpoint_path_is_trimmed)
{
	struct dv_tier *t;

	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d/storage/v1/",
		 gf_port);
	t = new_tier();
	ck_assert_int_eq(t->ops->lookup(t, HASH_A, 100), -ENOENT);
	ck_assert_int_eq(gf_count("GET /storage/v1/b/datavo-cache/o/"), 1);
	dv_tier_free(t);
}
END_TEST

/* ---- in a hierarchy: the cloud topology on one machine ---- */

static unsigned fetches;

static int origin_fetch(void *arg, const struct dv_shard_ref *ref,
			struct dv_sink *sink)
{
	fetches++;
	return dv_sink_write(sink, data, ref->size);
}

static struct dv_hierarchy *vm(const char *local)
{
	struct dv_tier *tiers[2];
	struct dv_hierarchy *h;
	char err[256], path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", work, local);
	ck_assert_int_eq(dv_folder_tier_create(path, "nvme", 0, &tiers[0]), 0);
	ck_assert_int_eq(dv_gcs_tier_new(&tc, &cfg, &tiers[1], err, sizeof(err)), 0);
	ck_assert_int_eq(dv_hierarchy_from_tiers(tiers, 2, DV_VERIFY_FILL, &h,
						 err, sizeof(err)), 0);
	return h;
}

START_TEST(test_two_vms_share_the_bucket)
{
	struct dv_fetcher fetcher = { .fetch = origin_fetch, .arg = NULL };
	struct dv_hierarchy *vm1 = vm("vm1"), *vm2 = vm("vm2");
	uint8_t sha[32];
	struct dv_shard_ref ref = { .hash = HASH_B, .size = BIG, .sha256 = sha };
	struct dv_object obj;

	SHA256(data, BIG, sha);
	fetches = 0;
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(vm1, &ref, &fetcher, &obj), 0);
	dv_object_release(&obj);
	dv_hierarchy_flush_uploads(vm1);
	ck_assert_uint_eq(fetches, 1);
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(vm2, &ref, &fetcher, &obj), 0);
	ck_assert_int_eq(obj.tier_index, 0);
	dv_object_release(&obj);
	ck_assert_uint_eq(fetches, 1);
	ck_assert_int_eq(gf_count("alt=media - 200"), 1);
	dv_hierarchy_free(vm1);
	dv_hierarchy_free(vm2);
}
END_TEST

START_TEST(test_denied_bucket_fails_the_read)
{
	struct dv_fetcher fetcher = { .fetch = origin_fetch, .arg = NULL };
	struct dv_hierarchy *h = vm("vm3");
	uint8_t sha[32];
	struct dv_shard_ref ref = { .hash = HASH_A, .size = 1000, .sha256 = sha };
	struct dv_object obj;

	SHA256(data, 1000, sha);
	fetches = 0;
	gf_ctl("/_fault", "deny=1");
	ck_assert_int_eq(dv_hierarchy_get_or_fetch(h, &ref, &fetcher, &obj),
			 -EACCES);
	ck_assert_uint_eq(fetches, 0);
	dv_hierarchy_free(h);
}
END_TEST

static Suite *gcs_suite(void)
{
	Suite *s = suite_create("gcs");
	TCase *tc_json = tcase_create("json");
	TCase *t = tcase_create("tier");

	tcase_add_test(tc_json, test_json_fields);
	tcase_add_test(tc_json, test_json_rejects);
	tcase_add_test(tc_json, test_json_reason);
	suite_add_tcase(s, tc_json);

	tcase_add_unchecked_fixture(t, gf_start, gf_stop);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_new_opens_nothing);
	tcase_add_test(t, test_bad_bucket_names);
	tcase_add_test(t, test_media_upload_lookup_download);
	tcase_add_test(t, test_install_of_present_object_uploads_nothing);
	tcase_add_test(t, test_racer_wins_is_done);
	tcase_add_test(t, test_resumable_chunks);
	tcase_add_test(t, test_resumable_kept_short);
	tcase_add_test(t, test_resumable_failure_asks_status);
	tcase_add_test(t, test_resumable_session_gone_restarts);
	tcase_add_test(t, test_resumable_finalized_early_fails);
	tcase_add_test(t, test_download_resumes_with_range);
	tcase_add_test(t, test_download_whole_object_restarts_sink);
	tcase_add_test(t, test_download_missing);
	tcase_add_test(t, test_download_range);
	tcase_add_test(t, test_access_denied_is_not_a_miss);
	tcase_add_test(t, test_401_gets_one_new_token);
	tcase_add_test(t, test_transient_errors_are_retried);
	tcase_add_test(t, test_bucket_unreachable);
	tcase_add_test(t, test_emulator_host_is_anonymous);
	tcase_add_test(t, test_endpoint_path_is_trimmed);
	tcase_add_test(t, test_two_vms_share_the_bucket);
	tcase_add_test(t, test_denied_bucket_fails_the_read);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return dv_test_run(gcs_suite());
}
