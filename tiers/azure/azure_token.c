/*
 * One access token from one token service (azure_token.h): Microsoft
 * Entra ID's v2.0 token endpoint (client secret or federated assertion),
 * App Service's identity endpoint, or the instance metadata service.
 *
 * Answers are JSON, read with libyaml's event parser (JSON is YAML's flow
 * style); only the top-level scalars we need are kept. Nothing here
 * caches: azure_creds.c decides when to ask.
 */
#include "azure_token.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config/log.h"
#include "config/util.h"
#include "azure_sign.h"

#define WHY_MAX 256
#define FIELD_MAX 1024
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

struct fields {
	char *access_token;
	char *expires_in;
	char *expires_on;
	char *error;
	char *error_description;
};

static void fields_release(struct fields *f)
{
	dv_az_free_secret(f->access_token);
	free(f->expires_in);
	free(f->expires_on);
	free(f->error);
	free(f->error_description);
}

static char **slot_of(struct fields *f, const char *key)
{
	if (strcmp(key, "access_token") == 0)
		return &f->access_token;
	if (strcmp(key, "expires_in") == 0)
		return &f->expires_in;
	if (strcmp(key, "expires_on") == 0)
		return &f->expires_on;
	if (strcmp(key, "error") == 0)
		return &f->error;
	if (strcmp(key, "error_description") == 0)
		return &f->error_description;
	return NULL;
}

static int next_event(yaml_parser_t *p, yaml_event_t *e)
{
	return yaml_parser_parse(p, e) ? 0 : -EPROTO;
}

/* Skips the rest of a nested mapping or sequence that just started. */
static int skip_nested(yaml_parser_t *p)
{
	int depth = 1;

	while (depth > 0) {
		yaml_event_t e;

		if (next_event(p, &e))
			return -EPROTO;
		if (e.type == YAML_MAPPING_START_EVENT ||
		    e.type == YAML_SEQUENCE_START_EVENT)
			depth++;
		else if (e.type == YAML_MAPPING_END_EVENT ||
			 e.type == YAML_SEQUENCE_END_EVENT)
			depth--;
		else if (e.type == YAML_STREAM_END_EVENT)
			depth = 0;
		yaml_event_delete(&e);
	}
	return 0;
}

/* One "key": value pair, or 1 at the end of the mapping. */
static int read_pair(yaml_parser_t *p, struct fields *f)
{
	yaml_event_t k, v;
	char **slot;
	int ret = 0;

	if (next_event(p, &k))
		return -EPROTO;
	if (k.type == YAML_MAPPING_END_EVENT) {
		yaml_event_delete(&k);
		return 1;
	}
	if (k.type != YAML_SCALAR_EVENT || next_event(p, &v)) {
		yaml_event_delete(&k);
		return -EPROTO;
	}
	slot = slot_of(f, (const char *)k.data.scalar.value);
	if (v.type == YAML_MAPPING_START_EVENT ||
	    v.type == YAML_SEQUENCE_START_EVENT) {
		ret = skip_nested(p);
	} else if (v.type != YAML_SCALAR_EVENT) {
		ret = -EPROTO;
	} else if (slot) {
		size_t max = slot == &f->access_token ? DV_AZ_TOKEN_MAX : FIELD_MAX;
		size_t len = v.data.scalar.length;

		dv_az_free_secret(*slot);
		*slot = strndup((const char *)v.data.scalar.value,
				len < max ? len : max);
		if (!*slot)
			ret = -ENOMEM;
	}
	yaml_event_delete(&k);
	yaml_event_delete(&v);
	return ret;
}

static int read_fields(const char *text, size_t len, struct fields *f)
{
	yaml_parser_t p;
	yaml_event_t e;
	int ret = 0;

	if (!yaml_parser_initialize(&p))
		return -ENOMEM;
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	/* stream start, document start, then the object itself */
	for (int i = 0; i < 3 && ret == 0; i++) {
		ret = next_event(&p, &e);
		if (ret == 0 && i == 2 && e.type != YAML_MAPPING_START_EVENT)
			ret = -EPROTO;
		if (ret == 0)
			yaml_event_delete(&e);
	}
	for (int n = 0; ret == 0; n++)
		ret = n < 256 ? read_pair(&p, f) : -EPROTO;
	yaml_parser_delete(&p);
	return ret == 1 ? 0 : ret;
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

static void say_why(const struct fields *f, const char *fallback, char *why,
		    size_t whylen)
{
	char e[64], d[200];

	if (!why || !whylen)
		return;
	clean_copy(e, sizeof(e), f->error);
	clean_copy(d, sizeof(d), f->error_description);
	if (f->error || f->error_description)
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
	struct fields f = { NULL };
	uint64_t v;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = read_fields(text, len, &f);
	if (ret) {
		say_why(&f, "the answer is not a JSON object", why, whylen);
		goto out;
	}
	ret = -EPROTO;
	if (!f.access_token || !*f.access_token) {
		say_why(&f, "no access_token in the answer", why, whylen);
		goto out;
	}
	out->obtained = now;
	if (parse_epoch(f.expires_in, &v) && v < (1u << 30))
		out->expires = now + (time_t)v;
	else if (parse_epoch(f.expires_on, &v) && v < (1ull << 40))
		out->expires = (time_t)v;
	else {
		say_why(&f, "no expires_in or expires_on in the answer", why,
			whylen);
		goto out;
	}
	out->access_token = f.access_token;
	f.access_token = NULL;
	ret = 0;
out:
	fields_release(&f);
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
	size_t len;
	int ret = dv_read_file(path, ASSERTION_MAX, out, &len);

	if (ret)
		return ret;
	while (len > 0 && isspace((unsigned char)(*out)[len - 1]))
		(*out)[--len] = '\0';
	return len ? 0 : -ENODATA;
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

static int attempt(struct dv_http *h, const struct call *c,
		   struct dv_http_response *resp, struct dv_az_token *out,
		   char *why, size_t whylen)
{
	struct dv_http_buf buf;
	struct dv_http_request req = {
		.method = c->method,
		.url = c->url,
		.headers = c->headers,
		.body = c->body,
		.body_len = c->body ? strlen(c->body) : 0,
		.max_body = DV_AZ_TOKEN_DOC_MAX,
		.on_body = dv_http_buf_append,
	};
	struct fields f = { NULL };
	int ret;

	dv_http_buf_init(&buf, DV_AZ_TOKEN_DOC_MAX);
	req.arg = &buf;
	ret = dv_http_perform(h, &req, resp);
	if (ret) {
		snprintf(why, whylen, "%s", resp->detail[0] ? resp->detail :
			 strerror(-ret));
	} else if (resp->status >= 200 && resp->status <= 299) {
		ret = dv_az_token_parse(buf.data ? buf.data : "", buf.len,
					time(NULL), out, why, whylen);
		if (ret)
			ret = -EIO;
	} else {
		/* Error answers are JSON too; their text says why. The
		 * caller maps the status. */
		read_fields(resp->errbody, strlen(resp->errbody), &f);
		say_why(&f, "", why, whylen);
		fields_release(&f);
	}
	if (buf.data)
		explicit_bzero(buf.data, buf.len);
	dv_http_buf_release(&buf);
	return ret;
}

int dv_az_token_fetch(struct dv_http *h, const char *tier,
		      const struct dv_az_token_req *r, struct dv_az_token *out)
{
	struct call c = { NULL };
	struct dv_http_response resp;
	char why[WHY_MAX], shown[512];
	unsigned n;
	int ret;

	memset(out, 0, sizeof(*out));
	if (r->source == DV_AZ_TOKEN_CLIENT_SECRET ||
	    r->source == DV_AZ_TOKEN_WORKLOAD)
		ret = entra_call(tier, r, &c);
	else
		ret = identity_call(r, &c);
	if (ret)
		goto out;
	dv_http_redact(c.url, shown, sizeof(shown));
	for (n = 0;; n++) {
		why[0] = '\0';
		ret = attempt(h, &c, &resp, out, why, sizeof(why));
		if (ret == 0 && !out->access_token)
			ret = status_errno(r, resp.status);
		if (ret == 0 || !dv_http_transient(ret) || n >= h->retries)
			break;
		if (resp.status && !out->access_token)
			snprintf(why, sizeof(why), "HTTP %ld", resp.status);
		dv_warn("tier '%s': %s token from %s: %s (attempt %u of %u), retrying",
			tier, dv_az_token_source_name(r->source), shown, why,
			n + 1, h->retries + 1);
		dv_http_sleep_ms(dv_http_backoff_ms(n));
	}
	if (ret == 0) {
		dv_debug("tier '%s': got a token from %s (%s), valid %lld s",
			 tier, dv_az_token_source_name(r->source), shown,
			 (long long)(out->expires - out->obtained));
		goto out;
	}
	if (resp.status && (resp.status < 200 || resp.status > 299))
		dv_err("tier '%s': %s: %s %s: HTTP %ld%s%s", tier,
		       dv_az_token_source_name(r->source),
		       ret == -EACCES ? "refused by" : "no token from", shown,
		       resp.status, why[0] ? ": " : "", why);
	else
		dv_err("tier '%s': %s: no token from %s: %s", tier,
		       dv_az_token_source_name(r->source), shown,
		       why[0] ? why : strerror(-ret));
	if (ret != -EACCES && ret != -ENOMEM)
		ret = -EIO;
out:
	call_release(&c);
	return ret;
}
