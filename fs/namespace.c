/*
 * The namespace: datasets.json and the manifests as a tree (namespace.h).
 *
 * State comes in three lifetimes:
 *   - a tree (struct tree): the dataset list and, per directory, its sorted
 *     subdirectories and its dataset's manifest. Immutable; a refresh builds
 *     a whole new one off-lock and swaps it in under the write lock (B7).
 *   - a manifest version (struct dsver): one accepted manifest, the inode
 *     of each shard. Kept until dv_ns_free(), so every shard inode ever
 *     handed out still answers getattr after a refresh replaced it.
 *   - a directory identity (struct dirinfo): path, inode, and where it is
 *     in the current tree. Also kept for the life of the namespace.
 * An open-addressing table maps every inode to its dirinfo or (dsver,
 * shard); readers hold the read lock, and only commits take the write lock,
 * for pointer swaps and table inserts: no I/O ever happens under it. The
 * price of "every inode stays valid": each new revision seen during one
 * mount stays in memory (about 170 bytes a shard) until the unmount.
 *
 * Inodes are XXH3-64 of the directory path, or of "<path>/<name>\0<hash>"
 * for a shard, so they survive remounts; values below DV_NS_FIRST_INO are
 * moved up, and a collision probes to the next free number (in the
 * deterministic order of commits).
 *
 * Disk cache: STATE/origin/<relpath> mirrors each accepted document with a
 * one-line header "datavo-cache/1 <etag>\n"; its mtime is the document's
 * fetch time, which is what stat shows. Bad documents are never cached.
 *
 * Not here: payload (the tree never reads shards), FUSE replies (fuse_ops.c).
 */
#include "namespace.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "../config/log.h"
#include "../config/util.h"
#include "manifest.h"

#define CACHE_MAGIC "datavo-cache/1 "
#define DIR_IDX UINT32_MAX        /* an islot of a directory */
#define MAX_ETAG 512
#define CACHE_HEAD_MAX (sizeof(CACHE_MAGIC) + MAX_ETAG + 1)
#define MAX_PATH_KEY 1024         /* "<dataset>@<N>/<name>\0<hash>" fits */

struct dsver;
struct dir;

/* A directory ever shown. */
struct dirinfo {
	uint64_t ino;
	char *path;               /* "" root, "demo/train", "demo/train@1" */
	const char *name;         /* last part of path */
	struct dsver *pin;        /* a pin's manifest, set once */
	struct dir *cur;          /* in the current tree; protected by lock */
	time_t mtime;             /* protected by lock */
};

/* One accepted manifest. Immutable once committed. */
struct dsver {
	struct dv_manifest *m;
	char *path;               /* "demo/train" or "demo/train@1" */
	uint64_t *inos;           /* per shard of m */
	uint32_t id;              /* in ns->vers once committed */
	bool committed;
	time_t mtime;
	XXH128_hash_t digest;     /* of the raw document */
};

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

struct islot {
	uint64_t ino;             /* 0: free */
	uint32_t owner;           /* ns->dirs[] or ns->vers[] */
	uint32_t idx;             /* shard, or DIR_IDX */
};

struct dv_namespace {
	struct dv_origin *origin;
	char *state_dir;
	unsigned ttl;
	pthread_rwlock_t lock;
	pthread_mutex_t refresh_mutex;  /* one refresher at a time */
	pthread_mutex_t pin_mutex;      /* one pin load at a time */
	struct tree *cur;               /* protected by lock; replaced only
					   under refresh_mutex, which may
					   read it without the lock */
	struct islot *slots;            /* protected by lock */
	size_t nslots, slots_cap;
	struct dirinfo **dirs;          /* protected by lock */
	size_t ndirs, dirs_cap;
	struct dsver **vers;            /* protected by lock */
	size_t nvers, vers_cap;
	uint64_t next_refresh_ms;       /* atomic */
	uint64_t refreshes;             /* atomic */
	uint64_t refresh_errors;        /* atomic */
	uint64_t rejected;              /* atomic */
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

/* ---- inodes ---- */

static uint64_t ino_fold(uint64_t h)
{
	return h < DV_NS_FIRST_INO ? h + DV_NS_FIRST_INO : h;
}

static size_t slot_home(const struct dv_namespace *ns, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ULL) >> 16) &
	       (ns->slots_cap - 1);
}

static struct islot *slot_find(const struct dv_namespace *ns, uint64_t ino)
{
	size_t i = slot_home(ns, ino);

	while (ns->slots[i].ino) {
		if (ns->slots[i].ino == ino)
			return &ns->slots[i];
		i = (i + 1) & (ns->slots_cap - 1);
	}
	return NULL;
}

/* Only after slots_reserve(); @ino must be absent. */
static void slot_put(struct dv_namespace *ns, uint64_t ino, uint32_t owner,
		     uint32_t idx)
{
	size_t i = slot_home(ns, ino);

	while (ns->slots[i].ino)
		i = (i + 1) & (ns->slots_cap - 1);
	ns->slots[i] = (struct islot){ ino, owner, idx };
	ns->nslots++;
}

/* Room for @extra more inodes at a load of at most 3/4. */
static int slots_reserve(struct dv_namespace *ns, size_t extra)
{
	struct islot *old = ns->slots;
	size_t old_cap = ns->slots_cap, cap = old_cap ? old_cap : 64;

	while ((ns->nslots + extra) * 4 > cap * 3)
		cap *= 2;
	if (cap == old_cap)
		return 0;
	ns->slots = calloc(cap, sizeof(*ns->slots));
	if (!ns->slots) {
		ns->slots = old;
		return -ENOMEM;
	}
	ns->slots_cap = cap;
	ns->nslots = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].ino)
			slot_put(ns, old[i].ino, old[i].owner, old[i].idx);
	}
	free(old);
	return 0;
}

/* Grows an array of pointers to @need; returns it (maybe moved) or NULL. */
static void *ptrs_reserve(void *arr, size_t *cap, size_t need)
{
	size_t ncap = *cap ? *cap : 16;

	if (need <= *cap)
		return arr;
	while (ncap < need)
		ncap *= 2;
	arr = reallocarray(arr, ncap, sizeof(void *));
	if (arr)
		*cap = ncap;
	return arr;
}

/* The identity a shard inode stands for: "<path>/<name>\0<hash>". */
static size_t shard_key(const char *path, const char *name, const char *hash,
			char *buf)
{
	int n = snprintf(buf, MAX_PATH_KEY, "%s/%s%c%s", path, name, '\0',
			 hash);

	return n < MAX_PATH_KEY ? (size_t)n : MAX_PATH_KEY - 1;
}

static bool slot_is_shard(const struct dv_namespace *ns,
			  const struct islot *s, const struct dsver *v,
			  const struct dv_manifest_shard *sh)
{
	const struct dsver *o;
	const struct dv_manifest_shard *osh;

	if (s->idx == DIR_IDX)
		return false;
	o = ns->vers[s->owner];
	osh = &o->m->shards[s->idx];
	return strcmp(o->path, v->path) == 0 &&
	       strcmp(osh->hash, sh->hash) == 0 &&
	       strcmp(dv_manifest_name(o->m, osh),
		      dv_manifest_name(v->m, sh)) == 0;
}

/* Makes @v's shards findable by inode. Under the write lock. */
static int dsver_commit(struct dv_namespace *ns, struct dsver *v)
{
	struct islot *s;
	uint64_t ino;
	void *p;

	if (slots_reserve(ns, v->m->nshards))
		return -ENOMEM;
	p = ptrs_reserve(ns->vers, &ns->vers_cap, ns->nvers + 1);
	if (!p)
		return -ENOMEM;
	ns->vers = p;
	v->id = (uint32_t)ns->nvers;
	ns->vers[ns->nvers++] = v;
	v->committed = true;
	for (size_t i = 0; i < v->m->nshards; i++) {
		for (ino = v->inos[i];; ino = ino_fold(ino + 1)) {
			s = slot_find(ns, ino);
			if (!s) {
				slot_put(ns, ino, v->id, (uint32_t)i);
				break;
			}
			/* The same shard again (a new manifest): newest wins. */
			if (slot_is_shard(ns, s, v, &v->m->shards[i])) {
				s->owner = v->id;
				s->idx = (uint32_t)i;
				break;
			}
		}
		v->inos[i] = ino;
	}
	return 0;
}

/* The dirinfo of @path, created on first sight. Under the write lock. */
static struct dirinfo *dir_intern(struct dv_namespace *ns, const char *path)
{
	struct dirinfo *d;
	struct islot *s;
	uint64_t ino;
	void *p;

	if (!*path)
		return ns->dirs[0];
	for (ino = ino_fold(XXH3_64bits(path, strlen(path)));;
	     ino = ino_fold(ino + 1)) {
		s = slot_find(ns, ino);
		if (!s)
			break;
		if (s->idx == DIR_IDX && !strcmp(ns->dirs[s->owner]->path, path))
			return ns->dirs[s->owner];
	}
	if (slots_reserve(ns, 1))
		return NULL;
	p = ptrs_reserve(ns->dirs, &ns->dirs_cap, ns->ndirs + 1);
	if (!p)
		return NULL;
	ns->dirs = p;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->path = strdup(path);
	if (!d->path) {
		free(d);
		return NULL;
	}
	d->name = strrchr(d->path, '/') ? strrchr(d->path, '/') + 1 : d->path;
	d->ino = ino;
	slot_put(ns, ino, (uint32_t)ns->ndirs, DIR_IDX);
	ns->dirs[ns->ndirs++] = d;
	return d;
}

/* ---- manifest versions ---- */

static void dsver_free(struct dsver *v)
{
	if (!v)
		return;
	dv_manifest_free(v->m);
	free(v->path);
	free(v->inos);
	free(v);
}

/* Takes @m (also on failure). NULL on ENOMEM. */
static struct dsver *dsver_new(struct dv_manifest *m, const char *path,
			       time_t mtime, XXH128_hash_t digest)
{
	struct dsver *v = calloc(1, sizeof(*v));
	char key[MAX_PATH_KEY];

	if (!v) {
		dv_manifest_free(m);
		return NULL;
	}
	v->m = m;
	v->path = strdup(path);
	v->inos = calloc(m->nshards ? m->nshards : 1, sizeof(uint64_t));
	if (!v->path || !v->inos) {
		dsver_free(v);
		return NULL;
	}
	v->mtime = mtime;
	v->digest = digest;
	for (size_t i = 0; i < m->nshards; i++) {
		const struct dv_manifest_shard *s = &m->shards[i];
		size_t n = shard_key(path, dv_manifest_name(m, s), s->hash, key);

		v->inos[i] = ino_fold(XXH3_64bits(key, n));
	}
	return v;
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
		if (dsver_commit(ns, pending[i]))
			return -ENOMEM;
	}
	for (i = 0; i < t->ndirs; i++) {
		t->dirs[i].info = dir_intern(ns, t->dirs[i].path);
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

/* ---- documents: the disk cache and the origin ---- */

struct doc {
	char *body;
	size_t len;
	char *etag;
	time_t mtime;
};

static void doc_release(struct doc *d)
{
	free(d->body);
	free(d->etag);
	memset(d, 0, sizeof(*d));
}

static int cache_path(const struct dv_namespace *ns, const char *relpath,
		      char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/origin/%s", ns->state_dir, relpath);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The cached copy of @relpath: 0, -ENOENT, -EBADMSG (damaged). */
static int cache_read(const struct dv_namespace *ns, const char *relpath,
		      struct doc *d)
{
	char path[PATH_MAX], *nl;
	size_t hlen = strlen(CACHE_MAGIC);
	int ret;

	if (!ns->state_dir)
		return -ENOENT;
	ret = cache_path(ns, relpath, path, sizeof(path));
	if (ret == 0)
		ret = dv_doc_read(path, DV_DOC_MAX + MAX_ETAG, &d->body, &d->len,
				  &d->mtime);
	if (ret)
		return ret;
	nl = memchr(d->body, '\n',
		    d->len < CACHE_HEAD_MAX ? d->len : CACHE_HEAD_MAX);
	if (!nl || strncmp(d->body, CACHE_MAGIC, hlen) != 0) {
		dv_warn("namespace: ignoring damaged cache file %s", path);
		doc_release(d);
		return -EBADMSG;
	}
	*nl = '\0';
	if (nl > d->body + hlen) {
		d->etag = strdup(d->body + hlen);
		if (!d->etag) {
			doc_release(d);
			return -ENOMEM;
		}
	}
	d->len -= (size_t)(nl + 1 - d->body);
	memmove(d->body, nl + 1, d->len + 1);
	return 0;
}

/* Keeps an accepted document; a failure only costs the next remount. */
static void cache_write(const struct dv_namespace *ns, const char *relpath,
			const struct doc *d)
{
	char path[PATH_MAX], head[CACHE_HEAD_MAX + 1], *slash;
	struct iovec iov[2];
	int ret, n;

	if (!ns->state_dir)
		return;
	n = snprintf(head, sizeof(head), "%s%s\n", CACHE_MAGIC,
		     d->etag && strlen(d->etag) < MAX_ETAG &&
				     !strchr(d->etag, '\n') ? d->etag : "");
	ret = cache_path(ns, relpath, path, sizeof(path));
	if (ret == 0) {
		slash = strrchr(path, '/');
		*slash = '\0';
		ret = dv_mkdir_p(path, 0755);
		*slash = '/';
	}
	iov[0] = (struct iovec){ head, (size_t)n };
	iov[1] = (struct iovec){ d->body, d->len };
	if (ret == 0)
		ret = dv_doc_write_atomic(path, iov, 2, 0644, d->mtime);
	if (ret)
		dv_warn("namespace: cannot cache %s: %s", path, strerror(-ret));
}

/*
 * Gets @relpath from the origin (with @etag: 1 when not modified) or, with
 * @cached, from the disk cache. 0 with @d filled, or -errno.
 */
static int doc_get(struct dv_namespace *ns, bool cached, const char *relpath,
		   const char *etag, struct doc *d)
{
	int ret;

	memset(d, 0, sizeof(*d));
	if (cached)
		return cache_read(ns, relpath, d);
	ret = dv_origin_get_doc(ns->origin, relpath, etag, &d->body, &d->len,
				&d->etag);
	d->mtime = time(NULL);
	return ret;
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
		cache_write(r->ns, "datasets.json", d);
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
	int ret = doc_get(r->ns, r->cached, "datasets.json", etag, &d);

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
	doc_release(&d);
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
			cache_write(r->ns, relpath, d);
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
		cache_write(r->ns, relpath, d);
	v = dsver_new(m, name, d->mtime, digest);
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
	ret = doc_get(r->ns, r->cached, relpath, seen ? seen->etag : NULL, &d);
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
	doc_release(&d);
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
			dsver_free(r.pending[i]);
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

static void entry_dir(const struct dirinfo *d, struct dv_ns_entry *e)
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
	snprintf(e->dataset, sizeof(e->dataset), "%s", v->path);
	e->revision = v->m->revision;
	e->mtime = v->mtime;
}

/* The directory @ino. Under the read lock. 0, -ENOENT, -ENOTDIR. */
static int dir_of(const struct dv_namespace *ns, uint64_t ino,
		  struct dirinfo **out)
{
	const struct islot *s = slot_find(ns, ino);

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

/* ---- pins: <dataset>@<N> ---- */

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
		ret = doc_get(ns, cached, relpath, NULL, &d);
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
			count(&ns->rejected);
			dv_warn("namespace: %s%s rejected: %s",
				cached ? "cached " : "", relpath, why);
		}
		if (ret == 0 && !cached)
			cache_write(ns, relpath, &d);
		if (ret == 0)
			*out = dsver_new(m, pin_path, d.mtime,
					 XXH3_128bits(d.body, d.len));
		doc_release(&d);
	}
	if (ret == 0 && !*out)
		return -ENOMEM;
	return ret == -EINVAL ? -ENOENT : ret;
}

/* Under the read lock: the pin's dirinfo, if loaded. */
static struct dirinfo *pin_find(const struct dv_namespace *ns,
				const char *pin_path)
{
	uint64_t ino = ino_fold(XXH3_64bits(pin_path, strlen(pin_path)));
	const struct islot *s;

	for (;; ino = ino_fold(ino + 1)) {
		s = slot_find(ns, ino);
		if (!s)
			return NULL;
		if (s->idx == DIR_IDX && !strcmp(ns->dirs[s->owner]->path, pin_path))
			return ns->dirs[s->owner]->pin ? ns->dirs[s->owner] : NULL;
	}
}

/* Looks up pin @name in @parent (a dirinfo lives as long as @ns). */
static int pin_lookup(struct dv_namespace *ns, const struct dirinfo *parent,
		      const char *name, struct dv_ns_entry *out)
{
	char dataset[DV_DATASET_MAX + 1], pin_path[DV_DATASET_MAX + 32];
	struct dirinfo *d;
	struct dsver *v = NULL;
	uint64_t rev;
	int ret = 0;

	if (!pin_parse(parent, name, dataset, sizeof(dataset), &rev))
		return -ENOENT;
	snprintf(pin_path, sizeof(pin_path), "%s@%llu", dataset,
		 (unsigned long long)rev);
	pthread_mutex_lock(&ns->pin_mutex);
	pthread_rwlock_rdlock(&ns->lock);
	d = pin_find(ns, pin_path);
	if (d)
		entry_dir(d, out);
	else if (find_str(ns->cur->datasets, ns->cur->ndatasets, dataset) < 0)
		ret = -ENOENT;
	pthread_rwlock_unlock(&ns->lock);
	if (d || ret)
		goto out;
	ret = pin_load(ns, dataset, rev, pin_path, &v);
	if (ret)
		goto out;
	pthread_rwlock_wrlock(&ns->lock);
	d = dsver_commit(ns, v) == 0 ? dir_intern(ns, pin_path) : NULL;
	if (d) {
		d->pin = v;
		d->mtime = v->mtime;
		entry_dir(d, out);
	}
	pthread_rwlock_unlock(&ns->lock);
	if (!v->committed)
		dsver_free(v);
	ret = d ? 0 : -ENOMEM;
out:
	pthread_mutex_unlock(&ns->pin_mutex);
	return ret;
}

/* ---- the API ---- */

int dv_ns_lookup(struct dv_namespace *ns, uint64_t parent, const char *name,
		 struct dv_ns_entry *out)
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
			entry_dir((*sub)->info, out);
		else
			ret = shard_lookup(dir->ds, name, out);
	}
	pthread_rwlock_unlock(&ns->lock);
	/* A dirinfo outlives the lock: it is freed with the namespace. */
	if (ret == -ENOENT && d && !in_pin && strchr(name, '@'))
		ret = pin_lookup(ns, d, name, out);
	return ret;
}

int dv_ns_getattr(struct dv_namespace *ns, uint64_t ino,
		  struct dv_ns_entry *out)
{
	const struct islot *s;
	int ret = 0;

	pthread_rwlock_rdlock(&ns->lock);
	s = slot_find(ns, ino);
	if (!s)
		ret = -ENOENT;
	else if (s->idx == DIR_IDX)
		entry_dir(ns->dirs[s->owner], out);
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
			entry_dir(dir->subs[pos]->info, &e);
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
}

/* The root directory, inode 1, before any tree. */
static int ns_init(struct dv_namespace *ns, const struct dv_ns_options *opt)
{
	struct dirinfo *root = calloc(1, sizeof(*root));
	pthread_rwlockattr_t attr;

	ns->origin = opt->origin;
	ns->ttl = opt->ttl;
	/* Busy readers must not starve a commit: writers go first. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
				      PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ns->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	pthread_mutex_init(&ns->refresh_mutex, NULL);
	pthread_mutex_init(&ns->pin_mutex, NULL);
	ns->dirs = ptrs_reserve(NULL, &ns->dirs_cap, 1);
	if (!root || !ns->dirs || slots_reserve(ns, 1)) {
		free(root);
		return -ENOMEM;
	}
	root->ino = DV_NS_ROOT_INO;
	root->path = strdup("");
	root->name = root->path;
	ns->dirs[ns->ndirs++] = root;
	slot_put(ns, DV_NS_ROOT_INO, 0, DIR_IDX);
	if (!root->path)
		return -ENOMEM;
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
	ret = ns->state_dir ? dv_mkdir_p(ns->state_dir, 0755) : 0;
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
	for (size_t i = 0; i < ns->nvers; i++)
		dsver_free(ns->vers[i]);
	for (size_t i = 0; i < ns->ndirs; i++) {
		free(ns->dirs[i]->path);
		free(ns->dirs[i]);
	}
	free(ns->vers);
	free(ns->dirs);
	free(ns->slots);
	free(ns->state_dir);
	pthread_rwlock_destroy(&ns->lock);
	pthread_mutex_destroy(&ns->refresh_mutex);
	pthread_mutex_destroy(&ns->pin_mutex);
	free(ns);
}
