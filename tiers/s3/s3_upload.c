/*
 * Uploads (see dv_s3_put_file in s3_client.h).
 *
 * Up to multipart_threshold: one PUT streamed from the file. Above it, a
 * multipart upload: CreateMultipartUpload, parts of part_size bytes (more
 * when 10,000 parts would not hold the file) sent by up to part_threads
 * threads, CompleteMultipartUpload with the parts' ETags in order. A part
 * is read into memory (pread) so that it can carry its SHA-256 and be
 * resent as is; memory in use is at most part_threads parts. Any failure
 * aborts the upload, so that no parts linger in the bucket (and on its
 * bill). S3 can answer CompleteMultipartUpload with 200 and an <Error>
 * body: that is a failure too.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/log.h"
#include "config/util.h"
#include "s3_client.h"
#include "sigv4.h"

#define UPLOAD_ID_MAX 1024
#define XML_MAX (64u << 10)
#define HASH_CHUNK (1u << 20)

/* SHA-256 of the first @len bytes of @fd, as hex. */
static int hash_fd(int fd, uint64_t len, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char *buf = malloc(HASH_CHUNK);
	unsigned char digest[32];
	uint64_t off = 0;
	int ret = -ENOMEM;

	if (!md || !buf || !EVP_DigestInit_ex(md, EVP_sha256(), NULL))
		goto out;
	while (off < len) {
		size_t n = len - off < HASH_CHUNK ? (size_t)(len - off) : HASH_CHUNK;

		ret = dv_pread_full(fd, buf, n, off);
		if (ret)
			goto out;
		EVP_DigestUpdate(md, buf, n);
		off += n;
	}
	EVP_DigestFinal_ex(md, digest, NULL);
	for (size_t i = 0; i < 32; i++) {
		out[2 * i] = hex[digest[i] >> 4];
		out[2 * i + 1] = hex[digest[i] & 15];
	}
	out[64] = '\0';
	ret = 0;
out:
	EVP_MD_CTX_free(md);
	free(buf);
	return ret;
}

/* ---- one PUT ---- */

static int put_single(struct dv_s3 *s, const char *key, int fd, uint64_t size)
{
	char sha[65];
	struct dv_http_response resp;
	struct dv_s3_call call = {
		.method = "PUT",
		.key = key,
		.payload_sha256 = DV_SIGV4_UNSIGNED_PAYLOAD,
		.req = { .body_fd = fd, .body_fd_len = size },
	};
	int ret;

	if (s->sign_payload) {
		ret = hash_fd(fd, size, sha);
		if (ret)
			return ret;
		call.payload_sha256 = sha;
	}
	if (size == 0) {
		call.req.body = "";
		call.payload_sha256 = DV_SIGV4_EMPTY_SHA256;
	}
	return dv_s3_run(s, &call, "PUT", DV_LOG_ERROR, &resp);
}

/* ---- multipart ---- */

struct part {
	char etag[DV_HTTP_ETAG_MAX];
};

struct multipart {
	struct dv_s3 *s;
	const char *key;
	int fd;
	uint64_t size;
	uint64_t part_size;
	unsigned nparts;
	char upload_id[UPLOAD_ID_MAX];
	struct part *parts;

	pthread_mutex_t lock;
	unsigned next;   /* protected by lock */
	int err;         /* first failure; protected by lock */
};

static int xml_text(const char *xml, const char *name, char *out, size_t cap)
{
	char open[64], close[64];
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", name);
	snprintf(close, sizeof(close), "</%s>", name);
	a = strstr(xml, open);
	if (!a)
		return -EPROTO;
	a += strlen(open);
	b = strstr(a, close);
	if (!b || (size_t)(b - a) >= cap || b == a)
		return -EPROTO;
	memcpy(out, a, (size_t)(b - a));
	out[b - a] = '\0';
	return 0;
}

static int create_upload(struct multipart *m)
{
	const struct dv_sigv4_param q[] = { { "uploads", NULL } };
	struct dv_http_buf buf;
	struct dv_http_response resp;
	struct dv_s3_call call = {
		.method = "POST", .key = m->key, .params = q, .nparams = 1,
		.req = { .body = "", .body_len = 0 }, .buf = &buf,
	};
	int ret;

	dv_http_buf_init(&buf, XML_MAX);
	ret = dv_s3_run(m->s, &call, "CreateMultipartUpload", DV_LOG_ERROR,
			&resp);
	if (ret == 0 && (!buf.data ||
			 xml_text(buf.data, "UploadId", m->upload_id,
				  sizeof(m->upload_id)))) {
		dv_err("%s: CreateMultipartUpload answered without an UploadId",
		       m->s->who);
		ret = -EPROTO;
	}
	dv_http_buf_release(&buf);
	return ret;
}

static int put_part(struct multipart *m, unsigned i, char *buf)
{
	char num[16], sha[65];
	uint64_t off = (uint64_t)i * m->part_size;
	size_t len = (size_t)(m->size - off < m->part_size ? m->size - off
							   : m->part_size);
	const struct dv_sigv4_param q[] = { { "partNumber", num },
					    { "uploadId", m->upload_id } };
	struct dv_http_response resp;
	struct dv_s3_call call = {
		.method = "PUT", .key = m->key, .params = q, .nparams = 2,
		.payload_sha256 = sha,
		.req = { .body = buf, .body_len = len },
	};
	int ret = dv_pread_full(m->fd, buf, len, off);

	if (ret)
		return ret;
	snprintf(num, sizeof(num), "%u", i + 1);
	dv_sigv4_sha256_hex(buf, len, sha);
	ret = dv_s3_run(m->s, &call, "UploadPart", DV_LOG_ERROR, &resp);
	if (ret == 0 && !resp.etag[0]) {
		dv_err("%s: UploadPart %u answered without an ETag", m->s->who,
		       i + 1);
		ret = -EPROTO;
	}
	if (ret == 0)
		snprintf(m->parts[i].etag, sizeof(m->parts[i].etag), "%s",
			 resp.etag);
	return ret;
}

/* A worker: takes the next part until none is left or one failed. */
static void *part_worker(void *arg)
{
	struct multipart *m = arg;
	char *buf = malloc(m->part_size);

	for (;;) {
		unsigned i;
		int ret;

		pthread_mutex_lock(&m->lock);
		if (!buf && !m->err)
			m->err = -ENOMEM;
		i = m->next++;
		if (m->err || i >= m->nparts) {
			pthread_mutex_unlock(&m->lock);
			break;
		}
		pthread_mutex_unlock(&m->lock);
		ret = put_part(m, i, buf);
		if (ret) {
			pthread_mutex_lock(&m->lock);
			if (!m->err)
				m->err = ret;
			pthread_mutex_unlock(&m->lock);
		}
	}
	free(buf);
	return NULL;
}

static int upload_parts(struct multipart *m)
{
	pthread_t threads[16];
	unsigned n = m->s->part_threads, started = 0;

	if (n > m->nparts)
		n = m->nparts;
	if (n > sizeof(threads) / sizeof(threads[0]))
		n = sizeof(threads) / sizeof(threads[0]);
	if (n == 0)
		n = 1;
	for (; started < n; started++) {
		if (pthread_create(&threads[started], NULL, part_worker, m))
			break;
	}
	/* With no thread at all, this one does the work. */
	if (started == 0)
		part_worker(m);
	for (unsigned i = 0; i < started; i++)
		pthread_join(threads[i], NULL);
	return m->err;
}

static char *complete_xml(const struct multipart *m)
{
	char *xml = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&xml, &len);

	if (!f)
		return NULL;
	fputs("<CompleteMultipartUpload>", f);
	for (unsigned i = 0; i < m->nparts; i++)
		fprintf(f, "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
			i + 1, m->parts[i].etag);
	fputs("</CompleteMultipartUpload>", f);
	if (fclose(f) != 0) {
		free(xml);
		return NULL;
	}
	return xml;
}

static int complete_upload(struct multipart *m)
{
	static const char *const headers[] = { "Content-Type: application/xml", NULL };
	const struct dv_sigv4_param q[] = { { "uploadId", m->upload_id } };
	struct dv_http_buf buf;
	struct dv_http_response resp;
	char sha[65], code[64];
	char *xml = complete_xml(m);
	struct dv_s3_call call = {
		.method = "POST", .key = m->key, .params = q, .nparams = 1,
		.headers = headers, .payload_sha256 = sha, .buf = &buf,
	};
	int ret;

	if (!xml)
		return -ENOMEM;
	dv_sigv4_sha256_hex(xml, strlen(xml), sha);
	dv_http_buf_init(&buf, XML_MAX);
	call.req.body = xml;
	call.req.body_len = strlen(xml);
	ret = dv_s3_run(m->s, &call, "CompleteMultipartUpload", DV_LOG_ERROR,
			&resp);
	/* A 200 that says <Error> failed all the same. */
	if (ret == 0 && buf.data && strstr(buf.data, "<Error>")) {
		dv_aws_error_code(buf.data, code, sizeof(code));
		dv_err("%s: CompleteMultipartUpload failed: %s", m->s->who,
		       code[0] ? code : "error in a 200 answer");
		ret = -EIO;
	}
	dv_http_buf_release(&buf);
	free(xml);
	return ret;
}

static void abort_upload(struct multipart *m)
{
	const struct dv_sigv4_param q[] = { { "uploadId", m->upload_id } };
	struct dv_http_response resp;
	struct dv_s3_call call = {
		.method = "DELETE", .key = m->key, .params = q, .nparams = 1,
	};

	if (dv_s3_run(m->s, &call, "AbortMultipartUpload", DV_LOG_ERROR,
		      &resp) == 0)
		dv_info("%s: aborted the multipart upload of %s", m->s->who,
			m->key);
}

static uint64_t pick_part_size(const struct dv_s3 *s, uint64_t size)
{
	uint64_t part = s->part_size ? s->part_size : DV_S3_PART_SIZE;
	uint64_t need = (size + DV_S3_MAX_PARTS - 1) / DV_S3_MAX_PARTS;

	if (part < need) /* round up to MiB */
		part = (need + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	return part;
}

static int put_multipart(struct dv_s3 *s, const char *key, int fd,
			 uint64_t size)
{
	struct multipart m = { .s = s, .key = key, .fd = fd, .size = size };
	int ret;

	m.part_size = pick_part_size(s, size);
	m.nparts = (unsigned)((size + m.part_size - 1) / m.part_size);
	m.parts = calloc(m.nparts, sizeof(*m.parts));
	if (!m.parts)
		return -ENOMEM;
	pthread_mutex_init(&m.lock, NULL);
	ret = create_upload(&m);
	if (ret)
		goto out;
	dv_debug("%s: multipart upload of %s: %u parts of %" PRIu64 " bytes",
		 s->who, key, m.nparts, m.part_size);
	ret = upload_parts(&m);
	if (ret == 0)
		ret = complete_upload(&m);
	if (ret)
		abort_upload(&m);
out:
	pthread_mutex_destroy(&m.lock);
	free(m.parts);
	return ret;
}

int dv_s3_put_file(struct dv_s3 *s, const char *key, int fd, uint64_t size)
{
	if (size > s->multipart_threshold)
		return put_multipart(s, key, fd, size);
	return put_single(s, key, fd, size);
}
