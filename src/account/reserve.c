/* reserve: the one way bytes are reserved against a limit, and the
 * arenas' segments, taken from the driver and given back.
 *
 * Thread safety: the ledger is atomic and the arenas lock themselves; no
 * lock is held here, across the driver call or the wait. */
#include "account/account.h"

#include <stdlib.h>

#include "account/footprint.h"
#include "config/policy.h"
#include "driver/driver.h"
#include "log/log.h"
#include "platform/worker.h"
#include "group/group.h"
#include "state/capture.h"
#include "state/death-lock.h"

void cumemcap_account_refused(int dev, const char *entry_point, uint64_t bytes)
{
	cumemcap_ledger_bump(dev, refusals);
	cumemcap_log_refusal(dev, entry_point, bytes);
}

void cumemcap_account_driver_oom(int dev, const char *entry_point, uint64_t bytes)
{
	cumemcap_ledger_bump(dev, driver_oom);
	cumemcap_log_driver_oom(dev, entry_point, bytes);
}

/* Give the segments named in g back to the driver and off the ledger; end g's quiet section. */
static void give_back(struct cumemcap_give_back *g)
{
	if (!g->n)
		return;
	bool pushed = false;
	for (unsigned i = 0; i < g->n; i++) {
		const struct cumemcap_segment_back *s = &g->seg[i];
		if (i == 0 || s->ctx != g->seg[i - 1].ctx) {
			if (i)
				cumemcap_driver_pop_ctx(pushed);
			pushed = cumemcap_driver_push_ctx(s->ctx);
		}
		cumemcap_driver_mem_free(s->base);
		cumemcap_ledger_sub(s->dev, CUMEMCAP_KIND_linear, s->bytes);
		cumemcap_ledger_bump(s->dev, segments_released);
		cumemcap_log_segment(s->dev, false, s->bytes);
	}
	cumemcap_driver_pop_ctx(pushed);
	free(g->seg);
	if (g->quiet)
		cumemcap_capture_quiet_exit();
}

void cumemcap_account_release_cached(int dev)
{
	uint32_t n = atomic_load_explicit(&cumemcap_arena_count, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct cumemcap_give_back g;
		cumemcap_arena_release_device(i, dev, &g);
		give_back(&g);
	}
}

uint32_t cumemcap_account_arena_tick(uint64_t now_ms)
{
	if (cumemcap_policy()->release != CUMEMCAP_RELEASE_IDLE)
		return UINT32_MAX;
	uint64_t next = UINT64_MAX;
	uint32_t n = atomic_load_explicit(&cumemcap_arena_count, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct cumemcap_give_back g;
		/* No context dies while this arena's driver calls are made. */
		cumemcap_death_lock_read();
		cumemcap_arena_idle(i, now_ms, &g, &next);
		give_back(&g);
		cumemcap_death_unlock_read();
	}
	return next <= now_ms ? 0 : (uint32_t)(next - now_ms > UINT32_MAX ? UINT32_MAX : next - now_ms);
}

bool cumemcap_account_free_pooled(CUdeviceptr ptr, CUresult *r)
{
	struct cumemcap_give_back g;
	if (!atomic_load_explicit(&cumemcap_arena_count, memory_order_acquire) || !ptr ||
	    !cumemcap_arena_free(ptr, r, &g))
		return false;
	give_back(&g);
	/* A thread waiting for room tries again: a segment may go now. */
	if (*r == CUDA_SUCCESS && atomic_load_explicit(&cumemcap_group_hot, memory_order_relaxed) > 1)
		cumemcap_group_wake_local();
	return true;
}

/* Before a request on `dev` is refused (at the limit, or by the driver). */
static void make_room(int dev)
{
	cumemcap_account_pool_refresh_now(dev);
	cumemcap_account_release_cached(dev);
	cumemcap_account_footprint_refresh(dev); /* it may have shrunk, or grown */
	cumemcap_group_reap();                   /* a dead member's share comes back */
}

/* CUMEMCAP_ON_LIMIT=wait: try again whenever room may have appeared (a
 * free here or in the group, a larger budget) and at least every
 * WAIT_SLICE_MS, until the deadline. The caller waits holding no lock. */
#define WAIT_SLICE_MS 1000u

static bool wait_for_room(int dev, enum cumemcap_kind kind, uint64_t bytes, const char *entry_point)
{
	uint32_t wait_ms = cumemcap_policy()->wait_ms;
	if (wait_ms == 0 || !cumemcap_ledger_valid(dev))
		return false;
	uint64_t start = cumemcap_now_ms(), deadline = start + wait_ms;
	cumemcap_ledger_bump(dev, waits);
	cumemcap_ledger_bump(dev, waiting);
	cumemcap_group_waiting(dev, 1);
	bool granted = false;
	for (;;) {
		uint32_t seq = cumemcap_group_wake_seq();
		if (cumemcap_ledger_reserve(dev, kind, bytes)) {
			granted = true;
			break;
		}
		uint64_t now = cumemcap_now_ms();
		if (now >= deadline)
			break;
		uint64_t slice = deadline - now;
		cumemcap_group_sleep(seq, slice < WAIT_SLICE_MS ? (uint32_t)slice : WAIT_SLICE_MS);
		make_room(dev);
	}
	cumemcap_group_waiting(dev, -1);
	cumemcap_ledger_drop(dev, waiting);
	if (!granted)
		cumemcap_ledger_bump(dev, wait_timeouts);
	cumemcap_log_wait(dev, entry_point, bytes, cumemcap_now_ms() - start, granted);
	return granted;
}

bool cumemcap_account_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes,
			      const char *entry_point)
{
	if (cumemcap_ledger_reserve(dev, kind, bytes))
		return true;
	make_room(dev);
	return cumemcap_ledger_reserve(dev, kind, bytes) ||
	       wait_for_room(dev, kind, bytes, entry_point);
}

/* A segment of `bytes` for a request of `asked`, from the driver in the
 * current context, reserved; tried once more after room was made (the
 * arenas' own cache may be what fills the card). */
static CUresult take_segment(int dev, uint64_t bytes, const char *entry_point, uint64_t asked,
			     CUdeviceptr *base)
{
	for (int attempt = 0;; attempt++) {
		if (!cumemcap_account_reserve(dev, CUMEMCAP_KIND_linear, bytes, entry_point)) {
			cumemcap_account_refused(dev, entry_point, asked);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		CUresult r = cumemcap_driver_mem_alloc(base, bytes);
		if (r == CUDA_SUCCESS)
			return r;
		cumemcap_ledger_sub(dev, CUMEMCAP_KIND_linear, bytes);
		if (r != CUDA_ERROR_OUT_OF_MEMORY)
			return r;
		if (attempt > 0) {
			cumemcap_account_driver_oom(dev, entry_point, asked);
			return r;
		}
		make_room(dev);
	}
}

bool cumemcap_account_alloc_pooled(CUdeviceptr *dptr, uint64_t bytes, const char *entry_point,
				   CUresult *r)
{
	struct cumemcap_arena_request q;
	for (;;) {
		enum cumemcap_arena_answer answer = cumemcap_arena_serve(&q, bytes, dptr);
		give_back(&q.back);
		switch (answer) {
		case CUMEMCAP_ARENA_NOT_POOLED:
			return false;
		case CUMEMCAP_ARENA_SERVED:
			cumemcap_ledger_record_request(q.dev, bytes);
			*r = CUDA_SUCCESS;
			return true;
		case CUMEMCAP_ARENA_REFUSED:
			cumemcap_ledger_record_request(q.dev, bytes);
			cumemcap_account_refused(q.dev, entry_point, bytes);
			*r = CUDA_ERROR_OUT_OF_MEMORY;
			return true;
		case CUMEMCAP_ARENA_NEEDS_SEGMENT:
			break;
		}
		if (!q.prealloc) {
			bool served = cumemcap_arena_serve_sibling(&q, dptr);
			give_back(&q.back);
			cumemcap_ledger_record_request(q.dev, bytes);
			if (served) {
				*r = CUDA_SUCCESS;
				return true;
			}
		}
		CUdeviceptr base;
		*r = take_segment(q.dev, q.segment_bytes, q.prealloc ? "preallocate" : entry_point,
				  q.prealloc ? q.segment_bytes : bytes, &base);
		if (*r != CUDA_SUCCESS && !q.prealloc)
			return true;
		if (*r == CUDA_SUCCESS) {
			bool kept = false;
			if (cumemcap_arena_poolable(base)) {
				cumemcap_ledger_bump(q.dev, segments_taken);
				cumemcap_log_segment(q.dev, true, q.segment_bytes);
				kept = cumemcap_arena_add_segment(&q, base, dptr);
			}
			if (kept && !q.prealloc)
				return true;
			if (kept)
				continue; /* preallocated: served from it */
			/* Not poolable, or no host memory for the records. */
			cumemcap_driver_mem_free(base);
			cumemcap_ledger_sub(q.dev, CUMEMCAP_KIND_linear, q.segment_bytes);
			if (!q.prealloc)
				return false; /* the driver serves it */
			*r = cumemcap_arena_poolable(base) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_NOT_SUPPORTED;
		}
		cumemcap_arena_prealloc_failed(&q, *r);
	}
}
