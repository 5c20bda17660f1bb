/* hooks-capture: the entry points that begin and end a stream capture,
 * every version and per-thread variant, so the shim knows when it must
 * not synchronize (capture.h). Each forwards to the driver and notes the
 * outcome; the driver's answer reaches the program unchanged.
 *
 * Thread safety: see capture.h. */
#include "state/capture.h"
#include "platform/export.h"
#include "entry/hooks.h"

/* A begin call returned r. The quiet gate (capture.h) was taken before
 * the call: no synchronizing call of the shim's runs while the capture
 * begins; it is let go once the capture is known. */
static CUresult began(CUresult r, CUstream stream, bool ptsz)
{
	if (r == CUDA_SUCCESS)
		cumemcap_capture_began(stream, ptsz);
	cumemcap_capture_begin_unlock();
	return r;
}

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

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
	NEED(cuStreamBeginCapture);
	cumemcap_capture_begin_lock();
	return began(real_cuStreamBeginCapture(hStream), hStream, false);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
	NEED(cuStreamBeginCapture_ptsz);
	cumemcap_capture_begin_lock();
	return began(real_cuStreamBeginCapture_ptsz(hStream), hStream, true);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	NEED(cuStreamBeginCapture_v2);
	cumemcap_capture_begin_lock();
	return began(real_cuStreamBeginCapture_v2(hStream, mode), hStream, false);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	NEED(cuStreamBeginCapture_v2_ptsz);
	cumemcap_capture_begin_lock();
	return began(real_cuStreamBeginCapture_v2_ptsz(hStream, mode), hStream, true);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
							    const CUgraphNode *dependencies,
							    const CUgraphEdgeData *dependencyData,
							    size_t numDependencies, CUstreamCaptureMode mode)
{
	NEED(cuStreamBeginCaptureToGraph);
	cumemcap_capture_begin_lock();
	return began(real_cuStreamBeginCaptureToGraph(hStream, hGraph, dependencies, dependencyData,
						      numDependencies, mode),
		     hStream, false);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
								 const CUgraphNode *dependencies,
								 const CUgraphEdgeData *dependencyData,
								 size_t numDependencies, CUstreamCaptureMode mode)
{
	NEED(cuStreamBeginCaptureToGraph_ptsz);
	cumemcap_capture_begin_lock();
	return began(real_cuStreamBeginCaptureToGraph_ptsz(hStream, hGraph, dependencies, dependencyData,
							   numDependencies, mode),
		     hStream, true);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	NEED(cuStreamEndCapture);
	return ended(real_cuStreamEndCapture(hStream, phGraph), hStream, false);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	NEED(cuStreamEndCapture_ptsz);
	return ended(real_cuStreamEndCapture_ptsz(hStream, phGraph), hStream, true);
}
