/*
 * The network sources of the AWS credential chain (aws_creds.h): STS
 * AssumeRoleWithWebIdentity, the ECS container agent, EC2 IMDSv2.
 *
 * Every answer is read into a bounded buffer (DV_AWS_DOC_MAX), with the
 * network layer's retries (tiers/net/call.h) and never across a redirect
 * (these requests carry the web identity token, the container
 * authorization token or the IMDS session token). JSON (ECS, IMDS) is
 * read by tiers/net/json.c; STS's XML is scanned for the four elements of
 * <Credentials> and nothing else. Log lines name the source and the URL
 * without its query, never a token or a key; error bodies are reduced to
 * their error code.
 */
#include "aws_creds_impl.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/log.h"
#include "config/util.h"
#include "sigv4.h"
#include "tiers/net/call.h"
#include "tiers/net/json.h"

#define IMDS_TOKEN_TTL "21600"
#define SESSION_NAME_MAX 64

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/*
 * Wipes, then frees, a string or an answer that held a secret.
 * OPENSSL_cleanse, since a plain memset before free may be optimized away.
 */
static void free_secret(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

static void release_secret_buf(struct dv_http_buf *b)
{
	if (b->data)
		OPENSSL_cleanse(b->data, b->len);
	dv_http_buf_release(b);
}

/* ---- one bounded request, through the network layer's retries ---- */

struct fetch {
	struct dv_aws_chain *c;
	struct dv_http *http;
	const char *method;
	const char *url;
	const char *const *headers;
	const char *body;
	const char *what;       /* for log lines: "STS", "ECS agent"… */
	/*
	 * A refused connection means no service listens there (IMDS off
	 * EC2): the source is absent, not failing, so no retry and no
	 * error line, as the SDKs make one attempt.
	 */
	bool refused_is_absent;
	struct dv_http_buf *buf;
};

static int fetch_attempt(void *arg, struct dv_http_response *resp)
{
	struct fetch *f = arg;
	struct dv_http_request req = {
		.method = f->method,
		.url = f->url,
		.headers = f->headers,
		.body = f->body,
		.body_len = f->body ? strlen(f->body) : 0,
		.max_body = DV_AWS_DOC_MAX,
		.on_body = dv_http_buf_append,
		.arg = f->buf,
	};
	int ret;

	f->buf->len = 0;
	ret = dv_http_perform(f->http, &req, resp);
	if (ret == -ECONNREFUSED && f->refused_is_absent)
		return -ENOENT;
	return ret ? ret : dv_http_status_errno(resp->status);
}

static const struct dv_http_call_ops fetch_ops = {
	.attempt = fetch_attempt,
	.error_code = dv_aws_http_error_code,
};

/* 0 with the body in @buf, or -errno (logged). */
static int fetch(struct fetch *f, struct dv_http_buf *buf)
{
	char shown[512], what[640];
	struct dv_http_response resp;
	struct dv_http_call call = {
		.http = f->http, .ops = &fetch_ops, .ctx = f,
		.who = "AWS credentials", .what = what,
		.enoent_level = f->refused_is_absent ? DV_LOG_DEBUG : DV_LOG_ERROR,
		.denied = &f->c->denied,
	};

	f->buf = buf;
	snprintf(what, sizeof(what), "%s %s (%s)", f->method ? f->method : "GET",
		 f->what, dv_http_redact(f->url, shown, sizeof(shown)));
	return dv_http_call_run(&call, &resp);
}

/* The text of <@name>…</@name> in @xml (bounded by @end), or NULL. */
static const char *xml_find(const char *xml, const char *end,
			    const char *name, size_t *len)
{
	char open[64], close[64];
	const char *s, *e;

	snprintf(open, sizeof(open), "<%s>", name);
	snprintf(close, sizeof(close), "</%s>", name);
	s = memmem(xml, (size_t)(end - xml), open, strlen(open));
	if (!s)
		return NULL;
	s += strlen(open);
	e = memmem(s, (size_t)(end - s), close, strlen(close));
	if (!e)
		return NULL;
	*len = (size_t)(e - s);
	return s;
}

void dv_aws_error_code(const char *body, char *out, size_t cap)
{
	const char *code, *end = body + strlen(body);
	size_t len = 0;

	out[0] = '\0';
	code = xml_find(body, end, "Code", &len);
	if (!code || len >= cap)
		return;
	for (size_t i = 0; i < len; i++) {
		char ch = code[i];

		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_'))
			return;
	}
	memcpy(out, code, len);
	out[len] = '\0';
}

void dv_aws_http_error_code(const struct dv_http_response *resp, char *buf,
			    size_t len)
{
	dv_aws_error_code(resp->errbody, buf, len);
}

/* ---- answers ---- */

int dv_aws_parse_time(const char *s, time_t *out)
{
	struct tm tm = { 0 };
	int consumed = 0, oh = 0, om = 0;
	const char *rest;
	time_t t;

	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
		   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
		   &consumed) != 6 || consumed == 0)
		return -EINVAL;
	rest = s + consumed;
	if (*rest == '.')
		rest += 1 + strspn(rest + 1, "0123456789");
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	if ((*rest == '+' || *rest == '-') &&
	    sscanf(rest + 1, "%2d:%2d", &oh, &om) == 2)
		t += (*rest == '+' ? -1 : 1) * (oh * 3600 + om * 60);
	else if (*rest && strcmp(rest, "Z") != 0)
		return -EINVAL;
	*out = t;
	return 0;
}

/* Replaces XML's five entities in place. */
static void xml_unescape(char *s)
{
	static const struct { const char *ent; char ch; } ents[] = {
		{ "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' },
		{ "&quot;", '"' }, { "&apos;", '\'' },
	};
	char *w = s;

	while (*s) {
		size_t i, n = sizeof(ents) / sizeof(ents[0]);

		for (i = 0; *s == '&' && i < n; i++) {
			if (strncmp(s, ents[i].ent, strlen(ents[i].ent)) == 0)
				break;
		}
		if (*s == '&' && i < n) {
			*w++ = ents[i].ch;
			s += strlen(ents[i].ent);
		} else {
			*w++ = *s++;
		}
	}
	*w = '\0';
}

static int xml_take(const char *xml, const char *end, const char *name,
		    char *dst, size_t cap)
{
	size_t len;
	const char *v = xml_find(xml, end, name, &len);

	if (!v || dv_aws_copy(dst, cap, v, len))
		return -EPROTO;
	xml_unescape(dst);
	return 0;
}

static int parse_sts(const char *body, size_t len, struct dv_aws_creds *out)
{
	char when[64];
	const char *end = body + len, *creds;
	size_t clen;

	creds = xml_find(body, end, "Credentials", &clen);
	if (!creds)
		return -EPROTO;
	end = creds + clen;
	if (xml_take(creds, end, "AccessKeyId", out->access_key,
		     sizeof(out->access_key)) ||
	    xml_take(creds, end, "SecretAccessKey", out->secret_key,
		     sizeof(out->secret_key)) ||
	    xml_take(creds, end, "SessionToken", out->session_token,
		     sizeof(out->session_token)) ||
	    xml_take(creds, end, "Expiration", when, sizeof(when)) ||
	    dv_aws_parse_time(when, &out->expiration))
		return -EPROTO;
	return 0;
}

enum { J_KEY, J_SECRET, J_TOKEN, J_EXPIRATION, J_CODE, J_COUNT };

/* Copies field @f into @dst; -EPROTO when absent or too long. */
static int take(const struct dv_json_field *f, char *dst, size_t cap)
{
	if (!f->value)
		return -EPROTO;
	return dv_aws_copy(dst, cap, f->value, strlen(f->value));
}

/* {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} (ECS, IMDS). */
static int parse_json_creds(const char *body, size_t len,
			    struct dv_aws_creds *out)
{
	struct dv_json_field f[J_COUNT] = {
		[J_KEY] = { .key = "AccessKeyId" },
		[J_SECRET] = { .key = "SecretAccessKey" },
		[J_TOKEN] = { .key = "Token" },
		[J_EXPIRATION] = { .key = "Expiration" },
		[J_CODE] = { .key = "Code" },
	};
	int ret;

	if (!body || !len)
		return -EPROTO;
	ret = dv_json_get(body, len, f, J_COUNT, NULL, 0);
	if (ret == -EINVAL)
		ret = -EPROTO;
	if (ret == 0 && f[J_CODE].value && strcmp(f[J_CODE].value, "Success"))
		ret = -EIO;
	if (ret == 0)
		ret = take(&f[J_KEY], out->access_key, sizeof(out->access_key));
	if (ret == 0)
		ret = take(&f[J_SECRET], out->secret_key, sizeof(out->secret_key));
	if (ret == 0 && f[J_TOKEN].value)
		ret = take(&f[J_TOKEN], out->session_token,
			   sizeof(out->session_token));
	if (ret == 0 && f[J_EXPIRATION].value &&
	    dv_aws_parse_time(f[J_EXPIRATION].value, &out->expiration))
		ret = -EPROTO;
	dv_json_release(f, J_COUNT);
	return ret;
}

/* ---- STS AssumeRoleWithWebIdentity ---- */

static char *sts_endpoint(void)
{
	char region[64], *url = NULL;
	const char *e = env("AWS_ENDPOINT_URL_STS");

	if (!e)
		e = env("AWS_ENDPOINT_URL");
	if (e)
		return strdup(e);
	if (dv_aws_region(region, sizeof(region)) == 0) {
		if (asprintf(&url, "https://sts.%s.amazonaws.com", region) < 0)
			return NULL;
		return url;
	}
	return strdup("https://sts.amazonaws.com");
}

static char *sts_body(const char *role, const char *session, const char *token)
{
	char *r = dv_sigv4_uri_encode(role, false);
	char *s = dv_sigv4_uri_encode(session, false);
	char *t = dv_sigv4_uri_encode(token, false);
	char *body = NULL;

	if (r && s && t &&
	    asprintf(&body, "Action=AssumeRoleWithWebIdentity&RoleArn=%s"
			    "&RoleSessionName=%s&Version=2011-06-15"
			    "&WebIdentityToken=%s", r, s, t) < 0)
		body = NULL;
	free(r);
	free(s);
	free_secret(t);
	return body;
}

static int sts_call(struct dv_aws_chain *c, const char *role,
		    const char *token, struct dv_aws_creds *out)
{
	static const char *const headers[] = {
		"Content-Type: application/x-www-form-urlencoded; charset=utf-8",
		"Accept: application/xml", NULL,
	};
	char session[SESSION_NAME_MAX + 1];
	struct dv_http_buf buf;
	struct fetch f = { .c = c, .http = &c->sts_http, .method = "POST",
			   .headers = headers, .what = "STS AssumeRoleWithWebIdentity" };
	char *url = sts_endpoint(), *body;
	int ret = -ENOMEM;

	snprintf(session, sizeof(session), "%s",
		 env("AWS_ROLE_SESSION_NAME") ? env("AWS_ROLE_SESSION_NAME")
					      : "datavofs");
	body = sts_body(role, session, token);
	if (!url || !body)
		goto out;
	/* STS is at the endpoint's root. */
	f.url = url;
	f.body = body;
	dv_http_buf_init(&buf, DV_AWS_DOC_MAX);
	ret = fetch(&f, &buf);
	if (ret == 0) {
		ret = parse_sts(buf.data ? buf.data : "", buf.len, out);
		if (ret)
			dv_err("AWS credentials: STS answered without usable credentials");
	}
	release_secret_buf(&buf);
out:
	free_secret(body);
	free(url);
	return ret;
}

int dv_aws_from_web_identity(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	const char *file = env("AWS_WEB_IDENTITY_TOKEN_FILE");
	const char *role = env("AWS_ROLE_ARN");
	char *token = NULL;
	int ret;

	if (!file && !role)
		return -ENOENT;
	if (!file || !role) {
		dv_warn("AWS credentials: web identity needs both AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN; %s is not set",
			file ? "AWS_ROLE_ARN" : "AWS_WEB_IDENTITY_TOKEN_FILE");
		return -ENOENT;
	}
	/* Read on every refresh: projected tokens are rotated. */
	ret = dv_read_token_file(file, DV_AWS_DOC_MAX, &token);
	if (ret) {
		dv_err("AWS credentials: cannot read the web identity token %s: %s",
		       file, strerror(-ret));
		return ret == -EACCES ? -EACCES : -EIO;
	}
	ret = sts_call(c, role, token, out);
	free_secret(token);
	out->source = "web identity (STS)";
	return ret;
}

/* ---- ECS container credentials ---- */

/* http:// full URIs may only reach the local agent (as the SDKs rule). */
static bool ecs_host_allowed(const char *url)
{
	static const char *const hosts[] = {
		"localhost", "[::1]", "169.254.170.2", "169.254.170.23",
		"[fd00:ec2::23]",
	};
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	bool ok = false;

	if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
		goto out;
	if (strcasecmp(scheme, "https") == 0) {
		ok = true;
		goto out;
	}
	if (strcasecmp(scheme, "http") != 0)
		goto out;
	ok = strncmp(host, "127.", 4) == 0;
	for (size_t i = 0; !ok && i < sizeof(hosts) / sizeof(hosts[0]); i++)
		ok = strcasecmp(host, hosts[i]) == 0;
out:
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return ok;
}

static char *ecs_url(struct dv_aws_chain *c)
{
	const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	char *url = NULL;

	if (rel) {
		if (asprintf(&url, "http://%s%s%s",
			     c->ecs_host ? c->ecs_host : DV_AWS_ECS_HOST,
			     rel[0] == '/' ? "" : "/", rel) < 0)
			return NULL;
		return url;
	}
	return strdup(full);
}

/* "Authorization: <token>" from the token file or variable, or NULL. */
static int ecs_auth_header(char **out)
{
	const char *file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	const char *tok = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
	char *read = NULL;
	int ret = 0;

	*out = NULL;
	if (file) {
		ret = dv_read_token_file(file, DV_AWS_DOC_MAX, &read);
		if (ret) {
			dv_err("AWS credentials: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s: %s",
			       file, strerror(-ret));
			return -EIO;
		}
		tok = read;
	}
	if (tok && strpbrk(tok, "\r\n")) {
		dv_err("AWS credentials: the container authorization token holds a line break");
		ret = -EINVAL;
	} else if (tok && asprintf(out, "Authorization: %s", tok) < 0) {
		*out = NULL;
		ret = -ENOMEM;
	}
	free_secret(read);
	return ret;
}

int dv_aws_from_ecs(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	const char *headers[2] = { NULL, NULL };
	struct fetch f = { .c = c, .http = &c->meta_http,
			   .what = "the ECS container agent" };
	struct dv_http_buf buf;
	char *url, *auth = NULL, shown[512];
	int ret;

	if (!env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") &&
	    !env("AWS_CONTAINER_CREDENTIALS_FULL_URI"))
		return -ENOENT;
	url = ecs_url(c);
	if (!url)
		return -ENOMEM;
	if (!env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") &&
	    !ecs_host_allowed(url)) {
		dv_err("AWS credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI %s must be https, or http to a loopback or ECS/EKS agent address",
		       dv_http_redact(url, shown, sizeof(shown)));
		free(url);
		return -EINVAL;
	}
	ret = ecs_auth_header(&auth);
	if (ret == 0) {
		headers[0] = auth;
		f.url = url;
		f.headers = headers;
		dv_http_buf_init(&buf, DV_AWS_DOC_MAX);
		ret = fetch(&f, &buf);
		if (ret == 0 && parse_json_creds(buf.data, buf.len, out)) {
			dv_err("AWS credentials: the ECS container agent answered without usable credentials");
			ret = -EPROTO;
		}
		release_secret_buf(&buf);
	}
	free_secret(auth);
	free(url);
	out->source = "ECS container credentials";
	return ret;
}

/* ---- EC2 instance metadata (IMDSv2) ---- */

static bool imds_disabled(void)
{
	const char *v = env("AWS_EC2_METADATA_DISABLED");

	return v && strcasecmp(v, "true") == 0;
}

static int imds_get(struct dv_aws_chain *c, const char *base, const char *path,
		    const char *token_header, struct dv_http_buf *buf)
{
	const char *headers[] = { token_header, NULL };
	char *url;
	struct fetch f = { .c = c, .http = &c->meta_http, .headers = headers,
			   .what = "EC2 instance metadata",
			   .refused_is_absent = true };
	int ret;

	if (asprintf(&url, "%s%s", base, path) < 0)
		return -ENOMEM;
	f.url = url;
	ret = fetch(&f, buf);
	free(url);
	return ret;
}

/* The session token, as "X-aws-ec2-metadata-token: …" in *@hdr. */
static int imds_token(struct dv_aws_chain *c, const char *base, char **hdr)
{
	static const char *const headers[] = {
		"X-aws-ec2-metadata-token-ttl-seconds: " IMDS_TOKEN_TTL, NULL,
	};
	struct fetch f = { .c = c, .http = &c->meta_http, .method = "PUT",
			   .headers = headers, .what = "EC2 instance metadata",
			   .refused_is_absent = true };
	struct dv_http_buf buf;
	char *url;
	int ret;

	if (asprintf(&url, "%s/latest/api/token", base) < 0)
		return -ENOMEM;
	f.url = url;
	dv_http_buf_init(&buf, 4096);
	ret = fetch(&f, &buf);
	if (ret == 0 && (!buf.data || !buf.len || strpbrk(buf.data, "\r\n")))
		ret = -EPROTO;
	if (ret == 0 &&
	    asprintf(hdr, "X-aws-ec2-metadata-token: %s", buf.data) < 0)
		ret = -ENOMEM;
	release_secret_buf(&buf);
	free(url);
	return ret;
}

static int imds_role(struct dv_aws_chain *c, const char *base,
		     const char *hdr, char *role, size_t cap)
{
	struct dv_http_buf buf;
	int ret;

	dv_http_buf_init(&buf, 4096);
	ret = imds_get(c, base, "/latest/meta-data/iam/security-credentials/",
		       hdr, &buf);
	if (ret == 0) {
		size_t len = buf.data ? strcspn(buf.data, "\r\n") : 0;

		ret = len && !memchr(buf.data, '/', len) ?
			      dv_aws_copy(role, cap, buf.data, len) : -ENOENT;
	}
	dv_http_buf_release(&buf);
	return ret;
}

int dv_aws_from_imds(struct dv_aws_chain *c, struct dv_aws_creds *out)
{
	const char *base = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	char role[256], path[320], *hdr = NULL, *trimmed;
	struct dv_http_buf buf;
	int ret;

	if (imds_disabled())
		return -ENOENT;
	trimmed = strdup(base ? base : DV_AWS_IMDS_ENDPOINT);
	if (!trimmed)
		return -ENOMEM;
	while (*trimmed && trimmed[strlen(trimmed) - 1] == '/')
		trimmed[strlen(trimmed) - 1] = '\0';
	ret = imds_token(c, trimmed, &hdr);
	/* No metadata service (not on EC2): the chain simply ends. */
	if (ret) {
		ret = -ENOENT;
		goto out;
	}
	ret = imds_role(c, trimmed, hdr, role, sizeof(role));
	if (ret) {
		dv_info("AWS credentials: this instance has no IAM role");
		ret = -ENOENT;
		goto out;
	}
	snprintf(path, sizeof(path), "/latest/meta-data/iam/security-credentials/%s",
		 role);
	dv_http_buf_init(&buf, DV_AWS_DOC_MAX);
	ret = imds_get(c, trimmed, path, hdr, &buf);
	if (ret == 0 && parse_json_creds(buf.data, buf.len, out)) {
		dv_err("AWS credentials: instance metadata answered without usable credentials");
		ret = -EPROTO;
	}
	release_secret_buf(&buf);
out:
	free_secret(hdr);
	free(trimmed);
	out->source = "EC2 instance metadata";
	return ret;
}
