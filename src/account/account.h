/* account: the one charge path of every allocating and freeing hook.
 * Allocating: begin (reserve against the device's limit) -> the driver ->
 * finish (record, or give the bytes back); a pooled cuMemAlloc asks the
 * arenas first (reserve.c). Freeing: take the record -> the driver ->
 * settle. The driver's CUresult reaches the program unchanged; our only
 * refusal is CUDA_ERROR_OUT_OF_MEMORY.
 *
 * Thread safety: the ledger is atomic, the record map locked; the pool
 * table has a spinlock never held across a driver call, and a second one
 * orders the pools' attribute queries. A charge lives in the caller's
 * frame. */
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
	const char *entry_point; /* for the log */
};

/* Reserve `bytes` on dev, or (dev < 0) on the current context's device
 * (c->ctx then set). CUDA_ERROR_OUT_OF_MEMORY: refused, counted, logged. */
CUresult cumemcap_account_charge_begin(struct cumemcap_charge *c, const char *entry_point, int dev,
				       enum cumemcap_kind kind, uint64_t bytes);

/* After the driver answered r: record (handle, key) or give the bytes back. Returns r. */
CUresult cumemcap_account_charge_finish(struct cumemcap_charge *c, CUresult r,
				enum cumemcap_handle_kind handle, uint64_t key);

/* The driver took `actual` bytes where c reserved an estimate: charge the
 * difference. False (nothing changed, refusal logged) past the limit. */
bool cumemcap_account_charge_adjust(struct cumemcap_charge *c, uint64_t actual);

/* cuMemAlloc(bytes) from the current context's arena. False: not pooled; else *r answers. */
bool cumemcap_account_alloc_pooled(CUdeviceptr *dptr, uint64_t bytes, const char *entry_point,
				   CUresult *r);

/* cuMemFree(ptr): false when ptr is in no arena's segment. */
bool cumemcap_account_free_pooled(CUdeviceptr ptr, CUresult *r);

/* Reserve `bytes` of `kind` on `dev`; when they do not fit, make room,
 * try once more, then wait with CUMEMCAP_ON_LIMIT=wait. False: nothing
 * reserved; the caller counts and logs the refusal. */
bool cumemcap_account_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes,
			      const char *entry_point);

/* Give back every segment the arenas of `dev` cache. */
void cumemcap_account_release_cached(int dev);

/* Worker ticks: the arenas' idle release; the group's. */
uint32_t cumemcap_account_arena_tick(uint64_t now_ms);
uint32_t cumemcap_account_group_tick(uint64_t now_ms);

/* Log the group's limit changes not logged yet. */
void cumemcap_account_group_changes(void);

/* Count and log a refusal at the limit, or the driver's own OOM. */
void cumemcap_account_refused(int dev, const char *entry_point, uint64_t bytes);
void cumemcap_account_driver_oom(int dev, const char *entry_point, uint64_t bytes);

/* Freeing: take the record before the driver frees; settle after. */
bool cumemcap_account_release_take(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *b);
CUresult cumemcap_account_release_settle(bool found, const struct cumemcap_block *b, CUresult r);

enum cumemcap_death {
	CUMEMCAP_DEATH_DESTROYED, /* cuCtxDestroy */
	CUMEMCAP_DEATH_RESET,     /* cuDevicePrimaryCtxReset of an active primary context */
	CUMEMCAP_DEATH_RELEASED,  /* the last cuDevicePrimaryCtxRelease */
};

/* Context ctx (on dev, -1: unknown; ctx NULL: an unknown handle) died:
 * forget what was allocated in it and log it. Death lock held as writer. */
void cumemcap_account_context_died(CUcontext ctx, int dev, enum cumemcap_death why);

/* ---- stream-ordered pools ---- */

void cumemcap_account_pool_destroyed(CUmemoryPool pool);
/* Before cuMemPoolTrimTo or cuMemPoolDestroy: read the pool's unread
 * growth; after cuMemPoolTrimTo (`trimmed`): follow it down. */
void cumemcap_account_pool_read(CUmemoryPool pool, bool trimmed);

/* cuMemAllocAsync or cuMemAllocFromPoolAsync, from begin to finish. c
 * holds the estimate while the driver serves it (c.live: what was asked). */
struct cumemcap_pool_alloc {
	struct cumemcap_charge c;
	CUmemoryPool pool;  /* followed by its reserved figure; NULL: charged as asked */
	bool growth_unread; /* charged nothing: the pool's growth is read later (no limit) */
};

/* Charge `bytes` for ctx, whose stream is on stream_dev, from that device's
 * current pool (`current`) or from `pool`, on the pool's own device
 * (stream_dev when none claims it). CUDA_ERROR_OUT_OF_MEMORY: no finish. */
CUresult cumemcap_account_pool_alloc_begin(struct cumemcap_pool_alloc *a, const char *entry_point,
					   CUcontext ctx, int stream_dev, bool current,
					   CUmemoryPool pool, uint64_t bytes);

/* After the driver returned r (and ptr): charge what the pool really took
 * and record the block. Returns r, or CUDA_ERROR_OUT_OF_MEMORY when the
 * pool grew past the limit (the caller frees ptr in stream order). */
CUresult cumemcap_account_pool_alloc_finish(struct cumemcap_pool_alloc *a, CUresult r, uint64_t ptr);

/* Re-read every pool of dev (valid): they shrink at synchronizations the
 * shim does not see, and grow unread without a limit. Asks nothing when
 * dev has neither. */
void cumemcap_account_pool_refresh_now(int dev);

/* A device's current pool may have changed: threads ask again. */
void cumemcap_account_pools_changed(void);

/* The bytes a pool takes for one request (its 2 MiB granularity). */
uint64_t cumemcap_account_pool_estimate(uint64_t bytes);

/* List `pool` on `dev`, holding `estimate` for an allocation under way (0: cuMemPoolCreate). */
void cumemcap_account_pool_hold(CUmemoryPool pool, int dev, uint64_t estimate);

/* Between account.c's pool charge and pools.c's table (see pools.c). */
int cumemcap_account_pool_device(CUmemoryPool pool, int fallback);
CUmemoryPool cumemcap_account_current_pool(int dev);
bool cumemcap_account_pool_unread(CUmemoryPool pool, int dev, bool current);
void cumemcap_account_pool_grew(int dev);
bool cumemcap_account_pool_charge(struct cumemcap_charge *c, CUmemoryPool pool);

/* Fork: hold the pool table across fork(); the child drops it. */
void cumemcap_account_lock(void);
void cumemcap_account_unlock(void);
void cumemcap_account_pool_reset(void);
