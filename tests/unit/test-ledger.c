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
		const char *key = cumemcap_figure_str(a->key), *prom = cumemcap_figure_str(a->prom);
		ck_assert(key[0]);
		ck_assert(!prom[0] == !cumemcap_figure_str(a->help)[0]);
		ck_assert_uint_le(a->stats | a->event | a->sample, 1);
		ck_assert_uint_le(a->exit, 2);
		ck_assert_uint_le(a->summary, 2);
		ck_assert(!a->summary || cumemcap_figure_str(a->pre)[0]);
		for (int j = 0; j < i; j++) {
			const struct cumemcap_figure_info *b = &cumemcap_figure_info[j];
			ck_assert_str_ne(key, cumemcap_figure_str(b->key));
			if (prom[0] && cumemcap_figure_str(b->prom)[0])
				ck_assert_str_ne(prom, cumemcap_figure_str(b->prom));
		}
	}
}
END_TEST

/* Pooled blocks moved by one thread: live, pooled and both peaks exact,
 * also when the device's atomic rises while the thread's bound is above
 * its delta (the thread counts its delta, not its bound). */
START_TEST(ledger_block_moves_exact_on_one_thread)
{
	cumemcap_ledger_reset();
	const int64_t k = 4096;
	cumemcap_ledger_pooled_add(6, 2 << 20);
	for (int i = 0; i < 20; i++)
		cumemcap_ledger_move(6, k, -k);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_live), 20 * k);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_pooled), (2 << 20) - 20 * k);
	for (int i = 0; i < 1000; i++) {
		cumemcap_ledger_move(6, k, -k);
		cumemcap_ledger_move(6, -k, k);
	}
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_peak_live), 21 * k);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_peak_pooled), 2 << 20);
	/* 100 KiB out, 90 back: the bound stays above the delta (by up to
	 * the slack); a charge (the account layer's, through the same
	 * slot) then makes the peak from the delta. */
	cumemcap_ledger_move(6, 100 << 10, -(100 << 10));
	cumemcap_ledger_move(6, -(90 << 10), 90 << 10);
	uint64_t live = (uint64_t)(20 * k + (10 << 10));
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_live), live);
	cumemcap_ledger_live_add(6, 200 << 10);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_peak_live), live + (200 << 10));
	cumemcap_ledger_live_sub(6, 200 << 10);
	/* Everything back, then a second segment joins: pooled's peak is the
	 * two segments, not more. */
	cumemcap_ledger_move(6, -(int64_t)live, (int64_t)live);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_pooled), 2 << 20);
	cumemcap_ledger_pooled_add(6, 2 << 20);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_peak_pooled), 4 << 20);
	ck_assert_uint_eq(cumemcap_ledger_get(6, CUMEMCAP_FIG_live), 0);
	/* Another device is untouched. */
	ck_assert_uint_eq(cumemcap_ledger_get(7, CUMEMCAP_FIG_live) + cumemcap_ledger_get(7, CUMEMCAP_FIG_peak_live), 0);
}
END_TEST

static void *move_out(void *arg)
{
	int64_t n = *(int64_t *)arg;
	for (int i = 0; i < 10; i++)
		cumemcap_ledger_move(8, n, -n);
	return NULL;
}

/* A thread that exits leaves its moves in the figures (its slot is folded
 * into the device's atomics and taken again by later threads: more
 * threads than slots come and go). */
START_TEST(ledger_block_moves_survive_thread_exit)
{
	cumemcap_ledger_reset();
	int64_t n = 512;
	cumemcap_ledger_pooled_add(8, 1 << 30);
	for (int i = 0; i < CUMEMCAP_LEDGER_LOCALS + 44; i++) {
		pthread_t t;
		pthread_create(&t, NULL, move_out, &n);
		pthread_join(t, NULL);
	}
	uint64_t out = (uint64_t)(CUMEMCAP_LEDGER_LOCALS + 44) * 10 * 512;
	ck_assert_uint_eq(cumemcap_ledger_get(8, CUMEMCAP_FIG_live), out);
	ck_assert_uint_eq(cumemcap_ledger_get(8, CUMEMCAP_FIG_pooled), (1u << 30) - out);
	ck_assert_uint_eq(cumemcap_ledger_get(8, CUMEMCAP_FIG_peak_live), out);
	/* Given back by this thread. */
	cumemcap_ledger_move(8, -(int64_t)out, (int64_t)out);
	ck_assert_uint_eq(cumemcap_ledger_get(8, CUMEMCAP_FIG_live), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(8, CUMEMCAP_FIG_pooled), 1u << 30);
}
END_TEST

#define MOVERS 4
#define MOVES 20000

static void *move_pairs(void *arg)
{
	int64_t base = (int64_t)(uintptr_t)arg * 4096;
	cumemcap_ledger_move(9, base, -base);
	for (int i = 0; i < MOVES; i++) {
		int64_t n = 512 * (1 + i % 8);
		cumemcap_ledger_move(9, n, -n);
		cumemcap_ledger_move(9, -n, n);
	}
	cumemcap_ledger_move(9, -base, base);
	return NULL;
}

/* Threads moving blocks at once: the figures end exact, and the peaks
 * stay within the rule (ledger.h): at least any one thread's high water,
 * at most all of them at once plus the slack of each other thread. */
START_TEST(ledger_block_moves_concurrent_within_the_rule)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_pooled_add(9, 1 << 30);
	pthread_t t[MOVERS];
	for (uintptr_t i = 0; i < MOVERS; i++)
		pthread_create(&t[i], NULL, move_pairs, (void *)(i + 1));
	for (int i = 0; i < MOVERS; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(cumemcap_ledger_get(9, CUMEMCAP_FIG_live), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(9, CUMEMCAP_FIG_pooled), 1u << 30);
	uint64_t most = 0;
	for (int i = 1; i <= MOVERS; i++)
		most += (uint64_t)i * 4096 + 4096;
	uint64_t peak = cumemcap_ledger_get(9, CUMEMCAP_FIG_peak_live);
	ck_assert_uint_ge(peak, MOVERS * 4096 + 4096);
	ck_assert_uint_le(peak, most + (MOVERS - 1) * (uint64_t)CUMEMCAP_LEDGER_SLACK);
	ck_assert_uint_eq(cumemcap_ledger_get(9, CUMEMCAP_FIG_peak_pooled), 1u << 30);
}
END_TEST

struct turn {
	pthread_mutex_t m;
	pthread_cond_t c;
	int turn;
};

static struct turn turns = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static void wait_turn(int me)
{
	pthread_mutex_lock(&turns.m);
	while (turns.turn != me)
		pthread_cond_wait(&turns.c, &turns.m);
	pthread_mutex_unlock(&turns.m);
}

static void pass_turn(int to)
{
	pthread_mutex_lock(&turns.m);
	turns.turn = to;
	pthread_cond_broadcast(&turns.c);
	pthread_mutex_unlock(&turns.m);
}

static void *taker(void *arg)
{
	(void)arg;
	wait_turn(1);
	cumemcap_ledger_move(10, 10 << 10, -(10 << 10));
	pass_turn(2);
	wait_turn(3);
	cumemcap_ledger_move(10, -(10 << 10), 10 << 10);
	pass_turn(4);
	return NULL;
}

/* Two threads alive, one moving at a time: the peak is never below the
 * truth, and above it by at most one slack (the other thread's bound). */
START_TEST(ledger_block_moves_taking_turns)
{
	cumemcap_ledger_reset();
	turns.turn = 0;
	pthread_t t;
	pthread_create(&t, NULL, taker, NULL);
	cumemcap_ledger_move(10, 30 << 10, -(30 << 10));
	cumemcap_ledger_move(10, -(30 << 10), 30 << 10);
	pass_turn(1);
	wait_turn(2);
	ck_assert_uint_eq(cumemcap_ledger_get(10, CUMEMCAP_FIG_live), 10 << 10);
	ck_assert_uint_ge(cumemcap_ledger_get(10, CUMEMCAP_FIG_peak_live), 30 << 10);
	cumemcap_ledger_move(10, 25 << 10, -(25 << 10));
	uint64_t peak = cumemcap_ledger_get(10, CUMEMCAP_FIG_peak_live);
	ck_assert_uint_ge(peak, 35 << 10);
	ck_assert_uint_le(peak, (35 << 10) + (uint64_t)CUMEMCAP_LEDGER_SLACK);
	pass_turn(3);
	wait_turn(4);
	pthread_join(t, NULL);
	ck_assert_uint_eq(cumemcap_ledger_get(10, CUMEMCAP_FIG_live), 25 << 10);
	ck_assert_uint_eq(cumemcap_ledger_get(10, CUMEMCAP_FIG_pooled), (uint64_t)-(25 << 10));
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
 * exact (peaks too, the footprint's with the overhead), kept in the
 * thread's slot rather than on the device's shared atomics (`reserved`
 * too), and `pooled` still read with one load. */
START_TEST(ledger_passthrough_in_the_threads_slot)
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
	/* Nothing on the shared line. */
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[11].reserved), 0);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[11].kind[CUMEMCAP_KIND_linear]), 0);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[11].live), 0);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[11].allocs), 0);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[11].frees), 0);
	ck_assert(!atomic_load(&cumemcap_ledger_pooled_slots));
	/* The other kinds: managed is slotted too, pool stays on the atomic
	 * (cumemcap_ledger_holds is one load). */
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
	ck_assert_uint_eq(cumemcap_ledger_footprint(11), 110 * 4096 + 1536 + 1000);
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

/* Threads that allocate and exit: their counts are folded into the
 * device's atomics (more threads than slots come and go); this thread
 * frees everything. */
START_TEST(ledger_passthrough_survives_thread_exit)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(13, CUMEMCAP_NO_LIMIT);
	int n = CUMEMCAP_LEDGER_LOCALS + 44;
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
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[13].kind[CUMEMCAP_KIND_linear]), out);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[13].allocs), (uint64_t)n * 10);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[13].reserved), out);
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
 * and the live peak stays within the rule. */
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
		ck_assert_uint_le(peak, PASSERS * 2 * 4096 + (PASSERS - 1) * (uint64_t)CUMEMCAP_LEDGER_SLACK);
		/* Under the limit the peak is exact (the shared atomic); without
		 * one, within the rule. */
		uint64_t peak_reserved = cumemcap_ledger_get(dev, CUMEMCAP_FIG_peak_reserved);
		ck_assert_uint_ge(peak_reserved, 4096 + 4096);
		ck_assert_uint_le(peak_reserved, PASSERS * 2 * 4096 +
							 (dev == 14 ? (PASSERS - 1) * (uint64_t)CUMEMCAP_LEDGER_SLACK : 0));
		ck_assert_uint_eq(atomic_load(&cumemcap_ledger[dev].reserved), 0);
	}
}
END_TEST

/* A thread whose figure climbs (a program filling the GPU, a run of
 * stream-ordered allocations, the blocks given back after) raises once per
 * CUMEMCAP_LEDGER_STEP, not at every move; its peaks stay exact at every
 * step (the moves between raises update its top). */
START_TEST(ledger_climb_raises_once_per_step)
{
	cumemcap_ledger_reset();
	const int64_t k = 4096;
	cumemcap_ledger_pooled_add(20, 64 << 20);
	uint32_t r0 = cumemcap_ledger_raises(20, CUMEMCAP_LOCAL_live);
	for (int i = 1; i <= 1000; i++) {
		cumemcap_ledger_move(20, k, -k);
		ck_assert_uint_eq(cumemcap_ledger_get(20, CUMEMCAP_FIG_peak_live), (uint64_t)(i * k));
	}
	uint32_t raises = cumemcap_ledger_raises(20, CUMEMCAP_LOCAL_live) - r0;
	ck_assert_uint_le(raises, 1000 * k / CUMEMCAP_LEDGER_STEP + 2);
	/* Given back: `pooled` climbs to where it was, its peak not past it. */
	r0 = cumemcap_ledger_raises(20, CUMEMCAP_LOCAL_pooled);
	for (int i = 1; i <= 1000; i++) {
		cumemcap_ledger_move(20, -k, k);
		ck_assert_uint_eq(cumemcap_ledger_get(20, CUMEMCAP_FIG_peak_pooled), 64 << 20);
	}
	raises = cumemcap_ledger_raises(20, CUMEMCAP_LOCAL_pooled) - r0;
	ck_assert_uint_le(raises, 1000 * k / CUMEMCAP_LEDGER_STEP + 2);
	ck_assert_uint_eq(cumemcap_ledger_get(20, CUMEMCAP_FIG_live), 0);
	ck_assert_uint_eq(cumemcap_ledger_get(20, CUMEMCAP_FIG_peak_live), 1000 * k);
}
END_TEST

/* Between raises a thread's top counts the device's atomic as it is then:
 * `pooled` released through the atomic (the worker giving segments back)
 * while the thread's delta climbs within its step leaves the peak exact,
 * not the figure as of the last raise plus the climb. */
START_TEST(ledger_climb_exact_while_the_atomic_falls)
{
	cumemcap_ledger_reset();
	const int64_t k = 4096;
	cumemcap_ledger_pooled_add(21, 1 << 20);
	cumemcap_ledger_move(21, 0, k); /* a raise: 1 MiB + 4 KiB */
	ck_assert_uint_eq(cumemcap_ledger_get(21, CUMEMCAP_FIG_peak_pooled), (1 << 20) + k);
	cumemcap_ledger_pooled_sub(21, 2 * k);
	cumemcap_ledger_move(21, 0, k);
	cumemcap_ledger_move(21, 0, k);
	ck_assert_uint_eq(cumemcap_ledger_get(21, CUMEMCAP_FIG_pooled), (1 << 20) + k);
	ck_assert_uint_eq(cumemcap_ledger_get(21, CUMEMCAP_FIG_peak_pooled), (1 << 20) + k);
	cumemcap_ledger_move(21, 0, k);
	ck_assert_uint_eq(cumemcap_ledger_get(21, CUMEMCAP_FIG_peak_pooled), (1 << 20) + 2 * k);
}
END_TEST

static pthread_barrier_t fold_bar;

static void *move_and_exit(void *arg)
{
	(void)arg;
	cumemcap_ledger_move(22, 1 << 20, -(1 << 20));
	pthread_barrier_wait(&fold_bar); /* moved */
	pthread_barrier_wait(&fold_bar); /* the main thread raised */
	return NULL;
}

/* A top counts the other slots' bounds as its thread's last raise summed
 * them; once a thread that held one exits (its delta folded into the
 * device's atomic, its bound gone), the next update raises again rather
 * than count that delta twice: the peak stays within the rule. */
START_TEST(ledger_climb_after_a_fold_counts_once)
{
	cumemcap_ledger_reset();
	const int64_t k = 4096;
	cumemcap_ledger_pooled_add(22, 1 << 30);
	pthread_barrier_init(&fold_bar, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, move_and_exit, NULL);
	pthread_barrier_wait(&fold_bar);
	cumemcap_ledger_move(22, k, -k); /* a raise: the other's bound counted */
	pthread_barrier_wait(&fold_bar);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&fold_bar);
	cumemcap_ledger_move(22, k, -k); /* within the step */
	cumemcap_ledger_move(22, k, -k);
	uint64_t live = (1 << 20) + 3 * k;
	ck_assert_uint_eq(cumemcap_ledger_get(22, CUMEMCAP_FIG_live), live);
	uint64_t peak = cumemcap_ledger_get(22, CUMEMCAP_FIG_peak_live);
	ck_assert_uint_ge(peak, live);
	ck_assert_uint_le(peak, live + (uint64_t)CUMEMCAP_LEDGER_SLACK);
}
END_TEST

static pthread_barrier_t raise_bar;

static void *give_back_then_grow(void *arg)
{
	(void)arg;
	cumemcap_ledger_move(23, 0, 1 << 20); /* blocks given back: a raise */
	pthread_barrier_wait(&raise_bar);
	pthread_barrier_wait(&raise_bar); /* the main thread raised */
	cumemcap_ledger_move(23, 0, -(1 << 20)); /* handed out again */
	cumemcap_ledger_pooled_add(23, 1 << 20); /* a segment joins */
	pthread_barrier_wait(&raise_bar);
	pthread_barrier_wait(&raise_bar); /* checked: no fold before */
	return NULL;
}

/* A top's `others` goes stale when another thread raises or the device's
 * atomic rises after it was summed: the next update raises again, rather
 * than count the other thread's old bound with the new atomic. */
START_TEST(ledger_climb_after_another_raise_sums_again)
{
	cumemcap_ledger_reset();
	const int64_t k = 4096;
	cumemcap_ledger_pooled_add(23, 64 << 10);
	pthread_barrier_init(&raise_bar, NULL, 2);
	pthread_t t;
	pthread_create(&t, NULL, give_back_then_grow, NULL);
	pthread_barrier_wait(&raise_bar);
	cumemcap_ledger_move(23, 0, k); /* a raise: the other's bound counted */
	pthread_barrier_wait(&raise_bar);
	pthread_barrier_wait(&raise_bar);
	cumemcap_ledger_move(23, 0, k); /* within the step */
	uint64_t pooled = (64 << 10) + (1 << 20) + 2 * k;
	ck_assert_uint_eq(cumemcap_ledger_get(23, CUMEMCAP_FIG_pooled), pooled);
	uint64_t peak = cumemcap_ledger_get(23, CUMEMCAP_FIG_peak_pooled);
	ck_assert_uint_ge(peak, pooled);
	ck_assert_uint_le(peak, pooled + (uint64_t)CUMEMCAP_LEDGER_SLACK);
	pthread_barrier_wait(&raise_bar);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&raise_bar);
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
	ADD_TEST(s, ledger_block_moves_exact_on_one_thread);
	ADD_TEST(s, ledger_block_moves_survive_thread_exit);
	ADD_TEST(s, ledger_block_moves_concurrent_within_the_rule);
	ADD_TEST(s, ledger_block_moves_taking_turns);
	ADD_TEST(s, ledger_passthrough_in_the_threads_slot);
	ADD_TEST(s, ledger_passthrough_survives_thread_exit);
	ADD_TEST(s, ledger_passthrough_concurrent_exact);
	ADD_TEST(s, ledger_climb_raises_once_per_step);
	ADD_TEST(s, ledger_climb_exact_while_the_atomic_falls);
	ADD_TEST(s, ledger_climb_after_a_fold_counts_once);
	ADD_TEST(s, ledger_climb_after_another_raise_sums_again);
	return s;
}
