/* Hex and SHA-256 helpers (digest.h). */
#include "digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int dv_hex_decode(const char *hex, uint8_t *out, size_t outlen)
{
	if (strlen(hex) != outlen * 2)
		return -EINVAL;
	for (size_t i = 0; i < outlen; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

void dv_hex_encode(const uint8_t *in, size_t len, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
}

int dv_sha256_fd(int fd, uint8_t out[32])
{
	static const size_t bufsize = 1 << 20;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned int dlen = 0;
	uint64_t off = 0;
	char *buf = NULL;
	int ret = -ENOMEM;

	if (!md)
		return -ENOMEM;
	buf = malloc(bufsize);
	if (!buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
		goto out;
	for (;;) {
		ssize_t n = pread(fd, buf, bufsize, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto out;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(md, buf, (size_t)n);
		off += (uint64_t)n;
	}
	ret = EVP_DigestFinal_ex(md, out, &dlen) == 1 ? 0 : -EIO;
out:
	free(buf);
	EVP_MD_CTX_free(md);
	return ret;
}
