/*
 * The origin dispatcher: picks the backend from the URL's kind, and turns
 * an origin into the fetcher the hierarchy calls on a full miss. Backends
 * (origin_http.c, origin_file.c, origin_s3.c) do the work; nothing here
 * touches the network or the disk.
 */
#include "origin.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/log.h"
#include "tiers/core/chunks.h"
#include "tiers/net/http.h"
#include "origin_impl.h"

typedef int (*origin_new_fn)(const char *url, const struct dv_http_config *http,
			     struct dv_origin **out, char *err, size_t errlen);

static const struct {
	const char *prefix;
	origin_new_fn create;
} kinds[] = {
	{ .prefix = "http://", .create = dv_origin_http_new },
	{ .prefix = "https://", .create = dv_origin_http_new },
	{ .prefix = "file://", .create = dv_origin_file_new },
	{ .prefix = "/", .create = dv_origin_file_new },
	{ .prefix = "s3://", .create = dv_origin_s3_new },
};

int dv_origin_new(const char *url, const struct dv_http_config *http,
		  struct dv_origin **out, char *err, size_t errlen)
{
	char shown[512];

	*out = NULL;
	if (!url || !*url) {
		snprintf(err, errlen, "origin: empty URL");
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strncasecmp(url, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
			return kinds[i].create(url, http, out, err, errlen);
	}
	/* The URL may hold credentials: only its redacted form is echoed. */
	dv_http_redact(url, shown, sizeof(shown));
	if (!strstr(url, "://"))
		snprintf(err, errlen,
			 "origin \"%s\" is a relative path: give an absolute path or a file:// URL",
			 shown);
	else
		snprintf(err, errlen,
			 "origin \"%s\" is not supported: use http://, https://, file://, s3:// or an absolute path",
			 shown);
	return -EINVAL;
}

void dv_origin_free(struct dv_origin *o)
{
	if (!o)
		return;
	if (o->ops->release)
		o->ops->release(o);
	free(o->url);
	free(o);
}

bool dv_origin_relpath_ok(const char *relpath)
{
	size_t len;

	if (!relpath || !*relpath || relpath[0] == '/')
		return false;
	len = strlen(relpath);
	if (len > 1024 || strstr(relpath, "..") || strstr(relpath, "//"))
		return false;
	/* Parts are [A-Za-z0-9._-]+: nothing that a URL would need escaped. */
	return strspn(relpath, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			       "0123456789._-/") == len;
}

int dv_origin_get_doc(struct dv_origin *o, const char *relpath,
		      const char *etag, char **body, size_t *len,
		      char **etag_out)
{
	*body = NULL;
	*len = 0;
	if (etag_out)
		*etag_out = NULL;
	if (!dv_origin_relpath_ok(relpath)) {
		dv_warn("origin: refusing unsafe document path \"%.200s\"",
			relpath ? relpath : "");
		return -EINVAL;
	}
	return o->ops->get_doc(o, relpath, etag, body, len, etag_out);
}

static int origin_fetch(void *arg, const struct dv_shard_ref *ref,
			struct dv_sink *sink)
{
	struct dv_origin *o = arg;

	return o->ops->fetch_shard(o, ref->hash, ref->size, sink);
}

/* shards/<hash>.chunks, checked against the manifest's pin. */
static int origin_chunks(void *arg, const struct dv_shard_ref *ref,
			 struct dv_chunks *out)
{
	struct dv_origin *o = arg;
	char rel[96], why[160], *body = NULL;
	size_t len = 0;
	int ret;

	if (!ref->chunks_pin)
		return -EINVAL;
	snprintf(rel, sizeof(rel), "shards/%s.chunks", ref->hash);
	ret = dv_origin_get_doc(o, rel, NULL, &body, &len, NULL);
	if (ret == 0) {
		ret = dv_chunks_parse(body, len, ref->chunks_pin, ref->size,
				      out, why, sizeof(why));
		if (ret)
			dv_err("origin: %s (%s): %s", rel,
			       ref->label ? ref->label : ref->hash, why);
	}
	free(body);
	return ret;
}

static int origin_fetch_range(void *arg, const struct dv_shard_ref *ref,
			      uint64_t off, uint64_t len, void *buf)
{
	struct dv_origin *o = arg;

	return o->ops->fetch_range(o, ref->hash, ref->size, off, len, buf);
}

void dv_origin_fetcher(struct dv_origin *o, struct dv_fetcher *out)
{
	memset(out, 0, sizeof(*out));
	out->fetch = origin_fetch;
	out->arg = o;
	if (o->ops->fetch_range) {
		out->chunks = origin_chunks;
		out->fetch_range = origin_fetch_range;
	}
}
