/*
 * datavoctl preload [--node I --nodes N] [-j JOBS] PATH...
 *
 * Warms the cache by reading shards through the mount: each open fills
 * every tier (R2), each read also warms the page cache. PATH is a dataset
 * directory (walked recursively) or a shard file of a datavofs mount.
 *
 * Sharded preload: node I of N takes the shards whose
 * manifest index ≡ I (mod N), so N nodes with separate tiers together hold
 * the dataset once. The index is the mount's user.datavo.index xattr, so
 * the split does not depend on names or listing order.
 *
 * Output: a progress bar (bytes, rate, ETA) on a terminal, one line per
 * shard otherwise; a summary; exit 1 if any shard failed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "config/util.h"
#include "ctl.h"

#define XATTR_INDEX "user.datavo.index"
#define MAX_JOBS 256
#define MAX_DEPTH 32
#define READ_CHUNK (1u << 20)

struct shard {
	char *path;
	uint64_t index;
	uint64_t size;
};

struct list {
	struct shard *v;
	size_t n, cap;
};

struct run {
	struct shard *picked;    /* the selected shards */
	size_t n;
	size_t next;             /* protected by lock */
	pthread_mutex_t lock;
	struct dv_progress prog; /* protected by lock */
};

static void usage(FILE *out)
{
	fprintf(out, "usage: datavoctl preload [--node I --nodes N] [-j JOBS] PATH...\n"
		     "PATH: a dataset directory or a shard file in a datavofs mount.\n");
}

static int add_shard(struct list *l, const char *path, uint64_t size)
{
	char val[32];
	ssize_t n = getxattr(path, XATTR_INDEX, val, sizeof(val) - 1);
	uint64_t index = 0;
	struct shard *v;

	if (n >= 0)
		val[n] = '\0';
	if (n < 0 || dv_parse_uint(val, UINT64_MAX, &index)) {
		fprintf(stderr, "datavoctl preload: %s: not a shard of a datavofs mount (no %s)\n",
			path, XATTR_INDEX);
		return -EINVAL;
	}
	v = dv_grow(l->v, l->n, &l->cap, sizeof(*v), 64);
	if (!v)
		return -ENOMEM;
	l->v = v;
	l->v[l->n].path = strdup(path);
	if (!l->v[l->n].path)
		return -ENOMEM;
	l->v[l->n].index = index;
	l->v[l->n].size = size;
	l->n++;
	return 0;
}

static int collect(struct list *l, const char *path, int depth)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int ret = 0;

	if (stat(path, &st)) {
		fprintf(stderr, "datavoctl preload: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (S_ISREG(st.st_mode))
		return add_shard(l, path, (uint64_t)st.st_size);
	if (!S_ISDIR(st.st_mode) || depth > MAX_DEPTH)
		return 0;
	d = opendir(path);
	if (!d) {
		fprintf(stderr, "datavoctl preload: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	while (ret == 0 && (de = readdir(d)) != NULL) {
		char *sub;

		if (de->d_name[0] == '.') /* ., .. and .datavo */
			continue;
		if (asprintf(&sub, "%s/%s", path, de->d_name) < 0) {
			ret = -ENOMEM;
			break;
		}
		ret = collect(l, sub, depth + 1);
		free(sub);
	}
	closedir(d);
	return ret;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct shard *)a)->path,
		      ((const struct shard *)b)->path);
}

/* Reads the whole file; 0 or -errno. */
static int read_shard(const struct shard *s, char *buf, uint64_t *done)
{
	int fd = open(s->path, O_RDONLY | O_CLOEXEC);
	int ret = 0;

	*done = 0;
	if (fd < 0)
		return -errno;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (;;) {
		ssize_t n = read(fd, buf, READ_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			ret = -errno;
		if (n <= 0)
			break;
		*done += (uint64_t)n;
	}
	close(fd);
	if (ret == 0 && *done != s->size)
		ret = -EIO; /* shorter or longer than stat said */
	return ret;
}

static void report(struct run *r, const struct shard *s, int ret)
{
	char sz[32];

	if (r->prog.tty && ret == 0)
		return;
	if (r->prog.tty)
		fprintf(stderr, "\r\033[K");
	if (ret)
		fprintf(stderr, "preload: FAILED %s: %s\n", s->path, strerror(-ret));
	else
		printf("preload: %llu/%zu %s %s\n",
		       (unsigned long long)r->prog.done_items, r->n, s->path,
		       dv_format_bytes(s->size, sz, sizeof(sz)));
	fflush(stdout);
}

static void *worker(void *arg)
{
	struct run *r = arg;
	char *buf = malloc(READ_CHUNK);

	for (;;) {
		struct shard *s;
		uint64_t done = 0;
		int ret;

		pthread_mutex_lock(&r->lock);
		s = r->next < r->n ? &r->picked[r->next++] : NULL;
		pthread_mutex_unlock(&r->lock);
		if (!s)
			break;
		ret = buf ? read_shard(s, buf, &done) : -ENOMEM;
		pthread_mutex_lock(&r->lock);
		r->prog.done_items++;
		r->prog.done_bytes += ret ? 0 : done;
		if (ret)
			r->prog.failed_items++;
		report(r, s, ret);
		pthread_mutex_unlock(&r->lock);
	}
	free(buf);
	return NULL;
}

static void run_workers(struct run *r, unsigned jobs)
{
	pthread_t th[MAX_JOBS];
	unsigned started = 0;
	bool done = false;

	for (unsigned i = 0; i < jobs && i < r->n; i++) {
		if (pthread_create(&th[started], NULL, worker, r) == 0)
			started++;
	}
	if (started == 0)
		worker(r);
	while (!done) {
		pthread_mutex_lock(&r->lock);
		done = r->prog.done_items == r->n;
		dv_progress_draw(&r->prog, false);
		pthread_mutex_unlock(&r->lock);
		if (!done)
			usleep(100000);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	dv_progress_end(&r->prog);
}

struct opts {
	uint64_t node, nodes;
	bool have_node, have_nodes;
	uint64_t jobs;
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lopts[] = {
		{ "node", required_argument, NULL, 'i' },
		{ "nodes", required_argument, NULL, 'n' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .nodes = 1, .jobs = 4 };
	while ((c = getopt_long(argc, argv, "j:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			o->have_node = dv_parse_uint(optarg, UINT32_MAX, &o->node) == 0;
			if (!o->have_node)
				goto bad;
			break;
		case 'n':
			o->have_nodes = dv_parse_uint(optarg, UINT32_MAX, &o->nodes) == 0 &&
					o->nodes > 0;
			if (!o->have_nodes)
				goto bad;
			break;
		case 'j':
			if (dv_parse_uint(optarg, MAX_JOBS, &o->jobs) || o->jobs == 0)
				goto bad;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			goto bad;
		}
	}
	if (o->have_node != o->have_nodes || o->node >= o->nodes) {
		fprintf(stderr, "datavoctl preload: give --node I and --nodes N together, with 0 <= I < N\n");
		return -1;
	}
	if (optind == argc) {
		fprintf(stderr, "datavoctl preload: no PATH\n");
		goto bad;
	}
	return 0;
bad:
	usage(stderr);
	return -1;
}

int dv_ctl_preload(int argc, char **argv)
{
	struct run r = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct list all = { 0 };
	char sz[32], rate[32];
	uint64_t bytes = 0;
	struct opts o;
	double took;
	int ret;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret > 0 ? 0 : 2;
	for (int i = optind; i < argc && ret == 0; i++)
		ret = collect(&all, argv[i], 0);
	if (ret)
		goto out;
	if (all.n > 1)
		qsort(all.v, all.n, sizeof(*all.v), by_path);
	r.picked = calloc(all.n ? all.n : 1, sizeof(*r.picked));
	if (!r.picked) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < all.n; i++) {
		if (i > 0 && strcmp(all.v[i].path, all.v[i - 1].path) == 0)
			continue; /* named twice */
		if (all.v[i].index % o.nodes != o.node)
			continue;
		r.picked[r.n++] = all.v[i];
		bytes += all.v[i].size;
	}
	printf("preload: node %" PRIu64 " of %" PRIu64 ": %zu of %zu shards, %s, %" PRIu64 " jobs\n",
	       o.node, o.nodes, r.n, all.n, dv_format_bytes(bytes, sz, sizeof(sz)), o.jobs);
	fflush(stdout);
	dv_progress_init(&r.prog, stderr, r.n, bytes);
	run_workers(&r, (unsigned)o.jobs);
	took = dv_ctl_now() - r.prog.start;
	printf("preload: %" PRIu64 " shards, %s in %.1f s (%s/s), %" PRIu64 " failed\n",
	       r.prog.done_items - r.prog.failed_items,
	       dv_format_bytes(r.prog.done_bytes, sz, sizeof(sz)), took,
	       dv_format_bytes(took > 0 ? (uint64_t)((double)r.prog.done_bytes / took) : 0,
			       rate, sizeof(rate)),
	       r.prog.failed_items);
	ret = r.prog.failed_items ? -EIO : 0;
out:
	for (size_t i = 0; i < all.n; i++)
		free(all.v[i].path);
	free(all.v);
	free(r.picked);
	if (ret == -ENOMEM)
		fprintf(stderr, "datavoctl preload: out of memory\n");
	return ret ? 1 : 0;
}
