/*
 * Secrets in memory and in the process table: scrubbing credentials out of
 * an origin URL in place (argv), and wiping secret text before it is freed.
 * Nothing here allocates.
 */
#ifndef DV_SECRET_H
#define DV_SECRET_H

#include <stddef.h>

/*
 * Overwrites with '*', in place, the userinfo ("user:pass@" of
 * "scheme://user:pass@host/…") and the query (after '?', up to '#') of the
 * URL in the first @len bytes of @url; the length never changes, so argv
 * memory stays laid out as the kernel shows it. A string that is no URL
 * with "://" is left alone.
 */
void dv_secret_scrub_url(char *url, size_t len);

/*
 * Scrubs the value of every "origin=" option in @opts, a comma-separated
 * -o option list (a C string), with dv_secret_scrub_url().
 */
void dv_secret_scrub_opts(char *opts);

/* Zeroes the C string @s (explicit_bzero), then frees it. NULL: no-op. */
void dv_secret_free(char *s);

/* Zeroes @len bytes at @buf (explicit_bzero), then frees it. NULL: no-op. */
void dv_secret_free_n(void *buf, size_t len);

#endif
