/*
 * Pins: <dataset>@<N> directories (ns_impl.h). A pin's revision is read
 * from the disk cache or else the origin's revisions/<N>.json, and kept
 * while the kernel references one of its inodes, or while it is among the
 * last ns->pins_kept used (ns_refs.c); evicted, a later lookup reads it
 * again (from the disk cache: it was cached when first read).
 *
 * The origin is read with no lock held: ns->pin_mutex guards only a small
 * table of notes, one per pin being loaded (a second lookup of the same pin
 * waits on ns->pin_cond instead of fetching again) or found missing (for
 * ns->ttl seconds a lookup answers ENOENT without asking the origin: a
 * script probing DS@99 in a loop costs one request per TTL).
 *
 * Not here: counting references and evicting (ns_refs.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "config/log.h"
#include "config/util.h"
#include "manifest.h"
#include "ns_impl.h"

struct pin_note {
	char *path;               /* NULL: a free note */
	bool loading;             /* a lookup is reading it now */
	uint64_t miss_until_ms;   /* when not loading: missing until then */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void dv_ns_pins_init(struct dv_namespace *ns)
{
	pthread_mutex_init(&ns->pin_mutex, NULL);
	pthread_cond_init(&ns->pin_cond, NULL);
	/* NULL on ENOMEM: pins then load without notes. */
	ns->pin_notes = calloc(DV_NS_PIN_NOTES, sizeof(*ns->pin_notes));
}

void dv_ns_pins_release(struct dv_namespace *ns)
{
	for (size_t i = 0; ns->pin_notes && i < DV_NS_PIN_NOTES; i++)
		free(ns->pin_notes[i].path);
	free(ns->pin_notes);
	pthread_cond_destroy(&ns->pin_cond);
	pthread_mutex_destroy(&ns->pin_mutex);
}

/* The note of @path, or NULL. Under pin_mutex. */
static struct pin_note *note_find(struct dv_namespace *ns, const char *path)
{
	for (size_t i = 0; ns->pin_notes && i < DV_NS_PIN_NOTES; i++)
		if (ns->pin_notes[i].path && !strcmp(ns->pin_notes[i].path, path))
			return &ns->pin_notes[i];
	return NULL;
}

static void note_drop(struct pin_note *n)
{
	free(n->path);
	memset(n, 0, sizeof(*n));
}

/*
 * A note for @path: a free one, else the miss that expires first (a miss
 * forgotten early only costs a request). NULL when every note is a load in
 * flight, or on ENOMEM. Under pin_mutex.
 */
static struct pin_note *note_claim(struct dv_namespace *ns, const char *path)
{
	struct pin_note *best = NULL;

	for (size_t i = 0; ns->pin_notes && i < DV_NS_PIN_NOTES; i++) {
		struct pin_note *n = &ns->pin_notes[i];

		if (!n->path) {
			best = n;
			break;
		}
		if (!n->loading && (!best || n->miss_until_ms < best->miss_until_ms))
			best = n;
	}
	if (!best)
		return NULL;
	note_drop(best);
	best->path = strdup(path);
	return best->path ? best : NULL;
}

/*
 * Splits "train@12" into the dataset path under @parent and the revision.
 * Only the canonical spelling of N is a pin, so each has one inode.
 */
static bool pin_parse(const struct dirinfo *parent, const char *name,
		      char *dataset, size_t len, uint64_t *rev)
{
	const char *at = strrchr(name, '@');
	char part[DV_NAME_MAX + 1];
	size_t plen = at ? (size_t)(at - name) : 0;

	if (!at || plen == 0 || plen > DV_NAME_MAX || (at[1] == '0' && at[2]) ||
	    dv_parse_uint(at + 1, UINT64_MAX, rev) < 0)
		return false;
	memcpy(part, name, plen);
	part[plen] = '\0';
	if (!dv_valid_name_part(part))
		return false;
	return (size_t)snprintf(dataset, len, "%s%s%s", parent->path,
				*parent->path ? "/" : "", part) < len;
}

/* A pin's version of @m (taken), with its reference counts. */
static struct dsver *pin_version(struct dv_manifest *m, const char *pin_path,
				 const struct doc *d)
{
	struct dsver *v = dv_ns_dsver_new(m, pin_path, d->mtime,
					  XXH3_128bits(d->body, d->len));

	if (v)
		v->refs = calloc(m->nshards ? m->nshards : 1, sizeof(*v->refs));
	if (v && !v->refs) {
		dv_ns_dsver_free(v);
		v = NULL;
	}
	return v;
}

/* Reads revision @rev of @dataset from the cache, else the origin. */
static int pin_load(struct dv_namespace *ns, const char *dataset,
		    uint64_t rev, const char *pin_path, struct dsver **out)
{
	char relpath[DV_DATASET_MAX + 64], why[256];
	struct dv_manifest *m = NULL;
	struct doc d;
	int ret = -ENOENT;

	snprintf(relpath, sizeof(relpath), "%s/revisions/%llu.json", dataset,
		 (unsigned long long)rev);
	for (int cached = 1; cached >= 0 && !m; cached--) {
		ret = dv_ns_doc_get(ns, cached, relpath, NULL, &d);
		if (ret == 0)
			ret = dv_manifest_parse(d.body, d.len, dataset, &m, why,
						sizeof(why));
		if (ret == 0 && m->revision != rev) {
			snprintf(why, sizeof(why), "it holds revision %llu",
				 (unsigned long long)m->revision);
			dv_manifest_free(m);
			m = NULL;
			ret = -EINVAL;
		}
		if (ret == -EINVAL) {
			__atomic_fetch_add(&ns->rejected, 1, __ATOMIC_RELAXED);
			dv_warn("namespace: %s%s rejected: %s",
				cached ? "cached " : "", relpath, why);
		}
		if (ret == 0 && !cached)
			dv_ns_cache_write(ns, relpath, &d);
		if (ret == 0)
			*out = pin_version(m, pin_path, &d);
		dv_ns_doc_release(&d);
	}
	if (ret == 0 && !*out)
		return -ENOMEM;
	return ret == -EINVAL ? -ENOENT : ret;
}

/*
 * Makes loaded @v the pin @pin_path (takes @v), counting a reference to
 * it with @ref. A load that raced another one (no note was free) keeps
 * the first: one version per pin, which the counts rely on. 0 or -ENOMEM.
 */
static int pin_commit(struct dv_namespace *ns, struct dsver *v,
		      const char *pin_path, struct dv_ns_entry *out, bool ref)
{
	struct dirinfo *d;

	pthread_rwlock_wrlock(&ns->lock);
	d = dv_ns_pin_find(ns, pin_path);
	if (d) {
		dv_ns_entry_dir(d, out);
		if (ref)
			dv_ns_ref_locked(ns, d->ino, 1);
		pthread_rwlock_unlock(&ns->lock);
		dv_ns_dsver_free(v);
		return 0;
	}
	d = dv_ns_dsver_commit(ns, v) == 0 ? dv_ns_dir_intern(ns, pin_path) :
					     NULL;
	if (d) {
		d->mtime = v->mtime;
		dv_ns_pin_loaded(ns, v, d, ref);
		dv_ns_entry_dir(d, out);
	} else if (v->committed) {
		dv_ns_dsver_uncommit(ns, v);
	}
	pthread_rwlock_unlock(&ns->lock);
	/* Once committed, @v may be evicted (and freed) as soon as unlocked. */
	if (!d)
		dv_ns_dsver_free(v);
	return d ? 0 : -ENOMEM;
}

/*
 * Under pin_mutex: 0 with @out filled when the pin is loaded, -ENOENT when
 * it is not a dataset or a miss remembered, 1 when this lookup must load
 * it (waiting first for a load of the same pin in flight).
 */
static int pin_wait(struct dv_namespace *ns, const char *dataset,
		    const char *pin_path, struct dv_ns_entry *out, bool ref)
{
	for (;;) {
		struct pin_note *n;
		struct dirinfo *d;
		bool listed;

		pthread_rwlock_rdlock(&ns->lock);
		d = dv_ns_pin_find(ns, pin_path);
		if (d)
			dv_ns_entry_dir(d, out);
		if (d && ref)
			dv_ns_ref_locked(ns, d->ino, 1);
		else if (d)
			dv_ns_pin_touch(ns, d->pin);
		listed = dv_ns_dataset_listed(ns, dataset);
		pthread_rwlock_unlock(&ns->lock);
		if (d)
			return 0;
		if (!listed)
			return -ENOENT;
		n = note_find(ns, pin_path);
		if (!n)
			return 1;
		if (!n->loading && now_ms() < n->miss_until_ms)
			return -ENOENT;
		if (!n->loading)
			return 1;
		pthread_cond_wait(&ns->pin_cond, &ns->pin_mutex);
	}
}

int dv_ns_pin_lookup(struct dv_namespace *ns, const struct dirinfo *parent,
		     const char *name, struct dv_ns_entry *out, bool ref)
{
	char dataset[DV_DATASET_MAX + 1], pin_path[DV_DATASET_MAX + 32];
	struct pin_note *n;
	struct dsver *v = NULL;
	uint64_t rev;
	int ret;

	if (!pin_parse(parent, name, dataset, sizeof(dataset), &rev))
		return -ENOENT;
	snprintf(pin_path, sizeof(pin_path), "%s@%llu", dataset,
		 (unsigned long long)rev);
	pthread_mutex_lock(&ns->pin_mutex);
	ret = pin_wait(ns, dataset, pin_path, out, ref);
	if (ret <= 0) {
		pthread_mutex_unlock(&ns->pin_mutex);
		return ret;
	}
	n = note_find(ns, pin_path);
	if (!n)
		n = note_claim(ns, pin_path);
	if (n)
		n->loading = true;
	pthread_mutex_unlock(&ns->pin_mutex);

	ret = pin_load(ns, dataset, rev, pin_path, &v);
	if (ret == 0)
		ret = pin_commit(ns, v, pin_path, out, ref);

	pthread_mutex_lock(&ns->pin_mutex);
	if (n && ret == -ENOENT && ns->ttl) {
		n->loading = false;
		n->miss_until_ms = now_ms() + (uint64_t)ns->ttl * 1000;
	} else if (n) {
		note_drop(n);
	}
	pthread_cond_broadcast(&ns->pin_cond);
	pthread_mutex_unlock(&ns->pin_mutex);
	return ret;
}
