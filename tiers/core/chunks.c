/* Chunk lists (chunks.h): read, written and computed here only. */
#include "chunks.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"

#define READ_CHUNK (1u << 20)

bool dv_chunks_valid_size(uint64_t chunk_size)
{
	return chunk_size >= DV_CHUNK_SIZE_MIN &&
	       chunk_size <= DV_CHUNK_SIZE_MAX &&
	       (chunk_size & (chunk_size - 1)) == 0;
}

void dv_chunks_release(struct dv_chunks *c)
{
	free(c->sha256);
	memset(c, 0, sizeof(*c));
}

bool dv_chunks_check(const struct dv_chunks *c, uint32_t i, const void *buf)
{
	uint8_t got[32];

	if (i >= c->n)
		return false;
	SHA256(buf, dv_chunks_len(c, i), got);
	return memcmp(got, c->sha256[i], 32) == 0;
}

/* The next line of @text at *@pos, without its '\n', NUL-terminated in @buf. */
static bool next_line(const char *text, size_t len, size_t *pos, char *buf,
		      size_t buflen)
{
	const char *nl;
	size_t n;

	if (*pos >= len)
		return false;
	nl = memchr(text + *pos, '\n', len - *pos);
	if (!nl)
		return false; /* every line ends with '\n' */
	n = (size_t)(nl - (text + *pos));
	if (n >= buflen)
		return false;
	memcpy(buf, text + *pos, n);
	buf[n] = '\0';
	*pos += n + 1;
	return true;
}

static bool header_u64(const char *line, const char *key, uint64_t *out)
{
	size_t k = strlen(key);
	char *end;

	if (strncmp(line, key, k) != 0 || line[k] != ' ' ||
	    line[k + 1] < '0' || line[k + 1] > '9')
		return false;
	errno = 0;
	*out = strtoull(line + k + 1, &end, 10);
	return errno == 0 && *end == '\0';
}

__attribute__((format(printf, 3, 4)))
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

int dv_chunks_parse(const char *text, size_t len, const uint8_t pin[32],
		    uint64_t size, struct dv_chunks *out, char *err,
		    size_t errlen)
{
	uint64_t cs = 0, sz = 0, n;
	uint8_t got[32];
	char line[80];
	size_t pos = 0;

	memset(out, 0, sizeof(*out));
	SHA256((const unsigned char *)text, len, got);
	if (memcmp(got, pin, 32) != 0) {
		snprintf(err, errlen, "the chunk list does not match the manifest's digest");
		return -EBADMSG;
	}
	if (!next_line(text, len, &pos, line, sizeof(line)) ||
	    strcmp(line, DV_CHUNKS_FORMAT) != 0)
		return bad(err, errlen, "not a %s list", DV_CHUNKS_FORMAT);
	if (!next_line(text, len, &pos, line, sizeof(line)) ||
	    !header_u64(line, "chunk_size", &cs) || !dv_chunks_valid_size(cs))
		return bad(err, errlen, "line 2: a chunk_size (a power of two from %u to %u) is expected",
			   DV_CHUNK_SIZE_MIN, DV_CHUNK_SIZE_MAX);
	if (!next_line(text, len, &pos, line, sizeof(line)) ||
	    !header_u64(line, "size", &sz) || sz != size)
		return bad(err, errlen, "line 3: size %" PRIu64 " is expected", size);
	n = dv_chunks_count(size, (uint32_t)cs);
	if (n > DV_CHUNKS_MAX_COUNT)
		return bad(err, errlen, "%" PRIu64 " chunks: more than %u", n,
			   DV_CHUNKS_MAX_COUNT);
	out->size = size;
	out->chunk_size = (uint32_t)cs;
	out->n = (uint32_t)n;
	out->sha256 = malloc(n ? n * 32 : 1);
	if (!out->sha256)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		if (!next_line(text, len, &pos, line, sizeof(line)) ||
		    strlen(line) != 64 || dv_hex_decode(line, out->sha256[i], 32)) {
			dv_chunks_release(out);
			return bad(err, errlen, "line %" PRIu32 ": the digest of chunk %" PRIu32 " is expected",
				   i + 4, i);
		}
	}
	if (pos != len) {
		dv_chunks_release(out);
		return bad(err, errlen, "more lines than its %" PRIu64 " chunks", n);
	}
	return 0;
}

int dv_chunks_format(const struct dv_chunks *c, char **text, size_t *len,
		     uint8_t pin[32])
{
	size_t cap = 96 + (size_t)c->n * 65, n;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	n = (size_t)snprintf(buf, cap, "%s\nchunk_size %" PRIu32 "\nsize %" PRIu64 "\n",
			     DV_CHUNKS_FORMAT, c->chunk_size, c->size);
	for (uint32_t i = 0; i < c->n; i++) {
		dv_hex_encode(c->sha256[i], 32, buf + n);
		n += 64;
		buf[n++] = '\n';
	}
	buf[n] = '\0';
	SHA256((const unsigned char *)buf, n, pin);
	*text = buf;
	*len = n;
	return 0;
}

/* Feeds @len bytes at @buf to the whole digest and to the chunk digests. */
static int feed(EVP_MD_CTX *whole, EVP_MD_CTX *part, struct dv_chunks *c,
		uint64_t *off, const char *buf, size_t len)
{
	while (len > 0) {
		uint64_t in_chunk = *off % c->chunk_size;
		size_t take = c->chunk_size - in_chunk < len
				      ? (size_t)(c->chunk_size - in_chunk) : len;

		if (in_chunk == 0 && EVP_DigestInit_ex(part, EVP_sha256(), NULL) != 1)
			return -EIO;
		EVP_DigestUpdate(whole, buf, take);
		EVP_DigestUpdate(part, buf, take);
		*off += take;
		buf += take;
		len -= take;
		if (*off % c->chunk_size == 0 || *off == c->size) {
			uint32_t i = (uint32_t)((*off - 1) / c->chunk_size);

			if (EVP_DigestFinal_ex(part, c->sha256[i], NULL) != 1)
				return -EIO;
		}
	}
	return 0;
}

static int hash_file(int fd, EVP_MD_CTX *whole, EVP_MD_CTX *part,
		     struct dv_chunks *c, char *buf)
{
	uint64_t off = 0;

	while (off < c->size) {
		size_t want = c->size - off < READ_CHUNK ? (size_t)(c->size - off)
							  : READ_CHUNK;
		ssize_t n = pread(fd, buf, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* shorter than it was a moment ago */
		if (part) {
			int ret = feed(whole, part, c, &off, buf, (size_t)n);

			if (ret)
				return ret;
		} else {
			EVP_DigestUpdate(whole, buf, (size_t)n);
			off += (uint64_t)n;
		}
	}
	return 0;
}

int dv_chunks_of_fd(int fd, uint32_t chunk_size, uint8_t whole_out[32],
		    struct dv_chunks *out)
{
	EVP_MD_CTX *whole = EVP_MD_CTX_new(), *part = NULL;
	char *buf = malloc(READ_CHUNK);
	struct dv_chunks c = { 0 };
	off_t end = lseek(fd, 0, SEEK_END);
	int ret = -ENOMEM;

	if (end < 0) {
		ret = -errno;
		goto out;
	}
	c.size = (uint64_t)end;
	if (chunk_size) {
		uint64_t n = dv_chunks_count(c.size, chunk_size);

		ret = -EFBIG;
		if (!dv_chunks_valid_size(chunk_size) || n > DV_CHUNKS_MAX_COUNT)
			goto out;
		ret = -ENOMEM;
		c.chunk_size = chunk_size;
		c.n = (uint32_t)n;
		c.sha256 = malloc(n ? n * 32 : 1);
		part = EVP_MD_CTX_new();
		if (!c.sha256 || !part)
			goto out;
	}
	if (!whole || !buf || EVP_DigestInit_ex(whole, EVP_sha256(), NULL) != 1)
		goto out;
	ret = hash_file(fd, whole, part, &c, buf);
	if (ret == 0 && EVP_DigestFinal_ex(whole, whole_out, NULL) != 1)
		ret = -EIO;
out:
	if (ret == 0 && out)
		*out = c;
	else
		dv_chunks_release(&c);
	EVP_MD_CTX_free(part);
	EVP_MD_CTX_free(whole);
	free(buf);
	return ret;
}
