/* arena-internal: what more than one arena file needs (the allocator:
 * docs/design.md, "Pooled arenas"). One arena per (GPU, context, shard);
 * segments from the driver are cut into blocks, each a chunk record. A
 * freed block waits on the pending list until a fence (fence.h) proves it
 * idle; a small packed one then waits, not coalesced, on its quick list.
 *
 * Thread safety: each arena has its own spinlock, never held across a
 * driver call; after one, the arena's epoch or context tells whether it
 * was emptied meanwhile. The arena table is set up under
 * arena_create_lock and read without it; a slot is emptied, never freed. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena/arena.h"
#include "platform/cuda-api.h"
#include "platform/export.h"
#include "platform/mix.h"
#include "platform/spin.h"
#include "state/ledger.h"

#define UNIT 512u
#define UNIT_SHIFT 9
#define NONE UINT32_MAX
#define MAX_ARENAS 64
#define BINS 128
#define MAX_CHUNKS (1u << 24)
#define QUICK_UNITS 64 /* packed blocks of up to 32 KiB use the quick lists */

enum chunk_state { C_FREE = 0, C_LIVE, C_PENDING, C_LIMBO, C_QUICK };

struct chunk {
	uint32_t seg, off, units;  /* in 512-byte units */
	uint32_t prev, next;       /* address neighbours within the segment */
	uint32_t lprev, lnext;     /* bin list, pending list, or unused list */
	uint16_t pad;              /* units * 512 - requested (packed blocks) */
	uint8_t state, bin;
};
_Static_assert(sizeof(struct chunk) == 32, "a chunk record is 32 bytes");

struct segment {
	CUdeviceptr base;
	uint64_t bytes;
	uint64_t requested;  /* a whole-segment block: what the program asked */
	uint64_t free_since; /* ms it fell wholly free; 0 while in use */
	uint32_t first;      /* chunk at offset 0 */
	uint32_t live;       /* live chunks */
	uint32_t waiting;    /* pending, limbo or quick chunks */
	uint8_t packed, prealloc;
};

/* Free chunks by size class, each list linked by lprev/lnext. */
struct bins {
	uint32_t head[BINS];
	uint64_t bits[2]; /* the classes whose list is not empty */
};

struct arena {
	_Alignas(64) atomic_flag lock;
	uint32_t epoch; /* changes when the arena is emptied */
	CUcontext ctx;  /* NULL: slot empty */
	int dev;
	unsigned shard; /* 0: the context's primary arena */
	struct arena *_Atomic primary; /* a shard's primary, once looked up */
	bool failed;   /* preallocation failed: refuse everything */
	bool prealloc_held; /* holds its GPU's preallocation (arena_create_lock) */
	bool prealloc_due;  /* the preallocation is still to be taken (the lock) */

	struct chunk *chunks;
	uint32_t chunk_count, chunk_cap, unused_chunks;

	struct segment *segs;
	uint32_t seg_count, seg_cap, unused_segs;
	uint32_t *by_addr; /* segment indices in address order */
	uint32_t addr_count;

	uint64_t *slots; /* the address hash */
	uint32_t slot_mask, slot_used;

	struct bins bins; /* free chunks of packed segments */
	struct bins big;  /* free whole (unpacked) segments: their chunk */

	uint32_t pend_head, pend_tail;
	uint64_t pending_bytes;

	uint32_t quick[QUICK_UNITS + 1]; /* ready packed chunks by units, LIFO by lnext */
	uint32_t quick_count;

	uint64_t last_reclaim; /* ms */
	uint64_t held;       /* segment bytes */
	uint64_t live_bytes; /* handed out */
	uint64_t waste;      /* bytes of whole segments beyond their live block */
	uint64_t whole_free; /* bytes of wholly free segments (not preallocated) */
};

/* segments.c: the arena table, cumemcap_arena_count slots ever used; the
 * arena the calling thread last found, where a free looks first. */
extern struct arena arenas[MAX_ARENAS];
extern pthread_mutex_t arena_create_lock;
extern CUMEMCAP_TLS struct arena *arena_last;

/* The arena's record in the ledger, written under its lock. */
static inline struct cumemcap_ledger_arena *figures_of(const struct arena *a)
{
	return &cumemcap_ledger_arenas[a - arenas];
}

/* held = live_bytes + waste + cached: after any of them changes. */
static inline void bytes_to_ledger(struct arena *a)
{
	cumemcap_ledger_arena_bytes(figures_of(a), a->live_bytes, a->held - a->live_bytes - a->waste);
}

static inline unsigned class_of(uint64_t units)
{
	if (units < 4)
		return (unsigned)units;
	unsigned lg = 63u - (unsigned)__builtin_clzll(units);
	unsigned c = lg * 4 + (unsigned)((units >> (lg - 2)) & 3);
	return c < BINS ? c : BINS - 1;
}

static inline uint64_t unit_round(uint64_t bytes)
{
	return (bytes + UNIT - 1) & ~(uint64_t)(UNIT - 1);
}

/* ---- chunk records ------------------------------------------------------------------ */

static inline uint32_t chunk_new(struct arena *a)
{
	if (a->unused_chunks != NONE) {
		uint32_t i = a->unused_chunks;
		a->unused_chunks = a->chunks[i].lnext;
		return i;
	}
	if (a->chunk_count == a->chunk_cap) {
		uint32_t cap = a->chunk_cap ? a->chunk_cap * 2 : 1024; /* doubles to MAX_CHUNKS exactly */
		struct chunk *c = cap <= MAX_CHUNKS ? realloc(a->chunks, (size_t)cap * sizeof(*c)) : NULL;
		if (!c)
			return NONE;
		a->chunks = c;
		a->chunk_cap = cap;
	}
	return a->chunk_count++;
}

static inline void chunk_drop(struct arena *a, uint32_t i)
{
	a->chunks[i].lnext = a->unused_chunks;
	a->unused_chunks = i;
}

static inline CUdeviceptr chunk_addr(const struct arena *a, const struct chunk *c)
{
	return a->segs[c->seg].base + ((CUdeviceptr)c->off << UNIT_SHIFT);
}

/* ---- the address hash: block base -> chunk ------------------------------------------ */

/* A slot packs the block's address / 512 (40 bits: bases below 2^49) over
 * its chunk index (24 bits); 0 is empty, as no block has base 0. Linear
 * probing at most a quarter full keeps runs short among a million live
 * blocks; a removal moves the rest of its run back, so a lookup stops at
 * the first empty slot. */

/* Double the table (segments.c); false when out of host memory. */
bool arena_slots_grow(struct arena *a);

static inline uint32_t hash_home(const struct arena *a, uint64_t key)
{
	return (uint32_t)cumemcap_mix_short(key) & a->slot_mask;
}

/* Put (ptr, ci) in the first empty slot from its home on. */
static inline bool hash_insert(struct arena *a, CUdeviceptr ptr, uint32_t ci)
{
	if ((a->slot_used + 1) * 4 > (a->slot_mask ? a->slot_mask + 1 : 0) && !arena_slots_grow(a))
		return false;
	uint32_t j = hash_home(a, ptr >> UNIT_SHIFT);
	while (a->slots[j])
		j = (j + 1) & a->slot_mask;
	a->slots[j] = (ptr >> UNIT_SHIFT) << 24 | ci;
	a->slot_used++;
	return true;
}

/* The slot of ptr, or NONE. */
static inline uint32_t hash_find(const struct arena *a, CUdeviceptr ptr)
{
	if (!a->slot_mask || (ptr & (UNIT - 1)))
		return NONE;
	uint64_t key = ptr >> UNIT_SHIFT;
	for (uint32_t j = hash_home(a, key); a->slots[j]; j = (j + 1) & a->slot_mask)
		if (a->slots[j] >> 24 == key)
			return j;
	return NONE;
}

static inline void hash_remove_slot(struct arena *a, uint32_t j)
{
	for (uint32_t k = (j + 1) & a->slot_mask; a->slots[k]; k = (k + 1) & a->slot_mask) {
		/* Slot k moves back to j unless its home lies in (j, k]. */
		uint32_t home = hash_home(a, a->slots[k] >> 24);
		if (((k - home) & a->slot_mask) >= ((k - j) & a->slot_mask)) {
			a->slots[j] = a->slots[k];
			j = k;
		}
	}
	a->slots[j] = 0;
	a->slot_used--;
}

/* The segment holding ptr, or NONE. */
static inline uint32_t seg_find(const struct arena *a, CUdeviceptr ptr)
{
	uint32_t lo = 0, hi = a->addr_count;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct segment *s = &a->segs[a->by_addr[mid]];
		if (ptr < s->base)
			hi = mid;
		else if (ptr >= s->base + s->bytes)
			lo = mid + 1;
		else
			return a->by_addr[mid];
	}
	return NONE;
}

/* ---- free lists --------------------------------------------------------------------- */

/* Take c off a list linked by lprev/lnext: its head, and its tail if any. */
static inline void list_unlink(struct arena *a, const struct chunk *c, uint32_t *head, uint32_t *tail)
{
	if (c->lprev != NONE)
		a->chunks[c->lprev].lnext = c->lnext;
	else
		*head = c->lnext;
	if (c->lnext != NONE)
		a->chunks[c->lnext].lprev = c->lprev;
	else if (tail)
		*tail = c->lprev;
}

/* The bins of c's segment: packed, or whole segments. */
static inline struct bins *bins_of(struct arena *a, const struct chunk *c)
{
	return a->segs[c->seg].packed ? &a->bins : &a->big;
}

static inline void bin_insert(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	struct bins *l = bins_of(a, c);
	unsigned b = class_of(c->units);
	c->bin = (uint8_t)b;
	c->state = C_FREE;
	c->lprev = NONE;
	c->lnext = l->head[b];
	if (l->head[b] != NONE)
		a->chunks[l->head[b]].lprev = ci;
	l->head[b] = ci;
	l->bits[b >> 6] |= 1ull << (b & 63);
}

static inline void bin_remove(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	struct bins *l = bins_of(a, c);
	list_unlink(a, c, &l->head[c->bin], NULL);
	if (l->head[c->bin] == NONE)
		l->bits[c->bin >> 6] &= ~(1ull << (c->bin & 63));
}

/* Take ci, the head of the quick list of its size, off it. */
static inline void quick_take_head(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	a->quick[c->units] = c->lnext;
	a->quick_count--;
	a->segs[c->seg].waiting--;
}

/* ---- between the files (lock held) -------------------------------------------------- */

/* segments.c */
void arena_clear(struct arena *a);
/* Add a segment the driver gave: its chunk, or NONE without host memory
 * for the records (the caller gives the segment back). */
uint32_t arena_seg_add(struct arena *a, CUdeviceptr base, uint64_t bytes, bool packed, bool prealloc);
/* Remove a wholly free segment from the arena. */
void arena_seg_detach(struct arena *a, uint32_t si);

/* release.c */
/* Give every quick chunk back to the bins, coalesced. */
void arena_quick_flush(struct arena *a);
/* Detach into g the wholly free segments idle since `before` (0: any),
 * the largest first until at most `keep` bytes of them stay. */
void arena_collect(struct arena *a, struct cumemcap_give_back *g, uint64_t keep, uint64_t before);
/* Wait for the streams (the lock dropped, the arena's context current),
 * then make every block freed before the wait ready; with
 * CUMEMCAP_RELEASE=immediate, name in g the segments left with nothing live. */
void arena_reclaim(struct arena *a, struct cumemcap_give_back *g);
