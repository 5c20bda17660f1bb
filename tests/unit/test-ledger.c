/* Unit tests for src/state/ledger.c: the limit check, the figures read back,
 * and the figure list (figures.h) that every output is made from. */
#include "config.h"

#include <pthread.h>
#include <string.h>

#include "state/ledger.h"
#include "test-common.h"

START_TEST(ledger_reserve_up_to_the_limit)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(1, 1000);
	ck_assert(cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 600));
	ck_assert(cumemcap_ledger_reserve(1, CUMEMCAP_KIND_pool, 400));
	ck_assert_uint_eq(cumemcap_ledger_headroom(1), 0);
	ck_assert(!cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 1));
	ck_assert_uint_eq(cumemcap_ledger_get(1, CUMEMCAP_FIG_reserved), 1000);
	ck_assert_uint_eq(cumemcap_ledger_get(1, CUMEMCAP_FIG_linear), 600);
	cumemcap_ledger_sub(1, CUMEMCAP_KIND_linear, 600);
	ck_assert_uint_eq(cumemcap_ledger_headroom(1), 600);
	ck_assert(!cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 601));
	ck_assert(cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 600));
	ck_assert_uint_eq(cumemcap_ledger_get(1, CUMEMCAP_FIG_peak_reserved), 1000);
	/* Requests are noted by the caller, reservations are not requests. */
	ck_assert_uint_eq(cumemcap_ledger_get(1, CUMEMCAP_FIG_largest_request), 0);
	cumemcap_ledger_record_request(1, 601);
	cumemcap_ledger_record_request(1, 7);
	ck_assert_uint_eq(cumemcap_ledger_get(1, CUMEMCAP_FIG_largest_request), 601);
}
END_TEST

START_TEST(ledger_no_overflow_near_uint64_max)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(2, 1000);
	ck_assert(cumemcap_ledger_reserve(2, CUMEMCAP_KIND_linear, 10));
	ck_assert(!cumemcap_ledger_reserve(2, CUMEMCAP_KIND_linear, UINT64_MAX));
	ck_assert(!cumemcap_ledger_reserve(2, CUMEMCAP_KIND_linear, UINT64_MAX - 5));
	ck_assert_uint_eq(cumemcap_ledger_get(2, CUMEMCAP_FIG_reserved), 10);
	cumemcap_ledger_set_limit(3, CUMEMCAP_NO_LIMIT);
	ck_assert(cumemcap_ledger_reserve(3, CUMEMCAP_KIND_linear, UINT64_MAX / 2));
	ck_assert_uint_eq(cumemcap_ledger_headroom(3), UINT64_MAX);
}
END_TEST

#define THREADS 8
#define TRIES 20000

static void *hammer(void *arg)
{
	uint64_t got = 0;
	for (int i = 0; i < TRIES; i++) {
		if (cumemcap_ledger_reserve(4, CUMEMCAP_KIND_linear, 7)) {
			got += 7;
			ck_assert_uint_le(cumemcap_ledger_get(4, CUMEMCAP_FIG_reserved), 7000);
			if (i % 3 == 0) {
				cumemcap_ledger_sub(4, CUMEMCAP_KIND_linear, 7);
				got -= 7;
			}
		}
	}
	return (void *)(uintptr_t)got;
}

/* Threads racing for the last bytes never overshoot together. */
START_TEST(ledger_concurrent_reservations_never_overshoot)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(4, 7000);
	pthread_t t[THREADS];
	uint64_t held = 0;
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, hammer, NULL);
	for (int i = 0; i < THREADS; i++) {
		void *r;
		pthread_join(t[i], &r);
		held += (uint64_t)(uintptr_t)r;
	}
	ck_assert_uint_eq(cumemcap_ledger_get(4, CUMEMCAP_FIG_reserved), held);
	ck_assert_uint_le(cumemcap_ledger_get(4, CUMEMCAP_FIG_peak_reserved), 7000);
}
END_TEST

/* A snapshot has what the writers put: the arenas' records added to the
 * device's own counts, peaks, the figures of others left unknown. */
START_TEST(ledger_read_adds_the_arenas)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(5, 4096);
	struct cumemcap_ledger_arena *r = &cumemcap_ledger_arenas[3];
	cumemcap_ledger_arena_open(r, 5);
	cumemcap_ledger_arena_bump(r, allocs);
	cumemcap_ledger_arena_add(r, frees, 2);
	cumemcap_ledger_arena_bytes(r, 0, 300);
	cumemcap_ledger_arena_bytes(r, 0, 200);
	cumemcap_ledger_bump(5, allocs);
	cumemcap_ledger_bump(5, refusals);
	cumemcap_ledger_live_add(5, 50);
	ck_assert(cumemcap_ledger_reserve(5, CUMEMCAP_KIND_graph, 1000));
	struct cumemcap_figures f;
	cumemcap_ledger_read(5, &f);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_allocs], 2);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_frees], 2);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_refusals], 1);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_pooled], 200);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_peak_pooled], 300);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_live], 50);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_graph], 1000);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_reserved], 1000);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_limit], 4096);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_total], CUMEMCAP_FIGURE_NONE);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_driver_used], CUMEMCAP_FIGURE_NONE);
	/* Another device's record is not added. */
	cumemcap_ledger_arena_open(&cumemcap_ledger_arenas[4], 6);
	cumemcap_ledger_arena_bump(&cumemcap_ledger_arenas[4], allocs);
	ck_assert_uint_eq(cumemcap_ledger_get(5, CUMEMCAP_FIG_allocs), 2);
	/* Closing the record folds its counts in: the sums do not change. */
	cumemcap_ledger_arena_close(r);
	ck_assert_uint_eq(cumemcap_ledger_get(5, CUMEMCAP_FIG_allocs), 2);
	ck_assert_uint_eq(cumemcap_ledger_get(5, CUMEMCAP_FIG_frees), 2);
	ck_assert_uint_eq(cumemcap_ledger_get(5, CUMEMCAP_FIG_peak_pooled), 300);
	/* Out of range: nothing held, no limit. */
	ck_assert_uint_eq(cumemcap_ledger_get(-1, CUMEMCAP_FIG_allocs), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(CUMEMCAP_MAX_DEVICES, CUMEMCAP_FIG_limit), CUMEMCAP_NO_LIMIT);
	/* A fork's child starts from zero but keeps its limit. */
	cumemcap_ledger_reset();
	cumemcap_ledger_read(5, &f);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_allocs] + f.v[CUMEMCAP_FIG_peak_pooled] + f.v[CUMEMCAP_FIG_graph], 0);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_limit], 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_allocs), 0);
}
END_TEST

/* The list is sound: texts terminated, keys and families unique, a family
 * has help text, a summary figure its words, parts in range. */
START_TEST(ledger_figure_list_is_sound)
{
	for (int i = 0; i < CUMEMCAP_FIG_COUNT; i++) {
		const struct cumemcap_figure_info *a = &cumemcap_figure_info[i];
		const char *key = a->key, *prom = a->prom;
		/* Every text fits its array with its terminating zero. */
		ck_assert(memchr(a->key, 0, sizeof(a->key)) && memchr(a->pre, 0, sizeof(a->pre)) &&
			  memchr(a->post, 0, sizeof(a->post)) && memchr(a->prom, 0, sizeof(a->prom)) &&
			  memchr(a->help, 0, sizeof(a->help)));
		ck_assert(key[0]);
		ck_assert(!prom[0] == !a->help[0]);
		ck_assert_uint_le(a->stats | a->event | a->sample, 1);
		ck_assert_uint_le(a->exit, 2);
		ck_assert_uint_le(a->summary, 2);
		ck_assert(!a->summary || a->pre[0]);
		for (int j = 0; j < i; j++) {
			const struct cumemcap_figure_info *b = &cumemcap_figure_info[j];
			ck_assert_str_ne(key, b->key);
			if (prom[0] && b->prom[0])
				ck_assert_str_ne(prom, b->prom);
		}
	}
}
END_TEST

/* The peaks of live and pooled: exact while one part moves (one arena, or
 * only the passthrough); with several, the sum of each part's own peak
 * (ledger.h): never below the true peak, above it only when the parts
 * peaked at different moments. A closed arena's peak stays counted. */
START_TEST(ledger_peaks_within_the_stated_bound)
{
	cumemcap_ledger_reset();
	struct cumemcap_ledger_arena *a = &cumemcap_ledger_arenas[0], *b = &cumemcap_ledger_arenas[1];
	cumemcap_ledger_arena_open(a, 7);
	const uint64_t seg = 2 << 20, k = 4096;
	/* One arena: a segment joins, blocks go out and come back. */
	for (uint64_t i = 1; i <= 20; i++)
		cumemcap_ledger_arena_bytes(a, i * k, seg - i * k);
	for (uint64_t i = 20; i > 0; i--)
		cumemcap_ledger_arena_bytes(a, (i - 1) * k, seg - (i - 1) * k);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_live), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_pooled), seg);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_peak_live), 20 * k);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_peak_pooled), seg);
	/* A second arena peaks after the first came down: the true peak of
	 * live is 30 blocks, the read one is the two parts' peaks, 50. */
	cumemcap_ledger_arena_open(b, 7);
	cumemcap_ledger_arena_bytes(b, 30 * k, seg - 30 * k);
	uint64_t peak = cumemcap_ledger_get(7, CUMEMCAP_FIG_peak_live);
	ck_assert_uint_ge(peak, 30 * k);
	ck_assert_uint_le(peak, 20 * k + 30 * k);
	/* The passthrough's part counts the same way. */
	cumemcap_ledger_live_add(7, 5 * k);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_live), 35 * k);
	peak = cumemcap_ledger_get(7, CUMEMCAP_FIG_peak_live);
	ck_assert_uint_ge(peak, 35 * k);
	ck_assert_uint_le(peak, 20 * k + 30 * k + 5 * k);
	cumemcap_ledger_live_sub(7, 5 * k);
	/* Emptied and closed, each arena's peaks stay. */
	cumemcap_ledger_arena_bytes(b, 0, 0);
	cumemcap_ledger_arena_close(b);
	cumemcap_ledger_arena_bytes(a, 0, 0);
	cumemcap_ledger_arena_close(a);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_live) + cumemcap_ledger_get(7, CUMEMCAP_FIG_pooled), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_peak_live), peak);
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_peak_pooled), seg + seg - 30 * k);
	/* Another device is untouched. */
	ck_assert_uint_eq(cumemcap_ledger_get(8, CUMEMCAP_FIG_live) + cumemcap_ledger_get(8, CUMEMCAP_FIG_peak_live), 0);
}
END_TEST

/* A passthrough allocation and free as the account layer books them. */
static void pass_alloc(int dev, uint64_t n)
{
	ck_assert(cumemcap_ledger_reserve(dev, CUMEMCAP_KIND_linear, n));
	cumemcap_ledger_live_add(dev, n);
	cumemcap_ledger_bump(dev, allocs);
}

static void pass_free(int dev, uint64_t n)
{
	cumemcap_ledger_sub(dev, CUMEMCAP_KIND_linear, n);
	cumemcap_ledger_live_sub(dev, n);
	cumemcap_ledger_bump(dev, frees);
}

/* The passthrough's figures on one thread, on a GPU without a limit:
 * exact, peaks too (the footprint's with the overhead). */
START_TEST(ledger_passthrough_exact)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(11, CUMEMCAP_NO_LIMIT);
	for (int i = 0; i < 100; i++)
		pass_alloc(11, 4096);
	for (int i = 0; i < 1000; i++) {
		pass_free(11, 4096);
		pass_alloc(11, 4096);
	}
	for (int i = 0; i < 50; i++)
		pass_free(11, 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_linear), 50 * 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_live), 50 * 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_reserved), 50 * 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_allocs), 1100);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_frees), 1050);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_peak_live), 100 * 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_peak_reserved), 100 * 4096);
	struct cumemcap_figures f;
	cumemcap_ledger_read(11, &f);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_linear], 50 * 4096);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_allocs], 1100);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_peak_footprint), 100 * 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_footprint), 50 * 4096);
	/* The other kinds. */
	ck_assert(cumemcap_ledger_reserve(11, CUMEMCAP_KIND_managed, 512));
	ck_assert(cumemcap_ledger_reserve(11, CUMEMCAP_KIND_pool, 1024));
	ck_assert(cumemcap_ledger_holds(11, CUMEMCAP_KIND_pool));
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_managed), 512);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_pool), 1024);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_reserved), 50 * 4096 + 1536);
	/* The overhead learned: the footprint's peak counts it from then. */
	cumemcap_ledger_set_overhead(11, 1000, CUMEMCAP_OVERHEAD_estimate);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_peak_footprint), 100 * 4096);
	for (int i = 0; i < 60; i++)
		pass_alloc(11, 4096);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_peak_reserved), 110 * 4096 + 1536);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_peak_footprint), 110 * 4096 + 1536 + 1000);
	ck_assert_uint_eq(cumemcap_ledger_get(11, CUMEMCAP_FIG_footprint), 110 * 4096 + 1536 + 1000);
	ck_assert_uint_eq(cumemcap_ledger_headroom(11), UINT64_MAX);
	/* Another device is untouched. */
	ck_assert_uint_eq(cumemcap_ledger_get(12, CUMEMCAP_FIG_linear) + cumemcap_ledger_get(12, CUMEMCAP_FIG_allocs), 0);
}
END_TEST

static void *pass_out(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++)
		pass_alloc(13, 512);
	return NULL;
}

/* Threads that allocate and exit leave their counts; this thread frees
 * everything. */
START_TEST(ledger_passthrough_survives_thread_exit)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(13, CUMEMCAP_NO_LIMIT);
	int n = 300;
	for (int i = 0; i < n; i++) {
		pthread_t t;
		pthread_create(&t, NULL, pass_out, NULL);
		pthread_join(t, NULL);
	}
	uint64_t out = (uint64_t)n * 10 * 512;
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_linear), out);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_live), out);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_allocs), (uint64_t)n * 10);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_peak_live), out);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[13].v[CUMEMCAP_FIG_linear]), out);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[13].v[CUMEMCAP_FIG_allocs]), (uint64_t)n * 10);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[13].v[CUMEMCAP_FIG_reserved]), out);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_peak_reserved), out);
	for (int i = 0; i < n * 10; i++)
		pass_free(13, 512);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_linear), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_live), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_reserved), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(13, CUMEMCAP_FIG_frees), (uint64_t)n * 10);
}
END_TEST

#define PASSERS 4
#define PASSES 20000

static void *pass_pairs(void *arg)
{
	int dev = (int)(intptr_t)arg;
	pass_alloc(dev, 4096);
	for (int i = 0; i < PASSES; i++) {
		uint64_t n = 512 * (1 + (uint64_t)i % 8);
		pass_alloc(dev, n);
		pass_free(dev, n);
	}
	pass_free(dev, 4096);
	return NULL;
}

/* Threads making passthrough pairs at once, without a limit and under
 * one (the compare-and-swap): every figure ends exact, the limit holds,
 * and the peaks are exact (each is raised to every value its atomic
 * took): at least one thread's high water, at most all of them at once. */
START_TEST(ledger_passthrough_concurrent_exact)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(14, CUMEMCAP_NO_LIMIT);
	cumemcap_ledger_set_limit(15, 1 << 20);
	for (int dev = 14; dev <= 15; dev++) {
		pthread_t t[PASSERS];
		for (int i = 0; i < PASSERS; i++)
			pthread_create(&t[i], NULL, pass_pairs, (void *)(intptr_t)dev);
		for (int i = 0; i < PASSERS; i++)
			pthread_join(t[i], NULL);
		ck_assert_uint_eq(cumemcap_ledger_get(dev, CUMEMCAP_FIG_linear), 0);
		ck_assert_uint_eq(cumemcap_ledger_get(dev, CUMEMCAP_FIG_live), 0);
		ck_assert_uint_eq(cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved), 0);
		ck_assert_uint_eq(cumemcap_ledger_get(dev, CUMEMCAP_FIG_allocs), PASSERS * (PASSES + 1));
		ck_assert_uint_eq(cumemcap_ledger_get(dev, CUMEMCAP_FIG_frees), PASSERS * (PASSES + 1));
		uint64_t peak = cumemcap_ledger_get(dev, CUMEMCAP_FIG_peak_live);
		ck_assert_uint_ge(peak, 4096 + 4096);
		ck_assert_uint_le(peak, PASSERS * 2 * 4096);
		uint64_t peak_reserved = cumemcap_ledger_get(dev, CUMEMCAP_FIG_peak_reserved);
		ck_assert_uint_ge(peak_reserved, 4096 + 4096);
		ck_assert_uint_le(peak_reserved, PASSERS * 2 * 4096);
	}
}
END_TEST

TEST_SUITE(ledger)
{
	Suite *s = suite_create("ledger");
	ADD_TEST(s, ledger_reserve_up_to_the_limit);
	ADD_TEST(s, ledger_no_overflow_near_uint64_max);
	ADD_TEST(s, ledger_concurrent_reservations_never_overshoot);
	ADD_TEST(s, ledger_read_adds_the_arenas);
	ADD_TEST(s, ledger_figure_list_is_sound);
	ADD_TEST(s, ledger_peaks_within_the_stated_bound);
	ADD_TEST(s, ledger_passthrough_exact);
	ADD_TEST(s, ledger_passthrough_survives_thread_exit);
	ADD_TEST(s, ledger_passthrough_concurrent_exact);
	return s;
}
