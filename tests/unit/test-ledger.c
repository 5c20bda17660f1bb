/* Unit tests for src/state/ledger.c: the limit check, the figures read back,
 * and the figure list (figures.h) that every output is made from. */
#include "config.h"

#include <pthread.h>

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
	cumemcap_ledger_note_request(1, 601);
	cumemcap_ledger_note_request(1, 7);
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

/* A snapshot has what the writers put: sharded counts summed with the
 * device's own, peaks, the figures of others left unknown. */
START_TEST(ledger_read_sums_shards)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(5, 4096);
	struct cumemcap_ledger_shard *sh = &cumemcap_ledger_shards[3];
	cumemcap_ledger_shard_open(sh, 5);
	cumemcap_shard_bump(sh, allocs);
	cumemcap_shard_add(sh, frees, 2);
	cumemcap_ledger_bump(5, allocs);
	cumemcap_ledger_bump(5, refusals);
	cumemcap_ledger_pooled_add(5, 300);
	cumemcap_ledger_pooled_sub(5, 100);
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
	/* Closing the shard folds its counts in: the sums do not change. */
	cumemcap_ledger_shard_close(sh);
	ck_assert_uint_eq(cumemcap_ledger_get(5, CUMEMCAP_FIG_allocs), 2);
	ck_assert_uint_eq(cumemcap_ledger_get(5, CUMEMCAP_FIG_frees), 2);
	/* Out of range: nothing held, no limit. */
	ck_assert_uint_eq(cumemcap_ledger_get(-1, CUMEMCAP_FIG_allocs), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(CUMEMCAP_MAX_DEVICES, CUMEMCAP_FIG_limit), CUMEMCAP_NO_LIMIT);
	/* A fork's child starts from zero but keeps its limit. */
	cumemcap_ledger_reset();
	cumemcap_ledger_read(5, &f);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_allocs] + f.v[CUMEMCAP_FIG_peak_pooled] + f.v[CUMEMCAP_FIG_graph], 0);
	ck_assert_uint_eq(f.v[CUMEMCAP_FIG_limit], 4096);
}
END_TEST

/* The list is sound: keys and families unique, a family has help text,
 * a summary figure its words, parts in range. */
START_TEST(ledger_figure_list_is_sound)
{
	for (int i = 0; i < CUMEMCAP_FIG_COUNT; i++) {
		const struct cumemcap_figure_info *a = &cumemcap_figure_info[i];
		ck_assert_ptr_nonnull(a->key);
		ck_assert(!a->prom == !a->help);
		ck_assert_uint_le(a->stats | a->event | a->sample, 1);
		ck_assert_uint_le(a->exit, 2);
		ck_assert_uint_le(a->summary, 2);
		ck_assert(!a->summary || a->pre[0]);
		for (int j = 0; j < i; j++) {
			const struct cumemcap_figure_info *b = &cumemcap_figure_info[j];
			ck_assert_str_ne(a->key, b->key);
			if (a->prom && b->prom)
				ck_assert_str_ne(a->prom, b->prom);
		}
	}
}
END_TEST

TEST_SUITE(ledger)
{
	Suite *s = suite_create("ledger");
	ADD_TEST(s, ledger_reserve_up_to_the_limit);
	ADD_TEST(s, ledger_no_overflow_near_uint64_max);
	ADD_TEST(s, ledger_concurrent_reservations_never_overshoot);
	ADD_TEST(s, ledger_read_sums_shards);
	ADD_TEST(s, ledger_figure_list_is_sound);
	return s;
}
