/* streams: the process's streams that do not wait for the legacy default
 * stream, by context, for the arenas' fences (arena/fence.h), and a
 * generation every destruction bumps. A stream of unknown context or more
 * than 256 at once (from then on) make every fence fall back to a context
 * synchronization; more than CUMEMCAP_STREAMS_MAX in one context, that
 * context's fences.
 *
 * Thread safety: a spinlock around the list (never held across a driver
 * call), the generation atomic. */
#pragma once

#include <stdint.h>

#include "platform/cuda-api.h"

/* The most streams a fence records on (besides the legacy stream). */
#define CUMEMCAP_STREAMS_MAX 32

/* The program created `stream` with `flags` in `ctx` (NULL: unknown, as a
 * green context's). Blocking streams are not kept. */
void cumemcap_streams_created(CUstream stream, CUcontext ctx, unsigned flags);

/* The program destroys `stream` (before the driver's call). */
void cumemcap_streams_destroyed(CUstream stream);

/* Changes with every stream destruction. */
uint64_t cumemcap_streams_gen(void);

/* Copy ctx's non-blocking streams into out; returns their count, or -1
 * when a fence cannot cover ctx. */
int cumemcap_streams_of(CUcontext ctx, CUstream out[CUMEMCAP_STREAMS_MAX]);

/* The context died: its streams went with it. */
void cumemcap_streams_forget_ctx(CUcontext ctx);

void cumemcap_streams_fork_child(void);
