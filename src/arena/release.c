/* arena/release: blocks coming back: the pending list, reclaim, coalescing,
 * the quick lists, naming the segments that can go back, the lookups by
 * address, context death and fork.
 *
 * Thread safety: as arena-internal.h; context death and fork also hold
 * arena_create_lock. */
#include "arena/arena-internal.h"
#include "arena/fence.h"

#include "config/policy.h"
#include "driver/driver.h"
#include "platform/worker.h"
#include "state/capture.h"
#include "state/device.h"
#include "state/streams.h"

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

/* Chunk ci takes in its next neighbour (off every list). */
static void take_in_next(struct arena *a, uint32_t ci)
{
	struct chunk *c = &a->chunks[ci];
	uint32_t n = c->next;
	c->units += a->chunks[n].units;
	c->next = a->chunks[n].next;
	if (c->next != NONE)
		a->chunks[c->next].prev = ci;
	chunk_drop(a, n);
}

/* A free chunk (off every list): merged with free neighbours into its bin. */
static void merge_free(struct arena *a, uint32_t ci, uint64_t now)
{
	struct chunk *c = &a->chunks[ci];
	c->state = C_FREE;
	if (a->segs[c->seg].packed) {
		if (c->next != NONE && a->chunks[c->next].state == C_FREE) {
			bin_remove(a, c->next);
			take_in_next(a, ci);
		}
		uint32_t p = a->chunks[ci].prev;
		if (p != NONE && a->chunks[p].state == C_FREE) {
			bin_remove(a, p);
			take_in_next(a, p);
			ci = p;
		}
	}
	struct segment *s = &a->segs[a->chunks[ci].seg];
	bin_insert(a, ci);
	if (!s->live && !s->waiting && !s->free_since) { /* wholly free now */
		s->free_since = now ? now : 1;
		if (!s->prealloc)
			a->whole_free += s->bytes;
	}
}

/* A chunk proven idle: onto its quick list (if `quick`; still waiting), or merged.
 * Returns whether its segment has nothing live and other chunks waiting. */
static bool make_ready(struct arena *a, uint32_t ci, uint64_t now, bool quick)
{
	struct chunk *c = &a->chunks[ci];
	struct segment *s = &a->segs[c->seg];
	if (quick && s->packed && c->units <= QUICK_UNITS) {
		c->state = C_QUICK;
		c->lnext = a->quick[c->units];
		a->quick[c->units] = ci;
		a->quick_count++;
		return false;
	}
	s->waiting--;
	merge_free(a, ci, now);
	return s->live == 0 && s->waiting > 0;
}

void arena_quick_flush(struct arena *a)
{
	if (!a->quick_count)
		return;
	uint64_t now = cumemcap_now_ms();
	for (unsigned u = 1; u <= QUICK_UNITS; u++) {
		while (a->quick[u] != NONE) {
			uint32_t ci = a->quick[u];
			quick_take_head(a, ci);
			merge_free(a, ci, now);
		}
	}
}

/* ---- naming segments to give back --------------------------------------------------- */

/* Detach wholly free segment si into g; false when out of host memory. */
static bool give_back_add(struct arena *a, uint32_t si, struct cumemcap_give_back *g)
{
	if (g->n == g->cap) {
		unsigned cap = g->cap ? 2 * g->cap : 8;
		struct cumemcap_segment_back *more = realloc(g->seg, cap * sizeof(*more));
		if (!more)
			return false;
		g->seg = more;
		g->cap = cap;
	}
	g->seg[g->n++] = (struct cumemcap_segment_back){ .ctx = a->ctx, .dev = a->dev, .base = a->segs[si].base,
							 .bytes = a->segs[si].bytes };
	arena_seg_detach(a, si);
	return true;
}

/* Nothing goes back while a stream captures (cuMemFree synchronizes:
 * capture.h); g's quiet section lasts until its segments are given back. */
static bool quiet_enter(struct cumemcap_give_back *g)
{
	if (!g->quiet)
		g->quiet = cumemcap_capture_quiet_enter();
	return g->quiet;
}

static void quiet_exit_if_none(struct cumemcap_give_back *g)
{
	if (g->quiet && !g->n) {
		cumemcap_capture_quiet_exit();
		g->quiet = false;
	}
}

void arena_collect(struct arena *a, struct cumemcap_give_back *g, uint64_t keep, uint64_t before)
{
	arena_quick_flush(a); /* their segments may then be wholly free */
	if (a->whole_free <= keep || !quiet_enter(g))
		return;
	while (a->whole_free > keep) {
		uint32_t pick = NONE;
		for (uint32_t i = 0; i < a->addr_count; i++) {
			uint32_t si = a->by_addr[i];
			const struct segment *s = &a->segs[si];
			if (!s->prealloc && s->free_since && (!before || s->free_since <= before) &&
			    (pick == NONE || s->bytes > a->segs[pick].bytes))
				pick = si;
		}
		if (pick == NONE || !give_back_add(a, pick, g))
			break;
	}
	quiet_exit_if_none(g);
}

/* CUMEMCAP_RELEASE=immediate (no quick lists): segment si, nothing live,
 * goes into g with its pending chunks merged (cuMemFree synchronizes),
 * unless one is in limbo (its reclaim gives it back). In g's quiet section. */
static bool take_emptied(struct arena *a, uint32_t si, struct cumemcap_give_back *g)
{
	const struct segment *s = &a->segs[si];
	if (s->live || s->prealloc)
		return false;
	for (uint32_t k = s->first; k != NONE; k = a->chunks[k].next)
		if (a->chunks[k].state == C_LIMBO)
			return false;
	for (uint32_t k = s->first, nx; k != NONE; k = nx) {
		nx = a->chunks[k].next;
		if (a->chunks[k].state == C_PENDING) {
			list_unlink(a, &a->chunks[k], &a->pend_head, &a->pend_tail);
			a->pending_bytes -= (uint64_t)a->chunks[k].units << UNIT_SHIFT;
			a->segs[si].waiting--;
			merge_free(a, k, 1);
			nx = a->segs[si].first; /* merged: start over */
		}
	}
	return give_back_add(a, si, g); /* wholly free, marked by its last merge */
}

void arena_reclaim(struct arena *a, struct cumemcap_give_back *g)
{
	uint32_t head = a->pend_head;
	/* No fence while a stream captures (capture.h): the frees wait. */
	if (head == NONE || !cumemcap_capture_quiet_enter())
		return;
	for (uint32_t ci = head; ci != NONE; ci = a->chunks[ci].lnext)
		a->chunks[ci].state = C_LIMBO;
	a->pend_head = a->pend_tail = NONE;
	a->pending_bytes = 0;
	uint32_t epoch = a->epoch;
	CUcontext ctx = a->ctx;
	cumemcap_spin_unlock(&a->lock);
	CUresult r = arena_fence_wait(a, ctx, epoch);
	cumemcap_capture_quiet_exit();
	uint64_t now = cumemcap_now_ms();
	cumemcap_spin_lock(&a->lock);
	if (a->epoch != epoch)
		return; /* the context was forgotten meanwhile: nothing to settle */
	a->last_reclaim = now;
	bool immediate = cumemcap_policy()->release == CUMEMCAP_RELEASE_IMMEDIATE;
	bool emptied = false; /* a segment left with nothing live, not wholly free */
	for (uint32_t ci = head, next; ci != NONE; ci = next) {
		next = a->chunks[ci].lnext;
		if (r == CUDA_SUCCESS) {
			emptied |= make_ready(a, ci, now, !immediate);
		} else {
			a->segs[a->chunks[ci].seg].waiting--; /* pending_push counts it again */
			pending_push(a, ci);
		}
	}
	/* CUMEMCAP_RELEASE=immediate: segments this wait emptied go now. */
	if (r != CUDA_SUCCESS || !immediate || !(emptied || a->whole_free) || !quiet_enter(g))
		return;
	for (uint32_t i = 0; i < a->addr_count;)
		if (!take_emptied(a, a->by_addr[i], g))
			i++; /* else detached: by_addr[i] is the next one */
	quiet_exit_if_none(g);
}

/* ---- blocks -------------------------------------------------------------------------------- */

/* The arena whose segment holds ptr, locked, with *slot the hash slot of
 * the live block at ptr (NONE: none). NULL, nothing locked: no arena's.
 * Inlined: every pooled free takes it. */
static inline __attribute__((always_inline)) struct arena *find_block(CUdeviceptr ptr, uint32_t *slot)
{
	uint32_t n = atomic_load_explicit(&cumemcap_arena_count, memory_order_acquire);
	struct arena *first = arena_last;
	for (uint32_t i = 0; i <= n; i++) {
		struct arena *a = i == 0 ? first : &arenas[i - 1];
		if (!a || (i > 0 && a == first))
			continue;
		cumemcap_spin_lock(&a->lock);
		if (a->ctx) {
			*slot = hash_find(a, ptr);
			if (*slot != NONE || seg_find(a, ptr) != NONE)
				return a;
		}
		cumemcap_spin_unlock(&a->lock);
	}
	return NULL;
}

enum cumemcap_arena_where cumemcap_arena_lookup(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size)
{
	uint32_t slot;
	struct arena *a = find_block(ptr, &slot);
	if (!a)
		return CUMEMCAP_ARENA_NOT_OURS;
	const struct segment *s = &a->segs[seg_find(a, ptr)];
	enum cumemcap_arena_where w = CUMEMCAP_ARENA_NOT_LIVE;
	uint32_t off = (uint32_t)((ptr - s->base) >> UNIT_SHIFT);
	uint32_t k = s->first; /* the chunks tile the segment in address order */
	while (off >= a->chunks[k].off + a->chunks[k].units)
		k = a->chunks[k].next;
	const struct chunk *c = &a->chunks[k];
	CUdeviceptr b = chunk_addr(a, c);
	uint64_t len = s->packed ? ((uint64_t)c->units << UNIT_SHIFT) - c->pad : s->requested;
	if (c->state == C_LIVE && ptr < b + len) {
		*base = b;
		*size = len;
		w = s->packed || s->prealloc ? CUMEMCAP_ARENA_PACKED : CUMEMCAP_ARENA_WHOLE;
	}
	cumemcap_spin_unlock(&a->lock);
	return w;
}

bool cumemcap_arena_free(CUdeviceptr ptr, CUresult *r, struct cumemcap_give_back *g)
{
	uint32_t slot;
	struct arena *a = find_block(ptr, &slot);
	if (!a)
		return false;
	*g = (struct cumemcap_give_back){ 0 };
	*r = slot == NONE ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; /* NONE: not a live block */
	if (slot == NONE) {
		cumemcap_spin_unlock(&a->lock);
		return true;
	}
	uint32_t ci = (uint32_t)(a->slots[slot] & (MAX_CHUNKS - 1));
	hash_remove_slot(a, slot);
	struct chunk *c = &a->chunks[ci];
	struct segment *s = &a->segs[c->seg];
	uint64_t part = (uint64_t)c->units << UNIT_SHIFT;
	uint64_t got = s->packed ? part : unit_round(s->requested);
	s->live--;
	a->waste -= part - got;
	a->live_bytes -= got;
	bytes_to_ledger(a);
	pending_push(a, ci);
	/* RELEASE=immediate: cuMemFree synchronizes, so an emptied segment goes now. */
	if (cumemcap_policy()->release == CUMEMCAP_RELEASE_IMMEDIATE && s->live == 0 && !s->prealloc &&
	    quiet_enter(g)) {
		take_emptied(a, c->seg, g);
		quiet_exit_if_none(g);
	}
	cumemcap_ledger_arena_bump(figures_of(a), frees);
	if (!g->n)
		cumemcap_ledger_arena_bump(figures_of(a), avoided);
	cumemcap_spin_unlock(&a->lock);
	return true;
}

/* ---- arenas ------------------------------------------------------------------------------ */

void cumemcap_arena_forget_ctx(CUcontext ctx, struct cumemcap_arena_gone *gone)
{
	uint32_t n = atomic_load_explicit(&cumemcap_arena_count, memory_order_acquire);
	*gone = (struct cumemcap_arena_gone){ .dev = -1 };
	pthread_mutex_lock(&arena_create_lock);
	for (uint32_t i = 0; i < n; i++) {
		struct arena *a = &arenas[i];
		cumemcap_spin_lock(&a->lock);
		if (a->ctx == ctx) {
			/* The driver freed every segment with the context. */
			gone->dev = a->dev;
			gone->live += a->live_bytes;
			gone->held += a->held;
			gone->blocks += a->slot_used;
			cumemcap_ledger_arena_bytes(figures_of(a), 0, 0);
			cumemcap_ledger_arena_close(figures_of(a));
			arena_clear(a);
		}
		cumemcap_spin_unlock(&a->lock);
	}
	cumemcap_streams_forget_ctx(ctx); /* they died with it */
	pthread_mutex_unlock(&arena_create_lock);
}

/* With ctx (the arena's when the caller looked) current: reclaim the
 * pending frees and, with `drain`, name every wholly free segment in g. */
static void reclaim_in(struct arena *a, CUcontext ctx, bool drain, struct cumemcap_give_back *g)
{
	bool pushed = cumemcap_driver_push_ctx(ctx);
	cumemcap_spin_lock(&a->lock);
	if (a->ctx == ctx) {
		arena_reclaim(a, g);
		if (drain && a->ctx == ctx)
			arena_collect(a, g, 0, 0);
	}
	cumemcap_spin_unlock(&a->lock);
	cumemcap_driver_pop_ctx(pushed);
}

void cumemcap_arena_release_device(unsigned i, int dev, struct cumemcap_give_back *g)
{
	struct arena *a = &arenas[i];
	*g = (struct cumemcap_give_back){ 0 };
	cumemcap_spin_lock(&a->lock);
	CUcontext ctx = a->ctx;
	bool some = ctx && a->dev == dev && (a->pend_head != NONE || a->whole_free > 0 || a->quick_count);
	cumemcap_spin_unlock(&a->lock);
	if (some)
		reclaim_in(a, ctx, true, g);
}

void cumemcap_arena_idle(unsigned i, uint64_t now_ms, struct cumemcap_give_back *g, uint64_t *next_ms)
{
	uint32_t idle = cumemcap_policy()->release_idle_ms;
	struct arena *a = &arenas[i];
	*g = (struct cumemcap_give_back){ 0 };
	cumemcap_spin_lock(&a->lock);
	bool due = a->ctx && a->pend_head != NONE && now_ms - a->last_reclaim >= idle / 2;
	CUcontext ctx = a->ctx;
	cumemcap_spin_unlock(&a->lock);
	if (due)
		reclaim_in(a, ctx, false, g);
	cumemcap_spin_lock(&a->lock);
	if (a->ctx && now_ms > idle)
		arena_collect(a, g, 0, now_ms - idle);
	for (uint32_t k = 0; a->ctx && k < a->addr_count; k++) {
		const struct segment *s = &a->segs[a->by_addr[k]];
		if (s->free_since && !s->prealloc && s->free_since + idle < *next_ms)
			*next_ms = s->free_since + idle;
	}
	if (a->ctx && a->pend_head != NONE && a->last_reclaim + idle / 2 < *next_ms)
		*next_ms = a->last_reclaim + idle / 2;
	cumemcap_spin_unlock(&a->lock);
}

void cumemcap_arena_lock_all(void)
{
	pthread_mutex_lock(&arena_create_lock);
	uint32_t n = atomic_load(&cumemcap_arena_count);
	for (uint32_t i = 0; i < n; i++)
		cumemcap_spin_lock(&arenas[i].lock);
}

void cumemcap_arena_unlock_all(void)
{
	uint32_t n = atomic_load(&cumemcap_arena_count);
	for (uint32_t i = 0; i < n; i++)
		cumemcap_spin_unlock(&arenas[i].lock);
	pthread_mutex_unlock(&arena_create_lock);
}

void cumemcap_arena_fork_child(void)
{
	/* The child holds none of the parent's GPU memory. */
	uint32_t n = atomic_load(&cumemcap_arena_count);
	for (uint32_t i = 0; i < n; i++) {
		arena_clear(&arenas[i]);
		cumemcap_spin_unlock(&arenas[i].lock);
	}
	arena_last = NULL;
	arena_fence_fork_child();
	cumemcap_streams_fork_child();
	cumemcap_device_cache_arena(NULL, NULL);
	pthread_mutex_unlock(&arena_create_lock);
}
