/*
 * datavoctl: the operator's tool.
 *
 *   datavoctl publish --dataset NAME [--revision N] [--keys k1,k2] [--link]
 *                     [--chunk-size SIZE | --no-chunks]
 *                     SRC_DIR ORIGIN_DIR
 *   datavoctl status [--json] MOUNTPOINT
 *   datavoctl sync [--timeout S] PATH
 *   datavoctl inspect [-c CONFIG]
 *   datavoctl preload [--node I --nodes N] [-j JOBS] PATH...
 *   datavoctl verify [-c CONFIG] [--state-dir DIR] [--fix]
 *   datavoctl bench [-c CONFIG] [--tier NAME] [--size-mb N] ...
 *
 * Each subcommand is a function taking its own argv; getopt_long parses it.
 * publish is here; the others are in ctl_*.c (ctl.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/util.h"
#include "ctl.h"
#include "publish.h"
#include "tiers/core/chunks.h"

#define MAX_KEYS 64

static int usage(FILE *out)
{
	fprintf(out,
		"usage: datavoctl publish --dataset NAME [--revision N] [--keys k1,k2] [--link]\n"
		"                         [--chunk-size SIZE | --no-chunks]\n"
		"                         SRC_DIR ORIGIN_DIR\n"
		"       datavoctl status [--json] MOUNTPOINT\n"
		"       datavoctl sync [--timeout S] PATH\n"
		"       datavoctl inspect [-c CONFIG]\n"
		"       datavoctl preload [--node I --nodes N] [-j JOBS] PATH...\n"
		"       datavoctl verify [-c CONFIG] [--state-dir DIR] [--fix]\n"
		"       datavoctl bench [-c CONFIG] [--tier NAME] [--size-mb N]\n"
		"                       [--iterations K] [-j JOBS]\n"
		"See datavoctl(8).\n");
	return out == stdout ? 0 : 2;
}

/* Splits @list at commas into @keys (pointers into @list). */
static int split_keys(char *list, const char **keys, size_t *n)
{
	char *save = NULL;

	*n = 0;
	for (char *k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
		if (*n == MAX_KEYS)
			return -E2BIG;
		keys[(*n)++] = k;
	}
	return 0;
}

static int cmd_publish(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dataset", required_argument, NULL, 'd' },
		{ "revision", required_argument, NULL, 'r' },
		{ "keys", required_argument, NULL, 'k' },
		{ "link", no_argument, NULL, 'l' },
		{ "chunk-size", required_argument, NULL, 'c' },
		{ "no-chunks", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct dv_publish_opts o = { .copy = true };
	struct dv_publish_result res;
	const char *keys[MAX_KEYS];
	char err[1024], line[1024];
	uint64_t cs;
	int c, ret;

	while ((c = getopt_long(argc, argv, "d:r:k:lc:nh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o.dataset = optarg;
			break;
		case 'r':
			if (dv_parse_uint(optarg, UINT64_MAX / 2, &o.revision) ||
			    o.revision == 0) {
				fprintf(stderr, "datavoctl publish: --revision %s: use a positive integer\n",
					optarg);
				return 2;
			}
			break;
		case 'k':
			if (split_keys(optarg, keys, &o.nkeys)) {
				fprintf(stderr, "datavoctl publish: at most %d keys\n", MAX_KEYS);
				return 2;
			}
			o.keys = keys;
			break;
		case 'l':
			o.copy = false;
			break;
		case 'c':
			if (dv_parse_size(optarg, &cs) || !dv_chunks_valid_size(cs)) {
				fprintf(stderr, "datavoctl publish: --chunk-size %s: use a power of two from 64KiB to 64MiB\n",
					optarg);
				return 2;
			}
			o.chunk_size = (uint32_t)cs;
			break;
		case 'n':
			o.no_chunks = true;
			break;
		case 'h':
			return usage(stdout);
		default:
			return usage(stderr);
		}
	}
	if (!o.dataset || argc - optind != 2) {
		fprintf(stderr, "datavoctl publish: needs --dataset NAME, SRC_DIR and ORIGIN_DIR\n");
		return usage(stderr);
	}
	o.src_dir = argv[optind];
	o.origin_dir = argv[optind + 1];
	ret = dv_publish(&o, &res, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "datavoctl publish: %s\n", err);
		return 1;
	}
	dv_publish_describe(&o, &res, line, sizeof(line));
	printf("%s\n", line);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} cmds[] = {
		{ "publish", cmd_publish },
		{ "status", dv_ctl_status },
		{ "inspect", dv_ctl_inspect },
		{ "preload", dv_ctl_preload },
		{ "verify", dv_ctl_verify },
		{ "bench", dv_ctl_bench },
		{ "sync", dv_ctl_sync },
	};

	if (argc < 2)
		return usage(stderr);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help"))
		return usage(stdout);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "datavoctl: unknown command '%s'\n", argv[1]);
	return usage(stderr);
}
