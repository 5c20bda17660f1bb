/* account: the one charge path of every allocating and freeing hook.
 *
 * A hook that allocates does: begin (find the device, reserve the bytes
 * against its limit: cumemcap_account_reserve) -> the real driver call ->
 * finish (keep the record on success, give the bytes back on failure). A
 * pooled cuMemAlloc asks the arenas first and reserves their segments the
 * same way (reserve.c). A hook that frees does: take (remove the record)
 * -> the real driver call -> settle (release the bytes on success, put the
 * record back on failure). The driver's CUresult reaches the program
 * unchanged; only a refusal at the limit is ours, and it is
 * CUDA_ERROR_OUT_OF_MEMORY, as from a full card.
 *
 * Stream-ordered pools are accounted by what they really reserve
 * (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), not by what the program asked.
 * Under a limit (or a group's budget) every allocation holds an estimate
 * and reads the pool back; on a GPU without one the pools' growth is left
 * unread until the figures are read (ledger.h, "figures read late").
 *
 * Thread safety: the ledger is atomic, the record map striped; the pool
 * table has one spinlock, never held across a driver call, and the pools'
 * attribute queries are ordered by a second one held across each query.
 * A charge lives in the caller's frame. */
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

/* Reserve `bytes` of `kind`. dev < 0: the device of the current context
 * (c->ctx is then that context); dev >= 0 names the device and leaves
 * c->ctx NULL for the caller to set. Returns CUDA_SUCCESS (call the
 * driver) or CUDA_ERROR_OUT_OF_MEMORY (refused, counted and logged). */
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

/* cuMemAlloc(bytes) from the current context's arena, or from a segment
 * reserved and taken from the driver for it. False when pooling does not
 * apply: the caller goes to the driver. Otherwise *r is the answer
 * (CUDA_SUCCESS and *dptr, or the refusal, counted and logged). */
bool cumemcap_account_alloc_pooled(CUdeviceptr *dptr, uint64_t bytes, const char *entry_point,
				   CUresult *r);

/* cuMemFree(ptr) of a pooled block: false when ptr is in no arena's
 * segment (the caller goes to the driver); otherwise *r is the answer
 * (cumemcap_arena_free). */
bool cumemcap_account_free_pooled(CUdeviceptr ptr, CUresult *r);

/* Reserve `bytes` of `kind` on `dev` within its limit; when they do not
 * fit, make room on the GPU (read the pools back, give back what every
 * arena caches, learn the overhead again, take back dead group members'
 * shares) and try once more, then wait for room with
 * CUMEMCAP_ON_LIMIT=wait (counted and logged). False: refused, nothing
 * reserved; the caller counts and logs it (cumemcap_account_refused). */
bool cumemcap_account_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes,
			      const char *entry_point);

/* Give back every segment the arenas of `dev` cache. */
void cumemcap_account_release_cached(int dev);

/* Worker ticks: the arenas' idle release; the group's (publish figures,
 * reap dead members, log limit changes, release cached memory when a
 * GPU's group is over its budget). */
uint32_t cumemcap_account_arena_tick(uint64_t now_ms);
uint32_t cumemcap_account_group_tick(uint64_t now_ms);

/* Log the group's limit changes not logged yet. */
void cumemcap_account_group_changes(void);

/* Count and log a request refused at the limit, or the driver's own
 * CUDA_ERROR_OUT_OF_MEMORY for one. */
void cumemcap_account_refused(int dev, const char *entry_point, uint64_t bytes);
void cumemcap_account_driver_oom(int dev, const char *entry_point, uint64_t bytes);

/* Freeing: remove the record before the driver frees; after its answer,
 * release the bytes, or restore the record. */
bool cumemcap_account_release_take(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *b);
CUresult cumemcap_account_release_settle(bool found, const struct cumemcap_block *b, CUresult r);

enum cumemcap_death {
	CUMEMCAP_DEATH_DESTROYED, /* cuCtxDestroy */
	CUMEMCAP_DEATH_RESET,     /* cuDevicePrimaryCtxReset of an active primary context */
	CUMEMCAP_DEATH_RELEASED,  /* the last cuDevicePrimaryCtxRelease */
};

/* Context `ctx` (on `dev`, or -1 when unknown) died and the driver freed
 * everything allocated in it: forget all of it (blocks, segments, pending
 * frees, cached bytes, records) and log what went. Runs as the writer of
 * the death lock (death-lock.h), right after the driver call. ctx NULL:
 * an unknown handle, of which nothing is kept. */
void cumemcap_account_context_died(CUcontext ctx, int dev, enum cumemcap_death why);

/* ---- stream-ordered pools ---- */

void cumemcap_account_pool_created(CUmemoryPool pool, int dev);
void cumemcap_account_pool_destroyed(CUmemoryPool pool);
/* cuMemPoolTrimTo returned: follow the pool down. */
void cumemcap_account_pool_trimmed(CUmemoryPool pool);
/* Before cuMemPoolTrimTo or cuMemPoolDestroy: read back the pool's unread
 * growth while the pool still holds it. */
void cumemcap_account_pool_read(CUmemoryPool pool);

/* A stream-ordered allocation (cuMemAllocAsync, cuMemAllocFromPoolAsync),
 * from begin to finish. */
struct cumemcap_pool_alloc {
	struct cumemcap_charge c;
	CUmemoryPool pool;  /* followed by its reserved figure; NULL: charged as asked */
	uint64_t estimate;  /* held for it while the driver serves it */
	uint64_t bytes;     /* what the program asked */
	bool growth_unread; /* charged nothing: the pool's growth is read later (no limit) */
};

/* Before the driver call: charge `bytes` for context ctx, whose stream is
 * on device stream_dev. current: from the current pool of stream_dev
 * (cuMemAllocAsync; `pool` is ignored); otherwise from the program's
 * `pool`, charged to its own device (stream_dev when none claims it).
 * Returns CUDA_SUCCESS (call the driver, then finish) or
 * CUDA_ERROR_OUT_OF_MEMORY (refused; no finish). */
CUresult cumemcap_account_pool_alloc_begin(struct cumemcap_pool_alloc *a, const char *entry_point,
					   CUcontext ctx, int stream_dev, bool current,
					   CUmemoryPool pool, uint64_t bytes);

/* After the driver returned r (ptr: the allocation on success): charge
 * what the pool really took instead of the estimate and record the block.
 * Returns r, or CUDA_ERROR_OUT_OF_MEMORY when the pool grew past every
 * estimate and past the limit (counted and logged; the caller frees ptr
 * in stream order). */
CUresult cumemcap_account_pool_alloc_finish(struct cumemcap_pool_alloc *a, CUresult r, uint64_t ptr);

/* Re-read every pool of `dev` (0 <= dev < CUMEMCAP_MAX_DEVICES): they
 * shrink at synchronizations the shim does not see, and grow unread on a
 * GPU without a limit. Asks the driver nothing when no pool bytes are
 * counted on dev and no growth is unread. */
void cumemcap_account_pool_refresh_now(int dev);

/* A device's current pool may have changed (cuDeviceSetMemPool,
 * cuMemSetMemPool, a pool destroyed, a context's death): the threads ask
 * the driver for it again. */
void cumemcap_account_pools_changed(void);

/* The bytes a pool takes for one request (its 2 MiB granularity). */
uint64_t cumemcap_account_pool_estimate(uint64_t bytes);

/* Between account.c's charge of an allocation from a pool and the pool
 * table: pools.c says what each does. */
int cumemcap_account_pool_device(CUmemoryPool pool, int fallback);
CUmemoryPool cumemcap_account_current_pool(int dev);
bool cumemcap_account_pool_unread(CUmemoryPool pool, int dev, bool current);
void cumemcap_account_pool_hold(CUmemoryPool pool, int dev, uint64_t estimate);
void cumemcap_account_pool_grew(int dev);
bool cumemcap_account_pool_charge(struct cumemcap_charge *c, CUmemoryPool pool, uint64_t estimate);

/* Fork: hold the pool table across fork(); the child drops it. */
void cumemcap_account_lock(void);
void cumemcap_account_unlock(void);
void cumemcap_account_pool_reset(void);
