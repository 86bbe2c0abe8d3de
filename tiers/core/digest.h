/*
 * Digests as the manifests and tier files spell them: hex text and
 * SHA-256. The verifying sink (sink.h) hashes streams; these are for
 * whole files and for the text of manifests.
 */
#ifndef DV_DIGEST_H
#define DV_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* @hex (exactly 2 * @outlen hex digits, any case) into @out. 0 or -EINVAL. */
int dv_hex_decode(const char *hex, uint8_t *out, size_t outlen);

/* @len bytes as lower-case hex into @out (2 * @len + 1 bytes). */
void dv_hex_encode(const uint8_t *in, size_t len, char *out);

/* SHA-256 of a whole file from offset 0. 0 or -errno. */
int dv_sha256_fd(int fd, uint8_t out[32]);

#endif
