/* Unit tests for src/state/track.c: the map of what was handed out. */
#include "config.h"

#include <pthread.h>

#include "state/track.h"
#include "test-common.h"

static uint64_t purged;
static uint64_t purged_key;

static void note_key(const struct cumemcap_block *b)
{
	purged_key = b->key;
}

static void count_purged(const struct cumemcap_block *b)
{
	purged += b->bytes;
}

START_TEST(track_insert_remove_many)
{
	enum { N = 50000 };
	uint64_t before = cumemcap_track_count();
	for (uint64_t i = 1; i <= N; i++) {
		struct cumemcap_block b = { .key = i * 512, .bytes = i, .dev = 0,
					    .handle = CUMEMCAP_HANDLE_PTR };
		ck_assert(!cumemcap_track_insert(&b, &(struct cumemcap_block){ 0 }));
	}
	ck_assert_uint_eq(cumemcap_track_count(), before + N);
	/* Remove every other one, then check the rest are all still found. */
	for (uint64_t i = 1; i <= N; i += 2) {
		struct cumemcap_block out;
		ck_assert(cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, i * 512, &out));
		ck_assert_uint_eq(out.bytes, i);
		ck_assert_uint_eq(out.key, i * 512);
		ck_assert(!cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, i * 512, &out));
	}
	for (uint64_t i = 2; i <= N; i += 2) {
		struct cumemcap_block out;
		ck_assert_msg(cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, i * 512, &out), "key %llu lost",
			      (unsigned long long)i);
		ck_assert_uint_eq(out.bytes, i);
	}
	ck_assert_uint_eq(cumemcap_track_count(), before);
}
END_TEST

/* The same bits as a pointer and as an array handle are different things. */
START_TEST(track_kinds_do_not_collide)
{
	struct cumemcap_block p = { .key = 0x7000, .bytes = 1, .handle = CUMEMCAP_HANDLE_PTR };
	struct cumemcap_block a = { .key = 0x7000, .bytes = 2, .handle = CUMEMCAP_HANDLE_ARRAY };
	struct cumemcap_block out;
	ck_assert(!cumemcap_track_insert(&p, &out));
	ck_assert(!cumemcap_track_insert(&a, &out));
	ck_assert(!cumemcap_track_remove(CUMEMCAP_HANDLE_VMM, 0x7000, &out));
	ck_assert(cumemcap_track_remove(CUMEMCAP_HANDLE_ARRAY, 0x7000, &out));
	ck_assert_uint_eq(out.bytes, 2);
	ck_assert(cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, 0x7000, &out));
	ck_assert_uint_eq(out.bytes, 1);
}
END_TEST

START_TEST(track_purge_context)
{
	CUcontext c1 = (CUcontext)(uintptr_t)0x1000, c2 = (CUcontext)(uintptr_t)0x2000;
	for (uint64_t i = 1; i <= 1000; i++) {
		struct cumemcap_block b = { .key = i << 12, .bytes = 1, .ctx = (i % 4) ? c1 : c2,
					    .handle = CUMEMCAP_HANDLE_PTR };
		ck_assert(!cumemcap_track_insert(&b, &(struct cumemcap_block){ 0 }));
	}
	purged = 0;
	cumemcap_track_purge_ctx(c1, count_purged);
	ck_assert_uint_eq(purged, 750);
	struct cumemcap_block out;
	for (uint64_t i = 1; i <= 1000; i++)
		ck_assert(cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, i << 12, &out) == ((i % 4) == 0));
}
END_TEST

/* The driver handed a key out again: the record under it is stale, and
 * the insert hands it back for settling instead of losing it (its bytes
 * stayed charged forever). */
START_TEST(track_insert_returns_stale)
{
	struct cumemcap_block old = { .key = 0x9000, .bytes = 7, .dev = 1, .handle = CUMEMCAP_HANDLE_PTR };
	struct cumemcap_block now = { .key = 0x9000, .bytes = 9, .dev = 0, .handle = CUMEMCAP_HANDLE_PTR };
	struct cumemcap_block out = { 0 };
	uint64_t before = cumemcap_track_count();
	ck_assert(!cumemcap_track_insert(&old, &out));
	ck_assert(cumemcap_track_insert(&now, &out));
	ck_assert_uint_eq(out.key, 0x9000);
	ck_assert_uint_eq(out.bytes, 7);
	ck_assert_int_eq(out.dev, 1);
	ck_assert_uint_eq(cumemcap_track_count(), before + 1);
	ck_assert(cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, 0x9000, &out));
	ck_assert_uint_eq(out.bytes, 9);
}
END_TEST

/* Device pointers from cuMemAlloc* and cuMemAlloc*Async are one namespace:
 * a free of either kind finds the record in one lookup, and the record says
 * which kind it is; a new allocation at an address displaces the other
 * kind's stale record. */
START_TEST(track_pointer_kinds_share_namespace)
{
	struct cumemcap_block a = { .key = 0x9000, .bytes = 3, .handle = CUMEMCAP_HANDLE_ASYNC };
	struct cumemcap_block p = { .key = 0x9000, .bytes = 5, .handle = CUMEMCAP_HANDLE_PTR };
	struct cumemcap_block out;
	ck_assert(!cumemcap_track_insert(&a, &out));
	ck_assert(cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, 0x9000, &out));
	ck_assert_uint_eq(out.handle, CUMEMCAP_HANDLE_ASYNC);
	ck_assert_uint_eq(out.bytes, 3);
	ck_assert_uint_eq(out.key, 0x9000);
	ck_assert(!cumemcap_track_insert(&a, &out));
	ck_assert(cumemcap_track_insert(&p, &out));
	ck_assert_uint_eq(out.handle, CUMEMCAP_HANDLE_ASYNC);
	ck_assert_uint_eq(out.key, 0x9000);
	ck_assert(cumemcap_track_remove(CUMEMCAP_HANDLE_ASYNC, 0x9000, &out));
	ck_assert_uint_eq(out.handle, CUMEMCAP_HANDLE_PTR);
	ck_assert(!cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, 0x9000, &out));
	/* A purge gives back the key the program knows. */
	CUcontext c = (CUcontext)(uintptr_t)0x3000;
	struct cumemcap_block q = { .key = 0xa000, .bytes = 7, .ctx = c, .handle = CUMEMCAP_HANDLE_ASYNC };
	ck_assert(!cumemcap_track_insert(&q, &out));
	purged_key = 0;
	cumemcap_track_purge_ctx(c, note_key);
	ck_assert_uint_eq(purged_key, 0xa000);
}
END_TEST

enum { TRACKERS = 4, TRACK_KEYS = 2000, TRACK_ROUNDS = 40 };

static void *track_churn(void *arg)
{
	uint64_t base = ((uint64_t)(uintptr_t)arg + 1) << 40;
	uintptr_t lost = 0;
	for (int r = 0; r < TRACK_ROUNDS; r++) {
		for (uint64_t i = 1; i <= TRACK_KEYS; i++) {
			struct cumemcap_block b = { .key = base | i * 512, .bytes = i + (uint64_t)r, .dev = 0,
						    .handle = CUMEMCAP_HANDLE_PTR };
			struct cumemcap_block stale;
			if (cumemcap_track_insert(&b, &stale))
				lost++;
		}
		for (uint64_t i = 1; i <= TRACK_KEYS; i++) {
			struct cumemcap_block out;
			if (!cumemcap_track_remove(CUMEMCAP_HANDLE_PTR, base | i * 512, &out) ||
			    out.bytes != i + (uint64_t)r)
				lost++;
		}
	}
	return (void *)lost;
}

/* Threads inserting and removing at once meet on the map's lock (the
 * table grown under it): every record is found once, with its own
 * figures, and the map ends empty. */
START_TEST(track_concurrent_insert_remove)
{
	uint64_t before = cumemcap_track_count();
	pthread_t t[TRACKERS];
	for (uintptr_t i = 0; i < TRACKERS; i++)
		pthread_create(&t[i], NULL, track_churn, (void *)i);
	for (int i = 0; i < TRACKERS; i++) {
		void *lost;
		pthread_join(t[i], &lost);
		ck_assert_uint_eq((uintptr_t)lost, 0);
	}
	ck_assert_uint_eq(cumemcap_track_count(), before);
}
END_TEST

TEST_SUITE(track)
{
	Suite *s = suite_create("track");
	ADD_TEST(s, track_insert_remove_many);
	ADD_TEST(s, track_kinds_do_not_collide);
	ADD_TEST(s, track_pointer_kinds_share_namespace);
	ADD_TEST(s, track_purge_context);
	ADD_TEST(s, track_insert_returns_stale);
	ADD_TEST(s, track_concurrent_insert_remove);
	return s;
}
