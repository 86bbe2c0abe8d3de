/*
 * One access token from one token service (azure_token.h): Microsoft
 * Entra ID's v2.0 token endpoint (client secret or federated assertion),
 * App Service's identity endpoint, or the instance metadata service.
 *
 * Answers are JSON, read with the network layer's field reader
 * (tiers/net/json.h); retries are its call loop's (tiers/net/call.h).
 * Token endpoints carry secrets (a client secret, the identity header):
 * their requests never follow redirects (the http.h default). Nothing
 * here caches: azure_creds.c decides when to ask.
 */
#include "azure_token.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"
#include "config/util.h"
#include "azure_sign.h"
#include "tiers/net/call.h"
#include "tiers/net/json.h"

#define WHY_MAX 256
#define ASSERTION_MAX (64u << 10)

const char *dv_az_token_source_name(enum dv_az_token_source s)
{
	switch (s) {
	case DV_AZ_TOKEN_CLIENT_SECRET:
		return "environment client secret";
	case DV_AZ_TOKEN_WORKLOAD:
		return "workload identity";
	case DV_AZ_TOKEN_APP_SERVICE:
		return "managed identity (App Service)";
	case DV_AZ_TOKEN_IMDS:
		return "managed identity (IMDS)";
	}
	return "?";
}

void dv_az_token_release(struct dv_az_token *t)
{
	dv_az_free_secret(t->access_token);
	memset(t, 0, sizeof(*t));
}

/* ---- the answer ---- */

enum { F_TOKEN, F_EXPIRES_IN, F_EXPIRES_ON, F_ERROR, F_DESCRIPTION, F_N };

static void fields_init(struct dv_json_field f[F_N])
{
	static const char *const keys[F_N] = {
		"access_token", "expires_in", "expires_on", "error",
		"error_description",
	};

	for (size_t i = 0; i < F_N; i++)
		f[i] = (struct dv_json_field){ .key = keys[i] };
}

/* Printable ASCII only: a service's text goes into our log lines. */
static void clean_copy(char *dst, size_t len, const char *src)
{
	size_t j = 0;

	for (size_t i = 0; src && src[i] && j + 1 < len; i++)
		dst[j++] = isprint((unsigned char)src[i]) ? src[i] : '?';
	if (len)
		dst[j] = '\0';
}

static void say_why(const struct dv_json_field f[F_N], const char *fallback,
		    char *why, size_t whylen)
{
	char e[64], d[200];

	if (!why || !whylen)
		return;
	clean_copy(e, sizeof(e), f[F_ERROR].value);
	clean_copy(d, sizeof(d), f[F_DESCRIPTION].value);
	if (f[F_ERROR].value || f[F_DESCRIPTION].value)
		snprintf(why, whylen, "%s%s%s", e, *e && *d ? ": " : "", d);
	else
		snprintf(why, whylen, "%s", fallback);
}

static bool parse_epoch(const char *s, uint64_t *out)
{
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

int dv_az_token_parse(const char *text, size_t len, time_t now,
		      struct dv_az_token *out, char *why, size_t whylen)
{
	struct dv_json_field f[F_N];
	const char *tok;
	uint64_t v;
	int ret;

	memset(out, 0, sizeof(*out));
	fields_init(f);
	ret = dv_json_get(text, len, f, F_N, NULL, 0);
	if (ret) {
		say_why(f, "the answer is not a JSON object", why, whylen);
		ret = ret == -ENOMEM ? ret : -EPROTO;
		goto out;
	}
	ret = -EPROTO;
	tok = f[F_TOKEN].value;
	if (!tok || !*tok || strlen(tok) > DV_AZ_TOKEN_MAX) {
		say_why(f, tok && *tok ? "the access_token is too long" :
			"no access_token in the answer", why, whylen);
		goto out;
	}
	out->obtained = now;
	if (parse_epoch(f[F_EXPIRES_IN].value, &v) && v < (1u << 30))
		out->expires = now + (time_t)v;
	else if (parse_epoch(f[F_EXPIRES_ON].value, &v) && v < (1ull << 40))
		out->expires = (time_t)v;
	else {
		say_why(f, "no expires_in or expires_on in the answer", why,
			whylen);
		goto out;
	}
	out->access_token = f[F_TOKEN].value;
	f[F_TOKEN].value = NULL;
	ret = 0;
out:
	dv_json_release(f, F_N);
	return ret;
}

/* ---- the request ---- */

struct call {
	char *url;
	char *body;           /* form, for the Entra ID sources (secret) */
	char *secret_header;  /* X-IDENTITY-HEADER (secret) */
	const char *headers[4];
	const char *method;
};

static void call_release(struct call *c)
{
	free(c->url);
	dv_az_free_secret(c->body);
	dv_az_free_secret(c->secret_header);
}

/* "&name=value", value encoded; a NULL value adds nothing. */
static int append_param(char **s, const char *name, const char *value)
{
	char *enc, *next;
	int n;

	if (!value)
		return 0;
	enc = dv_az_url_encode(value, false);
	if (!enc)
		return -ENOMEM;
	n = asprintf(&next, "%s%s%s=%s", *s, **s ? "&" : "", name, enc);
	dv_az_free_secret(enc);
	if (n < 0)
		return -ENOMEM;
	dv_az_free_secret(*s);
	*s = next;
	return 0;
}

static int read_assertion(const char *path, char **out)
{
	int ret = dv_read_token_file(path, ASSERTION_MAX, out);

	if (ret == 0 && !**out) {
		free(*out);
		*out = NULL;
		ret = -ENODATA;
	}
	return ret;
}

static int entra_call(const char *tier, const struct dv_az_token_req *r,
		      struct call *c)
{
	char *assertion = NULL;
	int ret;

	if (asprintf(&c->url, "%s/%s/oauth2/v2.0/token", r->authority,
		     r->tenant) < 0) {
		c->url = NULL;
		return -ENOMEM;
	}
	c->method = "POST";
	c->headers[0] = "Content-Type: application/x-www-form-urlencoded";
	c->headers[1] = "Accept: application/json";
	c->body = strdup("grant_type=client_credentials");
	if (!c->body)
		return -ENOMEM;
	ret = append_param(&c->body, "client_id", r->client_id);
	if (ret == 0)
		ret = append_param(&c->body, "scope", DV_AZ_STORAGE_SCOPE);
	if (ret || r->source == DV_AZ_TOKEN_CLIENT_SECRET)
		return ret ? ret : append_param(&c->body, "client_secret",
						 r->secret);
	ret = read_assertion(r->assertion_file, &assertion);
	if (ret) {
		dv_err("tier '%s': workload identity: cannot read AZURE_FEDERATED_TOKEN_FILE %s: %s",
		       tier, r->assertion_file,
		       ret == -ENODATA ? "it is empty" : strerror(-ret));
		return -EACCES;
	}
	ret = append_param(&c->body, "client_assertion_type",
			   "urn:ietf:params:oauth:client-assertion-type:jwt-bearer");
	if (ret == 0)
		ret = append_param(&c->body, "client_assertion", assertion);
	dv_az_free_secret(assertion);
	return ret;
}

static int identity_call(const struct dv_az_token_req *r, struct call *c)
{
	char *q = strdup("");
	bool app = r->source == DV_AZ_TOKEN_APP_SERVICE;
	int ret, n;

	if (!q)
		return -ENOMEM;
	ret = append_param(&q, "api-version", app ? "2019-08-01" : "2018-02-01");
	if (ret == 0)
		ret = append_param(&q, "resource", DV_AZ_STORAGE_RESOURCE);
	if (ret == 0)
		ret = append_param(&q, "client_id", r->client_id);
	if (ret) {
		free(q);
		return ret;
	}
	if (app)
		n = asprintf(&c->url, "%s%s%s", r->endpoint,
			     strchr(r->endpoint, '?') ? "&" : "?", q);
	else
		n = asprintf(&c->url, "%s/metadata/identity/oauth2/token?%s",
			     r->endpoint, q);
	free(q);
	if (n < 0) {
		c->url = NULL;
		return -ENOMEM;
	}
	c->method = "GET";
	c->headers[0] = "Accept: application/json";
	if (!app) {
		c->headers[1] = "Metadata: true";
		return 0;
	}
	if (asprintf(&c->secret_header, "X-IDENTITY-HEADER: %s",
		     r->identity_header) < 0) {
		c->secret_header = NULL;
		return -ENOMEM;
	}
	c->headers[1] = c->secret_header;
	return 0;
}

/* An HTTP status from a token service as an errno. */
static int status_errno(const struct dv_az_token_req *r, long status)
{
	if (status == 400 || status == 401 || status == 403)
		return -EACCES;
	/* IMDS answers 404 while an identity is being assigned. */
	if (r->source == DV_AZ_TOKEN_IMDS && (status == 404 || status == 410))
		return -EAGAIN;
	return dv_http_status_errno(status);
}

struct fetch {
	struct dv_http *http;
	const struct dv_az_token_req *r;
	struct call c;
	struct dv_az_token *out;
	char why[WHY_MAX];   /* of the last attempt */
};

/* One request; an answer that is not a token is not worth repeating. */
static int fetch_attempt(void *ctx, struct dv_http_response *resp)
{
	struct fetch *f = ctx;
	struct dv_http_buf buf;
	struct dv_http_request req = {
		.method = f->c.method,
		.url = f->c.url,
		.headers = f->c.headers,
		.body = f->c.body,
		.body_len = f->c.body ? strlen(f->c.body) : 0,
		.max_body = DV_AZ_TOKEN_DOC_MAX,
		.on_body = dv_http_buf_append,
		.arg = &buf,
	};
	int ret;

	f->why[0] = '\0';
	dv_http_buf_init(&buf, DV_AZ_TOKEN_DOC_MAX);
	ret = dv_http_perform(f->http, &req, resp);
	if (ret) {
		snprintf(f->why, sizeof(f->why), "%s", resp->detail[0] ?
			 resp->detail : strerror(-ret));
	} else if (resp->status >= 200 && resp->status <= 299) {
		ret = dv_az_token_parse(buf.data ? buf.data : "", buf.len,
					time(NULL), f->out, f->why,
					sizeof(f->why));
		if (ret)
			ret = ret == -ENOMEM ? ret : -EIO;
	} else {
		/* Error answers are JSON too; their text says why. */
		dv_json_reason(resp->errbody, strlen(resp->errbody), f->why,
			       sizeof(f->why));
		ret = status_errno(f->r, resp->status);
	}
	if (buf.data)
		explicit_bzero(buf.data, buf.len);
	dv_http_buf_release(&buf);
	return ret;
}

/* The OAuth "error" of a failed answer, for the retry lines. */
static void fetch_error_code(const struct dv_http_response *resp, char *buf,
			     size_t len)
{
	struct dv_json_field f = { .key = "error" };

	dv_json_get(resp->errbody, strlen(resp->errbody), &f, 1, NULL, 0);
	clean_copy(buf, len, f.value ? f.value : "");
	dv_json_release(&f, 1);
}

static const struct dv_http_call_ops fetch_ops = {
	.attempt = fetch_attempt,
	.error_code = fetch_error_code,
};

/* The final line, in the wording operators (and tests) look for. */
static void log_failure(const char *tier, const struct fetch *f, int ret,
			const struct dv_http_response *resp, const char *shown)
{
	const char *src = dv_az_token_source_name(f->r->source);

	if (resp->status && (resp->status < 200 || resp->status > 299))
		dv_err("tier '%s': %s: %s %s: HTTP %ld%s%s", tier, src,
		       ret == -EACCES ? "refused by" : "no token from", shown,
		       resp->status, f->why[0] ? ": " : "", f->why);
	else
		dv_err("tier '%s': %s: no token from %s: %s", tier, src, shown,
		       f->why[0] ? f->why : strerror(-ret));
}

int dv_az_token_fetch(struct dv_http *h, const char *tier,
		      const struct dv_az_token_req *r, struct dv_az_token *out)
{
	struct fetch f = { .http = h, .r = r, .out = out };
	char who[256], what[640], shown[512];
	struct dv_http_call call = {
		.http = h, .ops = &fetch_ops, .ctx = &f, .who = who,
		.what = what, .flags = DV_HTTP_CALL_QUIET,
	};
	struct dv_http_response resp;
	int ret;

	memset(out, 0, sizeof(*out));
	if (r->source == DV_AZ_TOKEN_CLIENT_SECRET ||
	    r->source == DV_AZ_TOKEN_WORKLOAD)
		ret = entra_call(tier, r, &f.c);
	else
		ret = identity_call(r, &f.c);
	if (ret)
		goto out;
	dv_http_redact(f.c.url, shown, sizeof(shown));
	snprintf(who, sizeof(who), "tier '%s'", tier);
	snprintf(what, sizeof(what), "%s token from %s",
		 dv_az_token_source_name(r->source), shown);
	ret = dv_http_call_run(&call, &resp);
	if (ret == 0) {
		dv_debug("tier '%s': got a token from %s (%s), valid %lld s",
			 tier, dv_az_token_source_name(r->source), shown,
			 (long long)(out->expires - out->obtained));
		goto out;
	}
	log_failure(tier, &f, call.last_err, &resp, shown);
	if (ret != -EACCES && ret != -ENOMEM)
		ret = -EIO;
out:
	call_release(&f.c);
	return ret;
}
