/* arena-internal: what the arena files share (see arena.h for the API).
 *
 * One arena per (GPU, context): a program normally has one per GPU (the
 * primary context). Memory comes from the driver in segments (cuMemAlloc)
 * and goes to the program in blocks:
 *
 *   - requests up to SMALL_MAX (1 MiB) are packed into 2 MiB segments,
 *     best fit from size-class bins, split on allocation and coalesced with
 *     free neighbours when they come back (the segment keeps its blocks in
 *     address order);
 *   - larger requests get a segment of their own, rounded to 1/16 of their
 *     power of two (64 KiB .. 2 MiB steps, at most 6.25% over); a freed
 *     one is reused for a later request it fits within 1/4 (or 2 MiB);
 *   - CUMEMCAP_POOL=nopack makes every block a segment of its own;
 *   - CUMEMCAP_GROWTH=preallocate takes one packed segment of the whole
 *     size at the first use and serves every request from it first.
 *
 * Stream safety. cuMemFree synchronizes the device and programs rely on it,
 * so a freed block is not reusable at once: it waits on a pending list.
 * When a request finds nothing ready, and the pending bytes could serve it
 * and are worth it (>= 1/16 of the arena or 4 MiB, or the limit leaves
 * no room to grow), one fence proves every block freed before it idle and all of
 * them become ready: events recorded on the legacy stream and on each
 * non-blocking stream, queried without blocking, or a cuCtxSynchronize
 * where those cannot prove it (arena/fence.h). A burst of frees costs one
 * fence, not one per free. Segments go back to the driver only when wholly free
 * (cuMemFree synchronizes by itself).
 *
 * Quick lists. A program that allocates and frees small blocks of the
 * same sizes over and over would split a free chunk at every allocation
 * and coalesce it again at every reclaim. Instead, a packed chunk of up to
 * QUICK_UNITS (32 KiB) that a fence proves idle goes, uncoalesced, onto
 * its arena's list for its exact size (C_QUICK), and a request of that
 * size takes the list's head first: no split, no bin search, no coalesce.
 * Only a fence puts a chunk there (the pending list comes first, as
 * before), so stream safety is unchanged. A quick chunk is free memory:
 * it is cached in the ledger's figures (its bytes left `live` at its
 * free), not live for lookups by address (no hash slot; a free of it is a
 * double free), and its segment is not wholly free while it has one
 * (segment.quick). The lists give their chunks back to the bins, each
 * coalesced with its free neighbours (arena_quick_flush), whenever a
 * request finds nothing else ready (before it waits, grows or is
 * refused), before wholly free segments are collected (growth, making
 * room at the limit, cumemcap_arena_release_device, the idle tick), so a
 * request is never refused or grown for memory the lists hold.
 * CUMEMCAP_RELEASE=immediate has no quick lists (a segment goes back as
 * soon as its last block is free). Context death and fork empty the
 * arena, lists included.
 *
 * Release. A wholly free segment goes back to the driver by the rule in
 * CUMEMCAP_RELEASE (never / idle:SECONDS via the worker / immediate), and
 * whatever the rule, before a request is refused at the limit or the
 * driver reports out of memory. Growth follows a budget: the arena holds
 * at most 9/8 of the most it ever had live. Over it, growth first waits
 * for pending frees, then serves the request from a cached segment of up
 * to twice its size while the bytes such blocks leave unused stay within
 * 1/16 of the peak, and only then gives back cached segments that do not
 * fit, largest first, and takes a new one. Following the peak rather than
 * what is live now lets a program whose live bytes swing keep what it
 * will reuse; the budget stops one whose sizes drift from piling up
 * segments. The fit slack (1/4) and the budget (1/8) were chosen on the
 * benchmark traces (docs/benchmarks.md, "`arena`: the pooled arenas").
 *
 * A whole segment's block counts as live for its requested size (rounded
 * to 512 bytes); the rest of its segment is neither live nor cached.
 *
 * Bookkeeping per live block: one 32-byte chunk record and one 8-byte
 * hash slot (at most half full), found by address: the slot packs the
 * block address / 512 (40 bits: addresses below 2^49) and the chunk index
 * (24 bits).
 *
 * While any stream of the process captures a CUDA graph, the arenas make no
 * synchronization and give no segment back (both are illegal then and
 * would invalidate the capture): requests are served from ready blocks or
 * new segments, and refused at the limit; pending frees become ready after
 * the capture (capture.h).
 *
 * A context has up to SHARDS arenas for packed blocks (one per group of
 * threads: see SHARDS); a block is freed into the arena it came from,
 * whichever thread frees it.
 *
 * Thread safety: each arena has its own spinlock; no driver call is made
 * with it held (the driver calls are: take a segment, give one back,
 * synchronize). The arena table is created under one mutex and read
 * without it; an arena slot is never freed, only emptied.
 *
 * Files: arena/segments.c keeps the records (segments, the arena table, the
 * lookups by address); arena/grow.c serves requests (the per-thread
 * arena cache, growth within the budget, taking segments, preallocation);
 * arena/release.c takes blocks back and gives segments back (frees,
 * reclaim, release, the idle tick, context death, fork); arena/fence.c
 * proves pending blocks idle for reclaim. What more than
 * one of them needs on the hot path is static inline here, so the split
 * adds no call. */
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
#define SMALL_MAX (1ull << 20)
#define SMALL_SEGMENT (2ull << 20)
#define BIG_SLACK_MIN (2ull << 20)
#define NONE UINT32_MAX
#define MAX_ARENAS 64
#define BINS 128
#define MAX_CHUNKS (1u << 24)
#define MAX_UNITS UINT32_MAX
#define ADDR_LIMIT (1ull << 49)
#define SCAN_LIMIT 32
/* Packed (small) requests of a context are spread over up to SHARDS
 * arenas, a thread keeping to one (the first thread that allocates gets
 * the primary, shard 0, so a single-threaded program has one arena as
 * before): threads on different shards share no lock and no line on a
 * pooled pair. Whole segments are served by the primary alone, so that
 * a freed one serves every thread. A shard costs at least one 2 MiB
 * segment; at the limit a request tries the other shards' ready blocks
 * before it is refused (grow.c). CUMEMCAP_GROWTH=preallocate keeps one
 * arena per context (the preallocation is the primary's). */
#define SHARDS 4

/* Packed blocks of up to QUICK_UNITS units (32 KiB) that a fence proved
 * idle wait in the arena's quick lists, one per exact size, as they were
 * handed out: not coalesced (see "Quick lists" above). */
#define QUICK_UNITS 64

enum chunk_state { C_FREE = 0, C_LIVE, C_PENDING, C_LIMBO, C_UNUSED, C_QUICK };

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
	uint32_t waiting;    /* pending or limbo chunks */
	uint32_t quick;      /* chunks in the quick lists */
	uint8_t packed, prealloc;
};

struct arena {
	_Alignas(64) atomic_flag lock;
	uint32_t epoch; /* changes when the arena is emptied */
	CUcontext ctx;  /* NULL: slot empty */
	int dev;
	unsigned shard; /* 0: the context's primary arena (see SHARDS) */
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

	uint64_t *slots;
	uint8_t *ctrl; /* per slot: HASH_EMPTY, HASH_TOMB, or the key's 7-bit tag */
	uint32_t slot_mask, slot_used, slot_dead; /* slot_dead: tombstones */

	uint32_t bin[BINS];      /* free chunks of packed segments */
	uint64_t bin_bits[2];
	uint32_t big[BINS];      /* free whole (unpacked) segments: their chunk */
	uint64_t big_bits[2];

	uint32_t pend_head, pend_tail;
	uint64_t pending_bytes;

	/* Ready packed chunks by exact size (units 1..QUICK_UNITS), LIFO,
	 * linked by lnext; quick_count in all of them. */
	uint32_t quick[QUICK_UNITS + 1];
	uint32_t quick_count;
	bool quick_off; /* CUMEMCAP_RELEASE=immediate: every ready chunk coalesces */

	uint64_t last_reclaim; /* ms */
	uint64_t held;       /* segment bytes */
	uint64_t live_bytes; /* handed out */
	uint64_t peak_live;  /* the most handed out at once */
	uint64_t waste;      /* bytes of whole segments beyond their live block */
	uint64_t whole_free; /* bytes of wholly free segments (not preallocated) */
};

/* The arena table (segments.c): MAX_ARENAS slots, arena_count of them
 * ever used; a slot is set up and emptied under arena_create_lock and its
 * own lock, never freed. */
extern struct arena arenas[MAX_ARENAS];
extern _Atomic uint32_t arena_count;
extern pthread_mutex_t arena_create_lock;

/* The arena the calling thread last found by its context (grow.c):
 * find_block tries it first. The cache that skips the search is kept
 * by the device layer (cumemcap_device_current_arena). */
extern CUMEMCAP_TLS struct arena *arena_last;

/* The arena's record in the ledger (its live and pooled bytes, their peaks,
 * allocs, frees, avoided): written under its lock. */
static inline struct cumemcap_ledger_arena *figures_of(const struct arena *a)
{
	return &cumemcap_ledger_arenas[a - arenas];
}

/* ---- the arena's bytes, and the GPU's figures that follow them -------------- */

/* held = live_bytes + waste + cached; the arena's record in the ledger
 * holds live_bytes and the cached bytes (the GPU's `live` and `pooled` add
 * every arena's). held, live_bytes and waste change only through these,
 * which copy them to the record, so the two cannot drift. Lock held. */
static inline uint64_t bytes_cached(const struct arena *a)
{
	return a->held - a->live_bytes - a->waste;
}

static inline void bytes_to_ledger(struct arena *a)
{
	cumemcap_ledger_arena_bytes(figures_of(a), a->live_bytes, bytes_cached(a));
}

/* A segment of `n` bytes joined the arena, all of it cached. */
static inline void bytes_joined(struct arena *a, uint64_t n)
{
	a->held += n;
	bytes_to_ledger(a);
}

/* A wholly free segment of `n` bytes left the arena. */
static inline void bytes_left(struct arena *a, uint64_t n)
{
	a->held -= n;
	bytes_to_ledger(a);
}

/* A block of `part` bytes was handed out for `got` live bytes (a whole
 * segment's block: the rest is waste, neither live nor cached). */
static inline void bytes_handed_out(struct arena *a, uint64_t part, uint64_t got)
{
	a->waste += part - got;
	a->live_bytes += got;
	if (a->live_bytes > a->peak_live)
		a->peak_live = a->live_bytes;
	bytes_to_ledger(a);
}

/* The block of handed_out(part, got) was freed: all of it cached again. */
static inline void bytes_given_back(struct arena *a, uint64_t part, uint64_t got)
{
	a->waste -= part - got;
	a->live_bytes -= got;
	bytes_to_ledger(a);
}

/* The driver freed every segment with the arena's context: none of its
 * bytes count any more (the caller then empties the arena). */
static inline void bytes_all_gone(struct arena *a)
{
	cumemcap_ledger_arena_bytes(figures_of(a), 0, 0);
}

/* ---- locks ------------------------------------------------------------------- */

static inline void lock(struct arena *a)
{
	cumemcap_spin_lock(&a->lock);
}

static inline void unlock(struct arena *a)
{
	cumemcap_spin_unlock(&a->lock);
}

/* ---- size classes ---------------------------------------------------------------- */

static inline unsigned class_of(uint64_t units)
{
	if (units < 4)
		return (unsigned)units;
	unsigned lg = 63u - (unsigned)__builtin_clzll(units);
	unsigned c = lg * 4 + (unsigned)((units >> (lg - 2)) & 3);
	return c < BINS ? c : BINS - 1;
}

static inline void bits_set(uint64_t *bits, unsigned c) { bits[c >> 6] |= 1ull << (c & 63); }
static inline void bits_clear(uint64_t *bits, unsigned c) { bits[c >> 6] &= ~(1ull << (c & 63)); }

/* The first non-empty bin at or after c, or BINS. */
static inline unsigned bits_next(const uint64_t *bits, unsigned c)
{
	for (unsigned w = c >> 6; w < 2; w++) {
		uint64_t m = bits[w];
		if (w == c >> 6)
			m &= ~0ull << (c & 63);
		if (m)
			return w * 64 + (unsigned)__builtin_ctzll(m);
	}
	return BINS;
}

/* A request's size in whole units. */
static inline uint64_t unit_round(uint64_t bytes)
{
	return (bytes + UNIT - 1) & ~(uint64_t)(UNIT - 1);
}

/* ---- chunk records ----------------------------------------------------------------- */

static inline uint32_t chunk_new(struct arena *a)
{
	if (a->unused_chunks != NONE) {
		uint32_t i = a->unused_chunks;
		a->unused_chunks = a->chunks[i].lnext;
		return i;
	}
	if (a->chunk_count == a->chunk_cap) {
		uint32_t cap = a->chunk_cap ? a->chunk_cap * 2 : 1024;
		if (cap > MAX_CHUNKS)
			cap = MAX_CHUNKS;
		if (cap == a->chunk_cap)
			return NONE;
		struct chunk *c = realloc(a->chunks, (size_t)cap * sizeof(*c));
		if (!c)
			return NONE;
		a->chunks = c;
		a->chunk_cap = cap;
	}
	return a->chunk_count++;
}

static inline void chunk_drop(struct arena *a, uint32_t i)
{
	a->chunks[i].state = C_UNUSED;
	a->chunks[i].lnext = a->unused_chunks;
	a->unused_chunks = i;
}

static inline CUdeviceptr chunk_addr(const struct arena *a, const struct chunk *c)
{
	return a->segs[c->seg].base + ((CUdeviceptr)c->off << UNIT_SHIFT);
}

/* ---- the address hash: block base -> chunk ------------------------------------------ */

/* Buckets of 8 slots, the home bucket and a 7-bit tag taken from the key's
 * hash. Beside the slots, one control byte per slot: HASH_EMPTY,
 * HASH_TOMB, or the tag of the key in it; a bucket's 8 control bytes are
 * one 64-bit word, compared with the tag all at once (SWAR), so a lookup
 * looks at the slots whose tag matches (nearly always just the one it
 * wants) without a branch per slot, and goes on to the next bucket only
 * when this one has no empty slot. An emptied slot of a bucket with no
 * empty slot becomes a tombstone, so that a key that went past the full
 * bucket is still found; a bucket with an empty slot never had a key go
 * past it since the last rebuild. Slots in use and tombstones together
 * stay within half the table.
 *
 * Why: linear probing at up to half full made the probes' lengths vary
 * from call to call, and their loop exits cost a pooled pair about 3
 * branch mispredictions with a million blocks live (callgrind
 * --branch-sim), which made that pair 2.3x glibc's. A quarter-full table
 * cut them to 1.2 but took the bookkeeping past 64 bytes per block; a
 * bucket searched slot by slot cost 150 instructions more per pair. */
#define HASH_BUCKET 8u
#define HASH_EMPTY 0x80u
#define HASH_TOMB 0xfeu
#define HASH_ONES 0x0101010101010101ull
#define HASH_HIGHS 0x8080808080808080ull

/* Rebuild the table with room for the live slots (doubling when they
 * fill a quarter of it), dropping the tombstones (segments.c); false when
 * out of host memory. */
bool arena_slots_grow(struct arena *a);

static inline uint64_t hash_word(const uint8_t *ctrl, uint32_t b)
{
	uint64_t w;
	memcpy(&w, ctrl + b, sizeof(w));
	return w;
}

/* The high bit of each byte of w equal to c (and perhaps of a byte above
 * one that is: callers check the slot). */
static inline uint64_t hash_bytes_eq(uint64_t w, unsigned c)
{
	uint64_t x = w ^ (HASH_ONES * c);
	return (x - HASH_ONES) & ~x & HASH_HIGHS;
}

/* Put entry e, whose key is not in the table and hashes to h, in the first
 * free slot from its home bucket on; the table has room. */
static inline void hash_place(uint64_t *slots, uint8_t *ctrl, uint32_t mask, uint64_t h, uint64_t e,
			      uint32_t *dead)
{
	for (uint32_t b = (uint32_t)h & mask & ~(HASH_BUCKET - 1);; b = (b + HASH_BUCKET) & mask) {
		uint64_t f = hash_word(ctrl, b) & HASH_HIGHS; /* empty or tombstone */
		if (f) {
			uint32_t j = b + ((uint32_t)__builtin_ctzll(f) >> 3);
			if (ctrl[j] == HASH_TOMB)
				(*dead)--;
			ctrl[j] = (uint8_t)(h >> 57);
			slots[j] = e;
			return;
		}
	}
}

static inline bool hash_insert(struct arena *a, CUdeviceptr ptr, uint32_t ci)
{
	if ((a->slot_used + a->slot_dead + 1) * 2 > (a->slot_mask ? a->slot_mask + 1 : 0) && !arena_slots_grow(a))
		return false;
	uint64_t key = ptr >> UNIT_SHIFT;
	hash_place(a->slots, a->ctrl, a->slot_mask, cumemcap_mix_short(key), key << 24 | ci, &a->slot_dead);
	a->slot_used++;
	return true;
}

/* The slot of ptr, or NONE. */
static inline uint32_t hash_find(const struct arena *a, CUdeviceptr ptr)
{
	if (!a->slot_mask || (ptr & (UNIT - 1)))
		return NONE;
	uint64_t key = ptr >> UNIT_SHIFT;
	uint64_t h = cumemcap_mix_short(key);
	unsigned tag = (unsigned)(h >> 57);
	for (uint32_t b = (uint32_t)h & a->slot_mask & ~(HASH_BUCKET - 1);; b = (b + HASH_BUCKET) & a->slot_mask) {
		uint64_t w = hash_word(a->ctrl, b);
		for (uint64_t m = hash_bytes_eq(w, tag); m; m &= m - 1) {
			uint32_t j = b + ((uint32_t)__builtin_ctzll(m) >> 3);
			if (a->slots[j] >> 24 == key) /* emptied slots hold 0: no key */
				return j;
		}
		if (hash_bytes_eq(w, HASH_EMPTY))
			return NONE; /* no key went past a bucket with an empty slot */
	}
}

static inline void hash_remove_slot(struct arena *a, uint32_t j)
{
	if (hash_bytes_eq(hash_word(a->ctrl, j & ~(HASH_BUCKET - 1)), HASH_EMPTY)) {
		a->ctrl[j] = HASH_EMPTY;
	} else {
		a->ctrl[j] = HASH_TOMB; /* a key may have gone past this full bucket */
		a->slot_dead++;
	}
	a->slots[j] = 0;
	a->slot_used--;
}

/* ---- segments by address -------------------------------------------------------------- */

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

/* ---- free lists ------------------------------------------------------------------------- */

static inline uint32_t *list_of(struct arena *a, const struct chunk *c, uint64_t **bits)
{
	if (a->segs[c->seg].packed) {
		*bits = a->bin_bits;
		return a->bin;
	}
	*bits = a->big_bits;
	return a->big;
}

static inline void bin_insert(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	uint64_t *bits;
	uint32_t *heads = list_of(a, c, &bits);
	unsigned b = class_of(c->units);
	c->bin = (uint8_t)b;
	c->state = C_FREE;
	c->lprev = NONE;
	c->lnext = heads[b];
	if (heads[b] != NONE)
		a->chunks[heads[b]].lprev = ci;
	heads[b] = ci;
	bits_set(bits, b);
}

/* The head of the quick list of `units`, taken off it (lock held). */
static inline void quick_take_head(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	a->quick[c->units] = c->lnext;
	a->quick_count--;
	a->segs[c->seg].quick--;
}

static inline void bin_remove(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	uint64_t *bits;
	uint32_t *heads = list_of(a, c, &bits);
	if (c->lprev != NONE)
		a->chunks[c->lprev].lnext = c->lnext;
	else
		heads[c->bin] = c->lnext;
	if (c->lnext != NONE)
		a->chunks[c->lnext].lprev = c->lprev;
	if (heads[c->bin] == NONE)
		bits_clear(bits, c->bin);
}

/* ---- segments wholly free ------------------------------------------------------------------- */

static inline bool wholly_free(const struct segment *s)
{
	return s->live == 0 && s->waiting == 0 && s->quick == 0;
}

static inline void mark_in_use(struct arena *a, struct segment *s)
{
	if (s->free_since) {
		s->free_since = 0;
		if (!s->prealloc)
			a->whole_free -= s->bytes;
	}
}

static inline void mark_free(struct arena *a, struct segment *s, uint64_t now)
{
	if (!s->free_since) {
		s->free_since = now ? now : 1;
		if (!s->prealloc)
			a->whole_free += s->bytes;
	}
}

/* ---- shared by the files, not on the hot path ------------------------------------------ */

struct give_back {
	CUdeviceptr base[16];
	uint64_t bytes[16];
	unsigned n;
	bool quiet; /* in a quiet section (capture.h) until given back */
};

/* segments.c */
void arena_clear(struct arena *a);
/* Add a segment the driver gave (lock held). NONE when bookkeeping memory
 * ran out; the caller then gives the segment back. */
uint32_t arena_seg_add(struct arena *a, CUdeviceptr base, uint64_t bytes, bool packed, bool prealloc);
/* Remove a wholly free segment from the arena (the caller gives its memory
 * back to the driver). */
void arena_seg_detach(struct arena *a, uint32_t si);

/* release.c */
/* Give every quick chunk back to the bins, coalesced (lock held). */
void arena_quick_flush(struct arena *a);
/* Give segments back, with the arena's context current. No lock held. */
void arena_release_now(struct arena *a, CUcontext ctx, const struct give_back *g);
/* Detach wholly free segments into g (lock held): those idle since
 * `before` (0: any), the largest first until at most `keep` bytes of them
 * stay. Returns whether more remain to collect. */
bool arena_collect(struct arena *a, struct give_back *g, uint64_t keep, uint64_t before);
/* Wait for the streams, then make every block freed before the wait
 * ready (with CUMEMCAP_RELEASE=immediate, give back the segments left
 * with nothing live, their blocks freed since the wait merged, the lock
 * dropped around it). Called with the lock held
 * and the arena's context current; returns with the lock held. */
void arena_reclaim(struct arena *a);
