/* account: the steps every allocating and freeing hook takes.
 *
 * A hook that allocates does:  begin (find the device, reserve the bytes
 * against its limit: cumemcap_account_reserve) -> the real driver call ->
 * finish (keep the record on success, give the bytes back on failure). A
 * pooled cuMemAlloc goes through cumemcap_account_alloc_pooled, which
 * reserves the arenas' segments the same way (reserve.c). A hook that frees does:
 * take (remove the record) -> the real driver call -> settle (release the
 * bytes on success, put the record back on failure). The driver's
 * CUresult always reaches the program unchanged; only a refusal at the
 * limit is ours, and it is CUDA_ERROR_OUT_OF_MEMORY, as from a full card.
 *
 * Stream-ordered pools are accounted by what they really reserve
 * (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not by what the program asked:
 * pools keep freed memory, and round requests up. Under a limit (or a
 * group's budget) every allocation holds an estimate and reads the pool
 * back; on a GPU without one the pools' growth is left unread until the
 * figures are read (ledger.h, "figures read late"; account.c, "unread
 * growth").
 *
 * Thread safety: the ledger is atomic, the record map striped; the pool
 * list has one spinlock, never held across a driver call, and the pools'
 * attribute queries are ordered by a second one held across each query.
 * No state is kept per call: a charge lives in the caller's frame. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "arena/arena.h"
#include "platform/cuda-api.h"
#include "state/ledger.h"
#include "state/track.h"

struct cumemcap_charge {
	int dev;           /* -1: not accounted (no context, unknown device) */
	CUcontext ctx;
	enum cumemcap_kind kind;
	uint64_t bytes;    /* charged to the ledger */
	uint64_t live;     /* what the program holds: `bytes` unless set after begin */
	const char *entry_point; /* the entry point, for the log */
};

/* Reserve `bytes` of `kind`. dev < 0 means the device of the current
 * context (c->ctx is then that context); dev >= 0 names the device and
 * leaves c->ctx NULL for the caller to set if the block belongs to a
 * context. Returns CUDA_SUCCESS (go on and call the driver) or
 * CUDA_ERROR_OUT_OF_MEMORY (refused at the limit). */
CUresult cumemcap_account_charge_begin(struct cumemcap_charge *c, const char *entry_point, int dev,
				       enum cumemcap_kind kind, uint64_t bytes);

/* After the driver call: on success record (handle, key) and keep the
 * bytes; on failure give them back. Returns r. */
CUresult cumemcap_account_charge_finish(struct cumemcap_charge *c, CUresult r,
				enum cumemcap_handle_kind handle, uint64_t key);

/* The driver took `actual` bytes where `c` reserved an estimate: take the
 * difference. False (nothing changed) if the limit does not allow it; the
 * caller then frees what it got and reports out of memory. */
bool cumemcap_account_charge_adjust(struct cumemcap_charge *c, uint64_t actual);

/* cuMemAlloc(bytes) served from the current context's arena, or from a
 * segment reserved and taken from the driver for it. Returns false when
 * pooling does not apply (CUMEMCAP_POOL=off, no current context, a device
 * the shim cannot account on): the caller goes to the driver. Otherwise *r
 * is the answer for the program (CUDA_SUCCESS and *dptr, or the refusal,
 * counted and logged). */
bool cumemcap_account_alloc_pooled(CUdeviceptr *dptr, uint64_t bytes, const char *entry_point,
				   CUresult *r);

/* Give the segments the arenas named in g back to the driver (each in its
 * context), take them off the ledger, count and log them; end g's quiet
 * section. g is empty after. */
void cumemcap_account_give_back(struct cumemcap_give_back *g);

/* Give back every segment the arenas of `dev` cache (arena.h). */
void cumemcap_account_release_cached(int dev);

/* cuMemFree(ptr) of a pooled block: false when ptr is in no arena's
 * segment (the caller goes to the driver); otherwise *r is the answer
 * (cumemcap_arena_free). */
bool cumemcap_account_free_pooled(CUdeviceptr ptr, CUresult *r);

/* The worker's tick for the arenas' idle release (CUMEMCAP_RELEASE=idle). */
uint32_t cumemcap_account_arena_tick(uint64_t now_ms);

/* Before a request on `dev` is refused (at the limit, or by the driver):
 * read back what stream-ordered pools trimmed at a synchronization the
 * shim did not see, have the arenas of every context on the GPU give
 * back what they cache, learn the footprint's overhead again, and take
 * back dead group members' shares. One limit per GPU. */
void cumemcap_account_make_room(int dev);

/* Reserve `bytes` of `kind` on `dev` within its limit; when they do not
 * fit, make room (above) and try once more, then wait for room with
 * CUMEMCAP_ON_LIMIT=wait (below). False: refused (nothing reserved; the
 * caller counts and logs the refusal). */
bool cumemcap_account_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes,
			      const char *entry_point);

/* After a refusal of `bytes` of `kind` on `dev` (room already made once):
 * with CUMEMCAP_ON_LIMIT=wait, wait for room up to the deadline, trying
 * again whenever room may have appeared. True: the bytes are reserved.
 * False (at once with on_limit=fail): refused; the caller counts it. The
 * wait is counted and logged. No lock may be held by the caller. */
bool cumemcap_account_wait(int dev, enum cumemcap_kind kind, uint64_t bytes,
			   const char *entry_point);

/* The worker's tick for the group (every second): publish figures, reap
 * dead members, log limit changes, and when a GPU's group is over its
 * budget (it was shrunk), release cached memory first. */
uint32_t cumemcap_account_group_tick(uint64_t now_ms);

/* Log the group's limit changes not logged yet (the worker's tick, and at
 * exit once the worker stopped). */
void cumemcap_account_group_changes(void);

/* Count a request refused at the limit and log it. */
void cumemcap_account_refused(int dev, const char *entry_point, uint64_t bytes);

/* Count the driver's own CUDA_ERROR_OUT_OF_MEMORY for a request and log it. */
void cumemcap_account_driver_oom(int dev, const char *entry_point, uint64_t bytes);

/* Freeing: remove the record before the driver frees. */
bool cumemcap_account_release_take(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *b);
/* After the driver's answer: release the bytes, or restore the record. */
CUresult cumemcap_account_release_settle(bool found, const struct cumemcap_block *b, CUresult r);

/* How a context died. */
enum cumemcap_death {
	CUMEMCAP_DEATH_DESTROYED, /* cuCtxDestroy */
	CUMEMCAP_DEATH_RESET,     /* cuDevicePrimaryCtxReset of an active primary context */
	CUMEMCAP_DEATH_RELEASED,  /* the last cuDevicePrimaryCtxRelease */
};

/* Context `ctx` (on `dev`, or -1 when the caller does not know) died: the
 * driver freed everything allocated in it. Forget every book of it (blocks,
 * segments, pending frees, cached bytes, records) and log what went. Must
 * run as the writer of the death lock (death-lock.h), right after the driver
 * call, so that no hook has seen the context die. ctx may be NULL (the
 * handle is unknown: nothing of it can be in the books). */
void cumemcap_account_context_died(CUcontext ctx, int dev, enum cumemcap_death why);

/* ---- stream-ordered pools ---- */

void cumemcap_account_pool_created(CUmemoryPool pool, int dev);
void cumemcap_account_pool_destroyed(CUmemoryPool pool);
/* cuMemPoolTrimTo returned: follow the pool down. */
void cumemcap_account_pool_trimmed(CUmemoryPool pool);
/* Before cuMemPoolTrimTo or cuMemPoolDestroy: read back the pool's unread
 * growth (a GPU without a limit), while the pool still holds it. */
void cumemcap_account_pool_read(CUmemoryPool pool);

/* A stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync,
 * either stream variant), from begin to finish. */
struct cumemcap_pool_alloc {
	struct cumemcap_charge c;
	CUmemoryPool pool;  /* followed by its reserved figure; NULL: charged as asked */
	uint64_t estimate;  /* held for it while the driver serves it */
	uint64_t bytes;     /* what the program asked */
	bool growth_unread; /* charged nothing: the pool's growth is read later (no limit) */
};

/* Before the driver call: charge `bytes` from `pool` on behalf of context
 * ctx, whose stream is on device stream_dev. current: the call takes from
 * the current pool of stream_dev (cuMemAllocAsync; `pool` is ignored);
 * otherwise `pool` is the program's, charged to the device it allocates on
 * (stream_dev when no device claims it). Holds the pool's granularity
 * (cumemcap_account_pool_estimate) while the driver serves it. Returns
 * CUDA_SUCCESS (call the driver, then finish) or CUDA_ERROR_OUT_OF_MEMORY
 * (refused at the limit; no finish). */
CUresult cumemcap_account_pool_alloc_begin(struct cumemcap_pool_alloc *a, const char *entry_point,
					   CUcontext ctx, int stream_dev, bool current,
					   CUmemoryPool pool, uint64_t bytes);

/* After the driver call returned r (ptr: the allocation, when r is
 * success): charge what the pool really took instead of the estimate and
 * record the block. Returns r, or CUDA_ERROR_OUT_OF_MEMORY when r was
 * success but the pool grew past every estimate and past the limit: the
 * refusal is counted and logged, and the caller frees ptr (in stream
 * order, by the free matching its allocation call). */
CUresult cumemcap_account_pool_alloc_finish(struct cumemcap_pool_alloc *a, CUresult r, uint64_t ptr);

/* Re-read every pool of `dev` (they shrink at synchronization points the
 * shim does not see, and grow unread on a GPU without a limit); nothing
 * to do, and no call, when no pool bytes are counted on dev and no growth
 * is unread (0 <= dev < CUMEMCAP_MAX_DEVICES). */
void cumemcap_account_pool_refresh_now(int dev);
static inline void cumemcap_account_pool_refresh(int dev)
{
	if (cumemcap_ledger_holds(dev, CUMEMCAP_KIND_pool) ||
	    atomic_load_explicit(&cumemcap_ledger_growth_unread[dev], memory_order_relaxed))
		cumemcap_account_pool_refresh_now(dev);
}

/* A device's current pool may have changed (cuDeviceSetMemPool,
 * cuMemSetMemPool, a pool destroyed, a context's death): the threads'
 * cached current pools are asked for again. */
void cumemcap_account_pools_changed(void);

/* Estimate of the bytes a pool takes for one request (its granularity). */
uint64_t cumemcap_account_pool_estimate(uint64_t bytes);

/* Fork child: drop all pool records. */
void cumemcap_account_pool_reset(void);

/* Fork: hold the pool list across fork(). */
void cumemcap_account_lock(void);
void cumemcap_account_unlock(void);
