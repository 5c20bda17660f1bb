/* arena/release: blocks coming back and segments going back, see
 * arena-internal.h.
 *
 * Owns the pending list (freed blocks waiting for a synchronization),
 * coalescing, cumemcap_arena_free, reclaim (the synchronization that
 * makes pending blocks ready), giving wholly free segments back to the
 * driver (by the release rule, before a refusal, on the idle tick),
 * context death and fork.
 *
 * Thread safety: each arena's spinlock is held over its records and
 * dropped around every driver call (cuCtxSynchronize, cuMemFree); after
 * one, the arena's epoch or context tells whether it was emptied
 * meanwhile. Context death and fork also hold arena_create_lock. */
#include "arena/arena-internal.h"
#include "arena/fence.h"
#include "group/group.h"

#include "config/policy.h"
#include "driver/driver.h"
#include "log/log.h"
#include "platform/worker.h"
#include "state/capture.h"
#include "state/device.h"
#include "state/ledger.h"
#include "state/death-lock.h"
#include "state/streams.h"

/* ---- free lists ------------------------------------------------------------------------- */

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

/* A coalesced free chunk: back into its bin, noting a wholly free segment. */
static void settle_free(struct arena *a, uint32_t ci, uint64_t now)
{
	struct segment *s = &a->segs[a->chunks[ci].seg];
	bin_insert(a, ci);
	if (wholly_free(s))
		mark_free(a, s, now);
}

/* A free chunk (off every list): merge it with free neighbours. */
static void merge_free(struct arena *a, uint32_t ci, uint64_t now)
{
	struct chunk *c = &a->chunks[ci];
	c->state = C_FREE;
	if (a->segs[c->seg].packed) {
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

/* A chunk whose wait is over: onto the quick list of its size (a small
 * packed one, quick lists on), else merged with free neighbours. Returns
 * whether it left its segment with nothing live and other chunks waiting
 * (not wholly free: see arena_reclaim; the quick path never does, its
 * segment being in use). */
static bool make_ready(struct arena *a, uint32_t ci, uint64_t now)
{
	struct chunk *c = &a->chunks[ci];
	struct segment *s = &a->segs[c->seg];
	s->waiting--;
	if (s->packed && c->units <= QUICK_UNITS && !a->quick_off) {
		c->state = C_QUICK;
		c->lnext = a->quick[c->units];
		a->quick[c->units] = ci;
		a->quick_count++;
		s->quick++;
		return false;
	}
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

/* ---- the driver side -------------------------------------------------------------------- */

void arena_release_now(struct arena *a, CUcontext ctx, const struct give_back *g)
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
		arena_seg_detach(a, pick);
	}
	return a->whole_free > keep;
}

bool arena_collect(struct arena *a, struct give_back *g, uint64_t keep, uint64_t before)
{
	/* cuMemFree synchronizes: nothing goes back while a stream
	 * captures (capture.h); the segments stay cached for after. The
	 * quiet section lasts until arena_release_now() has given them back.
	 * The quick lists' chunks count: back to the bins first. */
	arena_quick_flush(a);
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

/* CUMEMCAP_RELEASE=immediate: segment si has nothing live. Unless a chunk
 * of it is in limbo (a reclaim waits on a fence for it, and gives the
 * segment back after), it leaves the arena into g with its pending chunks
 * merged: giving it back (cuMemFree) synchronizes, which proves them idle.
 * Lock held, inside g's quiet section (capture.h), g not full. */
static bool take_emptied(struct arena *a, uint32_t si, struct give_back *g)
{
	const struct segment *s = &a->segs[si];
	if (s->live || s->prealloc || s->quick)
		return false;
	for (uint32_t k = s->first; k != NONE; k = a->chunks[k].next)
		if (a->chunks[k].state == C_LIMBO)
			return false;
	for (uint32_t k = s->first, nx; k != NONE; k = nx) {
		nx = a->chunks[k].next;
		if (a->chunks[k].state == C_PENDING) {
			pending_remove(a, k);
			merge_free(a, k, 1); /* pending_remove counted it */
			nx = a->segs[si].first; /* merged: start over */
		}
	}
	mark_free(a, &a->segs[si], 1);
	g->base[g->n] = a->segs[si].base;
	g->bytes[g->n] = a->segs[si].bytes;
	g->n++;
	arena_seg_detach(a, si);
	return true;
}

/* CUMEMCAP_RELEASE=immediate: every segment with nothing live that
 * take_emptied takes, into g until it is full (lock held, inside g's
 * quiet section). Returns whether more may remain. */
static bool collect_emptied(struct arena *a, struct give_back *g)
{
	for (uint32_t i = 0; i < a->addr_count;) {
		if (!take_emptied(a, a->by_addr[i], g))
			i++; /* else detached: by_addr[i] is the next one */
		else if (g->n == 16)
			return true;
	}
	return false;
}

void arena_reclaim(struct arena *a)
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
	CUcontext ctx = a->ctx;
	unlock(a);
	CUresult r = arena_fence_wait(a, ctx, epoch);
	cumemcap_capture_quiet_exit();
	uint64_t now = cumemcap_now_ms();
	lock(a);
	if (a->epoch != epoch)
		return; /* the context was forgotten meanwhile: nothing to settle */
	a->last_reclaim = now;
	bool emptied = false; /* a segment left with nothing live, not wholly free */
	for (uint32_t ci = head, next; ci != NONE; ci = next) {
		next = a->chunks[ci].lnext;
		if (r == CUDA_SUCCESS) {
			emptied |= make_ready(a, ci, now);
		} else {
			a->segs[a->chunks[ci].seg].waiting--;
			pending_push(a, ci); /* not proven idle: keep waiting */
		}
	}
	/* CUMEMCAP_RELEASE=immediate: a free that left a segment with
	 * nothing live could not give it back while some of its blocks
	 * waited here (in limbo). That free's own block, and any freed
	 * since the wait began, are pending, not proven idle by it: the
	 * segment is not wholly free, and no later free will come for it.
	 * It goes back now as that free would have given it, its pending
	 * blocks merged (unless another reclaim still waits for some of
	 * them: that one gives it back at its end), with any segment this
	 * wait left wholly free. */
	while (r == CUDA_SUCCESS && (emptied || a->whole_free) && a->epoch == epoch &&
	       cumemcap_policy()->release == CUMEMCAP_RELEASE_IMMEDIATE) {
		if (!cumemcap_capture_quiet_enter())
			break; /* a capture began: they go back after it */
		struct give_back g = { .n = 0, .quiet = true };
		bool more = collect_emptied(a, &g);
		if (!g.n) {
			cumemcap_capture_quiet_exit();
			break;
		}
		unlock(a);
		arena_release_now(a, ctx, &g);
		lock(a);
		if (!more)
			break;
	}
}

/* ---- blocks -------------------------------------------------------------------------------- */

/* The arena that holds ptr, locked, and in *slot the hash slot of the
 * live block whose base ptr is; *slot is NONE when ptr lies in one of the
 * arena's segments but is no live block's base. NULL (nothing locked)
 * when ptr is in no arena's segment. */
static struct arena *find_block(CUdeviceptr ptr, uint32_t *slot)
{
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	struct arena *first = arena_last;
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

/* cumemcap_arena_free past its first check: out of line, so that a free
 * in a process with no arena (CUMEMCAP_POOL=off) pays for no frame. */
__attribute__((noinline)) static bool free_pooled(CUdeviceptr ptr, CUresult *r)
{
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
	s->live--;
	bytes_given_back(a, part, got);
	pending_push(a, ci);

	/* CUMEMCAP_RELEASE=immediate: the driver's cuMemFree synchronizes, so
	 * a segment with nothing live can go back at once. (g is 264 bytes:
	 * only its count is initialised on this hot path.) */
	struct give_back g;
	g.n = 0;
	g.quiet = false;
	if (cumemcap_policy()->release == CUMEMCAP_RELEASE_IMMEDIATE && s->live == 0 && !s->prealloc &&
	    cumemcap_capture_quiet_enter()) {
		g.quiet = true;
		if (!take_emptied(a, c->seg, &g)) { /* in limbo: its reclaim gives it back */
			cumemcap_capture_quiet_exit();
			g.quiet = false;
		}
	}
	CUcontext ctx = a->ctx;
	cumemcap_ledger_arena_bump(figures_of(a), frees);
	if (!g.n)
		cumemcap_ledger_arena_bump(figures_of(a), avoided);
	unlock(a);
	if (g.n)
		arena_release_now(a, ctx, &g);
	/* A thread waiting for room (CUMEMCAP_ON_LIMIT=wait) tries again:
	 * what was freed may let a segment go. */
	if (atomic_load_explicit(&cumemcap_group_local_waiters, memory_order_relaxed))
		cumemcap_group_wake_local();
	*r = CUDA_SUCCESS;
	return true;
}

bool cumemcap_arena_free(CUdeviceptr ptr, CUresult *r)
{
	if (!atomic_load_explicit(&arena_count, memory_order_acquire) || !ptr)
		return false;
	return free_pooled(ptr, r);
}

/* ---- arenas ------------------------------------------------------------------------------ */

void cumemcap_arena_forget_ctx(CUcontext ctx, struct cumemcap_arena_gone *gone)
{
	uint32_t n = atomic_load_explicit(&arena_count, memory_order_acquire);
	gone->dev = -1;
	gone->live = gone->held = gone->blocks = 0;
	pthread_mutex_lock(&arena_create_lock);
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
			bytes_all_gone(a);
			cumemcap_ledger_arena_close(figures_of(a));
			arena_clear(a);
		}
		unlock(a);
	}
	cumemcap_streams_forget_ctx(ctx); /* they died with it */
	pthread_mutex_unlock(&arena_create_lock);
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
		arena_reclaim(a);
		bool more = drain;
		while (more) {
			struct give_back g = { .n = 0 };
			more = arena_collect(a, &g, 0, 0);
			unlock(a);
			arena_release_now(a, ctx, &g);
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
		bool some = ctx && a->dev == dev && (a->pend_head != NONE || a->whole_free > 0 || a->quick_count);
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
		cumemcap_death_lock_read();
		reclaim_quiet(a, now_ms, p->release_idle_ms);
		bool more = true;
		while (more) {
			struct give_back g = { .n = 0 };
			lock(a);
			more = false;
			if (a->ctx && now_ms > p->release_idle_ms)
				more = arena_collect(a, &g, 0, now_ms - p->release_idle_ms);
			for (uint32_t k = 0; a->ctx && k < a->addr_count; k++) {
				const struct segment *s = &a->segs[a->by_addr[k]];
				if (s->free_since && !s->prealloc && s->free_since + p->release_idle_ms < next)
					next = s->free_since + p->release_idle_ms;
			}
			if (a->ctx && a->pend_head != NONE && a->last_reclaim + p->release_idle_ms / 2 < next)
				next = a->last_reclaim + p->release_idle_ms / 2;
			CUcontext ctx = a->ctx;
			unlock(a);
			arena_release_now(a, ctx, &g);
		}
		cumemcap_death_unlock_read();
	}
	if (next == UINT64_MAX)
		return UINT32_MAX;
	return next <= now_ms ? 0 : (uint32_t)(next - now_ms > UINT32_MAX ? UINT32_MAX : next - now_ms);
}

void cumemcap_arena_lock_all(void)
{
	pthread_mutex_lock(&arena_create_lock);
	uint32_t n = atomic_load(&arena_count);
	for (uint32_t i = 0; i < n; i++)
		lock(&arenas[i]);
}

void cumemcap_arena_unlock_all(void)
{
	uint32_t n = atomic_load(&arena_count);
	for (uint32_t i = 0; i < n; i++)
		unlock(&arenas[i]);
	pthread_mutex_unlock(&arena_create_lock);
}

void cumemcap_arena_fork_child(void)
{
	/* The child holds none of the parent's GPU memory. */
	uint32_t n = atomic_load(&arena_count);
	for (uint32_t i = 0; i < n; i++) {
		arena_clear(&arenas[i]);
		unlock(&arenas[i]);
	}
	arena_last = NULL;
	arena_fence_fork_child();
	cumemcap_streams_fork_child();
	cumemcap_device_cache_arena(NULL, NULL);
	pthread_mutex_unlock(&arena_create_lock);
}
