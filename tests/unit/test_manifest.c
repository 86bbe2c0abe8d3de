/* Manifest and datasets.json parsing: what is accepted, what is refused. */
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/perms.h"
#include "config/util.h"
#include "fs/namespace/manifest.h"
#include "tiers/core/digest.h"
#include "tiers/core/sink.h"
#include "helpers.h"

/* mallinfo2() does not see the allocations of AddressSanitizer. */
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_MEASURABLE 0
#else
#define HEAP_MEASURABLE 1
#endif

#define H32 "0123456789abcdef0123456789abcdef"
#define S64 H32 H32

/* A shard object with fields in the usual order. */
#define SHARD(name, idx, hash, size, sha) \
	"{\"name\": " name ", \"index\": " idx ", \"content_hash\": " hash \
	", \"size\": " size ", \"sha256\": " sha "}"
#define GOOD_SHARD(name) SHARD("\"" name "\"", "0", "\"" H32 "\"", "10", "\"" S64 "\"")

#define DOC(shards) \
	"{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", " \
	"\"revision\": 3, \"manifest_ref\": \"ref\", \"keys\": [\"json\", \"audio.wav\"], " \
	"\"shards\": [" shards "]}"

static char err[256];

static int parse(const char *doc, struct dv_manifest **m)
{
	err[0] = '\0';
	return dv_manifest_parse(doc, strlen(doc), "demo/train", m, err,
				 sizeof(err));
}

/* Asserts @doc is refused and the reason contains @why. */
static void refused(const char *doc, const char *why)
{
	struct dv_manifest *m = NULL;

	ck_assert_int_eq(parse(doc, &m), -EINVAL);
	ck_assert_ptr_null(m);
	ck_assert_msg(strstr(err, why) != NULL, "reason '%s' lacks '%s'", err,
		      why);
}

START_TEST(test_good)
{
	struct dv_manifest *m;
	const struct dv_manifest_shard *s;
	uint8_t sha[32];

	ck_assert_int_eq(parse(DOC(SHARD("\"b.tar\"", "0", "\"" H32 "\"", "7", "\"" S64 "\"") ", "
				   SHARD("\"a.tar\"", "1", "\"" H32 H32 "\"", "9223372036854775807", "\"" S64 "\"")),
			       &m), 0);
	ck_assert_str_eq(m->dataset, "demo/train");
	ck_assert_uint_eq(m->revision, 3);
	ck_assert_str_eq(m->manifest_ref, "ref");
	ck_assert_uint_eq(m->nkeys, 2);
	ck_assert_str_eq(m->keys[0], "json");
	ck_assert_str_eq(m->keys[1], "audio.wav");
	ck_assert_uint_eq(m->nshards, 2);
	/* Sorted by name, index kept. */
	ck_assert_str_eq(dv_manifest_name(m, &m->shards[0]), "a.tar");
	ck_assert_uint_eq(m->shards[0].index, 1);
	ck_assert_uint_eq(m->shards[0].size, INT64_MAX); /* the largest off_t */
	ck_assert_str_eq(m->shards[0].hash, H32 H32);
	s = dv_manifest_find(m, "b.tar");
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(s->size, 7);
	ck_assert_int_eq(dv_hex_decode(S64, sha, 32), 0);
	ck_assert_mem_eq(s->sha256, sha, 32);
	ck_assert_ptr_null(dv_manifest_find(m, "c.tar"));
	ck_assert_int_eq(dv_manifest_find_pos(m, "b.tar"), 1);
	dv_manifest_free(m);
}
END_TEST

START_TEST(test_json_shapes)
{
	struct dv_manifest *m;
	/* Compact, tabs, unknown keys at every level, keys in another order. */
	const char *doc =
		"{\"shards\":[{\"x\":{\"y\":[1,2,{\"z\":null}]},\"sha256\":\"" S64
		"\",\"size\":0,\"index\":0,\"content_hash\":\"" H32
		"\",\"name\":\"s.tar\"}],\n\t\"extra\": [true, false],"
		"\"revision\":0,\"dataset\":\"demo/train\","
		"\"format\":\"datavo-manifest/1\"}\n";

	ck_assert_int_eq(parse(doc, &m), 0);
	ck_assert_uint_eq(m->nshards, 1);
	ck_assert_uint_eq(m->shards[0].size, 0);
	ck_assert_str_eq(m->manifest_ref, "");
	ck_assert_uint_eq(m->nkeys, 0);
	dv_manifest_free(m);

	/* No expected dataset: any valid one. */
	ck_assert_int_eq(dv_manifest_parse(doc, strlen(doc), NULL, &m, err,
					   sizeof(err)), 0);
	dv_manifest_free(m);
	/* Empty shard list is a valid (empty) dataset. */
	ck_assert_int_eq(parse(DOC(""), &m), 0);
	ck_assert_uint_eq(m->nshards, 0);
	dv_manifest_free(m);
}
END_TEST

START_TEST(test_bad_names)
{
	refused(DOC(GOOD_SHARD("a.tar") ", " GOOD_SHARD("../x.tar")),
		"shard 1: name '../x.tar' is not a valid name");
	refused(DOC(GOOD_SHARD("a/b.tar")), "shard 0: name 'a/b.tar' is not a valid name");
	refused(DOC(GOOD_SHARD("..")), "is not a valid name");
	refused(DOC(GOOD_SHARD("")), "is not a valid name");
	refused(DOC(GOOD_SHARD("a b.tar")), "is not a valid name");
	refused(DOC(GOOD_SHARD("x.zip")), "shard 0: name 'x.zip' does not end in .tar");
	refused(DOC(GOOD_SHARD(".tar")), "does not end in .tar");
	refused(DOC(GOOD_SHARD("a.tar") ", " GOOD_SHARD("a.tar")),
		"duplicate shard name 'a.tar'");
	refused(DOC(SHARD("7", "0", "\"" H32 "\"", "1", "\"" S64 "\"")),
		"name is not a string");
}
END_TEST

START_TEST(test_bad_hashes)
{
	refused(DOC(SHARD("\"a.tar\"", "0", "\"0123456789abcdef0123456789abcdeg\"", "1", "\"" S64 "\"")),
		"shard 0: content_hash '0123456789abcdef0123456789abcdeg' is not 32 to 64 lowercase hex digits");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"0123456789ABCDEF0123456789abcdef\"", "1", "\"" S64 "\"")),
		"content_hash");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"0123\"", "1", "\"" S64 "\"")),
		"content_hash");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"" S64 "0\"", "1", "\"" S64 "\"")),
		"content_hash");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"../../etc/passwd\"", "1", "\"" S64 "\"")),
		"content_hash");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"" H32 "\"", "1", "\"" H32 "\"")),
		"sha256 '" H32 "' is not 64 lowercase hex digits");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"" H32 "\"", "1", "\"" H32 "0123456789ABCDEF0123456789abcdef\"")),
		"sha256");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"" H32 "\"", "1", "null")), "sha256");
}
END_TEST

/* "chunks" is optional; when present it pins the shard's chunk list. */
START_TEST(test_chunk_pins)
{
	struct dv_manifest *m;

	ck_assert_int_eq(parse(DOC(GOOD_SHARD("a.tar") ",\n"
		"{\"name\": \"b.tar\", \"index\": 1, \"content_hash\": \"" H32 "\", \"size\": 10, "
		"\"sha256\": \"" S64 "\", \"chunks\": \"" H32 "ffffffffffffffffffffffffffffffff\"}"), &m), 0);
	ck_assert(!m->shards[0].has_chunks);
	ck_assert(m->shards[1].has_chunks);
	ck_assert_uint_eq(dv_manifest_chunks_pin(m, &m->shards[1])[0], 0x01);
	ck_assert_uint_eq(dv_manifest_chunks_pin(m, &m->shards[1])[31], 0xff);
	dv_manifest_free(m);
	refused(DOC("{\"name\": \"b.tar\", \"index\": 1, \"content_hash\": \"" H32 "\", \"size\": 10, "
		    "\"sha256\": \"" S64 "\", \"chunks\": \"" H32 "\"}"),
		"shard 0: chunks '" H32 "' is not 64 lowercase hex digits");
	refused(DOC("{\"name\": \"b.tar\", \"index\": 1, \"content_hash\": \"" H32 "\", \"size\": 10, "
		    "\"sha256\": \"" S64 "\", \"chunks\": 7}"), "chunks");
	refused(DOC("{\"name\": \"b.tar\", \"index\": 1, \"content_hash\": \"" H32 "\", \"size\": 10, "
		    "\"sha256\": \"" S64 "\", \"chunks\": \"" S64 "\", \"chunks\": \"" S64 "\"}"),
		"duplicate key 'chunks'");
}
END_TEST

START_TEST(test_bad_numbers)
{
	static const char *const sizes[] = {
		"-1", "1.5", "1e3", "\"12\"", "18446744073709551616", "null",
		"true", "0x10", "+1", "[]", "{}",
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char doc[1024];

		snprintf(doc, sizeof(doc), DOC(SHARD("\"a.tar\"", "0", "\"" H32 "\"", "%s", "\"" S64 "\"")),
			 sizes[i]);
		refused(doc, "shard 0: size");
		snprintf(doc, sizeof(doc), DOC(SHARD("\"a.tar\"", "%s", "\"" H32 "\"", "1", "\"" S64 "\"")),
			 sizes[i]);
		refused(doc, "shard 0: index");
	}
	refused(DOC(SHARD("\"a.tar\"", "0", "\"" H32 "\"", "-1", "\"" S64 "\"")),
		"shard 0: size '-1' is not a non-negative integer");
	/* No file is larger than INT64_MAX (off_t): refused with the manifest. */
	refused(DOC(GOOD_SHARD("a.tar") ", " SHARD("\"big.tar\"", "1", "\"" H32 "\"", "9223372036854775808", "\"" S64 "\"")),
		"shard 1 (big.tar): size 9223372036854775808 is larger than a file can be");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"" H32 "\"", "18446744073709551615", "\"" S64 "\"")),
		"shard 0 (a.tar): size 18446744073709551615");
}
END_TEST

START_TEST(test_bad_documents)
{
	refused("{\"format\": \"datavo-manifest/2\", \"dataset\": \"demo/train\", \"revision\": 1, \"shards\": []}",
		"format 'datavo-manifest/2' is not datavo-manifest/1");
	refused("{\"dataset\": \"demo/train\", \"revision\": 1, \"shards\": []}",
		"no \"format\"");
	refused("{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", \"shards\": []}",
		"no \"revision\"");
	refused("{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", \"revision\": 1}",
		"no \"shards\"");
	refused("{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/other\", \"revision\": 1, \"shards\": []}",
		"dataset 'demo/other' is not the expected 'demo/train'");
	refused("{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/../x\", \"revision\": 1, \"shards\": []}",
		"is not a valid name");
	refused("{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", \"revision\": -3, \"shards\": []}",
		"revision");
	refused("{\"format\": \"datavo-manifest/1\", \"format\": \"datavo-manifest/1\"}",
		"duplicate key 'format'");
	refused(DOC(SHARD("\"a.tar\"", "0", "\"" H32 "\"", "1", "\"" S64 "\"") "]"), "line 1");
	refused("{\"format\": \"datavo-manifest/1\", \"shards\": [", "line");
	refused("[1, 2]", "not a JSON object");
	refused("", "not a JSON object");
	refused("\"just a string\"", "not a JSON object");
	refused("{\"format\": \"datavo-manifest/1\", \"shards\": {}}", "\"shards\" is not an array");
	refused(DOC("[]"), "shard 0: not an object");
	refused(DOC("{\"name\": \"a.tar\", \"index\": 0}"), "shard 0: no \"content_hash\"");
	refused(DOC("{\"name\": \"a.tar\", \"name\": \"b.tar\"}"), "shard 0: duplicate key 'name'");
	refused("{\"a\": &x 1, \"b\": *x}", "aliases are not JSON");
	refused("{\"format\": \"datavo-manifest/1\"}\n---\n{}", "");
	refused("{\"keys\": [1]}", "key 0 is not a string");
	refused("{\"format\": datavo-manifest/1}", "format is not a string");
	/* Invalid UTF-8 is caught by the parser. */
	refused("{\"dataset\": \"\xff\xfe\"}", "");
}
END_TEST

START_TEST(test_datasets)
{
	const char *doc = "{\"datasets\": [\"voice/train\", \"demo\", \"voice/train\", \"a.b-c_d/x/y\"], \"other\": 1}";
	char **names;
	size_t n;

	ck_assert_int_eq(dv_datasets_parse(doc, strlen(doc), &names, &n, err,
					   sizeof(err)), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(names[0], "a.b-c_d/x/y");
	ck_assert_str_eq(names[1], "demo");
	ck_assert_str_eq(names[2], "voice/train");
	ck_assert_ptr_null(names[3]);
	dv_datasets_free(names);

	doc = "{\"datasets\": []}";
	ck_assert_int_eq(dv_datasets_parse(doc, strlen(doc), &names, &n, err,
					   sizeof(err)), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(names[0]);
	dv_datasets_free(names);

	static const char *const bad[] = {
		"{\"datasets\": [\"a/../b\"]}", "{\"datasets\": [\"..\"]}",
		"{\"datasets\": [\"/a\"]}", "{\"datasets\": [\"a/\"]}",
		"{\"datasets\": [\"a//b\"]}", "{\"datasets\": [\"a b\"]}",
		"{\"datasets\": [3]}", "{\"datasets\": \"a\"}", "{}",
		"{\"datasets\": [\"a\"]", "[\"a\"]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		names = NULL;
		ck_assert_int_eq(dv_datasets_parse(bad[i], strlen(bad[i]),
						   &names, &n, err,
						   sizeof(err)), -EINVAL);
		ck_assert_ptr_null(names);
		ck_assert(err[0] != '\0');
	}
}
END_TEST

START_TEST(test_dataset_names)
{
	char big[DV_DATASET_MAX + 2];

	ck_assert(dv_valid_dataset_name("a"));
	ck_assert(dv_valid_dataset_name("voice_demo_v1/train"));
	ck_assert(dv_valid_dataset_name("a/b/c.d"));
	ck_assert(!dv_valid_dataset_name(""));
	ck_assert(!dv_valid_dataset_name("."));
	ck_assert(!dv_valid_dataset_name("a/."));
	ck_assert(!dv_valid_dataset_name("a/../b"));
	ck_assert(!dv_valid_dataset_name("a@1"));
	ck_assert(!dv_valid_dataset_name("a/"));
	ck_assert(!dv_valid_dataset_name("/a"));
	ck_assert(!dv_valid_dataset_name(NULL));
	/* Parts of at most 255 bytes, 400 in all. */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[200] = '/';
	ck_assert(!dv_valid_dataset_name(big));
	big[DV_DATASET_MAX] = '\0';
	ck_assert(dv_valid_dataset_name(big));
	big[200] = 'a';
	ck_assert(!dv_valid_dataset_name(big));
}
END_TEST

/* 100,000 shards: the parsed manifest stays near 140 bytes a shard. */
START_TEST(test_memory_per_shard)
{
	const size_t n = 100000;
	size_t cap = n * 220 + 256, len = 0;
	char *doc = malloc(cap);
	struct dv_manifest *m;
	struct mallinfo2 before, after;

	len += (size_t)sprintf(doc, "{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", \"revision\": 1, \"shards\": [");
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(doc + len, "%s{\"name\": \"shard-%06zu.tar\", \"index\": %zu, \"content_hash\": \"%032zx\", \"size\": 134217728, \"sha256\": \"%064zx\"}",
				       i ? ", " : "", i, i, i, i);
	len += (size_t)sprintf(doc + len, "]}");
	ck_assert_uint_lt(len, cap);

	before = mallinfo2();
	ck_assert_int_eq(dv_manifest_parse(doc, len, "demo/train", &m, err,
					   sizeof(err)), 0);
	after = mallinfo2();
	ck_assert_uint_eq(m->nshards, n);
	ck_assert_str_eq(dv_manifest_name(m, &m->shards[n - 1]),
			 "shard-099999.tar");
	ck_assert_uint_le(sizeof(struct dv_manifest_shard), 128);
	if (HEAP_MEASURABLE)
		ck_assert_uint_le(after.uordblks - before.uordblks, 300 * n);
	dv_manifest_free(m);
	free(doc);
}
END_TEST

/* Cached manifests (mode 0) and their directories follow the umask. */
START_TEST(test_doc_files_follow_the_umask)
{
	char *dir = dv_test_tmpdir("manifest");
	char path[512], body[] = "{}";
	struct iovec iov[1] = { { body, 2 } };
	struct stat st;
	mode_t old = umask(077);

	snprintf(path, sizeof(path), "%s/origin/a", dir);
	ck_assert_int_eq(dv_mkdir_p_perms(path, NULL), 0);
	snprintf(path, sizeof(path), "%s/origin/a/manifest.json", dir);
	ck_assert_int_eq(dv_doc_write_atomic(path, iov, 1, 0, 0), 0);
	umask(old);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	snprintf(path, sizeof(path), "%s/origin/a", dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	dv_test_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_doc_files)
{
	char *dir = dv_test_tmpdir("manifest");
	char path[512], *buf;
	char hello[] = "hello ", world[] = "world";
	struct iovec iov[2] = { { hello, 6 }, { world, 5 } };
	struct stat st;
	size_t len;
	time_t mtime;
	mode_t old = umask(077);

	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	ck_assert_int_eq(dv_mkdir_p(path, 0755), 0);
	ck_assert_int_eq(dv_mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/a/b/c/doc.json", dir);
	ck_assert_int_eq(dv_doc_write_atomic(path, iov, 2, 0644, 1000000), 0);
	umask(old);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0644);
	ck_assert_int_eq(dv_doc_read(path, 100, &buf, &len, &mtime), 0);
	ck_assert_str_eq(buf, "hello world");
	ck_assert_uint_eq(len, 11);
	ck_assert_int_eq(mtime, 1000000);
	free(buf);
	ck_assert_int_eq(dv_doc_read(path, 10, &buf, &len, NULL), -EFBIG);
	/* Only the document: no temporary left behind. */
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	ck_assert_int_eq(dv_test_count_entries(path), 1);
	ck_assert_int_eq(dv_mkdir_p("/proc/version/x", 0755), -ENOTDIR);
	snprintf(path, sizeof(path), "%s/missing", dir);
	ck_assert_int_eq(dv_doc_read(path, 10, &buf, &len, NULL), -ENOENT);
	dv_test_rmtree(dir);
	free(dir);
}
END_TEST

static Suite *manifest_suite(void)
{
	Suite *s = suite_create("manifest");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_json_shapes);
	tcase_add_test(tc, test_bad_names);
	tcase_add_test(tc, test_bad_hashes);
	tcase_add_test(tc, test_chunk_pins);
	tcase_add_test(tc, test_bad_numbers);
	tcase_add_test(tc, test_bad_documents);
	tcase_add_test(tc, test_datasets);
	tcase_add_test(tc, test_dataset_names);
	tcase_add_test(tc, test_memory_per_shard);
	tcase_add_test(tc, test_doc_files);
	tcase_add_test(tc, test_doc_files_follow_the_umask);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(manifest_suite());
}
