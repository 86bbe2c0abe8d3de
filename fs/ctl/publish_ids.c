/*
 * The publisher's identities (publish.h "Identities"): the manifest_ref of
 * a set of source tars and the content_hash of each shard, from its
 * sample ids. Kept apart from the file handling so that the encoding,
 * which every published hash depends on, reads in one place.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "publish_impl.h"
#include "tar.h"
#include "tiers/core/digest.h"


static void xx_u64(XXH3_state_t *xx, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	XXH3_128bits_update(xx, b, sizeof(b));
}

static void xx_str(XXH3_state_t *xx, const char *s, size_t len)
{
	xx_u64(xx, len);
	XXH3_128bits_update(xx, s, len);
}

/* Feeds each new sample id of a tar into the hash. */
struct sample_feed {
	XXH3_state_t *xx;
	char prev[DV_TAR_NAME_MAX + 1];
	size_t prev_len;
	bool have_prev;
};

static void feed_member(void *arg, const char *name)
{
	struct sample_feed *sf = arg;
	const char *base = strrchr(name, '/');
	const char *dot = strchr(base ? base + 1 : name, '.');
	size_t len = dot ? (size_t)(dot - name) : strlen(name);

	if (sf->have_prev && len == sf->prev_len &&
	    memcmp(name, sf->prev, len) == 0)
		return;
	xx_str(sf->xx, name, len);
	memcpy(sf->prev, name, len);
	sf->prev_len = len;
	sf->have_prev = true;
}

static int shard_content_hash(struct pub *p, size_t i, uint64_t rev)
{
	struct src_shard *s = &p->shards[i];
	struct sample_feed *sf = calloc(1, sizeof(*sf));
	char path[PATH_MAX];
	XXH128_canonical_t c;
	int fd, ret;

	if (!sf)
		return -ENOMEM;
	ret = dv_pub_join(path, sizeof(path), p->o->src_dir, s->name);
	fd = ret ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = ret ? ret : -errno;
		free(sf);
		return dv_pub_fail(p, ret, "%s: %s", path, strerror(-ret));
	}
	XXH3_128bits_reset(p->xx);
	xx_str(p->xx, p->ref, 64);
	xx_u64(p->xx, rev);
	xx_u64(p->xx, i);
	xx_u64(p->xx, p->nkeys);
	for (size_t k = 0; k < p->nkeys; k++)
		xx_str(p->xx, p->keys[k], strlen(p->keys[k]));
	sf->xx = p->xx;
	ret = dv_tar_members(fd, s->size, path, feed_member, sf, p->err,
			     p->errlen);
	close(fd);
	free(sf);
	if (ret)
		return ret;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(p->xx));
	dv_hex_encode(c.digest, sizeof(c.digest), s->hash);
	return 0;
}

int dv_pub_content_hashes(struct pub *p, uint64_t rev)
{
	int ret;

	if (p->hashed && p->hash_rev == rev)
		return 0;
	p->hashed = false;
	for (size_t i = 0; i < p->n; i++) {
		ret = shard_content_hash(p, i, rev);
		if (ret)
			return ret;
	}
	p->hashed = true;
	p->hash_rev = rev;
	return 0;
}

static void sha_u64(EVP_MD_CTX *md, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	EVP_DigestUpdate(md, b, sizeof(b));
}

int dv_pub_manifest_ref(struct pub *p)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t digest[32];
	unsigned int dlen = 0;
	int ret = -ENOMEM;

	if (md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1) {
		sha_u64(md, p->n);
		for (size_t i = 0; i < p->n; i++) {
			sha_u64(md, strlen(p->shards[i].name));
			EVP_DigestUpdate(md, p->shards[i].name,
					 strlen(p->shards[i].name));
			sha_u64(md, 32);
			EVP_DigestUpdate(md, p->shards[i].sha256, 32);
		}
		ret = EVP_DigestFinal_ex(md, digest, &dlen) == 1 ? 0 : -EIO;
	}
	EVP_MD_CTX_free(md);
	if (ret == 0)
		dv_hex_encode(digest, 32, p->ref);
	return ret;
}

