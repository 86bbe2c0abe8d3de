/*
 * SigV4 (see sigv4.h): canonical request → string to sign → signature
 * with a key derived from the secret, the date, the region and the
 * service. Strings are built with open_memstream; nothing here logs,
 * since the canonical request and the headers carry the session token.
 */
#include "sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALGORITHM "AWS4-HMAC-SHA256"
/* Host, date, content hash and token besides the caller's. */
#define MAX_SIGNED (DV_SIGV4_MAX_HEADERS + 4)

struct hdr {
	char *name;   /* lower case */
	char *value;  /* trimmed, inner blanks collapsed */
	size_t order; /* keeps duplicates in the order given */
};

struct pair {
	char *name;   /* encoded */
	char *value;  /* encoded */
};

/*
 * UriEncode's unreserved set, spelt out: isalnum() follows the locale, and
 * in an 8-bit one it would leave bytes of a UTF-8 key unencoded.
 */
static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

char *dv_sigv4_uri_encode(const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *p = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (unreserved(c) || (keep_slash && c == '/')) {
			*p++ = (char)c;
			continue;
		}
		*p++ = '%';
		*p++ = hex[c >> 4];
		*p++ = hex[c & 15];
	}
	*p = '\0';
	return out;
}

static void to_hex(const unsigned char *in, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = hex[in[i] >> 4];
		out[2 * i + 1] = hex[in[i] & 15];
	}
	out[2 * len] = '\0';
}

void dv_sigv4_sha256_hex(const void *buf, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL);
	to_hex(md, 32, out);
}

static void hmac(const void *key, size_t keylen, const char *msg,
		 unsigned char out[32])
{
	unsigned int len = 32;

	HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg,
	     strlen(msg), out, &len);
}

/* ---- headers ---- */

/* "Name: value" → lower-case name, value trimmed with blanks collapsed. */
static int hdr_parse(const char *line, size_t order, struct hdr *h)
{
	const char *colon = strchr(line, ':');
	const char *v;
	char *w;

	if (!colon || colon == line)
		return -EINVAL;
	h->order = order;
	h->name = strndup(line, (size_t)(colon - line));
	h->value = malloc(strlen(colon));
	if (!h->name || !h->value)
		return -ENOMEM;
	for (w = h->name; *w; w++)
		*w = (char)tolower((unsigned char)*w);
	w = h->value;
	for (v = colon + 1; *v; v++) {
		bool blank = *v == ' ' || *v == '\t';

		if (blank && (w == h->value || w[-1] == ' '))
			continue;
		*w++ = blank ? ' ' : *v;
	}
	while (w > h->value && w[-1] == ' ')
		w--;
	*w = '\0';
	return 0;
}

static int hdr_cmp(const void *a, const void *b)
{
	const struct hdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Writes the canonical headers and the signed header list. */
static void put_headers(struct hdr *h, size_t n, FILE *canon, FILE *names)
{
	qsort(h, n, sizeof(*h), hdr_cmp);
	for (size_t i = 0; i < n; i++) {
		bool same = i > 0 && strcmp(h[i].name, h[i - 1].name) == 0;

		/* Repeated names become one line, values joined by ','. */
		if (same) {
			fprintf(canon, ",%s", h[i].value);
		} else {
			if (i > 0)
				fputc('\n', canon);
			fprintf(canon, "%s:%s", h[i].name, h[i].value);
			fprintf(names, "%s%s", i ? ";" : "", h[i].name);
		}
	}
	if (n)
		fputc('\n', canon);
}

/* ---- query ---- */

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static char *build_query(const struct dv_sigv4_param *params, size_t n)
{
	struct pair *p = calloc(n ? n : 1, sizeof(*p));
	char *out = NULL;
	size_t len = 0;
	FILE *f = NULL;
	size_t i;

	if (!p)
		return NULL;
	for (i = 0; i < n; i++) {
		p[i].name = dv_sigv4_uri_encode(params[i].name, false);
		p[i].value = dv_sigv4_uri_encode(
			params[i].value ? params[i].value : "", false);
		if (!p[i].name || !p[i].value)
			goto out;
	}
	qsort(p, n, sizeof(*p), pair_cmp);
	f = open_memstream(&out, &len);
	if (!f)
		goto out;
	for (i = 0; i < n; i++)
		fprintf(f, "%s%s=%s", i ? "&" : "", p[i].name, p[i].value);
	if (fclose(f) != 0) {
		free(out);
		out = NULL;
	}
out:
	for (size_t j = 0; j < n; j++) {
		free(p[j].name);
		free(p[j].value);
	}
	free(p);
	return out;
}

/* ---- signing ---- */

struct signing {
	char amz_date[17];  /* 20150830T123600Z */
	char day[9];        /* 20150830 */
	char scope[256];
	const char *payload;
	struct hdr hdrs[MAX_SIGNED];
	size_t nhdrs;
	char *signed_names;
};

static int add_header(struct signing *s, const char *fmt, const char *v)
{
	char *line;
	int ret;

	if (s->nhdrs >= MAX_SIGNED)
		return -EINVAL;
	if (asprintf(&line, fmt, v) < 0)
		return -ENOMEM;
	ret = hdr_parse(line, s->nhdrs, &s->hdrs[s->nhdrs]);
	s->nhdrs++;
	free(line);
	return ret;
}

static int collect_headers(struct signing *s, const struct dv_sigv4_key *key,
			   const struct dv_sigv4_request *req)
{
	size_t n = 0;
	int ret;

	ret = add_header(s, "host:%s", req->host);
	for (; !ret && req->headers && req->headers[n]; n++) {
		if (n >= DV_SIGV4_MAX_HEADERS)
			return -EINVAL;
		ret = add_header(s, "%s", req->headers[n]);
	}
	if (!ret)
		ret = add_header(s, "x-amz-date:%s", s->amz_date);
	if (!ret && req->content_sha256_header)
		ret = add_header(s, "x-amz-content-sha256:%s", s->payload);
	if (!ret && key->session_token && *key->session_token)
		ret = add_header(s, "x-amz-security-token:%s",
				 key->session_token);
	return ret;
}

static char *canonical_request(struct signing *s,
			       const struct dv_sigv4_request *req,
			       const struct dv_sigv4_result *out)
{
	char *canon = NULL, *names = NULL;
	size_t clen = 0, nlen = 0;
	FILE *c = open_memstream(&canon, &clen);
	FILE *n = open_memstream(&names, &nlen);
	bool ok = c && n;

	if (ok) {
		fprintf(c, "%s\n%s\n%s\n", req->method, out->path, out->query);
		put_headers(s->hdrs, s->nhdrs, c, n);
	}
	ok = (!n || fclose(n) == 0) && ok;
	if (ok)
		fprintf(c, "\n%s\n%s", names, s->payload);
	ok = (!c || fclose(c) == 0) && ok;
	if (!ok) {
		free(canon);
		free(names);
		return NULL;
	}
	s->signed_names = names;
	return canon;
}

static void signature(const struct dv_sigv4_key *key, const char *region,
		      const char *service, const struct signing *s,
		      const char *canon, char out[65])
{
	unsigned char k[32], sig[32];
	char hash[65], *secret, *sts;

	dv_sigv4_sha256_hex(canon, strlen(canon), hash);
	if (asprintf(&sts, ALGORITHM "\n%s\n%s\n%s", s->amz_date, s->scope,
		     hash) < 0)
		sts = NULL;
	if (asprintf(&secret, "AWS4%s", key->secret_key) < 0)
		secret = NULL;
	if (!sts || !secret) {
		out[0] = '\0';
		goto out;
	}
	hmac(secret, strlen(secret), s->day, k);
	hmac(k, 32, region, k);
	hmac(k, 32, service, k);
	hmac(k, 32, "aws4_request", k);
	hmac(k, 32, sts, sig);
	to_hex(sig, 32, out);
out:
	if (secret) {
		/* The derived secret must not linger in freed memory. */
		memset(secret, 0, strlen(secret));
		free(secret);
	}
	free(sts);
}

static int result_headers(const struct dv_sigv4_key *key,
			  const struct dv_sigv4_request *req,
			  const struct signing *s, struct dv_sigv4_result *out)
{
	size_t n = 0;

	if (asprintf(&out->headers[n++], "Host: %s", req->host) < 0 ||
	    asprintf(&out->headers[n++], "x-amz-date: %s", s->amz_date) < 0)
		return -ENOMEM;
	if (req->content_sha256_header &&
	    asprintf(&out->headers[n++], "x-amz-content-sha256: %s",
		     s->payload) < 0)
		return -ENOMEM;
	if (key->session_token && *key->session_token &&
	    asprintf(&out->headers[n++], "x-amz-security-token: %s",
		     key->session_token) < 0)
		return -ENOMEM;
	if (asprintf(&out->headers[n++],
		     "Authorization: " ALGORITHM
		     " Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		     key->access_key, s->scope, s->signed_names,
		     out->signature) < 0)
		return -ENOMEM;
	return 0;
}

static void release_signing(struct signing *s)
{
	for (size_t i = 0; i < s->nhdrs; i++) {
		free(s->hdrs[i].name);
		free(s->hdrs[i].value);
	}
	free(s->signed_names);
}

int dv_sigv4_sign(const struct dv_sigv4_key *key, const char *region,
		  const char *service, time_t when,
		  const struct dv_sigv4_request *req,
		  struct dv_sigv4_result *out)
{
	struct signing s = { .payload = req->payload_sha256 };
	struct tm tm;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!s.payload)
		s.payload = DV_SIGV4_EMPTY_SHA256;
	gmtime_r(&when, &tm);
	strftime(s.amz_date, sizeof(s.amz_date), "%Y%m%dT%H%M%SZ", &tm);
	memcpy(s.day, s.amz_date, 8);
	snprintf(s.scope, sizeof(s.scope), "%s/%s/%s/aws4_request", s.day,
		 region, service);
	out->path = dv_sigv4_uri_encode(req->path, true);
	out->query = build_query(req->params, req->nparams);
	if (!out->path || !out->query) {
		ret = -ENOMEM;
		goto out;
	}
	ret = collect_headers(&s, key, req);
	if (ret)
		goto out;
	out->canonical = canonical_request(&s, req, out);
	if (!out->canonical) {
		ret = -ENOMEM;
		goto out;
	}
	signature(key, region, service, &s, out->canonical, out->signature);
	ret = out->signature[0] ? result_headers(key, req, &s, out) : -ENOMEM;
out:
	release_signing(&s);
	return ret;
}

void dv_sigv4_result_release(struct dv_sigv4_result *r)
{
	free(r->path);
	free(r->query);
	for (size_t i = 0; i < sizeof(r->headers) / sizeof(r->headers[0]); i++)
		free(r->headers[i]);
	free(r->canonical);
	memset(r, 0, sizeof(*r));
}
