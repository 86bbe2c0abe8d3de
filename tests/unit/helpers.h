/* Shared helpers for the Check unit tests. */
#ifndef DV_TEST_HELPERS_H
#define DV_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>

/* A new empty directory under $TMPDIR (or /tmp); caller frees the string. */
char *dv_test_tmpdir(const char *tag);

/* rm -rf @path. */
void dv_test_rmtree(const char *path);

/* Writes @len bytes to @path (created 0644). Aborts the test on failure. */
void dv_test_write_file(const char *path, const void *buf, size_t len);

/* Reads a whole file into a malloc'd buffer; *len set. NULL on failure. */
char *dv_test_read_file(const char *path, size_t *len);

/* Fills @buf with bytes derived from @seed. */
void dv_test_pattern(void *buf, size_t len, uint32_t seed);

/* Counts directory entries other than . and .. (-1 if missing). */
int dv_test_count_entries(const char *dir);

/* Runs @suite (a Check Suite *) and frees it: a test binary's exit status. */
int dv_test_run(void *suite);

#endif
