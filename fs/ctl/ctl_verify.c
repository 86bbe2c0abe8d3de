/*
 * datavoctl verify [-c CONFIG] [--state-dir DIR] [--fix]
 *
 * Scrubs the tiers of the config that can list their objects from outside
 * the daemon: folder and ram tiers (B3). What is known about a shard comes
 * from the manifests the daemons cached on disk: every cached manifest of
 * every origin under the state directory, so one run covers every mount
 * that shares the tiers, mounted or not.
 *
 * Findings: an object whose size differs from the manifest's (truncated or
 * oversized) or whose sha256 does not match (corrupt); a staging file or
 * lock nobody holds (stale, B4). --fix removes them: an object under its
 * per-hash lock (R7), after checking again that it is still bad, so a
 * racing daemon's fresh install is never removed. An object no cached
 * manifest names is reported as unknown and left alone: it may belong to an
 * origin whose manifests are cached elsewhere.
 *
 * Exit status: 0 nothing found, 1 findings (removed or not), 2 usage.
 *
 * It speaks to the tiers only through their interface (tier.h): scan for
 * what a tier holds, check for its bytes, sweep for leftovers; and to the
 * manifest cache only through the namespace (dv_ns_cached_manifests).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config/util.h"
#include "tiers/core/tier.h"
#include "ctl.h"
#include "fs/namespace/manifest.h"
#include "fs/namespace/namespace.h"

#define VERIFY_USAGE "usage: datavoctl verify [-c CONFIG] [--state-dir DIR] [--fix]\n"

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
	struct known *k = dv_grow(vf->v, vf->n, &vf->cap, sizeof(*k), 256);

	if (!k)
		return -ENOMEM;
	vf->v = k;
	k = &vf->v[vf->n];
	memcpy(k->hash, s->hash, sizeof(k->hash));
	k->size = s->size;
	memcpy(k->sha256, s->sha256, 32);
	if (asprintf(&k->label, "%s/%s", m->dataset, dv_manifest_name(m, s)) < 0)
		return -ENOMEM;
	vf->n++;
	return 0;
}

static int load_manifest(void *arg, const char *path,
			 const struct dv_manifest *m, const char *why)
{
	struct verify *vf = arg;
	int ret = 0;

	if (!m) {
		fprintf(stderr, "verify: ignoring %s: %s\n", path, why);
		return 0;
	}
	vf->manifests++;
	for (size_t i = 0; i < m->nshards && ret == 0; i++)
		ret = add_known(vf, m, &m->shards[i]);
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

/* ---- tier objects ---- */

/*
 * Removes @hash from @t under its lock, if it is still bad: a daemon may
 * have replaced it with a good copy since it was checked, and that one
 * stays. 0, -EAGAIN (replaced meanwhile) or -errno.
 */
static int remove_checked(struct dv_tier *t, const struct known *k,
			  bool size_bad)
{
	int lock_fd = dv_tier_lock(t, k->hash);
	int ret = size_bad ? dv_tier_lookup(t, k->hash, k->size) :
			     dv_tier_check(t, k->hash, k->size, k->sha256);

	if (ret == -EBADMSG)
		ret = dv_tier_remove(t, k->hash);
	else if (ret == 0)
		ret = -EAGAIN;
	if (lock_fd >= 0)
		dv_tier_unlock(t, k->hash, lock_fd);
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

struct tier_pass {
	struct verify *vf;
	struct dv_tier *t;
	const char *where;
	bool header;             /* "tier 'x' (where):" printed */
};

static void tier_header(struct tier_pass *tp, const char *why)
{
	if (tp->header)
		return;
	tp->header = true;
	printf("tier '%s' (%s):%s%s\n", tp->t->name, tp->where, why ? " " : "",
	       why ? why : "");
}

static int check_object(void *arg, const struct dv_tier_entry *e)
{
	struct tier_pass *tp = arg;
	struct verify *vf = tp->vf;
	const struct known *k = find_known(vf, e->hash);
	char detail[600], name[80];
	int ret;

	tier_header(tp, NULL);
	vf->objects++;
	snprintf(name, sizeof(name), "%s.tar", e->hash);
	if (!k) {
		vf->unknown++;
		printf("  %-10s %s: in no cached manifest, left alone\n", "unknown", name);
		return 0;
	}
	if (e->size != k->size) {
		snprintf(detail, sizeof(detail), "%s: %" PRIu64 " bytes, the manifest says %" PRIu64,
			 k->label, e->size, k->size);
		if (e->size < k->size)
			vf->truncated++;
		else
			vf->corrupt++;
		finding(vf, e->size < k->size ? "truncated" : "oversized", name, detail,
			vf->fix ? remove_checked(tp->t, k, true) : 0);
		return 0;
	}
	ret = dv_tier_check(tp->t, e->hash, k->size, k->sha256);
	if (ret == 0) {
		vf->ok++;
		return 0;
	}
	if (ret == -ENOENT) {
		vf->objects--; /* evicted meanwhile */
		return 0;
	}
	vf->corrupt++;
	snprintf(detail, sizeof(detail), "%s: %s", k->label,
		 ret == -EBADMSG ? "sha256 does not match the manifest" : strerror(-ret));
	finding(vf, "corrupt", name, detail,
		vf->fix ? remove_checked(tp->t, k, false) : 0);
	return 0;
}

static void leftover(void *arg, const char *name, const char *what, int removed)
{
	struct verify *vf = arg;

	vf->stale++;
	finding(vf, "stale", name, what, removed);
}

static void verify_tier(struct verify *vf, const struct dv_tier_config *tc,
			const struct dv_config *cfg)
{
	struct tier_pass tp = { .vf = vf };
	struct dv_tier_desc d = { 0 };
	char err[512];
	int ret;

	if (dv_tier_new(tc, cfg, &tp.t, err, sizeof(err))) {
		fprintf(stderr, "verify: %s\n", err);
		return;
	}
	dv_tier_describe(tp.t, &d);
	tp.where = d.where;
	ret = dv_tier_scan(tp.t, check_object, &tp);
	if (ret == -ENOENT) {
		tier_header(&tp, "does not exist yet, nothing to check");
	} else if (ret == -ENOTSUP) {
		snprintf(err, sizeof(err), "not scrubbed (a %s tier cannot list its objects from here)",
			 dv_tier_type_name(tc->type));
		tier_header(&tp, err);
	} else if (ret) {
		tier_header(&tp, strerror(-ret));
	} else {
		tier_header(&tp, NULL);
		dv_tier_sweep(tp.t, vf->fix, leftover, vf);
	}
	dv_tier_free(tp.t);
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
			return dv_ctl_usage(VERIFY_USAGE, c == 'h');
		}
	}
	if (optind != argc)
		return dv_ctl_usage(VERIFY_USAGE, false);
	if (dv_ctl_load_config("verify", config, &cfg))
		return 1;
	if (!state)
		state = dv_config_manifest_base(cfg, base, sizeof(base));
	if (!state) {
		fprintf(stderr, "datavoctl verify: %s\n", DV_CONFIG_NO_STATE_DIR);
		ret = 1;
		goto out;
	}
	ret = dv_ns_cached_manifests(state, load_manifest, &vf);
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
