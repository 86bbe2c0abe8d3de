/*
 * W-TinyLFU (Einziger, Friedman, Manes), size weighted, as Caffeine and
 * Moka do it: which objects the stripe tier keeps.
 *
 *   sketch     a count-min sketch of 4-bit counters (4 rows of 4 per
 *              expected object) estimates how often each key was asked
 *              for, hits and misses alike; every 10 x expected additions
 *              all counters are halved (aging), so old popularity fades;
 *   window     new objects enter a small LRU (1% of the capacity);
 *   main       a segmented LRU: probation, and protected (80% of main) for
 *              objects hit again while in probation.
 *
 * When the cache is over capacity, objects pushed out of the window
 * (candidates) duel the LRU end of probation (victims): the one the sketch
 * thinks less frequent is evicted. A candidate that needs several victims
 * must beat each of them, so a large object displaces small popular ones
 * only if it is more popular than each: the weight is the object's size in
 * chunks' bytes. A scan of one-hit objects therefore passes through the
 * window and out again, leaving a frequently used working set in main.
 *
 * Pure bookkeeping: no locking (the caller serializes), no I/O, no memory
 * beyond the sketch; nodes are embedded in the caller's entries.
 */
#ifndef DV_STRIPE_TINYLFU_H
#define DV_STRIPE_TINYLFU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum dv_lfu_region {
	DV_LFU_NONE = 0,
	DV_LFU_WINDOW,
	DV_LFU_PROBATION,
	DV_LFU_PROTECTED,
};

struct dv_lfu_node {
	struct dv_lfu_node *prev, *next; /* in the list of its region */
	uint64_t key;                    /* set by the caller: a hash of the name */
	uint64_t weight;                 /* set by the caller: bytes it occupies */
	enum dv_lfu_region region;       /* DV_LFU_NONE: not in the policy */
};

/* A circular list with a sentinel; weight and n sum its nodes. */
struct dv_lfu_list {
	struct dv_lfu_node head;
	uint64_t weight;
	size_t n;
};

struct dv_lfu_sketch {
	uint8_t *nibbles;   /* 4 rows x width 4-bit counters */
	uint64_t width;     /* a power of two */
	uint64_t additions; /* since the last halving */
	uint64_t sample;    /* additions between halvings */
};

struct dv_lfu {
	struct dv_lfu_sketch sketch;
	struct dv_lfu_list window, probation, protect;
	uint64_t capacity;      /* bytes */
	uint64_t window_max;    /* bytes */
	uint64_t protected_max; /* bytes */
	uint64_t weight;        /* bytes of every node in the policy */
	uint64_t evictions;
};

/* Asks whether a node may be evicted now (false: pinned by an open handle). */
typedef bool (*dv_lfu_evictable_fn)(struct dv_lfu_node *n, void *arg);
/* Told of each node the policy evicted; it is no longer in the policy. */
typedef void (*dv_lfu_evicted_fn)(struct dv_lfu_node *n, void *arg);

/*
 * Sets up a policy of @capacity bytes whose sketch is sized for about
 * @expected objects. 0 or -ENOMEM.
 */
int dv_lfu_init(struct dv_lfu *p, uint64_t capacity, uint64_t expected);
void dv_lfu_release(struct dv_lfu *p);

/* One request for @key, whether it hits or not (the sketch). */
void dv_lfu_record(struct dv_lfu *p, uint64_t key);

/* The sketch's estimate of how often @key was asked for (0..15). */
unsigned dv_lfu_frequency(const struct dv_lfu *p, uint64_t key);

/* A hit on @n (in the policy): recency and segment promotion. */
void dv_lfu_touch(struct dv_lfu *p, struct dv_lfu_node *n);

/*
 * Offers the new node @n (key and weight set, not in the policy). Evicts
 * what it must, telling @evicted of each node it removes (never @n).
 * Returns true when @n was admitted; false when it lost or cannot fit
 * (heavier than the capacity, or everything else pinned): @n is then not
 * in the policy, though other nodes may have been evicted meanwhile, as in
 * any W-TinyLFU where window candidates duel main victims.
 */
bool dv_lfu_admit(struct dv_lfu *p, struct dv_lfu_node *n,
		  dv_lfu_evictable_fn can_evict, dv_lfu_evicted_fn evicted,
		  void *arg);

/*
 * Puts @n back after a restart: probation's MRU end, no eviction. Call
 * dv_lfu_trim afterwards if the capacity shrank.
 */
void dv_lfu_restore(struct dv_lfu *p, struct dv_lfu_node *n);

/* Evicts (LRU first) until the weight fits the capacity. */
void dv_lfu_trim(struct dv_lfu *p, dv_lfu_evictable_fn can_evict,
		 dv_lfu_evicted_fn evicted, void *arg);

/* Removes @n (deleted by the owner); no-op if it is not in the policy. */
void dv_lfu_remove(struct dv_lfu *p, struct dv_lfu_node *n);

#endif
