/*
 * The azure_blob tier's pieces that need no Azurite (the integration tests
 * t_azure_*.sh use Azurite, which verifies signatures; Shared Key itself
 * is test_azure_sign.c's):
 *
 *   - keys, SAS tokens, connection strings, container URLs;
 *   - the token services' JSON answers;
 *   - the credential order, and each token source against
 *     tests/unit/azure_fixture.py, which checks every request the way the
 *     real service needs it (form fields, client_assertion, Metadata
 *     header, client_id, api-version) and logs what it saw;
 *   - token caching and refresh; refusals are -EACCES; nothing secret is
 *     logged at debug level; creating the tier makes no request.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/azure/azure.h"
#include "tiers/azure/azure_creds.h"
#include "tiers/azure/azure_sign.h"
#include "tiers/azure/azure_token.h"
#include "tiers/net/http.h"
#include "helpers.h"

#define WELL_KNOWN_KEY                                                      \
	"Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"  \
	"K1SZFPTOtr/KBHBeksoGMGw=="
#define OTHER_KEY "c2VjcmV0LWtleS1ieXRlcy1mb3ItYS10ZXN0LTAxMjM0NTY3ODk="
#define SECRET "s3cr3t-Client-Secret~value"
#define FEDERATED "eyJhbGciOiJSUzI1NiJ9.federated-token-one.sig"
#define ID_HEADER "identity-header-secret-4711"
#define HASH "0123456789abcdef0123456789abcdef"

static const struct dv_http_config test_http = {
	.connect_timeout = 5, .low_speed_time = 10, .low_speed_limit = 1,
	.retries = 1,
};

/* ---- helpers ---- */

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

static void clear_env(void)
{
	static const char *const vars[] = {
		"AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT",
		"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_SAS_TOKEN",
		"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET",
		"AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST",
		"IDENTITY_ENDPOINT", "IDENTITY_HEADER",
		"AZURE_POD_IDENTITY_AUTHORITY_HOST", "AZ_KEY", "AZ_ACCOUNT",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	/* Never the real metadata address, whatever a test forgets. */
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:9", 1);
}

/* Every log line, for the no-secrets checks. */
static char logbuf[1 << 16];
static size_t loglen;

static void capture(enum dv_log_level level, const char *line)
{
	int n = snprintf(logbuf + loglen, sizeof(logbuf) - loglen, "%s\n", line);

	if (n > 0 && (size_t)n < sizeof(logbuf) - loglen)
		loglen += (size_t)n;
}

static void capture_logs(void)
{
	loglen = 0;
	logbuf[0] = '\0';
	dv_log_set_sink(capture);
	dv_log_set_level(DV_LOG_DEBUG);
}

static void assert_not_logged(const char *secret)
{
	ck_assert_msg(strstr(logbuf, secret) == NULL,
		      "a secret was logged:\n%s", logbuf);
}

START_TEST(test_keys_and_strings)
{
	struct dv_az_key k;
	struct dv_az_connstr cs;
	char *s = NULL, date[64];

	ck_assert_int_eq(dv_az_key_init(&k, "a", WELL_KNOWN_KEY), 0);
	ck_assert_uint_eq(k.keylen, 64);
	dv_az_key_wipe(&k);
	ck_assert_int_eq(dv_az_key_init(&k, "a", "not base64!"), -EINVAL);
	ck_assert_int_eq(dv_az_key_init(&k, "a", "abc"), -EINVAL);
	ck_assert_int_eq(dv_az_key_init(&k, "", WELL_KNOWN_KEY), -EINVAL);

	ck_assert_int_eq(dv_az_sas_clean(" ?sv=2021&sig=a%2Bb ", &s), 0);
	ck_assert_str_eq(s, "sv=2021&sig=a%2Bb");
	dv_az_free_secret(s);
	ck_assert_int_eq(dv_az_sas_clean("?", &s), -EINVAL);
	ck_assert_int_eq(dv_az_sas_clean("sv=1 2", &s), -EINVAL);
	ck_assert_int_eq(dv_az_sas_clean("sv=1#x", &s), -EINVAL);

	ck_assert_int_eq(dv_az_connstr_parse(
		"DefaultEndpointsProtocol=http;accountname=dev1;AccountKey=" WELL_KNOWN_KEY
		";BlobEndpoint=http://127.0.0.1:10000/dev1;", &cs), 0);
	ck_assert_str_eq(cs.account, "dev1");
	ck_assert_str_eq(cs.key, WELL_KNOWN_KEY);
	ck_assert_ptr_null(cs.sas);
	dv_az_connstr_release(&cs);
	ck_assert_int_eq(dv_az_connstr_parse("SharedAccessSignature=sv=1&sig=x", &cs), 0);
	ck_assert_str_eq(cs.sas, "sv=1&sig=x");
	dv_az_connstr_release(&cs);
	ck_assert_int_eq(dv_az_connstr_parse("garbage", &cs), -EINVAL);

	s = dv_az_url_encode("team a/b+c~", true);
	ck_assert_str_eq(s, "team%20a/b%2Bc~");
	free(s);
	dv_az_http_date(784111777, date, sizeof(date));
	ck_assert_str_eq(date, "Sun, 06 Nov 1994 08:49:37 GMT");
}
END_TEST

START_TEST(test_url_account)
{
	static const struct {
		const char *url, *account;
	} cases[] = {
		{ "https://datavoeastus.blob.core.windows.net/shards", "datavoeastus" },
		{ "https://acct.blob.core.chinacloudapi.cn/c?sv=1", "acct" },
		{ "http://127.0.0.1:10000/devstoreaccount1/shards", "devstoreaccount1" },
		{ "http://localhost:10000/acct2/c/", "acct2" },
		{ "http://[::1]:10000/acct3/c", "acct3" },
		{ "https://cdn.example.com/shards", NULL },
	};
	char *a;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(dv_azure_url_account(cases[i].url, &a), 0);
		if (cases[i].account)
			ck_assert_str_eq(a, cases[i].account);
		else
			ck_assert_ptr_null(a);
		free(a);
	}
}
END_TEST

/* ---- token answers ---- */

START_TEST(test_token_parse)
{
	struct dv_az_token t;
	char why[256];
	const char *s;

	s = "{\"token_type\":\"Bearer\",\"expires_in\":3599,\"ext_expires_in\":3599,\"access_token\":\"eyJ0.a\\/b+c\"}";
	ck_assert_int_eq(dv_az_token_parse(s, strlen(s), 1000, &t, why, sizeof(why)), 0);
	ck_assert_str_eq(t.access_token, "eyJ0.a/b+c");
	ck_assert_int_eq(t.expires, 1000 + 3599);
	dv_az_token_release(&t);

	/* IMDS: numbers as strings, nested values skipped */
	s = "{\"access_token\":\"tok\",\"client_id\":\"x\",\"expires_in\":\"86399\",\"expires_on\":\"1700000000\",\"extra\":{\"a\":[1,{\"b\":2}]},\"resource\":\"https://storage.azure.com\"}";
	ck_assert_int_eq(dv_az_token_parse(s, strlen(s), 1000, &t, why, sizeof(why)), 0);
	ck_assert_int_eq(t.expires, 1000 + 86399);
	dv_az_token_release(&t);

	/* App Service: expires_on only */
	s = "{\"access_token\":\"tok\",\"expires_on\":1700000000,\"token_type\":\"Bearer\"}";
	ck_assert_int_eq(dv_az_token_parse(s, strlen(s), 1000, &t, why, sizeof(why)), 0);
	ck_assert_int_eq(t.expires, 1700000000);
	dv_az_token_release(&t);

	s = "{\"error\":\"invalid_client\",\"error_description\":\"AADSTS7000215: bad\\nsecret\"}";
	ck_assert_int_eq(dv_az_token_parse(s, strlen(s), 1000, &t, why, sizeof(why)), -EPROTO);
	ck_assert_str_eq(why, "invalid_client: AADSTS7000215: bad?secret");
	s = "{\"access_token\":\"tok\"}";
	ck_assert_int_eq(dv_az_token_parse(s, strlen(s), 1000, &t, why, sizeof(why)), -EPROTO);
	s = "[1, 2]";
	ck_assert_int_eq(dv_az_token_parse(s, strlen(s), 1000, &t, why, sizeof(why)), -EPROTO);
	s = "{\"access_token\": \"unterminated";
	ck_assert_int_eq(dv_az_token_parse(s, strlen(s), 1000, &t, why, sizeof(why)), -EPROTO);
	ck_assert_ptr_null(t.access_token);
}
END_TEST

/* ---- credential order (no network) ---- */

static struct dv_az_creds *creds(const char *sas, const char *account,
				 const char *mi)
{
	struct dv_az_creds_opts o = {
		.tier = "region", .sas_token = sas, .account = account,
		.mi_client_id = mi, .http = &test_http,
	};
	struct dv_az_creds *c = NULL;

	ck_assert_int_eq(dv_az_creds_new(&o, &c), 0);
	return c;
}

static void expect_kind(struct dv_az_creds *c, enum dv_az_auth_kind kind,
			const char *what)
{
	struct dv_az_auth a;
	char buf[256];

	ck_assert_int_eq(dv_az_creds_get(c, &a), 0);
	ck_assert_int_eq(a.kind, kind);
	ck_assert_str_eq(dv_az_creds_describe(c, buf, sizeof(buf)), what);
	dv_az_auth_release(&a);
}

START_TEST(test_creds_order)
{
	struct dv_az_creds *c;
	struct dv_az_auth a;

	clear_env();
	capture_logs();
	setenv("AZURE_STORAGE_KEY", WELL_KNOWN_KEY, 1);
	setenv("AZURE_STORAGE_SAS_TOKEN", "sv=env&sig=envsig", 1);

	/* sas_token in the config wins over everything */
	c = creds("?sv=cfg&sig=cfgsig", "devstoreaccount1", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), 0);
	ck_assert_int_eq(a.kind, DV_AZ_AUTH_SAS);
	ck_assert_str_eq(a.sas, "sv=cfg&sig=cfgsig");
	dv_az_auth_release(&a);
	dv_az_creds_free(c);

	c = creds(NULL, "devstoreaccount1", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), 0);
	ck_assert_int_eq(a.kind, DV_AZ_AUTH_SHARED_KEY);
	ck_assert_str_eq(a.key->account, "devstoreaccount1");
	ck_assert_uint_eq(a.key->keylen, 64);
	dv_az_auth_release(&a);
	dv_az_creds_free(c);

	/* no account in the URL: AZURE_STORAGE_ACCOUNT, else refused */
	c = creds(NULL, NULL, NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EACCES);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EACCES);
	dv_az_creds_free(c);
	ck_assert_ptr_nonnull(strstr(logbuf, "AZURE_STORAGE_ACCOUNT"));
	setenv("AZURE_STORAGE_ACCOUNT", "custom1", 1);
	c = creds(NULL, NULL, NULL);
	expect_kind(c, DV_AZ_AUTH_SHARED_KEY,
		    "Shared Key (AZURE_STORAGE_KEY, account 'custom1')");
	dv_az_creds_free(c);

	setenv("AZURE_STORAGE_KEY", "%%%not-a-key", 1);
	c = creds(NULL, "acct", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EACCES);
	dv_az_creds_free(c);
	assert_not_logged("%%%not-a-key");

	unsetenv("AZURE_STORAGE_KEY");
	setenv("AZURE_STORAGE_CONNECTION_STRING",
	       "DefaultEndpointsProtocol=https;AccountName=fromcs;AccountKey=" OTHER_KEY
	       ";EndpointSuffix=core.windows.net", 1);
	c = creds(NULL, "acct", NULL);
	expect_kind(c, DV_AZ_AUTH_SHARED_KEY,
		    "Shared Key (AZURE_STORAGE_CONNECTION_STRING, account 'fromcs')");
	dv_az_creds_free(c);
	setenv("AZURE_STORAGE_CONNECTION_STRING",
	       "BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=sv=cs&sig=cssig", 1);
	c = creds(NULL, "acct", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), 0);
	ck_assert_str_eq(a.sas, "sv=cs&sig=cssig");
	dv_az_auth_release(&a);
	dv_az_creds_free(c);

	unsetenv("AZURE_STORAGE_CONNECTION_STRING");
	c = creds(NULL, "acct", NULL);
	expect_kind(c, DV_AZ_AUTH_SAS, "SAS token (AZURE_STORAGE_SAS_TOKEN)");
	dv_az_creds_free(c);
	assert_not_logged("envsig");
	assert_not_logged("cssig");
	assert_not_logged("cfgsig");
	assert_not_logged(WELL_KNOWN_KEY);
	assert_not_logged(OTHER_KEY);
}
END_TEST

START_TEST(test_creds_authority_must_be_https)
{
	struct dv_az_creds *c;
	struct dv_az_auth a;

	clear_env();
	capture_logs();
	setenv("AZURE_TENANT_ID", "tenant-1", 1);
	setenv("AZURE_CLIENT_ID", "client-1", 1);
	setenv("AZURE_CLIENT_SECRET", SECRET, 1);
	setenv("AZURE_AUTHORITY_HOST", "http://login.example.com", 1);
	c = creds(NULL, "acct", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EACCES);
	dv_az_creds_free(c);
	ck_assert_ptr_nonnull(strstr(logbuf, "AZURE_AUTHORITY_HOST must be an https URL"));
	setenv("AZURE_TENANT_ID", "../evil", 1);
	setenv("AZURE_AUTHORITY_HOST", "https://login.example.com", 1);
	c = creds(NULL, "acct", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EACCES);
	dv_az_creds_free(c);
	assert_not_logged(SECRET);
}
END_TEST

/* ---- token sources, against azure_fixture.py ---- */

static pid_t fixture_pid;
static int fixture_port;
static char fixture_url[64];

static void start_fixture(const char *const *args)
{
	char script[PATH_MAX + 32], dir[PATH_MAX], line[32];
	char *argv[20];
	size_t n = 0;
	int pfd[2];
	FILE *f;

	src_dir(dir, sizeof(dir));
	snprintf(script, sizeof(script), "%s/azure_fixture.py", dir);
	argv[n++] = (char *)"python3";
	argv[n++] = script;
	for (size_t i = 0; args && args[i]; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	ck_assert_int_eq(pipe(pfd), 0);
	fixture_pid = fork();
	ck_assert_int_ge(fixture_pid, 0);
	if (fixture_pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	fixture_port = atoi(line);
	ck_assert_int_gt(fixture_port, 0);
	snprintf(fixture_url, sizeof(fixture_url), "http://127.0.0.1:%d",
		 fixture_port);
}

static void stop_fixture(void)
{
	if (fixture_pid > 0) {
		kill(fixture_pid, SIGKILL);
		waitpid(fixture_pid, NULL, 0);
		fixture_pid = 0;
	}
}

/* The fixture's request log (malloc'd). */
static char *fixture_log(void)
{
	struct dv_http h;
	struct dv_http_buf b;
	struct dv_http_response resp;
	char url[96], *out;
	size_t len;

	snprintf(url, sizeof(url), "%s/_log", fixture_url);
	ck_assert_int_eq(dv_http_init(&h, NULL), 0);
	dv_http_buf_init(&b, 1 << 20);
	ck_assert_int_eq(dv_http_perform(&h, &(struct dv_http_request){
		.url = url, .on_body = dv_http_buf_append, .arg = &b }, &resp), 0);
	ck_assert_int_eq(resp.status, 200);
	ck_assert_int_eq(dv_http_buf_take(&b, &out, &len), 0);
	dv_http_release(&h);
	return out;
}

static void expect_fixture_log(const char *want)
{
	char *log = fixture_log();

	ck_assert_msg(strcmp(log, want) == 0, "fixture log:\n%s\nexpected:\n%s",
		      log, want);
	free(log);
}

static void expect_bearer(struct dv_az_creds *c, const char *token)
{
	struct dv_az_auth a;
	char want[128];

	ck_assert_int_eq(dv_az_creds_get(c, &a), 0);
	ck_assert_int_eq(a.kind, DV_AZ_AUTH_BEARER);
	snprintf(want, sizeof(want), "Authorization: Bearer %s", token);
	ck_assert_str_eq(a.header, want);
	dv_az_auth_release(&a);
}

START_TEST(test_token_client_secret)
{
	const char *args[] = { "tenant=tenant-1", "client_id=client-1",
			       "secret=" SECRET, NULL };
	struct dv_az_creds *c;
	char buf[256];

	clear_env();
	capture_logs();
	start_fixture(args);
	setenv("AZURE_TENANT_ID", "tenant-1", 1);
	setenv("AZURE_CLIENT_ID", "client-1", 1);
	setenv("AZURE_CLIENT_SECRET", SECRET, 1);
	setenv("AZURE_AUTHORITY_HOST", fixture_url, 1);
	c = creds(NULL, "acct", "ignored-mi-id");
	expect_bearer(c, "tok-secret-1");
	expect_bearer(c, "tok-secret-1"); /* cached */
	ck_assert_str_eq(dv_az_creds_describe(c, buf, sizeof(buf)),
			 "bearer token (environment client secret, tenant 'tenant-1', client 'client-1')");
	dv_az_creds_free(c);
	expect_fixture_log("OK secret\n");
	assert_not_logged(SECRET);
	assert_not_logged("tok-secret-1");
	stop_fixture();
}
END_TEST

START_TEST(test_token_workload_identity)
{
	char *dir = dv_test_tmpdir("azwi");
	char file[PATH_MAX], afile[PATH_MAX + 16];
	const char *args[] = { "tenant=tenant-2", "client_id=wi-client",
			       afile, "ttl=4", NULL };
	struct dv_az_creds *c;

	clear_env();
	capture_logs();
	snprintf(file, sizeof(file), "%s/token", dir);
	snprintf(afile, sizeof(afile), "assertion_file=%s", file);
	dv_test_write_file(file, FEDERATED "\n", strlen(FEDERATED) + 1);
	start_fixture(args);
	setenv("AZURE_TENANT_ID", "tenant-2", 1);
	setenv("AZURE_CLIENT_ID", "wi-client", 1);
	setenv("AZURE_FEDERATED_TOKEN_FILE", file, 1);
	setenv("AZURE_AUTHORITY_HOST", fixture_url, 1);
	c = creds(NULL, "acct", NULL);
	expect_bearer(c, "tok-workload-1");
	expect_bearer(c, "tok-workload-1");
	/* The kubelet rotates the file; a 4 s token is refreshed at 2 s. */
	dv_test_write_file(file, "rotated-federated-token", 23);
	sleep(3);
	expect_bearer(c, "tok-workload-2");
	dv_az_creds_free(c);
	expect_fixture_log("OK workload\nOK workload\n");
	assert_not_logged(FEDERATED);
	assert_not_logged("rotated-federated-token");
	assert_not_logged("tok-workload");
	stop_fixture();
	dv_test_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_token_imds_client_id)
{
	const char *args[] = { "mi_client_id=uami-1234", NULL };
	struct dv_az_creds *c;
	char buf[256], slash[96];

	clear_env();
	capture_logs();
	start_fixture(args);
	/* The SDK strips a trailing '/' from the authority host. */
	snprintf(slash, sizeof(slash), "%s/", fixture_url);
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", slash, 1);
	setenv("AZURE_CLIENT_ID", "not-this-one", 1);
	c = creds(NULL, "acct", "uami-1234");
	expect_bearer(c, "tok-imds-1");
	ck_assert_str_eq(dv_az_creds_describe(c, buf, sizeof(buf)),
			 "bearer token (managed identity (IMDS), client 'uami-1234')");
	dv_az_creds_free(c);
	expect_fixture_log("OK imds\n");
	stop_fixture();
}
END_TEST

START_TEST(test_token_imds_defaults)
{
	const char *sys_args[] = { NULL };
	const char *env_args[] = { "mi_client_id=from-env", NULL };
	struct dv_az_creds *c;

	clear_env();
	/* No client id anywhere: the system-assigned identity. */
	start_fixture(sys_args);
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", fixture_url, 1);
	c = creds(NULL, "acct", NULL);
	expect_bearer(c, "tok-imds-1");
	dv_az_creds_free(c);
	expect_fixture_log("OK imds\n");
	stop_fixture();

	/* As DefaultAzureCredential: AZURE_CLIENT_ID when not configured. */
	start_fixture(env_args);
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", fixture_url, 1);
	setenv("AZURE_CLIENT_ID", "from-env", 1);
	c = creds(NULL, "acct", NULL);
	expect_bearer(c, "tok-imds-1");
	dv_az_creds_free(c);
	expect_fixture_log("OK imds\n");
	stop_fixture();
}
END_TEST

START_TEST(test_token_app_service)
{
	const char *args[] = { "identity_header=" ID_HEADER,
			       "mi_client_id=app-mi", NULL };
	struct dv_az_creds *c;
	char ep[96];

	clear_env();
	capture_logs();
	start_fixture(args);
	snprintf(ep, sizeof(ep), "%s/msi/token", fixture_url);
	setenv("IDENTITY_ENDPOINT", ep, 1);
	setenv("IDENTITY_HEADER", ID_HEADER, 1);
	c = creds(NULL, "acct", "app-mi");
	expect_bearer(c, "tok-appservice-1");
	dv_az_creds_free(c);
	expect_fixture_log("OK appservice\n");
	assert_not_logged(ID_HEADER);
	stop_fixture();
}
END_TEST

START_TEST(test_token_refused_is_eacces)
{
	const char *args[] = { "tenant=t3", "client_id=c3", "secret=" SECRET,
			       "mode=refuse", NULL };
	struct dv_az_creds *c;
	struct dv_az_auth a;

	clear_env();
	capture_logs();
	start_fixture(args);
	setenv("AZURE_TENANT_ID", "t3", 1);
	setenv("AZURE_CLIENT_ID", "c3", 1);
	setenv("AZURE_CLIENT_SECRET", SECRET, 1);
	setenv("AZURE_AUTHORITY_HOST", fixture_url, 1);
	c = creds(NULL, "acct", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EACCES);
	/* Held for a few seconds: no second request. */
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EACCES);
	dv_az_creds_free(c);
	expect_fixture_log("REFUSED /t3/oauth2/v2.0/token\n");
	ck_assert_ptr_nonnull(strstr(logbuf, "refused by"));
	ck_assert_ptr_nonnull(strstr(logbuf, "AADSTS7000215"));
	assert_not_logged(SECRET);
	stop_fixture();
}
END_TEST

START_TEST(test_token_unreachable_is_eio)
{
	const char *args[] = { "mode=500", NULL };
	struct dv_az_creds *c;
	struct dv_az_auth a;

	clear_env();
	capture_logs();
	start_fixture(args);
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", fixture_url, 1);
	c = creds(NULL, "acct", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EIO);
	dv_az_creds_free(c);
	/* one retry (test_http.retries = 1) */
	expect_fixture_log("500 /metadata/identity/oauth2/token\n"
			   "500 /metadata/identity/oauth2/token\n");
	stop_fixture();

	/* nothing listening at all */
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", "http://127.0.0.1:9", 1);
	c = creds(NULL, "acct", NULL);
	ck_assert_int_eq(dv_az_creds_get(c, &a), -EIO);
	dv_az_creds_free(c);
}
END_TEST

/* ---- the tier: no request at creation, a bearer token on the wire ---- */

static struct dv_tier *tier_at(const char *container_url, const char *prefix)
{
	struct dv_tier_config tc = {
		.type = DV_TIER_TYPE_AZURE_BLOB, .name = (char *)"region",
		.container_url = (char *)container_url, .prefix = (char *)prefix,
	};
	struct dv_config cfg = { .http = test_http };
	struct dv_tier *t = NULL;
	char err[256];

	ck_assert_int_eq(dv_tier_new(&tc, &cfg, &t, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(t);
	ck_assert(dv_tier_has(t, DV_TIER_REMOTE));
	ck_assert(t->ops->open == NULL || t->ops->open(t) == 0);
	return t;
}

START_TEST(test_tier_bearer_on_the_wire)
{
	const char *args[] = { "blob_size=1000", NULL };
	struct dv_tier *t;
	char url[128];

	clear_env();
	capture_logs();
	start_fixture(args);
	setenv("AZURE_POD_IDENTITY_AUTHORITY_HOST", fixture_url, 1);
	snprintf(url, sizeof(url), "%s/devstoreaccount1/shards", fixture_url);
	t = tier_at(url, "/team-a//x/");
	expect_fixture_log(""); /* created and opened: nothing asked */
	ck_assert_int_eq(t->ops->lookup(t, HASH, 1000), 0);
	ck_assert_int_eq(t->ops->lookup(t, HASH, 999), -EBADMSG);
	dv_tier_free(t);
	expect_fixture_log("OK imds\n"
			   "OK blob HEAD /devstoreaccount1/shards/team-a/x/" HASH ".tar tok-imds-1\n"
			   "OK blob HEAD /devstoreaccount1/shards/team-a/x/" HASH ".tar tok-imds-1\n");
	assert_not_logged("tok-imds-1");
	stop_fixture();
}
END_TEST

START_TEST(test_tier_denied_is_eacces)
{
	const char *args[] = { NULL };
	struct dv_tier *t;
	char url[128];

	clear_env();
	capture_logs();
	start_fixture(args);
	setenv("AZURE_STORAGE_SAS_TOKEN", "sv=2021&sig=NOTVALIDSIG", 1);
	snprintf(url, sizeof(url), "%s/devstoreaccount1/shards", fixture_url);
	t = tier_at(url, NULL);
	ck_assert_int_eq(t->ops->lookup(t, HASH, 1000), -EACCES);
	dv_tier_free(t);
	expect_fixture_log("DENIED HEAD /devstoreaccount1/shards/" HASH ".tar\n");
	ck_assert_ptr_nonnull(strstr(logbuf, "access denied: HTTP 403 to HEAD"));
	ck_assert_ptr_nonnull(strstr(logbuf, "SAS token (AZURE_STORAGE_SAS_TOKEN)"));
	assert_not_logged("NOTVALIDSIG");
	stop_fixture();
}
END_TEST

START_TEST(test_tier_sas_in_url)
{
	const char *args[] = { NULL };
	struct dv_tier *t;
	char url[160];

	clear_env();
	capture_logs();
	start_fixture(args);
	setenv("AZURE_STORAGE_KEY", WELL_KNOWN_KEY, 1);
	snprintf(url, sizeof(url),
		 "%s/devstoreaccount1/shards/?sv=2021-08-06&sr=c&sig=URLSIG%%2B1",
		 fixture_url);
	t = tier_at(url, "p");
	/* The fixture wants a bearer token: the SAS is refused. */
	ck_assert_int_eq(t->ops->lookup(t, HASH, 1000), -EACCES);
	dv_tier_free(t);
	expect_fixture_log("DENIED HEAD /devstoreaccount1/shards/p/" HASH ".tar\n");
	ck_assert_ptr_nonnull(strstr(logbuf, "with SAS token (the query of container_url)"));
	ck_assert_ptr_nonnull(strstr(logbuf, "/devstoreaccount1/shards/p/" HASH ".tar with"));
	assert_not_logged("URLSIG");
	stop_fixture();
}
END_TEST

START_TEST(test_tier_bad_config)
{
	struct dv_tier_config tc = {
		.type = DV_TIER_TYPE_AZURE_BLOB, .name = (char *)"region",
		.container_url = (char *)"https://acct.blob.core.windows.net/",
	};
	struct dv_tier *t = NULL;
	char err[256];

	ck_assert_int_eq(dv_tier_new(&tc, NULL, &t, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "names no container"));
	tc.container_url = (char *)"https://acct.blob.core.windows.net/c";
	tc.prefix = (char *)"team a";
	ck_assert_int_eq(dv_tier_new(&tc, NULL, &t, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "prefix may hold only"));
	tc.prefix = (char *)"/a//b/";
	tc.endpoint = (char *)"http://127.0.0.1:1/devstoreaccount1";
	ck_assert_int_eq(dv_tier_new(&tc, NULL, &t, err, sizeof(err)), 0);
	dv_tier_free(t);
}
END_TEST

static Suite *azure_suite(void)
{
	Suite *s = suite_create("azure");
	TCase *tc = tcase_create("sign");

	tcase_add_test(tc, test_keys_and_strings);
	tcase_add_test(tc, test_url_account);
	tcase_add_test(tc, test_token_parse);
	tcase_add_test(tc, test_creds_order);
	tcase_add_test(tc, test_creds_authority_must_be_https);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);

	tc = tcase_create("tokens");
	tcase_add_checked_fixture(tc, NULL, stop_fixture);
	tcase_add_test(tc, test_token_client_secret);
	tcase_add_test(tc, test_token_workload_identity);
	tcase_add_test(tc, test_token_imds_client_id);
	tcase_add_test(tc, test_token_imds_defaults);
	tcase_add_test(tc, test_token_app_service);
	tcase_add_test(tc, test_token_refused_is_eacces);
	tcase_add_test(tc, test_token_unreachable_is_eio);
	tcase_add_test(tc, test_tier_bearer_on_the_wire);
	tcase_add_test(tc, test_tier_denied_is_eacces);
	tcase_add_test(tc, test_tier_sas_in_url);
	tcase_add_test(tc, test_tier_bad_config);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(azure_suite());
}
