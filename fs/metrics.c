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

static void sample_label(struct dv_text *t, const char *name,
			 const char *label, const char *value, uint64_t v)
{
	dv_text_printf(t, "%s{%s=\"", name, label);
	label_value(t, value);
	dv_text_printf(t, "\"} %" PRIu64 "\n", v);
}

/*
 * A family of one sample, or of one per label value (@label set): every
 * family the exporter writes but the histograms and the info lines.
 */
struct metric {
	const char *name, *type, *help;
	uint64_t v;
	double f;             /* the value instead of v, when real */
	bool real;
};

/* A sample of a labelled family: the label's value and the count. */
struct labelled {
	const char *value;
	uint64_t v;
};

#define METRIC(name_, type_, help_, v_)                                  \
	{ .name = name_, .type = type_, .help = help_, .v = v_ }

static void metrics(struct dv_text *t, const struct metric *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		family(t, m[i].name, m[i].type, m[i].help);
		if (m[i].real)
			dv_text_printf(t, "%s %.9g\n", m[i].name, m[i].f);
		else
			dv_text_printf(t, "%s %" PRIu64 "\n", m[i].name, m[i].v);
	}
}

static void labelled_family(struct dv_text *t, const char *name,
			    const char *type, const char *help,
			    const char *label, const struct labelled *l,
			    size_t n)
{
	family(t, name, type, help);
	for (size_t i = 0; i < n; i++)
		sample_label(t, name, label, l[i].value, l[i].v);
}

#define NITEMS(a) (sizeof(a) / sizeof((a)[0]))

/* A per-tier family: one sample per tier, read at @off of a struct. */
struct tier_family {
	const char *name, *help;
	size_t off;
};

#define STAT(name_, member, help_)                                      \
	{ name_, help_, offsetof(struct dv_tier_stats, member) }
#define USAGE(name_, member, help_)                                     \
	{ name_, help_, offsetof(struct dv_tier_usage, member) }

/* Counters, read from struct dv_tier_stats (the tiers add atomically). */
static const struct tier_family tier_counters[] = {
	STAT("datavofs_tier_hits_total", hits, "Opens served by the tier (it held the shard)."),
	STAT("datavofs_tier_misses_total", misses, "Lookups that did not find the shard in the tier."),
	STAT("datavofs_tier_served_bytes_total", bytes_served, "Bytes of shards opened from the tier (each open counts the shard's size)."),
	STAT("datavofs_tier_installed_bytes_total", bytes_in, "Bytes installed into (or uploaded to) the tier."),
	STAT("datavofs_tier_installs_total", installs, "Shards installed into the tier."),
	STAT("datavofs_tier_evictions_total", evictions, "Shards the tier evicted to make room (LRU)."),
	STAT("datavofs_tier_errors_total", errors, "Failed lookups, installs, locks and downloads of the tier."),
	STAT("datavofs_tier_verify_failures_total", verify_failures, "Tier copies or downloads whose bytes did not match the manifest's sha256."),
};

/* Gauges, read from the struct dv_tier_usage taken for this scrape. */
static const struct tier_family tier_gauges[] = {
	USAGE("datavofs_tier_used_bytes", used_bytes, "Bytes of shards the tier holds."),
	USAGE("datavofs_tier_capacity_bytes", capacity, "The tier's max_bytes (0: unbounded)."),
	USAGE("datavofs_tier_objects", objects, "Shards the tier holds."),
	USAGE("datavofs_tier_filesystem_free_bytes", fs_free, "Free bytes of the filesystem under the tier (0: unknown or not a folder)."),
};

/*
 * Writes the families @fams, counters from each tier's stats when @usage
 * is NULL, else gauges from usage[i] of tier i.
 */
static void tier_families(struct dv_text *t, struct dv_fs *fs,
			  const struct tier_family *fams, size_t nfams,
			  const struct dv_tier_usage *usage)
{
	size_t n = dv_hierarchy_ntiers(fs->hier);
	uint64_t v;

	for (size_t k = 0; k < nfams; k++) {
		family(t, fams[k].name, usage ? "gauge" : "counter",
		       fams[k].help);
		for (size_t i = 0; i < n; i++) {
			struct dv_tier *tier = dv_hierarchy_tier(fs->hier, i);

			if (usage)
				memcpy(&v, (const char *)&usage[i] + fams[k].off,
				       sizeof(v));
			else
				__atomic_load((uint64_t *)((char *)&tier->stats +
							   fams[k].off),
					      &v, __ATOMIC_RELAXED);
			sample_label(t, fams[k].name, "tier", tier->name, v);
		}
	}
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
	tier_families(t, fs, tier_counters, NITEMS(tier_counters), NULL);
	tier_families(t, fs, tier_gauges, NITEMS(tier_gauges), usage);
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

static void stream_metrics(struct dv_text *t,
			   const struct dv_hierarchy_stats *hs)
{
	const struct metric m[] = {
		METRIC("datavofs_chunks_fetched_total", "counter", "Chunks of streaming fills fetched and verified.", hs->chunks_fetched),
		METRIC("datavofs_chunk_waits_total", "counter", "Reads that waited for a chunk of a streaming fill.", hs->chunk_waits),
		METRIC("datavofs_streams", "gauge", "Streaming fills running now.", hs->streams),
		METRIC("datavofs_chunk_fetches_in_flight", "gauge", "Ranged fetches of streaming fills running now.", hs->chunks_in_flight),
	};

	metrics(t, m, NITEMS(m));
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
	stream_metrics(t, &hs);
}

static void error_metrics(struct dv_text *t, struct dv_fs *fs,
			  const struct dv_status_totals *s)
{
	const struct labelled kinds[] = {
		{ "origin", dv_stat_get(&fs->origin->errors) },
		{ "fill", s->hier.fetch_errors },
		{ "verify", s->hier.verify_failures },
		{ "open", dv_stat_get(&fs->read_errors) },
		{ "tier", s->tier_errors },
		{ "manifest", s->ns.refresh_errors },
		{ "manifest_rejected", s->ns.rejected_manifests },
	};

	labelled_family(t, "datavofs_errors_total", "counter",
			"Errors by kind: origin requests, fills, sha256 mismatches, opens "
			"failed, tier operations, manifest refreshes, manifests refused.",
			"kind", kinds, NITEMS(kinds));
}

static void upload_results(struct dv_text *t, const struct dv_upload_stats *u)
{
	const struct labelled results[] = {
		{ "queued", u->queued }, { "done", u->done },
		{ "failed", u->failed }, { "dropped", u->dropped },
		{ "retried", u->retries },
	};

	labelled_family(t, "datavofs_uploads_total", "counter",
			"Background uploads to remote tiers by outcome: queued, done, failed "
			"(after every retry), dropped (queue full or pending at exit), retries.",
			"result", results, NITEMS(results));
}

/* Background uploads into remote tiers (B5). */
static void upload_metrics(struct dv_text *t, struct dv_fs *fs)
{
	struct dv_upload_stats u = { 0 };

	dv_hierarchy_upload_stats(fs->hier, &u);
	upload_results(t, &u);
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
				     *(const uint64_t *)((const char *)&st + m[j].off));
		}
	}
}

static void global_metrics(struct dv_text *t, struct dv_fs *fs,
			   const struct dv_status_totals *s)
{
	const struct metric m[] = {
		METRIC("datavofs_start_time_seconds", "gauge", "When the daemon started, seconds since the epoch.", (uint64_t)fs->started),
		METRIC("datavofs_origin_requests_total", "counter", "Shard downloads started from the origin.", dv_stat_get(&fs->origin->requests)),
		METRIC("datavofs_origin_bytes_total", "counter", "Shard bytes received from the origin.", dv_stat_get(&fs->origin->bytes)),
		METRIC("datavofs_fills_total", "counter", "Full misses: shards fetched from the origin into the tiers.", s->hier.fetches),
		METRIC("datavofs_fill_bytes_total", "counter", "Bytes of shards fetched, verified and kept.", s->hier.fetch_bytes),
		METRIC("datavofs_promotions_total", "counter", "Hits in a slower tier copied into faster tiers.", s->hier.promotions),
		METRIC("datavofs_verify_failures_total", "counter", "Bytes from the origin or a tier that did not match the manifest's sha256.", s->hier.verify_failures),
		METRIC("datavofs_served_bytes_total", "counter", "Bytes of shards opened, all tiers.", s->served),
		METRIC("datavofs_read_bytes_total", "counter", "Bytes read through the daemon (not passthrough, not page cache).", dv_stat_get(&fs->read_bytes)),
		METRIC("datavofs_egress_saved_bytes_total", "counter", "Bytes served that the origin did not send: egress saved.", s->saved),
		{ .name = "datavofs_egress_saved_dollars_total",
		  .type = "counter",
		  .help = "Estimated egress dollars saved (dollars_per_gb per 1e9 bytes).",
		  .f = s->dollars, .real = true },
		METRIC("datavofs_open_files", "gauge", "Shards open now.", dv_stat_get(&fs->open_files)),
		METRIC("datavofs_datasets", "gauge", "Datasets in the namespace.", s->ns.datasets),
		METRIC("datavofs_shards", "gauge", "Shards in the namespace.", s->ns.shards),
		METRIC("datavofs_manifest_refreshes_total", "counter", "Refreshes of the namespace from the origin.", s->ns.refreshes),
		METRIC("datavofs_pins_loaded", "gauge", "Pinned revisions (dataset@N) whose manifests are in memory.", s->ns.pins_loaded),
		METRIC("datavofs_pin_evictions_total", "counter", "Pinned revisions evicted: no inode of theirs referenced, beyond the kept ones.", s->ns.pins_evicted),
	};

	family(t, "datavofs_info", "gauge", "Version and read path (value 1).");
	dv_text_printf(t, "datavofs_info{version=\"%s\",read_path=\"%s\",verify=\"%s\"} 1\n",
		       DV_VERSION,
		       __atomic_load_n(&fs->passthrough, __ATOMIC_ACQUIRE) ?
			       "passthrough" : "keep_cache",
		       dv_verify_mode_name(fs->cfg->verify));
	metrics(t, m, NITEMS(m));
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
