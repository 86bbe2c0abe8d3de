/*
 * Secrets (secret.h). Scrubbing overwrites rather than shortens: argv
 * strings are laid out back to back in the process's memory, and
 * /proc/PID/cmdline reads that memory as it is.
 */
#include "secret.h"

#include <stdlib.h>
#include <string.h>

static void stars(char *p, size_t n)
{
	memset(p, '*', n);
}

void dv_secret_scrub_url(char *url, size_t len)
{
	char *end = url + len, *auth, *p, *at = NULL;

	auth = memmem(url, len, "://", 3);
	if (!auth)
		return;
	auth += 3;
	for (p = auth; p < end && !strchr("/?#", *p); p++)
		if (*p == '@')
			at = p;
	if (at)
		stars(auth, (size_t)(at - auth));
	p = memchr(url, '?', len);
	if (p) {
		char *hash = memchr(p, '#', (size_t)(end - p));

		stars(p + 1, (size_t)((hash ? hash : end) - p - 1));
	}
}

void dv_secret_scrub_opts(char *opts)
{
	static const char key[] = "origin=";
	char *p = opts;

	while (*p) {
		size_t n = strcspn(p, ",");

		if (n > sizeof(key) - 1 && strncmp(p, key, sizeof(key) - 1) == 0)
			dv_secret_scrub_url(p + sizeof(key) - 1,
					    n - (sizeof(key) - 1));
		p += n;
		if (*p == ',')
			p++;
	}
}

void dv_secret_free(char *s)
{
	if (s)
		dv_secret_free_n(s, strlen(s));
}

void dv_secret_free_n(void *buf, size_t len)
{
	if (!buf)
		return;
	explicit_bzero(buf, len);
	free(buf);
}
