/*
 * W-TinyLFU: a scan of one-hit objects does not
 * flush a frequently used working set; admission is size-aware; pinned
 * objects are never evicted; the sketch ages.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stripe/tinylfu.h"
#include "helpers.h"

#define NOBJ 4096

static struct dv_lfu_node nodes[NOBJ];
static bool pinned[NOBJ];
static unsigned evicted_count;

static size_t idx(struct dv_lfu_node *n)
{
	return (size_t)(n - nodes);
}

static bool can_evict(struct dv_lfu_node *n, void *arg)
{
	return !pinned[idx(n)];
}

static void on_evict(struct dv_lfu_node *n, void *arg)
{
	ck_assert(!pinned[idx(n)]);
	ck_assert_int_eq(n->region, DV_LFU_NONE);
	evicted_count++;
}

static void setup(void)
{
	memset(nodes, 0, sizeof(nodes));
	memset(pinned, 0, sizeof(pinned));
	evicted_count = 0;
	for (size_t i = 0; i < NOBJ; i++)
		nodes[i].key = 0x9e3779b97f4a7c15ULL * (i + 1);
}

static bool cached(size_t i)
{
	return nodes[i].region != DV_LFU_NONE;
}

/* One request for object @i of @weight: a hit touches, a miss offers it. */
static bool request(struct dv_lfu *p, size_t i, uint64_t weight)
{
	dv_lfu_record(p, nodes[i].key);
	if (cached(i)) {
		dv_lfu_touch(p, &nodes[i]);
		return true;
	}
	nodes[i].weight = weight;
	dv_lfu_admit(p, &nodes[i], can_evict, on_evict, NULL);
	ck_assert_uint_le(p->weight, p->capacity);
	return false;
}

static unsigned count_cached(size_t from, size_t to)
{
	unsigned n = 0;

	for (size_t i = from; i < to; i++)
		n += cached(i);
	return n;
}

/* A scan of one-hit objects leaves the working set in place. */
START_TEST(test_scan_keeps_working_set)
{
	const uint64_t w = 4u << 20; /* every object one 4 MiB chunk */
	struct dv_lfu p;

	ck_assert_int_eq(dv_lfu_init(&p, 100 * w, 100), 0);
	for (int round = 0; round < 10; round++) {
		for (size_t i = 0; i < 60; i++)
			request(&p, i, w);
	}
	ck_assert_uint_eq(count_cached(0, 60), 60);
	/* 600 objects, each read once: five times the cache, enough to flush
	 * an LRU cache twice over. */
	for (size_t i = 1000; i < 1600; i++)
		request(&p, i, w);
	ck_assert_uint_eq(count_cached(0, 60), 60);
	ck_assert_uint_le(p.weight, p.capacity);
	/* The scan filled what the working set left free, no more. */
	ck_assert_uint_le(count_cached(1000, 1600), 40);
	ck_assert_uint_gt(count_cached(1000, 1600), 0);
	/* The working set is still served as hits. */
	for (size_t i = 0; i < 60; i++)
		ck_assert(request(&p, i, w));
	dv_lfu_release(&p);
}
END_TEST

/*
 * A long scan (30 times the cache) while the working set (90% of the cache,
 * more than the protected segment holds) stays in use, one request of it
 * per scanned object: its reuse distance (180 objects) is beyond the
 * cache, so an LRU cache would keep none of it.
 */
START_TEST(test_scan_interleaved_with_working_set)
{
	struct dv_lfu p;

	ck_assert_int_eq(dv_lfu_init(&p, 100, 100), 0);
	for (int round = 0; round < 5; round++) {
		for (size_t i = 0; i < 90; i++)
			request(&p, i, 1);
	}
	ck_assert_uint_ge(count_cached(0, 90), 89);
	for (size_t i = 1000; i < 4000; i++) {
		request(&p, i, 1);
		request(&p, i % 90, 1);
	}
	ck_assert_uint_ge(count_cached(0, 90), 88);
	dv_lfu_release(&p);
}
END_TEST

/* Size-aware: a big newcomer must beat every victim it needs. */
START_TEST(test_size_aware_admission)
{
	struct dv_lfu p;

	ck_assert_int_eq(dv_lfu_init(&p, 100, 64), 0);
	for (int round = 0; round < 3; round++) {
		for (size_t i = 0; i < 10; i++)
			request(&p, i, 10);
	}
	ck_assert_uint_eq(count_cached(0, 10), 10);
	ck_assert_uint_eq(p.weight, 100);
	/* Seen once, it would need five objects seen thrice each: refused. */
	request(&p, 100, 50);
	ck_assert(!cached(100));
	ck_assert_uint_eq(count_cached(0, 10), 10);
	ck_assert_uint_eq(evicted_count, 0);
	/* Asked for often enough, it wins, and takes exactly the room it needs. */
	for (int k = 0; k < 8; k++)
		dv_lfu_record(&p, nodes[100].key);
	request(&p, 100, 50);
	ck_assert(cached(100));
	ck_assert_uint_eq(count_cached(0, 10), 5);
	ck_assert_uint_eq(evicted_count, 5);
	ck_assert_uint_eq(p.weight, 100);
	/* Heavier than the whole cache: refused outright, nothing evicted. */
	for (int k = 0; k < 15; k++)
		dv_lfu_record(&p, nodes[101].key);
	request(&p, 101, 101);
	ck_assert(!cached(101));
	ck_assert_uint_eq(evicted_count, 5);
	dv_lfu_release(&p);
}
END_TEST

/* Weights are bytes: ten small objects or one large fill the same room. */
START_TEST(test_weight_accounting)
{
	struct dv_lfu p;

	ck_assert_int_eq(dv_lfu_init(&p, 1000, 64), 0);
	for (size_t i = 0; i < 10; i++)
		request(&p, i, 100);
	ck_assert_uint_eq(p.weight, 1000);
	ck_assert_uint_eq(count_cached(0, 10), 10);
	for (size_t i = 0; i < 10; i++)
		dv_lfu_remove(&p, &nodes[i]);
	ck_assert_uint_eq(p.weight, 0);
	request(&p, 20, 1000);
	ck_assert(cached(20));
	ck_assert_uint_eq(p.weight, 1000);
	dv_lfu_release(&p);
}
END_TEST

/* B6: pinned objects are stepped over; nothing evictable means refusal. */
START_TEST(test_pinned_never_evicted)
{
	struct dv_lfu p;

	ck_assert_int_eq(dv_lfu_init(&p, 10, 64), 0);
	for (size_t i = 0; i < 10; i++) {
		request(&p, i, 1);
		pinned[i] = true;
	}
	for (int k = 0; k < 15; k++)
		dv_lfu_record(&p, nodes[50].key);
	request(&p, 50, 1);
	ck_assert(!cached(50));
	ck_assert_uint_eq(count_cached(0, 10), 10);
	pinned[7] = false;
	request(&p, 50, 1);
	ck_assert(cached(50));
	ck_assert(!cached(7));
	ck_assert_uint_eq(count_cached(0, 10), 9);
	dv_lfu_release(&p);
}
END_TEST

/* Aging: counters halve every 10 x width additions. */
START_TEST(test_sketch_ages)
{
	struct dv_lfu p;

	ck_assert_int_eq(dv_lfu_init(&p, 100, 64), 0);
	for (int k = 0; k < 20; k++)
		dv_lfu_record(&p, nodes[0].key);
	ck_assert_uint_eq(dv_lfu_frequency(&p, nodes[0].key), 15);
	ck_assert_uint_eq(dv_lfu_frequency(&p, nodes[1].key), 0);
	for (size_t i = 1; i <= 10 * 64; i++)
		dv_lfu_record(&p, nodes[1 + i % 4000].key ^ 0x5555);
	ck_assert_uint_le(dv_lfu_frequency(&p, nodes[0].key), 7);
	ck_assert_uint_ge(dv_lfu_frequency(&p, nodes[0].key), 3);
	dv_lfu_release(&p);
}
END_TEST

/* After a restart objects come back in probation; trim fits a smaller cache. */
START_TEST(test_restore_and_trim)
{
	struct dv_lfu p;

	ck_assert_int_eq(dv_lfu_init(&p, 5, 64), 0);
	for (size_t i = 0; i < 8; i++) {
		nodes[i].weight = 1;
		dv_lfu_restore(&p, &nodes[i]);
	}
	pinned[0] = true;
	dv_lfu_trim(&p, can_evict, on_evict, NULL);
	ck_assert_uint_eq(p.weight, 5);
	ck_assert(cached(0));                /* pinned: kept though oldest */
	ck_assert(!cached(1) && !cached(2) && !cached(3));
	ck_assert_uint_eq(count_cached(4, 8), 4);
	dv_lfu_release(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tinylfu");
	TCase *tc = tcase_create("tinylfu");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_scan_keeps_working_set);
	tcase_add_test(tc, test_scan_interleaved_with_working_set);
	tcase_add_test(tc, test_size_aware_admission);
	tcase_add_test(tc, test_weight_accounting);
	tcase_add_test(tc, test_pinned_never_evicted);
	tcase_add_test(tc, test_sketch_ages);
	tcase_add_test(tc, test_restore_and_trim);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return dv_test_run(suite());
}
