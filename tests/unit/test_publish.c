/*
 * datavoctl publish: the origin it writes, its identities (checked against
 * an independent implementation of the encoding in publish.h), revisions,
 * and the tar header kinds it reads.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include "config/util.h"
#include "fs/namespace/manifest.h"
#include "fs/ctl/publish.h"
#include "tiers/core/chunks.h"
#include "tiers/core/digest.h"
#include "tiers/core/sink.h"
#include "helpers.h"

static char err[1024];

/* ---- a tiny ustar writer ---- */

struct tarbuf {
	unsigned char *p;
	size_t len;
};

static void tar_block(struct tarbuf *t, const void *data, size_t len)
{
	size_t padded = (len + 511) & ~(size_t)511;

	t->p = realloc(t->p, t->len + padded);
	memset(t->p + t->len, 0, padded);
	memcpy(t->p + t->len, data, len);
	t->len += padded;
}

/* One regular member; a name over 100 bytes goes into the ustar prefix. */
static void tar_add(struct tarbuf *t, const char *name, const char *data)
{
	unsigned char h[512] = { 0 };
	size_t nlen = strlen(name), split = 0;
	unsigned sum = 0;

	if (nlen > 100) {
		split = (size_t)(strchr(name + nlen - 100, '/') - name);
		memcpy(h + 345, name, split);
		memcpy(h, name + split + 1, nlen - split - 1);
	} else {
		memcpy(h, name, nlen);
	}
	memcpy(h + 100, "0000644", 8);
	memcpy(h + 108, "0000000", 8);
	memcpy(h + 116, "0000000", 8);
	snprintf((char *)h + 124, 12, "%011o", (unsigned)strlen(data));
	memcpy(h + 136, "00000000000", 12);
	h[156] = '0';
	memcpy(h + 257, "ustar\0" "00", 8);
	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	tar_block(t, h, 512);
	if (*data)
		tar_block(t, data, strlen(data));
}

static void tar_write(struct tarbuf *t, const char *path)
{
	unsigned char zero[1024] = { 0 };

	tar_block(t, zero, sizeof(zero));
	dv_test_write_file(path, t->p, t->len);
	free(t->p);
	t->p = NULL;
	t->len = 0;
}

/* SRC/shard-0I.tar: samples I*10 .. I*10+2, each .json and .txt. */
static void make_shard(const char *src, int i, const char *salt)
{
	struct tarbuf t = { 0 };
	char name[64], data[64], path[512];

	for (int s = 0; s < 3; s++) {
		snprintf(name, sizeof(name), "%06d.json", i * 10 + s);
		snprintf(data, sizeof(data), "{\"i\": %d%s}", i * 10 + s, salt);
		tar_add(&t, name, data);
		snprintf(name, sizeof(name), "%06d.txt", i * 10 + s);
		tar_add(&t, name, "text");
	}
	snprintf(path, sizeof(path), "%s/shard-%02d.tar", src, i);
	tar_write(&t, path);
}

static char *make_src(int n)
{
	char *src = dv_test_tmpdir("pubsrc");

	for (int i = 0; i < n; i++)
		make_shard(src, i, "");
	return src;
}

/* ---- the encoding of publish.h, written again ---- */

static void enc_u64(XXH3_state_t *x, uint64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	XXH3_128bits_update(x, b, 8);
}

static void enc_str(XXH3_state_t *x, const char *s, size_t len)
{
	enc_u64(x, len);
	XXH3_128bits_update(x, s, len);
}

/* @ids: sample ids, NULL-terminated (already collapsed). */
static void expected_hash(const char *ref, uint64_t rev, uint64_t index,
			  const char *const *keys, const char *const *ids,
			  char out[33])
{
	XXH3_state_t *x = XXH3_createState();
	XXH128_canonical_t c;
	size_t nkeys = 0;

	while (keys[nkeys])
		nkeys++;
	XXH3_128bits_reset(x);
	enc_str(x, ref, 64);
	enc_u64(x, rev);
	enc_u64(x, index);
	enc_u64(x, nkeys);
	for (size_t k = 0; k < nkeys; k++)
		enc_str(x, keys[k], strlen(keys[k]));
	for (; *ids; ids++)
		enc_str(x, *ids, strlen(*ids));
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(x));
	dv_hex_encode(c.digest, 16, out);
	XXH3_freeState(x);
}

/* SHA-256 over (count, (name, sha256) …) of the source tars, in name order. */
static void expected_ref(const struct dv_manifest *m, char out[65])
{
	uint8_t buf[8192], d[32];
	size_t len = 0;

	memset(buf, 0, 8);
	buf[0] = (uint8_t)m->nshards;
	len = 8;
	for (size_t i = 0; i < m->nshards; i++) {
		const char *name = dv_manifest_name(m, &m->shards[i]);

		memset(buf + len, 0, 8);
		buf[len] = (uint8_t)strlen(name);
		len += 8;
		memcpy(buf + len, name, strlen(name));
		len += strlen(name);
		memset(buf + len, 0, 8);
		buf[len] = 32;
		len += 8;
		memcpy(buf + len, m->shards[i].sha256, 32);
		len += 32;
	}
	ck_assert_int_eq(EVP_Digest(buf, len, d, NULL, EVP_sha256(), NULL), 1);
	dv_hex_encode(d, 32, out);
}

/* ---- helpers ---- */

static struct dv_manifest *load(const char *origin, const char *rel,
				const char *dataset)
{
	char path[1024], *body;
	struct dv_manifest *m;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", origin, rel);
	body = dv_test_read_file(path, &len);
	ck_assert_msg(body != NULL, "%s missing", path);
	ck_assert_int_eq(dv_manifest_parse(body, len, dataset, &m, err,
					   sizeof(err)), 0);
	free(body);
	return m;
}

static void assert_datasets(const char *origin, const char *expect)
{
	char path[1024], *body, got[1024] = "", **names;
	size_t len, n;

	snprintf(path, sizeof(path), "%s/datasets.json", origin);
	body = dv_test_read_file(path, &len);
	ck_assert_ptr_nonnull(body);
	ck_assert_int_eq(dv_datasets_parse(body, len, &names, &n, err,
					   sizeof(err)), 0);
	for (size_t i = 0; i < n; i++) {
		strcat(got, i ? "," : "");
		strcat(got, names[i]);
	}
	ck_assert_str_eq(got, expect);
	dv_datasets_free(names);
	free(body);
}

static void assert_python_json(const char *path)
{
	char cmd[1200];

	if (system("command -v python3 >/dev/null 2>&1") != 0)
		return;
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '%s'",
		 path);
	ck_assert_msg(system(cmd) == 0, "python3 cannot parse %s", path);
}

static int publish(const char *dataset, const char *src, const char *origin,
		   const char *const *keys, uint64_t rev, bool copy,
		   struct dv_publish_result *res)
{
	struct dv_publish_opts o = { dataset, rev, keys, 0, src, origin, copy, 0, false };

	while (keys && keys[o.nkeys])
		o.nkeys++;
	err[0] = '\0';
	return dv_publish(&o, res, err, sizeof(err));
}

static const char *const keys[] = { "txt", "json", "txt", NULL };
static const char *const sorted_keys[] = { "json", "txt", NULL };

/* ---- tests ---- */

START_TEST(test_publish_origin)
{
	char *src = make_src(8), *origin = dv_test_tmpdir("puborigin");
	char path[1024], ref[65], want[33], ids[3][16];
	const char *idp[4];
	struct dv_publish_result res;
	struct dv_manifest *m, *r1;
	struct stat st;
	char *a, *b, line[512];
	size_t alen, blen;

	ck_assert_int_eq(publish("demo/train", src, origin, keys, 0, false, &res), 0);
	ck_assert(!res.unchanged);
	ck_assert_uint_eq(res.revision, 1);
	ck_assert_uint_eq(res.nshards, 8);
	ck_assert_uint_eq(res.linked + res.copied, 8);
	dv_publish_describe(&(struct dv_publish_opts){ .dataset = "demo/train" },
			    &res, line, sizeof(line));
	ck_assert_msg(strstr(line, "demo/train: revision 1, 8 shards") == line,
		      "%s", line);

	assert_datasets(origin, "demo/train");
	m = load(origin, "demo/train/manifest.json", "demo/train");
	ck_assert_uint_eq(m->revision, 1);
	ck_assert_uint_eq(m->nshards, 8);
	ck_assert_uint_eq(m->nkeys, 2);
	ck_assert_str_eq(m->keys[0], "json");
	ck_assert_str_eq(m->keys[1], "txt");
	ck_assert_str_eq(m->manifest_ref, res.manifest_ref);
	expected_ref(m, ref);
	ck_assert_str_eq(m->manifest_ref, ref);

	/* revisions/1.json is the same document. */
	snprintf(path, sizeof(path), "%s/demo/train/manifest.json", origin);
	a = dv_test_read_file(path, &alen);
	assert_python_json(path);
	snprintf(path, sizeof(path), "%s/demo/train/revisions/1.json", origin);
	b = dv_test_read_file(path, &blen);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(alen, blen);
	ck_assert_mem_eq(a, b, alen);
	free(a);
	free(b);
	snprintf(path, sizeof(path), "%s/datasets.json", origin);
	assert_python_json(path);
	r1 = load(origin, "demo/train/revisions/1.json", "demo/train");
	dv_manifest_free(r1);

	for (size_t i = 0; i < 8; i++) {
		const struct dv_manifest_shard *s = &m->shards[i];
		uint8_t sha[32];
		int fd;

		snprintf(path, sizeof(path), "shard-%02zu.tar", i);
		ck_assert_str_eq(dv_manifest_name(m, s), path);
		ck_assert_uint_eq(s->index, i);
		ck_assert_uint_eq(strlen(s->hash), 32);
		snprintf(path, sizeof(path), "%s/shards/%s.tar", origin, s->hash);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_mode & 0777, 0644);
		ck_assert_uint_eq((uint64_t)st.st_size, s->size);
		fd = open(path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(dv_sha256_fd(fd, sha), 0);
		close(fd);
		ck_assert_mem_eq(sha, s->sha256, 32);

		/* The content hash, from the documented encoding. */
		for (int j = 0; j < 3; j++) {
			snprintf(ids[j], sizeof(ids[j]), "%06zu", i * 10 + (size_t)j);
			idp[j] = ids[j];
		}
		idp[3] = NULL;
		expected_hash(ref, 1, i, sorted_keys, idp, want);
		ck_assert_str_eq(s->hash, want);
	}
	dv_manifest_free(m);
	dv_test_rmtree(src);
	dv_test_rmtree(origin);
	free(src);
	free(origin);
}
END_TEST

/* Same input, same identities; keys are part of them. */
START_TEST(test_hash_stable)
{
	char *src = make_src(3), *o1 = dv_test_tmpdir("pubo1"),
	     *o2 = dv_test_tmpdir("pubo2"), *o3 = dv_test_tmpdir("pubo3");
	struct dv_publish_result res;
	struct dv_manifest *a, *b, *c;

	ck_assert_int_eq(publish("x", src, o1, keys, 0, false, &res), 0);
	ck_assert_uint_eq(res.linked, 3);
	ck_assert_int_eq(publish("x", src, o2, sorted_keys, 0, true, &res), 0);
	ck_assert_uint_eq(res.copied, 3);
	ck_assert_int_eq(publish("x", src, o3, NULL, 0, false, &res), 0);
	a = load(o1, "x/manifest.json", "x");
	b = load(o2, "x/manifest.json", "x");
	c = load(o3, "x/manifest.json", "x");
	ck_assert_str_eq(a->manifest_ref, b->manifest_ref);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_str_eq(a->shards[i].hash, b->shards[i].hash);
		ck_assert_str_ne(a->shards[i].hash, c->shards[i].hash);
	}
	dv_manifest_free(a);
	dv_manifest_free(b);
	dv_manifest_free(c);
	dv_test_rmtree(src);
	dv_test_rmtree(o1);
	dv_test_rmtree(o2);
	dv_test_rmtree(o3);
	free(src);
	free(o1);
	free(o2);
	free(o3);
}
END_TEST

START_TEST(test_revisions)
{
	char *src = make_src(8), *origin = dv_test_tmpdir("puborigin");
	struct dv_publish_result res;
	struct dv_manifest *m1, *m2, *r1;
	char path[1024];
	struct stat st1, st2;

	ck_assert_int_eq(publish("demo/train", src, origin, keys, 0, false, &res), 0);
	m1 = load(origin, "demo/train/manifest.json", "demo/train");
	snprintf(path, sizeof(path), "%s/demo/train/manifest.json", origin);
	ck_assert_int_eq(stat(path, &st1), 0);

	/* Unchanged: nothing is written. */
	ck_assert_int_eq(publish("demo/train", src, origin, keys, 0, false, &res), 0);
	ck_assert(res.unchanged);
	ck_assert_uint_eq(res.revision, 1);
	ck_assert_uint_eq(res.present, 8);
	ck_assert_int_eq(stat(path, &st2), 0);
	ck_assert_uint_eq(st1.st_ino, st2.st_ino);
	/* The same revision asked for explicitly is unchanged too. */
	ck_assert_int_eq(publish("demo/train", src, origin, keys, 1, false, &res), 0);
	ck_assert(res.unchanged);

	/* One tar changed: revision 2, every hash new, revision 1 kept. */
	make_shard(src, 3, ", \"changed\": true");
	ck_assert_int_eq(publish("demo/train", src, origin, keys, 0, false, &res), 0);
	ck_assert(!res.unchanged);
	ck_assert_uint_eq(res.revision, 2);
	m2 = load(origin, "demo/train/manifest.json", "demo/train");
	ck_assert_uint_eq(m2->revision, 2);
	ck_assert_str_ne(m2->manifest_ref, m1->manifest_ref);
	for (size_t i = 0; i < 8; i++)
		ck_assert_str_ne(m2->shards[i].hash, m1->shards[i].hash);
	ck_assert_mem_ne(m2->shards[3].sha256, m1->shards[3].sha256, 32);
	ck_assert_mem_eq(m2->shards[2].sha256, m1->shards[2].sha256, 32);
	r1 = load(origin, "demo/train/revisions/1.json", "demo/train");
	ck_assert_uint_eq(r1->revision, 1);
	ck_assert_str_eq(r1->shards[3].hash, m1->shards[3].hash);
	snprintf(path, sizeof(path), "%s/shards/%s.tar", origin, m1->shards[3].hash);
	ck_assert_int_eq(access(path, R_OK), 0);

	/* Keys changed: a new revision too. */
	ck_assert_int_eq(publish("demo/train", src, origin, NULL, 0, false, &res), 0);
	ck_assert_uint_eq(res.revision, 3);
	ck_assert_int_eq(publish("demo/train", src, origin, NULL, 0, false, &res), 0);
	ck_assert(res.unchanged);
	ck_assert_uint_eq(res.revision, 3);

	/* An explicit revision must be newer. */
	make_shard(src, 0, ", \"again\": 1");
	ck_assert_int_eq(publish("demo/train", src, origin, NULL, 3, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "not newer"), "%s", err);
	ck_assert_int_eq(publish("demo/train", src, origin, NULL, 10, false, &res), 0);
	ck_assert_uint_eq(res.revision, 10);
	dv_manifest_free(r1);
	r1 = load(origin, "demo/train/revisions/10.json", "demo/train");
	ck_assert_uint_eq(r1->revision, 10);
	assert_datasets(origin, "demo/train");

	dv_manifest_free(m1);
	dv_manifest_free(m2);
	dv_manifest_free(r1);
	dv_test_rmtree(src);
	dv_test_rmtree(origin);
	free(src);
	free(origin);
}
END_TEST

START_TEST(test_datasets_list)
{
	char *src = make_src(2), *origin = dv_test_tmpdir("puborigin");
	struct dv_publish_result res;

	ck_assert_int_eq(publish("demo/val", src, origin, NULL, 0, false, &res), 0);
	ck_assert_int_eq(publish("demo/train", src, origin, NULL, 0, false, &res), 0);
	ck_assert_int_eq(publish("a", src, origin, NULL, 0, false, &res), 0);
	ck_assert_int_eq(publish("demo/train", src, origin, NULL, 0, false, &res), 0);
	ck_assert(res.unchanged);
	assert_datasets(origin, "a,demo/train,demo/val");
	dv_test_rmtree(src);
	dv_test_rmtree(origin);
	free(src);
	free(origin);
}
END_TEST

/* Private sources are copied, so the origin stays world-readable. */
START_TEST(test_modes)
{
	char *src = make_src(2), *origin = dv_test_tmpdir("puborigin");
	struct dv_publish_result res;
	struct dv_manifest *m;
	char path[1024];
	struct stat st;
	mode_t old = umask(077);

	snprintf(path, sizeof(path), "%s/shard-00.tar", src);
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_int_eq(publish("d", src, origin, NULL, 0, false, &res), 0);
	umask(old);
	ck_assert_uint_eq(res.copied, 1);
	ck_assert_uint_eq(res.linked, 1);
	m = load(origin, "d/manifest.json", "d");
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/shards/%s.tar", origin,
			 m->shards[i].hash);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_mode & 0777, 0644);
	}
	snprintf(path, sizeof(path), "%s/d/revisions", origin);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0755);
	snprintf(path, sizeof(path), "%s/d/manifest.json", origin);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mode & 0777, 0644);
	dv_manifest_free(m);
	dv_test_rmtree(src);
	dv_test_rmtree(origin);
	free(src);
	free(origin);
}
END_TEST

/* Long names through the ustar prefix, GNU 'L' and pax headers. */
START_TEST(test_tar_kinds)
{
	char *src = dv_test_tmpdir("pubsrc"), *origin = dv_test_tmpdir("puborigin");
	char *work = dv_test_tmpdir("pubwork");
	char dir[600], cmd[4096], path[1024], want[33], deep[300];
	const char *ids[4];
	struct dv_publish_result res;
	struct dv_manifest *m;
	struct tarbuf t = { 0 };

	/* 120 bytes of directories, then the sample files. */
	snprintf(deep, sizeof(deep), "%s",
		 "d123456789/d123456789/d123456789/d123456789/d123456789/"
		 "d123456789/d123456789/d123456789/d123456789/d123456789/d12345678");
	ck_assert_uint_gt(strlen(deep), 100);
	snprintf(path, sizeof(path), "%s/000001.cls", deep);
	tar_add(&t, path, "1");
	snprintf(path, sizeof(path), "%s/000001.json", deep);
	tar_add(&t, path, "{}");
	tar_add(&t, "000002.x.y", "2");
	snprintf(path, sizeof(path), "%s/a-ustar.tar", src);
	tar_write(&t, path);

	snprintf(dir, sizeof(dir), "%s/%s", work, deep);
	ck_assert_int_eq(dv_mkdir_p(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/000001.cls", dir);
	dv_test_write_file(path, "1", 1);
	snprintf(path, sizeof(path), "%s/000001.json", dir);
	dv_test_write_file(path, "{}", 2);
	snprintf(path, sizeof(path), "%s/000002.x.y", work);
	dv_test_write_file(path, "2", 1);
	for (int k = 0; k < 2; k++) {
		snprintf(cmd, sizeof(cmd),
			 "tar -C '%s' --format=%s -cf '%s/%s' '%s/000001.cls' '%s/000001.json' 000002.x.y",
			 work, k ? "pax" : "gnu", src, k ? "c-pax.tar" : "b-gnu.tar",
			 deep, deep);
		ck_assert_int_eq(system(cmd), 0);
	}

	ck_assert_int_eq(publish("kinds", src, origin, NULL, 0, false, &res), 0);
	m = load(origin, "kinds/manifest.json", "kinds");
	ck_assert_uint_eq(m->nshards, 3);
	snprintf(path, sizeof(path), "%s/000001", deep);
	ids[0] = path;
	ids[1] = "000002";
	ids[2] = NULL;
	for (size_t i = 0; i < 3; i++) {
		expected_hash(m->manifest_ref, 1, i, (const char *const[]){ NULL },
			      ids, want);
		ck_assert_msg(strcmp(m->shards[i].hash, want) == 0, "%s",
			      dv_manifest_name(m, &m->shards[i]));
	}
	dv_manifest_free(m);
	dv_test_rmtree(src);
	dv_test_rmtree(origin);
	dv_test_rmtree(work);
	free(src);
	free(origin);
	free(work);
}
END_TEST

START_TEST(test_errors)
{
	char *src = make_src(2), *origin = dv_test_tmpdir("puborigin");
	char *empty = dv_test_tmpdir("pubempty"), path[1024], junk[2048];
	static const char *const bad_keys[] = { "ok", "a\nb", NULL };
	struct dv_publish_result res;
	struct tarbuf t = { 0 };

	ck_assert_int_eq(publish("../x", src, origin, NULL, 0, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "not a valid name"), "%s", err);
	ck_assert_int_eq(publish("x@1", src, origin, NULL, 0, false, &res), -EINVAL);
	ck_assert_int_eq(publish("x", src, origin, bad_keys, 0, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "key 1"), "%s", err);
	ck_assert_int_eq(publish("x", empty, origin, NULL, 0, false, &res), -ENOENT);
	ck_assert_msg(strstr(err, "no .tar files"), "%s", err);

	/* Not a tar. */
	dv_test_pattern(junk, sizeof(junk), 7);
	snprintf(path, sizeof(path), "%s/junk.tar", empty);
	dv_test_write_file(path, junk, sizeof(junk));
	ck_assert_int_eq(publish("x", empty, origin, NULL, 0, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "junk.tar: not a tar file"), "%s", err);
	/* Truncated: the header promises more than the file holds. */
	tar_add(&t, "000001.bin", "0123456789");
	dv_test_write_file(path, t.p, 512 + 4);
	free(t.p);
	ck_assert_int_eq(publish("x", empty, origin, NULL, 0, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "truncated"), "%s", err);
	unlink(path);
	/* A shard name the daemon would refuse. */
	snprintf(path, sizeof(path), "%s/a b.tar", empty);
	dv_test_write_file(path, "", 0);
	ck_assert_int_eq(publish("x", empty, origin, NULL, 0, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "not a valid shard name"), "%s", err);

	/* A broken current manifest is not overwritten. */
	snprintf(path, sizeof(path), "%s/y", origin);
	ck_assert_int_eq(dv_mkdir_p(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/y/manifest.json", origin);
	dv_test_write_file(path, "{", 1);
	ck_assert_int_eq(publish("y", src, origin, NULL, 0, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "y/manifest.json"), "%s", err);
	/* Nor a broken datasets.json. */
	snprintf(path, sizeof(path), "%s/datasets.json", origin);
	dv_test_write_file(path, "{\"datasets\": 3}", 15);
	ck_assert_int_eq(publish("z", src, origin, NULL, 0, false, &res), -EINVAL);
	ck_assert_msg(strstr(err, "datasets.json"), "%s", err);

	dv_test_rmtree(src);
	dv_test_rmtree(origin);
	dv_test_rmtree(empty);
	free(src);
	free(origin);
	free(empty);
}
END_TEST

/* Each shard's chunk list sits beside it, matches its bytes and its pin. */
START_TEST(test_chunk_lists)
{
	char *src = make_src(3), *origin = dv_test_tmpdir("pubchunks");
	char *other = dv_test_tmpdir("pubnochunks");
	struct dv_publish_opts o = { .dataset = "c/d", .src_dir = src,
				     .origin_dir = origin,
				     .chunk_size = 64u << 10 };
	struct dv_publish_result res;
	struct dv_manifest *m;

	ck_assert_int_eq(dv_publish(&o, &res, err, sizeof(err)), 0);
	m = load(origin, "c/d/manifest.json", "c/d");
	for (size_t i = 0; i < m->nshards; i++) {
		const struct dv_manifest_shard *s = &m->shards[i];
		char path[1024], *text;
		struct dv_chunks c, want;
		uint8_t whole[32];
		size_t len;
		int fd;

		ck_assert(s->has_chunks);
		snprintf(path, sizeof(path), "%s/shards/%s.chunks", origin, s->hash);
		text = dv_test_read_file(path, &len);
		ck_assert_ptr_nonnull(text);
		ck_assert_int_eq(dv_chunks_parse(text, len, dv_manifest_chunks_pin(m, s),
						 s->size, &c, err, sizeof(err)), 0);
		snprintf(path, sizeof(path), "%s/shards/%s.tar", origin, s->hash);
		fd = open(path, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(dv_chunks_of_fd(fd, 64u << 10, whole, &want), 0);
		ck_assert_mem_eq(whole, s->sha256, 32);
		ck_assert_uint_eq(c.n, want.n);
		ck_assert_mem_eq(c.sha256, want.sha256, (size_t)c.n * 32);
		dv_chunks_release(&c);
		dv_chunks_release(&want);
		close(fd);
		free(text);
	}
	dv_manifest_free(m);
	/* The same again: unchanged. Another chunk size: a new revision. */
	ck_assert_int_eq(dv_publish(&o, &res, err, sizeof(err)), 0);
	ck_assert(res.unchanged);
	o.chunk_size = 128u << 10;
	ck_assert_int_eq(dv_publish(&o, &res, err, sizeof(err)), 0);
	ck_assert(!res.unchanged);
	ck_assert_uint_eq(res.revision, 2);
	/* Without chunk lists: no "chunks" in the manifest, no list files. */
	o.origin_dir = other;
	o.no_chunks = true;
	ck_assert_int_eq(dv_publish(&o, &res, err, sizeof(err)), 0);
	m = load(other, "c/d/manifest.json", "c/d");
	for (size_t i = 0; i < m->nshards; i++) {
		char path[1024];
		struct stat st;

		ck_assert(!m->shards[i].has_chunks);
		snprintf(path, sizeof(path), "%s/shards/%s.chunks", other,
			 m->shards[i].hash);
		ck_assert_int_eq(stat(path, &st), -1);
	}
	dv_manifest_free(m);
	dv_test_rmtree(src);
	dv_test_rmtree(origin);
	dv_test_rmtree(other);
	free(src);
	free(origin);
	free(other);
}
END_TEST

static Suite *publish_suite(void)
{
	Suite *s = suite_create("publish");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_publish_origin);
	tcase_add_test(tc, test_hash_stable);
	tcase_add_test(tc, test_revisions);
	tcase_add_test(tc, test_datasets_list);
	tcase_add_test(tc, test_modes);
	tcase_add_test(tc, test_tar_kinds);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_chunk_lists);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(publish_suite());
}
