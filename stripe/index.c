/*
 * The stripe index and its journal (index.h).
 *
 * Bytes, little endian. Header (64): "DVSJRNL1", version u32, header
 * length u32 (64), pool id[16], journal id[16], chunk bytes u64, XXH3-64 of
 * the 56 bytes before it. Record: magic u32 "DVR1", payload length u32,
 * payload, XXH3-64 of length and payload. Payloads: type u8 (1 ADD, 2 DEL),
 * hash length u8, hash; ADD goes on with size u64, chunk count u32 and per
 * chunk device u16, slot u64, xxh3 u64.
 *
 * Replay stops at the first record that is short, oversized or whose
 * checksum fails: a torn append of the crashed process. Everything after
 * it is cut off so that new records follow the last good one.
 */
#include "index.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "config/log.h"
#include "config/util.h"

#define JOURNAL_MAGIC "DVSJRNL1"
#define JOURNAL_VERSION 1u
#define HDR_BYTES 64u
#define REC_MAGIC 0x31525644u /* "DVR1" */
#define REC_FRAME 16u         /* magic, length, checksum */
#define REC_ADD 1u
#define REC_DEL 2u
#define CHUNK_REC 18u
#define MAX_PAYLOAD (64u << 20)
#define MAX_CHUNKS ((MAX_PAYLOAD - 80u) / CHUNK_REC)
#define COMPACT_SLACK (8u << 20)

uint64_t dv_stripe_key(const char *hash)
{
	return XXH3_64bits(hash, strlen(hash));
}

struct dv_stripe_entry *dv_stripe_entry_new(const char *hash, uint64_t size,
					    uint32_t nchunks)
{
	struct dv_stripe_entry *e;

	if (nchunks > MAX_CHUNKS || strlen(hash) > 64)
		return NULL;
	e = calloc(1, sizeof(*e) + nchunks * sizeof(e->chunks[0]) +
			  (nchunks / 64 + 1) * sizeof(uint64_t));
	if (!e)
		return NULL;
	e->checked = (uint64_t *)&e->chunks[nchunks];
	snprintf(e->hash, sizeof(e->hash), "%s", hash);
	e->size = size;
	e->nchunks = nchunks;
	e->lfu.key = dv_stripe_key(hash);
	return e;
}

/* ---- the table ---- */

static size_t bucket_of(const struct dv_stripe_index *ix, uint64_t key)
{
	return (size_t)(key & (ix->nbuckets - 1));
}

static int table_grow(struct dv_stripe_index *ix)
{
	size_t nb = ix->nbuckets ? ix->nbuckets * 2 : 256;
	struct dv_stripe_entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < ix->nbuckets; i++) {
		struct dv_stripe_entry *e = ix->buckets[i];

		while (e) {
			struct dv_stripe_entry *next = e->hnext;
			size_t k = (size_t)(e->lfu.key & (nb - 1));

			e->hnext = b[k];
			b[k] = e;
			e = next;
		}
	}
	free(ix->buckets);
	ix->buckets = b;
	ix->nbuckets = nb;
	return 0;
}

struct dv_stripe_entry *dv_stripe_index_find(struct dv_stripe_index *ix,
					     const char *hash)
{
	uint64_t key = dv_stripe_key(hash);

	if (!ix->nbuckets)
		return NULL;
	for (struct dv_stripe_entry *e = ix->buckets[bucket_of(ix, key)]; e;
	     e = e->hnext) {
		if (e->lfu.key == key && strcmp(e->hash, hash) == 0)
			return e;
	}
	return NULL;
}

static size_t encoded_len(const struct dv_stripe_entry *e, unsigned type)
{
	size_t n = REC_FRAME + 2 + strlen(e->hash);

	if (type == REC_ADD)
		n += 12 + (size_t)e->nchunks * CHUNK_REC;
	return n;
}

static int table_insert(struct dv_stripe_index *ix, struct dv_stripe_entry *e)
{
	size_t k;

	if (ix->n >= ix->nbuckets && table_grow(ix))
		return -ENOMEM;
	k = bucket_of(ix, e->lfu.key);
	e->hnext = ix->buckets[k];
	ix->buckets[k] = e;
	e->indexed = true;
	e->refs++;
	e->seq = ix->next_seq++;
	ix->n++;
	ix->live_bytes += encoded_len(e, REC_ADD);
	return 0;
}

static void table_remove(struct dv_stripe_index *ix, struct dv_stripe_entry *e)
{
	struct dv_stripe_entry **pp = &ix->buckets[bucket_of(ix, e->lfu.key)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (!*pp)
		return;
	*pp = e->hnext;
	e->hnext = NULL;
	e->indexed = false;
	ix->n--;
	ix->live_bytes -= encoded_len(e, REC_ADD);
}

int dv_stripe_index_list(struct dv_stripe_index *ix,
			 struct dv_stripe_entry ***out, size_t *n)
{
	struct dv_stripe_entry **v = calloc(ix->n ? ix->n : 1, sizeof(*v));
	size_t k = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < ix->nbuckets; i++) {
		for (struct dv_stripe_entry *e = ix->buckets[i]; e; e = e->hnext)
			v[k++] = e;
	}
	*out = v;
	*n = k;
	return 0;
}

/* ---- encoding ---- */

static void encode_hdr(const struct dv_stripe_journal_hdr *h, uint8_t *p)
{
	memset(p, 0, HDR_BYTES);
	memcpy(p, JOURNAL_MAGIC, 8);
	dv_put_le32(p + 8, JOURNAL_VERSION);
	dv_put_le32(p + 12, HDR_BYTES);
	memcpy(p + 16, h->pool_id, DV_STRIPE_ID_BYTES);
	memcpy(p + 32, h->journal_id, DV_STRIPE_ID_BYTES);
	dv_put_le64(p + 48, h->chunk_bytes);
	dv_put_le64(p + 56, XXH3_64bits(p, 56));
}

static int decode_hdr(const uint8_t *p, struct dv_stripe_journal_hdr *h)
{
	if (memcmp(p, JOURNAL_MAGIC, 8) != 0 ||
	    dv_get_le32(p + 8) != JOURNAL_VERSION ||
	    dv_get_le32(p + 12) != HDR_BYTES ||
	    dv_get_le64(p + 56) != XXH3_64bits(p, 56))
		return -EBADMSG;
	memcpy(h->pool_id, p + 16, DV_STRIPE_ID_BYTES);
	memcpy(h->journal_id, p + 32, DV_STRIPE_ID_BYTES);
	h->chunk_bytes = dv_get_le64(p + 48);
	return 0;
}

/* Encodes one record of @e into @p (encoded_len bytes). */
static size_t encode_rec(const struct dv_stripe_entry *e, unsigned type,
			 uint8_t *p)
{
	size_t hl = strlen(e->hash);
	uint8_t *q = p + 8;

	*q++ = (uint8_t)type;
	*q++ = (uint8_t)hl;
	memcpy(q, e->hash, hl);
	q += hl;
	if (type == REC_ADD) {
		dv_put_le64(q, e->size);
		dv_put_le32(q + 8, e->nchunks);
		q += 12;
		for (uint32_t i = 0; i < e->nchunks; i++, q += CHUNK_REC) {
			dv_put_le16(q, e->chunks[i].dev);
			dv_put_le64(q + 2, e->chunks[i].slot);
			dv_put_le64(q + 10, e->chunks[i].xxh);
		}
	}
	dv_put_le32(p, REC_MAGIC);
	dv_put_le32(p + 4, (uint32_t)(q - p - 8));
	dv_put_le64(q, XXH3_64bits(p + 4, (size_t)(q - p - 4)));
	return (size_t)(q + 8 - p);
}

/*
 * Applies one verified payload. A record that is well framed but makes no
 * sense (bad hash, chunk count) is skipped with a warning: it cannot be a
 * torn write, whose checksum would fail.
 */
static int apply_rec(struct dv_stripe_index *ix, const uint8_t *q, size_t len)
{
	struct dv_stripe_entry *e, *old;
	char hash[65];
	size_t hl;
	uint64_t size;
	uint32_t nchunks;

	if (len < 2)
		goto bad;
	hl = q[1];
	if (hl > 64 || 2 + hl > len)
		goto bad;
	memcpy(hash, q + 2, hl);
	hash[hl] = '\0';
	if (!dv_valid_hash(hash))
		goto bad;
	old = dv_stripe_index_find(ix, hash);
	if (q[0] == REC_DEL) {
		if (old) {
			table_remove(ix, old);
			free(old);
		}
		return 0;
	}
	if (q[0] != REC_ADD || len < 2 + hl + 12)
		goto bad;
	q += 2 + hl;
	size = dv_get_le64(q);
	nchunks = dv_get_le32(q + 8);
	if (len != 2 + hl + 12 + (size_t)nchunks * CHUNK_REC ||
	    nchunks != dv_stripe_nchunks(size, ix->hdr.chunk_bytes))
		goto bad;
	e = dv_stripe_entry_new(hash, size, nchunks);
	if (!e)
		return -ENOMEM;
	q += 12;
	for (uint32_t i = 0; i < nchunks; i++, q += CHUNK_REC) {
		e->chunks[i].dev = dv_get_le16(q);
		e->chunks[i].slot = dv_get_le64(q + 2);
		e->chunks[i].xxh = dv_get_le64(q + 10);
	}
	if (old) {
		table_remove(ix, old);
		free(old);
	}
	if (table_insert(ix, e)) {
		free(e);
		return -ENOMEM;
	}
	return 0;
bad:
	dv_warn("%s: skipping a malformed record", ix->path);
	return 0;
}

/* ---- replay ---- */

/* Reads records from ix->bytes on; stops at the first bad one. */
static int replay(struct dv_stripe_index *ix, uint64_t file_len)
{
	uint8_t frame[8];
	uint8_t *buf = NULL;
	size_t cap = 0;
	int ret = 0;

	while (ix->bytes + REC_FRAME <= file_len) {
		uint32_t len;

		if (dv_pread_full(ix->fd, frame, 8, ix->bytes) ||
		    dv_get_le32(frame) != REC_MAGIC)
			break;
		len = dv_get_le32(frame + 4);
		if (len > MAX_PAYLOAD || ix->bytes + REC_FRAME + len > file_len)
			break;
		if (len + 12 > cap) {
			uint8_t *nb = realloc(buf, len + 12);

			if (!nb) {
				ret = -ENOMEM;
				break;
			}
			buf = nb;
			cap = len + 12;
		}
		memcpy(buf, frame + 4, 4);
		if (dv_pread_full(ix->fd, buf + 4, len + 8, ix->bytes + 8) ||
		    dv_get_le64(buf + 4 + len) != XXH3_64bits(buf, len + 4))
			break;
		ret = apply_rec(ix, buf + 4, len);
		if (ret)
			break;
		ix->bytes += REC_FRAME + len;
	}
	free(buf);
	return ret;
}

static void index_init(struct dv_stripe_index *ix)
{
	memset(ix, 0, sizeof(*ix));
	ix->fd = -1;
	ix->next_seq = 1;
}

static bool id_zero(const uint8_t *id)
{
	for (unsigned i = 0; i < DV_STRIPE_ID_BYTES; i++) {
		if (id[i])
			return false;
	}
	return true;
}

static bool hdr_matches(const struct dv_stripe_journal_hdr *have,
			const struct dv_stripe_journal_hdr *want)
{
	return memcmp(have->pool_id, want->pool_id, DV_STRIPE_ID_BYTES) == 0 &&
	       (id_zero(want->journal_id) ||
		memcmp(have->journal_id, want->journal_id,
		       DV_STRIPE_ID_BYTES) == 0) &&
	       have->chunk_bytes == want->chunk_bytes;
}

int dv_stripe_index_load(struct dv_stripe_index *ix, const char *path,
			 const struct dv_stripe_journal_hdr *want)
{
	uint8_t hdr[HDR_BYTES];
	off_t len;
	int ret;

	index_init(ix);
	ix->path = strdup(path);
	if (!ix->path)
		return -ENOMEM;
	ix->fd = open(path, O_RDWR | O_CLOEXEC);
	if (ix->fd < 0) {
		ret = -errno;
		goto fail;
	}
	len = lseek(ix->fd, 0, SEEK_END);
	if (len < (off_t)HDR_BYTES) {
		ret = -EBADMSG;
		goto fail;
	}
	ret = dv_pread_full(ix->fd, hdr, HDR_BYTES, 0);
	if (!ret)
		ret = decode_hdr(hdr, &ix->hdr);
	if (ret)
		goto fail;
	if (!hdr_matches(&ix->hdr, want)) {
		ret = -ENOENT;
		goto fail;
	}
	ix->bytes = HDR_BYTES;
	ret = replay(ix, (uint64_t)len);
	if (ret)
		goto fail;
	ix->dropped_bytes = (uint64_t)len - ix->bytes;
	if (ix->dropped_bytes) {
		dv_warn("%s: dropping a torn last record (%" PRIu64 " bytes)",
			path, ix->dropped_bytes);
		if (ftruncate(ix->fd, (off_t)ix->bytes) || fdatasync(ix->fd)) {
			ret = -errno;
			goto fail;
		}
	}
	return 0;
fail:
	dv_stripe_index_close(ix);
	return ret;
}

static int fsync_parent(const char *path)
{
	char dir[4096];
	char *slash;
	int fd, ret = 0;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * Writes a journal of @hdr and the @n entries @v (in that order) to a new
 * file renamed over @path. Returns its fd (opened read-write) and length.
 */
static int write_journal(const char *path, const struct dv_stripe_journal_hdr *hdr,
			 struct dv_stripe_entry **v, size_t n, uint64_t *len)
{
	char tmp[4096];
	uint8_t h[HDR_BYTES];
	uint8_t *rec = NULL;
	size_t cap = 0;
	uint64_t off = HDR_BYTES;
	int fd, ret;

	if (snprintf(tmp, sizeof(tmp), "%s.new", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	encode_hdr(hdr, h);
	ret = dv_pwrite_full(fd, h, HDR_BYTES, 0);
	for (size_t i = 0; i < n && !ret; i++) {
		size_t need = encoded_len(v[i], REC_ADD);

		if (need > cap) {
			uint8_t *nr = realloc(rec, need);

			if (!nr) {
				ret = -ENOMEM;
				break;
			}
			rec = nr;
			cap = need;
		}
		encode_rec(v[i], REC_ADD, rec);
		ret = dv_pwrite_full(fd, rec, need, off);
		off += need;
	}
	free(rec);
	if (!ret && fdatasync(fd))
		ret = -errno;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (!ret)
		ret = fsync_parent(path);
	if (ret) {
		unlink(tmp);
		close(fd);
		return ret;
	}
	*len = off;
	return fd;
}

int dv_stripe_index_create(struct dv_stripe_index *ix, const char *path,
			   const struct dv_stripe_journal_hdr *hdr)
{
	int fd;

	index_init(ix);
	ix->hdr = *hdr;
	ix->path = strdup(path);
	if (!ix->path)
		return -ENOMEM;
	fd = write_journal(path, hdr, NULL, 0, &ix->bytes);
	if (fd < 0) {
		dv_stripe_index_close(ix);
		return fd;
	}
	ix->fd = fd;
	return 0;
}

void dv_stripe_index_close(struct dv_stripe_index *ix)
{
	for (size_t i = 0; i < ix->nbuckets; i++) {
		struct dv_stripe_entry *e = ix->buckets[i];

		while (e) {
			struct dv_stripe_entry *next = e->hnext;

			free(e);
			e = next;
		}
	}
	free(ix->buckets);
	ix->buckets = NULL;
	ix->nbuckets = ix->n = 0;
	if (ix->fd >= 0)
		close(ix->fd);
	ix->fd = -1;
	free(ix->path);
	ix->path = NULL;
}

/* ---- appends ---- */

/* Appends @len bytes and makes them durable; on failure, cuts them off. */
static int append(struct dv_stripe_index *ix, const uint8_t *buf, size_t len)
{
	int ret = dv_pwrite_full(ix->fd, buf, len, ix->bytes);

	if (!ret && fdatasync(ix->fd))
		ret = -errno;
	if (ret) {
		if (ftruncate(ix->fd, (off_t)ix->bytes) == 0)
			fdatasync(ix->fd);
		dv_err("%s: cannot append to the journal: %s", ix->path,
		       strerror(-ret));
		return ret;
	}
	ix->bytes += len;
	return 0;
}

int dv_stripe_index_commit(struct dv_stripe_index *ix,
			   struct dv_stripe_entry *e)
{
	size_t len = encoded_len(e, REC_ADD);
	uint8_t *rec = malloc(len);
	int ret;

	if (!rec)
		return -ENOMEM;
	if (ix->n >= ix->nbuckets && table_grow(ix)) {
		free(rec);
		return -ENOMEM;
	}
	encode_rec(e, REC_ADD, rec);
	ret = append(ix, rec, len);
	free(rec);
	if (ret)
		return ret;
	return table_insert(ix, e); /* cannot fail: room was made above */
}

int dv_stripe_index_delete(struct dv_stripe_index *ix,
			   struct dv_stripe_entry **v, size_t n)
{
	size_t len = 0, off = 0;
	uint8_t *buf;
	int ret;

	for (size_t i = 0; i < n; i++) {
		table_remove(ix, v[i]);
		len += encoded_len(v[i], REC_DEL);
	}
	buf = malloc(len ? len : 1);
	ret = buf ? 0 : -ENOMEM;
	for (size_t i = 0; i < n && buf; i++)
		off += encode_rec(v[i], REC_DEL, buf + off);
	if (!ret && len)
		ret = append(ix, buf, len);
	free(buf);
	for (size_t i = 0; i < n && ret; i++)
		v[i]->leak = true;
	return ret;
}

/* ---- compaction ---- */

bool dv_stripe_index_bloated(const struct dv_stripe_index *ix)
{
	return ix->bytes > HDR_BYTES + COMPACT_SLACK + 2 * ix->live_bytes;
}

static int by_seq(const void *a, const void *b)
{
	const struct dv_stripe_entry *x = *(struct dv_stripe_entry *const *)a;
	const struct dv_stripe_entry *y = *(struct dv_stripe_entry *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int dv_stripe_index_compact(struct dv_stripe_index *ix)
{
	struct dv_stripe_entry **v;
	uint64_t len;
	size_t n;
	int ret, fd;

	ret = dv_stripe_index_list(ix, &v, &n);
	if (ret)
		return ret;
	if (n > 1)
		qsort(v, n, sizeof(*v), by_seq);
	fd = write_journal(ix->path, &ix->hdr, v, n, &len);
	free(v);
	if (fd < 0) {
		dv_warn("%s: cannot compact the journal: %s", ix->path,
			strerror(-fd));
		return fd;
	}
	close(ix->fd);
	ix->fd = fd;
	ix->bytes = len;
	return 0;
}
