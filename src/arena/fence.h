/* arena/fence: proving that no work queued before a block was freed still
 * runs, without synchronizing the device as cuMemFree does (programs rely
 * on that).
 *
 * Events made once per arena are recorded on the legacy stream, which
 * waits for every blocking stream, and on each CU_STREAM_NON_BLOCKING
 * stream of the context (state/streams.h) with work queued; those not
 * complete are waited for. It falls back to cuCtxSynchronize the first
 * time, after a stream was destroyed since the last one (its work is in no
 * list), while a stream of unknown context lives, when another thread
 * fences the arena, or when a driver call fails. Callers are in a quiet
 * section (capture.h): no record becomes a node of a captured graph.
 *
 * Thread safety: one fence per arena slot, used by the thread that took
 * its busy flag, with no arena lock held. Its events die with the context:
 * forgotten at the arena's next epoch and in a fork child. */
#pragma once

#include <stdint.h>

#include "platform/cuda-api.h"

struct arena;

/* With ctx (the arena's, at `epoch`) current and no lock held: prove
 * every stream's work queued before now complete. CUDA_SUCCESS when
 * proven (by the fence or by a context synchronization). */
CUresult arena_fence_wait(struct arena *a, CUcontext ctx, uint32_t epoch);

void arena_fence_fork_child(void);
