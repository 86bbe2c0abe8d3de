/*
 * dv-stripe: a test and benchmark tool for the stripe tier, linked with
 * libdatavo.a (no FUSE).
 *
 *   dv-stripe inspect [--format] [--chunk BYTES] auto | DEVICE...
 *       What discovery accepts and refuses, and why (read-only: the same
 *       function `datavoctl inspect` calls).
 *   dv-stripe fill --state DIR [--chunk BYTES] [--size BYTES]
 *                  [--objects N] DEVICE...
 *       Formats DEVICE... as a new stripe pool (format: true; state in
 *       DIR) and installs N objects of SIZE random bytes (default 4 of
 *       256 MiB), listed with their SHA-256 in DIR/bench-objects.
 *   dv-stripe read --state DIR [--chunk BYTES] [--slice BYTES]
 *                  [--threads N] DEVICE...
 *       Opens that pool as a restarted daemon would and reads every object
 *       through the tier's read op (O_DIRECT through io_uring), N readers
 *       at once (default 2, as a data loader's workers), each SLICE bytes
 *       at a time (default one chunk per device, all in flight) into its
 *       one reused buffer, as dd reads a device: a timed pass in which the
 *       tier checks each chunk's xxh3 on its first read, a timed pass in
 *       steady state, then a pass checking every byte read back against
 *       its object's SHA-256. Prints "stripe-read devices=D bytes=B
 *       first_read_gbps=G read_gbps=G sha256=ok".
 *   dv-stripe readfile FILE SHA256HEX
 *       Reads FILE with 1 MiB reads into memory (timed; the memory is
 *       touched first, as dd's reused buffer is, so that the figure is
 *       the file's, not the tool's page faults), then checks its SHA-256. Prints "readfile bytes=B seconds=S gbps=G sha256=ok".
 *
 * Exit status: 0 on success, 1 on a failed check or an error, 2 on usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "stripe/engine.h"
#include "stripe/layout.h"
#include "stripe/stripe.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sha256(const void *buf, size_t len, uint8_t out[32])
{
	EVP_Digest(buf, len, out, NULL, EVP_sha256(), NULL);
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static int parse_size(const char *s, uint64_t *out)
{
	if (dv_parse_size(s, out)) {
		fprintf(stderr, "dv-stripe: '%s' is not a size\n", s);
		return -1;
	}
	return 0;
}

/* ---- inspect ---- */

static int cmd_inspect(int argc, char **argv)
{
	struct dv_tier_config tc = { .name = (char *)"stripe",
				     .chunk_bytes = DV_DEFAULT_CHUNK_BYTES };
	struct dv_stripe_device *d;
	size_t n;
	int opt;
	static const struct option opts[] = {
		{ "format", no_argument, NULL, 'f' },
		{ "chunk", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};

	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 'f')
			tc.format = true;
		else if (opt != 'c' || parse_size(optarg, &tc.chunk_bytes))
			return 2;
	}
	if (optind >= argc)
		return 2;
	if (strcmp(argv[optind], "auto") == 0)
		tc.devices_auto = true;
	else
		tc.devices = argv + optind;
	if (dv_stripe_discover(&tc, &d, &n)) {
		fprintf(stderr, "dv-stripe: discovery failed\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		char size[32];

		dv_format_bytes(d[i].bytes, size, sizeof(size));
		printf("%-24s %10s  %-8s %s\n", d[i].path, size,
		       d[i].accepted ? "accepted" : "refused",
		       d[i].accepted ? d[i].what : d[i].reason);
	}
	free(d);
	return 0;
}

/* ---- fill and read: the benchmark ---- */

/* The objects a bench pool holds: STATE/bench-objects, one per line. */
struct bench {
	struct dv_tier_config tc;
	struct dv_config cfg;
	struct dv_tier *t;
	uint64_t size, slice;
	size_t nobj;
	unsigned threads;      /* readers at once */
	char (*hash)[65];
	uint8_t (*want)[32];
};

static int bench_alloc(struct bench *b)
{
	b->hash = calloc(b->nobj ? b->nobj : 1, sizeof(*b->hash));
	b->want = calloc(b->nobj ? b->nobj : 1, sizeof(*b->want));
	return b->hash && b->want ? 0 : -1;
}

static void bench_free(struct bench *b)
{
	free(b->want);
	free(b->hash);
	dv_tier_free(b->t);
}

static int bench_open(struct bench *b)
{
	char err[512];

	if (dv_stripe_tier_new(&b->tc, &b->cfg, &b->t, err, sizeof(err))) {
		fprintf(stderr, "dv-stripe: %s\n", err);
		return -1;
	}
	if (b->t->ops->open(b->t)) {
		fprintf(stderr, "dv-stripe: cannot open the pool\n");
		return -1;
	}
	return 0;
}

/* Object @i: random bytes in a memfd, its SHA-256 in want[i]. */
static int make_object(struct bench *b, size_t i, int *fd)
{
	uint8_t *buf = malloc(b->size ? b->size : 1);
	int f = memfd_create("dv-stripe-src", MFD_CLOEXEC);
	int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	uint64_t got = 0;

	if (!buf || f < 0 || ufd < 0)
		goto fail;
	while (got < b->size) {
		ssize_t n = read(ufd, buf + got, b->size - got);

		if (n <= 0)
			goto fail;
		got += (uint64_t)n;
	}
	sha256(buf, b->size, b->want[i]);
	hex(b->want[i], 8, b->hash[i]);
	snprintf(b->hash[i] + 16, 49, "%016zx", i + 1);
	if (write(f, buf, b->size) != (ssize_t)b->size)
		goto fail;
	close(ufd);
	free(buf);
	*fd = f;
	return 0;
fail:
	if (f >= 0)
		close(f);
	if (ufd >= 0)
		close(ufd);
	free(buf);
	return -1;
}

static int list_path(const struct bench *b, char *path, size_t len)
{
	int n = snprintf(path, len, "%s/bench-objects", b->cfg.state_dir);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int save_list(const struct bench *b)
{
	char path[4096], want[65];
	FILE *f;

	if (list_path(b, path, sizeof(path)))
		return -1;
	f = fopen(path, "we");
	if (!f)
		return -1;
	for (size_t i = 0; i < b->nobj; i++) {
		hex(b->want[i], 32, want);
		fprintf(f, "%s %s %" PRIu64 "\n", b->hash[i], want, b->size);
	}
	return fclose(f) ? -1 : 0;
}

static int load_list(struct bench *b)
{
	char path[4096], want[65], line[256];
	size_t n = 0;
	FILE *f;

	if (list_path(b, path, sizeof(path)))
		return -1;
	f = fopen(path, "re");
	if (!f) {
		perror(path);
		return -1;
	}
	while (fgets(line, sizeof(line), f))
		n++;
	rewind(f);
	b->nobj = n;
	if (bench_alloc(b)) {
		fclose(f);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (!fgets(line, sizeof(line), f) ||
		    sscanf(line, "%64s %64s %" SCNu64, b->hash[i], want, &b->size) != 3)
			break;
		for (int k = 0; k < 32; k++)
			sscanf(want + 2 * k, "%2hhx", &b->want[i][k]);
	}
	fclose(f);
	return n ? 0 : -1;
}

/*
 * Reads object @i slice by slice into @buf, the one reused buffer, as dd
 * does. With @md, every slice is then hashed and the object's SHA-256 must
 * match; without, the pass is timed (*@secs) and does nothing but read.
 */
static int read_object(struct bench *b, size_t i, uint8_t *buf,
		       EVP_MD_CTX *md, double *secs)
{
	struct dv_object obj = { .fd = -1 };
	uint8_t got[32];
	uint64_t off = 0;
	double t0 = now();
	int ret;

	snprintf(obj.hash, sizeof(obj.hash), "%s", b->hash[i]);
	ret = b->t->ops->open_object(b->t, b->hash[i], b->size, &obj);
	if (ret)
		return ret;
	obj.tier = b->t;
	if (md)
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	while (off < b->size) {
		uint64_t n = b->size - off < b->slice ? b->size - off : b->slice;
		ssize_t len = b->t->ops->read(b->t, &obj, buf, (size_t)n, off);

		if (len <= 0) {
			ret = len < 0 ? (int)len : -EIO;
			break;
		}
		if (md)
			EVP_DigestUpdate(md, buf, (size_t)len);
		off += (uint64_t)len;
	}
	b->t->ops->close_object(b->t, &obj);
	*secs += now() - t0;
	if (md && !ret) {
		EVP_DigestFinal_ex(md, got, NULL);
		if (memcmp(got, b->want[i], 32)) {
			fprintf(stderr, "dv-stripe: object %zu: sha256 mismatch\n", i);
			ret = -EBADMSG;
		}
	}
	return ret;
}

/* A reader thread of a pass: takes objects in turn until none is left. */
struct pass {
	struct bench *b;
	bool check;
	pthread_mutex_t lock;
	size_t next;   /* protected by lock */
	int err;       /* protected by lock */
};

static void *pass_main(void *arg)
{
	struct pass *p = arg;
	size_t len = (size_t)dv_stripe_io_len(p->b->slice);
	uint8_t *buf = dv_stripe_buf_alloc(len); /* the tier's own allocator */
	EVP_MD_CTX *md = p->check ? EVP_MD_CTX_new() : NULL;
	double unused = 0;
	int ret = buf && (md || !p->check) ? 0 : -ENOMEM;

	if (buf)
		memset(buf, 0, len); /* faulted in before the clock runs */
	while (!ret) {
		size_t i;

		pthread_mutex_lock(&p->lock);
		i = p->next++;
		pthread_mutex_unlock(&p->lock);
		if (i >= p->b->nobj)
			break;
		ret = read_object(p->b, i, buf, md, &unused);
	}
	pthread_mutex_lock(&p->lock);
	if (ret && !p->err)
		p->err = ret;
	pthread_mutex_unlock(&p->lock);
	EVP_MD_CTX_free(md);
	free(buf);
	return NULL;
}

/*
 * One pass over every object by @threads readers at once, each with its
 * own reused buffer: timed (@check false: wall clock in *@secs) or checked.
 */
static int bench_pass(struct bench *b, unsigned threads, bool check,
		      double *secs)
{
	struct pass p = { .b = b, .check = check };
	pthread_t tid[64];
	unsigned started = 0;
	double t0 = now();

	pthread_mutex_init(&p.lock, NULL);
	for (unsigned k = 0; k < threads; k++) {
		if (pthread_create(&tid[k], NULL, pass_main, &p) == 0)
			started++;
	}
	for (unsigned k = 0; k < started; k++)
		pthread_join(tid[k], NULL);
	*secs = now() - t0;
	pthread_mutex_destroy(&p.lock);
	if (!started)
		p.err = -EAGAIN;
	if (p.err)
		fprintf(stderr, "dv-stripe: read: %s\n", strerror(-p.err));
	return p.err;
}

/* Options of fill and read; 0, or 2 on a usage error. */
static int bench_args(struct bench *b, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state", required_argument, NULL, 's' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "size", required_argument, NULL, 'z' },
		{ "objects", required_argument, NULL, 'n' },
		{ "slice", required_argument, NULL, 'l' },
		{ "threads", required_argument, NULL, 't' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int opt;

	b->tc = (struct dv_tier_config){ .name = (char *)"bench",
					 .type = DV_TIER_TYPE_STRIPE,
					 .chunk_bytes = DV_DEFAULT_CHUNK_BYTES };
	b->size = 256ULL << 20;
	b->nobj = 4;
	b->threads = 2;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 's')
			b->cfg.state_dir = optarg;
		else if (opt == 'c' && !parse_size(optarg, &v))
			b->tc.chunk_bytes = v;
		else if (opt == 'z' && !parse_size(optarg, &v))
			b->size = v;
		else if (opt == 'n' && !dv_parse_uint(optarg, 4096, &v) && v)
			b->nobj = (size_t)v;
		else if (opt == 'l' && !parse_size(optarg, &v) && v)
			b->slice = v;
		else if (opt == 't' && !dv_parse_uint(optarg, 64, &v) && v)
			b->threads = (unsigned)v;
		else
			return 2;
	}
	if (optind >= argc || !b->cfg.state_dir)
		return 2;
	b->tc.devices = argv + optind;
	if (!b->slice)
		b->slice = b->tc.chunk_bytes * (uint64_t)(argc - optind);
	return 0;
}

/* fill: a new pool (format: true) with N random objects. */
static int cmd_fill(int argc, char **argv)
{
	struct bench b = { 0 };
	int ret = bench_args(&b, argc, argv);

	if (ret)
		return ret;
	b.tc.format = true;
	ret = 1;
	if (bench_alloc(&b) || bench_open(&b))
		goto out;
	for (size_t i = 0; i < b.nobj; i++) {
		int fd, r;

		if (make_object(&b, i, &fd)) {
			fprintf(stderr, "dv-stripe: cannot make object %zu\n", i);
			goto out;
		}
		r = b.t->ops->install(b.t, b.hash[i], fd, NULL, b.size, 0);
		close(fd);
		if (r) {
			fprintf(stderr, "dv-stripe: install %zu: %s\n", i,
				strerror(-r));
			goto out;
		}
	}
	ret = save_list(&b) ? 1 : 0;
	if (!ret)
		printf("stripe-fill devices=%d objects=%zu bytes=%" PRIu64 "\n",
		       argc - optind, b.nobj, b.nobj * b.size);
out:
	bench_free(&b);
	return ret;
}

/*
 * read: a freshly opened tier, as after a restart. A timed pass (each
 * chunk's xxh3 checked on its first read), a timed pass again (steady
 * state: no hashing), then every byte read back checked against its
 * object's SHA-256.
 */
static int cmd_read(int argc, char **argv)
{
	struct bench b = { 0 };
	double first, steady, unused;
	uint64_t total;
	int ret = bench_args(&b, argc, argv);

	if (ret)
		return ret;
	ret = 1;
	if (load_list(&b) || bench_open(&b) ||
	    bench_pass(&b, b.threads, false, &first) ||
	    bench_pass(&b, b.threads, false, &steady) ||
	    bench_pass(&b, b.threads, true, &unused))
		goto out;
	total = b.size * b.nobj;
	printf("stripe-read devices=%d readers=%u bytes=%" PRIu64
	       " first_read_gbps=%.2f read_gbps=%.2f sha256=ok\n",
	       argc - optind, b.threads, total, (double)total / 1e9 / first,
	       (double)total / 1e9 / steady);
	ret = 0;
out:
	bench_free(&b);
	return ret;
}

/* ---- readfile ---- */

static int cmd_readfile(int argc, char **argv)
{
	uint8_t got[32];
	char gothex[65];
	struct stat st;
	uint8_t *buf;
	uint64_t off = 0;
	double t0, secs;
	int fd;

	if (argc != 3)
		return 2;
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return 1;
	memset(buf, 0, (size_t)st.st_size + 1);
	t0 = now();
	for (;;) {
		ssize_t n = read(fd, buf + off, 1 << 20);

		if (n < 0) {
			perror(argv[1]);
			return 1;
		}
		if (n == 0 || off + (uint64_t)n > (uint64_t)st.st_size)
			break;
		off += (uint64_t)n;
	}
	secs = now() - t0;
	close(fd);
	sha256(buf, (size_t)off, got);
	free(buf);
	hex(got, 32, gothex);
	if (strcmp(gothex, argv[2])) {
		fprintf(stderr, "readfile: %s: sha256 %s, expected %s\n", argv[1],
			gothex, argv[2]);
		return 1;
	}
	printf("readfile bytes=%" PRIu64 " seconds=%.3f gbps=%.2f sha256=ok\n",
	       off, secs, (double)off / 1e9 / secs);
	return 0;
}

int main(int argc, char **argv)
{
	int ret = 2;

	dv_log_set_level(DV_LOG_WARNING);
	if (argc >= 2 && strcmp(argv[1], "inspect") == 0)
		ret = cmd_inspect(argc - 1, argv + 1);
	else if (argc >= 2 && strcmp(argv[1], "fill") == 0)
		ret = cmd_fill(argc - 1, argv + 1);
	else if (argc >= 2 && strcmp(argv[1], "read") == 0)
		ret = cmd_read(argc - 1, argv + 1);
	else if (argc >= 2 && strcmp(argv[1], "readfile") == 0)
		ret = cmd_readfile(argc - 1, argv + 1);
	if (ret == 2)
		fprintf(stderr,
			"usage: dv-stripe inspect [--format] [--chunk BYTES] auto|DEVICE...\n"
			"       dv-stripe fill --state DIR [--chunk B] [--size B] [--objects N] DEVICE...\n"
			"       dv-stripe read --state DIR [--chunk B] [--slice B] [--threads N] DEVICE...\n"
			"       dv-stripe readfile FILE SHA256HEX\n");
	return ret;
}
