/*
 * datavoctl status MOUNTPOINT [--json]: MOUNTPOINT/.datavo/status, which
 * the daemon generates on open (status.c), printed for people, or as is
 * with --json. The document is read with libyaml (JSON is YAML's flow
 * style), as every other JSON of the project.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "config/util.h"
#include "ctl.h"

#define STATUS_USAGE "usage: datavoctl status [--json] MOUNTPOINT\n"

#define STATUS_MAX (4u << 20)

struct doc {
	yaml_document_t d;
	yaml_node_t *root;
};

static yaml_node_t *get(struct doc *doc, yaml_node_t *map, const char *key)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return NULL;
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start;
	     p < map->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(&doc->d, p->key);

		if (k && k->type == YAML_SCALAR_NODE &&
		    strcmp((const char *)k->data.scalar.value, key) == 0)
			return yaml_document_get_node(&doc->d, p->value);
	}
	return NULL;
}

static const char *str(struct doc *doc, yaml_node_t *map, const char *key)
{
	yaml_node_t *n = get(doc, map, key);

	if (!n || n->type != YAML_SCALAR_NODE)
		return "-";
	return (const char *)n->data.scalar.value;
}

static uint64_t num(struct doc *doc, yaml_node_t *map, const char *key)
{
	return strtoull(str(doc, map, key), NULL, 10);
}

static const char *bytes(struct doc *doc, yaml_node_t *map, const char *key,
			 char *buf, size_t len)
{
	return dv_format_bytes(num(doc, map, key), buf, len);
}

static void print_tiers(struct doc *doc)
{
	yaml_node_t *tiers = get(doc, doc->root, "tiers");
	char used[32], cap[32], fr[32], served[32];

	printf("\n%-16s %-7s %11s %11s %11s %8s %8s %8s %11s %6s %6s\n", "TIER",
	       "TYPE", "USED", "CAPACITY", "FS FREE", "OBJECTS", "HITS",
	       "MISSES", "SERVED", "EVICT", "ERRORS");
	if (!tiers || tiers->type != YAML_SEQUENCE_NODE)
		return;
	for (yaml_node_item_t *i = tiers->data.sequence.items.start;
	     i < tiers->data.sequence.items.top; i++) {
		yaml_node_t *t = yaml_document_get_node(&doc->d, *i);

		printf("%-16s %-7s %11s %11s %11s %8" PRIu64 " %8" PRIu64
		       " %8" PRIu64 " %11s %6" PRIu64 " %6" PRIu64 "\n",
		       str(doc, t, "name"), str(doc, t, "type"),
		       bytes(doc, t, "used_bytes", used, sizeof(used)),
		       num(doc, t, "capacity_bytes") ?
			       bytes(doc, t, "capacity_bytes", cap, sizeof(cap)) :
			       "unbounded",
		       bytes(doc, t, "free_bytes", fr, sizeof(fr)),
		       num(doc, t, "objects"), num(doc, t, "hits"),
		       num(doc, t, "misses"),
		       bytes(doc, t, "bytes_served", served, sizeof(served)),
		       num(doc, t, "evictions"), num(doc, t, "errors"));
	}
}

/* Streaming fills running now, with their progress. */
static void print_streams(struct doc *doc)
{
	yaml_node_t *list = get(doc, doc->root, "streaming");
	char sz[32];

	printf("chunks:   %" PRIu64 " fetched, %" PRIu64 " reads waited, %" PRIu64
	       " fetches in flight\n", num(doc, doc->root, "chunks_fetched"),
	       num(doc, doc->root, "chunk_waits"),
	       num(doc, doc->root, "chunk_fetches_in_flight"));
	if (!list || list->type != YAML_SEQUENCE_NODE)
		return;
	for (yaml_node_item_t *i = list->data.sequence.items.start;
	     i < list->data.sequence.items.top; i++) {
		yaml_node_t *s = yaml_document_get_node(&doc->d, *i);
		uint64_t n = num(doc, s, "chunks"), d = num(doc, s, "done");

		printf("filling:  %s (%s): %" PRIu64 " of %" PRIu64
		       " chunks (%" PRIu64 "%%), %" PRIu64 " in flight, %" PRIu64
		       " failed, %" PRIu64 " reused\n", str(doc, s, "shard"),
		       bytes(doc, s, "size", sz, sizeof(sz)), d, n,
		       n ? d * 100 / n : 100, num(doc, s, "in_flight"),
		       num(doc, s, "failed"), num(doc, s, "reused"));
	}
}

static void print_errors(struct doc *doc)
{
	yaml_node_t *errs = get(doc, doc->root, "errors");
	const char *sep = "";

	printf("errors:   ");
	if (!errs || errs->type != YAML_MAPPING_NODE) {
		printf("-\n");
		return;
	}
	for (yaml_node_pair_t *p = errs->data.mapping.pairs.start;
	     p < errs->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(&doc->d, p->key);
		yaml_node_t *v = yaml_document_get_node(&doc->d, p->value);

		if (k && v && k->type == YAML_SCALAR_NODE &&
		    v->type == YAML_SCALAR_NODE) {
			printf("%s%s %s", sep, k->data.scalar.value,
			       v->data.scalar.value);
			sep = ", ";
		}
	}
	printf("\n");
}

/* "fuse:     io_uring, requests up to 1 MiB" or "/dev/fuse (why), ...". */
static void print_transport(struct doc *doc)
{
	yaml_node_t *r = doc->root;
	const char *t = str(doc, r, "fuse_transport");
	const char *why = str(doc, r, "fuse_transport_reason");
	char a[32];

	if (!strcmp(t, "-")) /* an older daemon */
		return;
	if (!strcmp(why, "-") || !strcmp(why, "null"))
		why = NULL;
	printf("fuse:     %s%s%s%s, requests up to %s\n", t, why ? " (" : "",
	       why ? why : "", why ? ")" : "",
	       bytes(doc, r, "fuse_request_bytes", a, sizeof(a)));
}

static void print_human(struct doc *doc, const char *mnt)
{
	yaml_node_t *r = doc->root;
	char a[32], b[32], c[32], up[32];
	const char *metrics = str(doc, r, "metrics");
	/* Older daemons have no reason; passthrough has none ("null"). */
	const char *why = str(doc, r, "read_path_reason");

	if (!strcmp(why, "-") || !strcmp(why, "null"))
		why = NULL;

	printf("datavofs %s on %s\n", str(doc, r, "version"), mnt);
	printf("origin:   %s\n", str(doc, r, "origin"));
	printf("config:   %s (%s)\n",
	       strcmp(str(doc, r, "config"), "null") ? str(doc, r, "config") :
						       "built-in default",
	       str(doc, r, "config_source"));
	printf("read:     %s%s%s%s, verify %s, up %s\n", str(doc, r, "read_path"),
	       why ? " (" : "", why ? why : "", why ? ")" : "",
	       str(doc, r, "verify"),
	       dv_ctl_format_duration((double)num(doc, r, "uptime_seconds"), up,
				      sizeof(up)));
	print_transport(doc);
	if (strcmp(metrics, "null") && strcmp(metrics, "-"))
		printf("metrics:  http://%s/metrics\n", metrics);
	else
		printf("metrics:  off (mount with -o metrics to enable)\n");
	printf("datasets: %" PRIu64 ", shards %" PRIu64 ", open files %" PRIu64
	       ", pinned revisions loaded %" PRIu64 "\n",
	       num(doc, r, "datasets"), num(doc, r, "shards"),
	       num(doc, r, "open_files"), num(doc, r, "pins_loaded"));
	print_tiers(doc);
	printf("\norigin:   %" PRIu64 " requests, %s received, %" PRIu64 " errors\n",
	       num(doc, r, "origin_requests"),
	       bytes(doc, r, "origin_bytes", a, sizeof(a)),
	       num(doc, r, "origin_errors"));
	printf("fills:    %" PRIu64 " (%s), %" PRIu64 " failed, %" PRIu64
	       " sha256 mismatches, %" PRIu64 " promotions\n",
	       num(doc, r, "fills"), bytes(doc, r, "fill_bytes", b, sizeof(b)),
	       num(doc, r, "fill_errors"), num(doc, r, "verify_failures"),
	       num(doc, r, "promotions"));
	print_streams(doc);
	printf("served:   %s; egress saved %s, about $%s at $%s/GB\n",
	       bytes(doc, r, "bytes_served", a, sizeof(a)),
	       bytes(doc, r, "bytes_saved", c, sizeof(c)),
	       str(doc, r, "dollars_saved"), str(doc, r, "dollars_per_gb"));
	print_errors(doc);
}

/* The file's size is unknown until read (it is generated on open). */
static int read_status(const char *path, char **out, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t got = 0, cap = 65536;
	char *buf, *nb;
	int ret = 0;

	if (fd < 0)
		return -errno;
	buf = malloc(cap + 1);
	for (;;) {
		ssize_t n;

		if (!buf) {
			ret = -ENOMEM;
			break;
		}
		n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : 0;
			break;
		}
		got += (size_t)n;
		if (got < cap)
			continue;
		if (cap >= STATUS_MAX) {
			ret = -EFBIG;
			break;
		}
		cap *= 2;
		nb = realloc(buf, cap + 1);
		if (!nb)
			free(buf);
		buf = nb;
	}
	close(fd);
	if (ret) {
		free(buf);
		return ret;
	}
	buf[got] = '\0';
	*out = buf;
	*len = got;
	return 0;
}

static int parse(const char *text, size_t len, struct doc *doc)
{
	yaml_parser_t p;
	int ok;

	if (!yaml_parser_initialize(&p))
		return -ENOMEM;
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	ok = yaml_parser_load(&p, &doc->d);
	yaml_parser_delete(&p);
	if (!ok)
		return -EINVAL;
	doc->root = yaml_document_get_root_node(&doc->d);
	if (!doc->root || doc->root->type != YAML_MAPPING_NODE) {
		yaml_document_delete(&doc->d);
		return -EINVAL;
	}
	return 0;
}

int dv_ctl_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char path[4096], *text = NULL;
	bool json = false;
	struct doc doc;
	size_t len = 0;
	int c, ret;

	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		if (c == 'j') {
			json = true;
		} else {
			return dv_ctl_usage(STATUS_USAGE, c == 'h');
		}
	}
	if (argc - optind != 1)
		return dv_ctl_usage(STATUS_USAGE, false);
	snprintf(path, sizeof(path), "%s/.datavo/status", argv[optind]);
	ret = read_status(path, &text, &len);
	if (ret) {
		fprintf(stderr, "datavoctl status: %s: %s (is a datavofs mounted on %s?)\n",
			path, strerror(-ret), argv[optind]);
		return 1;
	}
	if (json) {
		fwrite(text, 1, len, stdout);
		free(text);
		return 0;
	}
	ret = parse(text, len, &doc);
	free(text);
	if (ret) {
		fprintf(stderr, "datavoctl status: %s: not a status document\n", path);
		return 1;
	}
	print_human(&doc, argv[optind]);
	yaml_document_delete(&doc.d);
	return 0;
}
