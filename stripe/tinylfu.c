/*
 * W-TinyLFU with weights (tinylfu.h). The eviction loop follows Caffeine's
 * BoundedLocalCache.evictFromMain: victims are taken from probation's LRU
 * end, then protected's, then the window's; candidates are the nodes just
 * pushed out of the window, taken from probation's MRU end. Pinned nodes
 * (can_evict false) are stepped over, never evicted.
 */
#include "tinylfu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SKETCH_ROWS 4
#define SKETCH_MIN_WIDTH 64u
#define SKETCH_MAX_WIDTH (1u << 24)
#define COUNTER_MAX 15u
#define WINDOW_PERCENT 1u
#define PROTECTED_PERCENT 80u

/* ---- the count-min sketch ---- */

static uint64_t next_pow2(uint64_t v)
{
	uint64_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static uint64_t row_index(const struct dv_lfu_sketch *s, uint64_t key,
			  unsigned row)
{
	static const uint64_t seeds[SKETCH_ROWS] = {
		0x97cb3127e1d4b7a5ULL, 0xb492b66fbe98f273ULL,
		0x9ae16a3b2f90404fULL, 0xcbf29ce484222325ULL,
	};
	uint64_t x = (key + seeds[row]) * 0x9e3779b97f4a7c15ULL;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 32;
	return row * s->width + (x & (s->width - 1));
}

static unsigned nibble_get(const uint8_t *t, uint64_t pos)
{
	return (t[pos >> 1] >> ((pos & 1) * 4)) & 15u;
}

static void nibble_inc(uint8_t *t, uint64_t pos)
{
	t[pos >> 1] = (uint8_t)(t[pos >> 1] + (1u << ((pos & 1) * 4)));
}

/* Aging: every counter halves, and so does the count of additions. */
static void sketch_halve(struct dv_lfu_sketch *s)
{
	size_t bytes = (size_t)(s->width * SKETCH_ROWS / 2);

	for (size_t i = 0; i < bytes; i++)
		s->nibbles[i] = (uint8_t)((s->nibbles[i] >> 1) & 0x77);
	s->additions /= 2;
}

void dv_lfu_record(struct dv_lfu *p, uint64_t key)
{
	struct dv_lfu_sketch *s = &p->sketch;
	bool added = false;

	for (unsigned r = 0; r < SKETCH_ROWS; r++) {
		uint64_t pos = row_index(s, key, r);

		if (nibble_get(s->nibbles, pos) < COUNTER_MAX) {
			nibble_inc(s->nibbles, pos);
			added = true;
		}
	}
	if (added && ++s->additions >= s->sample)
		sketch_halve(s);
}

unsigned dv_lfu_frequency(const struct dv_lfu *p, uint64_t key)
{
	const struct dv_lfu_sketch *s = &p->sketch;
	unsigned f = COUNTER_MAX;

	for (unsigned r = 0; r < SKETCH_ROWS; r++) {
		unsigned c = nibble_get(s->nibbles, row_index(s, key, r));

		if (c < f)
			f = c;
	}
	return f;
}

/* ---- lists ---- */

static void list_init(struct dv_lfu_list *l)
{
	l->head.prev = l->head.next = &l->head;
	l->weight = 0;
	l->n = 0;
}

static struct dv_lfu_list *list_of(struct dv_lfu *p, enum dv_lfu_region r)
{
	switch (r) {
	case DV_LFU_WINDOW:
		return &p->window;
	case DV_LFU_PROBATION:
		return &p->probation;
	case DV_LFU_PROTECTED:
		return &p->protect;
	default:
		return NULL;
	}
}

static void unlink_node(struct dv_lfu *p, struct dv_lfu_node *n)
{
	struct dv_lfu_list *l = list_of(p, n->region);

	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = NULL;
	l->weight -= n->weight;
	l->n--;
	n->region = DV_LFU_NONE;
}

/* Appends @n at the MRU end of region @r. */
static void push_mru(struct dv_lfu *p, struct dv_lfu_node *n,
		     enum dv_lfu_region r)
{
	struct dv_lfu_list *l = list_of(p, r);

	n->prev = l->head.prev;
	n->next = &l->head;
	l->head.prev->next = n;
	l->head.prev = n;
	l->weight += n->weight;
	l->n++;
	n->region = r;
}

static void move_mru(struct dv_lfu *p, struct dv_lfu_node *n,
		     enum dv_lfu_region r)
{
	unlink_node(p, n);
	push_mru(p, n, r);
}

static struct dv_lfu_node *lru_of(struct dv_lfu_list *l)
{
	return l->n ? l->head.next : NULL;
}

/* The node after @n towards the MRU end, or NULL. */
static struct dv_lfu_node *newer(struct dv_lfu *p, struct dv_lfu_node *n)
{
	return n->next == &list_of(p, n->region)->head ? NULL : n->next;
}

/* The node before @n towards the LRU end, or NULL. */
static struct dv_lfu_node *older(struct dv_lfu *p, struct dv_lfu_node *n)
{
	return n->prev == &list_of(p, n->region)->head ? NULL : n->prev;
}

/* ---- the policy ---- */

/* @pct percent of @v, without overflow for any @v. */
static uint64_t percent(uint64_t v, unsigned pct)
{
	return v / 100 * pct + v % 100 * pct / 100;
}

int dv_lfu_init(struct dv_lfu *p, uint64_t capacity, uint64_t expected)
{
	uint64_t width;

	/* As Caffeine: 4 counters per row per expected object, aged every
	 * 10 x expected additions. */
	if (expected < SKETCH_MIN_WIDTH)
		expected = SKETCH_MIN_WIDTH;
	if (expected > SKETCH_MAX_WIDTH / 4)
		expected = SKETCH_MAX_WIDTH / 4;
	width = next_pow2(4 * expected);
	memset(p, 0, sizeof(*p));
	p->sketch.nibbles = calloc(1, (size_t)(width * SKETCH_ROWS / 2));
	if (!p->sketch.nibbles)
		return -ENOMEM;
	p->sketch.width = width;
	p->sketch.sample = 10 * expected;
	list_init(&p->window);
	list_init(&p->probation);
	list_init(&p->protect);
	p->capacity = capacity;
	p->window_max = percent(capacity, WINDOW_PERCENT);
	p->protected_max = percent(capacity - p->window_max, PROTECTED_PERCENT);
	return 0;
}

void dv_lfu_release(struct dv_lfu *p)
{
	free(p->sketch.nibbles);
	p->sketch.nibbles = NULL;
}

/* Keeps protected within its share: its LRU end drops back to probation. */
static void balance_protected(struct dv_lfu *p)
{
	while (p->protect.weight > p->protected_max && p->protect.n > 1)
		move_mru(p, lru_of(&p->protect), DV_LFU_PROBATION);
}

void dv_lfu_touch(struct dv_lfu *p, struct dv_lfu_node *n)
{
	switch (n->region) {
	case DV_LFU_WINDOW:
		move_mru(p, n, DV_LFU_WINDOW);
		break;
	case DV_LFU_PROBATION:
	case DV_LFU_PROTECTED:
		move_mru(p, n, DV_LFU_PROTECTED);
		balance_protected(p);
		break;
	default:
		break;
	}
}

static void evict(struct dv_lfu *p, struct dv_lfu_node *n,
		  struct dv_lfu_node *newcomer, dv_lfu_evicted_fn evicted,
		  void *arg)
{
	p->weight -= n->weight;
	unlink_node(p, n);
	if (n == newcomer)
		return;
	p->evictions++;
	evicted(n, arg);
}

/* The LRU end of the next region to take victims from, or NULL. */
static struct dv_lfu_node *next_victim_queue(struct dv_lfu *p,
					     enum dv_lfu_region *queue)
{
	struct dv_lfu_node *v = NULL;

	while (!v && *queue != DV_LFU_WINDOW) {
		*queue = *queue == DV_LFU_PROBATION ? DV_LFU_PROTECTED :
						      DV_LFU_WINDOW;
		v = lru_of(list_of(p, *queue));
	}
	return v;
}

struct duel {
	struct dv_lfu *p;
	struct dv_lfu_node *newcomer;
	dv_lfu_evictable_fn can_evict;
	dv_lfu_evicted_fn evicted;
	void *arg;
};

/*
 * While over capacity: candidates (the last @ncand nodes of probation,
 * newest first) duel victims (probation's LRU end, then protected's, then
 * the window's). A candidate that wins stays and duels the next victim,
 * until the cache fits or it loses. Returns false if nothing more can go.
 */
static bool evict_from_main(struct duel *d, size_t ncand)
{
	struct dv_lfu *p = d->p;
	enum dv_lfu_region queue = DV_LFU_PROBATION;
	struct dv_lfu_node *victim = lru_of(&p->probation);
	struct dv_lfu_node *cand = ncand ? p->probation.head.prev : NULL;

	while (p->weight > p->capacity) {
		struct dv_lfu_node *x;

		if (ncand == 0)
			cand = NULL;
		if (victim == cand) /* a candidate never duels itself */
			victim = NULL;
		if (!victim) {
			victim = next_victim_queue(p, &queue);
			if (!victim && !cand)
				return false;
		}
		if (victim && victim != d->newcomer &&
		    !d->can_evict(victim, d->arg)) {
			victim = newer(p, victim);
			continue;
		}
		if (cand && cand != d->newcomer && !d->can_evict(cand, d->arg)) {
			cand = older(p, cand);
			ncand--;
			continue;
		}
		if (!victim || (cand && (cand->weight > p->capacity ||
					 dv_lfu_frequency(p, cand->key) <=
						 dv_lfu_frequency(p, victim->key)))) {
			/* Ties keep the incumbent: a scan cannot flush it. */
			x = cand;
			cand = older(p, cand);
			ncand--;
		} else {
			x = victim;
			victim = newer(p, victim);
		}
		evict(p, x, d->newcomer, d->evicted, d->arg);
	}
	return true;
}

bool dv_lfu_admit(struct dv_lfu *p, struct dv_lfu_node *n,
		  dv_lfu_evictable_fn can_evict, dv_lfu_evicted_fn evicted,
		  void *arg)
{
	struct duel d = { p, n, can_evict, evicted, arg };
	size_t ncand = 0;

	if (n->weight > p->capacity)
		return false;
	push_mru(p, n, DV_LFU_WINDOW);
	p->weight += n->weight;
	while (p->window.weight > p->window_max && p->window.n > 0) {
		move_mru(p, lru_of(&p->window), DV_LFU_PROBATION);
		ncand++;
	}
	if (!evict_from_main(&d, ncand) && n->region != DV_LFU_NONE)
		evict(p, n, n, evicted, arg);
	return n->region != DV_LFU_NONE;
}

void dv_lfu_restore(struct dv_lfu *p, struct dv_lfu_node *n)
{
	push_mru(p, n, DV_LFU_PROBATION);
	p->weight += n->weight;
}

void dv_lfu_trim(struct dv_lfu *p, dv_lfu_evictable_fn can_evict,
		 dv_lfu_evicted_fn evicted, void *arg)
{
	struct duel d = { p, NULL, can_evict, evicted, arg };

	evict_from_main(&d, 0);
}

void dv_lfu_remove(struct dv_lfu *p, struct dv_lfu_node *n)
{
	if (n->region == DV_LFU_NONE)
		return;
	p->weight -= n->weight;
	unlink_node(p, n);
}
