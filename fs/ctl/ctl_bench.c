/*
 * datavoctl bench [-c CONFIG] [--tier NAME] [--size-mb N] [--iterations K]
 *                 [-j JOBS]
 *
 * Read throughput of each local tier, with SHA-256 parity of what was read.
 * For each tier: a test object of N MiB of pseudo-random
 * bytes is written once (its SHA-256 per 4 MiB chunk noted), then read K
 * times by JOBS threads, each pass after dropping the object from the page
 * cache (posix_fadvise DONTNEED), every chunk's SHA-256 checked.
 *
 * Folder and ram tiers get the object as a staging file in their .staging/
 * (flocked like any fill, never installed, so nothing is evicted and a
 * crash leaves only what the next mount cleans, B4). Other local tiers
 * (stripe) get it installed under a random hash through the tier's own
 * install, read through the tier, and removed. Remote tiers are skipped:
 * their throughput is the network's, measured by a cold read of a mount.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "config/util.h"
#include "tiers/core/digest.h"
#include "tiers/core/tier.h"
#include "ctl.h"

#define BENCH_USAGE                                                          \
	"usage: datavoctl bench [-c CONFIG] [--tier NAME] [--size-mb N] "    \
	"[--iterations K] [-j JOBS]\n"

#define CHUNK (4u << 20)
#define MAX_JOBS 256

struct bench_obj {
	struct dv_tier *t;
	struct dv_object obj;    /* fd >= 0 for files, else tier->read */
	uint64_t size;
	size_t nchunks;
	uint8_t (*digest)[32];   /* per chunk */
};

struct pass {
	struct bench_obj *b;
	size_t next;             /* atomic: next chunk */
	uint64_t bad;            /* atomic: chunks whose digest differs */
	uint64_t errors;         /* atomic: read errors */
};

static int sha256(const void *buf, size_t len, uint8_t out[32])
{
	unsigned int n = 32;

	return EVP_Digest(buf, len, out, &n, EVP_sha256(), NULL) == 1 ? 0 : -EIO;
}

static void fill_random(uint64_t *state, uint8_t *buf, size_t len)
{
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint64_t x = *state;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		*state = x;
		memcpy(buf + i, &x, 8);
	}
}

static ssize_t read_at(struct bench_obj *b, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = b->obj.fd >= 0 ?
				    pread(b->obj.fd, (char *)buf + got, len - got,
					  (off_t)(off + got)) :
				    dv_tier_read(b->t, &b->obj, (char *)buf + got,
						 len - got, off + got);

		if (n < 0 && b->obj.fd >= 0 && errno == EINTR)
			continue;
		if (n < 0)
			return b->obj.fd >= 0 ? -errno : n;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

static void *pass_worker(void *arg)
{
	struct pass *p = arg;
	struct bench_obj *b = p->b;
	uint8_t *buf = NULL, digest[32];

	if (posix_memalign((void **)&buf, 4096, CHUNK)) {
		__atomic_fetch_add(&p->errors, 1, __ATOMIC_RELAXED);
		return NULL;
	}
	for (;;) {
		size_t i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
		uint64_t off = (uint64_t)i * CHUNK;
		size_t len;
		ssize_t n;

		if (i >= b->nchunks)
			break;
		len = b->size - off < CHUNK ? (size_t)(b->size - off) : CHUNK;
		n = read_at(b, buf, len, off);
		if (n != (ssize_t)len) {
			__atomic_fetch_add(&p->errors, 1, __ATOMIC_RELAXED);
			continue;
		}
		if (sha256(buf, len, digest) || memcmp(digest, b->digest[i], 32))
			__atomic_fetch_add(&p->bad, 1, __ATOMIC_RELAXED);
	}
	free(buf);
	return NULL;
}

/* One timed pass; returns bytes per second, or -1 when parity failed. */
static double run_pass(struct bench_obj *b, unsigned jobs, int num)
{
	pthread_t th[MAX_JOBS];
	struct pass p = { .b = b };
	unsigned started = 0;
	char rate[32];
	double t0, took;

	if (b->obj.fd >= 0)
		posix_fadvise(b->obj.fd, 0, 0, POSIX_FADV_DONTNEED);
	t0 = dv_ctl_now();
	for (unsigned i = 0; i < jobs; i++) {
		if (pthread_create(&th[started], NULL, pass_worker, &p) == 0)
			started++;
	}
	if (started == 0)
		pass_worker(&p);
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	took = dv_ctl_now() - t0;
	printf("  pass %d: %s/s (%.3f s), sha256 parity %s (%zu chunks",
	       num, dv_format_bytes(took > 0 ? (uint64_t)((double)b->size / took) : 0,
				    rate, sizeof(rate)),
	       took, p.bad || p.errors ? "FAILED" : "ok", b->nchunks);
	if (p.bad || p.errors)
		printf(", %" PRIu64 " differ, %" PRIu64 " unreadable", p.bad, p.errors);
	printf(")\n");
	if (p.bad || p.errors)
		return -1;
	return took > 0 ? (double)b->size / took : 0;
}

/* Writes the test object into @fd; fills b->digest. Returns write B/s. */
static int write_object(struct bench_obj *b, int fd, double *rate)
{
	uint64_t state = 0x9e3779b97f4a7c15ULL;
	uint8_t *buf = malloc(CHUNK);
	double t0 = dv_ctl_now();
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (getrandom(&state, sizeof(state), 0) != sizeof(state) || state == 0)
		state = 0x9e3779b97f4a7c15ULL; /* any non-zero seed works */
	for (size_t i = 0; i < b->nchunks && ret == 0; i++) {
		uint64_t off = (uint64_t)i * CHUNK;
		size_t len = b->size - off < CHUNK ? (size_t)(b->size - off) : CHUNK;

		fill_random(&state, buf, len);
		ret = sha256(buf, len, b->digest[i]);
		if (ret == 0 && pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
			ret = -errno ? -errno : -EIO;
	}
	if (ret == 0 && fdatasync(fd))
		ret = -errno;
	*rate = (double)b->size / (dv_ctl_now() - t0);
	free(buf);
	return ret;
}

static int bench_passes(struct bench_obj *b, unsigned jobs, unsigned iters)
{
	char rate[32];
	double best = 0;
	int ret = 0;

	for (unsigned k = 0; k < iters; k++) {
		double r = run_pass(b, jobs, (int)k + 1);

		if (r < 0)
			ret = -EBADMSG;
		else if (r > best)
			best = r;
	}
	printf("  best: %s/s\n", dv_format_bytes((uint64_t)best, rate, sizeof(rate)));
	return ret;
}

/* A folder tier: the object is a staging file. */
static int bench_folder(struct bench_obj *b, unsigned jobs, unsigned iters)
{
	struct dv_staged st = { .fd = -1 };
	char rate[32];
	double wr;
	int ret;

	ret = dv_tier_stage_open(b->t, "0000000000000000000000000000bench", &st);
	if (ret)
		return ret;
	ret = write_object(b, st.fd, &wr);
	if (ret == 0) {
		printf("  write: %s/s into %s\n",
		       dv_format_bytes((uint64_t)wr, rate, sizeof(rate)), st.path);
		b->obj.fd = st.fd;
		ret = bench_passes(b, jobs, iters);
	}
	dv_tier_stage_discard(b->t, &st);
	return ret;
}

/* Another local tier: installed from a temporary file, read, removed. */
static int bench_installed(struct bench_obj *b, unsigned jobs, unsigned iters)
{
	char tmpl[] = "/tmp/datavoctl-bench.XXXXXX", hash[33], rate[32];
	uint8_t rnd[16];
	double wr;
	int fd, ret;

	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return -EIO;
	dv_hex_encode(rnd, sizeof(rnd), hash);
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	unlink(tmpl);
	ret = write_object(b, fd, &wr);
	if (ret == 0)
		ret = dv_tier_install(b->t, hash, fd, NULL, b->size, 0);
	close(fd);
	if (ret)
		return ret;
	memset(&b->obj, 0, sizeof(b->obj));
	b->obj.fd = -1;
	snprintf(b->obj.hash, sizeof(b->obj.hash), "%s", hash);
	ret = dv_tier_open_object(b->t, hash, b->size, &b->obj);
	if (ret == 0) {
		printf("  install: %s/s\n", dv_format_bytes((uint64_t)wr, rate, sizeof(rate)));
		b->obj.tier = b->t;
		ret = bench_passes(b, jobs, iters);
		dv_tier_close_object(b->t, &b->obj);
	}
	dv_tier_remove(b->t, hash);
	return ret;
}

static int bench_tier(const struct dv_tier_config *tc, const struct dv_config *cfg,
		      uint64_t size, unsigned jobs, unsigned iters)
{
	struct bench_obj b = { .size = size };
	struct dv_tier_desc d = { 0 };
	char err[512];
	int ret;

	ret = dv_tier_new(tc, cfg, &b.t, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "datavoctl bench: %s\n", err);
		return ret;
	}
	if (dv_tier_has(b.t, DV_TIER_REMOTE)) {
		printf("tier '%s' (%s): skipped, a remote tier\n", tc->name,
		       dv_tier_type_name(tc->type));
		dv_tier_free(b.t);
		return 0;
	}
	dv_tier_describe(b.t, &d);
	printf("tier '%s' (%s, %s):\n", tc->name, dv_tier_type_name(tc->type),
	       d.where);
	ret = dv_tier_open(b.t);
	b.nchunks = (size_t)((size + CHUNK - 1) / CHUNK);
	b.digest = calloc(b.nchunks, sizeof(*b.digest));
	b.obj.fd = -1;
	if (ret == 0 && !b.digest)
		ret = -ENOMEM;
	if (ret == 0 && dv_tier_is_folder(b.t))
		ret = bench_folder(&b, jobs, iters);
	else if (ret == 0)
		ret = bench_installed(&b, jobs, iters);
	if (ret == -ENOTSUP) {
		printf("  skipped: the tier cannot hold a test object\n");
		ret = 0;
	}
	if (ret && ret != -EBADMSG)
		fprintf(stderr, "datavoctl bench: tier '%s': %s\n", tc->name, strerror(-ret));
	free(b.digest);
	dv_tier_free(b.t);
	return ret;
}

int dv_ctl_bench(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "tier", required_argument, NULL, 't' },
		{ "size-mb", required_argument, NULL, 's' },
		{ "iterations", required_argument, NULL, 'i' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *only = NULL;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	/* min(64, max(16, cores * 4)) workers */
	uint64_t size_mb = 256, iters = 3,
		 jobs = cores * 4 > 64 ? 64 : cores * 4 < 16 ? 16 : (uint64_t)cores * 4;
	struct dv_config *cfg;
	int c, failed = 0, matched = 0;

	while ((c = getopt_long(argc, argv, "c:t:s:i:j:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 't':
			only = optarg;
			break;
		case 's':
			if (dv_parse_uint(optarg, 1 << 20, &size_mb) || size_mb == 0)
				goto usage;
			break;
		case 'i':
			if (dv_parse_uint(optarg, 1000, &iters) || iters == 0)
				goto usage;
			break;
		case 'j':
			if (dv_parse_uint(optarg, MAX_JOBS, &jobs) || jobs == 0)
				goto usage;
			break;
		case 'h':
			return dv_ctl_usage(BENCH_USAGE, true);
		default:
			goto usage;
		}
	}
	if (optind != argc)
		goto usage;
	if (dv_ctl_load_config("bench", config, &cfg))
		return 1;
	printf("bench: %" PRIu64 " MiB per tier, %" PRIu64 " passes, %" PRIu64
	       " jobs, 4 MiB chunks, page cache dropped before each pass\n",
	       size_mb, iters, jobs);
	for (size_t i = 0; i < cfg->ntiers; i++) {
		if (only && strcmp(only, cfg->tiers[i].name))
			continue;
		matched++;
		if (bench_tier(&cfg->tiers[i], cfg, size_mb << 20, (unsigned)jobs,
			       (unsigned)iters))
			failed++;
	}
	if (only && !matched)
		fprintf(stderr, "datavoctl bench: no tier named '%s'\n", only);
	dv_config_free(cfg);
	return failed || (only && !matched) ? 1 : 0;
usage:
	return dv_ctl_usage(BENCH_USAGE, false);
}
