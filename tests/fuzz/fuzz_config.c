/*
 * libFuzzer target: shards.yaml (config/config.c dv_config_parse). Any text
 * must give either a config (which is freed) or -errno with one line in err.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* ~ and $VAR expand (R12): give them something harmless. */
	setenv("HOME", "/nonexistent/fuzz-home", 1);
	setenv("DV_FUZZ", "/nonexistent/fuzz-var", 1);
	dv_log_set_level(DV_LOG_ERROR);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dv_config *cfg = NULL;
	char err[512];
	int ret;

	err[0] = '\0';
	ret = dv_config_parse((const char *)data, size, "fuzz.yaml", &cfg,
			      err, sizeof(err));
	if (ret == 0) {
		if (!cfg || cfg->ntiers == 0)
			abort(); /* R6: a config always has a tier */
		dv_config_free(cfg);
	} else if (ret > 0 || err[0] == '\0' || memchr(err, '\0', sizeof(err)) == NULL) {
		abort(); /* an error is -errno with a message */
	}
	return 0;
}
