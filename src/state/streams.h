/* streams: the streams of the process that do not wait for the legacy
 * default stream, by context.
 *
 * The arenas prove a freed block idle with a fence (arena/fence.h): an
 * event on the legacy stream, which waits for every blocking stream of its
 * context, and one on each CU_STREAM_NON_BLOCKING stream this list keeps.
 * A stream it cannot place (its context unknown, a green context's stream)
 * makes every fence fall back to a context synchronization while it lives;
 * so do more than 256 such streams at once (from then on) and more than
 * CUMEMCAP_STREAMS_MAX in one context. A stream destroyed with work still
 * queued finishes that work out of any list: every destruction bumps a
 * generation, which the fences compare.
 *
 * Thread safety: a spinlock around the list (never held across a driver
 * call), the generation atomic. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"

/* The most streams a fence records on (besides the legacy stream). */
#define CUMEMCAP_STREAMS_MAX 32

/* The program created `stream` with `flags` in context `ctx` (NULL: not
 * known, or a green context's stream: every fence falls back while it
 * lives). Blocking streams are not kept. */
void cumemcap_streams_created(CUstream stream, CUcontext ctx, unsigned flags);

/* The program destroys `stream` (called before the driver's call). */
void cumemcap_streams_destroyed(CUstream stream);

/* The generation: changes with every stream destruction. */
uint64_t cumemcap_streams_gen(void);

/* Copy ctx's non-blocking streams into out (up to CUMEMCAP_STREAMS_MAX);
 * returns their count, or -1 when a fence cannot cover ctx (a stream of
 * unknown context lives, or ctx has more than CUMEMCAP_STREAMS_MAX). */
int cumemcap_streams_of(CUcontext ctx, CUstream out[CUMEMCAP_STREAMS_MAX]);

/* The context died: its streams went with it. */
void cumemcap_streams_forget_ctx(CUcontext ctx);

/* Fork child: forget the parent's streams (its contexts are not ours). */
void cumemcap_streams_fork_child(void);
