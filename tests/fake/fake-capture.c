/* fake-capture: stream capture into graphs, with the rules the driver API
 * documents (cuStreamBeginCapture, cuThreadExchangeStreamCaptureMode,
 * cuStreamEndCapture, cuStreamIsCapturing in cuda.h):
 *
 * - Work pushed into a capturing stream does not run; it becomes nodes of
 *   the graph cuStreamEndCapture returns. The legacy stream cannot capture
 *   (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED), a capturing stream cannot
 *   begin again (CUDA_ERROR_ILLEGAL_STATE), and a capture not begun in
 *   relaxed mode must end on the thread that began it
 *   (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD).
 * - Potentially unsafe calls (here: device memory allocation,
 *   cuMemAlloc/cuMemAllocPitch/cuMemAllocManaged) are prohibited by the
 *   calling thread's mode: GLOBAL (the default) while this thread has a
 *   capture not begun RELAXED or any other thread has one begun GLOBAL;
 *   THREAD_LOCAL only while this thread has a capture not begun RELAXED;
 *   RELAXED never. A prohibited call fails with
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures
 *   that prohibited it.
 * - Synchronizing with a capture in progress is illegal in every mode:
 *   cuStreamSynchronize/cuStreamQuery of the capturing stream, and
 *   synchronizing its context (cuMemFree, which synchronizes the context in
 *   the fake as the driver may; cuCtxSynchronize) fail with
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture.
 *   cuCtxSynchronize lives in fake-ctx.c, which has no hook yet: it still
 *   returns CUDA_SUCCESS, but the capture is invalidated as by the driver.
 * - An invalidated capture keeps the stream in capture mode
 *   (CU_STREAM_CAPTURE_STATUS_INVALIDATED) until cuStreamEndCapture, which
 *   returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and a NULL graph.
 * - cuStreamIsCapturing/cuStreamGetCaptureInfo on the legacy stream while a
 *   blocking stream of the context captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT.
 *
 * - cuMemAllocAsync/cuMemAllocFromPoolAsync on a capturing stream add an
 *   allocation node (no memory from the pool), cuMemFreeAsync of an
 *   allocation node's address a free node (fake-graph.c); on an invalidated
 *   capture they fail with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 *
 * Graphs, their nodes, instantiation and launch live in fake-graph.c.
 * Operations of a discarded capture or a destroyed graph are finished
 * without running (their events and pool blocks released).
 *
 * Thread safety: captures and graphs in lists under fake_lock; the capture
 * mode is the thread's (struct fake_thread).
 */
#include "fake-extra.h"

#include <stdlib.h>

struct fake_capture {
	struct CUstream_st *stream;
	struct CUctx_st *ctx;
	CUstreamCaptureMode mode;
	pthread_t thread;
	cuuint64_t id;
	bool invalidated;
	struct CUgraph_st *graph; /* the graph it captures into */
	bool own_graph;           /* made by BeginCapture, not ToGraph */
	bool started;             /* a node was captured (later ones are not roots) */
	struct fake_capture *next;
};

static struct fake_capture *captures;
static cuuint64_t capture_ids;

/* ---- the capture sequences ------------------------------------------------------------ */

void fake_capture_add_op(struct fake_capture *c, struct fake_op *op)
{
	if (c->invalidated) {
		fake_op_discard(op);
		return;
	}
	fake_graph_add_op(c->graph, op, !c->started);
	c->started = true;
}

CUresult fake_capture_alloc(struct fake_capture *c, int dev, size_t size, CUdeviceptr *dptr)
{
	if (c->invalidated)
		return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	CUresult r = fake_graph_add_alloc(c->graph, dev, size, !c->started, dptr);
	if (!r)
		c->started = true;
	return r;
}

CUresult fake_capture_free(struct fake_capture *c, CUdeviceptr dptr)
{
	if (c->invalidated)
		return fake_graph_alloc_address(dptr) ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_ERROR_NOT_FOUND;
	CUresult r = fake_graph_add_free(c->graph, dptr, !c->started);
	if (!r)
		c->started = true;
	return r;
}

bool fake_capture_uses_graph(struct CUgraph_st *g)
{
	for (struct fake_capture *c = captures; c; c = c->next)
		if (c->graph == g)
			return true;
	return false;
}

void fake_capture_invalidate(struct fake_capture *c)
{
	c->invalidated = true;
}

/* Remove c from the list and from its stream; its graph goes if it made it. */
static void capture_end(struct fake_capture *c)
{
	for (struct fake_capture **pp = &captures; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	fake_stream_set_capture(c->stream, NULL);
	free(c);
}

void fake_capture_stream_gone(struct CUstream_st *s)
{
	struct fake_capture *c = fake_stream_capture(s);
	if (c->own_graph)
		fake_graph_destroy(c->graph);
	capture_end(c);
}

CUresult fake_capture_check_unsafe(void)
{
	int mode = fake_thread()->capture_mode;
	if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_SUCCESS;
	pthread_t self = pthread_self();
	CUresult r = CUDA_SUCCESS;
	for (struct fake_capture *c = captures; c; c = c->next) {
		if (c->invalidated)
			continue;
		bool mine = pthread_equal(c->thread, self);
		if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
		    (!mine && mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
			c->invalidated = true;
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	}
	return r;
}

CUresult fake_capture_check_sync(struct CUctx_st *ctx)
{
	CUresult r = CUDA_SUCCESS;
	for (struct fake_capture *c = captures; c; c = c->next)
		if (c->ctx == ctx) {
			c->invalidated = true;
			r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		}
	return r;
}

void fake_capture_ctx_synchronized(struct CUctx_st *ctx)
{
	(void)fake_capture_check_sync(ctx);
}

/* The stream argument of a capture call (lock held): created or
 * per-thread streams only. */
static CUresult capture_stream(CUstream h, bool pt, struct CUctx_st **ctx, struct CUstream_st **s)
{
	*ctx = NULL;
	CUresult r = fake_stream_lookup(h, pt, ctx, s);
	if (!r && !*s)
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream */
	return r;
}

static CUresult begin(CUstream h, bool pt, CUstreamCaptureMode mode, CUgraph into, size_t ndeps)
{
	REQUIRE_INIT();
	if ((int)mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	struct CUstream_st *s = NULL;
	CUresult r = capture_stream(h, pt, &ctx, &s);
	if (!r && into && !fake_graph_valid(into))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r && ndeps)
		r = CUDA_ERROR_INVALID_VALUE; /* no graph node can exist to depend on */
	if (!r && fake_stream_capture(s))
		r = CUDA_ERROR_ILLEGAL_STATE;
	for (struct fake_capture *c = captures; !r && into && c; c = c->next)
		if (c->graph == into)
			r = CUDA_ERROR_ILLEGAL_STATE;
	struct fake_capture *c = NULL;
	if (!r && !(c = calloc(1, sizeof *c)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r && !(c->graph = into ? into : fake_graph_new())) {
		free(c);
		r = CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!r) {
		c->stream = s;
		c->ctx = fake_stream_ctx(s);
		c->mode = mode;
		c->thread = pthread_self();
		c->id = ++capture_ids;
		c->own_graph = !into;
		c->next = captures;
		captures = c;
		fake_stream_set_capture(s, c);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamBeginCapture(CUstream hStream)
{
	COUNT(cuStreamBeginCapture);
	return begin(hStream, false, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, 0);
}

FAKE_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	COUNT(cuStreamBeginCapture_ptsz);
	return begin(hStream, true, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, 0);
}

FAKE_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	COUNT(cuStreamBeginCapture_v2);
	return begin(hStream, false, mode, NULL, 0);
}

FAKE_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	COUNT(cuStreamBeginCapture_v2_ptsz);
	return begin(hStream, true, mode, NULL, 0);
}

FAKE_API CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
					      const CUgraphEdgeData *dependencyData, size_t numDependencies,
					      CUstreamCaptureMode mode)
{
	COUNT(cuStreamBeginCaptureToGraph);
	(void)dependencies, (void)dependencyData;
	if (!hGraph)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return begin(hStream, false, mode, hGraph, numDependencies);
}

FAKE_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
						   const CUgraphEdgeData *dependencyData, size_t numDependencies,
						   CUstreamCaptureMode mode)
{
	COUNT(cuStreamBeginCaptureToGraph_ptsz);
	(void)dependencies, (void)dependencyData;
	if (!hGraph)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return begin(hStream, true, mode, hGraph, numDependencies);
}

static CUresult end(CUstream h, bool pt, CUgraph *out)
{
	REQUIRE_INIT();
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	struct CUstream_st *s = NULL;
	CUresult r = capture_stream(h, pt, &ctx, &s);
	if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
		r = CUDA_ERROR_ILLEGAL_STATE; /* the legacy stream never captures */
	struct fake_capture *c = r ? NULL : fake_stream_capture(s);
	if (!r && !c)
		r = CUDA_ERROR_ILLEGAL_STATE;
	if (!r && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self()))
		r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
	if (!r) {
		if (c->invalidated) {
			/* nothing of it is kept: the operations captured since the
			 * capture began (all of them, for a graph of its own) go */
			if (c->own_graph)
				fake_graph_destroy(c->graph);
			*out = NULL;
			r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
		} else {
			*out = c->graph;
		}
		capture_end(c);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	COUNT(cuStreamEndCapture);
	return end(hStream, false, phGraph);
}

FAKE_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	COUNT(cuStreamEndCapture_ptsz);
	return end(hStream, true, phGraph);
}

/* Status of a stream (lock held); the legacy stream while a blocking
 * stream of its context captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
static CUresult status_of(CUstream h, bool pt, CUstreamCaptureStatus *st, struct fake_capture **cap)
{
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s = NULL;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	if (r)
		return r;
	*cap = NULL;
	if (!s) {
		for (struct fake_capture *c = captures; c; c = c->next)
			if (c->ctx == ctx && fake_stream_blocking(c->stream))
				return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
		*st = CU_STREAM_CAPTURE_STATUS_NONE;
		return CUDA_SUCCESS;
	}
	struct fake_capture *c = fake_stream_capture(s);
	*st = !c ? CU_STREAM_CAPTURE_STATUS_NONE
		 : c->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_ACTIVE;
	*cap = c;
	return CUDA_SUCCESS;
}

static CUresult is_capturing(CUstream h, bool pt, CUstreamCaptureStatus *st)
{
	REQUIRE_INIT();
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct fake_capture *c;
	CUresult r = status_of(h, pt, st, &c);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	COUNT(cuStreamIsCapturing);
	return is_capturing(hStream, false, captureStatus);
}

FAKE_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	COUNT(cuStreamIsCapturing_ptsz);
	return is_capturing(hStream, true, captureStatus);
}

/* The id and graph of an active or invalidated capture; no dependency
 * nodes are tracked, so the dependency set is always empty. */
static CUresult capture_info(CUstream h, bool pt, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
			     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	REQUIRE_INIT();
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct fake_capture *c;
	CUresult r = status_of(h, pt, st, &c);
	if (!r && c) {
		if (id)
			*id = c->id;
		if (graph)
			*graph = c->graph;
		if (deps)
			*deps = NULL;
		if (edges)
			*edges = NULL;
		if (ndeps)
			*ndeps = 0;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
	COUNT(cuStreamGetCaptureInfo);
	return capture_info(hStream, false, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

FAKE_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					      cuuint64_t *id_out)
{
	COUNT(cuStreamGetCaptureInfo_ptsz);
	return capture_info(hStream, true, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

FAKE_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
					    size_t *numDependencies_out)
{
	COUNT(cuStreamGetCaptureInfo_v2);
	return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
			    numDependencies_out);
}

FAKE_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
						 cuuint64_t *id_out, CUgraph *graph_out,
						 const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
	COUNT(cuStreamGetCaptureInfo_v2_ptsz);
	return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
			    numDependencies_out);
}

FAKE_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
					    cuuint64_t *id_out, CUgraph *graph_out, const CUgraphNode **dependencies_out,
					    const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
	COUNT(cuStreamGetCaptureInfo_v3);
	return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
			    numDependencies_out);
}

FAKE_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
						 cuuint64_t *id_out, CUgraph *graph_out,
						 const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
						 size_t *numDependencies_out)
{
	COUNT(cuStreamGetCaptureInfo_v3_ptsz);
	return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
			    numDependencies_out);
}

FAKE_API CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	COUNT(cuThreadExchangeStreamCaptureMode);
	REQUIRE_INIT();
	if (!mode || (int)*mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	struct fake_thread *t = fake_thread();
	CUstreamCaptureMode old = (CUstreamCaptureMode)t->capture_mode;
	t->capture_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}
