/*
 * Stable inode numbers and the inode table of the namespace (ns_impl.h).
 *
 * Inodes are XXH3-64 of the directory path, or of "<path>/<name>\0<hash>"
 * for a shard, so they survive remounts; the top bit is cleared (it is
 * DV_NS_FOREIGN_INO's), values below DV_NS_FIRST_INO are moved up, and a
 * collision probes to the next free number (in the deterministic order of
 * commits).
 *
 * An open-addressing table (linear probing) maps every inode to its
 * dirinfo or (dsver, shard). Directories and datasets' versions are never
 * removed: every such inode handed out stays valid until dv_ns_free(), at
 * the price of keeping each revision of a dataset seen during one mount in
 * memory (about 170 bytes a shard). A pin's version is removed when
 * evicted (ns_refs.c): its shards' slots are deleted by shifting back the
 * entries that probed past them, and a reload hashes the same keys again,
 * so the kernel, which held none of them, sees the same numbers. Not here:
 * locking (the callers hold ns->lock as each declaration says), trees,
 * documents.
 */
#include "ns_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "manifest.h"

#define MAX_PATH_KEY 1024         /* "<dataset>@<N>/<name>\0<hash>" fits */

static uint64_t ino_fold(uint64_t h)
{
	h &= ~DV_NS_FOREIGN_INO;
	return h < DV_NS_FIRST_INO ? h + DV_NS_FIRST_INO : h;
}

static size_t slot_home(const struct dv_namespace *ns, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ULL) >> 16) &
	       (ns->slots_cap - 1);
}

struct islot *dv_ns_slot_find(const struct dv_namespace *ns, uint64_t ino)
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

/*
 * Deletes @s: the entries after it in its probe run that could not live in
 * their home slot move back into the hole (Knuth's algorithm R), so every
 * lookup still finds them. Under the write lock.
 */
static void slot_del(struct dv_namespace *ns, struct islot *s)
{
	size_t mask = ns->slots_cap - 1, hole = (size_t)(s - ns->slots);
	size_t j = hole, home;

	for (;;) {
		ns->slots[hole].ino = 0;
		for (;;) {
			j = (j + 1) & mask;
			if (!ns->slots[j].ino) {
				ns->nslots--;
				return;
			}
			home = slot_home(ns, ns->slots[j].ino);
			/* Stays when its home lies cyclically in (hole, j]. */
			if (hole <= j ? hole < home && home <= j :
					hole < home || home <= j)
				continue;
			break;
		}
		ns->slots[hole] = ns->slots[j];
		hole = j;
	}
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

/* Room to free every id of ns->vers, so that an uncommit cannot fail. */
static int ids_reserve(struct dv_namespace *ns)
{
	uint32_t *p;

	if (ns->free_ids_cap >= ns->vers_cap)
		return 0;
	p = reallocarray(ns->free_ids, ns->vers_cap, sizeof(*p));
	if (!p)
		return -ENOMEM;
	ns->free_ids = p;
	ns->free_ids_cap = ns->vers_cap;
	return 0;
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

int dv_ns_dsver_commit(struct dv_namespace *ns, struct dsver *v)
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
	if (ids_reserve(ns))
		return -ENOMEM;
	if (ns->nfree_ids)
		v->id = ns->free_ids[--ns->nfree_ids];
	else
		v->id = (uint32_t)ns->nvers++;
	ns->vers[v->id] = v;
	v->committed = true;
	for (size_t i = 0; i < v->m->nshards; i++) {
		for (ino = v->inos[i];; ino = ino_fold(ino + 1)) {
			s = dv_ns_slot_find(ns, ino);
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

void dv_ns_dsver_uncommit(struct dv_namespace *ns, struct dsver *v)
{
	struct islot *s;

	for (size_t i = 0; i < v->m->nshards; i++) {
		s = dv_ns_slot_find(ns, v->inos[i]);
		if (s && s->idx != DIR_IDX && s->owner == v->id)
			slot_del(ns, s);
	}
	ns->vers[v->id] = NULL;
	v->committed = false;
	/* ids_reserve() made room when it was committed. */
	ns->free_ids[ns->nfree_ids++] = v->id;
}

struct dirinfo *dv_ns_dir_intern(struct dv_namespace *ns, const char *path)
{
	struct dirinfo *d;
	struct islot *s;
	uint64_t ino;
	void *p;

	if (!*path)
		return ns->dirs[0];
	for (ino = ino_fold(XXH3_64bits(path, strlen(path)));;
	     ino = ino_fold(ino + 1)) {
		s = dv_ns_slot_find(ns, ino);
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

struct dirinfo *dv_ns_pin_find(const struct dv_namespace *ns,
			       const char *pin_path)
{
	uint64_t ino = ino_fold(XXH3_64bits(pin_path, strlen(pin_path)));
	const struct islot *s;

	for (;; ino = ino_fold(ino + 1)) {
		s = dv_ns_slot_find(ns, ino);
		if (!s)
			return NULL;
		if (s->idx == DIR_IDX && !strcmp(ns->dirs[s->owner]->path, pin_path))
			return ns->dirs[s->owner]->pin ? ns->dirs[s->owner] : NULL;
	}
}

/* ---- manifest versions ---- */

void dv_ns_dsver_free(struct dsver *v)
{
	if (!v)
		return;
	dv_manifest_free(v->m);
	free(v->path);
	free(v->inos);
	free(v->refs);
	free(v);
}

struct dsver *dv_ns_dsver_new(struct dv_manifest *m, const char *path,
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
		dv_ns_dsver_free(v);
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

/* ---- lifetime ---- */

int dv_ns_inodes_init(struct dv_namespace *ns)
{
	struct dirinfo *root = calloc(1, sizeof(*root));

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
	return 0;
}

void dv_ns_inodes_release(struct dv_namespace *ns)
{
	for (size_t i = 0; i < ns->nvers; i++)
		dv_ns_dsver_free(ns->vers[i]);
	for (size_t i = 0; i < ns->ndirs; i++) {
		free(ns->dirs[i]->path);
		free(ns->dirs[i]);
	}
	free(ns->vers);
	free(ns->free_ids);
	free(ns->dirs);
	free(ns->slots);
}
