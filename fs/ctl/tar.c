/*
 * The ustar header walker (tar.h): lists the regular members of a tar file
 * by reading its 512-byte headers with pread() and seeking past payloads,
 * so a walk costs one block per member whatever the shard size.
 *
 * Understood: POSIX ustar names with their prefix, GNU long names ('L'),
 * pax "path" records ('x'); octal and GNU base-256 numbers; checksums of
 * signed or unsigned bytes. Global pax headers ('g') are skipped. Not here:
 * payload bytes (never read), links and special files (not members),
 * sparse files and multi-volume archives (not expected in a shard).
 */
#include "tar.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/util.h"

#define TAR_BLOCK 512
#define TAR_PAX_MAX (64u << 10)   /* a pax extended header */

__attribute__((format(printf, 4, 5)))
static int fail(char *err, size_t errlen, int ret, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* An octal or base-256 (GNU) numeric field. 0 or -EINVAL. */
static int tar_number(const unsigned char *f, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;

	if (f[0] & 0x80) {
		for (i = 1; i < len; i++) {
			if (v >> 55)
				return -EINVAL;
			v = v << 8 | f[i];
		}
		*out = v;
		return (f[0] & 0x7f) ? -EINVAL : 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++)
		v = v << 3 | (uint64_t)(f[i] - '0');
	if (i < len && f[i] != ' ' && f[i] != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

static bool tar_checksum_ok(const unsigned char *h)
{
	uint64_t want, sum = 0;
	int64_t ssum = 0;

	if (tar_number(h + 148, 8, &want) < 0)
		return false;
	for (size_t i = 0; i < TAR_BLOCK; i++) {
		unsigned char c = (i >= 148 && i < 156) ? ' ' : h[i];

		sum += c;
		ssum += (signed char)c;
	}
	/* Some old writers summed signed chars. */
	return sum == want || (uint64_t)ssum == want;
}

static bool all_zero(const unsigned char *b, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (b[i])
			return false;
	}
	return true;
}

/* The name of a ustar header: "prefix/name" for POSIX ustar. */
static void tar_header_name(const unsigned char *h, char *out)
{
	size_t nlen = strnlen((const char *)h, 100);
	size_t plen = 0;

	if (memcmp(h + 257, "ustar\0", 6) == 0)
		plen = strnlen((const char *)h + 345, 155);
	if (plen) {
		memcpy(out, h + 345, plen);
		out[plen++] = '/';
	}
	memcpy(out + plen, h, nlen);
	out[plen + nlen] = '\0';
}

/* The "path" record of a pax header into @out; untouched if absent. */
static void pax_path(const char *rec, size_t len, char *out)
{
	size_t off = 0;

	while (off < len) {
		char *end;
		unsigned long rlen = strtoul(rec + off, &end, 10);
		const char *kv = end + 1;

		if (end == rec + off || *end != ' ' || rlen == 0 ||
		    rlen > len - off)
			return;
		if ((size_t)(rec + off + rlen - kv) > 5 &&
		    strncmp(kv, "path=", 5) == 0) {
			size_t vlen = (size_t)(rec + off + rlen - 1 - (kv + 5));

			if (vlen <= DV_TAR_NAME_MAX) {
				memcpy(out, kv + 5, vlen);
				out[vlen] = '\0';
			}
		}
		off += rlen;
	}
}


/* Reads the payload of a long-name or pax header at @off into @name. */
static int tar_ext_name(int fd, char type, uint64_t off, uint64_t size,
			char *name)
{
	char *buf;
	int ret;

	if (size > (type == 'L' ? DV_TAR_NAME_MAX : TAR_PAX_MAX))
		return -EINVAL;
	buf = malloc((size_t)size + 1);
	if (!buf)
		return -ENOMEM;
	ret = dv_pread_full(fd, buf, (size_t)size, off);
	buf[size] = '\0';
	if (ret == 0 && type == 'L')
		memcpy(name, buf, strlen(buf) + 1);
	else if (ret == 0)
		pax_path(buf, (size_t)size, name);
	free(buf);
	return ret;
}

int dv_tar_members(int fd, uint64_t fsize, const char *label,
		   dv_tar_member_fn fn, void *arg, char *err, size_t errlen)
{
	unsigned char h[TAR_BLOCK];
	char name[DV_TAR_NAME_MAX + 1] = "";
	bool have_ext = false;
	uint64_t off = 0, size, next;
	int ret;

	while (off + TAR_BLOCK <= fsize) {
		ret = dv_pread_full(fd, h, TAR_BLOCK, off);
		if (ret)
			return fail(err, errlen, ret, "%s: %s", label,
				    strerror(-ret));
		if (all_zero(h, TAR_BLOCK))
			return 0;
		if (!tar_checksum_ok(h) || tar_number(h + 124, 12, &size) < 0)
			return fail(err, errlen, -EINVAL,
				    "%s: not a tar file (bad header at byte %llu)",
				    label, (unsigned long long)off);
		next = off + TAR_BLOCK + ((size + TAR_BLOCK - 1) & ~(uint64_t)(TAR_BLOCK - 1));
		if (size > fsize || next > fsize)
			return fail(err, errlen, -EINVAL,
				    "%s: truncated at byte %llu", label,
				    (unsigned long long)off);
		if (h[156] == 'L' || h[156] == 'x') {
			ret = tar_ext_name(fd, (char)h[156], off + TAR_BLOCK,
					   size, name);
			if (ret)
				return fail(err, errlen, ret,
					    "%s: bad extended header at byte %llu",
					    label, (unsigned long long)off);
			have_ext = name[0] != '\0';
		} else if (h[156] != 'g') {
			if (!have_ext)
				tar_header_name(h, name);
			if (h[156] == '0' || h[156] == '\0' || h[156] == '7')
				fn(arg, name);
			have_ext = false;
			name[0] = '\0';
		}
		off = next;
	}
	return 0;
}
