/*
 * The S3 origin: s3://bucket[/prefix], the origin layout stored as
 * objects (<prefix>/datasets.json, <prefix>/<dataset>/manifest.json,
 * <prefix>/shards/<hash>.tar). Requests are signed with the AWS
 * credential chain; the region comes from the chain's sources
 * (AWS_REGION…, the config file), else us-east-1. AWS_ENDPOINT_URL_S3,
 * else AWS_ENDPOINT_URL, points it at an S3-compatible store (path-style),
 * as the AWS SDKs do.
 *
 * Documents are read whole with If-None-Match; shards stream into the
 * verifying sink and resume with a Range (s3_client.c). Creating the
 * origin touches no network.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"
#include "config/util.h"
#include "origin_impl.h"
#include "origin.h"
#include "tiers/s3/s3_client.h"

struct s3_origin {
	struct dv_origin base;
	struct dv_s3 s3;
	char *prefix;  /* "" or "a/b/" (with the trailing '/') */
};

static const struct dv_origin_ops s3_origin_ops;

static struct s3_origin *downcast(struct dv_origin *o)
{
	assert(o->ops == &s3_origin_ops);
	return (struct s3_origin *)o;
}

static int s3_get_doc(struct dv_origin *base, const char *relpath,
		      const char *etag, char **body, size_t *len,
		      char **etag_out)
{
	struct s3_origin *o = downcast(base);
	char *key;
	int ret;

	if (asprintf(&key, "%s%s", o->prefix, relpath) < 0)
		return -ENOMEM;
	ret = dv_s3_get_doc(&o->s3, key, etag, DV_DOC_MAX, body, len, etag_out);
	if (ret < 0)
		__atomic_fetch_add(&base->errors, ret != -ENOENT, __ATOMIC_RELAXED);
	free(key);
	return ret;
}

static int s3_fetch_shard(struct dv_origin *base, const char *hash,
			  uint64_t size, struct dv_sink *sink)
{
	struct s3_origin *o = downcast(base);
	char *key;
	int ret;

	if (!dv_valid_hash(hash)) {
		dv_warn("origin: refusing a malformed content hash");
		return -EINVAL;
	}
	if (asprintf(&key, "%sshards/%s.tar", o->prefix, hash) < 0)
		return -ENOMEM;
	__atomic_fetch_add(&base->requests, 1, __ATOMIC_RELAXED);
	ret = dv_s3_get(&o->s3, key, size, sink);
	if (ret)
		__atomic_fetch_add(&base->errors, 1, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&base->bytes, size, __ATOMIC_RELAXED);
	free(key);
	return ret;
}

static void s3_release(struct dv_origin *base)
{
	struct s3_origin *o = downcast(base);

	dv_s3_release(&o->s3);
	free(o->prefix);
}

static const struct dv_origin_ops s3_origin_ops = {
	.kind = "s3",
	.get_doc = s3_get_doc,
	.fetch_shard = s3_fetch_shard,
	.release = s3_release,
};

/* "s3://bucket/a/b/" → bucket "bucket", prefix "a/b/". */
static int split(const char *url, char **bucket, char **prefix)
{
	const char *b = url + strlen("s3://");
	size_t blen = strcspn(b, "/?#");
	const char *p = b + blen;
	size_t plen;

	if (blen == 0 || blen > 63 || strspn(b, "abcdefghijklmnopqrstuvwxyz"
						"0123456789.-") < blen ||
	    strpbrk(p, "?#"))
		return -EINVAL;
	while (*p == '/')
		p++;
	plen = strlen(p);
	while (plen > 0 && p[plen - 1] == '/')
		plen--;
	*bucket = strndup(b, blen);
	if (plen == 0)
		*prefix = strdup("");
	else if (asprintf(prefix, "%.*s/", (int)plen, p) < 0)
		*prefix = NULL;
	return *bucket && *prefix ? 0 : -ENOMEM;
}

int dv_origin_s3_new(const char *url, const struct dv_http_config *http,
		     struct dv_origin **out, char *err, size_t errlen)
{
	struct s3_origin *o = calloc(1, sizeof(*o));
	struct dv_s3_config sc = { .who = "origin", .http = http };
	char *bucket = NULL;
	int ret;

	*out = NULL;
	if (!o)
		return -ENOMEM;
	o->base.ops = &s3_origin_ops;
	ret = split(url, &bucket, &o->prefix);
	if (ret == -EINVAL) {
		snprintf(err, errlen,
			 "origin \"%.200s\": an S3 origin is s3://BUCKET or s3://BUCKET/PREFIX (bucket: lower-case letters, digits, '.', '-')",
			 url);
		goto fail;
	}
	if (ret)
		goto fail_nomem;
	sc.bucket = bucket;
	ret = dv_s3_init(&o->s3, &sc, err, errlen);
	if (ret)
		goto fail;
	if (asprintf(&o->base.url, "s3://%s/%s", bucket, o->prefix) < 0) {
		o->base.url = NULL;
		dv_s3_release(&o->s3);
		ret = -ENOMEM;
		goto fail_nomem;
	}
	/* No trailing '/': shown as the user wrote it. */
	if (o->base.url[strlen(o->base.url) - 1] == '/')
		o->base.url[strlen(o->base.url) - 1] = '\0';
	free(bucket);
	*out = &o->base;
	return 0;
fail_nomem:
	snprintf(err, errlen, "origin: out of memory");
fail:
	free(bucket);
	free(o->prefix);
	free(o);
	return ret;
}
