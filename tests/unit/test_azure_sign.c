/*
 * Shared Key (tiers/azure/azure_sign.c) against two references:
 *
 *   - Microsoft's Python SDK, azure-storage-blob 12.x (Debian's
 *     python3-azure): tests/unit/azure_sdk_sign.py builds each request
 *     with the SDK's BlobClient URL encoding and signs it with its
 *     SharedKeyCredentialPolicy; the path, the string-to-sign and the
 *     Authorization value must be ours byte for byte. The cases are the
 *     awkward ones: blob names with blanks, '+', '=' and UTF-8, query
 *     values with encoded '+', '/' and '=', x-ms-* headers with odd case
 *     and blanks, names the service sorts unlike ASCII, an empty
 *     Content-Length on GET, Range;
 *   - the testkit's azsign.py (which Azurite accepts), over the requests
 *     the tier makes, with two keys.
 *
 * Where the SDK departs from the Shared Key specification (it signs a
 * Range header in no slot: it sends x-ms-range itself; it keeps one value
 * of a repeated query name), the specification's form is asserted.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiers/azure/azure_sign.h"
#include "helpers.h"

#define ACCOUNT "devstoreaccount1"
#define WELL_KNOWN_KEY                                                      \
	"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"  \
	"K1SZFPTOtr/KBHBeksoGMGw=="
#define OTHER_KEY "c2VjcmV0LWtleS1ieXRlcy1mb3ItYS10ZXN0LTAxMjM0NTY3ODk="
#define HASH "0123456789abcdef0123456789abcdef"
#define PYTHON "/usr/bin/python3" /* Debian's python3-azure is only there */

static void src_dir(char *buf, size_t len)
{
	const char *dir = getenv("DV_TEST_SRCDIR");
	const char *slash = strrchr(__FILE__, '/');

	if (dir)
		snprintf(buf, len, "%s", dir);
	else
		snprintf(buf, len, "%.*s", slash ? (int)(slash - __FILE__) : 1,
			 slash ? __FILE__ : ".");
}

/* Runs @argv with stdout into @out (NUL-terminated); returns exit status. */
static int run_capture(char *const argv[], char *out, size_t len)
{
	int pfd[2], status;
	size_t got = 0;
	ssize_t n;
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	while (got + 1 < len && (n = read(pfd[0], out + got, len - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(pfd[0]);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	while (got > 0 && (out[got - 1] == '\n' || out[got - 1] == '\r'))
		out[--got] = '\0';
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}


/* ---- Shared Key against azsign.py ---- */

/* azsign.py sharedkey METHOD PATH?QUERY HEADERS…, with @key as AZ_KEY. */
static void azsign(const char *key, const char *method, const char *target,
		   const char *const *headers, char *out, size_t len)
{
	char script[PATH_MAX + 32], dir[PATH_MAX];
	char *argv[24];
	size_t n = 0;

	src_dir(dir, sizeof(dir));
	snprintf(script, sizeof(script), "%s/../integration/azsign.py", dir);
	ck_assert_msg(access(script, R_OK) == 0, "no %s", script);
	setenv("AZ_KEY", key, 1);
	argv[n++] = (char *)PYTHON;
	argv[n++] = script;
	argv[n++] = (char *)"sharedkey";
	argv[n++] = (char *)method;
	argv[n++] = (char *)target;
	for (size_t i = 0; headers[i]; i++)
		argv[n++] = (char *)headers[i];
	argv[n] = NULL;
	ck_assert_int_eq(run_capture(argv, out, len), 0);
}

struct sign_case {
	const char *method, *path, *query;
	const char *headers[8];
	uint64_t content_length;
};

static const struct sign_case sign_cases[] = {
	{ "HEAD", "/devstoreaccount1/shards/team-a/" HASH ".tar", NULL,
	  { "x-ms-version: 2021-08-06",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:00 GMT" }, 0 },
	{ "GET", "/devstoreaccount1/shards/" HASH ".tar", NULL,
	  { "x-ms-version: 2021-08-06",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:01 GMT",
	    "Range: bytes=1048576-3145727" }, 0 },
	{ "PUT", "/devstoreaccount1/shards/" HASH ".tar", NULL,
	  { "x-ms-version: 2021-08-06", "x-ms-blob-type: BlockBlob",
	    "Content-Type: application/x-tar",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:02 GMT" },
	  3145728 },
	{ "PUT", "/devstoreaccount1/shards/" HASH ".tar",
	  "comp=block&blockid=ZHYtMDAwMDA5%2B%2F",
	  { "x-ms-date: Sat, 29 Nov 2025 21:00:03 GMT",
	    "x-ms-version: 2021-08-06" },
	  8388608 },
	{ "PUT", "/acct/cont/p%20q/" HASH ".tar", "comp=blocklist",
	  { "x-ms-version: 2021-08-06", "Content-Type: application/xml",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:04 GMT",
	    "x-ms-meta-Origin:  datavofs " },
	  123 },
	{ "GET", "/devstoreaccount1/shards",
	  "restype=container&comp=list&prefix=team-a%2F&include=snapshots&include=metadata&Marker=2%21a",
	  { "x-ms-version: 2021-08-06",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:05 GMT" }, 0 },
	{ "DELETE", "/devstoreaccount1/shards/" HASH ".tar", NULL,
	  { "x-ms-version: 2021-08-06", "If-Match: \"0x8DB\"",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:06 GMT" }, 0 },
};

static void check_sign_case(const struct sign_case *sc, const char *account,
			    const char *key_b64)
{
	struct dv_az_sign_input in = {
		.method = sc->method, .path = sc->path, .query = sc->query,
		.headers = sc->headers, .content_length = sc->content_length,
	};
	const char *args[12];
	char target[512], cl[64], want[256], got[DV_AZ_AUTH_MAX];
	struct dv_az_key k;
	size_t n = 0;

	ck_assert_int_eq(dv_az_key_init(&k, account, key_b64), 0);
	ck_assert_int_eq(dv_az_sharedkey(&k, &in, got, sizeof(got)), 0);
	dv_az_key_wipe(&k);
	snprintf(target, sizeof(target), "%s%s%s", sc->path,
		 sc->query ? "?" : "", sc->query ? sc->query : "");
	for (size_t i = 0; sc->headers[i]; i++)
		args[n++] = sc->headers[i];
	if (sc->content_length) {
		snprintf(cl, sizeof(cl), "Content-Length: %llu",
			 (unsigned long long)sc->content_length);
		args[n++] = cl;
	}
	args[n] = NULL;
	azsign(key_b64, sc->method, target, args, want, sizeof(want));
	ck_assert_str_eq(got, want);
}

START_TEST(test_sharedkey_matches_azsign)
{
	for (size_t i = 0; i < sizeof(sign_cases) / sizeof(sign_cases[0]); i++)
		check_sign_case(&sign_cases[i], "devstoreaccount1",
				WELL_KNOWN_KEY);
}
END_TEST

START_TEST(test_sharedkey_other_key)
{
	/* azsign.py names devstoreaccount1; only the key changes here. */
	for (size_t i = 0; i < sizeof(sign_cases) / sizeof(sign_cases[0]); i++)
		check_sign_case(&sign_cases[i], "devstoreaccount1", OTHER_KEY);
}
END_TEST

START_TEST(test_string_to_sign_layout)
{
	const char *h[] = { "x-ms-version: 2021-08-06",
			    "X-MS-Date:  Sat, 29 Nov 2025 21:00:00 GMT ",
			    "Range: bytes=0-9", NULL };
	struct dv_az_sign_input in = {
		.method = "get", .path = "/acct/cont/b%2Fc.tar",
		.query = "b=2&A=1&b=1", .headers = h,
	};
	char out[1024];

	ck_assert_int_gt(dv_az_string_to_sign("acct", &in, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "GET\n\n\n\n\n\n\n\n\n\n\nbytes=0-9\n"
			      "x-ms-date:Sat, 29 Nov 2025 21:00:00 GMT\n"
			      "x-ms-version:2021-08-06\n"
			      "/acct/acct/cont/b%2Fc.tar\na:1\nb:1,2");
	ck_assert_int_eq(dv_az_string_to_sign("acct", &in, out, 20),
			 -ENAMETOOLONG);
	in.path = "no-slash";
	ck_assert_int_eq(dv_az_string_to_sign("acct", &in, out, sizeof(out)),
			 -EINVAL);
}
END_TEST

/* ---- against the SDK ---- */

struct sdk_case {
	const char *method;
	const char *blob;            /* plain name in "shards"; "" for it */
	const char *query;           /* as sent, or NULL */
	const char *headers[10];     /* as we send them; NULL-ended */
	uint64_t content_length;
	const char *range;           /* the Range value, signed in its slot */
};

static const struct sdk_case sdk_cases[] = {
	/* blanks, '+', '=', UTF-8; GET with no body: Content-Length empty */
	{ "GET", "team a/x+y=z/caf\xc3\xa9 \xe2\x82\xac.tar", NULL,
	  { "x-ms-version: 2021-08-06",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:00 GMT" }, 0, NULL },
	/* x-ms-* names in odd case, blanks and tabs around values */
	{ "HEAD", "team-a/" HASH ".tar", NULL,
	  { "X-MS-Date:  Sat, 29 Nov 2025 21:00:01 GMT ",
	    "x-ms-VERSION :2021-08-06", "X-Ms-Meta-Origin:\tdatavofs\t" },
	  0, NULL },
	/* the service's order: '-' and '_' before digits */
	{ "PUT", HASH ".tar", NULL,
	  { "x-ms-version: 2021-08-06", "x-ms-meta-a0: 1",
	    "x-ms-meta-a_b: 2", "x-ms-meta-a-b: 3", "x-ms-meta-a: 4",
	    "x-ms-blob-type: BlockBlob", "Content-Type: application/x-tar",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:02 GMT" }, 3145728, NULL },
	/* a block id: encoded '+', '/' and '=' in a query value */
	{ "PUT", "p/" HASH ".tar", "comp=block&blockid=ZHYtMDAwMDA5%2B%2F%3D%3D",
	  { "x-ms-date: Sat, 29 Nov 2025 21:00:03 GMT",
	    "x-ms-version: 2021-08-06" }, 8388608, NULL },
	{ "PUT", HASH ".tar", "comp=blocklist",
	  { "x-ms-version: 2021-08-06", "Content-Type: application/xml",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:04 GMT" }, 123, NULL },
	{ "GET", "", "restype=container&comp=list&prefix=team%20a%2F&marker=2%21a",
	  { "x-ms-version: 2021-08-06",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:05 GMT" }, 0, NULL },
	/* the SDK's own way to ask for a part */
	{ "GET", HASH ".tar", NULL,
	  { "x-ms-version: 2021-08-06", "x-ms-range: bytes=0-1023",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:06 GMT" }, 0, NULL },
	/* ours: Range, which the specification signs in its slot */
	{ "GET", "team-a/" HASH ".tar", NULL,
	  { "x-ms-version: 2021-08-06",
	    "x-ms-date: Sat, 29 Nov 2025 21:00:07 GMT",
	    "Range: bytes=1048576-3145727" }, 0, "bytes=1048576-3145727" },
};

/* azure_sdk_sign.py's three answers: path, Authorization, string-to-sign. */
struct sdk_answer {
	char out[DV_AZ_STS_MAX];
	const char *path, *auth, *sts;
};

static void sdk_sign(const struct sdk_case *sc, struct sdk_answer *a)
{
	char script[PATH_MAX + 32], dir[PATH_MAX], cl[64];
	char *argv[24], *nl;
	size_t n = 0;

	src_dir(dir, sizeof(dir));
	snprintf(script, sizeof(script), "%s/azure_sdk_sign.py", dir);
	ck_assert_msg(access(PYTHON, X_OK) == 0, "no %s", PYTHON);
	argv[n++] = (char *)PYTHON;
	argv[n++] = script;
	argv[n++] = (char *)ACCOUNT;
	argv[n++] = (char *)WELL_KNOWN_KEY;
	argv[n++] = (char *)sc->method;
	argv[n++] = (char *)sc->blob;
	argv[n++] = (char *)(sc->query ? sc->query : "");
	for (size_t i = 0; sc->headers[i]; i++)
		argv[n++] = (char *)sc->headers[i];
	/* what libcurl sends: "Content-Length: 0" too, for a PUT */
	snprintf(cl, sizeof(cl), "Content-Length: %llu",
		 (unsigned long long)sc->content_length);
	argv[n++] = cl;
	argv[n] = NULL;
	ck_assert_msg(run_capture(argv, a->out, sizeof(a->out)) == 0,
		      "azure_sdk_sign.py failed (is python3-azure installed?)");
	a->path = a->out;
	nl = strchr(a->out, '\n');
	ck_assert_ptr_nonnull(nl);
	*nl = '\0';
	a->auth = nl + 1;
	nl = strchr(nl + 1, '\n');
	ck_assert_ptr_nonnull(nl);
	*nl = '\0';
	a->sts = nl + 1;
}

/* @sts with @range written into the Range slot (the 12th line). */
static void with_range(const char *sts, const char *range, char *out,
		       size_t len)
{
	const char *p = sts;

	for (int line = 0; line < 11; line++) {
		p = strchr(p, '\n');
		ck_assert_ptr_nonnull(p);
		p++;
	}
	ck_assert_msg(*p == '\n', "the SDK signed something as Range");
	snprintf(out, len, "%.*s%s%s", (int)(p - sts), sts, range, p);
}

static void check_sdk_case(const struct sdk_case *sc)
{
	static struct sdk_answer sdk;
	static char sts[DV_AZ_STS_MAX], want[DV_AZ_STS_MAX];
	char path[1024], auth[DV_AZ_AUTH_MAX + 16];
	char *enc = dv_az_url_encode(sc->blob, true);
	struct dv_az_sign_input in = {
		.method = sc->method, .path = path, .query = sc->query,
		.headers = sc->headers, .content_length = sc->content_length,
	};
	struct dv_az_key k;

	ck_assert_ptr_nonnull(enc);
	snprintf(path, sizeof(path), "/" ACCOUNT "/shards%s%s",
		 *enc ? "/" : "", enc);
	free(enc);
	sdk_sign(sc, &sdk);
	ck_assert_str_eq(path, sdk.path);
	ck_assert_int_gt(dv_az_string_to_sign(ACCOUNT, &in, sts, sizeof(sts)), 0);
	ck_assert_int_eq(dv_az_key_init(&k, ACCOUNT, WELL_KNOWN_KEY), 0);
	ck_assert_int_eq(dv_az_sharedkey(&k, &in, auth, sizeof(auth)), 0);
	dv_az_key_wipe(&k);
	if (!sc->range) {
		ck_assert_str_eq(sts, sdk.sts);
		ck_assert_str_eq(auth, sdk.auth);
		return;
	}
	with_range(sdk.sts, sc->range, want, sizeof(want));
	ck_assert_str_eq(sts, want);
}

START_TEST(test_sharedkey_matches_sdk)
{
	check_sdk_case(&sdk_cases[_i]);
}
END_TEST

/* Repeated and mixed-case query names: the specification's form. */
START_TEST(test_query_as_the_spec_says)
{
	const char *h[] = { "x-ms-date: Sat, 29 Nov 2025 21:00:08 GMT",
			    "x-ms-version: 2021-08-06", NULL };
	struct dv_az_sign_input in = {
		.method = "GET", .path = "/" ACCOUNT "/shards",
		.query = "restype=container&include=snapshots&Comp=list"
			 "&include=metadata&prefix=a+b%2Bc",
		.headers = h,
	};
	char out[1024];

	ck_assert_int_gt(dv_az_string_to_sign(ACCOUNT, &in, out, sizeof(out)), 0);
	ck_assert_str_eq(out, "GET\n\n\n\n\n\n\n\n\n\n\n\n"
			      "x-ms-date:Sat, 29 Nov 2025 21:00:08 GMT\n"
			      "x-ms-version:2021-08-06\n"
			      "/" ACCOUNT "/" ACCOUNT "/shards\n"
			      "comp:list\n"
			      "include:metadata,snapshots\n"
			      "prefix:a b+c\n"
			      "restype:container");
}
END_TEST


static Suite *azure_sign_suite(void)
{
	Suite *s = suite_create("azure_sign");
	TCase *tc = tcase_create("sdk");

	tcase_add_loop_test(tc, test_sharedkey_matches_sdk, 0,
			    (int)(sizeof(sdk_cases) / sizeof(sdk_cases[0])));
	tcase_add_test(tc, test_query_as_the_spec_says);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("azsign");
	tcase_add_test(tc, test_sharedkey_matches_azsign);
	tcase_add_test(tc, test_sharedkey_other_key);
	tcase_add_test(tc, test_string_to_sign_layout);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(azure_sign_suite());
}
