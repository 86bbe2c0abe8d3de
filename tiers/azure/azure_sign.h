/*
 * Azure Storage request authorization that needs no network: Shared Key
 * signatures, SAS tokens and connection strings.
 *
 * Shared Key (the "2009-09-19 and later" scheme): HMAC-SHA256, keyed with
 * the base64-decoded account key, over
 *
 *   VERB \n Content-Encoding \n Content-Language \n Content-Length \n
 *   Content-MD5 \n Content-Type \n Date \n If-Modified-Since \n If-Match \n
 *   If-None-Match \n If-Unmodified-Since \n Range \n
 *   <x-ms-* headers: lowercase name, sorted in the service's order
 *    (punctuation before digits), "name:value\n">
 *   /<account><URL path, as sent: still percent-encoded>
 *   <"\n" name ":" value for each query parameter: lowercase name, sorted,
 *    values decoded and comma-joined>
 *
 * A Content-Length of 0 is signed as empty. With path-style URLs
 * (emulators, IP hosts) the path already starts with /<account>, so the
 * account is named twice, as the service expects.
 *
 * Everything here handles secrets: keys are wiped when released, and no
 * function logs.
 */
#ifndef DV_AZURE_SIGN_H
#define DV_AZURE_SIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define DV_AZ_ACCOUNT_MAX 64   /* account names are 3-24 characters */
#define DV_AZ_KEY_MAX 128      /* decoded key bytes (Azure's are 64) */
#define DV_AZ_AUTH_MAX 160     /* "SharedKey <account>:<base64 MAC>" */
#define DV_AZ_STS_MAX (16u << 10) /* string-to-sign */

struct dv_az_key {
	char account[DV_AZ_ACCOUNT_MAX];
	uint8_t key[DV_AZ_KEY_MAX];
	size_t keylen;
};

/*
 * Fills @k from an account name and a base64 account key. 0, or -EINVAL
 * when the name is empty or too long or the key is not base64 (the
 * message, if any, is the caller's: it must not quote the key).
 */
int dv_az_key_init(struct dv_az_key *k, const char *account,
		   const char *key_b64);

/* Wipes @k. */
void dv_az_key_wipe(struct dv_az_key *k);

struct dv_az_sign_input {
	const char *method;          /* "GET", "PUT"… */
	const char *path;            /* URL path as sent ("/acct/cont/blob") */
	const char *query;           /* without '?', or NULL */
	const char *const *headers;  /* "Name: value", NULL-terminated */
	uint64_t content_length;     /* of the request body; 0 if none */
};

/*
 * Writes the string-to-sign of @in for @account into @out. Returns its
 * length, or -ENAMETOOLONG when it does not fit, -EINVAL on a malformed
 * header or query. For tests and debugging: it holds no secret.
 */
int dv_az_string_to_sign(const char *account,
			 const struct dv_az_sign_input *in, char *out,
			 size_t outlen);

/*
 * Writes the Authorization value "SharedKey <account>:<signature>" for
 * @in into @out (at least DV_AZ_AUTH_MAX bytes). 0 or -errno.
 */
int dv_az_sharedkey(const struct dv_az_key *k,
		    const struct dv_az_sign_input *in, char *out,
		    size_t outlen);

/* RFC 1123 date for x-ms-date ("Sun, 06 Nov 1994 08:49:37 GMT"). */
void dv_az_http_date(time_t t, char *buf, size_t len);

/*
 * A SAS token as configured ("?sv=…&sig=…" or "sv=…"), made ready to
 * append to a query: leading '?' and surrounding blanks removed. *@out is
 * a new string. -EINVAL when empty or when it holds characters a query
 * cannot (blanks, '#', controls), -ENOMEM.
 */
int dv_az_sas_clean(const char *sas, char **out);

/* The parts of a storage connection string this daemon uses. */
struct dv_az_connstr {
	char *account;        /* AccountName */
	char *key;            /* AccountKey (a secret) */
	char *sas;            /* SharedAccessSignature (a secret) */
};

/*
 * Parses "Key=Value;Key=Value…" (keys case-insensitive, values may hold
 * '='). 0 with the parts found (any may be NULL), -EINVAL when a segment
 * has no '=', -ENOMEM. Release with dv_az_connstr_release().
 */
int dv_az_connstr_parse(const char *s, struct dv_az_connstr *out);
void dv_az_connstr_release(struct dv_az_connstr *c);

/*
 * Percent-encodes @s into a new string: every byte but A-Z a-z 0-9 - . _ ~
 * (and '/' when @keep_slash). NULL on out of memory.
 */
char *dv_az_url_encode(const char *s, bool keep_slash);

/* Wipes and frees a secret string; NULL is a no-op. */
void dv_az_free_secret(char *s);

#endif
