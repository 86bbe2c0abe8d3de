/*
 * The status document. Counters are read without locks (they are atomic);
 * tier usage is measured on each read of the file, which is what an
 * operator asking for status wants.
 */
#include "status.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->failed = true;
			return;
		}
		if ((size_t)n < o->cap - o->len)
			break;
		o->cap = (o->cap + (size_t)n + 1) * 2;
		char *nb = o->cap < (16u << 20) ? realloc(o->buf, o->cap) : NULL;

		if (!nb) {
			o->failed = true;
			return;
		}
		o->buf = nb;
	}
	o->len += (size_t)n;
}

/* A JSON string; names come from validated config and manifests. */
static void put_str(struct out *o, const char *s)
{
	put(o, "\"");
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			put(o, "\\%c", c);
		else if (c < 0x20)
			put(o, "\\u%04x", c);
		else
			put(o, "%c", c);
	}
	put(o, "\"");
}

static void put_tier(struct out *o, struct dv_tier *t, bool last)
{
	struct dv_tier_usage u = { 0 };

	if (t->ops->usage)
		t->ops->usage(t, &u);
	put(o, "    {\"name\": ");
	put_str(o, t->name);
	put(o, ", \"type\": ");
	put_str(o, dv_tier_type_name(t->type));
	put(o, ", \"used_bytes\": %" PRIu64 ", \"capacity_bytes\": %" PRIu64
	       ", \"objects\": %" PRIu64 ", \"hits\": %" PRIu64
	       ", \"misses\": %" PRIu64 ", \"bytes_served\": %" PRIu64
	       ", \"bytes_in\": %" PRIu64 ", \"evictions\": %" PRIu64
	       ", \"errors\": %" PRIu64 ", \"verify_failures\": %" PRIu64 "}%s\n",
	    u.used_bytes, u.capacity, u.objects, dv_stat_get(&t->stats.hits),
	    dv_stat_get(&t->stats.misses), dv_stat_get(&t->stats.bytes_served),
	    dv_stat_get(&t->stats.bytes_in), dv_stat_get(&t->stats.evictions),
	    dv_stat_get(&t->stats.errors),
	    dv_stat_get(&t->stats.verify_failures), last ? "" : ",");
}

char *dv_status_json(struct dv_fs *fs, size_t *len)
{
	struct out o = { .cap = 4096 };
	struct dv_hierarchy_stats hs;
	struct dv_ns_stats ns;
	uint64_t served = 0, saved;
	size_t n = dv_hierarchy_ntiers(fs->hier);

	o.buf = malloc(o.cap);
	if (!o.buf)
		return NULL;
	dv_hierarchy_stats(fs->hier, &hs, NULL);
	dv_ns_stats(fs->ns, &ns);
	for (size_t i = 0; i < n; i++)
		served += dv_stat_get(&dv_hierarchy_tier(fs->hier, i)->stats.bytes_served);
	/* Every byte served that the origin did not send is egress saved. */
	saved = served > hs.fetch_bytes ? served - hs.fetch_bytes : 0;

	put(&o, "{\n  \"origin\": ");
	put_str(&o, fs->origin->url);
	put(&o, ",\n  \"read_path\": \"%s\",\n",
	    fs->passthrough ? "passthrough" : "keep_cache");
	put(&o, "  \"uptime_seconds\": %" PRIu64 ",\n",
	    (uint64_t)time(NULL) - fs->started);
	put(&o, "  \"datasets\": %" PRIu64 ",\n  \"shards\": %" PRIu64 ",\n",
	    ns.datasets, ns.shards);
	put(&o, "  \"tiers\": [\n");
	for (size_t i = 0; i < n; i++)
		put_tier(&o, dv_hierarchy_tier(fs->hier, i), i + 1 == n);
	put(&o, "  ],\n");
	put(&o, "  \"origin_requests\": %" PRIu64 ",\n  \"origin_bytes\": %" PRIu64
		",\n  \"origin_errors\": %" PRIu64 ",\n",
	    dv_stat_get(&fs->origin->requests), dv_stat_get(&fs->origin->bytes),
	    dv_stat_get(&fs->origin->errors));
	put(&o, "  \"fills\": %" PRIu64 ",\n  \"fill_errors\": %" PRIu64
		",\n  \"verify_failures\": %" PRIu64 ",\n",
	    hs.fetches, hs.fetch_errors, hs.verify_failures);
	put(&o, "  \"bytes_served\": %" PRIu64 ",\n  \"bytes_saved\": %" PRIu64
		",\n  \"dollars_saved\": %.4f,\n",
	    served, saved, (double)saved / 1e9 * fs->cfg->dollars_per_gb);
	put(&o, "  \"open_files\": %" PRIu64 ",\n  \"read_errors\": %" PRIu64
		",\n  \"manifest_refreshes\": %" PRIu64
		",\n  \"manifest_errors\": %" PRIu64
		",\n  \"rejected_manifests\": %" PRIu64 "\n}\n",
	    dv_stat_get(&fs->open_files), dv_stat_get(&fs->read_errors),
	    ns.refreshes, ns.refresh_errors, ns.rejected_manifests);
	if (o.failed) {
		free(o.buf);
		return NULL;
	}
	*len = o.len;
	return o.buf;
}
