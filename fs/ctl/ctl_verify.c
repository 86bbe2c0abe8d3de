/*
 * datavoctl verify [-c CONFIG] [--state-dir DIR] [--fix]
 *
 * Scrubs the folder and ram tiers of the config (B3). What is known about a
 * shard comes from the manifests the daemons cached on disk (ns_cache.c:
 * STATE/<origin key>/origin/<dataset>/manifest.json and revisions/N.json,
 * each behind a one-line "datavo-cache/1 ETAG" header): every cached
 * manifest of every origin under the state directory, so one run covers
 * every mount that shares the tiers, mounted or not.
 *
 * Findings: a <hash>.tar whose size differs from the manifest's (truncated
 * or oversized) or whose sha256 does not match (corrupt); a staging file or
 * lock nobody holds (stale, B4). --fix removes them: a tier file under its
 * per-hash lock (R7), after checking it is still the file that was hashed,
 * so a racing daemon's fresh install is never removed. A file no cached
 * manifest names is reported as unknown and left alone: it may belong to an
 * origin whose manifests are cached elsewhere.
 *
 * Exit status: 0 nothing found, 1 findings (removed or not), 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/util.h"
#include "tiers/core/digest.h"
#include "tiers/folder/folder.h"
#include "tiers/origin/origin.h"
#include "tiers/core/sink.h"
#include "tiers/core/tier.h"
#include "ctl.h"
#include "fs/namespace/manifest.h"

#define CACHE_MAGIC "datavo-cache/1 "
#define MAX_DEPTH 16
/* A staging file younger than this may be between create and flock. */
#define STALE_AGE_S 10

struct known {
	char hash[65];
	uint64_t size;
	uint8_t sha256[32];
	char *label;             /* "dataset/shard.tar" */
};

struct verify {
	struct known *v;         /* sorted by hash after loading */
	size_t n, cap;
	size_t manifests;
	bool fix;
	/* counts */
	uint64_t objects, ok, corrupt, truncated, stale, unknown, removed,
		fix_failed;
};

/* ---- known shards, from the cached manifests ---- */

static int add_known(struct verify *vf, const struct dv_manifest *m,
		     const struct dv_manifest_shard *s)
{
	struct known *k;

	if (vf->n == vf->cap) {
		size_t cap = vf->cap ? vf->cap * 2 : 256;
		struct known *v = realloc(vf->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		vf->v = v;
		vf->cap = cap;
	}
	k = &vf->v[vf->n];
	memcpy(k->hash, s->hash, sizeof(k->hash));
	k->size = s->size;
	memcpy(k->sha256, s->sha256, 32);
	if (asprintf(&k->label, "%s/%s", m->dataset, dv_manifest_name(m, s)) < 0)
		return -ENOMEM;
	vf->n++;
	return 0;
}

static int load_manifest(struct verify *vf, const char *path)
{
	struct dv_manifest *m = NULL;
	char *text = NULL, *body, err[512];
	size_t len;
	int ret = dv_doc_read(path, DV_DOC_MAX + 4096, &text, &len, NULL);

	if (ret)
		return ret == -ENOMEM ? ret : 0;
	body = text;
	if (strncmp(text, CACHE_MAGIC, strlen(CACHE_MAGIC)) == 0) {
		char *nl = memchr(text, '\n', len);

		if (!nl)
			goto out;
		body = nl + 1;
	}
	if (dv_manifest_parse(body, len - (size_t)(body - text), NULL, &m, err,
			      sizeof(err))) {
		fprintf(stderr, "verify: ignoring %s: %s\n", path, err);
		goto out;
	}
	vf->manifests++;
	for (size_t i = 0; i < m->nshards && ret == 0; i++)
		ret = add_known(vf, m, &m->shards[i]);
out:
	dv_manifest_free(m);
	free(text);
	return ret;
}

static bool is_manifest_name(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);

	if (strcmp(name, "manifest.json") == 0)
		return true;
	/* revisions/<N>.json */
	return dl >= 10 && strcmp(dir + dl - 10, "/revisions") == 0 && nl > 5 &&
	       strcmp(name + nl - 5, ".json") == 0;
}

static int walk_state(struct verify *vf, const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int ret = 0;

	if (!d)
		return 0;
	while (ret == 0 && (de = readdir(d)) != NULL) {
		char *p;
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		if (asprintf(&p, "%s/%s", dir, de->d_name) < 0) {
			ret = -ENOMEM;
			break;
		}
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && depth < MAX_DEPTH)
			ret = walk_state(vf, p, depth + 1);
		else if (S_ISREG(st.st_mode) && is_manifest_name(dir, de->d_name))
			ret = load_manifest(vf, p);
		free(p);
	}
	closedir(d);
	return ret;
}

static int by_hash(const void *a, const void *b)
{
	return strcmp(((const struct known *)a)->hash,
		      ((const struct known *)b)->hash);
}

static const struct known *find_known(const struct verify *vf,
				      const char *hash)
{
	struct known key;

	snprintf(key.hash, sizeof(key.hash), "%s", hash);
	if (!vf->n)
		return NULL;
	return bsearch(&key, vf->v, vf->n, sizeof(*vf->v), by_hash);
}

/* ---- tier files ---- */

static bool tar_hash_name(const char *name, char *hash)
{
	size_t len = strlen(name);

	if (len < 5 || len - 4 > 64 || strcmp(name + len - 4, ".tar") != 0)
		return false;
	memcpy(hash, name, len - 4);
	hash[len - 4] = '\0';
	return dv_valid_hash(hash);
}

/*
 * Removes @hash from @t under its lock if it is still the file (@dev,
 * @ino) that was checked. 0 or -errno.
 */
static int remove_checked(struct dv_tier *t, const char *dir, const char *hash,
			  dev_t dev, ino_t ino)
{
	char path[4096];
	struct stat st;
	int lock_fd = t->ops->lock ? t->ops->lock(t, hash) : -ENOTSUP;
	int ret;

	snprintf(path, sizeof(path), "%s/%s.tar", dir, hash);
	if (stat(path, &st))
		ret = -errno;
	else if (st.st_dev != dev || st.st_ino != ino)
		ret = -EAGAIN; /* replaced meanwhile: not ours to remove */
	else
		ret = t->ops->remove(t, hash);
	if (lock_fd >= 0)
		t->ops->unlock(t, hash, lock_fd);
	return ret;
}

static void finding(struct verify *vf, const char *what, const char *name,
		    const char *detail, int fixed)
{
	printf("  %-10s %s%s%s", what, name, detail ? ": " : "", detail ? detail : "");
	if (vf->fix)
		printf(" -> %s", fixed == 0 ? "removed" :
				 fixed == -EAGAIN ? "replaced meanwhile, kept" :
						    strerror(-fixed));
	printf("\n");
	if (vf->fix && fixed == 0)
		vf->removed++;
	else if (vf->fix)
		vf->fix_failed++;
}

static void check_object(struct verify *vf, struct dv_tier *t, const char *dir,
			 int dfd, const char *name, const char *hash)
{
	const struct known *k = find_known(vf, hash);
	char detail[600];
	uint8_t digest[32];
	struct stat st;
	int fd, ret;

	vf->objects++;
	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return; /* evicted meanwhile */
	}
	if (!k) {
		vf->unknown++;
		printf("  %-10s %s: in no cached manifest, left alone\n", "unknown", name);
		close(fd);
		return;
	}
	if ((uint64_t)st.st_size != k->size) {
		snprintf(detail, sizeof(detail), "%s: %" PRIu64 " bytes, the manifest says %" PRIu64,
			 k->label, (uint64_t)st.st_size, k->size);
		close(fd);
		if ((uint64_t)st.st_size < k->size)
			vf->truncated++;
		else
			vf->corrupt++;
		finding(vf, (uint64_t)st.st_size < k->size ? "truncated" : "oversized",
			name, detail, vf->fix ? remove_checked(t, dir, hash, st.st_dev, st.st_ino) : 0);
		return;
	}
	ret = dv_sha256_fd(fd, digest);
	close(fd);
	if (ret == 0 && memcmp(digest, k->sha256, 32) == 0) {
		vf->ok++;
		return;
	}
	vf->corrupt++;
	snprintf(detail, sizeof(detail), "%s: %s", k->label,
		 ret ? strerror(-ret) : "sha256 does not match the manifest");
	finding(vf, "corrupt", name, detail,
		vf->fix ? remove_checked(t, dir, hash, st.st_dev, st.st_ino) : 0);
}

/* .staging/ and .locks/: entries no live process holds an flock on. */
static void check_leftovers(struct verify *vf, const char *dir, const char *sub,
			    const char *what)
{
	char path[4096], name[4096];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		int fd, fixed = 0;

		if (de->d_name[0] == '.')
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) || time(NULL) - st.st_mtime < STALE_AGE_S ||
		    flock(fd, LOCK_EX | LOCK_NB)) {
			close(fd); /* in use: a fill or a lock of a live process */
			continue;
		}
		if (vf->fix && unlinkat(dirfd(d), de->d_name, 0))
			fixed = -errno;
		close(fd);
		vf->stale++;
		snprintf(name, sizeof(name), "%s/%s", sub, de->d_name);
		finding(vf, "stale", name, what, fixed);
	}
	closedir(d);
}

static void verify_tier(struct verify *vf, const struct dv_tier_config *tc,
			const struct dv_config *cfg)
{
	const char *dir = tc->path ? tc->path : DV_DEFAULT_RAM_PATH;
	struct dv_tier *t = NULL;
	struct dirent *de;
	char err[512];
	DIR *d;

	if (!dv_tier_type_is_folder(tc->type)) {
		printf("tier '%s' (%s): not scrubbed (verify checks folder and ram tiers)\n",
		       tc->name, dv_tier_type_name(tc->type));
		return;
	}
	d = opendir(dir);
	if (!d) {
		printf("tier '%s' (%s): %s\n", tc->name, dir,
		       errno == ENOENT ? "does not exist yet, nothing to check" : strerror(errno));
		return;
	}
	if (dv_tier_new(tc, cfg, &t, err, sizeof(err))) {
		fprintf(stderr, "verify: %s\n", err);
		closedir(d);
		return;
	}
	printf("tier '%s' (%s):\n", tc->name, dir);
	while ((de = readdir(d)) != NULL) {
		char hash[65];

		if (tar_hash_name(de->d_name, hash))
			check_object(vf, t, dir, dirfd(d), de->d_name, hash);
	}
	closedir(d);
	check_leftovers(vf, dir, ".staging", "staging file of no live process");
	check_leftovers(vf, dir, ".locks", "lock of no live process");
	dv_tier_free(t);
}

int dv_ctl_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "fix", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *state = NULL;
	struct verify vf = { 0 };
	struct dv_config *cfg;
	char base[4096];
	uint64_t findings;
	int c, ret;

	while ((c = getopt_long(argc, argv, "c:s:fh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 's':
			state = optarg;
			break;
		case 'f':
			vf.fix = true;
			break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: datavoctl verify [-c CONFIG] [--state-dir DIR] [--fix]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: datavoctl verify [-c CONFIG] [--state-dir DIR] [--fix]\n");
		return 2;
	}
	if (dv_ctl_load_config("verify", config, &cfg))
		return 1;
	if (!state)
		state = cfg->state_dir ? cfg->state_dir :
			dv_ctl_default_state_base(base, sizeof(base));
	ret = walk_state(&vf, state, 0);
	if (ret) {
		fprintf(stderr, "datavoctl verify: %s\n", strerror(-ret));
		goto out;
	}
	if (vf.n)
		qsort(vf.v, vf.n, sizeof(*vf.v), by_hash);
	printf("verify: %zu shards known from %zu cached manifests in %s\n", vf.n,
	       vf.manifests, state);
	if (vf.manifests == 0)
		printf("verify: no cached manifest: files can only be reported as unknown "
		       "(is the state directory right? see --state-dir)\n");
	for (size_t i = 0; i < cfg->ntiers; i++)
		verify_tier(&vf, &cfg->tiers[i], cfg);
	findings = vf.corrupt + vf.truncated + vf.stale;
	printf("verify: %" PRIu64 " objects checked: %" PRIu64 " ok, %" PRIu64
	       " corrupt, %" PRIu64 " truncated, %" PRIu64 " stale, %" PRIu64 " unknown",
	       vf.objects, vf.ok, vf.corrupt, vf.truncated, vf.stale, vf.unknown);
	if (vf.fix)
		printf("; %" PRIu64 " removed%s\n", vf.removed,
		       vf.fix_failed ? ", some could not be" : "");
	else
		printf("%s\n", findings ? "; run with --fix to remove them" : "");
	ret = findings ? 1 : 0;
out:
	for (size_t i = 0; i < vf.n; i++)
		free(vf.v[i].label);
	free(vf.v);
	dv_config_free(cfg);
	return ret ? 1 : 0;
}
