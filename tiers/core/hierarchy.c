/*
 * The hierarchy: the only code that knows how tiers relate (docs/design.md).
 * See hierarchy.h for the rules. How it is put together:
 *
 *   fast path   a hit in tier 0 is opened and served with no lock (R1, R5);
 *   slow path   anything else takes the per-hash lock of every lockable
 *               tier, in one global order (their real paths), so that two
 *               daemons sharing tiers cannot deadlock; then walks again,
 *               since a racer may have filled the shard meanwhile (B1);
 *   promote     a hit below tier 0 is copied up (R3), a remote hit is
 *               staged, verified and installed first (R4), or streams
 *               chunk by chunk as a cold shard does (stream.c);
 *   fill        a full miss streams the fetcher through a verifying sink
 *               into a staging file and installs it everywhere (R2, B2).
 *
 * The staging file is renamed into the landing tier last, after the other
 * tiers copied from it; remote tiers upload from the installed file.
 */
#include "hierarchy_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "upload.h"
#include "digest.h"

#define UPLOAD_QUEUE 256
#define UPLOAD_THREADS 2
#define UPLOAD_GRACE_MS 10000

const double dv_fill_bucket_bounds[DV_FILL_BUCKETS] = {
	0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
};

size_t dv_hierarchy_ntiers(const struct dv_hierarchy *h)
{
	return h->n;
}

struct dv_tier *dv_hierarchy_tier(const struct dv_hierarchy *h, size_t i)
{
	return i < h->n ? h->tiers[i] : NULL;
}

const char *dv_hier_label(const struct dv_shard_ref *ref)
{
	return ref->label ? ref->label : ref->hash;
}

bool dv_hier_is_remote(const struct dv_tier *t)
{
	return dv_tier_has(t, DV_TIER_REMOTE);
}

/* ---- locks ---- */

void dv_hier_lock_all(struct dv_hierarchy *h, const char *hash,
		     struct held_locks *held)
{
	held->n = 0;
	for (size_t i = 0; i < h->nlocks; i++) {
		struct dv_tier *t = h->tiers[h->lock_order[i]];
		int fd = t->ops->lock(t, hash);

		if (fd < 0) {
			/* A broken tier must not stop the others. */
			dv_warn("tier '%s': cannot lock %s: %s", t->name, hash,
				strerror(-fd));
			continue;
		}
		held->tier[held->n] = h->lock_order[i];
		held->fd[held->n++] = fd;
	}
}

void dv_hier_unlock_all(struct dv_hierarchy *h, const char *hash,
		       struct held_locks *held)
{
	while (held->n > 0) {
		struct dv_tier *t = h->tiers[held->tier[--held->n]];

		t->ops->unlock(t, hash, held->fd[held->n]);
	}
}

/* ---- the walk ---- */

/*
 * Opens @hash in local tier @i into @out; with verify=always, re-hashes it
 * and drops a corrupt copy (B3). 0, or -errno meaning "not usable here".
 */
static int open_local(struct dv_hierarchy *h, size_t i,
		      const struct dv_shard_ref *ref, struct dv_object *out)
{
	struct dv_tier *t = h->tiers[i];
	uint8_t digest[32];
	int ret;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	snprintf(out->hash, sizeof(out->hash), "%s", ref->hash);
	ret = t->ops->open_object(t, ref->hash, ref->size, out);
	if (ret)
		return ret;
	out->tier = t;
	out->tier_index = (int)i;
	if (h->verify != DV_VERIFY_ALWAYS || !ref->sha256 || out->fd < 0)
		return 0;
	ret = dv_sha256_fd(out->fd, digest);
	if (ret == 0 && memcmp(digest, ref->sha256, 32) == 0)
		return 0;
	dv_warn("tier '%s': %s (%s) does not match its sha256: removing it",
		t->name, dv_hier_label(ref), ref->hash);
	dv_stat_add(&t->stats.verify_failures, 1);
	dv_stat_add(&h->stats.verify_failures, 1);
	dv_object_release(out);
	dv_tier_remove(t, ref->hash);
	return -EBADMSG;
}

/*
 * Finds the first tier at or after @from that holds the shard (R1): its
 * index in *@hit, or -1. A tier that fails is a miss of that tier, except
 * a remote tier refusing our credentials: that is -EACCES for the caller,
 * not a miss that would send every read to the origin.
 */
static int find(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
		size_t from, ssize_t *hit)
{
	*hit = -1;
	for (size_t i = from; i < h->n; i++) {
		struct dv_tier *t = h->tiers[i];
		int ret = t->ops->lookup(t, ref->hash, ref->size);

		if (ret == 0) {
			*hit = (ssize_t)i;
			return 0;
		}
		if (ret == -ENOENT || ret == -EBADMSG)
			continue;
		dv_stat_add(&t->stats.errors, 1);
		if (ret == -EACCES && dv_hier_is_remote(t)) {
			dv_err("tier '%s': access denied looking up %s: check its credentials",
			       t->name, dv_hier_label(ref));
			return -EACCES;
		}
		dv_warn("tier '%s': lookup of %s failed: %s", t->name,
			dv_hier_label(ref), strerror(-ret));
	}
	return 0;
}

static void count_walk(struct dv_hierarchy *h, ssize_t hit)
{
	size_t misses = hit < 0 ? h->n : (size_t)hit;

	for (size_t i = 0; i < misses; i++)
		dv_stat_add(&h->tiers[i]->stats.misses, 1);
	if (hit >= 0)
		dv_stat_add(&h->tiers[hit]->stats.hits, 1);
}

/* ---- installs ---- */

static bool install_into(struct dv_tier *t, const struct dv_shard_ref *ref,
			 int fd, const char *path, unsigned flags)
{
	int ret;

	if (t->max_bytes && ref->size > t->max_bytes) {
		dv_warn("tier '%s': skipping %s (%" PRIu64
			" bytes): larger than its max_bytes %" PRIu64,
			t->name, dv_hier_label(ref), ref->size, t->max_bytes);
		return false;
	}
	ret = t->ops->install(t, ref->hash, fd, path, ref->size, flags);
	if (ret == 0)
		return true;
	dv_stat_add(&t->stats.errors, 1);
	if (ret == -ENOSPC || ret == -EFBIG)
		dv_warn("tier '%s': no room for %s (%" PRIu64 " bytes), skipped",
			t->name, dv_hier_label(ref), ref->size);
	else
		dv_warn("tier '%s': install of %s failed: %s", t->name,
			dv_hier_label(ref), strerror(-ret));
	return false;
}

/* B5: remote tiers get the installed bytes in the background. */
static void upload_later(struct dv_hierarchy *h, struct dv_tier *t,
			 const struct dv_shard_ref *ref, int fd)
{
	int copy;

	if (t->max_bytes && ref->size > t->max_bytes) {
		dv_warn("tier '%s': skipping %s (%" PRIu64
			" bytes): larger than its max_bytes %" PRIu64,
			t->name, dv_hier_label(ref), ref->size, t->max_bytes);
		return;
	}
	copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (copy < 0) {
		dv_warn("tier '%s': cannot queue the upload of %s: %s", t->name,
			dv_hier_label(ref), strerror(errno));
		return;
	}
	dv_uploader_enqueue(h->up, t, ref->hash, copy, ref->size,
			    dv_hier_label(ref));
}

/*
 * Installs the verified file @fd/@path into tiers [0, @limit) except
 * @skip: local tiers first, then remote ones from the installed copy.
 * @move_into, when < limit, is the tier whose staging file @path is: it is
 * renamed in last. Returns the topmost local tier that accepted, or -1.
 */
ssize_t dv_hier_install_all(struct dv_hierarchy *h,
			   const struct dv_shard_ref *ref, int fd,
			   const char *path, size_t limit, size_t move_into,
			   ssize_t skip)
{
	ssize_t top = -1;
	bool any_remote = false;

	for (size_t j = 0; j < limit; j++) {
		struct dv_tier *t = h->tiers[j];

		if ((ssize_t)j == skip || j == move_into)
			continue;
		if (dv_hier_is_remote(t)) {
			any_remote = true;
			continue;
		}
		if (install_into(t, ref, fd, path, 0) && top < 0)
			top = (ssize_t)j;
	}
	if (move_into < limit &&
	    install_into(h->tiers[move_into], ref, fd, path, DV_INSTALL_MOVE) &&
	    (top < 0 || (ssize_t)move_into < top))
		top = (ssize_t)move_into;
	if (!any_remote)
		return top;
	for (size_t j = 0; j < limit; j++) {
		if ((ssize_t)j != skip && dv_hier_is_remote(h->tiers[j]))
			upload_later(h, h->tiers[j], ref, fd);
	}
	return top;
}

double dv_hier_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void dv_hier_observe_fill(struct dv_hierarchy *h, double seconds)
{
	size_t b = 0;

	while (b < DV_FILL_BUCKETS && seconds > dv_fill_bucket_bounds[b])
		b++;
	dv_stat_add(&h->fill_buckets[b], 1);
	dv_stat_add(&h->stats.fill_ns_total, (uint64_t)(seconds * 1e9));
}

/*
 * Reserves @size bytes for the staging file @st of tier @t, evicting in
 * the tier to make room if it must, so that a fill never runs out of space
 * halfway. 0, or -ENOSPC. free_space evicts nothing when evicting could
 * not make the room: a shard larger than the tier's filesystem then goes
 * to the next folder tier, and the cached shards stay. Filesystems
 * without fallocate are not refused.
 */
int dv_hier_reserve(struct dv_tier *t, struct dv_staged *st,
			   uint64_t size)
{
	if (size == 0 || fallocate(st->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)size) == 0)
		return 0;
	if (errno != ENOSPC)
		return 0;
	if (dv_tier_free_space(t, size) == 0 &&
	    fallocate(st->fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)size) == 0)
		return 0;
	return -ENOSPC;
}

/*
 * A staging file in the landing tier or, when it cannot take one of @size
 * bytes (its filesystem is full even after eviction, or it is broken), in
 * the next folder tier that can.
 */
static int stage_in_landing(struct dv_hierarchy *h, const char *hash,
			    uint64_t size, struct dv_staged *st, size_t *where)
{
	int ret = -EIO;

	for (size_t i = h->landing; i < h->n; i++) {
		struct dv_tier *t = h->tiers[i];

		if (!dv_tier_is_folder(t))
			continue;
		ret = t->ops->stage_open(t, hash, st);
		if (ret == 0) {
			ret = dv_hier_reserve(t, st, size);
			if (ret == 0) {
				*where = i;
				return 0;
			}
			dv_warn("tier '%s': no room to stage %s (%" PRIu64
				" bytes); trying the next folder tier",
				t->name, hash, size);
			t->ops->stage_discard(t, st);
		}
		dv_stat_add(&t->stats.errors, 1);
	}
	return ret;
}

static void staged_done(struct dv_hierarchy *h, size_t where,
			struct dv_staged *st)
{
	struct dv_tier *t = h->tiers[where];

	/* If it was renamed in, the unlink finds nothing: that is fine. */
	t->ops->stage_discard(t, st);
}

/*
 * Streams the shard into a staging file through a verifying sink, from
 * @src (the origin's fetcher, a remote tier's download, or a local object
 * that is not a file), named @from in log lines. 0 with @st filled, or
 * -errno; -EIO for bytes that fail verification.
 */
static int stream_in(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
		     const struct dv_fetcher *src, const char *from,
		     struct dv_staged *st, size_t *where)
{
	struct dv_sink sink;
	int ret;

	ret = stage_in_landing(h, ref->hash, ref->size, st, where);
	if (ret) {
		dv_err("%s: no folder tier can stage it: %s", dv_hier_label(ref),
		       strerror(-ret));
		return ret;
	}
	ret = dv_sink_init(&sink, st->fd, ref->size, ref->sha256);
	if (ret)
		goto out;
	sink.tap = ref->tap;
	ret = src->fetch(src->arg, ref, &sink);
	if (ret == 0)
		ret = dv_sink_finish(&sink);
	if (ret == -EBADMSG) {
		dv_err("%s (%s): bytes from %s do not match the manifest's sha256; discarded",
		       dv_hier_label(ref), ref->hash, from);
		dv_stat_add(&h->stats.verify_failures, 1);
		ret = -EIO;
	} else if (ret == -EFBIG) {
		dv_err("%s (%s): %s sent more than the expected %" PRIu64
		       " bytes; discarded", dv_hier_label(ref), ref->hash, from,
		       ref->size);
		ret = -EIO;
	} else if (ret == -EIO && sink.written != ref->size) {
		dv_err("%s (%s): %s sent %" PRIu64 " of %" PRIu64
		       " bytes; discarded", dv_hier_label(ref), ref->hash, from,
		       sink.written, ref->size);
	} else if (ret) {
		dv_err("%s (%s): fetch from %s failed: %s", dv_hier_label(ref),
		       ref->hash, from, strerror(-ret));
	}
	dv_sink_release(&sink);
out:
	if (ret)
		staged_done(h, *where, st);
	return ret;
}

/* A remote tier's download as a fetcher. */
static int remote_fetch(void *arg, const struct dv_shard_ref *ref,
			struct dv_sink *sink)
{
	struct dv_tier *t = arg;

	return t->ops->download(t, ref->hash, ref->size, sink);
}

/* A local object without an fd (stripe) as a fetcher. */
static int object_fetch(void *arg, const struct dv_shard_ref *ref,
			struct dv_sink *sink)
{
	static const size_t chunk = 4u << 20;
	struct dv_object *obj = arg;
	char *buf = malloc(chunk);
	uint64_t off = 0;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (off < ref->size && !ret) {
		ssize_t n = dv_object_pread(obj, buf, chunk, off);

		if (n <= 0) {
			ret = n < 0 ? (int)n : -EIO;
			break;
		}
		ret = dv_sink_write(sink, buf, (size_t)n);
		off += (uint64_t)n;
	}
	free(buf);
	return ret;
}

/*
 * Opens the shard just installed, from tier @top down. Another fill (of
 * another hash in this daemon, or in a daemon sharing the tier) may have
 * evicted it from @top between its install and this open: then a slower
 * tier that took it serves it, and when none holds it any more -ESTALE
 * asks locked_get() to walk again (found by the soak, tests/faults).
 */
static int open_installed(struct dv_hierarchy *h,
			  const struct dv_shard_ref *ref, size_t top,
			  struct dv_object *out)
{
	for (size_t i = top; i < h->n; i++) {
		if (!dv_hier_is_remote(h->tiers[i]) && open_local(h, i, ref, out) == 0)
			return 0;
	}
	dv_info("%s: evicted before it could be opened; walking again",
		dv_hier_label(ref));
	return -ESTALE;
}

/* R2: a full miss. */
static int fill(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
		const struct dv_fetcher *fetcher, struct dv_object *out)
{
	struct dv_staged st = { .fd = -1 };
	double t0 = dv_hier_now(), t1, t2;
	size_t where;
	ssize_t top;
	int ret;

	dv_stat_add(&h->stats.fetches, 1);
	ret = stream_in(h, ref, fetcher, "origin", &st, &where);
	if (ret) {
		dv_stat_add(&h->stats.fetch_errors, 1);
		return ret;
	}
	dv_stat_add(&h->stats.fetch_bytes, ref->size);
	t1 = dv_hier_now();
	top = dv_hier_install_all(h, ref, st.fd, st.path, h->n, where, -1);
	staged_done(h, where, &st);
	t2 = dv_hier_now();
	dv_hier_observe_fill(h, t2 - t0);
	dv_debug("%s: filled in %.3f s (fetched and verified %.3f s, installed %.3f s)",
		 dv_hier_label(ref), t2 - t0, t1 - t0, t2 - t1);
	if (top < 0) {
		dv_err("%s: no tier accepted it (%" PRIu64 " bytes)",
		       dv_hier_label(ref), ref->size);
		return -ENOSPC;
	}
	return open_installed(h, ref, (size_t)top, out);
}

/* A remote tier's download_range as a fetcher's (the chunks of a stream). */
static int remote_fetch_range(void *arg, const struct dv_shard_ref *ref,
			      uint64_t off, uint64_t len, void *buf)
{
	struct dv_tier *t = arg;

	return dv_tier_download_range(t, ref->hash, ref->size, off, len, buf);
}

/*
 * R4: a hit in remote tier @i. -EAGAIN: go on walking below it. A shard
 * with a chunk list streams from the tier as a full miss streams from the
 * origin (stream.c; 1: the stream holds @held), its list from @origin;
 * without one, or when the list cannot be had, it is downloaded whole.
 */
static int promote_remote(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
			  size_t i, const struct dv_fetcher *origin,
			  struct held_locks *held, struct dv_object *out)
{
	struct dv_fetcher src = { .fetch = remote_fetch, .arg = h->tiers[i] };
	struct dv_staged st = { .fd = -1 };
	size_t where;
	ssize_t top;
	int ret;

	if (dv_tier_has_ranges(h->tiers[i])) {
		struct dv_stream_src from = { .list = origin, .bytes = &src,
					      .remote = (ssize_t)i };

		src.fetch_range = remote_fetch_range;
		ret = dv_hier_stream(h, ref, &from, held, out);
		if (ret < 0)
			dv_stat_add(&h->tiers[i]->stats.errors, 1);
		if (ret)
			return ret == 1 ? 1 : -EAGAIN;
	}
	ret = stream_in(h, ref, &src, h->tiers[i]->name, &st, &where);
	if (ret) {
		dv_stat_add(&h->tiers[i]->stats.errors, 1);
		if (ret == -EIO)
			dv_stat_add(&h->tiers[i]->stats.verify_failures, 1);
		return -EAGAIN;
	}
	dv_stat_add(&h->stats.promotions, 1);
	top = dv_hier_install_all(h, ref, st.fd, st.path, i, where, -1);
	staged_done(h, where, &st);
	if (top < 0) {
		dv_err("%s: found in remote tier '%s' but no faster folder tier could take it",
		       dv_hier_label(ref), h->tiers[i]->name);
		return -ENOSPC;
	}
	return open_installed(h, ref, (size_t)top, out);
}

/*
 * R3 for an object that is not a file (stripe): it is staged through a
 * sink into the landing tier and installed from there into the faster
 * tiers. If none takes it, it is served in place, as a folder hit is.
 */
static int promote_object(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
			  size_t i, struct dv_object *src, struct dv_object *out)
{
	struct dv_fetcher f = { .fetch = object_fetch, .arg = src };
	struct dv_staged st = { .fd = -1 };
	ssize_t top = -1;
	size_t where;

	if (h->landing < i &&
	    stream_in(h, ref, &f, h->tiers[i]->name, &st, &where) == 0) {
		top = dv_hier_install_all(h, ref, st.fd, st.path, i, where, -1);
		staged_done(h, where, &st);
	}
	if (top < 0) {
		*out = *src;
		return 0;
	}
	dv_stat_add(&h->stats.promotions, 1);
	dv_object_release(src);
	return open_installed(h, ref, (size_t)top, out);
}

/* R3: a hit in local tier @i > 0. */
static int promote_local(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
			 size_t i, struct dv_object *out)
{
	struct dv_object src;
	ssize_t top;
	int ret;

	ret = open_local(h, i, ref, &src);
	if (ret)
		return -EAGAIN;
	if (src.fd < 0)
		return promote_object(h, ref, i, &src, out);
	dv_stat_add(&h->stats.promotions, 1);
	top = dv_hier_install_all(h, ref, src.fd, src.path, i, h->n, -1);
	if (top < 0) {
		dv_warn("%s: no faster tier took it; served from tier '%s'",
			dv_hier_label(ref), h->tiers[i]->name);
		*out = src;
		return 0;
	}
	dv_object_release(&src);
	return open_installed(h, ref, (size_t)top, out);
}

/*
 * With the locks @held: walk again and act on what is found. 1 when a
 * streaming fill took the locks over (stream.c).
 */
static int locked_get(struct dv_hierarchy *h, const struct dv_shard_ref *ref,
		      const struct dv_fetcher *fetcher,
		      struct held_locks *held, struct dv_object *out)
{
	size_t from = 0;
	unsigned rewalks = 0;

	for (;;) {
		ssize_t i;
		int ret = find(h, ref, from, &i);

		if (ret)
			return ret;
		count_walk(h, i);
		if (i < 0) {
			struct dv_stream_src cold = { .list = fetcher,
						      .bytes = fetcher,
						      .remote = -1 };

			ret = dv_hier_stream(h, ref, &cold, held, out);
			if (ret == 0)
				ret = fill(h, ref, fetcher, out);
		}
		else if (dv_hier_is_remote(h->tiers[i]))
			ret = promote_remote(h, ref, (size_t)i, fetcher, held, out);
		else if (i == 0)
			ret = open_local(h, 0, ref, out) ? -EAGAIN : 0;
		else
			ret = promote_local(h, ref, (size_t)i, out);
		if (ret == -ESTALE && rewalks++ < 3) {
			from = 0; /* evicted before it was opened */
			continue;
		}
		if (ret == -ESTALE) {
			dv_err("%s: evicted again and again before it could be opened",
			       dv_hier_label(ref));
			return -EIO;
		}
		if (i < 0 || ret != -EAGAIN)
			return ret;
		from = (size_t)i + 1;
	}
}

int dv_hierarchy_get_or_fetch(struct dv_hierarchy *h,
			      const struct dv_shard_ref *ref,
			      const struct dv_fetcher *fetcher,
			      struct dv_object *out)
{
	struct held_locks held;
	int ret;

	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if (!ref || !ref->hash || !dv_valid_hash(ref->hash))
		return -EINVAL;

	/* Fast path: a plain hit on top, no lock (R1, R5). */
	if (h->verify != DV_VERIFY_ALWAYS && !dv_hier_is_remote(h->tiers[0]) &&
	    h->tiers[0]->ops->lookup(h->tiers[0], ref->hash, ref->size) == 0 &&
	    open_local(h, 0, ref, out) == 0) {
		dv_stat_add(&h->tiers[0]->stats.hits, 1);
		return 0;
	}

	/* A fill of this shard streaming in this daemon: read along. */
	if (dv_hier_stream_join(h, ref, out))
		return 0;
	dv_hier_lock_all(h, ref->hash, &held);
	ret = locked_get(h, ref, fetcher, &held, out);
	if (ret == 1) /* the stream holds the locks until it ends */
		return out->fill ? 0 : -EMFILE;
	dv_hier_unlock_all(h, ref->hash, &held);
	return ret;
}

void dv_object_release(struct dv_object *obj)
{
	if (obj->fill) {
		/* A streaming object: its own fd, no pin, the fill goes on. */
		dv_fill_go(obj->fill);
		dv_fill_put(obj->fill);
		obj->fill = NULL;
		obj->tier = NULL;
	}
	if (!obj->tier) {
		if (obj->fd >= 0)
			close(obj->fd);
		obj->fd = -1;
		return;
	}
	dv_tier_close_object(obj->tier, obj);
	obj->fd = -1;
	obj->tier = NULL;
}

ssize_t dv_object_pread(struct dv_object *obj, void *buf, size_t len,
			uint64_t off)
{
	ssize_t n;

	if (obj->fd < 0)
		return obj->tier->ops->read(obj->tier, obj, buf, len, off);
	n = pread(obj->fd, buf, len, (off_t)off);
	return n < 0 ? -errno : n;
}

/* ---- construction ---- */

static int by_lock_key(const void *a, const void *b, void *arg)
{
	struct dv_hierarchy *h = arg;
	const struct dv_tier *x = h->tiers[*(const size_t *)a];
	const struct dv_tier *y = h->tiers[*(const size_t *)b];

	return strcmp(x->lock_key ? x->lock_key : x->name,
		      y->lock_key ? y->lock_key : y->name);
}

static int plan_locks(struct dv_hierarchy *h)
{
	size_t k = 0;

	h->lock_order = calloc(h->n, sizeof(*h->lock_order));
	if (!h->lock_order)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++) {
		if (dv_tier_has_locks(h->tiers[i]))
			h->lock_order[k++] = i;
	}
	if (k > sizeof(((struct held_locks *)0)->fd) / sizeof(int))
		return -E2BIG;
	qsort_r(h->lock_order, k, sizeof(size_t), by_lock_key, h);
	/* One directory listed twice would lock against itself. */
	h->nlocks = 0;
	for (size_t i = 0; i < k; i++) {
		if (h->nlocks && by_lock_key(&h->lock_order[h->nlocks - 1],
					     &h->lock_order[i], h) == 0) {
			dv_warn("tier '%s' is the same directory as tier '%s'",
				h->tiers[h->lock_order[i]]->name,
				h->tiers[h->lock_order[h->nlocks - 1]]->name);
			continue;
		}
		h->lock_order[h->nlocks++] = h->lock_order[i];
	}
	return 0;
}

static int start_uploader(struct dv_hierarchy *h)
{
	for (size_t i = 0; i < h->n; i++) {
		if (dv_hier_is_remote(h->tiers[i]))
			return dv_uploader_new(UPLOAD_QUEUE, UPLOAD_THREADS, &h->up);
	}
	return 0;
}

int dv_hierarchy_from_tiers(struct dv_tier **tiers, size_t ntiers,
			    enum dv_verify_mode verify,
			    struct dv_hierarchy **out, char *err, size_t errlen)
{
	struct dv_hierarchy *h = calloc(1, sizeof(*h));
	int ret = -ENOMEM;

	if (!h)
		goto fail_tiers;
	h->tiers = calloc(ntiers ? ntiers : 1, sizeof(*h->tiers));
	if (!h->tiers)
		goto fail_tiers;
	memcpy(h->tiers, tiers, ntiers * sizeof(*tiers));
	h->n = ntiers;
	h->verify = verify;
	h->landing = ntiers;
	dv_hier_streams_init(h, NULL);
	for (size_t i = 0; i < ntiers; i++) {
		if (dv_tier_is_folder(tiers[i])) {
			h->landing = i;
			break;
		}
	}
	if (h->landing == ntiers) {
		snprintf(err, errlen,
			 "the hierarchy needs at least one folder tier (folder or ram) to land shards in");
		ret = -EINVAL;
		goto fail;
	}
	for (size_t i = 0; i < ntiers; i++) {
		struct dv_tier *t = tiers[i];

		ret = dv_tier_open(t);
		if (ret) {
			snprintf(err, errlen, "tier '%s': cannot open: %s",
				 t->name, strerror(-ret));
			goto fail;
		}
	}
	ret = plan_locks(h);
	if (ret) {
		snprintf(err, errlen, "too many tiers");
		goto fail;
	}
	ret = start_uploader(h);
	if (ret) {
		snprintf(err, errlen, "cannot start the upload queue: %s",
			 strerror(-ret));
		goto fail;
	}
	*out = h;
	return 0;

fail_tiers:
	snprintf(err, errlen, "out of memory");
	for (size_t i = 0; i < ntiers; i++)
		dv_tier_free(tiers[i]);
	if (h)
		free(h->tiers);
	free(h);
	return ret;
fail:
	dv_hierarchy_free(h);
	return ret;
}

int dv_hierarchy_new(const struct dv_config *cfg, struct dv_hierarchy **out,
		     char *err, size_t errlen)
{
	struct dv_tier **tiers = calloc(cfg->ntiers ? cfg->ntiers : 1,
					sizeof(*tiers));
	int ret = 0;

	if (!tiers) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < cfg->ntiers; i++) {
		ret = dv_tier_new(&cfg->tiers[i], cfg, &tiers[i], err, errlen);
		if (ret) {
			for (size_t j = 0; j < i; j++)
				dv_tier_free(tiers[j]);
			free(tiers);
			return ret;
		}
	}
	ret = dv_hierarchy_from_tiers(tiers, cfg->ntiers, cfg->verify, out,
				      err, errlen);
	if (ret == 0)
		dv_hierarchy_set_fill(*out, &cfg->fill);
	free(tiers);
	return ret;
}

void dv_hierarchy_free(struct dv_hierarchy *h)
{
	if (!h)
		return;
	/* Workers read the tiers: stop them first. */
	dv_hier_streams_release(h);
	dv_uploader_free(h->up, UPLOAD_GRACE_MS);
	for (size_t i = 0; i < h->n; i++)
		dv_tier_free(h->tiers[i]);
	free(h->tiers);
	free(h->lock_order);
	free(h);
}

void dv_hierarchy_stats(struct dv_hierarchy *h,
			struct dv_hierarchy_stats *out,
			uint64_t fill_buckets[DV_FILL_BUCKETS + 1])
{
	dv_hier_stream_stats(h, out);
	out->fetches = dv_stat_get(&h->stats.fetches);
	out->fetch_bytes = dv_stat_get(&h->stats.fetch_bytes);
	out->fetch_errors = dv_stat_get(&h->stats.fetch_errors);
	out->verify_failures = dv_stat_get(&h->stats.verify_failures);
	out->promotions = dv_stat_get(&h->stats.promotions);
	out->fill_ns_total = dv_stat_get(&h->stats.fill_ns_total);
	if (!fill_buckets)
		return;
	for (size_t b = 0; b <= DV_FILL_BUCKETS; b++)
		fill_buckets[b] = dv_stat_get(&h->fill_buckets[b]);
}

ssize_t dv_hierarchy_holder(struct dv_hierarchy *h, const char *hash,
			    uint64_t size)
{
	for (size_t i = 0; i < h->n; i++) {
		if (dv_tier_lookup(h->tiers[i], hash, size) == 0)
			return (ssize_t)i;
	}
	return -ENOENT;
}

void dv_hierarchy_flush_uploads(struct dv_hierarchy *h)
{
	if (h->up)
		dv_uploader_flush(h->up);
}

void dv_hierarchy_upload_stats(struct dv_hierarchy *h,
			       struct dv_upload_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (h->up)
		dv_uploader_stats(h->up, out);
}
