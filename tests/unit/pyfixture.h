/*
 * Starting and stopping a Python test server (aws_fixture.py,
 * s3_fixture.py) from a Check test. Header-only so that a test includes
 * it without a Makefile change.
 *
 * The server prints its port on its first line, listens on 127.0.0.1
 * only, and exits when its stdin closes: the test keeps the write end,
 * so a server can never outlive the (forked) test process that started
 * it, even one that dies on a failed assertion. pyfixture_stop() kills
 * it by PID as well.
 */
#ifndef DV_TEST_PYFIXTURE_H
#define DV_TEST_PYFIXTURE_H

#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tiers/net/http.h"

struct pyfixture {
	pid_t pid;
	int port;
	int keepalive;  /* write end of the server's stdin */
};

static inline void pyfixture_path(const char *script, char *buf, size_t len)
{
	const char *dir = getenv("DV_TEST_SRCDIR");
	const char *slash = strrchr(__FILE__, '/');

	if (dir)
		snprintf(buf, len, "%s/%s", dir, script);
	else
		snprintf(buf, len, "%.*s/%s", slash ? (int)(slash - __FILE__) : 1,
			 slash ? __FILE__ : ".", script);
}

/* @args: extra arguments, NULL-terminated (at most 14). */
static inline void pyfixture_start(struct pyfixture *f, const char *script,
				   const char *const *args)
{
	char path[PATH_MAX], line[32];
	const char *argv[18];
	int out[2], in[2];
	size_t n = 0;
	FILE *fp;

	pyfixture_path(script, path, sizeof(path));
	ck_assert_int_eq(access(path, R_OK), 0);
	argv[n++] = "python3";
	argv[n++] = path;
	for (size_t i = 0; args && args[i] && n < 17; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	ck_assert_int_eq(pipe(out), 0);
	ck_assert_int_eq(pipe(in), 0);
	f->pid = fork();
	ck_assert_int_ge(f->pid, 0);
	if (f->pid == 0) {
		dup2(out[1], STDOUT_FILENO);
		dup2(in[0], STDIN_FILENO);
		close(out[0]);
		close(out[1]);
		close(in[0]);
		close(in[1]);
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(in[0]);
	f->keepalive = in[1];
	fp = fdopen(out[0], "r");
	ck_assert_ptr_nonnull(fp);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), fp));
	fclose(fp);
	f->port = atoi(line);
	ck_assert_int_gt(f->port, 0);
}

static inline void pyfixture_stop(struct pyfixture *f)
{
	if (f->pid > 0) {
		close(f->keepalive);
		kill(f->pid, SIGKILL);
		waitpid(f->pid, NULL, 0);
	}
	f->pid = 0;
}

/* GET http://127.0.0.1:PORT@path: a malloc'd body (test frees). */
static inline char *pyfixture_get(const struct pyfixture *f, const char *path)
{
	struct dv_http http;
	struct dv_http_buf buf;
	struct dv_http_response resp;
	struct dv_http_request req = { 0 };
	char url[256], *out = NULL;
	size_t len;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->port, path);
	ck_assert_int_eq(dv_http_init(&http, NULL), 0);
	dv_http_buf_init(&buf, 1u << 20);
	req.url = url;
	req.on_body = dv_http_buf_append;
	req.arg = &buf;
	ck_assert_int_eq(dv_http_perform(&http, &req, &resp), 0);
	ck_assert_int_eq(resp.status, 200);
	ck_assert_int_eq(dv_http_buf_take(&buf, &out, &len), 0);
	dv_http_buf_release(&buf);
	dv_http_release(&http);
	return out;
}

/* How many lines of the server's /_log contain @needle. */
static inline int pyfixture_count(const struct pyfixture *f, const char *needle)
{
	char *log = pyfixture_get(f, "/_log");
	int n = 0;

	for (const char *p = log; (p = strstr(p, needle)) != NULL; p++)
		n++;
	free(log);
	return n;
}

#endif
