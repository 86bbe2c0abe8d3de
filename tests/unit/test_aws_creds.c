/*
 * tiers/s3/aws_creds.c: every source of the chain, its order, its cache and
 * refresh. The token services (STS, the ECS agent, IMDSv2) are played by
 * tests/unit/aws_fixture.py on 127.0.0.1, which checks each request (the
 * web identity token and role, the ECS authorization header, the IMDSv2
 * session token) and refuses a wrong one.
 *
 * Each test runs in its own process (CK_FORK), so the environment it sets
 * dies with it. IMDS is disabled unless a test points it at the fixture:
 * no test ever sends a packet to a link-local address.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/log.h"
#include "tiers/s3/aws_creds.h"
#include "helpers.h"
#include "pyfixture.h"

#define ROLE "arn:aws:iam::123456789012:role/datavo"
#define WEB_TOKEN "eyJhbGciOiJSUzI1NiJ9.WEBIDENTITY-SECRET.sig"
#define ECS_AUTH "ECS-AUTH-SECRET-7731"

static char *home;
static struct pyfixture fx;
static struct pyfixture elsewhere; /* where a redirect points */
static char *logbuf;
static size_t loglen;

static const char *const aws_vars[] = {
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_PROFILE",
	"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_WEB_IDENTITY_TOKEN_FILE",
	"AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL",
	"AWS_ENDPOINT_URL_STS", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
	"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_DISABLED",
};

static void capture(enum dv_log_level level, const char *line)
{
	size_t n = strlen(line);

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

static void setup(void)
{
	for (size_t i = 0; i < sizeof(aws_vars) / sizeof(aws_vars[0]); i++)
		unsetenv(aws_vars[i]);
	home = dv_test_tmpdir("awshome");
	setenv("HOME", home, 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	dv_log_set_level(DV_LOG_DEBUG);
	dv_log_set_sink(capture);
	fx.pid = 0;
	elsewhere.pid = 0;
}

static void teardown(void)
{
	pyfixture_stop(&fx);
	pyfixture_stop(&elsewhere);
	dv_log_set_sink(NULL);
	dv_test_rmtree(home);
	free(home);
	free(logbuf);
	logbuf = NULL;
	loglen = 0;
}

static void write_home(const char *rel, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/.aws", home);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/%s", home, rel);
	dv_test_write_file(path, text, strlen(text));
}

static void start_fixture(const char *const *args)
{
	pyfixture_start(&fx, "aws_fixture.py", args);
}

static char *fixture_url(const char *path)
{
	char *url;

	ck_assert_int_gt(asprintf(&url, "http://127.0.0.1:%d%s", fx.port, path), 0);
	return url;
}

static struct dv_aws_chain *chain(void)
{
	struct dv_aws_chain *c = NULL;

	ck_assert_int_eq(dv_aws_chain_new(NULL, &c), 0);
	return c;
}

/* Gets credentials; returns the result and fills *@out. */
static int get(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	memset(out, 0, sizeof(*out));
	return dv_aws_chain_get(c, out);
}

/* No secret handed out in this test may be in any log line. */
static void assert_no_secret_logged(const struct dv_aws_creds *cr)
{
	ck_assert_msg(!cr->secret_key[0] || !logged(cr->secret_key),
		      "secret key logged:\n%s", logbuf);
	ck_assert_msg(!cr->session_token[0] || !logged(cr->session_token),
		      "session token logged:\n%s", logbuf);
	ck_assert(!logged("SECRET"));
	ck_assert(!logged("TOKEN0"));
	ck_assert(!logged(WEB_TOKEN));
	ck_assert(!logged(ECS_AUTH));
	ck_assert(!logged("IMDSSESSION"));
}

/* ---- environment and files ---- */

START_TEST(test_env)
{
	struct dv_aws_chain *c = chain();
	struct dv_aws_creds cr;

	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "env/secret+key", 1);
	setenv("AWS_SESSION_TOKEN", "envtoken==", 1);
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "AKIDENV");
	ck_assert_str_eq(cr.secret_key, "env/secret+key");
	ck_assert_str_eq(cr.session_token, "envtoken==");
	ck_assert_int_eq(cr.expiration, 0);
	ck_assert_str_eq(cr.source, "environment");
	assert_no_secret_logged(&cr);
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_env_beats_files_and_partial_env_is_ignored)
{
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;

	write_home(".aws/credentials",
		   "[default]\naws_access_key_id = AKIDFILE\naws_secret_access_key = filesecret\n");
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "AKIDENV");
	dv_aws_chain_free(c);

	unsetenv("AWS_SECRET_ACCESS_KEY");
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "AKIDFILE");
	ck_assert_str_eq(cr.secret_key, "filesecret");
	ck_assert_str_eq(cr.session_token, "");
	ck_assert_str_eq(cr.source, "shared credentials file");
	ck_assert(logged("AWS_SECRET_ACCESS_KEY is not"));
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_shared_files_profiles_and_region)
{
	char path[512], region[64];
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;

	write_home(".aws/credentials",
		   "# comment\n[default]\naws_access_key_id=AKIDDEFAULT\naws_secret_access_key=s1\n\n"
		   "[team]\naws_access_key_id   =   AKIDTEAM  \naws_secret_access_key = team/secret\n"
		   "aws_session_token = teamtoken\ns3 =\n  max_concurrent_requests = 4\n");
	write_home(".aws/config",
		   "[default]\nregion = eu-west-1\n[profile team]\nregion = ap-south-1\n"
		   "[profile cfgonly]\naws_access_key_id = AKIDCFG\naws_secret_access_key = cfgsecret\n");
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "AKIDDEFAULT");
	ck_assert_int_eq(dv_aws_region(region, sizeof(region)), 0);
	ck_assert_str_eq(region, "eu-west-1");
	dv_aws_chain_free(c);

	setenv("AWS_PROFILE", "team", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "AKIDTEAM");
	ck_assert_str_eq(cr.secret_key, "team/secret");
	ck_assert_str_eq(cr.session_token, "teamtoken");
	ck_assert_int_eq(dv_aws_region(region, sizeof(region)), 0);
	ck_assert_str_eq(region, "ap-south-1");
	setenv("AWS_DEFAULT_REGION", "us-west-2", 1);
	ck_assert_int_eq(dv_aws_region(region, sizeof(region)), 0);
	ck_assert_str_eq(region, "us-west-2");
	setenv("AWS_REGION", "ca-central-1", 1);
	ck_assert_int_eq(dv_aws_region(region, sizeof(region)), 0);
	ck_assert_str_eq(region, "ca-central-1");
	dv_aws_chain_free(c);

	/* Static keys in the config file's profile. */
	setenv("AWS_PROFILE", "cfgonly", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "AKIDCFG");
	ck_assert_str_eq(cr.source, "config file");
	dv_aws_chain_free(c);

	/* Files named by the environment. */
	snprintf(path, sizeof(path), "%s/elsewhere", home);
	{ const char *t = "[x]\naws_access_key_id=AKIDX\naws_secret_access_key=sx\n"; dv_test_write_file(path, t, strlen(t)); }
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_PROFILE", "x", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "AKIDX");
	assert_no_secret_logged(&cr);
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_nothing_found)
{
	struct dv_aws_chain *c = chain();
	struct dv_aws_creds cr;
	char region[64];

	ck_assert_int_eq(get(c, &cr), -ENOKEY);
	ck_assert(logged("no AWS credentials found"));
	/* Remembered for a while: no second walk, no second log line. */
	free(logbuf);
	logbuf = NULL;
	loglen = 0;
	ck_assert_int_eq(get(c, &cr), -ENOKEY);
	ck_assert(!logged("no AWS credentials found"));
	ck_assert_int_eq(dv_aws_region(region, sizeof(region)), -ENOENT);
	dv_aws_chain_free(c);
}
END_TEST

/* ---- web identity through STS ---- */

static void web_identity_env(const char *token)
{
	char path[512], *url;

	snprintf(path, sizeof(path), "%s/token", home);
	dv_test_write_file(path, token, strlen(token));
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", path, 1);
	setenv("AWS_ROLE_ARN", ROLE, 1);
	url = fixture_url("");
	setenv("AWS_ENDPOINT_URL_STS", url, 1);
	free(url);
}

START_TEST(test_web_identity)
{
	const char *args[] = { "--token", WEB_TOKEN, "--role", ROLE,
			       "--session", "train-job-7", NULL };
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	time_t now = time(NULL);

	start_fixture(args);
	web_identity_env(WEB_TOKEN "\n");
	setenv("AWS_ROLE_SESSION_NAME", "train-job-7", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIASTS0001");
	ck_assert_str_eq(cr.secret_key, "STSSECRET/0001+key");
	ck_assert_str_eq(cr.session_token, "STSTOKEN0001/+=tok");
	ck_assert_str_eq(cr.source, "web identity (STS)");
	ck_assert_int_ge(cr.expiration, now + 3500);
	ck_assert_int_le(cr.expiration, now + 3700);
	/* Cached: a second get asks nobody. */
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_int_eq(pyfixture_count(&fx, "sts ok"), 1);
	assert_no_secret_logged(&cr);
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_web_identity_generic_endpoint_and_refusal)
{
	const char *args[] = { "--token", WEB_TOKEN, "--role", ROLE, NULL };
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	char *url;

	start_fixture(args);
	web_identity_env(WEB_TOKEN);
	unsetenv("AWS_ENDPOINT_URL_STS");
	url = fixture_url("");
	setenv("AWS_ENDPOINT_URL", url, 1); /* the generic override */
	free(url);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIASTS0001");
	dv_aws_chain_free(c);

	/* A token STS does not accept: an auth error, not "no credentials". */
	web_identity_env("eyJ.WRONG.token");
	c = chain();
	ck_assert_int_eq(get(c, &cr), -EACCES);
	ck_assert_int_eq(pyfixture_count(&fx, "sts refused: token"), 1);
	ck_assert(logged("STS AssumeRoleWithWebIdentity"));
	ck_assert(logged("HTTP 403 (AccessDenied)"));
	ck_assert(!logged("eyJ.WRONG.token"));
	dv_aws_chain_free(c);
}
END_TEST

/* ---- ECS container credentials ---- */

START_TEST(test_ecs_full_uri_with_token)
{
	const char *args[] = { "--auth", ECS_AUTH, NULL };
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	char path[512], *url;

	start_fixture(args);
	url = fixture_url("/ecs/v2/credentials/abc");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	free(url);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH, 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0001");
	ck_assert_str_eq(cr.session_token, "ECSTOKEN0001/+=tok");
	ck_assert_str_eq(cr.source, "ECS container credentials");
	ck_assert_int_gt(cr.expiration, time(NULL));
	dv_aws_chain_free(c);

	/* The token file wins over the variable (EKS Pod Identity). */
	snprintf(path, sizeof(path), "%s/ecs-token", home);
	dv_test_write_file(path, ECS_AUTH "\n", strlen(ECS_AUTH) + 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", path, 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0002");
	dv_aws_chain_free(c);

	unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	c = chain();
	ck_assert_int_eq(get(c, &cr), -EACCES);
	ck_assert_int_eq(pyfixture_count(&fx, "ecs refused: authorization"), 1);
	ck_assert_int_eq(pyfixture_count(&fx, "ecs ok"), 2);
	assert_no_secret_logged(&cr);
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_ecs_relative_uri)
{
	char host[64];
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;

	start_fixture(NULL);
	setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/ecs/v2/credentials/task", 1);
	c = chain();
	snprintf(host, sizeof(host), "127.0.0.1:%d", fx.port);
	dv_aws_chain_set_ecs_host(c, host);
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0001");
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_ecs_full_uri_must_be_local_or_https)
{
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;

	/* Refused before any request is made. */
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.10/creds", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), -EINVAL);
	ck_assert(logged("must be https"));
	dv_aws_chain_free(c);
}
END_TEST

/* ---- IMDSv2 ---- */

START_TEST(test_imds_v2)
{
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	char *url;

	start_fixture(NULL);
	url = fixture_url("/");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url, 1);
	free(url);
	unsetenv("AWS_EC2_METADATA_DISABLED");
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAIMDS0001");
	ck_assert_str_eq(cr.secret_key, "IMDSSECRET/0001+key");
	ck_assert_str_eq(cr.source, "EC2 instance metadata");
	/* The session token was asked for, then sent with both GETs. */
	ck_assert_int_eq(pyfixture_count(&fx, "imds-token ok"), 1);
	ck_assert_int_eq(pyfixture_count(&fx, "imds-role ok"), 1);
	ck_assert_int_eq(pyfixture_count(&fx, "imds-creds ok"), 1);
	ck_assert_int_eq(pyfixture_count(&fx, "refused"), 0);
	assert_no_secret_logged(&cr);
	dv_aws_chain_free(c);

	/* Disabled: not even asked. */
	setenv("AWS_EC2_METADATA_DISABLED", "TRUE", 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), -ENOKEY);
	ck_assert_int_eq(pyfixture_count(&fx, "imds-token ok"), 1);
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_imds_absent_ends_the_chain)
{
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;

	start_fixture(NULL);
	pyfixture_stop(&fx); /* a port nobody listens on any more */
	{
		char *url = fixture_url("");

		setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url, 1);
		free(url);
	}
	unsetenv("AWS_EC2_METADATA_DISABLED");
	c = chain();
	ck_assert_int_eq(get(c, &cr), -ENOKEY);
	dv_aws_chain_free(c);
}
END_TEST

/* ---- redirects ---- */

/*
 * Each token service answers 307 to another listener that would accept
 * the request: the chain must not follow, so that the web identity token
 * (in STS's body), the container authorization token and the IMDS session
 * token never reach it. The other listener counts every request it gets.
 */
START_TEST(test_token_services_do_not_follow_redirects)
{
	const char *target[] = { "--auth", ECS_AUTH, "--token", WEB_TOKEN, NULL };
	const char *args[] = { "--redirect", NULL, NULL };
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	char there[64], *url;

	pyfixture_start(&elsewhere, "aws_fixture.py", target);
	snprintf(there, sizeof(there), "http://127.0.0.1:%d", elsewhere.port);
	args[1] = there;
	start_fixture(args);

	/* STS: a POST whose body holds the web identity token. */
	web_identity_env(WEB_TOKEN);
	c = chain();
	ck_assert_int_eq(get(c, &cr), -EIO);
	dv_aws_chain_free(c);
	ck_assert_int_eq(pyfixture_count(&fx, "sts redirected"), 1);
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	unsetenv("AWS_ROLE_ARN");

	/* ECS: the Authorization header. */
	url = fixture_url("/ecs/creds");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	free(url);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH, 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), -EIO);
	dv_aws_chain_free(c);
	ck_assert_int_eq(pyfixture_count(&fx, "ecs redirected"), 1);
	ck_assert_int_eq(pyfixture_count(&fx, "secret-header Authorization"), 1);
	unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN");

	/* IMDSv2: the session token header on the role GET. */
	url = fixture_url("/");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", url, 1);
	free(url);
	unsetenv("AWS_EC2_METADATA_DISABLED");
	c = chain();
	ck_assert_int_eq(get(c, &cr), -ENOKEY);
	dv_aws_chain_free(c);
	ck_assert_int_eq(pyfixture_count(&fx, "imds-token ok"), 1);
	ck_assert_int_eq(pyfixture_count(&fx, "imds redirected"), 1);
	ck_assert_int_eq(pyfixture_count(&fx,
					 "secret-header X-aws-ec2-metadata-token"), 1);

	/* Nothing reached the other listener: no request, no secret. */
	ck_assert_int_eq(pyfixture_count(&elsewhere, "request "), 0);
	ck_assert_int_eq(pyfixture_count(&elsewhere, "secret-header"), 0);
	ck_assert(!logged(WEB_TOKEN));
	ck_assert(!logged(ECS_AUTH));
	ck_assert(!logged("IMDSSESSION"));
}
END_TEST

/* ---- refresh ---- */

static time_t fake_now;

static time_t fake_clock(void)
{
	return fake_now;
}

START_TEST(test_refresh_before_expiry)
{
	const char *args[] = { "--auth", ECS_AUTH, "--expires-in", "3600", NULL };
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	time_t exp;
	char *url;

	start_fixture(args);
	url = fixture_url("/ecs/creds");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	free(url);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH, 1);
	c = chain();
	fake_now = time(NULL);
	dv_aws_chain_set_clock(c, fake_clock);
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0001");
	exp = cr.expiration;

	/* Well before the refresh window: the cache answers. */
	fake_now = exp - 3 * DV_AWS_REFRESH_AHEAD;
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0001");
	ck_assert_int_eq(pyfixture_count(&fx, "ecs ok"), 1);

	/* Inside the window (5 minutes before Expiration): refreshed. */
	fake_now = exp - DV_AWS_REFRESH_AHEAD + 1;
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0002");
	ck_assert_int_eq(pyfixture_count(&fx, "ecs ok"), 2);

	/* A refresh that fails keeps the old ones until they expire. */
	exp = cr.expiration;
	pyfixture_stop(&fx);
	fake_now = exp - 60;
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0002");
	ck_assert(logged("refresh failed"));
	fake_now = exp + 1;
	ck_assert_int_ne(get(c, &cr), 0);
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_invalidate)
{
	const char *args[] = { "--auth", ECS_AUTH, NULL };
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	char *url;

	start_fixture(args);
	url = fixture_url("/ecs/creds");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	free(url);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", ECS_AUTH, 1);
	c = chain();
	ck_assert_int_eq(get(c, &cr), 0);
	dv_aws_chain_invalidate(c);
	ck_assert_int_eq(get(c, &cr), 0);
	ck_assert_str_eq(cr.access_key, "ASIAECS0002");
	dv_aws_chain_free(c);
}
END_TEST

START_TEST(test_parse_helpers_reject_garbage)
{
	const char *args[] = { NULL };
	struct dv_aws_chain *c;
	struct dv_aws_creds cr;
	char *url;

	/* A "credentials" URL that answers something else entirely. */
	start_fixture(args);
	url = fixture_url("/_log");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	free(url);
	c = chain();
	ck_assert_int_eq(get(c, &cr), -EPROTO);
	ck_assert(logged("without usable credentials"));
	dv_aws_chain_free(c);
}
END_TEST

static Suite *aws_creds_suite(void)
{
	Suite *s = suite_create("aws_creds");
	TCase *tc = tcase_create("local");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_env);
	tcase_add_test(tc, test_env_beats_files_and_partial_env_is_ignored);
	tcase_add_test(tc, test_shared_files_profiles_and_region);
	tcase_add_test(tc, test_nothing_found);
	suite_add_tcase(s, tc);
	tc = tcase_create("services");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_web_identity);
	tcase_add_test(tc, test_web_identity_generic_endpoint_and_refusal);
	tcase_add_test(tc, test_ecs_full_uri_with_token);
	tcase_add_test(tc, test_ecs_relative_uri);
	tcase_add_test(tc, test_ecs_full_uri_must_be_local_or_https);
	tcase_add_test(tc, test_imds_v2);
	tcase_add_test(tc, test_imds_absent_ends_the_chain);
	tcase_add_test(tc, test_token_services_do_not_follow_redirects);
	tcase_add_test(tc, test_refresh_before_expiry);
	tcase_add_test(tc, test_invalidate);
	tcase_add_test(tc, test_parse_helpers_reject_garbage);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(aws_creds_suite());
}
