/*
 * Internals shared by config.c (files, resolution, lifetime, names) and
 * parse.c (the YAML walk). Private to config/: nothing outside it includes
 * this header, and nothing here is part of the library's interface.
 */
#ifndef DV_CONFIG_IMPL_H
#define DV_CONFIG_IMPL_H

#include <stddef.h>

#include "config.h"

/*
 * A configuration with every default set and no tiers, source
 * DV_CONFIG_EXPLICIT. NULL on ENOMEM. The caller owns it (dv_config_free).
 */
struct dv_config *dv_config_new(void);

/* Formats one message into @err; a no-op when @err is NULL or @errlen 0. */
void dv_config_set_error(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * The inverses of dv_tier_type_name() and dv_verify_mode_name(): 0 with
 * *@out set, or -EINVAL (leaving *@out alone) when @s names none.
 */
int dv_config_lookup_tier_type(const char *s, enum dv_tier_type *out);
int dv_config_lookup_verify_mode(const char *s, enum dv_verify_mode *out);

#endif
