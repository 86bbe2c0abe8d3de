/*
 * The signed assertion of the jwt-bearer grant (RFC 7523): a JWT (RFC
 * 7519) signed with RS256 by a service account's key, as Google's token
 * service takes it (see gcs_creds.h). Everything here is secret once
 * signed: buffers are wiped before they are freed.
 *
 * Not here: the token request (gcs_creds.c), reading the key file.
 */
#include "gcs_creds.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"

size_t dv_gcs_base64url(const void *in, size_t len, char *out, size_t outlen)
{
	size_t need = 4 * ((len + 2) / 3) + 1, n;

	if (outlen < need) {
		if (outlen)
			out[0] = '\0';
		return 0;
	}
	n = (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)len);
	while (n > 0 && out[n - 1] == '=')
		n--;
	out[n] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (out[i] == '+')
			out[i] = '-';
		else if (out[i] == '/')
			out[i] = '_';
	}
	return n;
}

/* A JSON string body for @s: '"', '\' and control bytes escaped. */
static char *json_escape(const char *s)
{
	size_t len = strlen(s);
	char *out = malloc(len * 6 + 1), *p = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\') {
			*p++ = '\\';
			*p++ = (char)ch;
		} else if (ch < 0x20) {
			p += sprintf(p, "\\u%04x", ch);
		} else {
			*p++ = (char)ch;
		}
	}
	*p = '\0';
	return out;
}

/* base64url of a NUL-terminated string, appended at @p. */
static char *b64_part(char *p, size_t room, const char *s)
{
	return p + dv_gcs_base64url(s, strlen(s), p, room);
}

static void log_ssl_error(const char *what)
{
	char buf[256];
	unsigned long e = ERR_get_error();

	ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	dv_err("gcs: %s: %s", what, e ? buf : "unknown OpenSSL error");
}

static int rs256(EVP_PKEY *key, const char *data, size_t len,
		 unsigned char **sig, size_t *siglen)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	int ret = -EINVAL;

	*sig = NULL;
	if (!md)
		return -ENOMEM;
	if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, NULL, siglen, (const unsigned char *)data,
			   len) != 1)
		goto out_ssl;
	*sig = malloc(*siglen);
	if (!*sig) {
		ret = -ENOMEM;
		goto out;
	}
	if (EVP_DigestSign(md, *sig, siglen, (const unsigned char *)data,
			   len) != 1)
		goto out_ssl;
	ret = 0;
	goto out;
out_ssl:
	log_ssl_error("cannot sign the token request with the service account key");
	free(*sig);
	*sig = NULL;
out:
	EVP_MD_CTX_free(md);
	return ret;
}

/* The JSON header and claims of the assertion. */
static int jwt_parts(const char *key_id, const char *email, const char *scope,
		     const char *aud, time_t now, char **header, char **claims)
{
	char *kid = json_escape(key_id ? key_id : "");
	char *iss = json_escape(email), *sc = json_escape(scope);
	char *au = json_escape(aud);
	int ret = -ENOMEM;

	*header = *claims = NULL;
	if (!kid || !iss || !sc || !au)
		goto out;
	if (asprintf(header, "{\"alg\":\"RS256\",\"typ\":\"JWT\"%s%s%s}",
		     key_id ? ",\"kid\":\"" : "", key_id ? kid : "",
		     key_id ? "\"" : "") < 0) {
		*header = NULL;
		goto out;
	}
	if (asprintf(claims,
		     "{\"iss\":\"%s\",\"scope\":\"%s\",\"aud\":\"%s\","
		     "\"iat\":%" PRId64 ",\"exp\":%" PRId64 "}",
		     iss, sc, au, (int64_t)now,
		     (int64_t)now + DV_GCS_JWT_LIFETIME) < 0) {
		*claims = NULL;
		goto out;
	}
	ret = 0;
out:
	free(kid);
	free(iss);
	free(sc);
	free(au);
	return ret;
}

int dv_gcs_jwt_assertion(EVP_PKEY *key, const char *key_id,
			 const char *email, const char *scope,
			 const char *aud, time_t now, char **out)
{
	char *header, *claims, *jwt = NULL, *p;
	unsigned char *sig = NULL;
	size_t siglen = 0, cap = 0, used;
	int ret;

	*out = NULL;
	if (!key || EVP_PKEY_base_id(key) != EVP_PKEY_RSA)
		return -EINVAL;
	ret = jwt_parts(key_id, email, scope, aud, now, &header, &claims);
	if (ret)
		goto out;
	/* Room for three base64 parts; a 16384-bit signature is 2 KiB. */
	cap = 4 * ((strlen(header) + strlen(claims) + 4096) / 3 + 3) + 8;
	jwt = malloc(cap);
	ret = -ENOMEM;
	if (!jwt)
		goto out;
	p = b64_part(jwt, cap, header);
	*p++ = '.';
	p = b64_part(p, cap - (size_t)(p - jwt), claims);
	used = (size_t)(p - jwt);
	ret = rs256(key, jwt, used, &sig, &siglen);
	if (ret)
		goto out;
	ret = -ENOMEM;
	if (4 * ((siglen + 2) / 3) + 2 > cap - used)
		goto out;
	*p++ = '.';
	dv_gcs_base64url(sig, siglen, p, cap - (size_t)(p - jwt));
	*out = jwt;
	jwt = NULL;
	ret = 0;
out:
	free(header);
	free(claims);
	free(sig);
	OPENSSL_clear_free(jwt, cap);
	return ret;
}
