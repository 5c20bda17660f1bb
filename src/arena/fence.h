/* arena/fence: proving an arena's freed blocks idle without synchronizing
 * the device.
 *
 * cuMemFree synchronizes, so a block the program freed may still be used
 * by work queued before the free on any stream of its context; the arena
 * keeps it pending until that work is known complete. A fence does that
 * with events (CU_EVENT_DISABLE_TIMING, made once per arena in its
 * context and reused): one recorded on the legacy stream, which waits for
 * every blocking stream of the context (per-thread default streams
 * included), and one on each CU_STREAM_NON_BLOCKING stream of the context
 * (state/streams.h) whose queue is not empty (cuStreamQuery: an empty one
 * needs none). An event completes when the work before it on its stream
 * has; all complete proves every block freed before the fence idle. Each
 * is queried (which never blocks) and only one not complete yet is waited
 * for (cuEventSynchronize: that stream's work up to the fence, not the
 * device's). The fence is made when a request finds only pending blocks
 * (arena_reclaim), so a steady reuse of a cached segment with k idle
 * non-blocking streams costs one record, one event query and k stream
 * queries instead of a cuCtxSynchronize (plus a record and a query per
 * busy stream, and a wait per event not complete). Recording a fence at
 * every free of a whole segment instead would record 5 to 90 times more
 * on the benchmark traces (naive-steps 6458 whole-segment frees against
 * 1317 fences, torch-nocache 8547 against 555, torch-caching 705 against
 * 8) and still need this path for packed blocks.
 *
 * It falls back to cuCtxSynchronize (what the driver's cuMemFree does)
 * when it cannot prove: the first time for an arena, after any stream was
 * destroyed since the arena's last synchronization (its queued work is out
 * of every list), while a stream of unknown context lives, when another
 * thread is fencing the same arena, or when a driver call fails. Callers
 * are inside a quiet section (capture.h): no stream captures, so no
 * record becomes a node of a graph and no legacy-stream work invalidates
 * a global-mode capture.
 *
 * Thread safety: one fence per arena slot; a thread uses it only after
 * taking its busy flag (others fall back). No arena lock is held. A dead
 * context's events died with it (cuCtxDestroy destroys them): the fence
 * forgets them when its arena was emptied (a new epoch or context), which
 * every context death does, and in a fork child. */
#pragma once

#include <stdint.h>

#include "platform/cuda-api.h"

struct arena;

/* With ctx (the arena's, at `epoch`) current and no lock held: prove
 * every stream's work queued before now complete. CUDA_SUCCESS when
 * proven (by the fence or by a context synchronization). */
CUresult arena_fence_wait(struct arena *a, CUcontext ctx, uint32_t epoch);

/* Fork child: forget every fence. */
void arena_fence_fork_child(void);

