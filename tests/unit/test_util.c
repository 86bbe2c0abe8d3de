/*
 * config/util.c: sizes (suffixes), integers, path expansion
 * (R12), hash and name checks, byte formatting, the small file reader.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/secret.h"
#include "config/util.h"
#include "helpers.h"

static uint64_t size_ok(const char *s)
{
	uint64_t v = 0xdead;

	ck_assert_msg(dv_parse_size(s, &v) == 0, "'%s' should parse", s);
	return v;
}

static int size_err(const char *s)
{
	uint64_t v = 0xdead;
	int ret = dv_parse_size(s, &v);

	ck_assert_msg(v == 0xdead, "'%s' must not store a value", s);
	return ret;
}

START_TEST(test_size_plain_integers)
{
	ck_assert_uint_eq(size_ok("0"), 0); /* R8: 0 = unbounded */
	ck_assert_uint_eq(size_ok("1"), 1);
	ck_assert_uint_eq(size_ok("1099511627776"), 1ULL << 40);
	ck_assert_uint_eq(size_ok("18446744073709551615"), UINT64_MAX);
}
END_TEST

START_TEST(test_size_suffixes_1024_based)
{
	/* SI-style suffixes (B, KB, MB, GB, TB) are 1024-based, as they always were here. */
	ck_assert_uint_eq(size_ok("1TB"), 1ULL << 40);
	ck_assert_uint_eq(size_ok("50GB"), 50ULL << 30);
	ck_assert_uint_eq(size_ok("200GB"), 200ULL << 30);
	ck_assert_uint_eq(size_ok("5TB"), 5ULL << 40);
	ck_assert_uint_eq(size_ok("7B"), 7);
	ck_assert_uint_eq(size_ok("3KB"), 3ULL << 10);
	ck_assert_uint_eq(size_ok("3MB"), 3ULL << 20);
	ck_assert_uint_eq(size_ok("2PB"), 2ULL << 50);
	ck_assert_uint_eq(size_ok("512 MiB"), 512ULL << 20);
	ck_assert_uint_eq(size_ok("4KiB"), 4096);
	ck_assert_uint_eq(size_ok("1GiB"), 1ULL << 30);
	ck_assert_uint_eq(size_ok("1TiB"), 1ULL << 40);
	ck_assert_uint_eq(size_ok("1PiB"), 1ULL << 50);
}
END_TEST

START_TEST(test_size_suffix_case_and_space)
{
	ck_assert_uint_eq(size_ok("50gb"), 50ULL << 30);
	ck_assert_uint_eq(size_ok("50 Gb"), 50ULL << 30);
	ck_assert_uint_eq(size_ok("1 tib"), 1ULL << 40);
	ck_assert_uint_eq(size_ok("0 B"), 0);
	ck_assert_uint_eq(size_ok("0GB"), 0);
}
END_TEST

START_TEST(test_size_rejects_junk)
{
	static const char *const bad[] = {
		"",	"GB",	 "1.5GB", "1.5",   "-1",   "+1",   " 1",
		"1 ",	"1  GB", "1 G B", "1XB",   "12XB", "1G",   "1K",
		"1GBs", "1iB",	 "0x10",  "1e3",   "one",  "1_000", "1,000",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(size_err(bad[i]) == -EINVAL,
			      "'%s' must be -EINVAL", bad[i]);
	ck_assert_int_eq(dv_parse_size(NULL, &(uint64_t){ 0 }), -EINVAL);
}
END_TEST

START_TEST(test_size_overflow_is_erange)
{
	ck_assert_int_eq(size_err("20000000PB"), -ERANGE);
	ck_assert_int_eq(size_err("18446744073709551616"), -ERANGE);
	ck_assert_int_eq(size_err("99999999999999999999999"), -ERANGE);
	ck_assert_int_eq(size_err("16384PiB"), -ERANGE);
	ck_assert_int_eq(size_err("17179869184GB"), -ERANGE);
	ck_assert_uint_eq(size_ok("16383PiB"), 16383ULL << 50);
	/* Junk stays junk even when the number is also too large. */
	ck_assert_int_eq(size_err("99999999999999999999999XB"), -EINVAL);
}
END_TEST

START_TEST(test_parse_uint)
{
	uint64_t v = 7;

	ck_assert_int_eq(dv_parse_uint("0", 10, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(dv_parse_uint("10", 10, &v), 0);
	ck_assert_uint_eq(v, 10);
	ck_assert_int_eq(dv_parse_uint("18446744073709551615", UINT64_MAX, &v),
			 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	v = 7;
	ck_assert_int_eq(dv_parse_uint("11", 10, &v), -EINVAL);
	ck_assert_int_eq(dv_parse_uint("-1", 10, &v), -EINVAL);
	ck_assert_int_eq(dv_parse_uint("", 10, &v), -EINVAL);
	ck_assert_int_eq(dv_parse_uint("1s", 10, &v), -EINVAL);
	ck_assert_int_eq(dv_parse_uint(" 1", 10, &v), -EINVAL);
	ck_assert_int_eq(dv_parse_uint("1.0", 10, &v), -EINVAL);
	ck_assert_int_eq(dv_parse_uint("18446744073709551616", UINT64_MAX, &v),
			 -EINVAL);
	ck_assert_uint_eq(v, 7);
}
END_TEST

static char *expand_ok(const char *in)
{
	char *out = NULL;

	ck_assert_msg(dv_expand_path(in, &out) == 0, "'%s' should expand", in);
	return out;
}

static void expect_expand(const char *in, const char *want)
{
	char *out = expand_ok(in);

	ck_assert_str_eq(out, want);
	free(out);
}

START_TEST(test_r12_expand_tilde_and_vars)
{
	setenv("HOME", "/home/tester", 1);
	setenv("DV_T_ROOT", "/scratch", 1);
	setenv("DV_T_EMPTY", "", 1);
	expect_expand("~", "/home/tester");
	expect_expand("~/.cache/altavo/datavo/shards",
		      "/home/tester/.cache/altavo/datavo/shards");
	expect_expand("$DV_T_ROOT/datavo", "/scratch/datavo");
	expect_expand("${DV_T_ROOT}datavo", "/scratchdatavo");
	expect_expand("/a/$DV_T_ROOT/${DV_T_ROOT}", "/a//scratch//scratch");
	expect_expand("/x$DV_T_EMPTY/y", "/x/y");
	expect_expand("~/$DV_T_ROOT", "/home/tester//scratch");
	/* Only a leading ~ expands; ~user is left alone. */
	expect_expand("/a/~/b", "/a/~/b");
	expect_expand("~other/x", "~other/x");
	/* A $ not followed by a name is literal. */
	expect_expand("/cost$/5$", "/cost$/5$");
	expect_expand("/plain/path", "/plain/path");
	expect_expand("", "");
}
END_TEST

START_TEST(test_r12_expand_errors)
{
	char *out = (char *)"untouched";
	char *longvar;

	unsetenv("DV_T_UNSET");
	ck_assert_int_eq(dv_expand_path("$DV_T_UNSET/x", &out), -ENOENT);
	ck_assert_int_eq(dv_expand_path("/x/${DV_T_UNSET}", &out), -ENOENT);
	ck_assert_int_eq(dv_expand_path("/x/${DV_T_ROOT", &out), -EINVAL);
	ck_assert_int_eq(dv_expand_path("/x/${}", &out), -EINVAL);
	ck_assert_int_eq(dv_expand_path("/x/${1}", &out), -EINVAL);
	ck_assert_str_eq(out, "untouched");

	/* Every growing buffer has a maximum: PATH_MAX here. */
	longvar = malloc(PATH_MAX);
	ck_assert_ptr_nonnull(longvar);
	memset(longvar, 'a', PATH_MAX - 1);
	longvar[PATH_MAX - 1] = '\0';
	setenv("DV_T_LONG", longvar, 1);
	ck_assert_int_eq(dv_expand_path("/$DV_T_LONG", &out), -ENAMETOOLONG);
	free(longvar);
}
END_TEST

START_TEST(test_valid_hash)
{
	char h[80];

	ck_assert(dv_valid_hash("0123456789abcdef0123456789abcdef"));
	memset(h, 'f', 64);
	h[64] = '\0';
	ck_assert(dv_valid_hash(h));
	h[64] = 'f';
	h[65] = '\0';
	ck_assert(!dv_valid_hash(h)); /* 65 */
	ck_assert(!dv_valid_hash("0123456789abcdef0123456789abcde")); /* 31 */
	ck_assert(!dv_valid_hash("0123456789ABCDEF0123456789ABCDEF"));
	ck_assert(!dv_valid_hash("0123456789abcdef0123456789abcdeg"));
	ck_assert(!dv_valid_hash("../../../../etc/passwd/0123456789abcdef"));
	ck_assert(!dv_valid_hash(""));
	ck_assert(!dv_valid_hash(NULL));
}
END_TEST

START_TEST(test_valid_name_part)
{
	ck_assert(dv_valid_name_part("voice_demo_v1"));
	ck_assert(dv_valid_name_part("shard-000003.tar"));
	ck_assert(dv_valid_name_part("..."));
	ck_assert(dv_valid_name_part(".hidden"));
	ck_assert(!dv_valid_name_part("."));
	ck_assert(!dv_valid_name_part(".."));
	ck_assert(!dv_valid_name_part(""));
	ck_assert(!dv_valid_name_part(NULL));
	ck_assert(!dv_valid_name_part("a/b"));
	ck_assert(!dv_valid_name_part("a b"));
	ck_assert(!dv_valid_name_part("caf\xc3\xa9"));
}
END_TEST

static void expect_format(uint64_t bytes, const char *want)
{
	char buf[32];

	ck_assert_str_eq(dv_format_bytes(bytes, buf, sizeof(buf)), want);
}

START_TEST(test_format_bytes)
{
	char small[4];

	expect_format(0, "0 B");
	expect_format(1023, "1023 B");
	expect_format(1024, "1 KiB");
	expect_format(1536, "1.5 KiB");
	expect_format(3ULL << 29, "1.5 GiB");
	expect_format(50ULL << 30, "50 GiB");
	expect_format((1ULL << 20) - 1, "1 MiB");
	expect_format(1ULL << 40, "1 TiB");
	expect_format(UINT64_MAX, "16 EiB");
	/* Truncates, never overflows. */
	ck_assert_str_eq(dv_format_bytes(50ULL << 30, small, sizeof(small)),
			 "50 ");
}
END_TEST

START_TEST(test_parse_bool)
{
	bool b = false;

	ck_assert_int_eq(dv_parse_bool("true", &b), 0);
	ck_assert(b);
	ck_assert_int_eq(dv_parse_bool("No", &b), 0);
	ck_assert(!b);
	ck_assert_int_eq(dv_parse_bool("ON", &b), 0);
	ck_assert(b);
	ck_assert_int_eq(dv_parse_bool("FALSE", &b), 0);
	ck_assert(!b);
	ck_assert_int_eq(dv_parse_bool("1", &b), -EINVAL);
	ck_assert_int_eq(dv_parse_bool("", &b), -EINVAL);
	ck_assert_int_eq(dv_parse_bool("truee", &b), -EINVAL);
}
END_TEST

START_TEST(test_valid_addr_port)
{
	ck_assert(dv_valid_addr_port("127.0.0.1:9110"));
	ck_assert(dv_valid_addr_port("0.0.0.0:1"));
	ck_assert(dv_valid_addr_port("localhost:65535"));
	ck_assert(dv_valid_addr_port("[::1]:9110"));
	ck_assert(!dv_valid_addr_port("::1:9110"));
	ck_assert(!dv_valid_addr_port("127.0.0.1"));
	ck_assert(!dv_valid_addr_port(":9110"));
	ck_assert(!dv_valid_addr_port("host:0"));
	ck_assert(!dv_valid_addr_port("host:65536"));
	ck_assert(!dv_valid_addr_port("host:port"));
	ck_assert(!dv_valid_addr_port("host :80"));
	ck_assert(!dv_valid_addr_port("[]:80"));
	ck_assert(!dv_valid_addr_port(NULL));
}
END_TEST

START_TEST(test_read_file)
{
	char *dir = dv_test_tmpdir("util");
	char path[PATH_MAX];
	char *text = NULL;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/f.yaml", dir);
	dv_test_write_file(path, "tiers: []\n", 10);
	ck_assert_int_eq(dv_read_file(path, 100, &text, &len), 0);
	ck_assert_uint_eq(len, 10);
	ck_assert_str_eq(text, "tiers: []\n");
	free(text);
	ck_assert_int_eq(dv_read_file(path, 9, &text, &len), -EFBIG);
	ck_assert_int_eq(dv_read_file(dir, 100, &text, &len), -EISDIR);
	ck_assert_int_eq(dv_read_file("/dev/null", 100, &text, &len), -EINVAL);
	snprintf(path, sizeof(path), "%s/missing", dir);
	ck_assert_int_eq(dv_read_file(path, 100, &text, &len), -ENOENT);
	dv_test_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_pread_full)
{
	char *dir = dv_test_tmpdir("util");
	char path[PATH_MAX], buf[8];
	int fd;

	snprintf(path, sizeof(path), "%s/f", dir);
	dv_test_write_file(path, "0123456789", 10);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(dv_pread_full(fd, buf, 4, 6), 0);
	ck_assert_int_eq(memcmp(buf, "6789", 4), 0);
	/* The file ends before the last byte asked for. */
	ck_assert_int_eq(dv_pread_full(fd, buf, 5, 6), -EIO);
	ck_assert_int_eq(dv_pread_full(fd, buf, 0, 100), 0);
	close(fd);
	ck_assert_int_eq(dv_pread_full(fd, buf, 1, 0), -EBADF);
	dv_test_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_physical_memory)
{
	/* Any Linux test machine has more than 64 MiB. */
	ck_assert_uint_gt(dv_physical_memory(), 64ULL << 20);
}
END_TEST

START_TEST(test_secret_scrub)
{
	char url[] = "https://user:pass@host:8/p/a?token=abc#frag";
	char plain[] = "https://host/p?x";
	char notaurl[] = "/mnt/a?b@c";
	char opts[] = "config=/c,origin=http://u:p@h/?t=1,ro";

	dv_secret_scrub_url(url, strlen(url));
	ck_assert_str_eq(url, "https://*********@host:8/p/a?*********#frag");
	dv_secret_scrub_url(plain, strlen(plain));
	ck_assert_str_eq(plain, "https://host/p?*");
	dv_secret_scrub_url(notaurl, strlen(notaurl));
	ck_assert_str_eq(notaurl, "/mnt/a?b@c");
	dv_secret_scrub_opts(opts);
	ck_assert_str_eq(opts, "config=/c,origin=http://***@h/?***,ro");
	dv_secret_free(NULL);
	dv_secret_free(strdup("x"));
}
END_TEST

static Suite *util_suite(void)
{
	Suite *s = suite_create("util");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_size_plain_integers);
	tcase_add_test(tc, test_size_suffixes_1024_based);
	tcase_add_test(tc, test_size_suffix_case_and_space);
	tcase_add_test(tc, test_size_rejects_junk);
	tcase_add_test(tc, test_size_overflow_is_erange);
	tcase_add_test(tc, test_parse_uint);
	tcase_add_test(tc, test_r12_expand_tilde_and_vars);
	tcase_add_test(tc, test_r12_expand_errors);
	tcase_add_test(tc, test_valid_hash);
	tcase_add_test(tc, test_valid_name_part);
	tcase_add_test(tc, test_format_bytes);
	tcase_add_test(tc, test_parse_bool);
	tcase_add_test(tc, test_valid_addr_port);
	tcase_add_test(tc, test_read_file);
	tcase_add_test(tc, test_pread_full);
	tcase_add_test(tc, test_physical_memory);
	tcase_add_test(tc, test_secret_scrub);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(util_suite());
}
