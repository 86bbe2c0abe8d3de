/*
 * The s3 tier (see s3.h): the tier ops over the S3 client (s3_client.h).
 *
 * What it does not do: evict (R9), list, or keep any local state. Two VMs
 * uploading one shard write the same bytes under the same key, so that
 * race is harmless; an upload first asks (HEAD) whether the object is
 * already there, which saves the bytes when another VM won the race.
 * An object of the wrong size is reported as such (-EBADMSG) and replaced
 * by the next upload.
 */
#include "s3.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"
#include "s3_client.h"

struct s3_tier {
	struct dv_tier base;
	struct dv_s3 s3;
	char *prefix;  /* without leading or trailing '/'; "" when none */
};

static struct s3_tier *downcast(struct dv_tier *t)
{
	return dv_tier_downcast(t, &dv_tier_s3_ops);
}

int dv_s3_tier_key(struct dv_tier *t, const char *hash, char *buf, size_t len)
{
	struct s3_tier *st = downcast(t);
	int n = snprintf(buf, len, "%s%s%s.tar", st->prefix,
			 st->prefix[0] ? "/" : "", hash);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int s3_lookup(struct dv_tier *t, const char *hash, uint64_t size)
{
	char key[1200];
	uint64_t have = 0;
	int ret = dv_s3_tier_key(t, hash, key, sizeof(key));

	if (ret)
		return ret;
	ret = dv_s3_head(&downcast(t)->s3, key, &have);
	if (ret)
		return ret;
	if (have != size) {
		dv_warn("tier '%s': %s holds %" PRIu64 " bytes, expected %" PRIu64
			"; it will be replaced", t->name, key, have, size);
		return -EBADMSG;
	}
	return 0;
}

static int s3_download(struct dv_tier *t, const char *hash, uint64_t size,
		       struct dv_sink *sink)
{
	char key[1200];
	int ret = dv_s3_tier_key(t, hash, key, sizeof(key));

	if (ret)
		return ret;
	return dv_s3_get(&downcast(t)->s3, key, size, sink);
}

static int s3_download_range(struct dv_tier *t, const char *hash,
			     uint64_t size, uint64_t off, uint64_t len,
			     void *buf)
{
	char key[1200];
	int ret = dv_s3_tier_key(t, hash, key, sizeof(key));

	if (ret)
		return ret;
	return dv_s3_get_range(&downcast(t)->s3, key, size, off, len, buf);
}

static int s3_install(struct dv_tier *t, const char *hash, int src_fd,
		      const char *src_path, uint64_t size, unsigned flags)
{
	struct s3_tier *st = downcast(t);
	char key[1200];
	uint64_t have = 0;
	int ret;

	if (t->max_bytes && size > t->max_bytes)
		return -EFBIG;
	ret = dv_s3_tier_key(t, hash, key, sizeof(key));
	if (ret)
		return ret;
	/* Another VM may have uploaded it meanwhile. */
	ret = dv_s3_head(&st->s3, key, &have);
	if (ret == 0 && have == size)
		return 0;
	if (ret == -EACCES)
		return ret;
	ret = dv_s3_put_file(&st->s3, key, src_fd, size);
	if (ret)
		return ret;
	dv_stat_add(&t->stats.installs, 1);
	dv_stat_add(&t->stats.bytes_in, size);
	return 0;
}

static void s3_destroy(struct dv_tier *t)
{
	struct s3_tier *st = downcast(t);

	dv_s3_release(&st->s3);
	free(st->prefix);
	dv_tier_release(t);
	free(st);
}

static void s3_describe(struct dv_tier *t, struct dv_tier_desc *d)
{
	struct s3_tier *st = downcast(t);

	dv_s3_shown(&st->s3, st->prefix, d->where, sizeof(d->where));
	d->capacity = t->max_bytes;
	d->note = "remote: never evicts (R9)";
}

const struct dv_tier_ops dv_tier_s3_ops = {
	.type = "s3",
	.caps = DV_TIER_REMOTE,
	.destroy = s3_destroy,
	.lookup = s3_lookup,
	.download = s3_download,
	.download_range = s3_download_range,
	.install = s3_install,
	.describe = s3_describe,
};

static char *clean_prefix(const char *p)
{
	size_t len;

	if (!p)
		return strdup("");
	while (*p == '/')
		p++;
	len = strlen(p);
	while (len > 0 && p[len - 1] == '/')
		len--;
	return strndup(p, len);
}

int dv_s3_tier_new(const struct dv_tier_config *tc,
		   const struct dv_config *cfg, struct dv_tier **out,
		   char *err, size_t errlen)
{
	struct s3_tier *st = calloc(1, sizeof(*st));
	struct dv_s3_config sc = {
		.bucket = tc->bucket,
		.region = tc->region,
		.endpoint = tc->endpoint,
		.http = cfg ? &cfg->http : NULL,
	};
	char who[300];
	int ret = -ENOMEM;

	if (!st)
		goto out_nomem;
	if (!tc->bucket || !*tc->bucket) {
		snprintf(err, errlen, "tier '%s': an s3 tier needs a bucket",
			 tc->name ? tc->name : "?");
		free(st);
		return -EINVAL;
	}
	ret = dv_tier_init(&st->base, &dv_tier_s3_ops, tc->name,
			   DV_TIER_TYPE_S3, tc->max_bytes);
	if (ret) {
		free(st);
		goto out_nomem;
	}
	snprintf(who, sizeof(who), "tier '%s'", st->base.name);
	sc.who = who;
	st->prefix = clean_prefix(tc->prefix);
	ret = st->prefix ? dv_s3_init(&st->s3, &sc, err, errlen) : -ENOMEM;
	if (ret) {
		free(st->prefix);
		dv_tier_release(&st->base);
		free(st);
		if (ret == -ENOMEM)
			goto out_nomem;
		return ret;
	}
	*out = &st->base;
	return 0;
out_nomem:
	snprintf(err, errlen, "tier '%s': out of memory",
		 tc->name ? tc->name : "?");
	return -ENOMEM;
}

void dv_s3_tier_tune(struct dv_tier *t, uint64_t threshold,
		     uint64_t part_size, unsigned threads)
{
	struct s3_tier *st = downcast(t);

	st->s3.multipart_threshold = threshold;
	st->s3.part_size = part_size;
	st->s3.part_threads = threads;
}
