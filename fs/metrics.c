/*
 * The Prometheus exporter (metrics.h): the exposition text, served by
 * libmicrohttpd on a socket bound here. What it does not do: keep-alive,
 * TLS, authentication (it listens on the loopback unless told otherwise;
 * put a proxy in front for anything more).
 *
 * Every family is written whole (HELP, TYPE, then its samples, one per
 * tier for per-tier families), as the format requires.
 */
#include "metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "tiers/core/upload.h"
#include "status.h"
#include "writeback/writeback.h"
#include "text.h"

/* Per connection: MHD's memory pool (the request head must fit). */
#define REQUEST_MAX (32 * 1024)
#define CONNECTIONS_MAX 32
#define PER_IP_MAX 16

struct dv_metrics {
	struct dv_fs *fs;        /* borrowed */
	int fd;                  /* listening socket until MHD takes it */
	struct MHD_Daemon *mhd;  /* NULL until dv_metrics_start() */
	char addr[INET6_ADDRSTRLEN + 16];
};

/* ---- the exposition text ---- */

static void family(struct dv_text *t, const char *name, const char *type,
		   const char *help)
{
	dv_text_printf(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
		       type);
}

/* A label value: \, " and newline escaped. */
static void label_value(struct dv_text *t, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			dv_text_printf(t, "\\%c", *s);
		else if (*s == '\n')
			dv_text_printf(t, "\\n");
		else
			dv_text_printf(t, "%c", *s);
	}
}

static void sample(struct dv_text *t, const char *name, uint64_t v)
{
	dv_text_printf(t, "%s %" PRIu64 "\n", name, v);
}

static void sample_f(struct dv_text *t, const char *name, double v)
{
	dv_text_printf(t, "%s %.9g\n", name, v);
}

static void sample_label(struct dv_text *t, const char *name,
			 const char *label, const char *value, uint64_t v)
{
	dv_text_printf(t, "%s{%s=\"", name, label);
	label_value(t, value);
	dv_text_printf(t, "\"} %" PRIu64 "\n", v);
}

/* Per-tier counters, read from struct dv_tier_stats. */
static const struct {
	const char *name, *help;
	size_t off;
} tier_counters[] = {
	{ "datavofs_tier_hits_total", "Opens served by the tier (it held the shard).",
	  offsetof(struct dv_tier_stats, hits) },
	{ "datavofs_tier_misses_total", "Lookups that did not find the shard in the tier.",
	  offsetof(struct dv_tier_stats, misses) },
	{ "datavofs_tier_served_bytes_total",
	  "Bytes of shards opened from the tier (each open counts the shard's size).",
	  offsetof(struct dv_tier_stats, bytes_served) },
	{ "datavofs_tier_installed_bytes_total", "Bytes installed into (or uploaded to) the tier.",
	  offsetof(struct dv_tier_stats, bytes_in) },
	{ "datavofs_tier_installs_total", "Shards installed into the tier.",
	  offsetof(struct dv_tier_stats, installs) },
	{ "datavofs_tier_evictions_total", "Shards the tier evicted to make room (LRU).",
	  offsetof(struct dv_tier_stats, evictions) },
	{ "datavofs_tier_errors_total", "Failed lookups, installs, locks and downloads of the tier.",
	  offsetof(struct dv_tier_stats, errors) },
	{ "datavofs_tier_verify_failures_total",
	  "Tier copies or downloads whose bytes did not match the manifest's sha256.",
	  offsetof(struct dv_tier_stats, verify_failures) },
};

/* Per-tier gauges, read from struct dv_tier_usage. */
static const struct {
	const char *name, *help;
	size_t off;
} tier_gauges[] = {
	{ "datavofs_tier_used_bytes", "Bytes of shards the tier holds.",
	  offsetof(struct dv_tier_usage, used_bytes) },
	{ "datavofs_tier_capacity_bytes", "The tier's max_bytes (0: unbounded).",
	  offsetof(struct dv_tier_usage, capacity) },
	{ "datavofs_tier_objects", "Shards the tier holds.",
	  offsetof(struct dv_tier_usage, objects) },
	{ "datavofs_tier_filesystem_free_bytes",
	  "Free bytes of the filesystem under the tier (0: unknown or not a folder).",
	  offsetof(struct dv_tier_usage, fs_free) },
};

static uint64_t field(const void *base, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

static void tier_metrics(struct dv_text *t, struct dv_fs *fs,
			 const struct dv_tier_usage *usage)
{
	size_t n = dv_hierarchy_ntiers(fs->hier);

	family(t, "datavofs_tier_info", "gauge",
	       "The tiers, fastest first (value 1; order in the label).");
	for (size_t i = 0; i < n; i++) {
		struct dv_tier *tier = dv_hierarchy_tier(fs->hier, i);

		dv_text_printf(t, "datavofs_tier_info{tier=\"");
		label_value(t, tier->name);
		dv_text_printf(t, "\",type=\"%s\",order=\"%zu\"} 1\n",
			       dv_tier_type_name(tier->type), i);
	}
	for (size_t k = 0; k < sizeof(tier_counters) / sizeof(tier_counters[0]); k++) {
		family(t, tier_counters[k].name, "counter", tier_counters[k].help);
		for (size_t i = 0; i < n; i++) {
			struct dv_tier *tier = dv_hierarchy_tier(fs->hier, i);
			uint64_t v;

			__atomic_load((uint64_t *)((char *)&tier->stats +
						   tier_counters[k].off),
				      &v, __ATOMIC_RELAXED);
			sample_label(t, tier_counters[k].name, "tier",
				     tier->name, v);
		}
	}
	for (size_t k = 0; k < sizeof(tier_gauges) / sizeof(tier_gauges[0]); k++) {
		family(t, tier_gauges[k].name, "gauge", tier_gauges[k].help);
		for (size_t i = 0; i < n; i++)
			sample_label(t, tier_gauges[k].name, "tier",
				     dv_hierarchy_tier(fs->hier, i)->name,
				     field(&usage[i], tier_gauges[k].off));
	}
}

static void histogram(struct dv_text *t, const char *name, const char *help,
		      const uint64_t buckets[DV_FILL_BUCKETS + 1], uint64_t sum_ns)
{
	uint64_t cum = 0;

	family(t, name, "histogram", help);
	for (size_t b = 0; b < DV_FILL_BUCKETS; b++) {
		cum += buckets[b];
		dv_text_printf(t, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name,
			       dv_fill_bucket_bounds[b], cum);
	}
	cum += buckets[DV_FILL_BUCKETS];
	dv_text_printf(t, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
	dv_text_printf(t, "%s_sum %.9f\n", name, (double)sum_ns / 1e9);
	dv_text_printf(t, "%s_count %" PRIu64 "\n", name, cum);
}

static void fill_metrics(struct dv_text *t, struct dv_fs *fs)
{
	uint64_t buckets[DV_FILL_BUCKETS + 1];
	struct dv_hierarchy_stats hs;

	dv_hierarchy_stats(fs->hier, &hs, buckets);
	histogram(t, "datavofs_fill_duration_seconds",
		  "Time to fill a shard from the origin: fetch, verify and install.",
		  buckets, hs.fill_ns_total);
	dv_hierarchy_ttfb(fs->hier, buckets);
	histogram(t, "datavofs_first_byte_seconds",
		  "Streaming fills: from the open of a cold shard to its first read answered.",
		  buckets, hs.ttfb_ns_total);
	family(t, "datavofs_chunks_fetched_total", "counter",
	       "Chunks of streaming fills fetched and verified.");
	sample(t, "datavofs_chunks_fetched_total", hs.chunks_fetched);
	family(t, "datavofs_chunk_waits_total", "counter",
	       "Reads that waited for a chunk of a streaming fill.");
	sample(t, "datavofs_chunk_waits_total", hs.chunk_waits);
	family(t, "datavofs_streams", "gauge", "Streaming fills running now.");
	sample(t, "datavofs_streams", hs.streams);
	family(t, "datavofs_chunk_fetches_in_flight", "gauge",
	       "Ranged fetches of streaming fills running now.");
	sample(t, "datavofs_chunk_fetches_in_flight", hs.chunks_in_flight);
}

static void error_metrics(struct dv_text *t, struct dv_fs *fs,
			  const struct dv_status_totals *s)
{
	const char *name = "datavofs_errors_total";
	const struct {
		const char *kind;
		uint64_t v;
	} kinds[] = {
		{ "origin", dv_stat_get(&fs->origin->errors) },
		{ "fill", s->hier.fetch_errors },
		{ "verify", s->hier.verify_failures },
		{ "open", dv_stat_get(&fs->read_errors) },
		{ "tier", s->tier_errors },
		{ "manifest", s->ns.refresh_errors },
		{ "manifest_rejected", s->ns.rejected_manifests },
	};

	family(t, name, "counter",
	       "Errors by kind: origin requests, fills, sha256 mismatches, opens "
	       "failed, tier operations, manifest refreshes, manifests refused.");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		sample_label(t, name, "kind", kinds[i].kind, kinds[i].v);
}

/* Background uploads into remote tiers (B5). */
static void upload_metrics(struct dv_text *t, struct dv_fs *fs)
{
	const char *name = "datavofs_uploads_total";
	struct dv_upload_stats u = { 0 };

	dv_hierarchy_upload_stats(fs->hier, &u);
	family(t, name, "counter",
	       "Background uploads to remote tiers by outcome: queued, done, failed "
	       "(after every retry), dropped (queue full or pending at exit), retries.");
	sample_label(t, name, "result", "queued", u.queued);
	sample_label(t, name, "result", "done", u.done);
	sample_label(t, name, "result", "failed", u.failed);
	sample_label(t, name, "result", "dropped", u.dropped);
	sample_label(t, name, "result", "retried", u.retries);
}

/* Write-back areas, labelled by area name (writeback.h). */
static void writeback_metrics(struct dv_text *t, struct dv_fs *fs)
{
	static const struct {
		const char *name, *type, *help;
		size_t off;
	} m[] = {
		{ "datavofs_writeback_pending_files", "gauge", "Closed files not yet in the destination.", offsetof(struct dv_wb_stats, pending_files) },
		{ "datavofs_writeback_pending_bytes", "gauge", "Bytes of those files.", offsetof(struct dv_wb_stats, pending_bytes) },
		{ "datavofs_writeback_oldest_pending_seconds", "gauge", "Age of the oldest pending file.", offsetof(struct dv_wb_stats, oldest_pending) },
		{ "datavofs_writeback_failed_files", "gauge", "Files whose upload failed for good.", offsetof(struct dv_wb_stats, failed_files) },
		{ "datavofs_writeback_uploads_total", "counter", "Files uploaded.", offsetof(struct dv_wb_stats, uploaded_files) },
		{ "datavofs_writeback_upload_bytes_total", "counter", "Bytes uploaded.", offsetof(struct dv_wb_stats, uploaded_bytes) },
		{ "datavofs_writeback_upload_errors_total", "counter", "Failed attempts (retried or not).", offsetof(struct dv_wb_stats, upload_errors) },
		{ "datavofs_writeback_evictions_total", "counter", "Synced files evicted from the landing folder.", offsetof(struct dv_wb_stats, evicted_files) },
	};
	struct dv_wb_stats st;
	size_t i, j, n = dv_wb_count(fs->wb);

	if (n == 0)
		return;
	for (j = 0; j < sizeof(m) / sizeof(m[0]); j++) {
		family(t, m[j].name, m[j].type, m[j].help);
		for (i = 0; i < n; i++) {
			dv_wb_stats(fs->wb, i, &st);
			sample_label(t, m[j].name, "area", dv_wb_name(fs->wb, i),
				     field(&st, m[j].off));
		}
	}
}

static void global_metrics(struct dv_text *t, struct dv_fs *fs,
			   const struct dv_status_totals *s)
{
	family(t, "datavofs_info", "gauge", "Version and read path (value 1).");
	dv_text_printf(t, "datavofs_info{version=\"%s\",read_path=\"%s\",verify=\"%s\"} 1\n",
		       DV_VERSION,
		       __atomic_load_n(&fs->passthrough, __ATOMIC_ACQUIRE) ?
			       "passthrough" : "keep_cache",
		       dv_verify_mode_name(fs->cfg->verify));
	family(t, "datavofs_start_time_seconds", "gauge",
	       "When the daemon started, seconds since the epoch.");
	sample(t, "datavofs_start_time_seconds", fs->started);
	family(t, "datavofs_origin_requests_total", "counter",
	       "Shard downloads started from the origin.");
	sample(t, "datavofs_origin_requests_total",
	       dv_stat_get(&fs->origin->requests));
	family(t, "datavofs_origin_bytes_total", "counter",
	       "Shard bytes received from the origin.");
	sample(t, "datavofs_origin_bytes_total", dv_stat_get(&fs->origin->bytes));
	family(t, "datavofs_fills_total", "counter",
	       "Full misses: shards fetched from the origin into the tiers.");
	sample(t, "datavofs_fills_total", s->hier.fetches);
	family(t, "datavofs_fill_bytes_total", "counter",
	       "Bytes of shards fetched, verified and kept.");
	sample(t, "datavofs_fill_bytes_total", s->hier.fetch_bytes);
	family(t, "datavofs_promotions_total", "counter",
	       "Hits in a slower tier copied into faster tiers.");
	sample(t, "datavofs_promotions_total", s->hier.promotions);
	family(t, "datavofs_verify_failures_total", "counter",
	       "Bytes from the origin or a tier that did not match the manifest's sha256.");
	sample(t, "datavofs_verify_failures_total", s->hier.verify_failures);
	family(t, "datavofs_served_bytes_total", "counter",
	       "Bytes of shards opened, all tiers.");
	sample(t, "datavofs_served_bytes_total", s->served);
	family(t, "datavofs_read_bytes_total", "counter",
	       "Bytes read through the daemon (not passthrough, not page cache).");
	sample(t, "datavofs_read_bytes_total", dv_stat_get(&fs->read_bytes));
	family(t, "datavofs_egress_saved_bytes_total", "counter",
	       "Bytes served that the origin did not send: egress saved.");
	sample(t, "datavofs_egress_saved_bytes_total", s->saved);
	family(t, "datavofs_egress_saved_dollars_total", "counter",
	       "Estimated egress dollars saved (dollars_per_gb per 1e9 bytes).");
	sample_f(t, "datavofs_egress_saved_dollars_total", s->dollars);
	family(t, "datavofs_open_files", "gauge", "Shards open now.");
	sample(t, "datavofs_open_files", dv_stat_get(&fs->open_files));
	family(t, "datavofs_datasets", "gauge", "Datasets in the namespace.");
	sample(t, "datavofs_datasets", s->ns.datasets);
	family(t, "datavofs_shards", "gauge", "Shards in the namespace.");
	sample(t, "datavofs_shards", s->ns.shards);
	family(t, "datavofs_manifest_refreshes_total", "counter",
	       "Refreshes of the namespace from the origin.");
	sample(t, "datavofs_manifest_refreshes_total", s->ns.refreshes);
	family(t, "datavofs_pins_loaded", "gauge",
	       "Pinned revisions (dataset@N) whose manifests are in memory.");
	sample(t, "datavofs_pins_loaded", s->ns.pins_loaded);
	family(t, "datavofs_pin_evictions_total", "counter",
	       "Pinned revisions evicted: no inode of theirs referenced, beyond the kept ones.");
	sample(t, "datavofs_pin_evictions_total", s->ns.pins_evicted);
}

char *dv_metrics_text(struct dv_fs *fs, size_t *len)
{
	size_t n = dv_hierarchy_ntiers(fs->hier);
	struct dv_tier_usage *usage = calloc(n ? n : 1, sizeof(*usage));
	struct dv_status_totals s;
	struct dv_text t = { 0 };

	if (!usage)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		struct dv_tier *tier = dv_hierarchy_tier(fs->hier, i);

		dv_tier_usage(tier, &usage[i]);
	}
	dv_status_snapshot(fs, &s);
	global_metrics(&t, fs, &s);
	error_metrics(&t, fs, &s);
	fill_metrics(&t, fs);
	upload_metrics(&t, fs);
	writeback_metrics(&t, fs);
	tier_metrics(&t, fs, usage);
	free(usage);
	return dv_text_finish(&t, len);
}

/* ---- addresses ---- */

bool dv_metrics_spec_is_off(const char *spec)
{
	bool on;

	if (!spec)
		return false;
	if (strcmp(spec, "none") == 0)
		return true;
	return dv_parse_bool(spec, &on) == 0 && !on;
}

static int copy_part(char *dst, size_t len, const char *src, size_t n)
{
	if (n >= len)
		return -EINVAL;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return 0;
}

int dv_metrics_parse_addr(const char *spec, char *host, size_t hostlen,
			  char *port, size_t portlen, char *err, size_t errlen)
{
	const char *colon;
	uint64_t p;
	int ret = 0;

	if (!spec || !*spec || strcmp(spec, "true") == 0 ||
	    strcmp(spec, "on") == 0 || strcmp(spec, "yes") == 0)
		spec = DV_DEFAULT_METRICS_ADDR;
	colon = strrchr(spec, ':');
	if (!colon) {
		/* Only a port: the loopback. */
		ret = copy_part(host, hostlen, "127.0.0.1", 9);
		colon = spec - 1;
	} else if (spec[0] == '[') {
		if (colon < spec + 2 || colon[-1] != ']')
			ret = -EINVAL;
		else
			ret = copy_part(host, hostlen, spec + 1,
					(size_t)(colon - spec - 2));
	} else if (memchr(spec, ':', (size_t)(colon - spec))) {
		ret = -EINVAL; /* a bare IPv6 address: brackets needed */
	} else {
		ret = copy_part(host, hostlen, spec, (size_t)(colon - spec));
	}
	if (ret == 0 && (!*host || dv_parse_uint(colon + 1, 65535, &p)))
		ret = -EINVAL;
	if (ret == 0)
		snprintf(port, portlen, "%" PRIu64, p);
	else
		snprintf(err, errlen,
			 "metrics address '%.100s': use PORT, ADDR:PORT or [IPV6]:PORT (default %s)",
			 spec, DV_DEFAULT_METRICS_ADDR);
	return ret;
}

static bool is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
			&((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

static void format_addr(const struct sockaddr_storage *ss, char *buf,
			size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	}
}

/* A listening socket on the first address of @ai that binds. */
static int bind_first(const struct addrinfo *ai, char *err, size_t errlen,
		      const char *spec)
{
	int ret = -EADDRNOTAVAIL;

	for (; ai; ai = ai->ai_next) {
		int one = 1;
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
				ai->ai_protocol);

		if (fd < 0) {
			ret = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 16) == 0)
			return fd;
		ret = -errno;
		close(fd);
	}
	snprintf(err, errlen, "metrics: cannot listen on %s: %s", spec,
		 strerror(-ret));
	return ret;
}

int dv_metrics_listen(struct dv_fs *fs, const char *spec,
		      struct dv_metrics **out, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *ai = NULL;
	struct dv_metrics *m;
	char host[256], port[8];
	int ret;

	ret = dv_metrics_parse_addr(spec, host, sizeof(host), port,
				    sizeof(port), err, errlen);
	if (ret)
		return ret;
	ret = getaddrinfo(host, port, &hints, &ai);
	if (ret) {
		snprintf(err, errlen, "metrics: cannot resolve '%s': %s", host,
			 gai_strerror(ret));
		return -EINVAL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	m->fs = fs;
	m->fd = bind_first(ai, err, errlen, spec ? spec : DV_DEFAULT_METRICS_ADDR);
	freeaddrinfo(ai);
	if (m->fd < 0) {
		ret = m->fd;
		free(m);
		return ret;
	}
	if (getsockname(m->fd, (struct sockaddr *)&ss, &sl) == 0)
		format_addr(&ss, m->addr, sizeof(m->addr));
	if (!is_loopback((struct sockaddr *)&ss))
		dv_warn("metrics: listening on %s, which is not a loopback address, as configured: "
			"whoever reaches it can read the counters", m->addr);
	*out = m;
	return 0;
}

const char *dv_metrics_address(const struct dv_metrics *m)
{
	return m->addr;
}

/* ---- the server: libmicrohttpd ---- */

/*
 * MHD's messages (a client that timed out, a connection refused at a limit)
 * are about clients, not the daemon: debug level.
 */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	dv_debug("metrics: %s", line);
}

/* Queues @body (taken when @owned, else static) as the answer. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned int code,
			       const char *ctype, const char *body, size_t len,
			       bool owned)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, (void *)body,
					    owned ? MHD_RESPMEM_MUST_FREE :
						    MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free((void *)body);
		return MHD_NO;
	}
	/* As the HTTP/1.0 exporter answered: one request per connection. */
	MHD_set_response_options(r, MHD_RF_HTTP_1_0_SERVER, MHD_RO_END);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

#define RESPOND_STATIC(c, code, body) \
	respond(c, code, "text/plain", body, sizeof(body) - 1, false)

/*
 * One request. MHD has parsed it (a malformed one got its 400 there), cut
 * the query off @url, and drops the body of a HEAD answer itself.
 */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_data_size, void **req_cls)
{
	static const char text_type[] = "text/plain; version=0.0.4; charset=utf-8";
	struct dv_metrics *m = cls;
	char *body;
	size_t len;

	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return RESPOND_STATIC(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
	if (strcmp(url, "/") == 0)
		return RESPOND_STATIC(c, MHD_HTTP_OK,
				      "datavofs: the metrics are at /metrics\n");
	if (strcmp(url, "/metrics") != 0)
		return RESPOND_STATIC(c, MHD_HTTP_NOT_FOUND, "not found\n");
	body = dv_metrics_text(m->fs, &len);
	if (!body)
		return RESPOND_STATIC(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
				      "out of memory\n");
	return respond(c, MHD_HTTP_OK, text_type, body, len, true);
}

int dv_metrics_start(struct dv_metrics *m)
{
	/*
	 * One internal thread polls every connection, so a slow client holds
	 * only its own; CONNECTION_TIMEOUT closes a connection idle that long;
	 * the limits bound what clients can make us hold (the per-IP one is
	 * below the total so that one address cannot take every slot).
	 */
	m->mhd = MHD_start_daemon(
		MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		handle, m, MHD_OPTION_LISTEN_SOCKET, m->fd,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)DV_METRICS_TIMEOUT_S,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONNECTIONS_MAX,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)PER_IP_MAX,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)REQUEST_MAX,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
	if (!m->mhd) {
		dv_err("metrics: cannot start the exporter on %s", m->addr);
		return -EIO;
	}
	m->fd = -1; /* MHD's now: MHD_stop_daemon() closes it */
	dv_info("metrics: serving http://%s/metrics", m->addr);
	return 0;
}

void dv_metrics_free(struct dv_metrics *m)
{
	if (!m)
		return;
	/* Closes every connection, slow or not, and joins the thread. */
	if (m->mhd)
		MHD_stop_daemon(m->mhd);
	if (m->fd >= 0)
		close(m->fd);
	free(m);
}
