/*
 * The stripe index: which objects the pool holds and where their chunks
 * are, in memory (a hash table) and on disk (a journal in the tier's state
 * directory), so that a restart keeps the cache (B8).
 *
 * The journal is a header and a sequence of records, each framed by a
 * magic, its length and an XXH3-64 of its bytes:
 *
 *   header  "DVSJRNL1", version, pool id, journal id, chunk bytes, xxh3
 *   ADD     hash, size, and per chunk: device, slot, XXH3-64 of its bytes
 *   DEL     hash
 *
 * An ADD is appended, and made durable, only after its chunks are durable
 * on their devices; the object becomes visible after that. A crash can
 * therefore leave at most a torn last record, which replay drops (and
 * truncates away): nothing committed is lost, nothing half-written is
 * visible. A DEL is durable before its chunks are handed out again.
 * Compaction rewrites the live entries into a new file renamed over the
 * old one.
 *
 * No locking: the stripe tier serializes every call.
 */
#ifndef DV_STRIPE_INDEX_H
#define DV_STRIPE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "tinylfu.h"

struct dv_stripe_chunk {
	uint64_t slot;
	uint64_t xxh;  /* XXH3-64 of the chunk's object bytes (no padding) */
	uint16_t dev;  /* superblock index of its device */
};

struct dv_stripe_entry {
	struct dv_stripe_entry *hnext; /* hash chain of the table */
	struct dv_lfu_node lfu;        /* owned by the tier's policy */
	char hash[65];
	uint64_t size;
	uint64_t seq;                  /* order of commitment */
	unsigned refs;                 /* the table's, plus open handles' */
	bool indexed;                  /* in the table (committed, not deleted) */
	bool leak;                     /* its DEL failed: never reuse its slots */
	uint32_t nchunks;
	/*
	 * Bit i: chunk i is known good in this process (written here, or read
	 * and checked against its xxh3). Set with __atomic_fetch_or by any
	 * reader; never cleared. Points into the same allocation.
	 */
	uint64_t *checked;
	struct dv_stripe_chunk chunks[];
};

/* What a journal belongs to; a journal with other values is not ours. */
struct dv_stripe_journal_hdr {
	uint8_t pool_id[DV_STRIPE_ID_BYTES];
	uint8_t journal_id[DV_STRIPE_ID_BYTES];
	uint64_t chunk_bytes;
};

struct dv_stripe_index {
	struct dv_stripe_entry **buckets;
	size_t nbuckets;        /* a power of two */
	size_t n;               /* entries in the table */
	uint64_t next_seq;
	struct dv_stripe_journal_hdr hdr;
	int fd;                 /* the journal, -1 when closed */
	char *path;
	uint64_t bytes;         /* journal length: where the next record goes */
	uint64_t live_bytes;    /* encoded length of the live entries */
	uint64_t dropped_bytes; /* torn tail dropped by the last replay */
};

/* A new entry, refs 0, not indexed; NULL when out of memory. Free with free(). */
struct dv_stripe_entry *dv_stripe_entry_new(const char *hash, uint64_t size,
					    uint32_t nchunks);

/*
 * Opens the journal at @path and replays it into @ix. 0; -ENOENT when there
 * is no journal or it belongs to another pool, journal or chunk size (per
 * @want; journal_id all zero matches any); -EBADMSG for a damaged header;
 * other -errno. A torn last record is dropped and truncated away.
 */
int dv_stripe_index_load(struct dv_stripe_index *ix, const char *path,
			 const struct dv_stripe_journal_hdr *want);

/* Starts an empty journal at @path (atomically replacing any). 0 or -errno. */
int dv_stripe_index_create(struct dv_stripe_index *ix, const char *path,
			   const struct dv_stripe_journal_hdr *hdr);

/* Closes the journal and frees every entry still in the table. */
void dv_stripe_index_close(struct dv_stripe_index *ix);

struct dv_stripe_entry *dv_stripe_index_find(struct dv_stripe_index *ix,
					     const char *hash);

/*
 * Appends ADD for @e and makes it durable, then puts @e in the table
 * (taking one reference). The caller has made its chunks durable.
 */
int dv_stripe_index_commit(struct dv_stripe_index *ix,
			   struct dv_stripe_entry *e);

/*
 * Takes @n entries out of the table and appends a durable DEL for each.
 * The table's references pass to the caller. On a journal error the
 * entries are still taken out but marked leak: their slots must not be
 * reused before a restart.
 */
int dv_stripe_index_delete(struct dv_stripe_index *ix,
			   struct dv_stripe_entry **v, size_t n);

/* Rewrites the journal with the live entries only. 0 or -errno. */
int dv_stripe_index_compact(struct dv_stripe_index *ix);

/* True when the journal is worth compacting. */
bool dv_stripe_index_bloated(const struct dv_stripe_index *ix);

/* Every entry of the table, in no particular order. Caller frees *@out. */
int dv_stripe_index_list(struct dv_stripe_index *ix,
			 struct dv_stripe_entry ***out, size_t *n);

/* The hash of a name used by the table and the policy's sketch. */
uint64_t dv_stripe_key(const char *hash);

#endif
