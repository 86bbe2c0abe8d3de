/*
 * The manifest cache as others read it (namespace.h): one cache file, and
 * every cached manifest under a state directory (what datavoctl verify
 * knows shards from).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/log.h"
#include "config/util.h"
#include "fs/namespace/manifest.h"
#include "fs/namespace/namespace.h"
#include "helpers.h"

#define H32 "0123456789abcdef0123456789abcdef"
#define S64 H32 H32
#define DOC                                                                  \
	"{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", "  \
	"\"revision\": 3, \"manifest_ref\": \"ref\", \"keys\": [\"json\"], " \
	"\"shards\": [{\"name\": \"s.tar\", \"index\": 0, \"content_hash\": \"" H32 \
	"\", \"size\": 10, \"sha256\": \"" S64 "\"}]}"

static char *root;

static void setup(void)
{
	root = dv_test_tmpdir("nscache");
	dv_log_set_level(DV_LOG_ERROR);
}

static void teardown(void)
{
	dv_test_rmtree(root);
	free(root);
}

/* Writes @text at @rel under root, making its directories. */
static void put(const char *rel, const char *text)
{
	char p[4096], *slash;

	snprintf(p, sizeof(p), "%s/%s", root, rel);
	slash = strrchr(p, '/');
	*slash = '\0';
	ck_assert_int_eq(dv_mkdir_p(p, 0755), 0);
	*slash = '/';
	dv_test_write_file(p, text, strlen(text));
}

START_TEST(test_cache_file_read)
{
	char p[4096], *body = NULL, *etag = NULL;
	size_t len = 0;
	time_t mtime = 0;

	put("a", "datavo-cache/1 \"e1\"\n{\"x\": 1}");
	snprintf(p, sizeof(p), "%s/a", root);
	ck_assert_int_eq(dv_ns_cache_file_read(p, &body, &len, &etag, &mtime), 0);
	ck_assert_str_eq(body, "{\"x\": 1}");
	ck_assert_uint_eq(len, 8);
	ck_assert_str_eq(etag, "\"e1\"");
	ck_assert_int_gt(mtime, 0);
	free(body);
	free(etag);

	put("b", "datavo-cache/1 \n{}");
	snprintf(p, sizeof(p), "%s/b", root);
	ck_assert_int_eq(dv_ns_cache_file_read(p, &body, &len, &etag, NULL), 0);
	ck_assert_ptr_null(etag);
	ck_assert_str_eq(body, "{}");
	free(body);

	put("c", "{\"no\": \"header\"}");
	snprintf(p, sizeof(p), "%s/c", root);
	ck_assert_int_eq(dv_ns_cache_file_read(p, &body, &len, NULL, NULL), -EBADMSG);
	snprintf(p, sizeof(p), "%s/none", root);
	ck_assert_int_eq(dv_ns_cache_file_read(p, &body, &len, NULL, NULL), -ENOENT);
}
END_TEST

struct found {
	int good, bad;
	char hash[65];
};

static int found(void *arg, const char *path, const struct dv_manifest *m,
		 const char *why)
{
	struct found *f = arg;

	if (!m) {
		ck_assert_ptr_nonnull(why);
		f->bad++;
		return 0;
	}
	f->good++;
	ck_assert_uint_eq(m->nshards, 1);
	snprintf(f->hash, sizeof(f->hash), "%s", m->shards[0].hash);
	return 0;
}

/* Every origin's manifest.json and revisions/N.json, nothing else. */
START_TEST(test_cached_manifests)
{
	struct found f = { 0 };

	put("0000000000000001/origin/demo/train/manifest.json", "datavo-cache/1 e\n" DOC);
	put("0000000000000002/origin/demo/train/revisions/3.json", "datavo-cache/1 e\n" DOC);
	put("0000000000000002/origin/datasets.json", "datavo-cache/1 e\n{}");
	put("0000000000000002/origin/demo/train/notes.json", "datavo-cache/1 e\n" DOC);
	put("0000000000000003/origin/demo/x/manifest.json", "datavo-cache/1 e\n{broken");
	ck_assert_int_eq(dv_ns_cached_manifests(root, found, &f), 0);
	ck_assert_int_eq(f.good, 2);
	ck_assert_int_eq(f.bad, 1);
	ck_assert_str_eq(f.hash, H32);

	memset(&f, 0, sizeof(f));
	ck_assert_int_eq(dv_ns_cached_manifests("/nonexistent/state", found, &f), 0);
	ck_assert_int_eq(f.good + f.bad, 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("ns_cache");
	TCase *tc = tcase_create("ns_cache");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_cache_file_read);
	tcase_add_test(tc, test_cached_manifests);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
