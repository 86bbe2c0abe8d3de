/*
 * The origin backends, dispatched to by dv_origin_new() (origin.c) and
 * called by nothing else. Same contract as dv_origin_new().
 */
#ifndef DV_ORIGIN_IMPL_H
#define DV_ORIGIN_IMPL_H

#include <stdbool.h>

#include "origin.h"

int dv_origin_http_new(const char *url, const struct dv_http_config *http,
		       struct dv_origin **out, char *err, size_t errlen);
int dv_origin_file_new(const char *url, const struct dv_http_config *http,
		       struct dv_origin **out, char *err, size_t errlen);
int dv_origin_s3_new(const char *url, const struct dv_http_config *http,
		     struct dv_origin **out, char *err, size_t errlen);

/*
 * True when a document path may be appended to an origin: not empty, no
 * leading "/", no "..", no "//", only [A-Za-z0-9._/-].
 */
bool dv_origin_relpath_ok(const char *relpath);

#endif
