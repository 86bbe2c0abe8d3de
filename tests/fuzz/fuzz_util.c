/*
 * libFuzzer target: the small parsers of config/util.h and the name checks
 * (sizes, integers, booleans, HOST:PORT, hashes, name parts, dataset names,
 * ~/$VAR expansion, origin document paths, URL redaction, hex). The input
 * is cut at its first NUL (these take C strings); each result is checked
 * against its documented contract.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/log.h"
#include "config/util.h"
#include "fs/namespace/manifest.h"
#include "tiers/core/digest.h"
#include "tiers/net/http.h"
#include "tiers/origin/origin_impl.h"
#include "tiers/core/sink.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("HOME", "/nonexistent/fuzz-home", 1);
	setenv("A", "/a", 1);
	dv_log_set_level(DV_LOG_ERROR);
	return 0;
}

static void check_hash(const char *s)
{
	size_t len = strlen(s);

	if (!dv_valid_hash(s))
		return;
	if (len < 32 || len > 64 || strspn(s, "0123456789abcdef") != len)
		abort();
}

static void check_names(const char *s)
{
	if (dv_valid_name_part(s) &&
	    (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")))
		abort();
	if (dv_valid_dataset_name(s) &&
	    (!*s || s[0] == '/' || s[strlen(s) - 1] == '/' || strstr(s, "//") ||
	     strlen(s) > DV_DATASET_MAX))
		abort();
	if (dv_origin_relpath_ok(s) && (s[0] == '/' || strstr(s, "..")))
		abort();
}

static void check_numbers(const char *s)
{
	char buf[64];
	uint64_t v;
	bool b;
	int ret;

	ret = dv_parse_size(s, &v);
	if (ret != 0 && ret != -EINVAL && ret != -ERANGE)
		abort();
	if (ret == 0)
		dv_format_bytes(v, buf, sizeof(buf));
	ret = dv_parse_uint(s, 1000000, &v);
	if (ret == 0 && v > 1000000)
		abort();
	ret = dv_parse_bool(s, &b);
	if (ret != 0 && ret != -EINVAL)
		abort();
	dv_valid_addr_port(s);
}

static void check_strings(const char *s)
{
	char red[256];
	uint8_t raw[32];
	char *out = NULL;

	if (dv_expand_path(s, &out) == 0)
		free(out);
	dv_http_redact(s, red, sizeof(red));
	if (!memchr(red, '\0', sizeof(red)))
		abort();
	if (dv_hex_decode(s, raw, sizeof(raw)) == 0) {
		char back[65];

		dv_hex_encode(raw, sizeof(raw), back);
		if (strcasecmp(back, s) != 0)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	check_hash(s);
	check_names(s);
	check_numbers(s);
	check_strings(s);
	free(s);
	return 0;
}
