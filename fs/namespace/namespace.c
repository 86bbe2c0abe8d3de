/*
 * The namespace: datasets.json and the manifests as a tree (namespace.h).
 *
 * State comes in three lifetimes:
 *   - a tree (struct tree): the dataset list and, per directory, its sorted
 *     subdirectories and its dataset's manifest. Immutable; a refresh builds
 *     a whole new one off-lock and swaps it in under the write lock (B7).
 *   - a manifest version (struct dsver): one accepted manifest, the inode
 *     of each shard. A dataset's is kept until dv_ns_free(), so every shard
 *     inode ever handed out still answers getattr after a refresh replaced
 *     it; a pin's while the kernel references one of its inodes, and then
 *     among the last pins_kept used (ns_refs.c).
 *   - a directory identity (struct dirinfo): path, inode, and where it is
 *     in the current tree. Kept for the life of the namespace.
 * Readers hold the read lock, and only commits take the write lock, for
 * pointer swaps and inode table inserts: no I/O ever happens under it.
 *
 * This file: trees, refresh, lookup, readdir and the API. Inode numbers
 * and the inode table are in ns_inodes.c; reading documents from the
 * origin and the disk cache in ns_cache.c; pins (<dataset>@<N>) in
 * ns_pins.c (shared types: ns_impl.h).
 *
 * Not here: payload (the tree never reads shards), FUSE replies (fuse_ops.c).
 */
#include "namespace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "config/log.h"
#include "config/perms.h"
#include "config/util.h"
#include "manifest.h"
#include "ns_impl.h"

/* A directory of one tree. */
struct dir {
	char *path;
	struct dirinfo *info;     /* set by the commit */
	struct dir **subs;        /* sorted by name */
	size_t nsubs;
	struct dsver *ds;         /* NULL unless a dataset with a manifest */
};

/* The last document read from the origin: accepted or refused. */
struct seen {
	char *etag;
	XXH128_hash_t digest;
};

struct tree {
	char **datasets;          /* as listed, sorted, NULL-terminated */
	size_t ndatasets;
	struct dsver **vers;      /* per dataset: its manifest or NULL */
	struct seen *seen;        /* per dataset: the last manifest read */
	struct seen list_seen;    /* the last datasets.json read */
	time_t list_mtime;
	struct dir *dirs;         /* sorted by path; dirs[0] is the root */
	size_t ndirs;
	struct dir **subs;        /* storage for every dirs[].subs */
	uint64_t nshards;
	uint64_t ngood;
};

static void count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- trees ---- */

static void tree_free(struct tree *t)
{
	if (!t)
		return;
	dv_datasets_free(t->datasets);
	for (size_t i = 0; i < t->ndirs; i++)
		free(t->dirs[i].path);
	free(t->dirs);
	free(t->subs);
	for (size_t i = 0; t->seen && i < t->ndatasets; i++)
		free(t->seen[i].etag);
	free(t->seen);
	free(t->vers);
	free(t->list_seen.etag);
	free(t);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_dir_path(const void *key, const void *elem)
{
	return strcmp(key, ((const struct dir *)elem)->path);
}

static int cmp_sub_name(const void *key, const void *elem)
{
	return strcmp(key, (*(struct dir *const *)elem)->info->name);
}

static ssize_t find_str(char **arr, size_t n, const char *s)
{
	char **p = bsearch(&s, arr, n, sizeof(char *), cmp_str);

	return p ? p - arr : -1;
}

static struct dir *tree_dir(const struct tree *t, const char *path)
{
	return bsearch(path, t->dirs, t->ndirs, sizeof(*t->dirs), cmp_dir_path);
}

/* The paths of the root, every dataset with a manifest and their parents. */
static int tree_paths(struct tree *t, char ***out, size_t *n)
{
	size_t cap = 1, k = 0;
	char **paths;

	for (size_t i = 0; i < t->ndatasets; i++)
		cap += t->vers[i] ? 1 + (size_t)strlen(t->datasets[i]) / 2 : 0;
	paths = calloc(cap, sizeof(char *));
	if (!paths)
		return -ENOMEM;
	paths[k++] = strdup("");
	for (size_t i = 0; i < t->ndatasets; i++) {
		const char *ds = t->datasets[i], *p = ds;

		if (!t->vers[i])
			continue;
		do {
			p = strchr(p + 1, '/');
			paths[k++] = p ? strndup(ds, (size_t)(p - ds)) :
					 strdup(ds);
		} while (p);
	}
	for (size_t i = 0; i < k; i++) {
		if (!paths[i]) {
			for (size_t j = 0; j < k; j++)
				free(paths[j]);
			free(paths);
			return -ENOMEM;
		}
	}
	qsort(paths, k, sizeof(char *), cmp_str);
	*out = paths;
	*n = k;
	return 0;
}

static struct dir *dir_parent(const struct tree *t, const struct dir *d)
{
	char parent[DV_DATASET_MAX + 1];
	const char *slash = strrchr(d->path, '/');
	size_t plen = slash ? (size_t)(slash - d->path) : 0;

	memcpy(parent, d->path, plen);
	parent[plen] = '\0';
	return tree_dir(t, parent);
}

/*
 * Builds the directories of @t from its datasets and versions. Children
 * come out sorted: siblings share "<parent>/", so path order is name order.
 */
static int tree_build(struct tree *t)
{
	size_t n, i, k = 0;
	struct dir *d, **next;
	char **paths;
	int ret = tree_paths(t, &paths, &n);

	if (ret)
		return ret;
	t->dirs = calloc(n, sizeof(*t->dirs));
	t->subs = calloc(n, sizeof(*t->subs));
	if (!t->dirs || !t->subs) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (k && strcmp(t->dirs[k - 1].path, paths[i]) == 0)
			free(paths[i]);
		else
			t->dirs[k++].path = paths[i];
		paths[i] = NULL;
	}
	t->ndirs = k;
	/* Count children, hand out ranges of t->subs, then fill them. */
	for (i = 1; i < t->ndirs; i++)
		dir_parent(t, &t->dirs[i])->nsubs++;
	next = t->subs;
	for (i = 0; i < t->ndirs; i++) {
		t->dirs[i].subs = next;
		next += t->dirs[i].nsubs;
		t->dirs[i].nsubs = 0;
	}
	for (i = 1; i < t->ndirs; i++) {
		d = dir_parent(t, &t->dirs[i]);
		d->subs[d->nsubs++] = &t->dirs[i];
	}
	for (i = 0; i < t->ndatasets; i++) {
		if (!t->vers[i])
			continue;
		tree_dir(t, t->datasets[i])->ds = t->vers[i];
		t->ngood++;
		t->nshards += t->vers[i]->m->nshards;
	}
out:
	for (i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return ret;
}

/*
 * Swaps @t in: commits the new versions in @pending, interns every
 * directory, then points the dirinfos at the new tree. Under the write lock.
 * On -ENOMEM nothing readers see has changed but the inode table.
 */
static int tree_commit(struct dv_namespace *ns, struct tree *t,
		       struct dsver **pending, size_t npending)
{
	struct tree *old = ns->cur;
	size_t i;

	for (i = 0; i < npending; i++) {
		if (dv_ns_dsver_commit(ns, pending[i]))
			return -ENOMEM;
	}
	for (i = 0; i < t->ndirs; i++) {
		t->dirs[i].info = dv_ns_dir_intern(ns, t->dirs[i].path);
		if (!t->dirs[i].info)
			return -ENOMEM;
	}
	for (i = 0; old && i < old->ndirs; i++)
		old->dirs[i].info->cur = NULL;
	for (i = 0; i < t->ndirs; i++) {
		struct dir *d = &t->dirs[i];

		d->info->cur = d;
		d->info->mtime = d->ds ? d->ds->mtime : t->list_mtime;
	}
	ns->cur = t;
	return 0;
}

/* ---- refresh ---- */

/* What one refresh prepares before swapping it in. */
struct refresh {
	struct dv_namespace *ns;
	bool cached;              /* reading the disk cache, not the origin */
	struct tree *old;         /* may be NULL */
	struct tree *t;
	int list_err;             /* why the list could not be refreshed */
	struct dsver **pending;   /* new versions, uncommitted */
	size_t npending;
};

static int seen_copy(struct seen *to, const struct seen *from)
{
	to->digest = from->digest;
	to->etag = from->etag ? strdup(from->etag) : NULL;
	return from->etag && !to->etag ? -ENOMEM : 0;
}

/* Remembers @d as the last document read: taken from @d. */
static void seen_take(struct seen *to, struct doc *d, XXH128_hash_t digest)
{
	free(to->etag);
	to->etag = d->etag;
	to->digest = digest;
	d->etag = NULL;
}

static int list_copy(struct tree *t, const struct tree *old)
{
	t->datasets = calloc(old->ndatasets + 1, sizeof(char *));
	if (!t->datasets)
		return -ENOMEM;
	for (size_t i = 0; i < old->ndatasets; i++) {
		t->datasets[i] = strdup(old->datasets[i]);
		if (!t->datasets[i])
			return -ENOMEM;
		t->ndatasets++;
	}
	t->list_mtime = old->list_mtime;
	return seen_copy(&t->list_seen, &old->list_seen);
}

/*
 * A datasets.json was read. Returns 0 when r->t has its list, 1 to keep the
 * old one, or -EINVAL (@why says why).
 */
static int list_accept(struct refresh *r, struct doc *d, char *why,
		       size_t whylen)
{
	XXH128_hash_t digest = XXH3_128bits(d->body, d->len);
	struct tree *t = r->t;
	int ret;

	/* What was decided for these bytes last time still holds. */
	if (r->old && XXH128_isEqual(digest, r->old->list_seen.digest))
		return 1;
	ret = dv_datasets_parse(d->body, d->len, &t->datasets, &t->ndatasets,
				why, whylen);
	if (ret)
		return ret;
	t->list_mtime = d->mtime;
	if (!r->cached)
		dv_ns_cache_write(r->ns, "datasets.json", d);
	seen_take(&t->list_seen, d, digest);
	return 0;
}

/*
 * Fills r->t's dataset list: the new one, else the old one (r->list_err
 * then says why). Fails only when there is none.
 */
static int refresh_list(struct refresh *r, char *err, size_t errlen)
{
	const char *from = r->cached ? "cached datasets.json" : "datasets.json";
	const char *where = r->cached ? r->ns->state_dir : r->ns->origin->url;
	const char *etag = r->old ? r->old->list_seen.etag : NULL;
	XXH128_hash_t digest = { 0, 0 };
	char why[256] = "";
	struct doc d;
	int ret = dv_ns_doc_get(r->ns, r->cached, "datasets.json", etag, &d);

	if (ret == 0) {
		digest = XXH3_128bits(d.body, d.len);
		ret = list_accept(r, &d, why, sizeof(why));
		if (ret == -EINVAL)
			dv_warn("namespace: %s rejected: %s", from, why);
	} else if (ret < 0 && !(r->cached && ret == -ENOENT)) {
		snprintf(why, sizeof(why), "%s", strerror(-ret));
		dv_warn("namespace: cannot read %s from %s: %s", from, where,
			why);
	}
	if (ret < 0 && !r->cached)
		count(&r->ns->refresh_errors);
	if (ret < 0 && err)
		snprintf(err, errlen, "cannot read %s from %s: %s", from, where,
			 why[0] ? why : strerror(-ret));
	r->list_err = ret < 0 ? ret : 0;
	if (ret && r->old) {
		ret = list_copy(r->t, r->old);
		/* A list read but kept (refused, or the same bytes): its ETag. */
		if (ret == 0 && d.body)
			seen_take(&r->t->list_seen, &d, digest);
	} else if (ret) {
		ret = ret < 0 ? ret : -EIO;
	}
	dv_ns_doc_release(&d);
	return ret;
}

/* A fresh manifest document for @name: its version, or NULL to keep @prev. */
static struct dsver *manifest_accept(struct refresh *r, const char *name,
				     const char *relpath, struct dsver *prev,
				     struct doc *d)
{
	XXH128_hash_t digest = XXH3_128bits(d->body, d->len);
	struct dv_manifest *m;
	struct dsver *v;
	char why[256];

	if (prev && XXH128_isEqual(digest, prev->digest)) {
		/* Same bytes under a new ETag: keep the version and its time. */
		d->mtime = prev->mtime;
		if (!r->cached)
			dv_ns_cache_write(r->ns, relpath, d);
		return NULL;
	}
	if (dv_manifest_parse(d->body, d->len, name, &m, why, sizeof(why))) {
		count(&r->ns->rejected);
		dv_warn("namespace: dataset %s: manifest rejected: %s; %s", name,
			why, prev ? "keeping the previous revision" :
				    "the dataset is hidden");
		return NULL;
	}
	if (!r->cached)
		dv_ns_cache_write(r->ns, relpath, d);
	v = dv_ns_dsver_new(m, name, d->mtime, digest);
	if (v)
		r->pending[r->npending++] = v;
	return v;
}

/*
 * The version of dataset @i of the new tree: fresh, previous or none.
 * Also records in r->t->seen[@i] the document read, so that one refused
 * is neither fetched (ETag) nor refused (digest) again until it changes.
 */
static struct dsver *refresh_dataset(struct refresh *r, size_t i)
{
	const char *name = r->t->datasets[i];
	ssize_t o = r->old ? find_str(r->old->datasets, r->old->ndatasets,
				      name) : -1;
	struct dsver *prev = o < 0 ? NULL : r->old->vers[o], *v = NULL;
	const struct seen *seen = o < 0 ? NULL : &r->old->seen[o];
	char relpath[DV_DATASET_MAX + 32];
	XXH128_hash_t digest;
	struct doc d;
	int ret;

	snprintf(relpath, sizeof(relpath), "%s/manifest.json", name);
	ret = dv_ns_doc_get(r->ns, r->cached, relpath,
			    seen ? seen->etag : NULL, &d);
	if (ret == 0) {
		digest = XXH3_128bits(d.body, d.len);
		if (!seen || !XXH128_isEqual(digest, seen->digest))
			v = manifest_accept(r, name, relpath, prev, &d);
		seen_take(&r->t->seen[i], &d, digest);
	} else if (seen) {
		seen_copy(&r->t->seen[i], seen);
	}
	if (ret < 0 && !(r->cached && ret == -ENOENT)) {
		if (!r->cached)
			count(&r->ns->refresh_errors);
		dv_warn("namespace: dataset %s: cannot read %smanifest.json: %s; %s",
			name, r->cached ? "cached " : "", strerror(-ret),
			prev ? "keeping the previous revision" :
			       "the dataset is hidden");
	}
	dv_ns_doc_release(&d);
	return v ? v : prev;
}

/*
 * One refresh from the disk cache or the origin; the caller holds
 * refresh_mutex. Returns 0, or -errno when there was no list to build
 * from (@err says why); a dataset's failure only keeps its old version.
 */
static int refresh(struct dv_namespace *ns, bool cached, char *err,
		   size_t errlen)
{
	struct refresh r = { .ns = ns, .cached = cached, .old = ns->cur };
	int ret;

	r.t = calloc(1, sizeof(*r.t));
	if (!r.t)
		return -ENOMEM;
	if (!cached)
		count(&ns->refreshes);
	ret = refresh_list(&r, err, errlen);
	if (ret)
		goto out;
	r.t->vers = calloc(r.t->ndatasets + 1, sizeof(*r.t->vers));
	r.t->seen = calloc(r.t->ndatasets + 1, sizeof(*r.t->seen));
	r.pending = calloc(r.t->ndatasets + 1, sizeof(*r.pending));
	if (!r.t->vers || !r.t->seen || !r.pending) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r.t->ndatasets; i++)
		r.t->vers[i] = refresh_dataset(&r, i);
	ret = tree_build(r.t);
	if (ret)
		goto out;
	pthread_rwlock_wrlock(&ns->lock);
	ret = tree_commit(ns, r.t, r.pending, r.npending);
	pthread_rwlock_unlock(&ns->lock);
	if (ret == 0) {
		r.t = r.old;
		ret = r.list_err;
	}
out:
	for (size_t i = 0; i < r.npending; i++) {
		if (!r.pending[i]->committed)
			dv_ns_dsver_free(r.pending[i]);
	}
	free(r.pending);
	tree_free(r.t);
	return ret;
}

void dv_ns_maybe_refresh(struct dv_namespace *ns)
{
	uint64_t now = now_ms();

	if (now < __atomic_load_n(&ns->next_refresh_ms, __ATOMIC_RELAXED))
		return;
	if (pthread_mutex_trylock(&ns->refresh_mutex) != 0)
		return;
	if (now >= __atomic_load_n(&ns->next_refresh_ms, __ATOMIC_RELAXED)) {
		refresh(ns, false, NULL, 0);
		__atomic_store_n(&ns->next_refresh_ms,
				 now_ms() + (uint64_t)ns->ttl * 1000,
				 __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&ns->refresh_mutex);
}

/* ---- entries ---- */

void dv_ns_entry_dir(const struct dirinfo *d, struct dv_ns_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = d->ino;
	e->kind = DV_NS_DIR;
	snprintf(e->name, sizeof(e->name), "%s", d->name);
	if (d->pin || (d->cur && d->cur->ds))
		snprintf(e->dataset, sizeof(e->dataset), "%s", d->path);
	e->mtime = d->mtime;
}

static void entry_shard(const struct dsver *v, size_t i,
			struct dv_ns_entry *e)
{
	const struct dv_manifest_shard *s = &v->m->shards[i];

	memset(e, 0, sizeof(*e));
	e->ino = v->inos[i];
	e->kind = DV_NS_SHARD;
	memcpy(e->name, dv_manifest_name(v->m, s), s->name_len + 1);
	e->size = s->size;
	memcpy(e->hash, s->hash, sizeof(e->hash));
	memcpy(e->sha256, s->sha256, sizeof(e->sha256));
	e->has_chunks = s->has_chunks;
	if (s->has_chunks)
		memcpy(e->chunks_pin, dv_manifest_chunks_pin(v->m, s), 32);
	snprintf(e->dataset, sizeof(e->dataset), "%s", v->path);
	e->revision = v->m->revision;
	e->index = s->index;
	e->mtime = v->mtime;
}

/* The directory @ino. Under the read lock. 0, -ENOENT, -ENOTDIR. */
static int dir_of(const struct dv_namespace *ns, uint64_t ino,
		  struct dirinfo **out)
{
	const struct islot *s = dv_ns_slot_find(ns, ino);

	if (!s)
		return -ENOENT;
	if (s->idx != DIR_IDX)
		return -ENOTDIR;
	*out = ns->dirs[s->owner];
	return 0;
}

static int shard_lookup(const struct dsver *v, const char *name,
			struct dv_ns_entry *out)
{
	ssize_t pos = v ? dv_manifest_find_pos(v->m, name) : -1;

	if (pos < 0)
		return -ENOENT;
	entry_shard(v, (size_t)pos, out);
	return 0;
}

bool dv_ns_dataset_listed(const struct dv_namespace *ns, const char *dataset)
{
	return find_str(ns->cur->datasets, ns->cur->ndatasets, dataset) >= 0;
}

/* ---- the API ---- */

/* dv_ns_lookup(), counting a reference to what it found with @ref. */
static int lookup(struct dv_namespace *ns, uint64_t parent, const char *name,
		  struct dv_ns_entry *out, bool ref)
{
	struct dirinfo *d = NULL;
	struct dir *dir, **sub;
	bool in_pin;
	int ret;

	if (strlen(name) > DV_NAME_MAX)
		return -ENOENT;
	pthread_rwlock_rdlock(&ns->lock);
	ret = dir_of(ns, parent, &d);
	dir = d ? d->cur : NULL;
	in_pin = d && d->pin;
	if (ret == 0 && in_pin) {
		ret = shard_lookup(d->pin, name, out);
	} else if (ret == 0 && !dir) {
		ret = -ENOENT;
	} else if (ret == 0) {
		sub = bsearch(name, dir->subs, dir->nsubs, sizeof(*dir->subs),
			      cmp_sub_name);
		if (sub)
			dv_ns_entry_dir((*sub)->info, out);
		else
			ret = shard_lookup(dir->ds, name, out);
	}
	if (ret == 0 && ref)
		dv_ns_ref_locked(ns, out->ino, 1);
	pthread_rwlock_unlock(&ns->lock);
	/* A dirinfo outlives the lock: it is freed with the namespace. */
	if (ret == -ENOENT && d && !in_pin && strchr(name, '@'))
		ret = dv_ns_pin_lookup(ns, d, name, out, ref);
	return ret;
}

int dv_ns_lookup(struct dv_namespace *ns, uint64_t parent, const char *name,
		 struct dv_ns_entry *out)
{
	return lookup(ns, parent, name, out, false);
}

int dv_ns_lookup_ref(struct dv_namespace *ns, uint64_t parent,
		     const char *name, struct dv_ns_entry *out)
{
	return lookup(ns, parent, name, out, true);
}

int dv_ns_getattr(struct dv_namespace *ns, uint64_t ino,
		  struct dv_ns_entry *out)
{
	const struct islot *s;
	int ret = 0;

	pthread_rwlock_rdlock(&ns->lock);
	s = dv_ns_slot_find(ns, ino);
	if (!s)
		ret = -ENOENT;
	else if (s->idx == DIR_IDX)
		dv_ns_entry_dir(ns->dirs[s->owner], out);
	else
		entry_shard(ns->vers[s->owner], s->idx, out);
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

/* Lists subdirectories, then shards (but one a subdirectory hides). */
static int list_dir(const struct dir *dir, uint64_t pos, dv_ns_fill_fn fn,
		    void *arg)
{
	const struct dsver *v = dir->ds;
	size_t nshards = v ? v->m->nshards : 0;
	struct dv_ns_entry e;
	const char *name;

	for (; pos < dir->nsubs + nshards; pos++) {
		if (pos < dir->nsubs) {
			dv_ns_entry_dir(dir->subs[pos]->info, &e);
		} else {
			name = dv_manifest_name(v->m, &v->m->shards[pos - dir->nsubs]);
			if (bsearch(name, dir->subs, dir->nsubs,
				    sizeof(*dir->subs), cmp_sub_name))
				continue;
			entry_shard(v, pos - dir->nsubs, &e);
		}
		if (fn(arg, &e, pos + 1))
			break;
	}
	return 0;
}

static int list_pin(const struct dsver *v, uint64_t pos, dv_ns_fill_fn fn,
		    void *arg)
{
	struct dv_ns_entry e;

	for (; pos < v->m->nshards; pos++) {
		entry_shard(v, pos, &e);
		if (fn(arg, &e, pos + 1))
			break;
	}
	return 0;
}

int dv_ns_readdir(struct dv_namespace *ns, uint64_t ino, uint64_t pos,
		  dv_ns_fill_fn fn, void *arg)
{
	struct dirinfo *d = NULL;
	int ret;

	pthread_rwlock_rdlock(&ns->lock);
	ret = dir_of(ns, ino, &d);
	if (ret == 0 && d->pin)
		ret = list_pin(d->pin, pos, fn, arg);
	else if (ret == 0 && d->cur)
		ret = list_dir(d->cur, pos, fn, arg);
	else if (ret == 0)
		ret = -ENOENT;
	pthread_rwlock_unlock(&ns->lock);
	return ret;
}

void dv_ns_stats(struct dv_namespace *ns, struct dv_ns_stats *out)
{
	pthread_rwlock_rdlock(&ns->lock);
	out->datasets = ns->cur->ngood;
	out->shards = ns->cur->nshards;
	pthread_rwlock_unlock(&ns->lock);
	out->refreshes = __atomic_load_n(&ns->refreshes, __ATOMIC_RELAXED);
	out->refresh_errors = __atomic_load_n(&ns->refresh_errors,
					      __ATOMIC_RELAXED);
	out->rejected_manifests = __atomic_load_n(&ns->rejected,
						  __ATOMIC_RELAXED);
	out->pins_loaded = __atomic_load_n(&ns->pins_loaded, __ATOMIC_RELAXED);
	out->pins_referenced = __atomic_load_n(&ns->pins_held,
					       __ATOMIC_RELAXED);
	out->pins_evicted = __atomic_load_n(&ns->pins_evicted,
					    __ATOMIC_RELAXED);
}

/* The root directory, inode 1, before any tree. */
static int ns_init(struct dv_namespace *ns, const struct dv_ns_options *opt)
{
	pthread_rwlockattr_t attr;
	int ret;

	ns->origin = opt->origin;
	ns->ttl = opt->ttl;
	/* Busy readers must not starve a commit: writers go first. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
				      PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ns->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	pthread_mutex_init(&ns->refresh_mutex, NULL);
	dv_ns_pins_init(ns);
	dv_ns_refs_init(ns, opt->pins_kept);
	ret = dv_ns_inodes_init(ns);
	if (ret)
		return ret;
	if (opt->state_dir) {
		ns->state_dir = strdup(opt->state_dir);
		if (!ns->state_dir)
			return -ENOMEM;
	}
	return 0;
}

int dv_ns_new(const struct dv_ns_options *opt, struct dv_namespace **out,
	      char *err, size_t errlen)
{
	struct dv_namespace *ns = calloc(1, sizeof(*ns));
	char why[512] = "";
	int ret;

	if (!ns)
		return -ENOMEM;
	ret = ns_init(ns, opt);
	if (ret) {
		snprintf(err, errlen, "namespace: out of memory");
		goto out_free;
	}
	ret = ns->state_dir ? dv_mkdir_p_perms(ns->state_dir, NULL) : 0;
	if (ret)
		dv_warn("namespace: cannot create %s: %s; manifests are not cached",
			ns->state_dir, strerror(-ret));
	pthread_mutex_lock(&ns->refresh_mutex);
	refresh(ns, true, NULL, 0);
	ret = refresh(ns, false, why, sizeof(why));
	pthread_mutex_unlock(&ns->refresh_mutex);
	if (!ns->cur) {
		snprintf(err, errlen, "%s, and no cached copy in %s", why,
			 ns->state_dir ? ns->state_dir : "(no state directory)");
		goto out_free;
	}
	if (ret < 0)
		dv_warn("namespace: serving the cached manifests until the origin answers");
	ns->next_refresh_ms = now_ms() + (uint64_t)ns->ttl * 1000;
	*out = ns;
	return 0;
out_free:
	dv_ns_free(ns);
	return ret < 0 ? ret : -EIO;
}

void dv_ns_free(struct dv_namespace *ns)
{
	if (!ns)
		return;
	tree_free(ns->cur);
	dv_ns_inodes_release(ns);
	free(ns->state_dir);
	pthread_rwlock_destroy(&ns->lock);
	pthread_mutex_destroy(&ns->refresh_mutex);
	dv_ns_pins_release(ns);
	dv_ns_refs_release(ns);
	free(ns);
}
