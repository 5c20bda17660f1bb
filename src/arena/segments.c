/* arena/segments: the arenas' records (arena-internal.h): the arena table,
 * the address hash's growth, the segment records and their index by
 * address, emptying an arena.
 *
 * Thread safety: every function runs with the arena's spinlock held; the
 * table is grown under arena_create_lock. No driver call is made here. */
#include "arena/arena-internal.h"

#include <stddef.h>

struct arena arenas[MAX_ARENAS];
_Atomic uint32_t cumemcap_arena_count;
pthread_mutex_t arena_create_lock = PTHREAD_MUTEX_INITIALIZER;
CUMEMCAP_TLS struct arena *arena_last;
_Static_assert(MAX_ARENAS <= CUMEMCAP_LEDGER_ARENAS, "each arena has a record of its own in the ledger");

bool arena_slots_grow(struct arena *a)
{
	uint32_t old = a->slot_mask ? a->slot_mask + 1 : 0;
	uint32_t cap = old ? old * 2 : 1024;
	uint64_t *prev = a->slots, *s = cap > old ? calloc(cap, sizeof(*s)) : NULL;
	if (!s)
		return false;
	a->slots = s;
	a->slot_mask = cap - 1;
	a->slot_used = 0;
	for (uint32_t i = 0; i < old; i++) /* a quarter full at most: no growth */
		if (prev[i])
			hash_insert(a, prev[i] >> 24 << UNIT_SHIFT, (uint32_t)(prev[i] & (MAX_CHUNKS - 1)));
	free(prev);
	return true;
}

static uint32_t seg_new(struct arena *a)
{
	if (a->unused_segs != NONE) {
		uint32_t i = a->unused_segs;
		a->unused_segs = a->segs[i].first;
		return i;
	}
	if (a->seg_count == a->seg_cap) {
		uint32_t cap = a->seg_cap ? a->seg_cap * 2 : 64;
		struct segment *s = realloc(a->segs, (size_t)cap * sizeof(*s));
		if (!s)
			return NONE;
		a->segs = s;
		uint32_t *b = realloc(a->by_addr, (size_t)cap * sizeof(*b));
		if (!b)
			return NONE;
		a->by_addr = b;
		a->seg_cap = cap;
	}
	return a->seg_count++;
}

uint32_t arena_seg_add(struct arena *a, CUdeviceptr base, uint64_t bytes, bool packed, bool prealloc)
{
	uint32_t ci = chunk_new(a);
	uint32_t si = ci != NONE ? seg_new(a) : NONE;
	if (si == NONE) {
		if (ci != NONE)
			chunk_drop(a, ci);
		return NONE;
	}
	a->segs[si] = (struct segment){ .base = base, .bytes = bytes, .first = ci, .packed = packed,
					.prealloc = prealloc };
	/* Into the address index, which has room for every segment record. */
	uint32_t i = a->addr_count++;
	for (; i > 0 && a->segs[a->by_addr[i - 1]].base > base; i--)
		a->by_addr[i] = a->by_addr[i - 1];
	a->by_addr[i] = si;
	a->chunks[ci] = (struct chunk){ .seg = si, .off = 0, .units = (uint32_t)(bytes >> UNIT_SHIFT),
					.prev = NONE, .next = NONE };
	a->held += bytes;
	bytes_to_ledger(a);
	bin_insert(a, ci);
	return ci;
}

void arena_seg_detach(struct arena *a, uint32_t si)
{
	struct segment *s = &a->segs[si];
	uint32_t ci = s->first;
	bin_remove(a, ci);
	chunk_drop(a, ci);
	if (s->free_since && !s->prealloc)
		a->whole_free -= s->bytes;
	uint32_t i = 0;
	while (a->by_addr[i] != si)
		i++;
	memmove(&a->by_addr[i], &a->by_addr[i + 1], (a->addr_count - i - 1) * sizeof(uint32_t));
	a->addr_count--;
	a->held -= s->bytes;
	bytes_to_ledger(a);
	s->first = a->unused_segs;
	a->unused_segs = si;
}

void arena_clear(struct arena *a)
{
	free(a->chunks);
	free(a->segs);
	free(a->by_addr);
	free(a->slots);
	a->epoch++;
	memset((char *)a + offsetof(struct arena, ctx), 0, sizeof(*a) - offsetof(struct arena, ctx));
	a->unused_chunks = a->unused_segs = NONE;
	a->pend_head = a->pend_tail = NONE;
	for (unsigned b = 0; b < BINS; b++)
		a->bins.head[b] = a->big.head[b] = NONE;
	for (unsigned u = 0; u <= QUICK_UNITS; u++)
		a->quick[u] = NONE;
}

bool cumemcap_arena_warn_ipc(void)
{
	static _Atomic bool warned;
	return !atomic_exchange(&warned, true);
}
