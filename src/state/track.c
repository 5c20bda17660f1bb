/* track: see track.h.
 *
 * Each stripe is a linear-probing table (power-of-two capacity, at most
 * half full) with backward-shift deletion, so there are no tombstones and
 * a lookup never scans more than a cluster. Key 0 marks an empty slot:
 * the driver never returns 0 as a pointer or handle. The stored key mixes
 * in the handle kind's namespace so a CUarray and a device pointer with
 * equal bits do not collide. The stripe locks are platform/spin.h's. */
#include "state/track.h"
#include "platform/spin.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define STRIPES 64

struct stripe {
	_Alignas(64) atomic_flag lock;
	struct cumemcap_block *slot;
	uint32_t mask; /* capacity - 1, or 0 when unallocated */
	uint32_t used;
};

static struct stripe stripes[STRIPES] = {
#define S { .lock = ATOMIC_FLAG_INIT }
#define S8 S, S, S, S, S, S, S, S
	S8, S8, S8, S8, S8, S8, S8, S8
#undef S8
#undef S
};

/* Contended: spin (and yield) out of line, so that the uncontended
 * insert and remove stay small. */
__attribute__((noinline, cold)) static void stripe_lock_contended(struct stripe *s)
{
	cumemcap_spin_lock(&s->lock);
}

static inline __attribute__((always_inline)) void stripe_lock(struct stripe *s)
{
	if (__builtin_expect(atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire), 0))
		stripe_lock_contended(s);
}

static void stripe_unlock(struct stripe *s)
{
	cumemcap_spin_unlock(&s->lock);
}

/* The key with its handle kind's namespace in the top byte (device
 * addresses and handles fit in 56 bits on every platform CUDA supports),
 * and back: device pointers, whether from cuMemAlloc* or cuMemAlloc*Async,
 * are one namespace (the driver hands an address to one allocation at a
 * time, so a free finds either in one lookup). */
static uint64_t stored_key(unsigned handle, uint64_t key)
{
	return key ^
	       ((uint64_t)(handle == CUMEMCAP_HANDLE_ASYNC ? CUMEMCAP_HANDLE_PTR : handle) << 56);
}

/* A stored key's hash: its low bits pick the stripe, the next ones the
 * slot. A multiply between two xor-shifts (lighter than mix.h's) spreads
 * addresses that differ only in their middle bits over both. */
static inline uint64_t hash_of(uint64_t skey)
{
	uint64_t x = skey ^ (skey >> 31);
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

static struct stripe *stripe_of(uint64_t skey, uint64_t *hash)
{
	*hash = hash_of(skey);
	return &stripes[*hash % STRIPES];
}

__attribute__((noinline, cold)) static bool grow(struct stripe *s)
{
	uint32_t cap = s->mask ? (s->mask + 1) * 2 : 64;
	struct cumemcap_block *slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return false;
	for (uint32_t i = 0; s->mask && i <= s->mask; i++) {
		if (!s->slot[i].key)
			continue;
		uint32_t j = (uint32_t)(hash_of(s->slot[i].key) / STRIPES) & (cap - 1);
		while (slot[j].key)
			j = (j + 1) & (cap - 1);
		slot[j] = s->slot[i];
	}
	free(s->slot);
	s->slot = slot;
	s->mask = cap - 1;
	return true;
}

bool cumemcap_track_insert(const struct cumemcap_block *b, struct cumemcap_block *displaced)
{
	uint64_t hash, skey = stored_key(b->handle, b->key);
	struct stripe *s = stripe_of(skey, &hash);
	stripe_lock(s);
	if (__builtin_expect((s->used + 1) * 2 > s->mask + 1, 0) && !grow(s)) {
		/* Out of host memory: the block stays untracked; its free
		 * will pass through and its bytes stay charged (safe side). */
		stripe_unlock(s);
		return false;
	}
	bool found = false;
	uint32_t mask = s->mask;
	struct cumemcap_block *slot = s->slot;
	uint32_t i = (uint32_t)(hash / STRIPES) & mask;
	while (slot[i].key && slot[i].key != skey)
		i = (i + 1) & mask;
	if (!slot[i].key) {
		s->used++;
	} else {
		*displaced = slot[i];
		displaced->key = b->key;
		found = true;
	}
	slot[i] = *b;
	slot[i].key = skey;
	stripe_unlock(s);
	return found;
}

/* Remove slot i from stripe s, shifting the cluster back. Lock held. */
static inline __attribute__((always_inline)) void delete_at(struct stripe *s, uint32_t i)
{
	uint32_t j = i, mask = s->mask;
	struct cumemcap_block *slot = s->slot;
	for (;;) {
		j = (j + 1) & mask;
		if (!slot[j].key)
			break;
		uint32_t home = (uint32_t)(hash_of(slot[j].key) / STRIPES) & mask;
		/* Move j into the hole at i if its home is not in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			slot[i] = slot[j];
			i = j;
		}
	}
	slot[i].key = 0; /* empty: nothing reads the rest of an empty slot */
	s->used--;
}

bool cumemcap_track_remove(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *out)
{
	uint64_t hash, skey = stored_key(handle, key);
	struct stripe *s = stripe_of(skey, &hash);
	bool found = false;
	stripe_lock(s);
	if (s->mask) {
		uint32_t i = (uint32_t)(hash / STRIPES) & s->mask;
		while (s->slot[i].key) {
			if (s->slot[i].key == skey) {
				*out = s->slot[i];
				out->key = key;
				delete_at(s, i);
				found = true;
				break;
			}
			i = (i + 1) & s->mask;
		}
	}
	stripe_unlock(s);
	return found;
}

void cumemcap_track_purge_ctx(CUcontext ctx, void (*fn)(const struct cumemcap_block *b))
{
	for (int n = 0; n < STRIPES; n++) {
		struct stripe *s = &stripes[n];
		stripe_lock(s);
		for (uint32_t i = 0; s->mask && i <= s->mask;) {
			if (s->slot[i].key && s->slot[i].ctx == ctx) {
				struct cumemcap_block b = s->slot[i];
				b.key = stored_key(b.handle, b.key);
				delete_at(s, i);
				fn(&b);
				continue; /* slot i now holds a shifted entry */
			}
			i++;
		}
		stripe_unlock(s);
	}
}

uint64_t cumemcap_track_count(void)
{
	uint64_t n = 0;
	for (int i = 0; i < STRIPES; i++) {
		stripe_lock(&stripes[i]);
		n += stripes[i].used;
		stripe_unlock(&stripes[i]);
	}
	return n;
}

void cumemcap_track_lock_all(void)
{
	for (int i = 0; i < STRIPES; i++)
		stripe_lock(&stripes[i]);
}

void cumemcap_track_unlock_all(void)
{
	for (int i = STRIPES - 1; i >= 0; i--)
		stripe_unlock(&stripes[i]);
}

void cumemcap_track_reset_locked(void)
{
	for (int i = 0; i < STRIPES; i++) {
		struct stripe *s = &stripes[i];
		if (s->mask)
			memset(s->slot, 0, (size_t)(s->mask + 1) * sizeof(*s->slot));
		s->used = 0;
	}
}
