/*
 * Small parsers shared by the config, the namespace and the CLI.
 */
#ifndef DV_UTIL_H
#define DV_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Parses a size: a decimal integer, optionally followed by B, KB, MB, GB,
 * TB, PB (1024-based) or KiB, MiB, GiB, TiB, PiB; case of
 * the suffix is ignored, one space may separate it. Returns 0 or -EINVAL
 * (not a size), -ERANGE (does not fit 64 bits).
 */
int dv_parse_size(const char *s, uint64_t *out);

/* Parses a non-negative decimal integer no larger than @max. 0 or -EINVAL. */
int dv_parse_uint(const char *s, uint64_t max, uint64_t *out);

/*
 * Expands a leading ~ (or ~/) to $HOME and $VAR / ${VAR} anywhere (R12).
 * An unset variable is an error (-ENOENT) naming nothing: the caller says
 * which key. Returns a new string in *@out or -errno.
 */
int dv_expand_path(const char *in, char **out);

/* True when @s is a content hash: [0-9a-f]{32,64}. */
bool dv_valid_hash(const char *s);

/* True when @s is one name part: [A-Za-z0-9._-]+, not "." or "..". */
bool dv_valid_name_part(const char *s);

/* Formats @bytes as "1.5 GiB" into @buf. Returns @buf. */
char *dv_format_bytes(uint64_t bytes, char *buf, size_t len);

/* Parses true/false, yes/no, on/off, in any case. Returns 0 or -EINVAL. */
int dv_parse_bool(const char *s, bool *out);

/*
 * True when @s is HOST:PORT with a port from 1 to 65535 and no blanks; an
 * IPv6 host is written in brackets ("[::1]:9110"). The host is not resolved.
 */
bool dv_valid_addr_port(const char *s);

/*
 * Reads the regular file @path, at most @max bytes, into a new
 * NUL-terminated buffer: *@out (caller frees) and *@len. Returns 0 or
 * -errno: -EISDIR for a directory, -EINVAL for another non-regular file,
 * -EFBIG when the file is larger than @max.
 */
int dv_read_file(const char *path, size_t max, char **out, size_t *len);

/*
 * A token, key or assertion kept in a small file: dv_read_file() with
 * the trailing blanks and newlines removed (editors and secret mounts
 * end files with one). May leave "" in *@out. 0 or -errno as there.
 */
int dv_read_token_file(const char *path, size_t max, char **out);

/*
 * Room for one more element in the array @v of @n elements of @size bytes
 * with room for *@cap: when it is full, a larger copy (twice the room, or
 * @first elements for an empty array) and *@cap updated. Returns the array
 * to use from now on, or NULL on overflow or out of memory (@v and *@cap
 * are then left as they were).
 */
void *dv_grow(void *v, size_t n, size_t *cap, size_t size, size_t first);

/* Physical memory in bytes, 0 if unknown. */
uint64_t dv_physical_memory(void);

/*
 * mkdir -p; each directory it creates gets exactly @mode (the umask does
 * not apply: an origin must stay readable by a web server); @mode is not
 * 0. dv_mkdir_p_perms() with only a mode. 0 or -errno.
 */
int dv_mkdir_p(const char *path, mode_t mode);

/*
 * Reads exactly @len bytes at @off of @fd, again after EINTR and short
 * reads. 0, -errno, or -EIO when the file ends first.
 */
int dv_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Writes exactly @len bytes at @off of @fd, as dv_pread_full() reads. */
int dv_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

#endif
