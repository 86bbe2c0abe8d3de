/*
 * Application Default Credentials (see gcs_creds.h for the chain).
 *
 * One mutex guards everything: the resolved source, its secrets and the
 * cached token. A caller that finds no fresh token fetches one while
 * holding it, so concurrent readers make one request, not one each.
 *
 * Not here: the GCS requests themselves (gcs.c), signing the JWT
 * (gcs_jwt.c), retries (tiers/net/call.c), libcurl (http.c).
 */
#include "gcs_creds.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "tiers/net/call.h"
#include "tiers/net/json.h"

#define ANSWER_MAX (64u << 10)
#define REASON_MAX 200

enum source {
	SRC_NONE,
	SRC_SERVICE_ACCOUNT,
	SRC_AUTHORIZED_USER,
	SRC_METADATA,
};

struct dv_gcs_creds {
	struct dv_http *http;  /* borrowed */
	char *label;
	char *who;             /* "tier 'label'": the log prefix */
	struct dv_http_denied denied; /* rate of "access denied" lines */
	time_t (*now)(void);
	pthread_mutex_t lock;

	/* All below: protected by lock. */
	enum source src;       /* SRC_NONE until resolved */
	char *where;           /* the key file, or the metadata host */
	char *token_uri;       /* where tokens come from */
	char *account;         /* service account e-mail */
	char *key_id;
	EVP_PKEY *key;         /* secret */
	char *client_id;
	char *client_secret;   /* secret */
	char *refresh_token;   /* secret */
	char *token;           /* secret: the access token, or NULL */
	time_t refresh_at;     /* fetch a new token from then on */
	time_t expires_at;     /* the token is dead from then on */
	int fail_err;          /* the last failure, answered until fail_until */
	time_t fail_until;
};

static time_t wall_clock(void)
{
	return time(NULL);
}

static void wipe_free(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

int dv_gcs_creds_new(struct dv_http *http, const char *label,
		     struct dv_gcs_creds **out)
{
	struct dv_gcs_creds *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->label = strdup(label ? label : "gcs");
	if (!c->label || asprintf(&c->who, "tier '%s'", c->label) < 0) {
		free(c->label);
		free(c);
		return -ENOMEM;
	}
	c->http = http;
	c->now = wall_clock;
	pthread_mutex_init(&c->lock, NULL);
	*out = c;
	return 0;
}

/* Forgets the source and its secrets (not the failure memory). */
static void forget_source(struct dv_gcs_creds *c)
{
	c->src = SRC_NONE;
	free(c->where);
	free(c->token_uri);
	free(c->account);
	free(c->key_id);
	free(c->client_id);
	wipe_free(c->client_secret);
	wipe_free(c->refresh_token);
	EVP_PKEY_free(c->key);
	c->where = c->token_uri = c->account = c->key_id = NULL;
	c->client_id = c->client_secret = c->refresh_token = NULL;
	c->key = NULL;
}

static void drop_token(struct dv_gcs_creds *c)
{
	wipe_free(c->token);
	c->token = NULL;
	c->refresh_at = 0;
	c->expires_at = 0;
}

void dv_gcs_creds_free(struct dv_gcs_creds *c)
{
	if (!c)
		return;
	forget_source(c);
	drop_token(c);
	pthread_mutex_destroy(&c->lock);
	free(c->label);
	free(c->who);
	free(c);
}

void dv_gcs_creds_set_clock(struct dv_gcs_creds *c, time_t (*now)(void))
{
	c->now = now ? now : wall_clock;
}

void dv_gcs_creds_invalidate(struct dv_gcs_creds *c)
{
	pthread_mutex_lock(&c->lock);
	drop_token(c);
	pthread_mutex_unlock(&c->lock);
}

static void describe_locked(struct dv_gcs_creds *c, char *buf, size_t len)
{
	switch (c->src) {
	case SRC_SERVICE_ACCOUNT:
		snprintf(buf, len, "service account %s from %s", c->account,
			 c->where);
		break;
	case SRC_AUTHORIZED_USER:
		snprintf(buf, len, "gcloud user credentials from %s", c->where);
		break;
	case SRC_METADATA:
		snprintf(buf, len, "the GCE metadata server at %s", c->where);
		break;
	default:
		snprintf(buf, len, "not resolved yet");
	}
}

void dv_gcs_creds_describe(struct dv_gcs_creds *c, char *buf, size_t len)
{
	pthread_mutex_lock(&c->lock);
	describe_locked(c, buf, len);
	pthread_mutex_unlock(&c->lock);
}

/* ---- resolving the source ---- */

/* http:// is for loopback test servers only; a real token_uri is https. */
static bool usable_token_uri(const char *uri)
{
	const char *h;
	size_t n;

	if (strncasecmp(uri, "https://", 8) == 0)
		return uri[8] != '\0';
	if (strncasecmp(uri, "http://", 7) != 0)
		return false;
	h = uri + 7;
	n = strcspn(h, ":/?#");
	return (n == 9 && strncmp(h, "127.0.0.1", 9) == 0) ||
	       (n == 9 && strncasecmp(h, "localhost", 9) == 0) ||
	       strncmp(h, "[::1]", 5) == 0;
}

static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	return 0;
}

static EVP_PKEY *read_key(const char *pem)
{
	BIO *bio = BIO_new_mem_buf(pem, -1);
	EVP_PKEY *key = NULL;

	if (bio) {
		key = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL);
		BIO_free(bio);
	}
	ERR_clear_error();
	if (key && EVP_PKEY_base_id(key) != EVP_PKEY_RSA) {
		EVP_PKEY_free(key);
		key = NULL;
	}
	return key;
}

enum {
	F_TYPE, F_EMAIL, F_KEY, F_KEY_ID, F_TOKEN_URI, F_CLIENT_ID,
	F_CLIENT_SECRET, F_REFRESH, F_COUNT
};

static int take(char **dst, struct dv_json_field *f)
{
	*dst = f->value;
	f->value = NULL;
	return 0;
}

static int use_token_uri(struct dv_gcs_creds *c, struct dv_json_field *f,
			 const char *file)
{
	char shown[256];

	if (!f[F_TOKEN_URI].value || !*f[F_TOKEN_URI].value) {
		c->token_uri = strdup(DV_GCS_TOKEN_URI);
		return c->token_uri ? 0 : -ENOMEM;
	}
	if (!usable_token_uri(f[F_TOKEN_URI].value)) {
		dv_err("tier '%s': %s: token_uri %s is not https (plain http is for 127.0.0.1 only)",
		       c->label, file,
		       dv_http_redact(f[F_TOKEN_URI].value, shown,
				      sizeof(shown)));
		return -EACCES;
	}
	return take(&c->token_uri, &f[F_TOKEN_URI]);
}

/*
 * Whether the key file gave each field of @need (F_* indexes up to
 * F_COUNT); else logs "@file: @missing".
 */
static bool complete(const struct dv_gcs_creds *c,
		     const struct dv_json_field *f, const int *need,
		     const char *file, const char *missing)
{
	for (; *need != F_COUNT; need++) {
		if (!f[*need].value) {
			dv_err("tier '%s': %s: %s", c->label, file, missing);
			return false;
		}
	}
	return true;
}

static int load_service_account(struct dv_gcs_creds *c,
				 struct dv_json_field *f, const char *file)
{
	static const int need[] = { F_EMAIL, F_KEY, F_COUNT };

	if (!complete(c, f, need, file,
		      "a service_account key file needs client_email and private_key"))
		return -EACCES;
	c->key = read_key(f[F_KEY].value);
	if (!c->key) {
		dv_err("tier '%s': %s: private_key is not a PEM RSA private key",
		       c->label, file);
		return -EACCES;
	}
	c->src = SRC_SERVICE_ACCOUNT;
	take(&c->account, &f[F_EMAIL]);
	take(&c->key_id, &f[F_KEY_ID]);
	return use_token_uri(c, f, file);
}

static int load_authorized_user(struct dv_gcs_creds *c,
				struct dv_json_field *f, const char *file)
{
	static const int need[] = { F_CLIENT_ID, F_CLIENT_SECRET, F_REFRESH,
				    F_COUNT };

	if (!complete(c, f, need, file,
		      "authorized_user credentials need client_id, client_secret and refresh_token"))
		return -EACCES;
	c->src = SRC_AUTHORIZED_USER;
	take(&c->client_id, &f[F_CLIENT_ID]);
	take(&c->client_secret, &f[F_CLIENT_SECRET]);
	take(&c->refresh_token, &f[F_REFRESH]);
	return use_token_uri(c, f, file);
}

static int parse_key_file(struct dv_gcs_creds *c, const char *text,
			  size_t len, const char *file)
{
	struct dv_json_field f[F_COUNT] = {
		[F_TYPE] = { .key = "type" },
		[F_EMAIL] = { .key = "client_email" },
		[F_KEY] = { .key = "private_key" },
		[F_KEY_ID] = { .key = "private_key_id" },
		[F_TOKEN_URI] = { .key = "token_uri" },
		[F_CLIENT_ID] = { .key = "client_id" },
		[F_CLIENT_SECRET] = { .key = "client_secret" },
		[F_REFRESH] = { .key = "refresh_token" },
	};
	const char *type;
	char why[160];
	int ret;

	ret = dv_json_get(text, len, f, F_COUNT, why, sizeof(why));
	if (ret == -EINVAL)
		dv_err("tier '%s': %s: %s", c->label, file, why);
	if (ret)
		goto out;
	type = f[F_TYPE].value ? f[F_TYPE].value : "";
	if (strcmp(type, "service_account") == 0) {
		ret = load_service_account(c, f, file);
	} else if (strcmp(type, "authorized_user") == 0) {
		ret = load_authorized_user(c, f, file);
	} else {
		dv_err("tier '%s': %s: credentials of type \"%.40s\" are not supported (use service_account or authorized_user)",
		       c->label, file, type);
		ret = -EACCES;
	}
out:
	dv_json_release(f, F_COUNT);
	return ret == -EINVAL ? -EACCES : ret;
}

static int load_key_file(struct dv_gcs_creds *c, const char *file,
			 const char *whence)
{
	char *text = NULL;
	struct stat st;
	size_t len = 0;
	int ret;

	ret = dv_read_file(file, DV_GCS_KEYFILE_MAX, &text, &len);
	if (ret) {
		dv_err("tier '%s': cannot read the Google credentials %s (%s): %s",
		       c->label, file, whence, strerror(-ret));
		return ret == -ENOMEM ? ret : -EACCES;
	}
	if (stat(file, &st) == 0 && (st.st_mode & 0077))
		dv_warn("tier '%s': the Google credentials %s can be read by others (chmod 600 it)",
			c->label, file);
	c->where = strdup(file);
	ret = c->where ? parse_key_file(c, text, len, file) : -ENOMEM;
	OPENSSL_cleanse(text, len);
	free(text);
	return ret;
}

/* gcloud's file: $CLOUDSDK_CONFIG, else ~/.config/gcloud. 0 if none. */
static int well_known_file(char *buf, size_t len)
{
	const char *dir = getenv("CLOUDSDK_CONFIG");
	const char *home = getenv("HOME");
	int n;

	if (dir && *dir)
		n = snprintf(buf, len, "%s/%s", dir, DV_GCS_ADC_FILE);
	else if (home && *home)
		n = snprintf(buf, len, "%s/.config/gcloud/%s", home,
			     DV_GCS_ADC_FILE);
	else
		return 0;
	return n > 0 && (size_t)n < len && access(buf, F_OK) == 0;
}

/* GCE_METADATA_HOST, else GCE_METADATA_ROOT: host[:port], as Google's
 * libraries read them (an "http://" in front is tolerated). */
static int use_metadata(struct dv_gcs_creds *c)
{
	const char *host = getenv("GCE_METADATA_HOST");

	if (!host || !*host)
		host = getenv("GCE_METADATA_ROOT");
	if (!host || !*host)
		host = DV_GCS_METADATA_HOST;
	if (strncasecmp(host, "http://", 7) == 0)
		host += 7;
	if (!*host || strcspn(host, "/?#@ \t\r\n") < strlen(host)) {
		dv_err("tier '%s': GCE_METADATA_HOST must be HOST or HOST:PORT",
		       c->label);
		return -EACCES;
	}
	c->where = strdup(host);
	if (!c->where || asprintf(&c->token_uri, "http://%s%s", host,
				  DV_GCS_METADATA_PATH) < 0) {
		c->token_uri = NULL;
		return -ENOMEM;
	}
	c->src = SRC_METADATA;
	return 0;
}

static int resolve(struct dv_gcs_creds *c)
{
	const char *env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
	char path[4096];
	int ret;

	if (env && *env)
		ret = load_key_file(c, env, "GOOGLE_APPLICATION_CREDENTIALS");
	else if (well_known_file(path, sizeof(path)))
		ret = load_key_file(c, path, "gcloud's well-known file");
	else
		ret = use_metadata(c);
	if (ret) {
		forget_source(c);
		return ret;
	}
	describe_locked(c, path, sizeof(path));
	dv_info("tier '%s': Google credentials: %s", c->label, path);
	return 0;
}

/* ---- fetching a token ---- */

#define JWT_GRANT "urn:ietf:params:oauth:grant-type:jwt-bearer"

static bool unreserved(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
	       ch == '_' || ch == '~';
}

/*
 * An application/x-www-form-urlencoded body of @n key/value pairs, sized
 * exactly, so that no copy of a secret is left behind by a realloc.
 */
static char *form_encode(const char *const *kv, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = 0;
	char *out, *p;

	for (size_t i = 0; i < 2 * n; i++) {
		/* "=" after a key; "&", or the NUL, after a value */
		len += i % 2 ? 1 : 2;
		for (const char *s = kv[i]; *s; s++)
			len += unreserved((unsigned char)*s) ? 1 : 3;
	}
	out = malloc(len + 1);
	if (!out)
		return NULL;
	p = out;
	for (size_t i = 0; i < 2 * n; i++) {
		if (i > 0)
			*p++ = i % 2 ? '=' : '&';
		for (const unsigned char *s = (const unsigned char *)kv[i]; *s;
		     s++) {
			if (unreserved(*s)) {
				*p++ = (char)*s;
			} else {
				*p++ = '%';
				*p++ = hex[*s >> 4];
				*p++ = hex[*s & 15];
			}
		}
	}
	*p = '\0';
	return out;
}

static char *grant_body(struct dv_gcs_creds *c, time_t now, int *err)
{
	char *jwt = NULL, *body;

	*err = 0;
	if (c->src == SRC_AUTHORIZED_USER) {
		const char *kv[] = {
			"grant_type", "refresh_token",
			"client_id", c->client_id,
			"client_secret", c->client_secret,
			"refresh_token", c->refresh_token,
		};

		body = form_encode(kv, 4);
	} else {
		*err = dv_gcs_jwt_assertion(c->key, c->key_id, c->account,
					    DV_GCS_SCOPE, c->token_uri, now,
					    &jwt);
		if (*err)
			return NULL;
		body = form_encode((const char *const[]){
			"grant_type", JWT_GRANT, "assertion", jwt }, 2);
		wipe_free(jwt);
	}
	if (!body)
		*err = -ENOMEM;
	return body;
}

/* Token services: 2xx; 408, 429, 5xx are worth a retry; other 4xx refuse. */
static int answer_errno(long status)
{
	if (status >= 200 && status <= 299)
		return 0;
	if (status == 408 || status == 429 || status >= 500)
		return -EAGAIN;
	if (status >= 400)
		return -EACCES;
	return -EPROTO;
}

/* One request for a token, its answer into @answer. */
static int token_request(struct dv_gcs_creds *c, time_t now,
			 struct dv_http_buf *answer,
			 struct dv_http_response *resp)
{
	const char *headers[2] = { NULL, NULL };
	struct dv_http_request req = {
		.url = c->token_uri,
		.headers = headers,
		.max_body = ANSWER_MAX,
		.on_body = dv_http_buf_append,
		.arg = answer,
	};
	char *body = NULL;
	int ret;

	if (answer->data)
		OPENSSL_cleanse(answer->data, answer->len);
	answer->len = 0;
	if (c->src == SRC_METADATA) {
		headers[0] = "Metadata-Flavor: Google";
	} else {
		body = grant_body(c, now, &ret);
		if (!body) {
			memset(resp, 0, sizeof(*resp));
			return ret == -EINVAL ? -EACCES : ret;
		}
		headers[0] = "Content-Type: application/x-www-form-urlencoded";
		req.method = "POST";
		req.body = body;
		req.body_len = strlen(body);
	}
	ret = dv_http_perform(c->http, &req, resp);
	if (ret == 0)
		ret = answer_errno(resp->status);
	wipe_free(body);
	return ret;
}

/* Printable ASCII without blanks: it goes into a header as is. */
static bool token_ok(const char *t)
{
	size_t len = strlen(t);

	if (len == 0 || len > DV_GCS_TOKEN_MAX)
		return false;
	for (; *t; t++) {
		if (*t <= 0x20 || *t >= 0x7f)
			return false;
	}
	return true;
}

static int take_token(struct dv_gcs_creds *c, const struct dv_http_buf *answer,
		      time_t now)
{
	struct dv_json_field f[] = {
		{ .key = "access_token" },
		{ .key = "expires_in" },
		{ .key = "token_type" },
	};
	uint64_t life = DV_GCS_JWT_LIFETIME;
	char shown[256];
	int ret;

	ret = dv_json_get(answer->data ? answer->data : "", answer->len, f,
			      3, NULL, 0);
	if (ret == -ENOMEM)
		goto out;
	if (ret || !f[0].value || !token_ok(f[0].value) ||
	    (f[2].value && strcasecmp(f[2].value, "Bearer") != 0)) {
		dv_err("tier '%s': %s answered without a usable bearer access_token",
		       c->label,
		       dv_http_redact(c->token_uri, shown, sizeof(shown)));
		ret = -EPROTO;
		goto out;
	}
	if (f[1].value && dv_parse_uint(f[1].value, 1u << 30, &life))
		life = DV_GCS_JWT_LIFETIME;
	if (life == 0)
		life = 1;
	drop_token(c);
	take(&c->token, &f[0]);
	c->expires_at = now + (time_t)life;
	c->refresh_at = dv_http_refresh_at(now, c->expires_at);
	dv_debug("tier '%s': new access token, valid for %" PRIu64 " s",
		 c->label, life);
out:
	dv_json_release(f, 3);
	return ret;
}

static int fetch_failed(struct dv_gcs_creds *c, const struct dv_http_call *call,
			const struct dv_http_response *resp)
{
	char shown[256], reason[REASON_MAX], why[DV_HTTP_DETAIL_MAX + 32];
	int err = call->last_err;

	dv_http_redact(c->token_uri, shown, sizeof(shown));
	dv_http_describe(err, resp, NULL, why, sizeof(why));
	if (err == -EACCES) {
		/* error / error_description: never an echo of a secret. */
		dv_json_reason(resp->errbody, strlen(resp->errbody), reason,
			       sizeof(reason));
		dv_http_log_denied(&c->denied, c->who,
				   "%s refused the credentials (%s%s%s)", shown,
				   why, reason[0] ? ": " : "", reason);
		return -EACCES;
	}
	if (c->src == SRC_METADATA &&
	    (err == -ECONNREFUSED || err == -EHOSTUNREACH)) {
		dv_http_log_denied(&c->denied, c->who,
				   "no Google credentials found: GOOGLE_APPLICATION_CREDENTIALS is not set, gcloud's %s does not exist, and no GCE metadata server answers at %s (%s)",
				   DV_GCS_ADC_FILE, c->where, why);
		return -EACCES;
	}
	/* -EPROTO: take_token said what was wrong with the answer. */
	if (err != -EPROTO && err != -ENOMEM)
		dv_err("%s: %s failed after %u attempt%s: %s", c->who,
		       call->what, call->attempts,
		       call->attempts > 1 ? "s" : "", why);
	return dv_http_final_errno(err);
}

struct token_call {
	struct dv_gcs_creds *c;
	struct dv_http_buf answer;
};

/* One request for a token; a JWT is signed anew for each. */
static int token_attempt(void *arg, struct dv_http_response *resp)
{
	struct token_call *t = arg;
	time_t now = t->c->now();
	int ret;

	ret = token_request(t->c, now, &t->answer, resp);
	return ret ? ret : take_token(t->c, &t->answer, now);
}

static void oauth_error(const struct dv_http_response *resp, char *buf,
			size_t len)
{
	dv_json_reason(resp->errbody, strlen(resp->errbody), buf, len);
}

/* Credential endpoints: no refresh (this is the refresh), no redirects. */
static const struct dv_http_call_ops token_ops = {
	.attempt = token_attempt,
	.error_code = oauth_error,
};

static int fetch(struct dv_gcs_creds *c)
{
	struct token_call t = { .c = c };
	char what[300], shown[256];
	/* Quiet: a refusal names the token service and its reason. */
	struct dv_http_call call = {
		.http = c->http,
		.ops = &token_ops,
		.ctx = &t,
		.who = c->who,
		.what = what,
		.flags = DV_HTTP_CALL_QUIET,
	};
	struct dv_http_response resp;
	int ret;

	snprintf(what, sizeof(what), "token request to %s",
		 dv_http_redact(c->token_uri, shown, sizeof(shown)));
	dv_http_buf_init(&t.answer, ANSWER_MAX);
	ret = dv_http_call_run(&call, &resp);
	if (ret < 0)
		ret = fetch_failed(c, &call, &resp);
	if (t.answer.data)
		OPENSSL_cleanse(t.answer.data, t.answer.len);
	dv_http_buf_release(&t.answer);
	return ret;
}

static int refresh(struct dv_gcs_creds *c)
{
	int ret = 0;

	if (c->src == SRC_NONE)
		ret = resolve(c);
	if (ret == 0)
		ret = fetch(c);
	if (ret) {
		c->fail_err = ret;
		c->fail_until = c->now() + DV_GCS_RETRY_AFTER;
	} else {
		c->fail_err = 0;
	}
	return ret;
}

static int write_header(struct dv_gcs_creds *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "Authorization: Bearer %s", c->token);

	if (n < 0 || (size_t)n >= len) {
		OPENSSL_cleanse(buf, len);
		return -ENOBUFS;
	}
	return 0;
}

int dv_gcs_creds_header(struct dv_gcs_creds *c, char *buf, size_t len)
{
	time_t now;
	int ret;

	pthread_mutex_lock(&c->lock);
	now = c->now();
	if (c->token && now < c->refresh_at) {
		ret = write_header(c, buf, len);
		goto out;
	}
	if (c->fail_err && now < c->fail_until)
		ret = c->fail_err;
	else
		ret = refresh(c);
	/* A refresh that failed early leaves a token that still works. */
	if (ret && ret != -EACCES && c->token && now < c->expires_at)
		ret = 0;
	if (ret == 0)
		ret = write_header(c, buf, len);
out:
	pthread_mutex_unlock(&c->lock);
	return ret;
}
