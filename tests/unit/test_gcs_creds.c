/*
 * Google Application Default Credentials (tiers/gcs/gcs_creds.c), each source
 * against tests/unit/gcs_fixture.py playing Google's token services: the
 * OAuth token endpoint checks the JWT's claims and VERIFIES its RS256
 * signature with `openssl dgst -verify` and the public half of a key pair
 * made here with the openssl CLI; the refresh_token grant checks the
 * client and the token; the GCE metadata server checks Metadata-Flavor.
 * The JWT is also verified here, with OpenSSL, against the public key.
 */
#include <check.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tiers/gcs/gcs_creds.h"
#include "tiers/net/call.h"
#include "gcs_fixture.h"
#include "helpers.h"

static const struct dv_http_config fast_http = {
	.connect_timeout = 2,
	.low_speed_time = 5,
	.low_speed_limit = 1,
	.retries = 2,
};

static struct dv_http http;
static struct dv_gcs_creds *creds;
static time_t fake_now;

static time_t test_clock(void)
{
	return fake_now;
}

static void setup(void)
{
	gf_reset();
	ck_assert_int_eq(dv_http_init(&http, &fast_http), 0);
	ck_assert_int_eq(dv_gcs_creds_new(&http, "region", &creds), 0);
	fake_now = time(NULL);
	dv_gcs_creds_set_clock(creds, test_clock);
}

static void teardown(void)
{
	dv_gcs_creds_free(creds);
	creds = NULL;
	dv_http_release(&http);
	dv_log_set_sink(NULL);
}

static int header(char *buf)
{
	return dv_gcs_creds_header(creds, buf, DV_GCS_AUTH_HEADER_MAX);
}

/* ---- the JWT itself, checked with OpenSSL and the public key ---- */

static EVP_PKEY *read_pem(const char *name, bool pub)
{
	char path[PATH_MAX];
	EVP_PKEY *k;
	FILE *f;

	gf_path(path, sizeof(path), name);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	k = pub ? PEM_read_PUBKEY(f, NULL, NULL, NULL)
		: PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	ck_assert_ptr_nonnull(k);
	return k;
}

static size_t b64url_decode(const char *in, size_t len, unsigned char *out)
{
	char *std = malloc(len + 4);
	size_t n = 0, pad;
	int got;

	for (size_t i = 0; i < len; i++)
		std[n++] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
	pad = (4 - n % 4) % 4;
	for (size_t i = 0; i < pad; i++)
		std[n++] = '=';
	got = EVP_DecodeBlock(out, (unsigned char *)std, (int)n);
	free(std);
	ck_assert_int_ge(got, 0);
	return (size_t)got - pad;
}

START_TEST(test_jwt_assertion_verifies)
{
	EVP_PKEY *key = read_pem("key.pem", false), *pub = read_pem("pub.pem", true);
	unsigned char part[4096], sig[1024];
	char *jwt = NULL, *dot1, *dot2;
	size_t len, siglen;
	EVP_MD_CTX *md = EVP_MD_CTX_new();

	ck_assert_int_eq(dv_gcs_jwt_assertion(key, "kid-1", GF_EMAIL, DV_GCS_SCOPE,
					      "https://oauth2.example/token",
					      1700000000, &jwt), 0);
	dot1 = strchr(jwt, '.');
	dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
	ck_assert_ptr_nonnull(dot2);
	ck_assert_ptr_null(strchr(jwt, '='));
	len = b64url_decode(jwt, (size_t)(dot1 - jwt), part);
	part[len] = '\0';
	ck_assert_str_eq((char *)part,
			 "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\"kid-1\"}");
	len = b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), part);
	part[len] = '\0';
	ck_assert_str_eq((char *)part,
			 "{\"iss\":\"" GF_EMAIL "\",\"scope\":\"" DV_GCS_SCOPE
			 "\",\"aud\":\"https://oauth2.example/token\","
			 "\"iat\":1700000000,\"exp\":1700003600}");
	siglen = b64url_decode(dot2 + 1, strlen(dot2 + 1), sig);
	ck_assert_uint_eq(siglen, 256);
	ck_assert_int_eq(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub), 1);
	ck_assert_int_eq(EVP_DigestVerify(md, sig, siglen, (unsigned char *)jwt,
					  (size_t)(dot2 - jwt)), 1);
	/* One flipped byte of the claims no longer verifies. */
	jwt[dot1 - jwt + 5] ^= 1;
	ck_assert_int_eq(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pub), 1);
	ck_assert_int_ne(EVP_DigestVerify(md, sig, siglen, (unsigned char *)jwt,
					  (size_t)(dot2 - jwt)), 1);
	EVP_MD_CTX_free(md);
	free(jwt);
	EVP_PKEY_free(key);
	EVP_PKEY_free(pub);
}
END_TEST

START_TEST(test_base64url)
{
	char out[16];

	ck_assert_uint_eq(dv_gcs_base64url("\xfb\xff", 2, out, sizeof(out)), 3);
	ck_assert_str_eq(out, "-_8");
	ck_assert_uint_eq(dv_gcs_base64url("abc", 3, out, sizeof(out)), 4);
	ck_assert_str_eq(out, "YWJj");
	ck_assert_uint_eq(dv_gcs_base64url("abcd", 4, out, 8), 0);
}
END_TEST

/* ---- service account ---- */

START_TEST(test_service_account_token)
{
	char h[DV_GCS_AUTH_HEADER_MAX], what[512];

	gf_use_file("sa.json");
	ck_assert_int_eq(gf_count("TOKEN"), 0);
	ck_assert_int_eq(header(h), 0);
	ck_assert_msg(strncmp(h, "Authorization: Bearer ya29.sa-", 30) == 0, "%s", h);
	/* The server checked the claims and verified the signature. */
	ck_assert_int_eq(gf_count("TOKEN jwt ok"), 1);
	ck_assert_int_eq(gf_count("POST /token"), 1);
	dv_gcs_creds_describe(creds, what, sizeof(what));
	ck_assert_msg(strstr(what, "service account " GF_EMAIL), "%s", what);
}
END_TEST

START_TEST(test_key_file_readable_by_others_warns)
{
	char h[DV_GCS_AUTH_HEADER_MAX], path[PATH_MAX];

	gf_path(path, sizeof(path), "sa.json");
	gf_use_file("sa.json");
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(header(h), 0);
	ck_assert(!gf_logged("can be read by others"));
	dv_gcs_creds_free(creds);
	ck_assert_int_eq(dv_gcs_creds_new(&http, "region", &creds), 0);
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(header(h), 0);
	ck_assert_msg(gf_logged("can be read by others (chmod 600 it)"), "%s",
		      gf_lines);
}
END_TEST

START_TEST(test_service_account_wrong_key_is_denied)
{
	char h[DV_GCS_AUTH_HEADER_MAX];

	gf_use_file("sa-wrong.json");
	ck_assert_int_eq(header(h), -EACCES);
	ck_assert_int_eq(gf_count("TOKEN jwt bad signature"), 1);
	ck_assert_msg(gf_logged("access denied"), "%s", gf_lines);
	ck_assert_msg(gf_logged("invalid_grant: Invalid JWT Signature."), "%s",
		      gf_lines);
	/* Refused is not transient: no retries. */
	ck_assert_int_eq(gf_count("POST /token"), 1);
}
END_TEST

START_TEST(test_token_cached_then_refreshed)
{
	char a[DV_GCS_AUTH_HEADER_MAX], b[DV_GCS_AUTH_HEADER_MAX];

	/* A refresh token: a JWT signed at a clock set ahead would be refused. */
	gf_use_file("user.json");
	ck_assert_int_eq(header(a), 0);
	fake_now += 3599 - DV_HTTP_REFRESH_AHEAD - 1;
	ck_assert_int_eq(header(b), 0);
	ck_assert_str_eq(a, b);
	ck_assert_int_eq(gf_count("POST /token"), 1);
	fake_now += 2; /* inside the margin: refreshed before it expires */
	ck_assert_int_eq(header(b), 0);
	ck_assert_str_ne(a, b);
	ck_assert_int_eq(gf_count("POST /token"), 2);
}
END_TEST

START_TEST(test_short_token_short_margin)
{
	char a[DV_GCS_AUTH_HEADER_MAX], b[DV_GCS_AUTH_HEADER_MAX];

	gf_ctl("/_fault", "expires_in=40");
	gf_use_file("sa.json");
	ck_assert_int_eq(header(a), 0);
	fake_now += 19; /* margin: half of 40 s (dv_http_refresh_at) */
	ck_assert_int_eq(header(b), 0);
	ck_assert_str_eq(a, b);
	fake_now += 2;
	ck_assert_int_eq(header(b), 0);
	ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(test_invalidate_fetches_again)
{
	char a[DV_GCS_AUTH_HEADER_MAX], b[DV_GCS_AUTH_HEADER_MAX];

	gf_use_file("sa.json");
	ck_assert_int_eq(header(a), 0);
	dv_gcs_creds_invalidate(creds);
	ck_assert_int_eq(header(b), 0);
	ck_assert_str_ne(a, b);
	ck_assert_int_eq(gf_count("TOKEN jwt ok"), 2);
}
END_TEST

/* ---- authorized_user (refresh token) ---- */

START_TEST(test_authorized_user_token)
{
	char h[DV_GCS_AUTH_HEADER_MAX];

	gf_use_file("user.json");
	ck_assert_int_eq(header(h), 0);
	ck_assert_msg(strncmp(h, "Authorization: Bearer ya29.user-", 32) == 0, "%s", h);
	ck_assert_int_eq(gf_count("TOKEN refresh ok"), 1);
}
END_TEST

START_TEST(test_authorized_user_refused)
{
	char h[DV_GCS_AUTH_HEADER_MAX], path[PATH_MAX];

	gf_path(path, sizeof(path), "revoked.json");
	gf_write_user(path, "1//0revoked-token");
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	ck_assert_int_eq(header(h), -EACCES);
	ck_assert_int_eq(gf_count("TOKEN refresh bad"), 1);
	ck_assert_msg(gf_logged("invalid_grant"), "%s", gf_lines);
}
END_TEST

/* ---- gcloud's well-known file ---- */

START_TEST(test_well_known_file_cloudsdk_config)
{
	char h[DV_GCS_AUTH_HEADER_MAX], dir[PATH_MAX], path[PATH_MAX + 64],
	     what[1024];

	gf_path(dir, sizeof(dir), "gcloud-conf");
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/%s", dir, DV_GCS_ADC_FILE);
	gf_write_user(path, GF_REFRESH);
	setenv("CLOUDSDK_CONFIG", dir, 1);
	ck_assert_int_eq(header(h), 0);
	ck_assert_int_eq(gf_count("TOKEN refresh ok"), 1);
	dv_gcs_creds_describe(creds, what, sizeof(what));
	ck_assert_msg(strstr(what, path) != NULL, "%s", what);
}
END_TEST

START_TEST(test_well_known_file_in_home)
{
	char h[DV_GCS_AUTH_HEADER_MAX], home[PATH_MAX], cmd[3 * PATH_MAX];

	gf_path(home, sizeof(home), "home");
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s/.config/gcloud' && cp '%s/sa.json' '%s/.config/gcloud/%s'",
		 home, gf_state, home, DV_GCS_ADC_FILE);
	gf_run(cmd);
	setenv("HOME", home, 1);
	ck_assert_int_eq(header(h), 0);
	ck_assert_int_eq(gf_count("TOKEN jwt ok"), 1);
}
END_TEST

START_TEST(test_env_wins_over_well_known_file)
{
	char h[DV_GCS_AUTH_HEADER_MAX], dir[PATH_MAX], path[PATH_MAX + 64];

	gf_path(dir, sizeof(dir), "gcloud-conf2");
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/%s", dir, DV_GCS_ADC_FILE);
	gf_write_user(path, GF_REFRESH);
	setenv("CLOUDSDK_CONFIG", dir, 1);
	gf_use_file("sa.json");
	ck_assert_int_eq(header(h), 0);
	ck_assert_int_eq(gf_count("TOKEN jwt ok"), 1);
	ck_assert_int_eq(gf_count("TOKEN refresh"), 0);
}
END_TEST

/* ---- the GCE metadata server ---- */

START_TEST(test_metadata_server)
{
	char h[DV_GCS_AUTH_HEADER_MAX], host[64], what[256];

	snprintf(host, sizeof(host), "127.0.0.1:%d", gf_port);
	setenv("GCE_METADATA_HOST", host, 1);
	ck_assert_int_eq(header(h), 0);
	ck_assert_msg(strncmp(h, "Authorization: Bearer ya29.gce-", 31) == 0, "%s", h);
	/* The server refuses a request without Metadata-Flavor: Google. */
	ck_assert_int_eq(gf_count("TOKEN gce ok"), 1);
	ck_assert_int_eq(gf_count("GET /computeMetadata/v1/instance/service-accounts/default/token - 200"), 1);
	dv_gcs_creds_describe(creds, what, sizeof(what));
	ck_assert_msg(strstr(what, host) != NULL, "%s", what);
}
END_TEST

START_TEST(test_metadata_root_fallback)
{
	char h[DV_GCS_AUTH_HEADER_MAX], host[64];

	snprintf(host, sizeof(host), "http://127.0.0.1:%d", gf_port);
	setenv("GCE_METADATA_ROOT", host, 1);
	ck_assert_int_eq(header(h), 0);
	ck_assert_int_eq(gf_count("TOKEN gce ok"), 1);
}
END_TEST

START_TEST(test_no_credentials_is_denied)
{
	char h[DV_GCS_AUTH_HEADER_MAX];
	struct timespec t0, t1;

	/* Nothing listens on port 1 of 127.0.0.1. */
	setenv("GCE_METADATA_HOST", "127.0.0.1:1", 1);
	ck_assert_int_eq(header(h), -EACCES);
	ck_assert_msg(gf_logged("no Google credentials found"), "%s", gf_lines);
	/* Remembered: the next call answers at once, without a request. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(header(h), -EACCES);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 1);
}
END_TEST

/* ---- failures of the token service ---- */

START_TEST(test_token_500_is_retried)
{
	char h[DV_GCS_AUTH_HEADER_MAX];

	gf_ctl("/_fault", "token_500=1");
	gf_use_file("sa.json");
	ck_assert_int_eq(header(h), 0);
	ck_assert_int_eq(gf_count("POST /token"), 2);
}
END_TEST

START_TEST(test_token_service_down_remembered)
{
	char h[DV_GCS_AUTH_HEADER_MAX];

	gf_ctl("/_fault", "token_500=always");
	gf_use_file("sa.json");
	ck_assert_int_eq(header(h), -EIO);
	ck_assert_int_eq(gf_count("POST /token"), 3); /* 1 + retries */
	ck_assert_int_eq(header(h), -EIO);
	ck_assert_int_eq(gf_count("POST /token"), 3);
	fake_now += DV_GCS_RETRY_AFTER + 1;
	gf_ctl("/_fault", "token_500=");
	ck_assert_int_eq(header(h), 0);
}
END_TEST

START_TEST(test_valid_token_outlives_failed_refresh)
{
	char a[DV_GCS_AUTH_HEADER_MAX], b[DV_GCS_AUTH_HEADER_MAX];

	gf_use_file("sa.json");
	ck_assert_int_eq(header(a), 0);
	gf_ctl("/_fault", "token_500=always");
	fake_now += 3599 - 60; /* due for a refresh, not expired */
	ck_assert_int_eq(header(b), 0);
	ck_assert_str_eq(a, b);
	fake_now += 61; /* expired */
	ck_assert_int_eq(header(b), -EIO);
}
END_TEST

/* ---- bad files ---- */

START_TEST(test_bad_key_files_are_denied)
{
	static const char *const bad[] = {
		"{not json",
		"[]",
		"{\"type\": \"external_account\"}",
		"{\"type\": \"service_account\", \"client_email\": \"a@b\"}",
		"{\"type\": \"service_account\", \"client_email\": \"a@b\", \"private_key\": \"-----BEGIN PRIVATE KEY-----\\nnope\\n-----END PRIVATE KEY-----\\n\"}",
		"{\"type\": \"authorized_user\", \"client_id\": \"x\"}",
	};
	char h[DV_GCS_AUTH_HEADER_MAX], path[PATH_MAX];

	gf_path(path, sizeof(path), "bad.json");
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct dv_gcs_creds *c;

		dv_test_write_file(path, bad[i], strlen(bad[i]));
		ck_assert_int_eq(dv_gcs_creds_new(&http, "t", &c), 0);
		ck_assert_msg(dv_gcs_creds_header(c, h, sizeof(h)) == -EACCES,
			      "file %zu", i);
		dv_gcs_creds_free(c);
	}
	gf_path(path, sizeof(path), "missing.json");
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	ck_assert_int_eq(header(h), -EACCES);
	ck_assert_msg(gf_logged("cannot read the Google credentials"), "%s", gf_lines);
	ck_assert_int_eq(gf_count("TOKEN"), 0);
}
END_TEST

START_TEST(test_plain_http_token_uri_refused)
{
	char h[DV_GCS_AUTH_HEADER_MAX];

	gf_write_sa("sa-http.json", "key.pem", "http://oauth.example.com/token");
	gf_use_file("sa-http.json");
	ck_assert_int_eq(header(h), -EACCES);
	ck_assert_msg(gf_logged("is not https"), "%s", gf_lines);
}
END_TEST

START_TEST(test_small_buffer)
{
	char h[16];

	gf_use_file("sa.json");
	ck_assert_int_eq(dv_gcs_creds_header(creds, h, sizeof(h)), -ENOBUFS);
}
END_TEST

/* ---- threads, laziness, secrecy ---- */

static void *grab(void *arg)
{
	char *h = arg;

	return (void *)(intptr_t)header(h);
}

START_TEST(test_threads_share_one_fetch)
{
	static char h[8][DV_GCS_AUTH_HEADER_MAX];
	pthread_t th[8];

	gf_use_file("sa.json");
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, grab, h[i]), 0);
	for (int i = 0; i < 8; i++) {
		void *ret;

		pthread_join(th[i], &ret);
		ck_assert_int_eq((int)(intptr_t)ret, 0);
		ck_assert_str_eq(h[i], h[0]);
	}
	ck_assert_int_eq(gf_count("POST /token"), 1);
}
END_TEST

START_TEST(test_creation_is_lazy)
{
	struct dv_gcs_creds *c;
	char what[128];

	gf_use_file("sa.json");
	ck_assert_int_eq(dv_gcs_creds_new(&http, "lazy", &c), 0);
	dv_gcs_creds_describe(c, what, sizeof(what));
	ck_assert_str_eq(what, "not resolved yet");
	dv_gcs_creds_free(c);
	ck_assert_int_eq(gf_count("TOKEN"), 0);
	ck_assert_int_eq(gf_count("/"), 0);
}
END_TEST

/* A line of the issued-token list, or the key's base64 body. */
static void assert_absent(const char *secret, const char *what)
{
	ck_assert_msg(strstr(gf_lines, secret) == NULL,
		      "%s appears in the log:\n%s", what, gf_lines);
}

START_TEST(test_secrets_never_logged)
{
	char h[DV_GCS_AUTH_HEADER_MAX], path[PATH_MAX], host[64], line[256];
	char *key, *issued;
	size_t len;
	FILE *f;

	/* Every source, successes and failures, at debug level. */
	gf_use_file("sa.json");
	ck_assert_int_eq(header(h), 0);
	dv_gcs_creds_free(creds);
	ck_assert_int_eq(dv_gcs_creds_new(&http, "region", &creds), 0);
	gf_use_file("sa-wrong.json");
	ck_assert_int_eq(header(h), -EACCES);
	dv_gcs_creds_free(creds);
	ck_assert_int_eq(dv_gcs_creds_new(&http, "region", &creds), 0);
	gf_use_file("user.json");
	ck_assert_int_eq(header(h), 0);
	dv_gcs_creds_free(creds);
	ck_assert_int_eq(dv_gcs_creds_new(&http, "region", &creds), 0);
	gf_path(path, sizeof(path), "revoked.json");
	gf_write_user(path, "1//0revoked-secret-refresh");
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
	ck_assert_int_eq(header(h), -EACCES);
	dv_gcs_creds_free(creds);
	ck_assert_int_eq(dv_gcs_creds_new(&http, "region", &creds), 0);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	snprintf(host, sizeof(host), "127.0.0.1:%d", gf_port);
	setenv("GCE_METADATA_HOST", host, 1);
	ck_assert_int_eq(header(h), 0);
	ck_assert_msg(gf_lines_len > 0, "nothing was logged");

	assert_absent("PRIVATE KEY", "a PEM header");
	gf_path(path, sizeof(path), "key.pem");
	key = dv_test_read_file(path, &len);
	/* The second line of the PEM: 64 characters of the key itself. */
	snprintf(line, sizeof(line), "%.40s", strchr(key, '\n') + 1);
	assert_absent(line, "the private key");
	free(key);
	assert_absent(GF_CLIENT_SECRET, "the client secret");
	assert_absent(GF_REFRESH, "the refresh token");
	assert_absent("1//0revoked", "a refused refresh token");
	assert_absent("ya29.", "an access token");
	assert_absent("eyJ", "a JWT");
	gf_path(path, sizeof(path), "issued");
	issued = dv_test_read_file(path, &len);
	ck_assert_ptr_nonnull(issued);
	f = fmemopen(issued, len, "r");
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (*line)
			assert_absent(line, "an issued access token");
	}
	fclose(f);
	free(issued);
}
END_TEST

static Suite *gcs_creds_suite(void)
{
	Suite *s = suite_create("gcs_creds");
	TCase *tc = tcase_create("adc");

	tcase_add_unchecked_fixture(tc, gf_start, gf_stop);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_jwt_assertion_verifies);
	tcase_add_test(tc, test_base64url);
	tcase_add_test(tc, test_service_account_token);
	tcase_add_test(tc, test_key_file_readable_by_others_warns);
	tcase_add_test(tc, test_service_account_wrong_key_is_denied);
	tcase_add_test(tc, test_token_cached_then_refreshed);
	tcase_add_test(tc, test_short_token_short_margin);
	tcase_add_test(tc, test_invalidate_fetches_again);
	tcase_add_test(tc, test_authorized_user_token);
	tcase_add_test(tc, test_authorized_user_refused);
	tcase_add_test(tc, test_well_known_file_cloudsdk_config);
	tcase_add_test(tc, test_well_known_file_in_home);
	tcase_add_test(tc, test_env_wins_over_well_known_file);
	tcase_add_test(tc, test_metadata_server);
	tcase_add_test(tc, test_metadata_root_fallback);
	tcase_add_test(tc, test_no_credentials_is_denied);
	tcase_add_test(tc, test_token_500_is_retried);
	tcase_add_test(tc, test_token_service_down_remembered);
	tcase_add_test(tc, test_valid_token_outlives_failed_refresh);
	tcase_add_test(tc, test_bad_key_files_are_denied);
	tcase_add_test(tc, test_plain_http_token_uri_refused);
	tcase_add_test(tc, test_small_buffer);
	tcase_add_test(tc, test_threads_share_one_fetch);
	tcase_add_test(tc, test_creation_is_lazy);
	tcase_add_test(tc, test_secrets_never_logged);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(gcs_creds_suite());
}
