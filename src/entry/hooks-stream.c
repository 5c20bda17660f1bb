/* hooks-stream: stream creation and destruction, so the arenas' fences
 * know the streams that do not wait for the legacy stream (streams.h), and
 * the beginning and end of a stream capture, so the shim knows when it
 * must not synchronize (capture.h); every version and per-thread variant.
 *
 * Thread safety: see streams.h and capture.h. Creation runs in a reader
 * section of the death lock: no context dies between the call and its record. */
#include "state/capture.h"
#include "state/streams.h"
#include "entry/hooks.h"

/* Keep a new stream with its context; a green context's with none, so every
 * fence falls back to a context synchronization while it lives. */
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

/* Noted before the stream goes: work still queued on it finishes later, so
 * the next fence falls back to a context synchronization. */
static CUresult destroy(PFN_cuStreamDestroy_v4000 fn, CUstream stream)
{
	cumemcap_streams_destroyed(stream);
	return fn(stream);
}

ENTRY(cuStreamDestroy, (CUstream hStream), destroy(real_cuStreamDestroy, hStream))
ENTRY(cuStreamDestroy_v2, (CUstream hStream), destroy(real_cuStreamDestroy_v2, hStream))

/* The quiet gate (capture.h) is held across a begin call: no synchronizing
 * call of the shim's runs while the capture begins. */
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
#define BEGIN_AND_PTSZ(name, params, ...)                                                          \
	BEGIN(name, false, params, __VA_ARGS__)                                                    \
	BEGIN(name##_ptsz, true, params, __VA_ARGS__)
BEGIN_AND_PTSZ(cuStreamBeginCapture, (CUstream hStream), hStream)
BEGIN_AND_PTSZ(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode), hStream, mode)
BEGIN_AND_PTSZ(cuStreamBeginCaptureToGraph,
	       (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
		const CUgraphEdgeData *dependencyData, size_t numDependencies,
		CUstreamCaptureMode mode),
	       hStream, hGraph, dependencies, dependencyData, numDependencies, mode)

/* Over when the driver says so (an end from the wrong thread leaves the
 * stream capturing); unasked, when the end succeeded or was invalidated. */
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
