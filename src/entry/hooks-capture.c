/* hooks-capture: the entry points that begin and end a stream capture,
 * every version and per-thread variant, so the shim knows when it must
 * not synchronize (capture.h). The driver's answer reaches the program
 * unchanged.
 *
 * Thread safety: see capture.h. */
#include "state/capture.h"
#include "platform/export.h"
#include "entry/hooks.h"

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
