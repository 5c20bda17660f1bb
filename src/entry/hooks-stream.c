/* hooks-stream: stream creation and destruction, every version, so the
 * arenas' fences know the streams that do not wait for the legacy stream
 * (state/streams.h). Each forwards to the driver and notes the outcome;
 * the driver's answer reaches the program unchanged.
 *
 * Thread safety: see streams.h. Creation runs in a reader section of the
 * death lock, so no context dies between the driver's call and the note
 * (a dead context's streams are forgotten with it). */
#include "state/streams.h"
#include "platform/export.h"
#include "entry/hooks.h"

/* A stream was made: keep it with its context (cuStreamGetCtx). */
static CUresult created(CUresult r, CUstream *stream, unsigned flags)
{
	if (r == CUDA_SUCCESS && stream) {
		CUcontext ctx = NULL;
		if (!cumemcap_driver_stream_ctx(*stream, &ctx))
			ctx = NULL;
		cumemcap_streams_created(*stream, ctx, flags);
	}
	return r;
}

LOCKED_ENTRY(cuStreamCreate, (CUstream *phStream, unsigned int Flags),
	     created(real_cuStreamCreate(phStream, Flags), phStream, Flags))
LOCKED_ENTRY(cuStreamCreateWithPriority, (CUstream *phStream, unsigned int flags, int priority),
	     created(real_cuStreamCreateWithPriority(phStream, flags, priority), phStream, flags))

/* A green context's stream: its work may use the memory of the green
 * context's device from a context the arenas do not know, so every fence
 * falls back to a context synchronization while it lives. */
CUMEMCAP_EXPORT CUresult CUDAAPI cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags,
							int priority)
{
	NEED(cuGreenCtxStreamCreate);
	HOLD_DEATH_LOCK();
	CUresult r = real_cuGreenCtxStreamCreate(phStream, greenCtx, flags, priority);
	if (r == CUDA_SUCCESS && phStream)
		cumemcap_streams_created(*phStream, NULL, flags);
	return r;
}

/* The destruction is noted first (the generation moves before the stream
 * leaves the list): work still queued on it finishes later, so the next
 * fence falls back to a context synchronization. */
static CUresult destroy(PFN_cuStreamDestroy_v4000 fn, CUstream stream)
{
	cumemcap_streams_destroyed(stream);
	return fn(stream);
}

ENTRY(cuStreamDestroy, (CUstream hStream), destroy(real_cuStreamDestroy, hStream))
ENTRY(cuStreamDestroy_v2, (CUstream hStream), destroy(real_cuStreamDestroy_v2, hStream))
