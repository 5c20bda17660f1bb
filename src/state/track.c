/* track: see track.h. Linear probing (power-of-two capacity, at most half
 * full) with backward-shift deletion, so no tombstones. Key 0 marks an empty
 * slot: the driver never returns 0 as a pointer or handle. */
#include "state/track.h"
#include "platform/mix.h"
#include "platform/spin.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_flag lock = ATOMIC_FLAG_INIT;
static struct cumemcap_block *slot;
static uint32_t mask; /* capacity - 1, or 0 when unallocated */
static uint32_t used;

/* The key with its namespace in the top byte (keys fit in 56 bits), and
 * back; device pointers, async or not, share one (one owner at a time). */
static uint64_t stored_key(unsigned handle, uint64_t key)
{
	return key ^
	       ((uint64_t)(handle == CUMEMCAP_HANDLE_ASYNC ? CUMEMCAP_HANDLE_PTR : handle) << 56);
}

/* A stored key's first slot in a table of capacity m + 1. */
static uint32_t home(uint64_t skey, uint32_t m)
{
	return (uint32_t)cumemcap_mix_short(skey) & m;
}

/* The slot of skey in table t of capacity m + 1, or the empty slot ending its cluster. */
static uint32_t probe(const struct cumemcap_block *t, uint32_t m, uint64_t skey)
{
	uint32_t i = home(skey, m);
	while (t[i].key && t[i].key != skey)
		i = (i + 1) & m;
	return i;
}

static bool grow(void)
{
	uint32_t cap = mask ? (mask + 1) * 2 : 64;
	struct cumemcap_block *bigger = calloc(cap, sizeof(*bigger));
	if (!bigger)
		return false;
	for (uint32_t i = 0; mask && i <= mask; i++)
		if (slot[i].key)
			bigger[probe(bigger, cap - 1, slot[i].key)] = slot[i];
	free(slot);
	slot = bigger;
	mask = cap - 1;
	return true;
}

bool cumemcap_track_insert(const struct cumemcap_block *b, struct cumemcap_block *displaced)
{
	uint64_t skey = stored_key(b->handle, b->key);
	cumemcap_spin_lock(&lock);
	if ((used + 1) * 2 > mask + 1 && !grow()) {
		/* Out of memory: untracked, its bytes stay charged (safe side). */
		cumemcap_spin_unlock(&lock);
		return false;
	}
	uint32_t i = probe(slot, mask, skey);
	bool found = slot[i].key != 0;
	if (found) {
		*displaced = slot[i];
		displaced->key = b->key;
	} else {
		used++;
	}
	slot[i] = *b;
	slot[i].key = skey;
	cumemcap_spin_unlock(&lock);
	return found;
}

/* Remove slot i, shifting the cluster back. Lock held. */
static void delete_at(uint32_t i)
{
	for (uint32_t j = (i + 1) & mask; slot[j].key; j = (j + 1) & mask) {
		uint32_t h = home(slot[j].key, mask);
		/* Move j into the hole at i if its home is not in (i, j]. */
		if (((j - h) & mask) >= ((j - i) & mask)) {
			slot[i] = slot[j];
			i = j;
		}
	}
	slot[i].key = 0; /* empty: nothing reads the rest of an empty slot */
	used--;
}

bool cumemcap_track_remove(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *out)
{
	uint64_t skey = stored_key(handle, key);
	cumemcap_spin_lock(&lock);
	uint32_t i = mask ? probe(slot, mask, skey) : 0;
	bool found = mask && slot[i].key == skey;
	if (found) {
		*out = slot[i];
		out->key = key;
		delete_at(i);
	}
	cumemcap_spin_unlock(&lock);
	return found;
}

void cumemcap_track_purge_ctx(CUcontext ctx, void (*fn)(const struct cumemcap_block *b))
{
	cumemcap_spin_lock(&lock);
	for (uint32_t i = 0; mask && i <= mask;) {
		if (slot[i].key && slot[i].ctx == ctx) {
			struct cumemcap_block b = slot[i];
			b.key = stored_key(b.handle, b.key);
			delete_at(i);
			fn(&b);
			continue; /* slot i now holds a shifted entry */
		}
		i++;
	}
	cumemcap_spin_unlock(&lock);
}

uint64_t cumemcap_track_count(void)
{
	cumemcap_spin_lock(&lock);
	uint64_t n = used;
	cumemcap_spin_unlock(&lock);
	return n;
}

void cumemcap_track_lock(void)
{
	cumemcap_spin_lock(&lock);
}

void cumemcap_track_unlock(void)
{
	cumemcap_spin_unlock(&lock);
}

void cumemcap_track_reset_locked(void)
{
	if (mask)
		memset(slot, 0, (size_t)(mask + 1) * sizeof(*slot));
	used = 0;
}
