/*
 * The namespace over a file:// origin built in a temporary directory:
 * tree shape, pins, inode stability, bad manifests, the disk cache (B7)
 * and refreshes.
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "fs/namespace/manifest.h"
#include "fs/namespace/namespace.h"
#include "fs/ctl/publish.h"
#include "tiers/origin/origin.h"
#include "helpers.h"

/* mallinfo2() does not see the allocations of AddressSanitizer. */
#if defined(__SANITIZE_ADDRESS__)
#define HEAP_MEASURABLE 0
#else
#define HEAP_MEASURABLE 1
#endif

struct env {
	char *origin_dir;
	char *state_dir;
	struct dv_origin *origin;
	struct dv_namespace *ns;
	unsigned pins_kept;     /* 0: the default */
};

static char err[1024];

/* Writes ORIGIN/@rel atomically (a new inode, so the ETag moves). */
static void put(const char *root, const char *rel, const char *text)
{
	char path[1024], tmp[1100];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	*strrchr(path, '/') = '\0';
	ck_assert_int_eq(dv_mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	dv_test_write_file(tmp, text, strlen(text));
	ck_assert_int_eq(rename(tmp, path), 0);
}

/* A manifest of @n shards; hashes depend on dataset, revision and index. */
static char *manifest_text(const char *dataset, unsigned rev, unsigned n)
{
	size_t cap = 512 + (size_t)n * 256, len;
	char *doc = malloc(cap);
	unsigned h = 0;

	for (const char *p = dataset; *p; p++)
		h = h * 31 + (unsigned char)*p;
	len = (size_t)snprintf(doc, cap,
			       "{\"format\": \"datavo-manifest/1\", \"dataset\": \"%s\", \"revision\": %u, \"keys\": [\"json\"], \"shards\": [",
			       dataset, rev);
	for (unsigned i = 0; i < n; i++)
		len += (size_t)snprintf(doc + len, cap - len,
					"%s\n{\"name\": \"shard-%06u.tar\", \"index\": %u, \"content_hash\": \"%08x%08x%016x\", \"size\": %u, \"sha256\": \"%064x\"}",
					i ? "," : "", i, i, h, rev, i,
					1000 + i, i + 1);
	snprintf(doc + len, cap - len, "]}\n");
	return doc;
}

static void put_manifest(const char *root, const char *dataset, unsigned rev,
			 unsigned n)
{
	char rel[512], *doc = manifest_text(dataset, rev, n);

	snprintf(rel, sizeof(rel), "%s/revisions/%u.json", dataset, rev);
	put(root, rel, doc);
	snprintf(rel, sizeof(rel), "%s/manifest.json", dataset);
	put(root, rel, doc);
	free(doc);
}

static int ns_open(struct env *env, unsigned ttl)
{
	struct dv_ns_options opt = { .state_dir = env->state_dir, .ttl = ttl,
				     .pins_kept = env->pins_kept };
	int ret;

	ck_assert_int_eq(dv_origin_new(env->origin_dir, NULL, &env->origin,
				       err, sizeof(err)), 0);
	opt.origin = env->origin;
	ret = dv_ns_new(&opt, &env->ns, err, sizeof(err));
	if (ret) {
		dv_origin_free(env->origin);
		env->origin = NULL;
		env->ns = NULL;
	}
	return ret;
}

static void ns_close(struct env *env)
{
	dv_ns_free(env->ns);
	dv_origin_free(env->origin);
	env->ns = NULL;
	env->origin = NULL;
}

static void env_init(struct env *env)
{
	memset(env, 0, sizeof(*env));
	env->origin_dir = dv_test_tmpdir("nsorigin");
	env->state_dir = dv_test_tmpdir("nsstate");
}

static void env_release(struct env *env)
{
	ns_close(env);
	dv_test_rmtree(env->origin_dir);
	dv_test_rmtree(env->state_dir);
	free(env->origin_dir);
	free(env->state_dir);
}

/* Looks up "a/b/c" from the root. */
static int lookup_path(struct dv_namespace *ns, const char *path,
		       struct dv_ns_entry *e)
{
	char buf[1024], *save = NULL, *part;
	uint64_t ino = DV_NS_ROOT_INO;
	int ret = 0;

	snprintf(buf, sizeof(buf), "%s", path);
	for (part = strtok_r(buf, "/", &save); part;
	     part = strtok_r(NULL, "/", &save)) {
		ret = dv_ns_lookup(ns, ino, part, e);
		if (ret)
			return ret;
		ino = e->ino;
	}
	return ret;
}

struct listing {
	char names[64][256];
	uint64_t next[64];
	int n;
	int stop_after;     /* 0: never */
};

static int collect(void *arg, const struct dv_ns_entry *e, uint64_t next)
{
	struct listing *l = arg;

	ck_assert_int_lt(l->n, 64);
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", e->name);
	l->next[l->n++] = next;
	return l->stop_after && l->n >= l->stop_after;
}

static struct listing *list(struct dv_namespace *ns, uint64_t ino, int *ret)
{
	static struct listing l;

	memset(&l, 0, sizeof(l));
	*ret = dv_ns_readdir(ns, ino, 0, collect, &l);
	return &l;
}

/* Lists @path and compares with @expect, a comma-separated string. */
static void assert_listing(struct dv_namespace *ns, const char *path,
			   const char *expect)
{
	struct dv_ns_entry e = { .ino = DV_NS_ROOT_INO };
	struct listing *l;
	char got[4096] = "";
	int ret;

	if (*path)
		ck_assert_int_eq(lookup_path(ns, path, &e), 0);
	l = list(ns, e.ino, &ret);
	ck_assert_int_eq(ret, 0);
	for (int i = 0; i < l->n; i++) {
		strcat(got, i ? "," : "");
		strcat(got, l->names[i]);
	}
	ck_assert_str_eq(got, expect);
}

static void standard_origin(const char *root)
{
	put(root, "datasets.json",
	    "{\"datasets\": [\"demo/val\", \"solo\", \"demo/train\"]}");
	put_manifest(root, "demo/train", 1, 3);
	put_manifest(root, "demo/val", 1, 1);
	put_manifest(root, "solo", 4, 2);
}

START_TEST(test_tree)
{
	struct env env;
	struct dv_ns_entry e, dir, again;
	struct dv_ns_stats st;
	struct listing *l;
	int ret;

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 60), 0);

	assert_listing(env.ns, "", "demo,solo");
	assert_listing(env.ns, "demo", "train,val");
	assert_listing(env.ns, "demo/train",
		       "shard-000000.tar,shard-000001.tar,shard-000002.tar");
	assert_listing(env.ns, "solo", "shard-000000.tar,shard-000001.tar");

	ck_assert_int_eq(dv_ns_getattr(env.ns, DV_NS_ROOT_INO, &e), 0);
	ck_assert_int_eq(e.kind, DV_NS_DIR);

	ck_assert_int_eq(lookup_path(env.ns, "demo", &dir), 0);
	ck_assert_int_eq(dir.kind, DV_NS_DIR);
	ck_assert_str_eq(dir.dataset, "");
	ck_assert_uint_ge(dir.ino, DV_NS_FIRST_INO);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train", &dir), 0);
	ck_assert_str_eq(dir.name, "train");
	ck_assert_str_eq(dir.dataset, "demo/train");

	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000001.tar", &e), 0);
	ck_assert_int_eq(e.kind, DV_NS_SHARD);
	ck_assert_str_eq(e.name, "shard-000001.tar");
	ck_assert_uint_eq(e.size, 1001);
	ck_assert_uint_eq(e.revision, 1);
	ck_assert_str_eq(e.dataset, "demo/train");
	ck_assert_uint_eq(strlen(e.hash), 32);
	ck_assert_uint_eq(e.sha256[31], 2);
	ck_assert_uint_ge(e.ino, DV_NS_FIRST_INO);
	ck_assert_int_ne(e.mtime, 0);
	ck_assert_int_eq(dv_ns_getattr(env.ns, e.ino, &again), 0);
	ck_assert_str_eq(again.name, e.name);
	ck_assert_str_eq(again.hash, e.hash);
	ck_assert_uint_eq(again.size, e.size);

	/* Errors. */
	ck_assert_int_eq(dv_ns_lookup(env.ns, e.ino, "x", &again), -ENOTDIR);
	ck_assert_int_eq(dv_ns_readdir(env.ns, e.ino, 0, collect, list(env.ns, 1, &ret)), -ENOTDIR);
	ck_assert_int_eq(dv_ns_lookup(env.ns, dir.ino, "nope.tar", &again), -ENOENT);
	ck_assert_int_eq(dv_ns_lookup(env.ns, 987654321, "x", &again), -ENOENT);
	ck_assert_int_eq(dv_ns_getattr(env.ns, 987654321, &again), -ENOENT);
	ck_assert_int_eq(dv_ns_lookup(env.ns, DV_NS_ROOT_INO, "..", &again), -ENOENT);

	/* Resuming a listing from a position, and stopping early. */
	l = list(env.ns, dir.ino, &ret);
	ck_assert_int_eq(l->n, 3);
	{
		struct listing part = { .stop_after = 1 };

		ck_assert_int_eq(dv_ns_readdir(env.ns, dir.ino, l->next[0],
					       collect, &part), 0);
		ck_assert_int_eq(part.n, 1);
		ck_assert_str_eq(part.names[0], "shard-000001.tar");
		ck_assert_int_eq(dv_ns_readdir(env.ns, dir.ino, part.next[0],
					       collect, &part), 0);
		ck_assert_int_eq(part.n, 2);
		ck_assert_str_eq(part.names[1], "shard-000002.tar");
		ck_assert_int_eq(dv_ns_readdir(env.ns, dir.ino, 99, collect,
					       &part), 0);
		ck_assert_int_eq(part.n, 2);
	}

	dv_ns_stats(env.ns, &st);
	ck_assert_uint_eq(st.datasets, 3);
	ck_assert_uint_eq(st.shards, 6);
	ck_assert_uint_eq(st.rejected_manifests, 0);
	env_release(&env);
}
END_TEST

/* A dataset that is also the parent of another lists both. */
START_TEST(test_nested_parent_dataset)
{
	struct env env;
	struct dv_ns_entry e;

	env_init(&env);
	put(env.origin_dir, "datasets.json",
	    "{\"datasets\": [\"a\", \"a/b/c\", \"a/b\"]}");
	put_manifest(env.origin_dir, "a", 1, 2);
	put_manifest(env.origin_dir, "a/b", 1, 1);
	put_manifest(env.origin_dir, "a/b/c", 1, 1);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	assert_listing(env.ns, "", "a");
	assert_listing(env.ns, "a", "b,shard-000000.tar,shard-000001.tar");
	assert_listing(env.ns, "a/b", "c,shard-000000.tar");
	assert_listing(env.ns, "a/b/c", "shard-000000.tar");
	ck_assert_int_eq(lookup_path(env.ns, "a/b/c/shard-000000.tar", &e), 0);
	ck_assert_str_eq(e.dataset, "a/b/c");
	env_release(&env);
}
END_TEST

START_TEST(test_pins)
{
	struct env env;
	struct dv_ns_entry pin, e, cur, again;
	char path[1024];
	struct stat st;

	env_init(&env);
	standard_origin(env.origin_dir);
	put_manifest(env.origin_dir, "demo/train", 2, 4);
	ck_assert_int_eq(ns_open(&env, 60), 0);

	ck_assert_int_eq(lookup_path(env.ns, "demo/train@1", &pin), 0);
	ck_assert_int_eq(pin.kind, DV_NS_DIR);
	ck_assert_str_eq(pin.name, "train@1");
	ck_assert_str_eq(pin.dataset, "demo/train@1");
	/* Pins are not listed, but list their own shards. */
	assert_listing(env.ns, "demo", "train,val");
	assert_listing(env.ns, "demo/train@1",
		       "shard-000000.tar,shard-000001.tar,shard-000002.tar");
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@1/shard-000000.tar", &e), 0);
	ck_assert_uint_eq(e.revision, 1);
	ck_assert_str_eq(e.dataset, "demo/train@1");
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000000.tar", &cur), 0);
	ck_assert_uint_eq(cur.revision, 2);
	ck_assert_str_ne(cur.hash, e.hash);
	ck_assert_uint_ne(cur.ino, e.ino);
	/* The same pin again: same inode. */
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@1", &again), 0);
	ck_assert_uint_eq(again.ino, pin.ino);
	ck_assert_int_eq(dv_ns_getattr(env.ns, pin.ino, &again), 0);
	ck_assert_str_eq(again.dataset, "demo/train@1");
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@2/shard-000003.tar", &e), 0);

	/* Not pins. */
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@3", &e), -ENOENT);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@01", &e), -ENOENT);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@", &e), -ENOENT);
	ck_assert_int_eq(lookup_path(env.ns, "demo/nope@1", &e), -ENOENT);
	ck_assert_int_eq(lookup_path(env.ns, "demo@1", &e), -ENOENT);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@1/x@1", &e), -ENOENT);
	/* A revision file that holds another revision is refused. */
	put(env.origin_dir, "solo/revisions/2.json", "{\"format\": \"datavo-manifest/1\", \"dataset\": \"solo\", \"revision\": 4, \"shards\": []}");
	ck_assert_int_eq(lookup_path(env.ns, "solo@2", &e), -ENOENT);
	ck_assert_int_eq(lookup_path(env.ns, "solo@4", &e), 0);

	/* Cached on disk: a remount with the origin gone still has the pin. */
	snprintf(path, sizeof(path), "%s/origin/demo/train/revisions/1.json",
		 env.state_dir);
	ck_assert_int_eq(stat(path, &st), 0);
	ns_close(&env);
	snprintf(path, sizeof(path), "%s.gone", env.origin_dir);
	ck_assert_int_eq(rename(env.origin_dir, path), 0);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@1", &again), 0);
	ck_assert_uint_eq(again.ino, pin.ino);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@1/shard-000002.tar", &e), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/val@1", &e), -ENOENT);
	ck_assert_int_eq(rename(path, env.origin_dir), 0);
	env_release(&env);
}
END_TEST

/*
 * A revision found missing is remembered for the TTL: published meanwhile,
 * it stays ENOENT until then (the origin is not asked again); with a TTL of
 * 0 nothing is remembered.
 */
START_TEST(test_pin_miss_remembered)
{
	static const char doc9[] = "{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", \"revision\": 9, \"shards\": []}";
	static const char doc10[] = "{\"format\": \"datavo-manifest/1\", \"dataset\": \"demo/train\", \"revision\": 10, \"shards\": []}";
	struct dv_ns_entry e;
	struct env env;

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@9", &e), -ENOENT);
	put(env.origin_dir, "demo/train/revisions/9.json", doc9);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@9", &e), -ENOENT);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@1", &e), 0);
	/* many misses: the notes are bounded, and still answer */
	for (int i = 100; i < 100 + 2 * 256; i++) {
		char name[64];

		snprintf(name, sizeof(name), "demo/train@%d", i);
		ck_assert_int_eq(lookup_path(env.ns, name, &e), -ENOENT);
	}
	ns_close(&env);

	ck_assert_int_eq(ns_open(&env, 0), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@9", &e), 0);
	ck_assert_str_eq(e.dataset, "demo/train@9");
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@10", &e), -ENOENT);
	put(env.origin_dir, "demo/train/revisions/10.json", doc10);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train@10", &e), 0);
	env_release(&env);
}
END_TEST

/* An origin with revisions 1..@n of demo/train, @nshards shards each. */
static void pinned_origin(const char *root, unsigned n, unsigned nshards)
{
	standard_origin(root);
	for (unsigned rev = 2; rev <= n; rev++)
		put_manifest(root, "demo/train", rev, nshards);
}

static uint64_t pin_ino(struct dv_namespace *ns, unsigned rev,
			const char *shard, bool ref)
{
	struct dv_ns_entry dir, e;
	char name[64];

	ck_assert_int_eq(lookup_path(ns, "demo", &dir), 0);
	snprintf(name, sizeof(name), "train@%u", rev);
	if (ref)
		ck_assert_int_eq(dv_ns_lookup_ref(ns, dir.ino, name, &e), 0);
	else
		ck_assert_int_eq(dv_ns_lookup(ns, dir.ino, name, &e), 0);
	if (!shard)
		return e.ino;
	dir = e;
	if (ref)
		ck_assert_int_eq(dv_ns_lookup_ref(ns, dir.ino, shard, &e), 0);
	else
		ck_assert_int_eq(dv_ns_lookup(ns, dir.ino, shard, &e), 0);
	ck_assert_uint_eq(e.revision, rev);
	return e.ino;
}

static struct dv_ns_stats ns_stats(struct dv_namespace *ns)
{
	struct dv_ns_stats st;

	dv_ns_stats(ns, &st);
	return st;
}

/*
 * 80 pins looked up and let go: the 64 used last stay, the others are
 * evicted (their inodes answer ENOENT), and a lookup brings one back from
 * the disk cache under the same inode numbers. Every other inode is still
 * found after the inode table lost those slots.
 */
START_TEST(test_pins_bounded)
{
	static const char *const kept[] = {
		"demo/train/shard-000002.tar", "demo/val/shard-000000.tar",
		"solo/shard-000001.tar", "demo/val", "solo",
	};
	uint64_t dir1, shard1[3], ino0[81], ino;
	struct dv_ns_entry e;
	struct env env;
	char path[1024];

	env_init(&env);
	pinned_origin(env.origin_dir, 80, 3);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	dir1 = pin_ino(env.ns, 1, NULL, false);
	for (unsigned i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "shard-%06u.tar", i);
		shard1[i] = pin_ino(env.ns, 1, path, false);
	}
	for (unsigned rev = 2; rev <= 80; rev++)
		ino0[rev] = pin_ino(env.ns, rev, "shard-000000.tar", false);
	ck_assert_uint_eq(ns_stats(env.ns).pins_loaded, DV_NS_PINS_KEPT);
	ck_assert_uint_eq(ns_stats(env.ns).pins_evicted, 80 - DV_NS_PINS_KEPT);
	ck_assert_uint_eq(ns_stats(env.ns).pins_referenced, 0);
	/* Revisions 1..16 went, 17..80 answer. */
	ck_assert_int_eq(dv_ns_getattr(env.ns, dir1, &e), 0);
	ck_assert_str_eq(e.dataset, "");          /* the directory, unloaded */
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(dv_ns_getattr(env.ns, shard1[i], &e), -ENOENT);
	for (unsigned rev = 2; rev <= 80; rev++)
		ck_assert_int_eq(dv_ns_getattr(env.ns, ino0[rev], &e),
				 rev <= 80 - DV_NS_PINS_KEPT ? -ENOENT : 0);
	/* Each lookup loads one again (the newest now) and evicts another. */
	for (unsigned rev = 2; rev <= 80; rev++) {
		ck_assert_uint_eq(pin_ino(env.ns, rev, "shard-000000.tar", false),
				  ino0[rev]);
		ck_assert_int_eq(dv_ns_getattr(env.ns, ino0[rev], &e), 0);
		ck_assert_uint_eq(ns_stats(env.ns).pins_loaded, DV_NS_PINS_KEPT);
	}
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		ck_assert_int_eq(lookup_path(env.ns, kept[i], &e), 0);
		ck_assert_int_eq(dv_ns_getattr(env.ns, e.ino, &e), 0);
	}

	/* Back from the disk cache (the origin's revisions are gone). */
	snprintf(path, sizeof(path), "%s/demo/train/revisions", env.origin_dir);
	{
		char gone[1100];

		snprintf(gone, sizeof(gone), "%s.gone", path);
		ck_assert_int_eq(rename(path, gone), 0);
		ck_assert_uint_eq(pin_ino(env.ns, 1, NULL, false), dir1);
		for (unsigned i = 0; i < 3; i++) {
			char name[64];

			snprintf(name, sizeof(name), "shard-%06u.tar", i);
			ino = pin_ino(env.ns, 1, name, false);
			ck_assert_uint_eq(ino, shard1[i]);
			ck_assert_int_eq(dv_ns_getattr(env.ns, ino, &e), 0);
			ck_assert_uint_eq(e.revision, 1);
		}
		ck_assert_int_eq(rename(gone, path), 0);
	}
	env_release(&env);
}
END_TEST

/*
 * A pin held by a reference (its directory's lookup, one shard's lookup,
 * an open handle) is never evicted, however many others come; let go, it
 * is the last used of the idle ones. Forgets of more than was counted, and
 * of inodes that are not a pin's, change nothing.
 */
START_TEST(test_pins_referenced)
{
	uint64_t dir1, shard2, dir2, shard3, shard4, pins_dir;
	struct dv_ns_entry e;
	struct listing *l;
	struct env env;
	int ret;

	env_init(&env);
	env.pins_kept = 4;
	pinned_origin(env.origin_dir, 20, 2);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	dir1 = pin_ino(env.ns, 1, NULL, true);
	shard2 = pin_ino(env.ns, 2, "shard-000001.tar", true);
	dir2 = pin_ino(env.ns, 2, NULL, false);
	dv_ns_forget(env.ns, dir2, 1);            /* held by its shard only */
	shard3 = pin_ino(env.ns, 3, "shard-000000.tar", false);
	dv_ns_ref(env.ns, shard3, 1);             /* an open handle */
	shard4 = pin_ino(env.ns, 4, "shard-000000.tar", false);
	for (unsigned rev = 5; rev <= 12; rev++)
		pin_ino(env.ns, rev, NULL, false);
	ck_assert_uint_eq(ns_stats(env.ns).pins_loaded, 3 + 4);
	ck_assert_uint_eq(ns_stats(env.ns).pins_referenced, 3);
	ck_assert_int_eq(dv_ns_getattr(env.ns, dir1, &e), 0);
	ck_assert_str_eq(e.dataset, "demo/train@1");
	l = list(env.ns, dir1, &ret);
	ck_assert_int_eq(ret, 0);
	ck_assert_int_eq(l->n, 3);
	ck_assert_int_eq(dv_ns_getattr(env.ns, shard2, &e), 0);
	ck_assert_uint_eq(e.revision, 2);
	ck_assert_int_eq(dv_ns_getattr(env.ns, dir2, &e), 0);
	ck_assert_int_eq(dv_ns_getattr(env.ns, shard3, &e), 0);
	ck_assert_int_eq(dv_ns_getattr(env.ns, shard4, &e), -ENOENT);

	/* Not a pin's: ignored. */
	ck_assert_int_eq(lookup_path(env.ns, "demo", &e), 0);
	pins_dir = e.ino;
	dv_ns_ref(env.ns, pins_dir, 1);
	dv_ns_forget(env.ns, pins_dir, 3);
	dv_ns_forget(env.ns, DV_NS_ROOT_INO, 1);
	dv_ns_forget(env.ns, 987654321, 1);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000000.tar", &e), 0);
	dv_ns_forget(env.ns, e.ino, 1);
	ck_assert_uint_eq(ns_stats(env.ns).pins_referenced, 3);

	/* Let go, pin 1 is the newest idle one: 9 (the oldest) goes. */
	dv_ns_forget(env.ns, dir1, 1);
	ck_assert_uint_eq(ns_stats(env.ns).pins_referenced, 2);
	ck_assert_uint_eq(ns_stats(env.ns).pins_loaded, 2 + 4);
	ck_assert_int_eq(dv_ns_getattr(env.ns, dir1, &e), 0);
	ck_assert_str_eq(e.dataset, "demo/train@1");
	/* Forgotten more times than looked up: clamped, and let go. */
	dv_ns_forget(env.ns, shard2, 5);
	dv_ns_forget(env.ns, shard3, 1);
	ck_assert_uint_eq(ns_stats(env.ns).pins_referenced, 0);
	ck_assert_uint_eq(ns_stats(env.ns).pins_loaded, 4);
	ck_assert_int_eq(dv_ns_getattr(env.ns, shard3, &e), 0);
	for (unsigned rev = 13; rev <= 20; rev++)
		pin_ino(env.ns, rev, NULL, false);
	ck_assert_uint_eq(ns_stats(env.ns).pins_loaded, 4);
	ck_assert_int_eq(dv_ns_getattr(env.ns, shard2, &e), -ENOENT);
	ck_assert_int_eq(dv_ns_getattr(env.ns, shard3, &e), -ENOENT);
	/* Back under the same numbers. */
	ck_assert_uint_eq(pin_ino(env.ns, 2, "shard-000001.tar", true), shard2);
	ck_assert_uint_eq(pin_ino(env.ns, 2, NULL, false), dir2);
	ck_assert_uint_eq(ns_stats(env.ns).pins_referenced, 1);
	env_release(&env);
}
END_TEST

struct pin_user {
	struct dv_namespace *ns;
	unsigned seed;
	int errors;
};

/* Holds a pin and a shard of it, checks both answer, lets them go. */
static void *pin_user(void *p)
{
	struct pin_user *u = p;
	struct dv_ns_entry demo, dir, e;
	char name[32];

	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "train@%u", 1 + rand_r(&u->seed) % 12);
		if (dv_ns_lookup(u->ns, DV_NS_ROOT_INO, "demo", &demo) ||
		    dv_ns_lookup_ref(u->ns, demo.ino, name, &dir)) {
			u->errors++;
			continue;
		}
		if (dv_ns_lookup_ref(u->ns, dir.ino, "shard-000000.tar", &e) ||
		    dv_ns_getattr(u->ns, dir.ino, &dir) ||
		    dv_ns_getattr(u->ns, e.ino, &e))
			u->errors++;
		dv_ns_forget(u->ns, dir.ino, 1);
		if (dv_ns_getattr(u->ns, e.ino, &e))
			u->errors++;
		dv_ns_forget(u->ns, e.ino, 1);
	}
	return NULL;
}

/* Threads holding and letting go of pins while others are evicted. */
START_TEST(test_pins_concurrent)
{
	struct pin_user u[4];
	pthread_t th[4];
	struct env env;

	env_init(&env);
	env.pins_kept = 2;
	pinned_origin(env.origin_dir, 12, 3);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	for (int i = 0; i < 4; i++) {
		u[i] = (struct pin_user){ env.ns, 7u + (unsigned)i, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, pin_user, &u[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(u[i].errors, 0);
	}
	ck_assert_uint_eq(ns_stats(env.ns).pins_referenced, 0);
	ck_assert_uint_le(ns_stats(env.ns).pins_loaded, 2);
	ck_assert_uint_gt(ns_stats(env.ns).pins_evicted, 0);
	env_release(&env);
}
END_TEST

/* Inode numbers and times are the same on every mount. */
START_TEST(test_stable_inodes)
{
	static const char *const paths[] = {
		"demo", "demo/train", "demo/val", "solo",
		"demo/train/shard-000002.tar", "solo/shard-000001.tar",
		"demo/train@1", "demo/train@1/shard-000000.tar",
	};
	const size_t n = sizeof(paths) / sizeof(paths[0]);
	struct env env;
	struct dv_ns_entry a[8], b;
	char *other_state;

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(lookup_path(env.ns, paths[i], &a[i]), 0);
	ns_close(&env);

	/* Same state directory: also the same times. */
	ck_assert_int_eq(ns_open(&env, 60), 0);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(lookup_path(env.ns, paths[i], &b), 0);
		ck_assert_uint_eq(b.ino, a[i].ino);
		ck_assert_int_eq(b.mtime, a[i].mtime);
	}
	ns_close(&env);

	/* A fresh state directory: the same inodes. */
	other_state = env.state_dir;
	env.state_dir = dv_test_tmpdir("nsstate2");
	ck_assert_int_eq(ns_open(&env, 60), 0);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(lookup_path(env.ns, paths[i], &b), 0);
		ck_assert_uint_eq(b.ino, a[i].ino);
	}
	dv_test_rmtree(other_state);
	free(other_state);
	env_release(&env);
}
END_TEST

/* A one-shard manifest with the given fields, as raw JSON. */
static void put_raw(const char *root, const char *dir, const char *dataset,
		    const char *format, const char *name, const char *hash,
		    const char *size)
{
	char doc[1024], rel[256];

	snprintf(doc, sizeof(doc),
		 "{\"format\": \"%s\", \"dataset\": \"%s\", \"revision\": 1, \"shards\": [{\"name\": \"%s\", \"index\": 0, \"content_hash\": \"%s\", \"size\": %s, \"sha256\": \"%064x\"}]}",
		 format, dataset, name, hash, size, 7);
	snprintf(rel, sizeof(rel), "%s/manifest.json", dir);
	put(root, rel, doc);
}

START_TEST(test_bad_manifests)
{
	static const char *const fmt = "datavo-manifest/1";
	static const char *const hash = "0123456789abcdef0123456789abcdef";
	struct env env;
	struct dv_ns_entry e;
	struct dv_ns_stats st;
	const char *o;

	env_init(&env);
	o = env.origin_dir;
	put(o, "datasets.json",
	    "{\"datasets\": [\"good\", \"bad/dotdot\", \"bad/slash\", \"bad/hex\", \"bad/negative\", \"bad/broken\", \"bad/format\", \"bad/other\", \"bad/missing\"]}");
	put_manifest(o, "good", 1, 2);
	put_raw(o, "bad/dotdot", "bad/dotdot", fmt, "../x.tar", hash, "1");
	put_raw(o, "bad/slash", "bad/slash", fmt, "a/x.tar", hash, "1");
	put_raw(o, "bad/hex", "bad/hex", fmt, "x.tar", "0123456789abcdef0123456789abcdeX", "1");
	put_raw(o, "bad/negative", "bad/negative", fmt, "x.tar", hash, "-1");
	put_raw(o, "bad/format", "bad/format", "datavo-manifest/9", "x.tar", hash, "1");
	put_raw(o, "bad/other", "bad/elsewhere", fmt, "x.tar", hash, "1");
	put(o, "bad/broken/manifest.json", "{\"format\": \"datavo-manifest/1\", \"shards\": [");

	ck_assert_int_eq(ns_open(&env, 60), 0);
	assert_listing(env.ns, "", "good");
	assert_listing(env.ns, "good", "shard-000000.tar,shard-000001.tar");
	ck_assert_int_eq(lookup_path(env.ns, "bad", &e), -ENOENT);
	dv_ns_stats(env.ns, &st);
	ck_assert_uint_eq(st.datasets, 1);
	ck_assert_uint_eq(st.rejected_manifests, 7);
	/* bad/missing has no manifest: a fetch error, not a rejection. */
	ck_assert_uint_ge(st.refresh_errors, 1);
	ns_close(&env);

	/* A bad datasets.json with nothing cached: no namespace. */
	put(env.origin_dir, "datasets.json", "{\"datasets\": [\"../up\"]}");
	dv_test_rmtree(env.state_dir);
	ck_assert_int_ne(ns_open(&env, 60), 0);
	ck_assert_msg(strstr(err, "not a valid dataset name") != NULL, "%s", err);
	env_release(&env);
}
END_TEST

/* B7: with the origin gone, a remount serves what the cache holds. */
START_TEST(test_origin_down)
{
	struct env env;
	struct dv_ns_entry a, b;
	char moved[1024], *fresh;

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000002.tar", &a), 0);
	ns_close(&env);

	snprintf(moved, sizeof(moved), "%s.moved", env.origin_dir);
	ck_assert_int_eq(rename(env.origin_dir, moved), 0);
	ck_assert_int_eq(ns_open(&env, 60), 0);
	assert_listing(env.ns, "", "demo,solo");
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000002.tar", &b), 0);
	ck_assert_uint_eq(b.ino, a.ino);
	ck_assert_str_eq(b.hash, a.hash);
	/* A refresh with the origin still down keeps everything. */
	dv_ns_maybe_refresh(env.ns);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000002.tar", &b), 0);
	ns_close(&env);

	/* No cache and no origin: a clear error. */
	fresh = env.state_dir;
	env.state_dir = dv_test_tmpdir("nsempty");
	ck_assert_int_eq(ns_open(&env, 60), -ENOENT);
	ck_assert_msg(strstr(err, "datasets.json") && strstr(err, "no cached copy"),
		      "%s", err);
	dv_test_rmtree(fresh);
	free(fresh);
	ck_assert_int_eq(rename(moved, env.origin_dir), 0);
	env_release(&env);
}
END_TEST

START_TEST(test_refresh)
{
	struct env env;
	struct dv_ns_entry old, cur, e;
	struct dv_ns_stats st;

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 0), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000000.tar", &old), 0);

	/* Nothing changed: same inode. */
	dv_ns_maybe_refresh(env.ns);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000000.tar", &cur), 0);
	ck_assert_uint_eq(cur.ino, old.ino);

	/* A new revision: new inodes, the old one still answers getattr. */
	put_manifest(env.origin_dir, "demo/train", 2, 5);
	put(env.origin_dir, "datasets.json",
	    "{\"datasets\": [\"demo/train\", \"new\"]}");
	put_manifest(env.origin_dir, "new", 1, 1);
	dv_ns_maybe_refresh(env.ns);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000000.tar", &cur), 0);
	ck_assert_uint_eq(cur.revision, 2);
	ck_assert_uint_ne(cur.ino, old.ino);
	ck_assert_int_eq(dv_ns_getattr(env.ns, old.ino, &e), 0);
	ck_assert_uint_eq(e.revision, 1);
	ck_assert_str_eq(e.hash, old.hash);
	assert_listing(env.ns, "", "demo,new");
	assert_listing(env.ns, "demo", "train");
	assert_listing(env.ns, "demo/train",
		       "shard-000000.tar,shard-000001.tar,shard-000002.tar,shard-000003.tar,shard-000004.tar");
	/* Removed datasets are gone, their inodes still answer getattr. */
	ck_assert_int_eq(lookup_path(env.ns, "solo", &e), -ENOENT);
	dv_ns_stats(env.ns, &st);
	ck_assert_uint_eq(st.datasets, 2);
	ck_assert_uint_eq(st.shards, 6);
	ck_assert_uint_ge(st.refreshes, 3);
	env_release(&env);
}
END_TEST

START_TEST(test_failed_refresh_keeps_old)
{
	struct env env;
	struct dv_ns_entry a, b;
	struct dv_ns_stats st;
	char path[1024];

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 0), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000001.tar", &a), 0);

	/* A broken manifest: the old one stays, and is what stays cached. */
	put(env.origin_dir, "demo/train/manifest.json", "{\"format\": ");
	dv_ns_maybe_refresh(env.ns);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000001.tar", &b), 0);
	ck_assert_uint_eq(b.ino, a.ino);
	dv_ns_stats(env.ns, &st);
	ck_assert_uint_eq(st.rejected_manifests, 1);
	/* Refused once: not again until it changes (same bytes, new ETag). */
	dv_ns_maybe_refresh(env.ns);
	put(env.origin_dir, "demo/train/manifest.json", "{\"format\": ");
	dv_ns_maybe_refresh(env.ns);
	dv_ns_stats(env.ns, &st);
	ck_assert_uint_eq(st.rejected_manifests, 1);

	/* A broken or missing dataset list: the old tree stays. */
	put(env.origin_dir, "datasets.json", "{\"datasets\": [");
	dv_ns_maybe_refresh(env.ns);
	assert_listing(env.ns, "", "demo,solo");
	snprintf(path, sizeof(path), "%s/datasets.json", env.origin_dir);
	ck_assert_int_eq(unlink(path), 0);
	dv_ns_maybe_refresh(env.ns);
	assert_listing(env.ns, "", "demo,solo");
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000001.tar", &b), 0);
	dv_ns_stats(env.ns, &st);
	ck_assert_uint_ge(st.refresh_errors, 2);
	ns_close(&env);

	/* The remount (origin list missing) still has the last good manifest. */
	ck_assert_int_eq(ns_open(&env, 0), 0);
	ck_assert_int_eq(lookup_path(env.ns, "demo/train/shard-000001.tar", &b), 0);
	ck_assert_uint_eq(b.ino, a.ino);
	env_release(&env);
}
END_TEST

/* A TTL not yet passed does not refresh. */
START_TEST(test_ttl)
{
	struct env env;
	struct dv_ns_stats st;

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 1), 0);
	put(env.origin_dir, "datasets.json", "{\"datasets\": [\"solo\"]}");
	dv_ns_maybe_refresh(env.ns);
	assert_listing(env.ns, "", "demo,solo");
	usleep(1100 * 1000);
	dv_ns_maybe_refresh(env.ns);
	assert_listing(env.ns, "", "solo");
	dv_ns_stats(env.ns, &st);
	ck_assert_uint_eq(st.refreshes, 2);
	env_release(&env);
}
END_TEST

struct reader_arg {
	struct dv_namespace *ns;
	int *stop;
	int errors;
};

static void *reader(void *p)
{
	struct reader_arg *ra = p;
	struct dv_ns_entry e, g;
	struct listing l;

	while (!__atomic_load_n(ra->stop, __ATOMIC_RELAXED)) {
		if (lookup_path(ra->ns, "demo/train/shard-000000.tar", &e) == 0 &&
		    dv_ns_getattr(ra->ns, e.ino, &g) != 0)
			ra->errors++;
		memset(&l, 0, sizeof(l));
		dv_ns_readdir(ra->ns, DV_NS_ROOT_INO, 0, collect, &l);
	}
	return NULL;
}

/* Readers keep working while refreshes swap trees under them. */
START_TEST(test_concurrent)
{
	struct env env;
	struct reader_arg ra[4];
	pthread_t th[4];
	int stop = 0;

	env_init(&env);
	standard_origin(env.origin_dir);
	ck_assert_int_eq(ns_open(&env, 0), 0);
	for (int i = 0; i < 4; i++) {
		ra[i] = (struct reader_arg){ env.ns, &stop, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &ra[i]), 0);
	}
	for (unsigned rev = 2; rev < 40; rev++) {
		put_manifest(env.origin_dir, "demo/train", rev, 1 + rev % 7);
		dv_ns_maybe_refresh(env.ns);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(ra[i].errors, 0);
	}
	env_release(&env);
}
END_TEST

/* What `datavoctl publish` writes is what the namespace serves. */
START_TEST(test_published_origin)
{
	struct env env;
	char *src = dv_test_tmpdir("nssrc"), cmd[2048];
	struct dv_publish_opts po = { .dataset = "voice/train" };
	struct dv_publish_result res;
	struct dv_ns_entry e, old, pin;

	env_init(&env);
	po.src_dir = src;
	po.origin_dir = env.origin_dir;
	for (int i = 0; i < 3; i++) {
		snprintf(cmd, sizeof(cmd),
			 "cd '%s' && echo %d > %06d.txt && tar -cf shard-%d.tar %06d.txt && rm %06d.txt",
			 src, i, i, i, i, i);
		ck_assert_int_eq(system(cmd), 0);
	}
	ck_assert_int_eq(dv_publish(&po, &res, err, sizeof(err)), 0);
	ck_assert_int_eq(ns_open(&env, 0), 0);
	assert_listing(env.ns, "voice/train", "shard-0.tar,shard-1.tar,shard-2.tar");
	ck_assert_int_eq(lookup_path(env.ns, "voice/train/shard-1.tar", &old), 0);
	ck_assert_uint_eq(old.size, 10240);
	ck_assert_uint_eq(old.revision, 1);

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && echo new > 000009.txt && tar -cf shard-1.tar 000009.txt",
		 src);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(dv_publish(&po, &res, err, sizeof(err)), 0);
	ck_assert_uint_eq(res.revision, 2);
	dv_ns_maybe_refresh(env.ns);
	ck_assert_int_eq(lookup_path(env.ns, "voice/train/shard-1.tar", &e), 0);
	ck_assert_uint_eq(e.revision, 2);
	ck_assert_str_ne(e.hash, old.hash);
	ck_assert_int_eq(lookup_path(env.ns, "voice/train@1/shard-1.tar", &pin), 0);
	ck_assert_str_eq(pin.hash, old.hash);
	dv_test_rmtree(src);
	free(src);
	env_release(&env);
}
END_TEST

/* 100,000 shards stay under 300 bytes each in the namespace. */
START_TEST(test_memory)
{
	struct env env;
	struct mallinfo2 before, after;
	struct dv_ns_entry e;
	char *doc;

	env_init(&env);
	put(env.origin_dir, "datasets.json", "{\"datasets\": [\"big\"]}");
	doc = manifest_text("big", 1, 100000);
	put(env.origin_dir, "big/manifest.json", doc);
	free(doc);
	ck_assert_int_eq(dv_origin_new(env.origin_dir, NULL, &env.origin, err,
				       sizeof(err)), 0);
	before = mallinfo2();
	{
		struct dv_ns_options opt = { .origin = env.origin,
					     .state_dir = env.state_dir,
					     .ttl = 60 };

		ck_assert_int_eq(dv_ns_new(&opt, &env.ns, err, sizeof(err)), 0);
	}
	after = mallinfo2();
	if (HEAP_MEASURABLE)
		ck_assert_uint_le(after.uordblks - before.uordblks, 300 * 100000);
	ck_assert_int_eq(lookup_path(env.ns, "big/shard-099999.tar", &e), 0);
	ck_assert_uint_eq(e.size, 1000 + 99999);
	env_release(&env);
}
END_TEST

static Suite *namespace_suite(void)
{
	Suite *s = suite_create("namespace");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_tree);
	tcase_add_test(tc, test_nested_parent_dataset);
	tcase_add_test(tc, test_pins);
	tcase_add_test(tc, test_pin_miss_remembered);
	tcase_add_test(tc, test_pins_bounded);
	tcase_add_test(tc, test_pins_referenced);
	tcase_add_test(tc, test_pins_concurrent);
	tcase_add_test(tc, test_stable_inodes);
	tcase_add_test(tc, test_bad_manifests);
	tcase_add_test(tc, test_origin_down);
	tcase_add_test(tc, test_refresh);
	tcase_add_test(tc, test_failed_refresh_keeps_old);
	tcase_add_test(tc, test_ttl);
	tcase_add_test(tc, test_concurrent);
	tcase_add_test(tc, test_published_origin);
	tcase_add_test(tc, test_memory);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	/* The refused documents log warnings by design; show them on demand. */
	dv_log_set_level(getenv("DV_TEST_VERBOSE") ? DV_LOG_DEBUG : DV_LOG_ERROR);
	return dv_test_run(namespace_suite());
}
