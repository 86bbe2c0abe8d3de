/*
 * Shared Key signing, SAS tokens and connection strings (azure_sign.h).
 * Pure functions over strings: no network, no logging, no globals. They
 * are tested against Microsoft's Python SDK (azure-storage-blob) and the
 * testkit's azsign.py, and Azurite checks every signature of the
 * integration tests.
 */
#include "azure_sign.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_XMS_HEADERS 32
#define MAX_QUERY_PARAMS 32
#define PARAM_MAX 1024

/* The standard headers of the string-to-sign, in order (Content-Length
 * comes from the request body, not from here). */
static const char *const std_headers[] = {
	"content-encoding", "content-language", NULL /* content-length */,
	"content-md5", "content-type", "date", "if-modified-since",
	"if-match", "if-none-match", "if-unmodified-since", "range",
};

/* ---- a bounded string builder ---- */

struct out {
	char *buf;
	size_t len, cap;
	bool overflow;
};

static void put_mem(struct out *o, const char *s, size_t n)
{
	if (o->overflow || n >= o->cap - o->len) {
		o->overflow = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

static void put(struct out *o, const char *s)
{
	put_mem(o, s, strlen(s));
}

/* ---- headers ---- */

struct header {
	char name[64];      /* lowercase */
	const char *value;  /* trimmed, not NUL-terminated: see vlen */
	size_t vlen;
};

static int split_header(const char *line, struct header *h)
{
	const char *colon = strchr(line, ':');
	size_t n;

	if (!colon)
		return -EINVAL;
	n = (size_t)(colon - line);
	while (n > 0 && isspace((unsigned char)line[n - 1]))
		n--;
	if (n == 0 || n >= sizeof(h->name))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		h->name[i] = (char)tolower((unsigned char)line[i]);
	h->name[n] = '\0';
	h->value = colon + 1;
	while (isspace((unsigned char)*h->value))
		h->value++;
	h->vlen = strlen(h->value);
	while (h->vlen > 0 && isspace((unsigned char)h->value[h->vlen - 1]))
		h->vlen--;
	return 0;
}

/* The value of the last header named @lname, or NULL. */
static int find_header(const char *const *headers, const char *lname,
		       struct header *found)
{
	bool have = false;
	struct header h;

	for (size_t i = 0; headers && headers[i]; i++) {
		if (split_header(headers[i], &h))
			return -EINVAL;
		if (strcmp(h.name, lname) == 0) {
			*found = h;
			have = true;
		}
	}
	return have ? 0 : -ENOENT;
}

/*
 * The order the service sorts x-ms-* names in, as Microsoft's SDKs
 * emulate it (azure-storage-blob's _storage_header_sort): not ASCII, since
 * punctuation comes before digits ("x-ms-meta-a_b" before
 * "x-ms-meta-a0"). Names are lowercase here; a character outside the
 * list (none is valid in a header name) sorts last.
 */
static const char header_order[] =
	"-!#$%&*.^_|~+\"'(),/`0123456789:;<=>?@abcdefghijklmnopqrstuvwxyz{}";

static int weight(char c)
{
	const char *p = c ? strchr(header_order, c) : NULL;

	return p ? (int)(p - header_order) : (int)sizeof(header_order);
}

static int by_name(const void *a, const void *b)
{
	const char *x = ((const struct header *)a)->name;
	const char *y = ((const struct header *)b)->name;

	while (*x && *x == *y) {
		x++;
		y++;
	}
	if (!*x || !*y)
		return (unsigned char)*x - (unsigned char)*y;
	return weight(*x) - weight(*y);
}

static int put_xms_headers(struct out *o, const char *const *headers)
{
	struct header h[MAX_XMS_HEADERS];
	size_t n = 0;

	for (size_t i = 0; headers && headers[i]; i++) {
		struct header one;

		if (split_header(headers[i], &one))
			return -EINVAL;
		if (strncmp(one.name, "x-ms-", 5) != 0)
			continue;
		if (n == MAX_XMS_HEADERS)
			return -E2BIG;
		h[n++] = one;
	}
	qsort(h, n, sizeof(h[0]), by_name);
	for (size_t i = 0; i < n; i++) {
		put(o, h[i].name);
		put(o, ":");
		put_mem(o, h[i].value, h[i].vlen);
		put(o, "\n");
	}
	return 0;
}

/* ---- the canonicalized resource ---- */

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Percent-decodes @n bytes of @s into @dst (at least n + 1 bytes); a '+'
 * is a blank (query strings, as the service reads them). */
static void pct_decode(const char *s, size_t n, char *dst)
{
	size_t j = 0;

	for (size_t i = 0; i < n; i++) {
		int hi = i + 2 < n ? hexval((unsigned char)s[i + 1]) : -1;
		int lo = i + 2 < n ? hexval((unsigned char)s[i + 2]) : -1;

		if (s[i] == '%' && hi >= 0 && lo >= 0) {
			dst[j++] = (char)(hi * 16 + lo);
			i += 2;
		} else if (s[i] == '+') {
			dst[j++] = ' ';
		} else {
			dst[j++] = s[i];
		}
	}
	dst[j] = '\0';
}

struct param {
	char name[PARAM_MAX];   /* decoded, lowercase */
	char value[PARAM_MAX];  /* decoded */
};

static int by_param(const void *a, const void *b)
{
	const struct param *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static int parse_query(const char *q, struct param *p, size_t *np)
{
	*np = 0;
	while (q && *q) {
		size_t len = strcspn(q, "&");
		const char *eq = memchr(q, '=', len);
		size_t nlen = eq ? (size_t)(eq - q) : len;
		size_t vlen = eq ? len - nlen - 1 : 0;

		if (len > 0) {
			if (*np == MAX_QUERY_PARAMS)
				return -E2BIG;
			if (nlen >= PARAM_MAX || vlen >= PARAM_MAX)
				return -EINVAL;
			pct_decode(q, nlen, p[*np].name);
			for (char *c = p[*np].name; *c; c++)
				*c = (char)tolower((unsigned char)*c);
			pct_decode(eq ? eq + 1 : q + len, vlen, p[*np].value);
			(*np)++;
		}
		q += len;
		if (*q == '&')
			q++;
	}
	qsort(p, *np, sizeof(*p), by_param);
	return 0;
}

/*
 * "/<account><path>" and the query lines. The path is signed as sent,
 * still percent-encoded ("the resource's encoded URI path" of the Shared
 * Key specification; the SDKs and Azurite do the same), so the one string
 * is what goes on the wire and what is signed. Query names and values are
 * decoded, names lowercased and sorted, and a repeated name is one line
 * with its values sorted and comma-joined, as the specification says
 * (the Python SDK and Azurite keep only the last value; neither they nor
 * this daemon send a name twice).
 */
static int put_resource(struct out *o, const char *account,
			const struct dv_az_sign_input *in)
{
	struct param *p = calloc(MAX_QUERY_PARAMS, sizeof(*p));
	size_t np;
	int ret;

	if (!p)
		return -ENOMEM;
	put(o, "/");
	put(o, account);
	put(o, in->path);
	ret = parse_query(in->query, p, &np);
	for (size_t i = 0; ret == 0 && i < np; i++) {
		if (i > 0 && strcmp(p[i].name, p[i - 1].name) == 0) {
			put(o, ",");
		} else {
			put(o, "\n");
			put(o, p[i].name);
			put(o, ":");
		}
		put(o, p[i].value);
	}
	free(p);
	return ret;
}

/* ---- the string-to-sign ---- */

static int put_std_headers(struct out *o, const struct dv_az_sign_input *in)
{
	char num[24];

	for (size_t i = 0; i < sizeof(std_headers) / sizeof(std_headers[0]); i++) {
		struct header h;
		int ret;

		if (!std_headers[i]) {
			if (in->content_length > 0) {
				snprintf(num, sizeof(num), "%llu",
					 (unsigned long long)in->content_length);
				put(o, num);
			}
			put(o, "\n");
			continue;
		}
		ret = find_header(in->headers, std_headers[i], &h);
		if (ret == -EINVAL)
			return ret;
		if (ret == 0)
			put_mem(o, h.value, h.vlen);
		put(o, "\n");
	}
	return 0;
}

int dv_az_string_to_sign(const char *account,
			 const struct dv_az_sign_input *in, char *buf,
			 size_t buflen)
{
	struct out o = { .buf = buf, .cap = buflen };
	int ret;

	if (buflen == 0 || !in->method || !in->path || in->path[0] != '/')
		return -EINVAL;
	buf[0] = '\0';
	for (const char *m = in->method; *m; m++) {
		char c = (char)toupper((unsigned char)*m);

		put_mem(&o, &c, 1);
	}
	put(&o, "\n");
	ret = put_std_headers(&o, in);
	if (ret == 0)
		ret = put_xms_headers(&o, in->headers);
	if (ret == 0)
		ret = put_resource(&o, account, in);
	if (ret)
		return ret;
	return o.overflow ? -ENAMETOOLONG : (int)o.len;
}

int dv_az_sharedkey(const struct dv_az_key *k,
		    const struct dv_az_sign_input *in, char *out,
		    size_t outlen)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	unsigned int maclen = 0;
	char *sts = malloc(DV_AZ_STS_MAX);
	int len, ret = 0;

	if (!sts)
		return -ENOMEM;
	len = dv_az_string_to_sign(k->account, in, sts, DV_AZ_STS_MAX);
	if (len < 0) {
		ret = len;
		goto out;
	}
	if (!HMAC(EVP_sha256(), k->key, (int)k->keylen,
		  (const unsigned char *)sts, (size_t)len, mac, &maclen)) {
		ret = -EIO;
		goto out;
	}
	EVP_EncodeBlock((unsigned char *)b64, mac, (int)maclen);
	if ((size_t)snprintf(out, outlen, "SharedKey %s:%s", k->account, b64) >=
	    outlen)
		ret = -ENAMETOOLONG;
out:
	explicit_bzero(mac, sizeof(mac));
	free(sts);
	return ret;
}

/* ---- keys ---- */

static bool is_b64(const char *s, size_t len)
{
	size_t pad = 0;

	if (len == 0 || len % 4 != 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '=') {
			pad++;
			continue;
		}
		if (pad || !(isalnum(c) || c == '+' || c == '/'))
			return false;
	}
	return pad <= 2;
}

int dv_az_key_init(struct dv_az_key *k, const char *account,
		   const char *key_b64)
{
	size_t alen = account ? strlen(account) : 0;
	size_t klen = key_b64 ? strlen(key_b64) : 0;
	unsigned char tmp[DV_AZ_KEY_MAX + 3];
	int n;

	memset(k, 0, sizeof(*k));
	while (klen > 0 && isspace((unsigned char)key_b64[klen - 1]))
		klen--;
	if (alen == 0 || alen >= sizeof(k->account) || !is_b64(key_b64, klen) ||
	    klen / 4 * 3 > sizeof(tmp))
		return -EINVAL;
	n = EVP_DecodeBlock(tmp, (const unsigned char *)key_b64, (int)klen);
	if (n < 0)
		return -EINVAL;
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	n -= (key_b64[klen - 1] == '=') + (key_b64[klen - 2] == '=');
	if (n <= 0 || (size_t)n > sizeof(k->key)) {
		explicit_bzero(tmp, sizeof(tmp));
		return -EINVAL;
	}
	memcpy(k->key, tmp, (size_t)n);
	k->keylen = (size_t)n;
	explicit_bzero(tmp, sizeof(tmp));
	memcpy(k->account, account, alen + 1);
	return 0;
}

void dv_az_key_wipe(struct dv_az_key *k)
{
	explicit_bzero(k, sizeof(*k));
}

void dv_az_http_date(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* ---- SAS and connection strings ---- */

int dv_az_sas_clean(const char *sas, char **out)
{
	size_t len;

	*out = NULL;
	if (!sas)
		return -EINVAL;
	while (isspace((unsigned char)*sas))
		sas++;
	if (*sas == '?')
		sas++;
	len = strlen(sas);
	while (len > 0 && isspace((unsigned char)sas[len - 1]))
		len--;
	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)sas[i];

		if (c <= 0x20 || c >= 0x7f || c == '#')
			return -EINVAL;
	}
	*out = strndup(sas, len);
	return *out ? 0 : -ENOMEM;
}

void dv_az_free_secret(char *s)
{
	if (!s)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

static int take_value(char **slot, const char *v, size_t len)
{
	dv_az_free_secret(*slot);
	*slot = strndup(v, len);
	return *slot ? 0 : -ENOMEM;
}

int dv_az_connstr_parse(const char *s, struct dv_az_connstr *out)
{
	int ret = 0;

	memset(out, 0, sizeof(*out));
	while (s && *s && ret == 0) {
		size_t len = strcspn(s, ";");
		const char *eq = memchr(s, '=', len);
		size_t nlen = eq ? (size_t)(eq - s) : 0;
		const char *v = eq ? eq + 1 : NULL;
		size_t vlen = eq ? len - nlen - 1 : 0;

		if (len > 0 && !eq)
			ret = -EINVAL;
		else if (nlen == 11 && strncasecmp(s, "AccountName", 11) == 0)
			ret = take_value(&out->account, v, vlen);
		else if (nlen == 10 && strncasecmp(s, "AccountKey", 10) == 0)
			ret = take_value(&out->key, v, vlen);
		else if (nlen == 21 &&
			 strncasecmp(s, "SharedAccessSignature", 21) == 0)
			ret = take_value(&out->sas, v, vlen);
		s += len;
		if (*s == ';')
			s++;
	}
	if (ret)
		dv_az_connstr_release(out);
	return ret;
}

void dv_az_connstr_release(struct dv_az_connstr *c)
{
	dv_az_free_secret(c->account);
	dv_az_free_secret(c->key);
	dv_az_free_secret(c->sas);
	memset(c, 0, sizeof(*c));
}

char *dv_az_url_encode(const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t len = strlen(s);
	char *out = malloc(3 * len + 1);
	size_t j = 0;

	if (!out)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
		    (keep_slash && c == '/')) {
			out[j++] = (char)c;
		} else {
			out[j++] = '%';
			out[j++] = hex[c >> 4];
			out[j++] = hex[c & 15];
		}
	}
	out[j] = '\0';
	return out;
}
