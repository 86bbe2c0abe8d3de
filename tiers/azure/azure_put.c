/*
 * Uploads into an azure_blob tier (the install op; B5 runs it on an upload
 * worker). A blob that is already there with the right length is left
 * alone: another VM uploaded the same content hash, so the same bytes.
 *
 *   size ≤ DV_AZURE_PUT_BLOB_MAX   one Put Blob, streamed from the file;
 *   larger                         Put Block of DV_AZURE_BLOCK_BYTES pieces
 *                                  on up to DV_AZURE_BLOCK_THREADS threads,
 *                                  then Put Block List in order.
 *
 * A blob becomes visible only when Put Blob or Put Block List completes,
 * so a reader never sees a partial shard. Blocks of a failed upload stay
 * uncommitted, and the service discards them.
 */
#include "azure_impl.h"

#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"

#define MAX_BLOCKS 50000u           /* the service's limit per blob */
#define BLOCK_ID_LEN 12             /* base64 of "dv-NNNNNN" */
#define SHOWN_MAX 1024

static int put_blob(struct azure_tier *a, const char *hash, int fd,
		    uint64_t size)
{
	struct az_call c = {
		.method = "PUT", .hash = hash,
		.headers = { "x-ms-blob-type: BlockBlob",
			     "Content-Type: application/x-tar" },
		.body_fd = fd, .body_fd_len = size,
	};
	struct dv_http_response resp;

	return dv_azure_request(a, &c, &resp);
}

/* ---- block list ---- */

struct blocks {
	struct azure_tier *a;
	const char *hash;
	int fd;
	uint64_t size;
	uint64_t bsize;     /* bytes per block, the last one shorter */
	unsigned n;
	unsigned next;      /* next block to send; atomic */
	int err;            /* first failure; atomic */
};

/* Block ids must all have the same length within a blob. */
static void block_id(unsigned i, char out[BLOCK_ID_LEN + 1])
{
	char raw[10];

	snprintf(raw, sizeof(raw), "dv-%06u", i % 1000000u);
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)raw, 9);
}

static int put_block(struct blocks *b, unsigned i, char *buf)
{
	uint64_t off = (uint64_t)i * b->bsize;
	size_t len = (size_t)(b->size - off < b->bsize ? b->size - off : b->bsize);
	char id[BLOCK_ID_LEN + 1], *enc, *query;
	struct dv_http_response resp;
	struct az_call c = { .method = "PUT", .hash = b->hash };
	int ret = dv_pread_full(b->fd, buf, len, off);

	if (ret) {
		dv_err("tier '%s': cannot read block %u of %s for upload: %s",
		       b->a->base.name, i, b->hash, strerror(-ret));
		return ret;
	}
	block_id(i, id);
	enc = dv_az_url_encode(id, false);
	if (!enc || asprintf(&query, "comp=block&blockid=%s", enc) < 0) {
		free(enc);
		return -ENOMEM;
	}
	free(enc);
	c.query = query;
	c.body = buf;
	c.body_len = len;
	ret = dv_azure_request(b->a, &c, &resp);
	free(query);
	return ret;
}

static void *block_worker(void *arg)
{
	struct blocks *b = arg;
	char *buf = malloc(b->bsize);
	int ret = buf ? 0 : -ENOMEM;

	while (ret == 0 && !__atomic_load_n(&b->err, __ATOMIC_RELAXED)) {
		unsigned i = __atomic_fetch_add(&b->next, 1, __ATOMIC_RELAXED);

		if (i >= b->n)
			break;
		ret = put_block(b, i, buf);
	}
	if (ret) {
		int none = 0;

		__atomic_compare_exchange_n(&b->err, &none, ret, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	}
	free(buf);
	return NULL;
}

static int commit_blocks(struct blocks *b)
{
	static const char head[] =
		"<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
	static const char tail[] = "</BlockList>";
	size_t cap = sizeof(head) + sizeof(tail) +
		     (size_t)b->n * (BLOCK_ID_LEN + 17);
	char *xml = malloc(cap), id[BLOCK_ID_LEN + 1];
	struct dv_http_response resp;
	struct az_call c = {
		.method = "PUT", .hash = b->hash, .query = "comp=blocklist",
		.headers = { "Content-Type: application/xml" },
	};
	size_t len;
	int ret;

	if (!xml)
		return -ENOMEM;
	len = (size_t)snprintf(xml, cap, "%s", head);
	for (unsigned i = 0; i < b->n; i++) {
		block_id(i, id);
		len += (size_t)snprintf(xml + len, cap - len,
					"<Latest>%s</Latest>", id);
	}
	len += (size_t)snprintf(xml + len, cap - len, "%s", tail);
	c.body = xml;
	c.body_len = len;
	ret = dv_azure_request(b->a, &c, &resp);
	free(xml);
	return ret;
}

static int put_blocks(struct azure_tier *a, const char *hash, int fd,
		      uint64_t size)
{
	struct blocks b = { .a = a, .hash = hash, .fd = fd, .size = size };
	pthread_t th[DV_AZURE_BLOCK_THREADS];
	unsigned nth = 0;

	b.bsize = DV_AZURE_BLOCK_BYTES;
	if ((size + b.bsize - 1) / b.bsize > MAX_BLOCKS)
		b.bsize = ((size + MAX_BLOCKS - 1) / MAX_BLOCKS + (1u << 20) - 1) &
			  ~(uint64_t)((1u << 20) - 1);
	b.n = (unsigned)((size + b.bsize - 1) / b.bsize);
	while (nth < DV_AZURE_BLOCK_THREADS && nth < b.n &&
	       pthread_create(&th[nth], NULL, block_worker, &b) == 0)
		nth++;
	if (nth == 0)
		block_worker(&b);
	for (unsigned i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	if (b.err)
		return b.err;
	dv_debug("tier '%s': %s: %u blocks of %" PRIu64 " bytes sent on %u threads",
		 a->base.name, hash, b.n, b.bsize, nth ? nth : 1);
	return commit_blocks(&b);
}

int dv_azure_install(struct dv_tier *t, const char *hash, int src_fd,
		     const char *src_path, uint64_t size, unsigned flags)
{
	struct azure_tier *a = dv_azure_downcast(t);
	char shown[SHOWN_MAX];
	int ret;

	if (t->max_bytes && size > t->max_bytes)
		return -EFBIG;
	ret = dv_azure_lookup(t, hash, size);
	if (ret == 0) {
		dv_debug("tier '%s': %s is already there", t->name, hash);
		return 0;
	}
	if (ret != -ENOENT && ret != -EBADMSG)
		return ret;
	if (size <= DV_AZURE_PUT_BLOB_MAX)
		ret = put_blob(a, hash, src_fd, size);
	else
		ret = put_blocks(a, hash, src_fd, size);
	if (ret == -ENOENT) {
		dv_azure_shown(a, hash, shown, sizeof(shown));
		dv_err("tier '%s': cannot upload to %s: the container does not exist",
		       t->name, shown);
		return -EIO;
	}
	if (ret)
		return ret;
	dv_stat_add(&t->stats.installs, 1);
	dv_stat_add(&t->stats.bytes_in, size);
	return 0;
}
