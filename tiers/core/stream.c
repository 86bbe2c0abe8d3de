/*
 * Streaming fills in the hierarchy (hierarchy_impl.h, fill.h). A full miss
 * of a shard whose manifest pins a chunk list does not wait for the
 * shard: the chunk list is fetched and checked, a staging file is opened
 * in the landing tier (the one a killed fill left, if any), a fill starts
 * in the background, and the opener gets an object that reads along.
 *
 * The fill keeps the shard's locks (R7, B1) until it ends; other opens of
 * the shard in this daemon join it through the registry below, and other
 * daemons wait for the lock and then find the shard installed. When every
 * chunk is in and the whole shard matches its sha256, it is installed in
 * every tier as a whole fill would (R2). A shard found in a remote tier
 * streams the same way, its bytes from that tier and its chunk list from
 * the origin, and is installed only into the tiers above it (R4): the
 * bucket has it already. A fill that failed or was
 * cancelled keeps its staging file, whose good chunks the next fill reuses
 * (B4: nothing is installed until all of it is verified).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/log.h"
#include "hierarchy_impl.h"

struct dv_stream {
	struct dv_stream *next;  /* protected by h->streams_lock */
	struct dv_hierarchy *h;
	struct dv_fill *fill;    /* the registry's reference */
	struct held_locks held;  /* released when the fill ends */
	struct dv_staged st;     /* st.fd closed (under the lock) at the end */
	size_t where;            /* the tier holding the staging file */
	ssize_t remote;          /* the remote tier read from; -1: the origin */
	char hash[65];
	char label[256];
	uint8_t sha256[32];
	struct dv_shard_ref ref; /* points at the copies above */
	double t0;
};

void dv_hier_streams_init(struct dv_hierarchy *h,
			  const struct dv_fill_config *cfg)
{
	static const struct dv_fill_config defaults = {
		.streaming = true,
		.parallel = DV_FILL_PARALLEL,
		.connections = DV_FILL_CONNECTIONS,
		.timeout = DV_FILL_TIMEOUT,
	};

	h->fill_cfg = cfg ? *cfg : defaults;
	dv_fill_limit_init(&h->fill_limit, h->fill_cfg.connections);
	pthread_mutex_init(&h->streams_lock, NULL);
	pthread_cond_init(&h->streams_cond, NULL);
	h->streams = NULL;
	h->streams_alive = 0;
}

void dv_hierarchy_set_fill(struct dv_hierarchy *h,
			   const struct dv_fill_config *cfg)
{
	h->fill_cfg = *cfg;
	pthread_mutex_lock(&h->fill_limit.lock);
	h->fill_limit.max = cfg->connections;
	pthread_cond_broadcast(&h->fill_limit.cond);
	pthread_mutex_unlock(&h->fill_limit.lock);
}

void dv_hier_streams_release(struct dv_hierarchy *h)
{
	pthread_mutex_lock(&h->streams_lock);
	for (struct dv_stream *s = h->streams; s; s = s->next)
		dv_fill_cancel(s->fill);
	while (h->streams_alive)
		pthread_cond_wait(&h->streams_cond, &h->streams_lock);
	pthread_mutex_unlock(&h->streams_lock);
	pthread_cond_destroy(&h->streams_cond);
	pthread_mutex_destroy(&h->streams_lock);
	dv_fill_limit_release(&h->fill_limit);
}

void dv_hier_stream_stats(struct dv_hierarchy *h,
			  struct dv_hierarchy_stats *out)
{
	struct dv_fill_progress p;

	out->chunks_fetched = dv_stat_get(&h->chunks_done);
	out->chunk_waits = dv_stat_get(&h->chunk_waits);
	out->ttfb_ns_total = dv_stat_get(&h->ttfb_ns_total);
	out->ttfb_count = dv_stat_get(&h->ttfb_count);
	out->streams = 0;
	out->chunks_in_flight = 0;
	pthread_mutex_lock(&h->streams_lock);
	for (struct dv_stream *s = h->streams; s; s = s->next) {
		dv_fill_progress(s->fill, &p);
		out->streams++;
		out->chunks_in_flight += p.in_flight;
		out->chunks_fetched += p.done - p.reused;
		out->chunk_waits += p.waits;
	}
	pthread_mutex_unlock(&h->streams_lock);
}

void dv_hierarchy_ttfb(struct dv_hierarchy *h,
		       uint64_t buckets[DV_FILL_BUCKETS + 1])
{
	for (size_t b = 0; b <= DV_FILL_BUCKETS; b++)
		buckets[b] = dv_stat_get(&h->ttfb_buckets[b]);
}

void dv_hierarchy_streams(struct dv_hierarchy *h,
			  void (*fn)(void *arg, struct dv_fill *f), void *arg)
{
	pthread_mutex_lock(&h->streams_lock);
	for (struct dv_stream *s = h->streams; s; s = s->next)
		fn(arg, s->fill);
	pthread_mutex_unlock(&h->streams_lock);
}

/* Under h->streams_lock: @s as an object that reads along. */
static int open_along(struct dv_stream *s, struct dv_object *out)
{
	int fd = fcntl(s->st.fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	memset(out, 0, sizeof(*out));
	out->tier = s->h->tiers[s->where];
	out->tier_index = (int)s->where;
	out->fd = fd;
	snprintf(out->path, sizeof(out->path), "%s", s->st.path);
	snprintf(out->hash, sizeof(out->hash), "%s", s->hash);
	out->size = s->ref.size;
	dv_fill_get(s->fill);
	out->fill = s->fill;
	return 0;
}

bool dv_hier_stream_join(struct dv_hierarchy *h,
			 const struct dv_shard_ref *ref, struct dv_object *out)
{
	bool joined = false;

	pthread_mutex_lock(&h->streams_lock);
	for (struct dv_stream *s = h->streams; s; s = s->next) {
		if (strcmp(s->hash, ref->hash) == 0 && s->ref.size == ref->size) {
			joined = open_along(s, out) == 0;
			break;
		}
	}
	pthread_mutex_unlock(&h->streams_lock);
	return joined;
}

/* What to keep of the staging file: a verified shard is installed. */
static void settle_staging(struct dv_stream *s, int result)
{
	struct dv_hierarchy *h = s->h;
	struct dv_tier *t = h->tiers[s->where];
	struct dv_tier *from = s->remote < 0 ? NULL : h->tiers[s->remote];
	size_t limit = from ? (size_t)s->remote : h->n;
	ssize_t top;

	if (result == 0) {
		dv_stat_add(from ? &h->stats.promotions : &h->stats.fetch_bytes,
			    from ? 1 : s->ref.size);
		top = dv_hier_install_all(h, &s->ref, s->st.fd, s->st.path, limit,
					  s->where, -1);
		if (top < 0)
			dv_err("%s: no tier accepted it (%" PRIu64 " bytes)",
			       s->label, s->ref.size);
		dv_tier_stage_discard(t, &s->st);
		return;
	}
	dv_stat_add(from ? &from->stats.errors : &h->stats.fetch_errors, 1);
	if (result == -EBADMSG) {
		dv_stat_add(&h->stats.verify_failures, 1);
		if (from)
			dv_stat_add(&from->stats.verify_failures, 1);
		dv_tier_stage_discard(t, &s->st);
		return;
	}
	/* Chunks that were verified stay for the next fill to reuse. */
	if (result != -ECANCELED)
		dv_err("%s (%s): fill failed: %s; the verified chunks are kept",
		       s->label, s->hash, strerror(-result));
	close(s->st.fd);
	s->st.fd = -1;
}

static void stream_done(void *arg, struct dv_fill *f, int result)
{
	struct dv_stream *s = arg, **pp;
	struct dv_hierarchy *h = s->h;
	struct dv_fill_progress p;

	dv_fill_progress(f, &p);
	dv_debug("%s: streamed in %.3f s: %" PRIu32 " chunks, %" PRIu32
		 " reused, %" PRIu32 " failed, %" PRIu64 " reads waited",
		 s->label, dv_hier_now() - s->t0, p.chunks, p.reused, p.failed,
		 p.waits);
	dv_hier_observe_fill(h, dv_hier_now() - s->t0);
	dv_stat_add(&h->chunks_done, p.done - p.reused);
	dv_stat_add(&h->chunk_waits, p.waits);
	if (p.ttfb_ns) {
		size_t b = 0;

		while (b < DV_FILL_BUCKETS && p.ttfb_ns / 1e9 > dv_fill_bucket_bounds[b])
			b++;
		dv_stat_add(&h->ttfb_buckets[b], 1);
		dv_stat_add(&h->ttfb_ns_total, p.ttfb_ns);
		dv_stat_add(&h->ttfb_count, 1);
	}
	pthread_mutex_lock(&h->streams_lock);
	for (pp = &h->streams; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = s->next;
	settle_staging(s, result);
	pthread_mutex_unlock(&h->streams_lock);
	dv_hier_unlock_all(h, s->hash, &s->held);
	dv_fill_put(s->fill);
	free(s);
	/* Last: the hierarchy may be freed once no stream is alive. */
	pthread_mutex_lock(&h->streams_lock);
	h->streams_alive--;
	pthread_cond_broadcast(&h->streams_cond);
	pthread_mutex_unlock(&h->streams_lock);
}

/* The staging file, @size bytes reserved, in the first folder tier that can. */
static int stage(struct dv_hierarchy *h, struct dv_stream *s, bool *resumed)
{
	int ret = -EIO;

	for (size_t i = h->landing; i < h->n; i++) {
		struct dv_tier *t = h->tiers[i];
		struct stat st;

		if (!dv_tier_is_folder(t))
			continue;
		ret = dv_tier_stage_resume(t, s->hash, &s->st, resumed);
		if (ret)
			continue;
		if (fstat(s->st.fd, &st) || (uint64_t)st.st_size != s->ref.size)
			*resumed = false;
		ret = dv_hier_reserve(t, &s->st, s->ref.size);
		if (ret == 0 && ftruncate(s->st.fd, (off_t)s->ref.size) < 0)
			ret = -errno;
		if (ret == 0) {
			s->where = i;
			return 0;
		}
		dv_warn("tier '%s': no room to stage %s (%" PRIu64
			" bytes); trying the next folder tier", t->name,
			s->label, s->ref.size);
		close(s->st.fd);
		s->st.fd = -1;
	}
	return ret;
}

static struct dv_stream *stream_new(struct dv_hierarchy *h,
				    const struct dv_shard_ref *ref,
				    ssize_t remote,
				    const struct held_locks *held)
{
	struct dv_stream *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->h = h;
	s->remote = remote;
	s->held = *held;
	s->st.fd = -1;
	snprintf(s->hash, sizeof(s->hash), "%s", ref->hash);
	snprintf(s->label, sizeof(s->label), "%s", dv_hier_label(ref));
	s->ref.hash = s->hash;
	s->ref.label = s->label;
	s->ref.size = ref->size;
	if (ref->sha256) {
		memcpy(s->sha256, ref->sha256, 32);
		s->ref.sha256 = s->sha256;
	}
	s->t0 = dv_hier_now();
	return s;
}

static bool can_stream(const struct dv_hierarchy *h,
		       const struct dv_shard_ref *ref,
		       const struct dv_stream_src *src)
{
	return h->fill_cfg.streaming && ref->chunks_pin && ref->size > 0 &&
	       src->list->chunks && src->bytes->fetch_range;
}

/*
 * The chunk list: 1 with *@out filled, else why not. For a shard held by a
 * remote tier, a list that cannot be had is no reason to fail the read:
 * 0, and the caller downloads the shard whole from that tier.
 */
static int get_chunks(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
		      const struct dv_stream_src *src, struct dv_chunks *out)
{
	int ret = src->list->chunks(src->list->arg, ref, out);

	if (ret == 0)
		return 1;
	if (src->remote >= 0) {
		dv_warn("%s (%s): no usable chunk list (%s): downloading it whole from tier '%s'",
			dv_hier_label(ref), ref->hash, strerror(-ret),
			h->tiers[src->remote]->name);
		return 0;
	}
	dv_err("%s (%s): no usable chunk list: %s", dv_hier_label(ref),
	       ref->hash, strerror(-ret));
	dv_stat_add(&h->stats.fetch_errors, 1);
	return ret == -ENOMEM ? ret : -EIO;
}

/* Starts the fill of @s; on success it is in the registry. */
static int start(struct dv_hierarchy *h, struct dv_stream *s,
		 const struct dv_shard_ref *ref, const struct dv_fetcher *fetcher,
		 struct dv_chunks *chunks, bool resumed)
{
	struct dv_fill_params p = {
		.fd = s->st.fd, .ref = &s->ref, .fetcher = fetcher,
		.chunks = chunks, .resume = resumed,
		.parallel = h->fill_cfg.parallel,
		.timeout_ms = h->fill_cfg.timeout * 1000u,
		.limit = &h->fill_limit, .done = stream_done, .arg = s,
	};
	int ret;

	/* In the registry before the first worker can end the fill. */
	pthread_mutex_lock(&h->streams_lock);
	ret = dv_fill_start(&p, &s->fill);
	if (ret == 0) {
		s->next = h->streams;
		h->streams = s;
		h->streams_alive++;
	}
	pthread_mutex_unlock(&h->streams_lock);
	return ret;
}

int dv_hier_stream(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
		   const struct dv_stream_src *src, struct held_locks *held,
		   struct dv_object *out)
{
	struct dv_chunks chunks = { 0 };
	struct dv_stream *s;
	bool resumed = false;
	int ret;

	if (!can_stream(h, ref, src))
		return 0;
	ret = get_chunks(h, ref, src, &chunks);
	if (ret <= 0)
		return ret;
	s = stream_new(h, ref, src->remote, held);
	ret = s ? stage(h, s, &resumed) : -ENOMEM;
	if (ret == 0) {
		if (src->remote < 0)
			dv_stat_add(&h->stats.fetches, 1);
		ret = start(h, s, ref, src->bytes, &chunks, resumed);
	}
	if (ret == 0) {
		pthread_mutex_lock(&h->streams_lock);
		ret = open_along(s, out);
		pthread_mutex_unlock(&h->streams_lock);
		/* Else the fill goes on; the opener only lost its handle. */
		if (ret)
			out->fd = -1;
		return 1;
	}
	dv_chunks_release(&chunks);
	if (s && s->st.fd >= 0)
		close(s->st.fd);
	free(s);
	dv_err("%s: cannot stream it: %s", dv_hier_label(ref), strerror(-ret));
	return ret;
}
