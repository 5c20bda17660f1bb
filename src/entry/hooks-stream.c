/* hooks-stream: stream creation and destruction, so the arenas' fences
 * know the streams that do not wait for the legacy stream (streams.h), and
 * the beginning and end of a stream capture, so the shim knows when it
 * must not synchronize (capture.h); every version and per-thread variant.
 * The driver's answer reaches the program unchanged.
 *
 * Thread safety: see streams.h and capture.h. Creation runs in a reader
 * section of the death lock, so no context dies between the driver's call
 * and the note (a dead context's streams are forgotten with it). */
#include "state/capture.h"
#include "state/streams.h"
#include "entry/hooks.h"

/* A stream was made: keep it with its context (cuStreamGetCtx). A green
 * context's stream (`green`) is kept with none: its work may use its
 * device's memory from a context the arenas do not know, so every fence
 * falls back to a context synchronization while it lives. */
static CUresult created(CUresult r, CUstream *stream, unsigned flags, bool green)
{
	CUcontext ctx = NULL;
	if (r == CUDA_SUCCESS && stream) {
		if (!green)
			cumemcap_driver_stream_ctx(*stream, &ctx);
		cumemcap_streams_created(*stream, ctx, flags);
	}
	return r;
}

LOCKED_ENTRY(cuStreamCreate, (CUstream *phStream, unsigned int Flags),
	     created(real_cuStreamCreate(phStream, Flags), phStream, Flags, false))
LOCKED_ENTRY(cuStreamCreateWithPriority, (CUstream *phStream, unsigned int flags, int priority),
	     created(real_cuStreamCreateWithPriority(phStream, flags, priority), phStream, flags, false))
LOCKED_ENTRY(cuGreenCtxStreamCreate,
	     (CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority),
	     created(real_cuGreenCtxStreamCreate(phStream, greenCtx, flags, priority), phStream, flags,
		     true))

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

/* The quiet gate (capture.h) is held across a begin call, so no
 * synchronizing call of the shim's runs while the capture begins. */
#define BEGIN(name, ptsz, params, ...)                                                             \
	CUMEMCAP_EXPORT CUresult CUDAAPI name params                                               \
	{                                                                                          \
		NEED(name);                                                                        \
		cumemcap_capture_begin_lock();                                                     \
		CUresult r = real_##name(__VA_ARGS__);                                             \
		if (r == CUDA_SUCCESS)                                                             \
			cumemcap_capture_began(hStream, ptsz);                                     \
		cumemcap_capture_begin_unlock();                                                   \
		return r;                                                                          \
	}
BEGIN(cuStreamBeginCapture, false, (CUstream hStream), hStream)
BEGIN(cuStreamBeginCapture_ptsz, true, (CUstream hStream), hStream)
BEGIN(cuStreamBeginCapture_v2, false, (CUstream hStream, CUstreamCaptureMode mode), hStream, mode)
BEGIN(cuStreamBeginCapture_v2_ptsz, true, (CUstream hStream, CUstreamCaptureMode mode), hStream,
      mode)
#define TO_GRAPH_PARAMS                                                                            \
	(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,                        \
	 const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode)
BEGIN(cuStreamBeginCaptureToGraph, false, TO_GRAPH_PARAMS, hStream, hGraph, dependencies,
      dependencyData, numDependencies, mode)
BEGIN(cuStreamBeginCaptureToGraph_ptsz, true, TO_GRAPH_PARAMS, hStream, hGraph, dependencies,
      dependencyData, numDependencies, mode)

/* An end call returned r: the capture is over when it succeeded or was
 * invalidated (the graph is gone, the stream captures no more), unless the
 * driver says the stream still captures (an end from the wrong thread);
 * after any other error, only if the driver says it no longer captures. */
static CUresult ended(CUresult r, CUstream stream, bool ptsz)
{
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
	bool asked = cumemcap_driver_stream_capturing(stream, ptsz, &st);
	bool over = asked ? st == CU_STREAM_CAPTURE_STATUS_NONE
			  : r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	if (over)
		cumemcap_capture_ended(stream, ptsz);
	return r;
}

ENTRY(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph),
      ended(real_cuStreamEndCapture(hStream, phGraph), hStream, false))
ENTRY(cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph *phGraph),
      ended(real_cuStreamEndCapture_ptsz(hStream, phGraph), hStream, true))
