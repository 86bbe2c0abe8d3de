/*
 * The status document. Counters are read without locks (they are atomic);
 * tier usage is measured on each read of the file, which is what an
 * operator asking for status wants. The Prometheus exporter (metrics.c)
 * reports the same numbers under the names of docs/design.md.
 */
#include "status.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics.h"
#include "text.h"
#include "tiers/core/fill.h"
#include "writeback/writeback.h"

void dv_status_snapshot(struct dv_fs *fs, struct dv_status_totals *out)
{
	size_t n = dv_hierarchy_ntiers(fs->hier);

	memset(out, 0, sizeof(*out));
	dv_hierarchy_stats(fs->hier, &out->hier, NULL);
	dv_ns_stats(fs->ns, &out->ns);
	for (size_t i = 0; i < n; i++) {
		struct dv_tier *t = dv_hierarchy_tier(fs->hier, i);

		out->served += dv_stat_get(&t->stats.bytes_served);
		out->tier_errors += dv_stat_get(&t->stats.errors);
	}
	/* Every byte served that the origin did not send is egress saved. */
	out->saved = out->served > out->hier.fetch_bytes ?
			     out->served - out->hier.fetch_bytes : 0;
	out->dollars = (double)out->saved / 1e9 * fs->cfg->dollars_per_gb;
}

static void put_tier(struct dv_text *o, struct dv_tier *t, bool last)
{
	struct dv_tier_usage u = { 0 };

	dv_tier_usage(t, &u);
	dv_text_printf(o, "    {\"name\": ");
	dv_text_json_str(o, t->name);
	dv_text_printf(o, ", \"type\": ");
	dv_text_json_str(o, dv_tier_type_name(t->type));
	dv_text_printf(o,
		       ", \"used_bytes\": %" PRIu64
		       ", \"capacity_bytes\": %" PRIu64
		       ", \"free_bytes\": %" PRIu64 ", \"objects\": %" PRIu64
		       ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
		       ", \"bytes_served\": %" PRIu64 ", \"bytes_in\": %" PRIu64
		       ", \"installs\": %" PRIu64 ", \"evictions\": %" PRIu64
		       ", \"errors\": %" PRIu64
		       ", \"verify_failures\": %" PRIu64 "}%s\n",
		       u.used_bytes, u.capacity, u.fs_free, u.objects,
		       dv_stat_get(&t->stats.hits),
		       dv_stat_get(&t->stats.misses),
		       dv_stat_get(&t->stats.bytes_served),
		       dv_stat_get(&t->stats.bytes_in),
		       dv_stat_get(&t->stats.installs),
		       dv_stat_get(&t->stats.evictions),
		       dv_stat_get(&t->stats.errors),
		       dv_stat_get(&t->stats.verify_failures), last ? "" : ",");
}

static void put_stream(void *arg, struct dv_fill *f)
{
	struct dv_text *o = arg;
	struct dv_fill_progress p;

	dv_fill_progress(f, &p);
	dv_text_printf(o, "%s\n    {\"shard\": ", o->len && o->buf[o->len - 1] == '[' ? "" : ",");
	dv_text_json_str(o, dv_fill_label(f));
	dv_text_printf(o, ", \"hash\": \"%s\", \"size\": %" PRIu64
			  ", \"chunks\": %" PRIu32 ", \"done\": %" PRIu32
			  ", \"in_flight\": %" PRIu32 ", \"failed\": %" PRIu32
			  ", \"reused\": %" PRIu32 ", \"fetched_bytes\": %" PRIu64 "}",
		       dv_fill_hash(f), dv_fill_size(f), p.chunks, p.done,
		       p.in_flight, p.failed, p.reused, p.fetched_bytes);
}

/* Streaming fills: the totals, and each one running now with its progress. */
static void put_streams(struct dv_text *o, struct dv_fs *fs,
			const struct dv_status_totals *s)
{
	dv_text_printf(o, "  \"chunks_fetched\": %" PRIu64
			  ",\n  \"chunk_waits\": %" PRIu64
			  ",\n  \"chunk_fetches_in_flight\": %" PRIu64
			  ",\n  \"streaming\": [",
		       s->hier.chunks_fetched, s->hier.chunk_waits,
		       s->hier.chunks_in_flight);
	dv_hierarchy_streams(fs->hier, put_stream, o);
	dv_text_printf(o, "%s],\n", o->len && o->buf[o->len - 1] == '[' ? "" : "\n  ");
}

static void put_errors(struct dv_text *o, struct dv_fs *fs,
		       const struct dv_status_totals *s)
{
	dv_text_printf(o,
		       "  \"errors\": {\"origin\": %" PRIu64 ", \"fill\": %" PRIu64
		       ", \"verify\": %" PRIu64 ", \"open\": %" PRIu64
		       ", \"tier\": %" PRIu64 ", \"manifest\": %" PRIu64
		       ", \"manifest_rejected\": %" PRIu64 "},\n",
		       dv_stat_get(&fs->origin->errors), s->hier.fetch_errors,
		       s->hier.verify_failures, dv_stat_get(&fs->read_errors),
		       s->tier_errors, s->ns.refresh_errors,
		       s->ns.rejected_manifests);
}

/* "read_path" and, when it is not passthrough, "read_path_reason": why. */
static void put_read_path(struct dv_text *o, struct dv_fs *fs)
{
	bool pt = __atomic_load_n(&fs->passthrough, __ATOMIC_ACQUIRE);
	const char *why = __atomic_load_n(&fs->read_path_why, __ATOMIC_ACQUIRE);

	dv_text_printf(o, ",\n  \"read_path\": \"%s\",\n  \"read_path_reason\": ",
		       pt ? "passthrough" : "keep_cache");
	dv_text_json_str(o, pt ? NULL : why);
}

/* "fuse_transport" (io_uring or /dev/fuse) and, on /dev/fuse, why. */
static void put_transport(struct dv_text *o, struct dv_fs *fs)
{
	bool ur = __atomic_load_n(&fs->uring, __ATOMIC_ACQUIRE);
	const char *why = __atomic_load_n(&fs->transport_why, __ATOMIC_ACQUIRE);

	dv_text_printf(o, ",\n  \"fuse_transport\": \"%s\",\n  \"fuse_transport_reason\": ",
		       ur ? "io_uring" : "/dev/fuse");
	dv_text_json_str(o, ur ? NULL : why);
	dv_text_printf(o, ",\n  \"fuse_request_bytes\": %" PRIu32, fs->request_bytes);
}

char *dv_status_json(struct dv_fs *fs, size_t *len)
{
	struct dv_text o = { 0 };
	struct dv_status_totals s;
	size_t n = dv_hierarchy_ntiers(fs->hier);

	dv_status_snapshot(fs, &s);
	dv_text_printf(&o, "{\n  \"version\": \"%s\",\n  \"origin\": ",
		       DV_VERSION);
	dv_text_json_str(&o, fs->origin->url);
	dv_text_printf(&o, ",\n  \"config\": ");
	dv_text_json_str(&o, fs->cfg->path);
	dv_text_printf(&o, ",\n  \"config_source\": ");
	dv_text_json_str(&o, dv_config_source_name(fs->cfg->source));
	put_read_path(&o, fs);
	put_transport(&o, fs);
	dv_text_printf(&o, ",\n  \"verify\": ");
	dv_text_json_str(&o, dv_verify_mode_name(fs->cfg->verify));
	dv_text_printf(&o, ",\n  \"metrics\": ");
	dv_text_json_str(&o, fs->metrics ? dv_metrics_address(fs->metrics) :
					   NULL);
	dv_text_printf(&o, ",\n  \"uptime_seconds\": %" PRIu64 ",\n",
		       (uint64_t)time(NULL) - fs->started);
	dv_text_printf(&o, "  \"datasets\": %" PRIu64 ",\n  \"shards\": %" PRIu64
			   ",\n", s.ns.datasets, s.ns.shards);
	dv_text_printf(&o, "  \"pins_loaded\": %" PRIu64
			   ",\n  \"pins_referenced\": %" PRIu64
			   ",\n  \"pins_evicted\": %" PRIu64 ",\n",
		       s.ns.pins_loaded, s.ns.pins_referenced,
		       s.ns.pins_evicted);
	dv_text_printf(&o, "  \"tiers\": [\n");
	for (size_t i = 0; i < n; i++)
		put_tier(&o, dv_hierarchy_tier(fs->hier, i), i + 1 == n);
	dv_text_printf(&o, "  ]");
	if (fs->wb)
		dv_wb_status_json(fs->wb, &o);
	dv_text_printf(&o, ",\n");
	dv_text_printf(&o, "  \"origin_requests\": %" PRIu64
			   ",\n  \"origin_bytes\": %" PRIu64
			   ",\n  \"origin_errors\": %" PRIu64 ",\n",
		       dv_stat_get(&fs->origin->requests),
		       dv_stat_get(&fs->origin->bytes),
		       dv_stat_get(&fs->origin->errors));
	dv_text_printf(&o, "  \"fills\": %" PRIu64 ",\n  \"fill_bytes\": %" PRIu64
			   ",\n  \"fill_errors\": %" PRIu64
			   ",\n  \"promotions\": %" PRIu64
			   ",\n  \"verify_failures\": %" PRIu64 ",\n",
		       s.hier.fetches, s.hier.fetch_bytes, s.hier.fetch_errors,
		       s.hier.promotions, s.hier.verify_failures);
	dv_text_printf(&o, "  \"bytes_served\": %" PRIu64
			   ",\n  \"bytes_read\": %" PRIu64
			   ",\n  \"bytes_read_io_uring\": %" PRIu64
			   ",\n  \"bytes_saved\": %" PRIu64
			   ",\n  \"dollars_per_gb\": %.4f"
			   ",\n  \"dollars_saved\": %.4f,\n",
		       s.served, dv_stat_get(&fs->read_bytes),
		       dv_stat_get(&fs->read_bytes_uring), s.saved,
		       fs->cfg->dollars_per_gb, s.dollars);
	put_streams(&o, fs, &s);
	put_errors(&o, fs, &s);
	dv_text_printf(&o, "  \"open_files\": %" PRIu64
			   ",\n  \"read_errors\": %" PRIu64
			   ",\n  \"manifest_refreshes\": %" PRIu64
			   ",\n  \"manifest_errors\": %" PRIu64
			   ",\n  \"rejected_manifests\": %" PRIu64 "\n}\n",
		       dv_stat_get(&fs->open_files),
		       dv_stat_get(&fs->read_errors), s.ns.refreshes,
		       s.ns.refresh_errors, s.ns.rejected_manifests);
	return dv_text_finish(&o, len);
}
