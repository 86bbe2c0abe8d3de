/*
 * Internals of the publisher, shared by publish.c (sources, files,
 * documents, revisions) and publish_ids.c (the identities). Private to
 * fs/ctl/.
 */
#ifndef DV_PUBLISH_IMPL_H
#define DV_PUBLISH_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <xxhash.h>

#include "publish.h"
#include "tiers/core/chunks.h"

struct src_shard {
	char *name;
	uint64_t size;
	mode_t mode;
	uint8_t sha256[32];
	char hash[33];            /* content_hash at pub.hash_rev */
	struct dv_chunks chunks;  /* n == 0 and no pin: no list */
	bool has_chunks;
	uint8_t chunks_pin[32];   /* the list's digest, for the manifest */
};

struct pub {
	const struct dv_publish_opts *o;
	char **keys;              /* sorted, unique */
	size_t nkeys;
	struct src_shard *shards; /* sorted by name */
	size_t n;
	char ref[65];
	bool hashed;              /* shards[].hash are set, */
	uint64_t hash_rev;        /* for this revision */
	XXH3_state_t *xx;
	char *err;
	size_t errlen;
};

/* Formats the error of @p (its one line); returns @ret. */
int dv_pub_fail(struct pub *p, int ret, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "@a/@b" into @buf. 0 or -ENAMETOOLONG. */
int dv_pub_join(char *buf, size_t len, const char *a, const char *b);

/* p->ref from the sources' names and digests. 0 or -ENOMEM, -EIO. */
int dv_pub_manifest_ref(struct pub *p);

/*
 * The content_hash of every shard at revision @rev (kept: a second call
 * for the same revision is free). 0 or -errno with p->err set.
 */
int dv_pub_content_hashes(struct pub *p, uint64_t rev);

#endif
