/*
 * libFuzzer target: origin documents (fs/namespace/manifest.c). The first byte picks
 * the parser: manifest without a dataset to match, manifest that must be
 * "demo/train", or datasets.json. Accepted documents are checked against
 * the contract of manifest.h: shards sorted by name, unique, valid hashes,
 * findable; dataset names valid, sorted, unique.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"
#include "config/util.h"
#include "fs/namespace/manifest.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	dv_log_set_level(DV_LOG_ERROR);
	return 0;
}

static void check_manifest(const struct dv_manifest *m)
{
	for (size_t i = 0; i < m->nshards; i++) {
		const struct dv_manifest_shard *s = &m->shards[i];
		const char *name = dv_manifest_name(m, s);

		if (!dv_valid_hash(s->hash) || strlen(name) != s->name_len)
			abort();
		if (i > 0 && strcmp(dv_manifest_name(m, &m->shards[i - 1]), name) >= 0)
			abort();
		if (dv_manifest_find(m, name) != s)
			abort();
	}
}

static void check_datasets(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!names[i] || !dv_valid_dataset_name(names[i]))
			abort();
		if (i > 0 && strcmp(names[i - 1], names[i]) >= 0)
			abort();
	}
	if (names[n])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;
	struct dv_manifest *m = NULL;
	char **names = NULL;
	size_t n = 0;
	char err[512];
	int ret;

	if (size < 1)
		return 0;
	size--;
	switch (data[0] % 3) {
	case 0:
	case 1:
		ret = dv_manifest_parse(text, size, data[0] % 3 ? "demo/train" : NULL,
					&m, err, sizeof(err));
		if (ret == 0) {
			check_manifest(m);
			dv_manifest_free(m);
		}
		break;
	default:
		ret = dv_datasets_parse(text, size, &names, &n, err, sizeof(err));
		if (ret == 0) {
			check_datasets(names, n);
			dv_datasets_free(names);
		}
		break;
	}
	return 0;
}
