/* test-arena-hash: the arenas' address hash (src/arena/arena-internal.h):
 * linear probing, a removal moving the rest of its run back.
 *
 * Each case drives a zeroed struct arena through hash_insert, hash_find
 * and hash_remove_slot against a plain list of what should be in it, and
 * checks that every key in the list is found with its chunk index and that
 * the keys taken out are not. */
#include "test-common.h"

#include <stdlib.h>
#include <string.h>

#include "arena/arena-internal.h"

#define KEYS 6000

static struct arena a;
static CUdeviceptr in[KEYS];   /* block addresses in the table */
static uint32_t ci_of[KEYS];
static unsigned n_in;
static CUdeviceptr out[KEYS];  /* taken out, never put back */
static unsigned n_out;

static void reset(void)
{
	free(a.slots);
	memset(&a, 0, sizeof(a));
	n_in = n_out = 0;
}

static void put(CUdeviceptr p, uint32_t ci)
{
	ck_assert(hash_insert(&a, p, ci));
	in[n_in] = p;
	ci_of[n_in++] = ci;
}

static void take(unsigned i)
{
	uint32_t j = hash_find(&a, in[i]);
	ck_assert_uint_ne(j, NONE);
	hash_remove_slot(&a, j);
	out[n_out++] = in[i];
	in[i] = in[--n_in];
	ci_of[i] = ci_of[n_in];
}

static void check_all(void)
{
	ck_assert_uint_eq(a.slot_used, n_in);
	ck_assert_uint_le(a.slot_used * 2, a.slot_mask + 1);
	for (unsigned i = 0; i < n_in; i++) {
		uint32_t j = hash_find(&a, in[i]);
		ck_assert_uint_ne(j, NONE);
		ck_assert_uint_eq(a.slots[j] >> 24, in[i] >> UNIT_SHIFT);
		ck_assert_uint_eq((uint32_t)(a.slots[j] & (MAX_CHUNKS - 1)), ci_of[i]);
	}
	for (unsigned i = 0; i < n_out; i++)
		ck_assert_uint_eq(hash_find(&a, out[i]), NONE);
}

static uint32_t home(CUdeviceptr p, uint32_t cap)
{
	return (uint32_t)cumemcap_mix_short(p >> UNIT_SHIFT) & (cap - 1);
}

/* n distinct block addresses from `from` on whose keys all have the home
 * slot of `like`, in a table of `cap` slots. */
static unsigned same_home(CUdeviceptr *p, unsigned n, uint32_t cap, CUdeviceptr like, CUdeviceptr from)
{
	unsigned k = 0;
	for (CUdeviceptr q = from; k < n; q += UNIT)
		if (home(q, cap) == home(like, cap))
			p[k++] = q;
	return k;
}

/* A run of keys with one home slot: removing its first and middle keys
 * moves the rest back, so every one left is still found and a new key of
 * that home takes a freed slot. */
START_TEST(arena_hash_run_removals)
{
	reset();
	put(0x7f0000000000ull, 1); /* makes the first table: 1024 slots */
	ck_assert_uint_eq(a.slot_mask + 1, 1024);
	CUdeviceptr p[20];
	ck_assert_uint_eq(same_home(p, 20, 1024, 0x7f0000100000ull, 0x7f0000100000ull), 20);
	for (unsigned i = 0; i < 20; i++)
		put(p[i], 100 + i);
	check_all();
	for (unsigned k = 0; k < 20; k += 6)
		for (unsigned i = 0; i < n_in; i++)
			if (in[i] == p[k]) {
				take(i);
				break;
			}
	check_all();
	CUdeviceptr r[3];
	ck_assert_uint_eq(same_home(r, 3, 1024, p[0], p[19] + UNIT), 3);
	for (unsigned i = 0; i < 3; i++)
		put(r[i], 200 + i);
	check_all();
}
END_TEST

/* 30000 random inserts and removals, with growth along the way. */
START_TEST(arena_hash_random_against_a_list)
{
	reset();
	static bool seen[7 * 4096];
	memset(seen, 0, sizeof(seen));
	uint64_t s = 0x9e3779b97f4a7c15ull;
	uint32_t grown = 0;
	for (int step = 0; step < 30000; step++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		bool add = n_in < 200 || (n_in < KEYS - 1 && n_out < KEYS - 1 && (s & 3) != 0);
		if (add) {
			/* Dense runs of neighbouring blocks, as packed segments give;
			 * an address is used once (seen[]). */
			unsigned k = (unsigned)((s >> 8) % 4096) + 4096u * (unsigned)(step % 7);
			CUdeviceptr p = 0x7f0000000000ull + (k % 4096) * UNIT + (uint64_t)(k / 4096) * (2u << 20);
			if (seen[k])
				continue;
			seen[k] = true;
			ck_assert_uint_eq(hash_find(&a, p), NONE);
			put(p, (uint32_t)(s >> 40) & (MAX_CHUNKS - 1));
		} else if (n_in && n_out < KEYS - 1) {
			take((unsigned)((s >> 20) % n_in));
		}
		if (a.slot_mask + 1 != grown) {
			grown = a.slot_mask + 1;
			check_all();
		}
		if (step % 2999 == 0)
			check_all();
	}
	check_all();
	/* Unaligned and never-seen addresses are not found. */
	ck_assert_uint_eq(hash_find(&a, 0x7f0000000000ull + 1), NONE);
	ck_assert_uint_eq(hash_find(&a, 0x100000000ull), NONE);
	reset();
	ck_assert_uint_eq(hash_find(&a, 0x7f0000000000ull), NONE); /* no table yet */
}
END_TEST

TEST_SUITE(arena_hash)
{
	Suite *s = suite_create("arena_hash");
	TCase *tc = tcase_create("hash");
	tcase_add_test(tc, arena_hash_run_removals);
	tcase_add_test(tc, arena_hash_random_against_a_list);
	suite_add_tcase(s, tc);
	return s;
}
