/*
 * The GCS unit tests' fixture: tests/unit/gcs_fixture.py (Google's token
 * services and a GCS bucket, on 127.0.0.1, checking every request) in a
 * state directory that holds a throwaway RSA key pair made with the
 * openssl CLI (key.pem, pub.pem: the server verifies signatures with it;
 * other.pem: a key the server does not know) and the credential files
 * written from them. Started once per test case by PID, killed at teardown.
 *
 * Header-only (static functions) so that each test file includes it
 * without a new object in the Makefile's helper list.
 */
#ifndef DV_TEST_GCS_FIXTURE_H
#define DV_TEST_GCS_FIXTURE_H

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/log.h"
#include "tiers/net/http.h"
#include "helpers.h"

#define GF_EMAIL "loader@demo-project.iam.gserviceaccount.com"
#define GF_KEY_ID "0123456789abcdef0123456789abcdef01234567"
#define GF_CLIENT_ID "764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps.googleusercontent.com"
#define GF_CLIENT_SECRET "d-FL95Q19q7MQmFpd7hHD0Ty"
#define GF_REFRESH "1//0gSecretRefreshTokenDoNotLog-abcdefghijklmnop"

static char *gf_state;      /* the fixture's directory */
static int gf_port;
static pid_t gf_pid;

static void gf_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", gf_state, name);
}

static void gf_run(const char *cmd)
{
	ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

/* The PEM of @name, as a JSON string body ("\n" escaped). */
static char *gf_pem_json(const char *name)
{
	char path[PATH_MAX], *pem, *out, *p;
	size_t len;

	gf_path(path, sizeof(path), name);
	pem = dv_test_read_file(path, &len);
	ck_assert_ptr_nonnull(pem);
	out = malloc(2 * len + 1);
	ck_assert_ptr_nonnull(out);
	p = out;
	for (size_t i = 0; i < len; i++) {
		if (pem[i] == '\n') {
			*p++ = '\\';
			*p++ = 'n';
		} else {
			*p++ = pem[i];
		}
	}
	*p = '\0';
	free(pem);
	return out;
}

/* A service_account key file signed with @key (key.pem or other.pem). */
static void gf_write_sa(const char *name, const char *key,
			const char *token_uri)
{
	char path[PATH_MAX], *pem = gf_pem_json(key), *json;
	int n;

	n = asprintf(&json,
		     "{\n  \"type\": \"service_account\",\n"
		     "  \"project_id\": \"demo-project\",\n"
		     "  \"private_key_id\": \"%s\",\n"
		     "  \"private_key\": \"%s\",\n"
		     "  \"client_email\": \"%s\",\n"
		     "  \"client_id\": \"104230887634119012345\",\n"
		     "  \"auth_uri\": \"https://accounts.google.com/o/oauth2/auth\",\n"
		     "  \"token_uri\": \"%s\"\n}\n",
		     GF_KEY_ID, pem, GF_EMAIL, token_uri);
	ck_assert_int_gt(n, 0);
	gf_path(path, sizeof(path), name);
	dv_test_write_file(path, json, strlen(json));
	free(json);
	free(pem);
}

/* An authorized_user file (gcloud auth application-default login). */
static void gf_write_user(const char *path, const char *refresh)
{
	char *json;
	int n;

	n = asprintf(&json,
		     "{\"client_id\":\"%s\",\"client_secret\":\"%s\","
		     "\"refresh_token\":\"%s\",\"type\":\"authorized_user\","
		     "\"token_uri\":\"http://127.0.0.1:%d/token\"}",
		     GF_CLIENT_ID, GF_CLIENT_SECRET, refresh, gf_port);
	ck_assert_int_gt(n, 0);
	dv_test_write_file(path, json, strlen(json));
	free(json);
}

static void gf_script(char *buf, size_t len)
{
	const char *dir = getenv("DV_TEST_SRCDIR");
	const char *slash = strrchr(__FILE__, '/');

	if (dir)
		snprintf(buf, len, "%s/gcs_fixture.py", dir);
	else
		snprintf(buf, len, "%.*s/gcs_fixture.py",
			 slash ? (int)(slash - __FILE__) : 1,
			 slash ? __FILE__ : ".");
}

static void gf_start(void)
{
	char script[PATH_MAX], cmd[3 * PATH_MAX], line[32], path[PATH_MAX],
	     uri[64];
	int pfd[2];
	FILE *f;

	gf_state = dv_test_tmpdir("gcs");
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem 2>/dev/null"
		 " && openssl pkey -in key.pem -pubout -out pub.pem"
		 " && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out other.pem 2>/dev/null",
		 gf_state);
	gf_run(cmd);
	gf_script(script, sizeof(script));
	ck_assert_int_eq(access(script, R_OK), 0);
	ck_assert_int_eq(pipe(pfd), 0);
	gf_pid = fork();
	ck_assert_int_ge(gf_pid, 0);
	if (gf_pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		execlp("python3", "python3", script, gf_state, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	f = fdopen(pfd[0], "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	gf_port = atoi(line);
	ck_assert_int_gt(gf_port, 0);
	snprintf(uri, sizeof(uri), "http://127.0.0.1:%d/token", gf_port);
	gf_write_sa("sa.json", "key.pem", uri);
	gf_write_sa("sa-wrong.json", "other.pem", uri);
	gf_path(path, sizeof(path), "user.json");
	gf_write_user(path, GF_REFRESH);
}

static void gf_stop(void)
{
	if (gf_pid > 0) {
		kill(gf_pid, SIGKILL);
		waitpid(gf_pid, NULL, 0);
		gf_pid = 0;
	}
	if (gf_state) {
		dv_test_rmtree(gf_state);
		free(gf_state);
		gf_state = NULL;
	}
}

/* POSTs @body to the fixture's control path @path ("/_fault", "/_reset"). */
static void gf_ctl(const char *path, const char *body)
{
	struct dv_http http;
	struct dv_http_response resp;
	char url[128];
	struct dv_http_request req = {
		.method = "POST",
		.url = url,
		.body = body,
		.body_len = strlen(body),
	};

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", gf_port, path);
	ck_assert_int_eq(dv_http_init(&http, NULL), 0);
	ck_assert_int_eq(dv_http_perform(&http, &req, &resp), 0);
	ck_assert_int_eq(resp.status, 204);
	dv_http_release(&http);
}

/* The fixture's request log (caller frees). */
static char *gf_log(void)
{
	struct dv_http http;
	struct dv_http_response resp;
	struct dv_http_buf buf;
	char url[128], *out;
	size_t len;
	struct dv_http_request req = {
		.url = url, .on_body = dv_http_buf_append, .arg = &buf,
	};

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/_log", gf_port);
	dv_http_buf_init(&buf, 4u << 20);
	ck_assert_int_eq(dv_http_init(&http, NULL), 0);
	ck_assert_int_eq(dv_http_perform(&http, &req, &resp), 0);
	ck_assert_int_eq(resp.status, 200);
	ck_assert_int_eq(dv_http_buf_take(&buf, &out, &len), 0);
	dv_http_release(&http);
	return out;
}

/* How many lines of the fixture's log contain @needle. */
static unsigned gf_count(const char *needle)
{
	char *log = gf_log(), *line, *save = NULL;
	unsigned n = 0;

	for (line = strtok_r(log, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strstr(line, needle))
			n++;
	}
	free(log);
	return n;
}

/* ---- log capture: every line at every level ---- */

static char gf_lines[1u << 16];
static size_t gf_lines_len;

static void gf_capture(enum dv_log_level level, const char *line)
{
	int n = snprintf(gf_lines + gf_lines_len,
			 sizeof(gf_lines) - gf_lines_len, "%s\n", line);

	if (n > 0 && gf_lines_len + (size_t)n < sizeof(gf_lines))
		gf_lines_len += (size_t)n;
}

static void gf_capture_start(void)
{
	gf_lines[0] = '\0';
	gf_lines_len = 0;
	dv_log_set_sink(gf_capture);
	dv_log_set_level(DV_LOG_DEBUG);
}

static bool gf_logged(const char *needle)
{
	return strstr(gf_lines, needle) != NULL;
}

/* Every test starts from a clean server and a clean environment. */
static void gf_reset(void)
{
	gf_ctl("/_reset", "");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("CLOUDSDK_CONFIG");
	unsetenv("GCE_METADATA_HOST");
	unsetenv("GCE_METADATA_ROOT");
	unsetenv("STORAGE_EMULATOR_HOST");
	setenv("HOME", gf_state, 1);
	gf_capture_start();
}

static void gf_use_file(const char *name)
{
	char path[PATH_MAX];

	gf_path(path, sizeof(path), name);
	setenv("GOOGLE_APPLICATION_CREDENTIALS", path, 1);
}

#endif
