/*
 * Kernel references to a pin's inodes, and which pins stay loaded
 * (ns_impl.h, namespace.h).
 *
 * The FUSE front tells the namespace of every reference the kernel takes
 * (an entry replied, an open handle) and gives back (forget, release). A
 * pin's version counts them per inode (refs[] for its shards, dir_refs for
 * its directory) and in all (held): while held > 0 the kernel may ask for
 * any of its inodes, so it stays. A version with none is idle: it joins a
 * list in the order it was last used, and beyond ns->pins_kept the one
 * used least long ago is evicted: its manifest freed, its shards' inodes
 * taken out of the table. Its directory's dirinfo stays (a path and an
 * inode, shown to the kernel no more) so a reload finds the same inode;
 * the shards' inodes are the hashes of the same keys again.
 *
 * Counts change under the read lock and ref_mutex, eviction runs under the
 * write lock: a version a reader is counting cannot go in between. Other
 * versions (datasets' manifests, kept for the life of the namespace) and
 * the inodes of the front's own files are not counted.
 */
#include <pthread.h>
#include <stdlib.h>

#include "config/log.h"
#include "ns_impl.h"

void dv_ns_refs_init(struct dv_namespace *ns, unsigned pins_kept)
{
	pthread_mutex_init(&ns->ref_mutex, NULL);
	ns->pins_kept = pins_kept ? pins_kept : DV_NS_PINS_KEPT;
}

void dv_ns_refs_release(struct dv_namespace *ns)
{
	pthread_mutex_destroy(&ns->ref_mutex);
}

static void count(uint64_t *c, int64_t d)
{
	__atomic_fetch_add(c, (uint64_t)d, __ATOMIC_RELAXED);
}

/* ---- the idle list; under ref_mutex ---- */

static void idle_unlink(struct dv_namespace *ns, struct dsver *v)
{
	if (!v->idle)
		return;
	if (v->idle_prev)
		v->idle_prev->idle_next = v->idle_next;
	else
		ns->idle_head = v->idle_next;
	if (v->idle_next)
		v->idle_next->idle_prev = v->idle_prev;
	else
		ns->idle_tail = v->idle_prev;
	v->idle_prev = v->idle_next = NULL;
	v->idle = false;
	ns->nidle--;
}

static void idle_append(struct dv_namespace *ns, struct dsver *v)
{
	v->idle_prev = ns->idle_tail;
	v->idle_next = NULL;
	if (ns->idle_tail)
		ns->idle_tail->idle_next = v;
	else
		ns->idle_head = v;
	ns->idle_tail = v;
	v->idle = true;
	ns->nidle++;
}

/* ---- counts ---- */

/*
 * The count of @ino in its pin's version (*@v), or NULL when @ino is not
 * a loaded pin's. Under the read lock.
 */
static uint64_t *ref_of(struct dv_namespace *ns, uint64_t ino,
			struct dsver **v)
{
	const struct islot *s = dv_ns_slot_find(ns, ino);

	if (!s)
		return NULL;
	if (s->idx == DIR_IDX) {
		*v = ns->dirs[s->owner]->pin;
		return *v ? &(*v)->dir_refs : NULL;
	}
	*v = ns->vers[s->owner];
	return *v && (*v)->refs ? &(*v)->refs[s->idx] : NULL;
}

void dv_ns_ref_locked(struct dv_namespace *ns, uint64_t ino, uint64_t n)
{
	struct dsver *v = NULL;
	uint64_t *c = ref_of(ns, ino, &v);

	if (!c || !n)
		return;
	pthread_mutex_lock(&ns->ref_mutex);
	*c += n;
	if (v->held == 0) {
		idle_unlink(ns, v);
		count(&ns->pins_held, 1);
	}
	v->held += n;
	pthread_mutex_unlock(&ns->ref_mutex);
}

/* Whether idle pins are over the bound now. Under the read lock. */
static bool forget_locked(struct dv_namespace *ns, uint64_t ino, uint64_t n)
{
	struct dsver *v = NULL;
	uint64_t *c = ref_of(ns, ino, &v);
	bool over;

	if (!c)
		return false;
	pthread_mutex_lock(&ns->ref_mutex);
	if (n > *c) {
		if (!ns->warned_forget)
			dv_warn("namespace: inode %llu of %s given back %llu times, counted %llu (warned once)",
				(unsigned long long)ino, v->path,
				(unsigned long long)n, (unsigned long long)*c);
		ns->warned_forget = true;
		n = *c;
	}
	*c -= n;
	v->held -= n;
	if (v->held == 0 && n) {
		idle_append(ns, v);
		count(&ns->pins_held, -1);
	}
	over = ns->nidle > ns->pins_kept;
	pthread_mutex_unlock(&ns->ref_mutex);
	return over;
}

/* ---- eviction ---- */

/* Evicts the idle pins used least long ago, all but @keep's turn. */
static void trim_locked(struct dv_namespace *ns, const struct dsver *keep)
{
	struct dsver *v;

	pthread_mutex_lock(&ns->ref_mutex);
	while (ns->nidle > ns->pins_kept && ns->idle_head != keep) {
		v = ns->idle_head;
		idle_unlink(ns, v);
		v->pin_dir->pin = NULL;
		dv_ns_dsver_uncommit(ns, v);
		dv_ns_dsver_free(v);
		count(&ns->pins_loaded, -1);
		count(&ns->pins_evicted, 1);
	}
	pthread_mutex_unlock(&ns->ref_mutex);
}

void dv_ns_pin_loaded(struct dv_namespace *ns, struct dsver *v,
		      struct dirinfo *d, bool ref)
{
	d->pin = v;
	v->pin_dir = d;
	count(&ns->pins_loaded, 1);
	if (ref) {
		dv_ns_ref_locked(ns, d->ino, 1);
	} else {
		pthread_mutex_lock(&ns->ref_mutex);
		idle_append(ns, v);
		pthread_mutex_unlock(&ns->ref_mutex);
	}
	trim_locked(ns, v);
}

void dv_ns_pin_touch(struct dv_namespace *ns, struct dsver *v)
{
	pthread_mutex_lock(&ns->ref_mutex);
	if (v->idle) {
		idle_unlink(ns, v);
		idle_append(ns, v);
	}
	pthread_mutex_unlock(&ns->ref_mutex);
}

/* ---- the API ---- */

void dv_ns_ref(struct dv_namespace *ns, uint64_t ino, uint64_t n)
{
	pthread_rwlock_rdlock(&ns->lock);
	dv_ns_ref_locked(ns, ino, n);
	pthread_rwlock_unlock(&ns->lock);
}

void dv_ns_forget(struct dv_namespace *ns, uint64_t ino, uint64_t n)
{
	bool over;

	pthread_rwlock_rdlock(&ns->lock);
	over = forget_locked(ns, ino, n);
	pthread_rwlock_unlock(&ns->lock);
	if (!over)
		return;
	pthread_rwlock_wrlock(&ns->lock);
	trim_locked(ns, NULL);
	pthread_rwlock_unlock(&ns->lock);
}
