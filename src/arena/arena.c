/* arena: see arena.h.
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
 * and are worth it (>= 1/16 of the arena, or the limit leaves no room to
 * grow), one cuCtxSynchronize proves every block freed before it idle and
 * all of them become ready. A burst of frees costs one synchronization,
 * not one per free. Segments go back to the driver only when wholly free
 * (cuMemFree synchronizes by itself).
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
 * benchmark traces (README "Benchmarks", the sweep table).
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
 * Thread safety: each arena has its own spinlock; no driver call is made
 * with it held (the driver calls are: take a segment, give one back,
 * synchronize). The arena table is created under one mutex and read
 * without it; an arena slot is never freed, only emptied. */
#include "arena/arena.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "state/capture.h"
#include "state/device.h"
#include "driver/driver.h"
#include "platform/export.h"
#include "state/ledger.h"
#include "state/life.h"
#include "log/log.h"
#include "platform/mix.h"
#include "platform/msg.h"
#include "platform/spin.h"
#include "config/policy.h"
#include "platform/worker.h"

/* The accounting layer's calls (arena.h); until they are registered,
 * which happens before the first hook runs, the arenas make room among
 * themselves and only count refusals. */
static void own_room(int dev)
{
	cumemcap_arena_release_device(dev);
}

static void count_refusal(int dev, const char *door, uint64_t bytes)
{
	(void)door;
	(void)bytes;
	cumemcap_ledger_bump(dev, refusals);
}

static const struct cumemcap_arena_up fallback = { .make_room = own_room, .refused = count_refusal };
static const struct cumemcap_arena_up *_Atomic up = &fallback;

void cumemcap_arena_register(const struct cumemcap_arena_up *calls)
{
	atomic_store_explicit(&up, calls, memory_order_release);
}

static const struct cumemcap_arena_up *above(void)
{
	return atomic_load_explicit(&up, memory_order_acquire);
}

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

enum chunk_state { C_FREE = 0, C_LIVE, C_PENDING, C_LIMBO, C_UNUSED };

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
	uint8_t packed, prealloc;
};

struct arena {
	_Alignas(64) atomic_flag lock;
	uint32_t epoch; /* changes when the arena is emptied */
	CUcontext ctx;  /* NULL: slot empty */
	int dev;
	bool failed;   /* preallocation failed: refuse everything */
	bool prealloc_held; /* holds its GPU's preallocation (create_lock) */

	struct chunk *chunks;
	uint32_t chunk_count, chunk_cap, unused_chunks;

	struct segment *segs;
	uint32_t seg_count, seg_cap, unused_segs;
	uint32_t *by_addr; /* segment indices in address order */
	uint32_t addr_count;

	uint64_t *slots;
	uint32_t slot_mask, slot_used;

	uint32_t bin[BINS];      /* free chunks of packed segments */
	uint64_t bin_bits[2];
	uint32_t big[BINS];      /* free whole (unpacked) segments: their chunk */
	uint64_t big_bits[2];

	uint32_t pend_head, pend_tail;
	uint64_t pending_bytes;

	uint64_t last_reclaim; /* ms */
	uint64_t held;       /* segment bytes */
	uint64_t live_bytes; /* handed out */
	uint64_t peak_live;  /* the most handed out at once */
	uint64_t waste;      /* bytes of whole segments beyond their live block */
	uint64_t whole_free; /* bytes of wholly free segments (not preallocated) */
};

static struct arena arenas[MAX_ARENAS];
static _Atomic uint32_t arena_count; /* slots ever used */
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic bool ipc_warned;
_Static_assert(MAX_ARENAS <= CUMEMCAP_LEDGER_SHARDS, "each arena counts into a shard of its own");

/* The arena's counters (allocs, frees, avoided): written under its lock. */
static struct cumemcap_ledger_shard *shard_of(const struct arena *a)
{
	return &cumemcap_ledger_shards[a - arenas];
}

static CUMEMCAP_TLS struct {
	CUcontext ctx;
	uint64_t generation;
	struct arena *arena;
} last;

/* ---- locks ------------------------------------------------------------------- */

static void lock(struct arena *a)
{
	cumemcap_spin_lock(&a->lock);
}

static void unlock(struct arena *a)
{
	cumemcap_spin_unlock(&a->lock);
}

/* ---- size classes ---------------------------------------------------------------- */

static unsigned class_of(uint64_t units)
{
	if (units < 4)
		return (unsigned)units;
	unsigned lg = 63u - (unsigned)__builtin_clzll(units);
	unsigned c = lg * 4 + (unsigned)((units >> (lg - 2)) & 3);
	return c < BINS ? c : BINS - 1;
}

static void bits_set(uint64_t *bits, unsigned c) { bits[c >> 6] |= 1ull << (c & 63); }
static void bits_clear(uint64_t *bits, unsigned c) { bits[c >> 6] &= ~(1ull << (c & 63)); }

/* The first non-empty bin at or after c, or BINS. */
static unsigned bits_next(const uint64_t *bits, unsigned c)
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
static uint64_t unit_round(uint64_t bytes)
{
	return (bytes + UNIT - 1) & ~(uint64_t)(UNIT - 1);
}

/* ---- chunk records ----------------------------------------------------------------- */

static uint32_t chunk_new(struct arena *a)
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

static void chunk_drop(struct arena *a, uint32_t i)
{
	a->chunks[i].state = C_UNUSED;
	a->chunks[i].lnext = a->unused_chunks;
	a->unused_chunks = i;
}

static CUdeviceptr chunk_addr(const struct arena *a, const struct chunk *c)
{
	return a->segs[c->seg].base + ((CUdeviceptr)c->off << UNIT_SHIFT);
}

/* ---- the address hash: block base -> chunk ------------------------------------------ */

static bool slots_grow(struct arena *a)
{
	uint32_t cap = a->slot_mask ? (a->slot_mask + 1) * 2 : 1024;
	uint64_t *s = calloc(cap, sizeof(*s));
	if (!s)
		return false;
	for (uint32_t i = 0; a->slot_mask && i <= a->slot_mask; i++) {
		uint64_t e = a->slots[i];
		if (!e)
			continue;
		uint32_t j = (uint32_t)cumemcap_mix_short(e >> 24) & (cap - 1);
		while (s[j])
			j = (j + 1) & (cap - 1);
		s[j] = e;
	}
	free(a->slots);
	a->slots = s;
	a->slot_mask = cap - 1;
	return true;
}

static bool hash_insert(struct arena *a, CUdeviceptr ptr, uint32_t ci)
{
	if ((a->slot_used + 1) * 2 > (a->slot_mask ? a->slot_mask + 1 : 0) && !slots_grow(a))
		return false;
	uint64_t key = ptr >> UNIT_SHIFT;
	uint32_t j = (uint32_t)cumemcap_mix_short(key) & a->slot_mask;
	while (a->slots[j])
		j = (j + 1) & a->slot_mask;
	a->slots[j] = key << 24 | ci;
	a->slot_used++;
	return true;
}

/* The slot of ptr, or NONE. */
static uint32_t hash_find(const struct arena *a, CUdeviceptr ptr)
{
	if (!a->slot_mask || (ptr & (UNIT - 1)))
		return NONE;
	uint64_t key = ptr >> UNIT_SHIFT;
	for (uint32_t j = (uint32_t)cumemcap_mix_short(key) & a->slot_mask;; j = (j + 1) & a->slot_mask) {
		uint64_t e = a->slots[j];
		if (!e)
			return NONE;
		if (e >> 24 == key)
			return j;
	}
}

static void hash_remove_slot(struct arena *a, uint32_t j)
{
	/* Backward-shift deletion: no tombstones. */
	for (uint32_t k = (j + 1) & a->slot_mask;; k = (k + 1) & a->slot_mask) {
		uint64_t e = a->slots[k];
		if (!e)
			break;
		uint32_t home = (uint32_t)cumemcap_mix_short(e >> 24) & a->slot_mask;
		if (((k - home) & a->slot_mask) >= ((k - j) & a->slot_mask)) {
			a->slots[j] = e;
			j = k;
		}
	}
	a->slots[j] = 0;
	a->slot_used--;
}

/* ---- segments by address -------------------------------------------------------------- */

/* The segment holding ptr, or NONE. */
static uint32_t seg_find(const struct arena *a, CUdeviceptr ptr)
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

static bool seg_index_add(struct arena *a, uint32_t si)
{
	if (a->addr_count == a->seg_cap)
		return false; /* by_addr has seg_cap entries */
	CUdeviceptr base = a->segs[si].base;
	uint32_t lo = 0, hi = a->addr_count;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (a->segs[a->by_addr[mid]].base < base)
			lo = mid + 1;
		else
			hi = mid;
	}
	memmove(&a->by_addr[lo + 1], &a->by_addr[lo], (a->addr_count - lo) * sizeof(uint32_t));
	a->by_addr[lo] = si;
	a->addr_count++;
	return true;
}

static void seg_index_remove(struct arena *a, uint32_t si)
{
	for (uint32_t i = 0; i < a->addr_count; i++) {
		if (a->by_addr[i] == si) {
			memmove(&a->by_addr[i], &a->by_addr[i + 1], (a->addr_count - i - 1) * sizeof(uint32_t));
			a->addr_count--;
			return;
		}
	}
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

/* ---- free lists ------------------------------------------------------------------------- */

static uint32_t *list_of(struct arena *a, const struct chunk *c, uint64_t **bits)
{
	if (a->segs[c->seg].packed) {
		*bits = a->bin_bits;
		return a->bin;
	}
	*bits = a->big_bits;
	return a->big;
}

static void bin_insert(struct arena *a, uint32_t ci)
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

static void bin_remove(struct arena *a, uint32_t ci)
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

static void pending_push(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	c->state = C_PENDING;
	c->lnext = NONE;
	c->lprev = a->pend_tail;
	if (a->pend_tail != NONE)
		a->chunks[a->pend_tail].lnext = ci;
	else
		a->pend_head = ci;
	a->pend_tail = ci;
	a->pending_bytes += (uint64_t)c->units << UNIT_SHIFT;
	a->segs[c->seg].waiting++;
}

static void pending_remove(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	if (c->lprev != NONE)
		a->chunks[c->lprev].lnext = c->lnext;
	else
		a->pend_head = c->lnext;
	if (c->lnext != NONE)
		a->chunks[c->lnext].lprev = c->lprev;
	else
		a->pend_tail = c->lprev;
	a->pending_bytes -= (uint64_t)c->units << UNIT_SHIFT;
	a->segs[c->seg].waiting--;
}

/* ---- segments wholly free ------------------------------------------------------------------- */

static bool wholly_free(const struct segment *s)
{
	return s->live == 0 && s->waiting == 0;
}

static void mark_in_use(struct arena *a, struct segment *s)
{
	if (s->free_since) {
		s->free_since = 0;
		if (!s->prealloc)
			a->whole_free -= s->bytes;
	}
}

static void mark_free(struct arena *a, struct segment *s, uint64_t now)
{
	if (!s->free_since) {
		s->free_since = now ? now : 1;
		if (!s->prealloc)
			a->whole_free += s->bytes;
	}
}

/* A coalesced free chunk: back into its bin, noting a wholly free segment. */
static void settle_free(struct arena *a, uint32_t ci, uint64_t now)
{
	struct segment *s = &a->segs[a->chunks[ci].seg];
	bin_insert(a, ci);
	if (wholly_free(s))
		mark_free(a, s, now);
}

/* A chunk whose wait is over: merge it with free neighbours. */
static void make_ready(struct arena *a, uint32_t ci, uint64_t now)
{
	struct chunk *c = &a->chunks[ci];
	struct segment *s = &a->segs[c->seg];
	s->waiting--;
	c->state = C_FREE;
	if (s->packed) {
		uint32_t n = c->next;
		if (n != NONE && a->chunks[n].state == C_FREE) {
			bin_remove(a, n);
			c->units += a->chunks[n].units;
			c->next = a->chunks[n].next;
			if (c->next != NONE)
				a->chunks[c->next].prev = ci;
			chunk_drop(a, n);
		}
		uint32_t p = c->prev;
		if (p != NONE && a->chunks[p].state == C_FREE) {
			bin_remove(a, p);
			a->chunks[p].units += c->units;
			a->chunks[p].next = c->next;
			if (c->next != NONE)
				a->chunks[c->next].prev = p;
			chunk_drop(a, ci);
			ci = p;
		}
	}
	settle_free(a, ci, now);
}

/* Remove a wholly free segment from the arena (the caller gives its memory
 * back to the driver). */
static void seg_detach(struct arena *a, uint32_t si)
{
	struct segment *s = &a->segs[si];
	uint32_t ci = s->first;
	bin_remove(a, ci);
	chunk_drop(a, ci);
	if (s->free_since && !s->prealloc)
		a->whole_free -= s->bytes;
	seg_index_remove(a, si);
	a->held -= s->bytes;
	cumemcap_ledger_pooled_sub(a->dev, s->bytes);
	s->first = a->unused_segs;
	a->unused_segs = si;
}

/* ---- the driver side -------------------------------------------------------------------- */

struct give_back {
	CUdeviceptr base[16];
	uint64_t bytes[16];
	unsigned n;
	bool quiet; /* in a quiet section (capture.h) until given back */
};

/* Give segments back, with the arena's context current. No lock held. */
static void release_now(struct arena *a, CUcontext ctx, const struct give_back *g)
{
	if (!g->n)
		return;
	bool pushed = cumemcap_driver_push_ctx(ctx);
	for (unsigned i = 0; i < g->n; i++) {
		cumemcap_driver_mem_free(g->base[i]);
		cumemcap_ledger_sub(a->dev, CUMEMCAP_KIND_linear, g->bytes[i]);
		cumemcap_ledger_bump(a->dev, segments_released);
		cumemcap_log_segment(a->dev, false, g->bytes[i]);
	}
	cumemcap_driver_pop_ctx(pushed);
	if (g->quiet)
		cumemcap_capture_quiet_exit();
}

/* Detach wholly free segments into g (lock held): those idle since
 * `before` (0: any), the largest first until at most `keep` bytes of them
 * stay. Returns whether more remain to collect. */
static bool collect_locked(struct arena *a, struct give_back *g, uint64_t keep, uint64_t before);

static bool collect(struct arena *a, struct give_back *g, uint64_t keep, uint64_t before)
{
	/* cuMemFree synchronizes: nothing goes back while a stream
	 * captures (capture.h); the segments stay cached for after. The
	 * quiet section lasts until release_now() has given them back. */
	if (a->whole_free <= keep)
		return false;
	if (!g->quiet) {
		if (!cumemcap_capture_quiet_enter())
			return false;
		g->quiet = true;
	}
	bool more = collect_locked(a, g, keep, before);
	if (!g->n) {
		cumemcap_capture_quiet_exit();
		g->quiet = false;
	}
	return more;
}

static bool collect_locked(struct arena *a, struct give_back *g, uint64_t keep, uint64_t before)
{
	while (a->whole_free > keep && g->n < 16) {
		uint32_t pick = NONE;
		for (uint32_t i = 0; i < a->addr_count; i++) {
			uint32_t si = a->by_addr[i];
			const struct segment *s = &a->segs[si];
			if (s->prealloc || !s->free_since || !wholly_free(s) ||
			    (before && s->free_since > before))
				continue;
			if (pick == NONE || s->bytes > a->segs[pick].bytes)
				pick = si;
		}
		if (pick == NONE)
			return false;
		g->base[g->n] = a->segs[pick].base;
		g->bytes[g->n] = a->segs[pick].bytes;
		g->n++;
		seg_detach(a, pick);
	}
	return a->whole_free > keep;
}

/* Wait for the streams, then make every block freed before the wait
 * ready. Called with the lock held and the arena's context current;
 * returns with the lock held. */
static void reclaim(struct arena *a)
{
	uint32_t head = a->pend_head;
	/* No synchronization while a stream captures (capture.h): pending
	 * frees wait until the capture is over. */
	if (head == NONE || !cumemcap_capture_quiet_enter())
		return;
	for (uint32_t ci = head; ci != NONE; ci = a->chunks[ci].lnext)
		a->chunks[ci].state = C_LIMBO;
	a->pend_head = a->pend_tail = NONE;
	a->pending_bytes = 0;
	uint32_t epoch = a->epoch;
	unlock(a);
	CUresult r = cumemcap_driver_ctx_synchronize();
	cumemcap_capture_quiet_exit();
	uint64_t now = cumemcap_now_ms();
	lock(a);
	if (a->epoch != epoch)
		return; /* the context was forgotten meanwhile: nothing to settle */
	a->last_reclaim = now;
	for (uint32_t ci = head, next; ci != NONE; ci = next) {
		next = a->chunks[ci].lnext;
		if (r == CUDA_SUCCESS) {
			make_ready(a, ci, now);
		} else {
			a->segs[a->chunks[ci].seg].waiting--;
			pending_push(a, ci); /* not proven idle: keep waiting */
		}
	}
}

/* ---- blocks -------------------------------------------------------------------------------- */

/* Hand out chunk ci (free) for `bytes`, splitting off the rest of a packed
 * chunk. Lock held. Returns the address, or 0 when bookkeeping memory ran
 * out (the chunk stays free). */
static CUdeviceptr hand_out(struct arena *a, uint32_t ci, uint64_t bytes, uint32_t units)
{
	struct chunk *c = &a->chunks[ci];
	struct segment *s = &a->segs[c->seg];
	if (!hash_insert(a, chunk_addr(a, c), ci))
		return 0;
	bin_remove(a, ci);
	if (s->packed && c->units > units) {
		uint32_t ri = chunk_new(a);
		c = &a->chunks[ci]; /* the array may have moved */
		if (ri != NONE) {
			struct chunk *rest = &a->chunks[ri];
			*rest = (struct chunk){ .seg = c->seg, .off = c->off + units, .units = c->units - units,
						.prev = ci, .next = c->next };
			if (c->next != NONE)
				a->chunks[c->next].prev = ri;
			c->next = ri;
			c->units = units;
			bin_insert(a, ri);
		}
	}
	c->state = C_LIVE;
	c->pad = s->packed ? (uint16_t)(((uint64_t)c->units << UNIT_SHIFT) - bytes) : 0;
	if (!s->packed)
		s->requested = bytes;
	mark_in_use(a, s);
	s->live++;
	/* A whole segment's block is live for its requested size (rounded to
	 * the unit); the rest of the segment is neither live nor cached. */
	uint64_t part = (uint64_t)c->units << UNIT_SHIFT;
	uint64_t got = s->packed ? part : (uint64_t)units << UNIT_SHIFT;
	a->waste += part - got;
	a->live_bytes += got;
	if (a->live_bytes > a->peak_live)
		a->peak_live = a->live_bytes;
	cumemcap_ledger_pooled_sub(a->dev, part);
	cumemcap_ledger_live_add(a->dev, got);
	return chunk_addr(a, c);
}

/* A ready block for the request, or NONE. Lock held. */
static uint32_t find_ready(struct arena *a, uint32_t units, bool packed, bool wide)
{
	if (packed || a->bin_bits[0] | a->bin_bits[1]) {
		/* Packed bins: best of a few in the request's own class, else
		 * the head of the next class up (all of them fit). Whole
		 * requests look here only for a preallocated segment. */
		unsigned c = class_of(units);
		uint32_t best = NONE;
		unsigned looked = 0;
		for (uint32_t ci = a->bin[c]; ci != NONE && looked < SCAN_LIMIT; ci = a->chunks[ci].lnext, looked++) {
			uint32_t u = a->chunks[ci].units;
			if (u >= units && (best == NONE || u < a->chunks[best].units)) {
				best = ci;
				if (u == units)
					break;
			}
		}
		if (best == NONE) {
			unsigned n = c + 1 < BINS ? bits_next(a->bin_bits, c + 1) : BINS;
			if (n < BINS)
				best = a->bin[n];
		}
		if (best != NONE && (packed || a->segs[a->chunks[best].seg].prealloc))
			return best;
		if (packed)
			return NONE;
	}
	/* Whole segments: the smallest cached one within the slack. */
	uint64_t want = (uint64_t)units;
	uint64_t slack = want / 4 > (BIG_SLACK_MIN >> UNIT_SHIFT) ? want / 4 : (BIG_SLACK_MIN >> UNIT_SHIFT);
	if (wide)
		slack = want;
	uint64_t most = want + slack;
	uint32_t best = NONE;
	for (unsigned c = class_of(units); c < BINS; c++) {
		c = bits_next(a->big_bits, c);
		if (c >= BINS)
			break;
		unsigned looked = 0;
		for (uint32_t ci = a->big[c]; ci != NONE && looked < SCAN_LIMIT; ci = a->chunks[ci].lnext, looked++) {
			uint64_t u = a->chunks[ci].units;
			if (u >= want && u <= most && (best == NONE || u < a->chunks[best].units))
				best = ci;
		}
		if (best != NONE || ((uint64_t)1 << (c / 4)) > most)
			break;
	}
	return best;
}

/* The segment size for a request that needs a segment of its own. */
static uint64_t whole_size(uint64_t rounded)
{
	unsigned lg = 63u - (unsigned)__builtin_clzll(rounded);
	uint64_t step = (1ull << lg) / 16;
	if (step < (64u << 10))
		step = 64u << 10;
	if (step > (2u << 20))
		step = 2u << 20;
	if (rounded > UINT64_MAX - step)
		return rounded;
	return (rounded + step - 1) / step * step;
}

/* Add a segment the driver gave (lock held). NONE when bookkeeping memory
 * ran out; the caller then gives the segment back. */
static uint32_t seg_add(struct arena *a, CUdeviceptr base, uint64_t bytes, bool packed, bool prealloc)
{
	uint32_t si = seg_new(a);
	if (si == NONE)
		return NONE;
	uint32_t ci = chunk_new(a);
	if (ci == NONE) {
		a->segs[si].first = a->unused_segs;
		a->unused_segs = si;
		return NONE;
	}
	a->segs[si] = (struct segment){ .base = base, .bytes = bytes, .first = ci, .packed = packed,
					.prealloc = prealloc };
	if (!seg_index_add(a, si)) {
		chunk_drop(a, ci);
		a->segs[si].first = a->unused_segs;
		a->unused_segs = si;
		return NONE;
	}
	a->chunks[ci] = (struct chunk){ .seg = si, .off = 0, .units = (uint32_t)(bytes >> UNIT_SHIFT),
					.prev = NONE, .next = NONE };
	a->held += bytes;
	cumemcap_ledger_pooled_add(a->dev, bytes);
	bin_insert(a, ci);
	return ci;
}

/* Take `bytes` from the driver for the arena, within the limit, releasing
 * cached segments and retrying once when the limit or the driver says
 * no. No lock held; the arena's context is current. */
static CUresult take_segment(struct arena *a, uint64_t bytes, const char *door, uint64_t requested,
			     CUdeviceptr *base)
{
	for (int attempt = 0;; attempt++) {
		bool at_limit = !cumemcap_ledger_reserve(a->dev, CUMEMCAP_KIND_linear, bytes);
		CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
		if (!at_limit) {
			r = cumemcap_driver_mem_alloc(base, bytes);
			if (r != CUDA_SUCCESS)
				cumemcap_ledger_sub(a->dev, CUMEMCAP_KIND_linear, bytes);
			if (r == CUDA_SUCCESS && (*base >= ADDR_LIMIT || *base == 0)) {
				/* Cannot be hashed: not poolable. Never seen. */
				cumemcap_driver_mem_free(*base);
				cumemcap_ledger_sub(a->dev, CUMEMCAP_KIND_linear, bytes);
				return CUDA_ERROR_NOT_SUPPORTED;
			}
		}
		if (r == CUDA_SUCCESS) {
			cumemcap_ledger_bump(a->dev, segments_taken);
			cumemcap_log_segment(a->dev, true, bytes);
			return r;
		}
		if (r != CUDA_ERROR_OUT_OF_MEMORY)
			return r;
		/* Make room on the GPU, then once more. */
		if (attempt == 0) {
			above()->make_room(a->dev);
			continue;
		}
		if (at_limit) {
			above()->refused(a->dev, door, requested);
		} else {
			cumemcap_ledger_bump(a->dev, driver_oom);
			cumemcap_log_driver_oom(a->dev, door, requested);
		}
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
}

/* ---- arenas ------------------------------------------------------------------------------ */

static void arena_clear(struct arena *a)
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
		a->bin[b] = a->big[b] = NONE;
}

static void preallocate(struct arena *a)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	const struct cumemcap_device_info *info = cumemcap_device_info(a->dev);
	uint64_t limit = cumemcap_ledger_limit(a->dev), size;
	char want[32];
	if (p->prealloc.kind == CUMEMCAP_AMOUNT_BYTES)
		size = p->prealloc.bytes;
	else if (p->prealloc.kind == CUMEMCAP_AMOUNT_PERCENT)
		size = (uint64_t)((unsigned __int128)info->total * p->prealloc.permille / 100000u);
	else if (limit != CUMEMCAP_NO_LIMIT)
		size = limit;
	else {
		cumemcap_msg("GPU %d has no limit: CUMEMCAP_GROWTH=preallocate takes nothing there "
			     "(give it a limit, or preallocate:SIZE)", a->dev);
		return;
	}
	size = size / SMALL_SEGMENT * SMALL_SEGMENT;
	if (size < SMALL_SEGMENT)
		size = SMALL_SEGMENT;
	if (size > (uint64_t)MAX_UNITS << UNIT_SHIFT)
		size = (uint64_t)MAX_UNITS << UNIT_SHIFT & ~(SMALL_SEGMENT - 1);
	CUdeviceptr base;
	CUresult r = take_segment(a, size, "preallocate", size, &base);
	if (r == CUDA_SUCCESS) {
		lock(a);
		uint32_t ci = seg_add(a, base, size, true, true);
		a->prealloc_held = ci != NONE;
		unlock(a);
		if (ci != NONE)
			return;
		cumemcap_driver_mem_free(base);
		cumemcap_ledger_sub(a->dev, CUMEMCAP_KIND_linear, size);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	/* Under the lock: a thread may already have found this arena
	 * (arena_of publishes it before preallocating) and read the flag. */
	lock(a);
	a->failed = true;
	unlock(a);
	cumemcap_msg("GPU %d: could not preallocate %s (CUMEMCAP_GROWTH=preallocate, CUDA error %d); "
		     "every allocation in this context on the GPU is refused", a->dev,
		     cumemcap_fmt_size(size, want, sizeof(want)), (int)r);
}

/* One preallocation per GPU: the first context that uses the GPU takes
 * it, and keeps it until that context dies. Memory of one context cannot
 * serve another, so a second context on the GPU allocates on demand within
 * what the limit leaves (said once). create_lock held. */
static bool prealloc_elsewhere(const struct arena *self)
{
	static _Atomic bool said;
	uint32_t n = atomic_load(&arena_count);
	for (uint32_t i = 0; i < n; i++) {
		const struct arena *a = &arenas[i];
		if (a == self || !a->prealloc_held || a->dev != self->dev)
			continue;
		bool expected = false;
		if (atomic_compare_exchange_strong(&said, &expected, true))
			cumemcap_msg("GPU %d: its preallocation (CUMEMCAP_GROWTH=preallocate) belongs to the "
				     "first context on it; another context there allocates on demand, "
				     "within what the limit leaves", self->dev);
		return true;
	}
	return false;
}

/* The arena of (ctx, dev), made on first use. */
static struct arena *arena_of(CUcontext ctx, int dev)
{
	uint64_t gen = cumemcap_device_generation();
	if (last.ctx == ctx && last.generation == gen && last.arena)
		return last.arena;
	struct arena *found = NULL;
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	/* A slot's ctx and dev change under its lock (and create_lock), so
	 * this scan without create_lock reads them under the slot's lock: it
	 * runs only when the thread's cached arena does not match, and a
	 * plain read raced with another thread setting up or emptying a slot
	 * (ThreadSanitizer, tests/integration/stress). */
	for (uint32_t i = 0; i < n && !found; i++) {
		lock(&arenas[i]);
		if (arenas[i].ctx == ctx && arenas[i].dev == dev)
			found = &arenas[i];
		unlock(&arenas[i]);
	}
	if (!found) {
		pthread_mutex_lock(&create_lock);
		n = atomic_load(&arena_count);
		for (uint32_t i = 0; i < n && !found; i++)
			if (arenas[i].ctx == ctx && arenas[i].dev == dev)
				found = &arenas[i];
		for (uint32_t i = 0; i < n && !found; i++)
			if (!arenas[i].ctx)
				found = &arenas[i];
		if (!found && n < MAX_ARENAS) {
			found = &arenas[n];
			arena_clear(found);
			atomic_store_explicit(&arena_count, n + 1, memory_order_release);
		}
		if (found && !found->ctx) {
			lock(found);
			arena_clear(found);
			found->dev = dev;
			found->ctx = ctx;
			cumemcap_ledger_shard_open(shard_of(found), dev);
			unlock(found);
			if (cumemcap_policy()->growth == CUMEMCAP_GROWTH_PREALLOCATE && !prealloc_elsewhere(found))
				preallocate(found);
		}
		pthread_mutex_unlock(&create_lock);
	}
	if (found) {
		last.ctx = ctx;
		last.generation = gen;
		last.arena = found;
	}
	return found;
}

/* Should a request that found nothing ready wait for the pending frees? */
static bool worth_waiting(const struct arena *a, uint64_t need, uint64_t grow)
{
	if (a->pending_bytes < need)
		return false;
	return a->pending_bytes * 16 >= a->held || cumemcap_ledger_headroom(a->dev) < grow;
}

/* The most the arena should hold after growing by `grow`: 9/8 of the
 * most it ever had live (this request counted). Bounding by the peak, not
 * by what is live now, lets a program whose live bytes swing (a training
 * step, PyTorch's empty_cache()) keep the segments it will want again,
 * while what it holds stays within the footprint it has already shown. */
static uint64_t budget_of(const struct arena *a, uint64_t grow)
{
	uint64_t live = a->live_bytes + grow;
	uint64_t peak = a->peak_live > live ? a->peak_live : live;
	return peak + peak / 8;
}

/* Would growing by `grow` take the arena over its budget? Only the
 * default rule (idle) has one. */
static bool over_budget(const struct arena *a, uint64_t grow, enum cumemcap_release rule)
{
	return rule == CUMEMCAP_RELEASE_IDLE && a->held + grow > budget_of(a, grow);
}

/* How many bytes of wholly free segments may stay cached when the arena
 * grows by `grow`, by the release rule: none (immediate), all (never), or
 * what keeps it within its budget (idle, the default). */
static uint64_t cache_keep(const struct arena *a, uint64_t grow, enum cumemcap_release rule)
{
	if (rule == CUMEMCAP_RELEASE_IMMEDIATE)
		return 0;
	if (rule == CUMEMCAP_RELEASE_NEVER)
		return UINT64_MAX;
	uint64_t budget = budget_of(a, grow);
	uint64_t in_use = a->held - a->whole_free + grow;
	return budget > in_use ? budget - in_use : 0;
}

/* Should a request that found nothing ready wait for the pending frees?
 * When they could serve it and are worth a wait, or when growing would
 * take the arena over its budget while pending frees hold segments that
 * could go back instead (giving them back synchronizes anyway). */
static bool should_wait(const struct arena *a, uint64_t need, uint64_t grow, enum cumemcap_release rule)
{
	if (a->pend_head == NONE)
		return false;
	if (worth_waiting(a, need, grow))
		return true;
	return over_budget(a, grow, rule);
}

bool cumemcap_arena_alloc(CUdeviceptr *dptr, uint64_t bytes, const char *door, CUresult *r)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	if (p->pool == CUMEMCAP_POOL_OFF || bytes == 0 || bytes > ((uint64_t)MAX_UNITS << UNIT_SHIFT) / 2)
		return false;
	CUcontext ctx;
	int dev;
	if (cumemcap_device_current(&ctx, &dev) != CUDA_SUCCESS)
		return false;
	struct arena *a = arena_of(ctx, dev);
	if (!a)
		return false;
	cumemcap_ledger_note_request(dev, bytes);
	uint64_t rounded = unit_round(bytes);
	uint32_t units = (uint32_t)(rounded >> UNIT_SHIFT);
	bool packed = p->pool == CUMEMCAP_POOL_ON && rounded <= SMALL_MAX;
	uint64_t seg_bytes = packed ? SMALL_SEGMENT : whole_size(rounded);

	lock(a);
	if (a->failed) {
		unlock(a);
		above()->refused(dev, door, bytes);
		*r = CUDA_ERROR_OUT_OF_MEMORY;
		return true;
	}
	uint32_t ci = NONE;
	for (int waited = 0;; waited++) {
		ci = find_ready(a, units, packed, false);
		if (ci != NONE || waited || !should_wait(a, rounded, seg_bytes, p->release))
			break;
		reclaim(a);
	}
	/* Growing would pass the budget: a cached whole segment of up to
	 * twice the request serves it instead, while the bytes that such
	 * blocks leave unused stay within 1/16 of the peak. */
	if (ci == NONE && !packed && over_budget(a, seg_bytes, p->release)) {
		ci = find_ready(a, units, false, true);
		if (ci != NONE && a->waste + a->segs[a->chunks[ci].seg].bytes - rounded > a->peak_live / 16)
			ci = NONE;
	}
	if (ci != NONE) {
		CUdeviceptr got = hand_out(a, ci, bytes, units);
		if (got) {
			cumemcap_shard_bump(shard_of(a), allocs);
			cumemcap_shard_bump(shard_of(a), avoided);
		}
		unlock(a);
		if (!got)
			return false;
		*dptr = got;
		*r = CUDA_SUCCESS;
		return true;
	}
	/* Grow. First give back cached segments that do not fit, as the
	 * release rule says (cache_keep). */
	struct give_back g = { .n = 0 };
	collect(a, &g, cache_keep(a, seg_bytes, p->release), 0);
	unlock(a);
	release_now(a, ctx, &g);

	CUdeviceptr base;
	*r = take_segment(a, seg_bytes, door, bytes, &base);
	if (*r == CUDA_ERROR_NOT_SUPPORTED)
		return false;
	if (*r != CUDA_SUCCESS)
		return true;
	lock(a);
	ci = seg_add(a, base, seg_bytes, packed, false);
	CUdeviceptr got = ci != NONE ? hand_out(a, ci, bytes, units) : 0;
	if (ci != NONE && !got)
		seg_detach(a, a->chunks[ci].seg);
	if (got)
		cumemcap_shard_bump(shard_of(a), allocs);
	unlock(a);
	if (!got) {
		/* Out of host memory for the books: let the driver serve it. */
		cumemcap_driver_mem_free(base);
		cumemcap_ledger_sub(dev, CUMEMCAP_KIND_linear, seg_bytes);
		return false;
	}
	*dptr = got;
	return true;
}

/* The arena and hash slot of a live block's base, locked; NULL if none.
 * *in_seg tells whether ptr is in some arena's segment (that arena is then
 * returned locked, with *slot NONE). */
static struct arena *find_block(CUdeviceptr ptr, uint32_t *slot)
{
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	struct arena *first = last.arena;
	for (uint32_t i = 0; i <= n; i++) {
		struct arena *a = i == 0 ? first : &arenas[i - 1];
		if (!a || (i > 0 && a == first))
			continue;
		lock(a);
		if (a->ctx) {
			*slot = hash_find(a, ptr);
			if (*slot != NONE || seg_find(a, ptr) != NONE)
				return a;
		}
		unlock(a);
	}
	return NULL;
}

bool cumemcap_arena_free(CUdeviceptr ptr, CUresult *r)
{
	if (!atomic_load_explicit(&arena_count, memory_order_acquire) || !ptr)
		return false;
	uint32_t slot;
	struct arena *a = find_block(ptr, &slot);
	if (!a)
		return false;
	if (slot == NONE) {
		unlock(a);
		*r = CUDA_ERROR_INVALID_VALUE; /* inside a segment, not a live block */
		return true;
	}
	uint32_t ci = (uint32_t)(a->slots[slot] & (MAX_CHUNKS - 1));
	hash_remove_slot(a, slot);
	struct chunk *c = &a->chunks[ci];
	struct segment *s = &a->segs[c->seg];
	uint64_t part = (uint64_t)c->units << UNIT_SHIFT;
	uint64_t got = s->packed ? part : unit_round(s->requested);
	int dev = a->dev;
	s->live--;
	a->waste -= part - got;
	a->live_bytes -= got;
	cumemcap_ledger_live_sub(dev, got);
	cumemcap_ledger_pooled_add(dev, part);
	pending_push(a, ci);

	/* CUMEMCAP_RELEASE=immediate: the driver's cuMemFree synchronizes, so
	 * a segment with nothing live can go back at once. (g is 264 bytes:
	 * only its count is initialised on this hot path.) */
	struct give_back g;
	g.n = 0;
	g.quiet = false;
	if (cumemcap_policy()->release == CUMEMCAP_RELEASE_IMMEDIATE && s->live == 0 && !s->prealloc &&
	    cumemcap_capture_quiet_enter()) {
		bool limbo = false;
		for (uint32_t k = s->first; k != NONE && !limbo; k = a->chunks[k].next)
			limbo = a->chunks[k].state == C_LIMBO;
		if (limbo) {
			cumemcap_capture_quiet_exit();
		} else {
			g.quiet = true;
			uint32_t si = c->seg;
			for (uint32_t k = s->first, nx; k != NONE; k = nx) {
				nx = a->chunks[k].next;
				if (a->chunks[k].state == C_PENDING) {
					pending_remove(a, k);
					make_ready(a, k, 1);
					nx = a->segs[si].first; /* merged: start over */
				}
			}
			mark_free(a, &a->segs[si], 1);
			g.base[0] = a->segs[si].base;
			g.bytes[0] = a->segs[si].bytes;
			g.n = 1;
			seg_detach(a, si);
		}
	}
	CUcontext ctx = a->ctx;
	cumemcap_shard_bump(shard_of(a), frees);
	if (!g.n)
		cumemcap_shard_bump(shard_of(a), avoided);
	unlock(a);
	if (g.n)
		release_now(a, ctx, &g);
	*r = CUDA_SUCCESS;
	return true;
}

enum cumemcap_arena_where cumemcap_arena_lookup(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size)
{
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct arena *a = &arenas[i];
		lock(a);
		uint32_t si = a->ctx ? seg_find(a, ptr) : NONE;
		if (si == NONE) {
			unlock(a);
			continue;
		}
		const struct segment *s = &a->segs[si];
		enum cumemcap_arena_where w = CUMEMCAP_ARENA_NOT_LIVE;
		uint32_t off = (uint32_t)((ptr - s->base) >> UNIT_SHIFT);
		for (uint32_t k = s->first; k != NONE; k = a->chunks[k].next) {
			const struct chunk *c = &a->chunks[k];
			if (off < c->off || off >= c->off + c->units)
				continue;
			if (c->state == C_LIVE) {
				CUdeviceptr b = chunk_addr(a, c);
				uint64_t len = s->packed ? ((uint64_t)c->units << UNIT_SHIFT) - c->pad : s->requested;
				if (ptr < b + len) {
					*base = b;
					*size = len;
					w = s->packed || s->prealloc ? CUMEMCAP_ARENA_PACKED : CUMEMCAP_ARENA_WHOLE;
				}
			}
			break;
		}
		unlock(a);
		return w;
	}
	return CUMEMCAP_ARENA_NOT_OURS;
}

bool cumemcap_arena_warn_ipc(void)
{
	bool expected = false;
	return atomic_compare_exchange_strong(&ipc_warned, &expected, true);
}

uint64_t cumemcap_arena_cached(int dev)
{
	return cumemcap_ledger_get(dev, CUMEMCAP_FIG_pooled);
}

void cumemcap_arena_forget_ctx(CUcontext ctx, struct cumemcap_arena_gone *gone)
{
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	gone->dev = -1;
	gone->live = gone->held = gone->blocks = 0;
	pthread_mutex_lock(&create_lock);
	for (uint32_t i = 0; i < n; i++) {
		struct arena *a = &arenas[i];
		lock(a);
		if (a->ctx == ctx) {
			/* The driver freed every segment with the context. */
			gone->dev = a->dev;
			gone->live += a->live_bytes;
			gone->held += a->held;
			gone->blocks += a->slot_used;
			cumemcap_ledger_sub(a->dev, CUMEMCAP_KIND_linear, a->held);
			cumemcap_ledger_live_sub(a->dev, a->live_bytes);
			cumemcap_ledger_pooled_sub(a->dev, a->held - a->live_bytes - a->waste);
			cumemcap_ledger_shard_close(shard_of(a));
			arena_clear(a);
		}
		unlock(a);
	}
	pthread_mutex_unlock(&create_lock);
}

/* With ctx (the arena's context when the caller looked, no lock held)
 * made current on this thread, since the wait is for its streams: reclaim
 * the arena's pending frees and, with `drain`, give back every wholly free
 * segment. Nothing is done if the arena was emptied meanwhile. */
static void reclaim_in(struct arena *a, CUcontext ctx, bool drain)
{
	bool pushed = cumemcap_driver_push_ctx(ctx);
	lock(a);
	if (a->ctx == ctx) {
		reclaim(a);
		bool more = drain;
		while (more) {
			struct give_back g = { .n = 0 };
			more = collect(a, &g, 0, 0);
			unlock(a);
			release_now(a, ctx, &g);
			lock(a);
			more = more && a->ctx == ctx;
		}
	}
	unlock(a);
	cumemcap_driver_pop_ctx(pushed);
}

void cumemcap_arena_release_device(int dev)
{
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct arena *a = &arenas[i];
		lock(a);
		CUcontext ctx = a->ctx;
		bool some = ctx && a->dev == dev && (a->pend_head != NONE || a->whole_free > 0);
		unlock(a);
		if (!some)
			continue;
		reclaim_in(a, ctx, true);
	}
}

/* Blocks freed and never reused wait on the pending list until a request
 * needs them; for idle release the worker proves them idle itself once the
 * arena has been quiet for half the idle time, with the arena's context
 * pushed on its own thread. */
static void reclaim_quiet(struct arena *a, uint64_t now_ms, uint32_t idle_ms)
{
	lock(a);
	bool due = a->ctx && a->pend_head != NONE && now_ms - a->last_reclaim >= idle_ms / 2;
	CUcontext ctx = a->ctx;
	unlock(a);
	if (due)
		reclaim_in(a, ctx, false);
}

uint32_t cumemcap_arena_tick(uint64_t now_ms)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	if (p->release != CUMEMCAP_RELEASE_IDLE)
		return UINT32_MAX;
	uint64_t next = UINT64_MAX;
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct arena *a = &arenas[i];
		/* No context dies while this arena's driver calls are made. */
		cumemcap_life_enter();
		reclaim_quiet(a, now_ms, p->release_idle_ms);
		bool more = true;
		while (more) {
			struct give_back g = { .n = 0 };
			lock(a);
			more = false;
			if (a->ctx && now_ms > p->release_idle_ms)
				more = collect(a, &g, 0, now_ms - p->release_idle_ms);
			for (uint32_t k = 0; a->ctx && k < a->addr_count; k++) {
				const struct segment *s = &a->segs[a->by_addr[k]];
				if (s->free_since && !s->prealloc && s->free_since + p->release_idle_ms < next)
					next = s->free_since + p->release_idle_ms;
			}
			if (a->ctx && a->pend_head != NONE && a->last_reclaim + p->release_idle_ms / 2 < next)
				next = a->last_reclaim + p->release_idle_ms / 2;
			CUcontext ctx = a->ctx;
			unlock(a);
			release_now(a, ctx, &g);
		}
		cumemcap_life_exit();
	}
	if (next == UINT64_MAX)
		return UINT32_MAX;
	return next <= now_ms ? 0 : (uint32_t)(next - now_ms > UINT32_MAX ? UINT32_MAX : next - now_ms);
}

void cumemcap_arena_lock_all(void)
{
	pthread_mutex_lock(&create_lock);
	uint32_t n = atomic_load(&arena_count);
	for (uint32_t i = 0; i < n; i++)
		lock(&arenas[i]);
}

void cumemcap_arena_unlock_all(void)
{
	uint32_t n = atomic_load(&arena_count);
	for (uint32_t i = 0; i < n; i++)
		unlock(&arenas[i]);
	pthread_mutex_unlock(&create_lock);
}

void cumemcap_arena_fork_child(void)
{
	/* The child holds none of the parent's GPU memory. */
	uint32_t n = atomic_load(&arena_count);
	for (uint32_t i = 0; i < n; i++) {
		arena_clear(&arenas[i]);
		unlock(&arenas[i]);
	}
	last.ctx = NULL;
	last.arena = NULL;
	pthread_mutex_unlock(&create_lock);
}
