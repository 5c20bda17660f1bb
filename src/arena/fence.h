/* arena/fence: proving an arena's freed blocks idle without synchronizing
 * the device.
 *
 * A freed block may still be used by work queued before the free on any
 * stream of its context (cuMemFree synchronizes, and programs rely on
 * it). A fence proves that work complete with events made once per arena
 * and reused: one recorded on the legacy stream, which waits for every
 * blocking stream, and one on each CU_STREAM_NON_BLOCKING stream of the
 * context (state/streams.h) whose queue is not empty. Each is queried
 * without blocking; only one not complete is waited for.
 *
 * It falls back to cuCtxSynchronize when it cannot prove: the first time
 * for an arena, after a stream was destroyed since the arena's last
 * synchronization (its queued work is in no list), while a stream of
 * unknown context lives, when another thread is fencing the same arena,
 * or when a driver call fails. Callers are inside a quiet section
 * (capture.h), so no record becomes a node of a captured graph.
 *
 * Thread safety: one fence per arena slot, used only by the thread that
 * took its busy flag; no arena lock is held. A dead context's events died
 * with it: the fence forgets them when its arena was emptied (a new epoch
 * or context) and in a fork child. */
#pragma once

#include <stdint.h>

#include "platform/cuda-api.h"

struct arena;

/* With ctx (the arena's, at `epoch`) current and no lock held: prove
 * every stream's work queued before now complete. CUDA_SUCCESS when
 * proven (by the fence or by a context synchronization). */
CUresult arena_fence_wait(struct arena *a, CUcontext ctx, uint32_t epoch);

void arena_fence_fork_child(void);
