/*
 * libFuzzer target: what an HTTP server sends back for a shard, without a
 * network. tiers/net/http.c's header callback (status lines, Content-Length,
 * Content-Range, ETag, the header limits) and body callback are driven as
 * libcurl drives them, into tiers/net/http_sink.c's shard callbacks (Range
 * resume checks, Content-Length checks, Range ignored → restart) and a real
 * verifying sink on a memfd.
 *
 * Both .c files are included so that their static functions are reachable
 * without exporting test hooks from tiers/; the library's http.o and
 * http_sink.o are then not linked (every symbol they define is here).
 *
 * Input: 8 bytes of parameters, then header lines separated by '\n' up to
 * an empty line (each is handed over with CRLF, as libcurl does: a status
 * line "HTTP/1.1 200 OK" is added first when the input has none), then the
 * body, handed over in pieces.
 *   byte 0: bit 0 a resumed request (Range: bytes=HAVE-), bit 1 max_body,
 *           bit 2 the sink checks a digest
 *   bytes 1-3: shard size - 1 (mod 256 KiB)   bytes 4-6: HAVE (mod size + 1)
 *   byte 7: body piece size - 1
 */
#include <sys/mman.h>

#include "tiers/net/http.c"
#include "tiers/net/http_sink.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__asan_default_options(void);

/*
 * Each run's sink allocates its 8 MiB ring: with ASan's default 256 MiB
 * quarantine that churns mmap/munmap. A small one runs ~1.6x faster.
 */
const char *__asan_default_options(void)
{
	return "quarantine_size_mb=4";
}

static int memfd = -1;
static uint8_t zeros[256 << 10];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	dv_log_set_level(DV_LOG_ERROR);
	memfd = memfd_create("fuzz-sink", MFD_CLOEXEC);
	return memfd < 0 ? -1 : 0;
}

static uint32_t u24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

/* Hands one header line to on_header as libcurl would: CRLF-terminated. */
static bool feed_header(struct xfer *x, const char *line, size_t len)
{
	char *buf = malloc(len + 2);
	size_t ret;

	if (!buf)
		return false;
	memcpy(buf, line, len);
	buf[len] = '\r';
	buf[len + 1] = '\n';
	ret = on_header(buf, 1, len + 2, x);
	free(buf);
	return ret == len + 2;
}

static void run_answer(const uint8_t *data, size_t size)
{
	uint8_t flags = data[0];
	uint64_t shard_size = (u24(data + 1) % sizeof(zeros)) + 1;
	uint64_t have = (flags & 1) ? u24(data + 4) % (shard_size + 1) : 0;
	size_t piece = (size_t)data[7] + 1;
	const char *p = (const char *)data + 8, *end = (const char *)data + size;
	struct dv_sink sink;
	uint8_t digest[32] = { 0 };
	struct dv_http_sink_get g;
	struct dv_http_request req;
	struct dv_http_response resp;
	struct xfer x;
	bool first = true;

	if (ftruncate(memfd, 0) || lseek(memfd, 0, SEEK_SET) < 0)
		return;
	if (dv_sink_init(&sink, memfd, shard_size, (flags & 4) ? digest : NULL))
		return;
	if (have && dv_sink_write(&sink, zeros, (size_t)have))
		goto out;
	memset(&g, 0, sizeof(g));
	g.who = "origin";
	g.shown = "http://127.0.0.1/shards/x.tar";
	g.size = shard_size;
	g.sink = &sink;
	memset(&req, 0, sizeof(req));
	req.url = g.shown;
	req.max_body = (flags & 2) ? shard_size : 0;
	if (dv_http_sink_prepare(&g, &req))
		goto out; /* complete already: nothing would be asked */
	memset(&resp, 0, sizeof(resp));
	memset(&x, 0, sizeof(x));
	x.req = &req;
	x.resp = &resp;

	/* Headers, up to an empty line. */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (first && (len < 5 || memcmp(p, "HTTP/", 5) != 0) &&
		    !feed_header(&x, "HTTP/1.1 200 OK", 15))
			goto out;
		first = false;
		if (len == 0 || (len == 1 && *p == '\r')) {
			p = nl ? nl + 1 : end;
			break;
		}
		if (!feed_header(&x, p, len))
			goto out;
		p = nl ? nl + 1 : end;
	}
	/* The end of the headers, then the body in pieces. */
	if (on_header((char *)"\r\n", 1, 2, &x) != 2)
		goto out;
	while (p < end) {
		size_t n = (size_t)(end - p) < piece ? (size_t)(end - p) : piece;
		char *buf = malloc(n);

		if (!buf)
			break;
		memcpy(buf, p, n);
		if (on_write(buf, 1, n, &x) != n) {
			free(buf);
			break;
		}
		free(buf);
		p += n;
	}
	/* What dv_http_sink_finish would conclude, then the sink's verdict. */
	if (resp.status >= 200 && resp.status <= 299 && x.started &&
	    sink.written > shard_size)
		abort(); /* the sink must never hold more than the shard */
	dv_sink_finish(&sink);
out:
	dv_sink_release(&sink);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 8)
		return 0;
	run_answer(data, size);
	/* The status errno mapping and the redaction of the URL shown. */
	dv_http_status_errno((long)data[1] * 3 + data[2]);
	return 0;
}
