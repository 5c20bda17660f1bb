/* Unit tests for src/ledger.c: the limit check. */
#include "config.h"

#include <pthread.h>

#include "ledger.h"
#include "test-common.h"

START_TEST(ledger_reserve_up_to_the_limit)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(1, 1000);
	ck_assert(cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 600));
	ck_assert(cumemcap_ledger_reserve(1, CUMEMCAP_KIND_pool, 400));
	ck_assert_uint_eq(cumemcap_ledger_headroom(1), 0);
	ck_assert(!cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 1));
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[1].reserved), 1000);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[1].kind[CUMEMCAP_KIND_linear]), 600);
	cumemcap_ledger_sub(1, CUMEMCAP_KIND_linear, 600);
	ck_assert_uint_eq(cumemcap_ledger_headroom(1), 600);
	ck_assert(!cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 601));
	ck_assert(cumemcap_ledger_reserve(1, CUMEMCAP_KIND_linear, 600));
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[1].peak), 1000);
	/* Requests are noted by the caller, reservations are not requests. */
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[1].largest_request), 0);
	cumemcap_ledger_note_request(1, 601);
	cumemcap_ledger_note_request(1, 7);
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[1].largest_request), 601);
}
END_TEST

START_TEST(ledger_no_overflow_near_uint64_max)
{
	cumemcap_ledger_reset();
	cumemcap_ledger_set_limit(2, 1000);
	ck_assert(cumemcap_ledger_reserve(2, CUMEMCAP_KIND_linear, 10));
	ck_assert(!cumemcap_ledger_reserve(2, CUMEMCAP_KIND_linear, UINT64_MAX));
	ck_assert(!cumemcap_ledger_reserve(2, CUMEMCAP_KIND_linear, UINT64_MAX - 5));
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[2].reserved), 10);
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
			ck_assert_uint_le(atomic_load(&cumemcap_ledger[4].reserved), 7000);
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
	ck_assert_uint_eq(atomic_load(&cumemcap_ledger[4].reserved), held);
	ck_assert_uint_le(atomic_load(&cumemcap_ledger[4].peak), 7000);
}
END_TEST

TEST_SUITE(ledger)
{
	Suite *s = suite_create("ledger");
	ADD_TEST(s, ledger_reserve_up_to_the_limit);
	ADD_TEST(s, ledger_no_overflow_near_uint64_max);
	ADD_TEST(s, ledger_concurrent_reservations_never_overshoot);
	return s;
}
