/*
 * The stripe tier: the ops table over a pool of raw devices.
 *
 * Design.
 *   devices   `devices:` lists block devices or files; `auto` takes every
 *             nvme* and sd* block device that discovery accepts
 *             (discovery.h: never the root device, mounted, claimed or
 *             foreign-signed ones unless listed with `format: true`).
 *   layout    an object is cut into chunk_bytes chunks (4 MiB by default),
 *             chunk 0 on the device picked by a checksum of its content
 *             hash, the next ones round-robin; every chunk takes a free
 *             slot of its device (layout.h, freemap.h) and records device,
 *             slot and its XXH3-64.
 *   state     each device starts with a superblock naming the pool, its
 *             index in it and the chunk size (layout.h). The index journal
 *             lives on a filesystem, in <state>/stripe-<pool id>/journal,
 *             where <state> is the config's state_dir, else
 *             /var/cache/datavo for root, else ~/.cache/altavo/datavo: a
 *             journal of small appends does not belong on O_DIRECT devices,
 *             and a pool found without its journal is simply empty (the
 *             superblocks name the journal that owns the data, pool.h).
 *   install   slots are chosen, the chunks written in parallel and made
 *             durable, then the ADD record is appended and synced: only
 *             then is the object visible (index.h). A crash in between
 *             leaves slots that no entry names: free again at the next open.
 *   reads     a reader per open handle (engine.h): chunks read whole with
 *             O_DIRECT, read ahead for sequential readers, and checked
 *             against their XXH3: the first time this process reads each
 *             chunk (a chunk it wrote itself counts as checked), or every
 *             time with `verify: always`, never with `verify: off`. So a
 *             device damaged while the daemon was down is caught, and a
 *             steady reader pays no hashing. A chunk that fails its check
 *             is an EIO, and the object is removed so that the next open
 *             refetches it (B3).
 *   space     W-TinyLFU (tinylfu.h), weighted by the chunk bytes an object
 *             occupies, decides what stays; every lookup, hit or miss, is
 *             an access for its sketch. An object open here is pinned: it
 *             is never a victim (B6), and the slots of a removed object are
 *             reused only after its last handle closes and its DEL record
 *             is durable.
 *   ownership one daemon per pool: devices are flocked (and opened O_EXCL).
 *
 * Locking: t->lock protects the index, the policy, the free map and the
 * counts; it is held for journal appends (one fdatasync) but never while
 * chunks are read or written. Readers have their own lock.
 *
 * What this tier does not do: per-hash locks (R7 and B1 are the folder
 * tiers' locks; one is always configured, R6), staging (it is never a
 * landing tier), or moving objects between tiers (hierarchy.c).
 */
#include "stripe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"
#include "config/util.h"
#include "engine.h"
#include "freemap.h"
#include "index.h"
#include "pool.h"
#include "tinylfu.h"

#define BUFFER_BUDGET_MAX (1ULL << 30)

struct stripe_tier {
	struct dv_tier base;
	/* config */
	char **devices;           /* NULL: auto */
	bool format;
	uint64_t chunk_bytes;
	char *state_base;
	const char *stall;        /* test hook, from the environment */
	enum dv_stripe_check check; /* from the config's verify */
	/* after open */
	bool opened;
	struct dv_stripe_pool pool;
	struct dv_stripe_io io;
	pthread_mutex_t lock;
	struct dv_stripe_index ix;   /* protected by lock */
	struct dv_lfu lfu;           /* protected by lock */
	struct dv_freemap fm;        /* protected by lock */
	struct dv_stripe_entry *installing; /* protected by lock */
	uint64_t used_bytes;         /* protected by lock */
};

/* An open object. */
struct stripe_handle {
	struct dv_stripe_entry *e;   /* one reference */
	struct dv_stripe_reader *r;
};

static struct stripe_tier *stripe_downcast(struct dv_tier *t)
{
	return dv_tier_downcast(t, &dv_tier_stripe_ops);
}

static struct dv_stripe_entry *entry_of(struct dv_lfu_node *n)
{
	return (struct dv_stripe_entry *)((char *)n -
					  offsetof(struct dv_stripe_entry, lfu));
}

const char *dv_stripe_tier_state_dir(struct dv_tier *t)
{
	return stripe_downcast(t)->pool.state_dir;
}

/* ---- entries and their slots (t->lock held) ---- */

static uint64_t weight_of(const struct stripe_tier *st, uint64_t size)
{
	return dv_stripe_nchunks(size, st->chunk_bytes) * st->chunk_bytes;
}

static void put_slots(struct stripe_tier *st, struct dv_stripe_entry *e,
		      uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		dv_freemap_put(&st->fm, e->chunks[i].dev, e->chunks[i].slot);
}

/* Drops one reference; the last frees the entry and, unless leaked, its slots. */
static void unref(struct stripe_tier *st, struct dv_stripe_entry *e)
{
	if (--e->refs > 0 || e->indexed)
		return;
	if (!e->leak)
		put_slots(st, e, e->nchunks);
	free(e);
}

/*
 * Takes @n indexed entries out: a durable DEL each, out of the policy,
 * their bytes uncounted, the table's references dropped.
 */
static void delete_entries(struct stripe_tier *st, struct dv_stripe_entry **v,
			   size_t n)
{
	if (n == 0)
		return;
	dv_stripe_index_delete(&st->ix, v, n);
	for (size_t i = 0; i < n; i++) {
		dv_lfu_remove(&st->lfu, &v[i]->lfu);
		st->used_bytes -= v[i]->size;
		unref(st, v[i]);
	}
}

/* ---- the policy's callbacks ---- */

struct victims {
	struct dv_stripe_entry **v;
	size_t n, cap;
	bool nomem;
};

static bool can_evict(struct dv_lfu_node *n, void *arg)
{
	struct dv_stripe_entry *e = entry_of(n);

	/* Only the table holds it: not open (B6), not being installed. */
	return e->indexed && e->refs == 1;
}

static void collect(struct dv_lfu_node *n, void *arg)
{
	struct victims *vs = arg;
	struct dv_stripe_entry **v = dv_grow(vs->v, vs->n, &vs->cap,
					     sizeof(*v), 16);

	if (!v) {
		/* The node is out of the policy; keep it in the index. */
		vs->nomem = true;
		return;
	}
	vs->v = v;
	vs->v[vs->n++] = entry_of(n);
}

static void evict_victims(struct stripe_tier *st, struct victims *vs)
{
	for (size_t i = 0; i < vs->n; i++)
		dv_info("tier '%s': evicted %s (%" PRIu64 " bytes)",
			st->base.name, vs->v[i]->hash, vs->v[i]->size);
	if (vs->nomem)
		dv_warn("tier '%s': out of memory while evicting: some objects stay cached untracked until a restart",
			st->base.name);
	/* Already out of the policy: delete_entries' remove is a no-op. */
	delete_entries(st, vs->v, vs->n);
	dv_stat_add(&st->base.stats.evictions, vs->n);
	free(vs->v);
	memset(vs, 0, sizeof(*vs));
}

/* ---- open ---- */

/* Picks the accepted devices; with explicit devices, all must be. */
static int choose_devices(struct stripe_tier *st, const struct dv_tier_config *tc,
			  char ***out, size_t *nout)
{
	struct dv_stripe_device *d;
	size_t n, k = 0;
	char **paths;
	int ret = dv_stripe_discover(tc, &d, &n);

	if (ret)
		return ret;
	paths = calloc(n + 1, sizeof(*paths));
	for (size_t i = 0; i < n && paths; i++) {
		if (!d[i].accepted) {
			if (!st->devices)
				continue;
			dv_err("tier '%s': refusing %s: %s", st->base.name,
			       d[i].path, d[i].reason);
			ret = -EPERM;
			continue;
		}
		if (d[i].overwrite)
			dv_warn("tier '%s': %s carries %s; format: true: overwriting it",
				st->base.name, d[i].path, d[i].what);
		paths[k] = strdup(d[i].path);
		if (!paths[k])
			ret = -ENOMEM;
		else
			k++;
	}
	free(d);
	if (!paths)
		return -ENOMEM;
	if (!ret && k == 0) {
		dv_err("tier '%s': devices: auto found no usable device (datavoctl inspect says why)",
		       st->base.name);
		ret = -ENODEV;
	}
	if (!ret && k > DV_STRIPE_MAX_DEVICES) {
		dv_warn("tier '%s': using the first %u of %zu devices",
			st->base.name, DV_STRIPE_MAX_DEVICES, k);
		k = DV_STRIPE_MAX_DEVICES;
	}
	*out = paths;
	*nout = k;
	return ret;
}

static void free_paths(char **paths)
{
	for (char **p = paths; p && *p; p++)
		free(*p);
	free(paths);
}

/* Slots of entry @e, all or none. false: a slot is out of range or taken. */
static bool take_slots(struct stripe_tier *st, struct dv_stripe_entry *e)
{
	for (uint32_t i = 0; i < e->nchunks; i++) {
		if (!dv_freemap_take(&st->fm, e->chunks[i].dev, e->chunks[i].slot)) {
			put_slots(st, e, i);
			return false;
		}
	}
	return true;
}

static int by_seq_desc(const void *a, const void *b)
{
	const struct dv_stripe_entry *x = *(struct dv_stripe_entry *const *)a;
	const struct dv_stripe_entry *y = *(struct dv_stripe_entry *const *)b;

	return x->seq > y->seq ? -1 : x->seq < y->seq;
}

/*
 * Rebuilds the free map and the policy from the replayed index. Entries
 * whose slots make no sense, or that an entry committed later overlaps
 * (its bytes were overwritten), are dropped.
 */
static int restore(struct stripe_tier *st)
{
	struct dv_stripe_entry **v;
	struct victims vs = { 0 };
	size_t n, dropped = 0;
	int ret = dv_stripe_index_list(&st->ix, &v, &n);

	if (ret)
		return ret;
	if (n > 1)
		qsort(v, n, sizeof(*v), by_seq_desc);
	for (size_t i = 0; i < n; i++) {
		if (take_slots(st, v[i]))
			continue;
		dv_warn("tier '%s': dropping %s: its chunks overlap a newer object or lie outside the pool",
			st->base.name, v[i]->hash);
		v[dropped++] = v[i];
	}
	if (dropped)
		dv_stripe_index_delete(&st->ix, v, dropped);
	for (size_t i = 0; i < dropped; i++)
		free(v[i]); /* out of the table, and it holds no slot */
	free(v);
	ret = dv_stripe_index_list(&st->ix, &v, &n);
	if (ret)
		return ret;
	if (n > 1)
		qsort(v, n, sizeof(*v), by_seq_desc);
	for (size_t i = n; i-- > 0;) { /* oldest first: the newest ends MRU */
		v[i]->lfu.weight = weight_of(st, v[i]->size);
		dv_lfu_restore(&st->lfu, &v[i]->lfu);
		st->used_bytes += v[i]->size;
	}
	free(v);
	dv_lfu_trim(&st->lfu, can_evict, collect, &vs);
	evict_victims(st, &vs);
	if (dropped || dv_stripe_index_bloated(&st->ix))
		dv_stripe_index_compact(&st->ix);
	return 0;
}

static uint64_t capacity_of(struct stripe_tier *st)
{
	uint64_t slots = 0, cap;

	for (unsigned i = 0; i < st->pool.ndev; i++)
		slots += st->pool.sb[i].nslots;
	cap = slots * st->chunk_bytes;
	if (st->base.max_bytes && st->base.max_bytes < cap)
		cap = st->base.max_bytes / st->chunk_bytes * st->chunk_bytes;
	return cap;
}

static int start_space(struct stripe_tier *st)
{
	uint64_t nslots[DV_STRIPE_MAX_DEVICES];
	uint64_t cap = capacity_of(st);
	int ret;

	for (unsigned i = 0; i < st->pool.ndev; i++)
		nslots[i] = st->pool.sb[i].nslots;
	ret = dv_freemap_init(&st->fm, st->pool.ndev, nslots);
	if (!ret)
		ret = dv_lfu_init(&st->lfu, cap, cap / st->chunk_bytes);
	if (!ret)
		ret = restore(st);
	return ret;
}

static void start_io(struct stripe_tier *st)
{
	uint64_t mem = dv_physical_memory();
	uint64_t budget = mem ? mem / 16 : BUFFER_BUDGET_MAX;

	if (budget > BUFFER_BUDGET_MAX)
		budget = BUFFER_BUDGET_MAX;
	if (budget < 4 * st->chunk_bytes)
		budget = 4 * st->chunk_bytes;
	st->io.fds = st->pool.fds;
	st->io.ndev = st->pool.ndev;
	st->io.chunk_bytes = st->chunk_bytes;
	st->io.data_offset = st->pool.data_offset;
	st->io.buffer_budget = budget;
	st->io.check = st->check;
	st->io.qd = dv_ring_default_qd();
}

static int stripe_open(struct dv_tier *t)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct dv_tier_config tc = {
		.name = t->name, .devices = st->devices,
		.devices_auto = !st->devices, .chunk_bytes = st->chunk_bytes,
		.format = st->format,
	};
	char err[512] = "";
	char **paths = NULL;
	size_t n = 0;
	int ret = choose_devices(st, &tc, &paths, &n);

	if (ret) {
		free_paths(paths);
		return ret;
	}
	ret = dv_stripe_pool_open(&st->pool, paths, n, st->chunk_bytes,
				  st->state_base, t->name, &st->ix, err,
				  sizeof(err));
	free_paths(paths);
	if (ret) {
		dv_err("tier '%s': %s", t->name, err);
		return ret;
	}
	st->opened = true;
	start_io(st);
	ret = start_space(st);
	if (ret) {
		dv_err("tier '%s': cannot start: %s", t->name, strerror(-ret));
		return ret;
	}
	dv_info("tier '%s': %u devices, %" PRIu64 " objects, %" PRIu64
		" of %" PRIu64 " bytes used, state in %s",
		t->name, st->pool.ndev, (uint64_t)st->ix.n, st->used_bytes,
		st->lfu.capacity, st->pool.state_dir);
	return 0;
}

static void stripe_destroy(struct dv_tier *t)
{
	struct stripe_tier *st = stripe_downcast(t);

	if (st->opened) {
		dv_stripe_index_close(&st->ix);
		dv_stripe_pool_close(&st->pool);
	}
	dv_lfu_release(&st->lfu);
	dv_freemap_release(&st->fm);
	pthread_mutex_destroy(&st->lock);
	free_paths(st->devices);
	free(st->state_base);
	dv_tier_release(t);
	free(st);
}

/* ---- lookups and reads ---- */

static int stripe_lookup(struct dv_tier *t, const char *hash, uint64_t size)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct dv_stripe_entry *e;
	int ret;

	pthread_mutex_lock(&st->lock);
	dv_lfu_record(&st->lfu, dv_stripe_key(hash));
	e = dv_stripe_index_find(&st->ix, hash);
	ret = !e ? -ENOENT : e->size != size ? -EBADMSG : 0;
	pthread_mutex_unlock(&st->lock);
	return ret;
}

static int stripe_open_object(struct dv_tier *t, const char *hash,
			      uint64_t size, struct dv_object *obj)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct stripe_handle *h = calloc(1, sizeof(*h));
	int ret = 0;

	if (!h)
		return -ENOMEM;
	pthread_mutex_lock(&st->lock);
	h->e = dv_stripe_index_find(&st->ix, hash);
	if (!h->e) {
		ret = -ENOENT;
	} else if (h->e->size != size) {
		ret = -EBADMSG;
	} else {
		h->e->refs++;
		dv_lfu_touch(&st->lfu, &h->e->lfu);
	}
	pthread_mutex_unlock(&st->lock);
	if (!ret) {
		ret = dv_stripe_reader_new(&st->io, h->e, &h->r);
		if (ret) {
			pthread_mutex_lock(&st->lock);
			unref(st, h->e);
			pthread_mutex_unlock(&st->lock);
		}
	}
	if (ret) {
		free(h);
		return ret;
	}
	dv_tier_pin(t, hash);
	obj->handle = h;
	obj->fd = -1;
	obj->path[0] = '\0';
	obj->size = size;
	return 0;
}

static void stripe_close_object(struct dv_tier *t, struct dv_object *obj)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct stripe_handle *h = obj->handle;

	if (!h)
		return;
	dv_stripe_reader_free(h->r);
	dv_tier_unpin(t, obj->hash);
	pthread_mutex_lock(&st->lock);
	unref(st, h->e);
	pthread_mutex_unlock(&st->lock);
	free(h);
	obj->handle = NULL;
}

static ssize_t stripe_read(struct dv_tier *t, struct dv_object *obj, void *buf,
			   size_t len, uint64_t off)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct stripe_handle *h = obj->handle;
	ssize_t n = dv_stripe_reader_read(h->r, buf, len, off);

	if (n >= 0)
		return n;
	dv_stat_add(&t->stats.errors, 1);
	if (n != -EBADMSG) {
		dv_err("tier '%s': reading %s at %" PRIu64 ": %s", t->name,
		       h->e->hash, off, strerror((int)-n));
		return n;
	}
	/* B3: a corrupt copy is dropped; the next open fetches it again. */
	dv_err("tier '%s': %s has a chunk that fails its checksum: removing it",
	       t->name, h->e->hash);
	dv_stat_add(&t->stats.verify_failures, 1);
	pthread_mutex_lock(&st->lock);
	if (h->e->indexed) {
		struct dv_stripe_entry *e = h->e;

		delete_entries(st, &e, 1);
	}
	pthread_mutex_unlock(&st->lock);
	return -EIO;
}

void dv_stripe_object_stats(struct dv_object *obj,
			    struct dv_stripe_reader_stats *out)
{
	struct stripe_handle *h = obj->handle;

	dv_stripe_reader_stats(h->r, out);
}

uint64_t dv_stripe_tier_buffer_bytes(struct dv_tier *t)
{
	return __atomic_load_n(&stripe_downcast(t)->io.buffers, __ATOMIC_RELAXED);
}

void dv_stripe_tier_set_buffer_budget(struct dv_tier *t, uint64_t bytes)
{
	stripe_downcast(t)->io.buffer_budget = bytes;
}

/* ---- installs ---- */

static int alloc_slots(struct stripe_tier *st, struct dv_stripe_entry *e)
{
	unsigned ndev = st->pool.ndev;
	unsigned start = dv_stripe_start_device(e->hash, ndev);

	for (uint32_t i = 0; i < e->nchunks; i++) {
		unsigned dev;
		int64_t slot = dv_freemap_alloc(&st->fm,
						dv_stripe_chunk_device(start, i, ndev),
						&dev);

		if (slot < 0) {
			put_slots(st, e, i);
			return -ENOSPC;
		}
		e->chunks[i].dev = (uint16_t)dev;
		e->chunks[i].slot = (uint64_t)slot;
	}
	return 0;
}

static bool installing(struct stripe_tier *st, const char *hash)
{
	for (struct dv_stripe_entry *e = st->installing; e; e = e->hnext) {
		if (strcmp(e->hash, hash) == 0)
			return true;
	}
	return false;
}

static void installing_del(struct stripe_tier *st, struct dv_stripe_entry *e)
{
	struct dv_stripe_entry **pp = &st->installing;

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	e->hnext = NULL;
}

/*
 * With t->lock held: makes room for @e (W-TinyLFU), takes its slots and
 * registers it as being installed. 0, or -ENOSPC when refused.
 */
static int reserve(struct stripe_tier *st, struct dv_stripe_entry *e)
{
	struct victims vs = { 0 };
	bool admitted = dv_lfu_admit(&st->lfu, &e->lfu, can_evict, collect, &vs);

	evict_victims(st, &vs);
	if (!admitted)
		return -ENOSPC;
	if (alloc_slots(st, e)) {
		dv_lfu_remove(&st->lfu, &e->lfu);
		return -ENOSPC;
	}
	e->refs = 1; /* the installer's */
	e->hnext = st->installing;
	st->installing = e;
	return 0;
}

/* With t->lock held: makes @e visible, or undoes reserve() after @ret. */
static int finish(struct stripe_tier *st, struct dv_stripe_entry *e, int ret)
{
	installing_del(st, e);
	if (!ret)
		ret = dv_stripe_index_commit(&st->ix, e);
	if (ret) {
		dv_lfu_remove(&st->lfu, &e->lfu);
		unref(st, e);
		return ret;
	}
	e->refs--;
	st->used_bytes += e->size;
	dv_stat_add(&st->base.stats.installs, 1);
	dv_stat_add(&st->base.stats.bytes_in, e->size);
	if (dv_stripe_index_bloated(&st->ix))
		dv_stripe_index_compact(&st->ix);
	return 0;
}

static int stripe_install(struct dv_tier *t, const char *hash, int src_fd,
			  const char *src_path, uint64_t size, unsigned flags)
{
	struct stripe_tier *st = stripe_downcast(t);
	uint64_t nchunks = dv_stripe_nchunks(size, st->chunk_bytes);
	struct dv_stripe_entry *e, *old;
	int ret;

	if ((t->max_bytes && size > t->max_bytes) ||
	    weight_of(st, size) > st->lfu.capacity || nchunks > UINT32_MAX)
		return -EFBIG;
	e = dv_stripe_entry_new(hash, size, (uint32_t)nchunks);
	if (!e)
		return -ENOMEM;
	e->lfu.weight = weight_of(st, size);
	pthread_mutex_lock(&st->lock);
	old = dv_stripe_index_find(&st->ix, hash);
	if (old && old->size == size) {
		ret = 1; /* R7: already there, the caller discards its copy */
	} else if (installing(st, hash)) {
		ret = -EAGAIN;
	} else {
		if (old)
			delete_entries(st, &old, 1);
		ret = reserve(st, e);
	}
	pthread_mutex_unlock(&st->lock);
	if (ret) {
		free(e);
		return ret > 0 ? 0 : ret;
	}
	ret = dv_stripe_write_object(&st->io, e, src_fd, st->stall);
	if (ret)
		dv_err("tier '%s': writing %s: %s", t->name, hash, strerror(-ret));
	pthread_mutex_lock(&st->lock);
	ret = finish(st, e, ret);
	pthread_mutex_unlock(&st->lock);
	return ret;
}

/* ---- the rest ---- */

static int stripe_remove(struct dv_tier *t, const char *hash)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct dv_stripe_entry *e;
	int ret = 0;

	pthread_mutex_lock(&st->lock);
	e = dv_stripe_index_find(&st->ix, hash);
	if (e)
		delete_entries(st, &e, 1);
	else
		ret = -ENOENT;
	pthread_mutex_unlock(&st->lock);
	return ret;
}

static int stripe_usage(struct dv_tier *t, struct dv_tier_usage *u)
{
	struct stripe_tier *st = stripe_downcast(t);

	memset(u, 0, sizeof(*u));
	if (!st->opened)
		return 0;
	pthread_mutex_lock(&st->lock);
	u->used_bytes = st->used_bytes;
	u->objects = st->ix.n;
	u->capacity = st->lfu.capacity;
	u->fs_free = st->fm.nfree * st->chunk_bytes;
	pthread_mutex_unlock(&st->lock);
	return 0;
}

/* A snapshot taken under the lock, reported without it: @fn may call us. */
static int stripe_scan(struct dv_tier *t, dv_tier_scan_fn fn, void *arg)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct dv_stripe_entry **v = NULL;
	struct dv_tier_entry *e = NULL;
	size_t n = 0;
	int ret;

	if (!st->opened)
		return -ENOTSUP; /* the index is the daemon's (see tier.h) */
	pthread_mutex_lock(&st->lock);
	ret = dv_stripe_index_list(&st->ix, &v, &n);
	if (ret == 0 && n) {
		e = calloc(n, sizeof(*e));
		ret = e ? 0 : -ENOMEM;
	}
	for (size_t i = 0; ret == 0 && i < n; i++) {
		memcpy(e[i].hash, v[i]->hash, sizeof(e[i].hash));
		e[i].size = v[i]->size;
	}
	pthread_mutex_unlock(&st->lock);
	free(v);
	for (size_t i = 0; ret == 0 && i < n; i++)
		ret = fn(arg, &e[i]);
	free(e);
	return ret;
}

/* Its devices and, for each, what discovery thinks of it (read-only). */
static void stripe_describe(struct dv_tier *t, struct dv_tier_desc *d)
{
	struct stripe_tier *st = stripe_downcast(t);
	struct dv_tier_config tc = {
		.name = t->name, .devices = st->devices,
		.devices_auto = !st->devices, .chunk_bytes = st->chunk_bytes,
		.format = st->format,
	};
	struct dv_stripe_device *dev = NULL;
	size_t n = 0;
	char size[32];
	int ret;

	snprintf(d->where, sizeof(d->where), "devices: %s",
		 st->devices ? "listed" : "auto");
	d->capacity = t->max_bytes;
	d->note = "use shown by datavoctl status";
	ret = dv_stripe_discover(&tc, &dev, &n);
	if (ret) {
		dv_tier_desc_line(d, DV_DESC_WARNING,
				  "tier '%s': device discovery failed: %s",
				  t->name, strerror(-ret));
		return;
	}
	for (size_t k = 0; k < n; k++)
		dv_tier_desc_line(d, DV_DESC_DETAIL, "%-8s %-24s %10s  %s",
				  dev[k].accepted ? "accepted" : "refused",
				  dev[k].path,
				  dv_format_bytes(dev[k].bytes, size, sizeof(size)),
				  dev[k].accepted ? dev[k].what : dev[k].reason);
	free(dev);
}

const struct dv_tier_ops dv_tier_stripe_ops = {
	.type = "stripe",
	.caps = DV_TIER_EVICTS,
	.open = stripe_open,
	.destroy = stripe_destroy,
	.lookup = stripe_lookup,
	.open_object = stripe_open_object,
	.close_object = stripe_close_object,
	.read = stripe_read,
	.install = stripe_install,
	.remove = stripe_remove,
	.usage = stripe_usage,
	.scan = stripe_scan,
	.describe = stripe_describe,
};

static int copy_devices(struct stripe_tier *st, char *const *devices)
{
	size_t n = 0;

	while (devices[n])
		n++;
	if (n > DV_STRIPE_MAX_DEVICES)
		return -E2BIG;
	st->devices = calloc(n + 1, sizeof(*st->devices));
	if (!st->devices)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		st->devices[i] = strdup(devices[i]);
		if (!st->devices[i])
			return -ENOMEM;
	}
	return 0;
}

int dv_stripe_tier_new(const struct dv_tier_config *tc,
		       const struct dv_config *cfg, struct dv_tier **out,
		       char *err, size_t errlen)
{
	struct stripe_tier *st = calloc(1, sizeof(*st));
	char base[4096];
	const char *stall = getenv(DV_STRIPE_STALL_ENV);
	int ret;

	if (!st)
		goto nomem;
	ret = dv_tier_init(&st->base, &dv_tier_stripe_ops, tc->name, tc->type,
			   tc->max_bytes);
	if (ret) {
		free(st);
		goto nomem;
	}
	pthread_mutex_init(&st->lock, NULL);
	st->ix.fd = -1;
	st->format = tc->format;
	st->chunk_bytes = tc->chunk_bytes ? tc->chunk_bytes : DV_DEFAULT_CHUNK_BYTES;
	st->stall = stall && *stall ? stall : NULL;
	st->check = !cfg ? DV_STRIPE_CHECK_FIRST :
		    cfg->verify == DV_VERIFY_ALWAYS ? DV_STRIPE_CHECK_ALWAYS :
		    cfg->verify == DV_VERIFY_OFF ? DV_STRIPE_CHECK_NEVER :
						   DV_STRIPE_CHECK_FIRST;
	ret = !tc->devices_auto && tc->devices ? copy_devices(st, tc->devices) : 0;
	if (ret == -E2BIG) {
		snprintf(err, errlen, "tier '%s': at most %u devices", st->base.name,
			 DV_STRIPE_MAX_DEVICES);
		stripe_destroy(&st->base);
		return ret;
	}
	if (!(cfg && cfg->state_dir) &&
	    !dv_config_default_state_dir(base, sizeof(base))) {
		snprintf(err, errlen, "tier '%s': %s", st->base.name,
			 DV_CONFIG_NO_STATE_DIR);
		stripe_destroy(&st->base);
		return -EINVAL;
	}
	st->state_base = strdup(cfg && cfg->state_dir ? cfg->state_dir : base);
	if (ret || !st->state_base || st->chunk_bytes % DV_STRIPE_ALIGN) {
		ret = ret ? ret : st->state_base ? -EINVAL : -ENOMEM;
		snprintf(err, errlen, "tier '%s': %s", st->base.name,
			 ret == -EINVAL ? "chunk_bytes is not a multiple of 4096" :
					  strerror(-ret));
		stripe_destroy(&st->base);
		return ret;
	}
	*out = &st->base;
	return 0;
nomem:
	snprintf(err, errlen, "tier '%s': out of memory", tc->name ? tc->name : "stripe");
	return -ENOMEM;
}
