/* fake-extra: helpers shared by the fake's newer files (misc entry
 * points, 2D/3D copies, modules, capture). Kept apart from
 * fake-internal.h so the two can change independently. Locking as in
 * fake-internal.h: everything under fake_lock unless said otherwise.
 */
#pragma once

#include "fake-internal.h"

#include <cudaGL.h>      /* GL/gl.h: gl-stub/ on the fake's include path */
#include <cudaProfiler.h>

/* Pinned (page-locked) host memory from cuMemHostRegister (fake-misc.c):
 * true when [p, p+n) lies in one registered range (lock held). */
bool fake_host_registered(uintptr_t p, size_t n);

/* ---- stream capture (fake-capture.c, with hooks in fake-stream.c and
 * fake-mem.c); all under fake_lock ---------------------------------------- */
struct fake_capture;
/* The capture sequence a stream is in (NULL: none), and its owner. */
struct fake_capture *fake_stream_capture(struct CUstream_st *s);
void fake_stream_set_capture(struct CUstream_st *s, struct fake_capture *c);
struct CUctx_st *fake_stream_ctx(struct CUstream_st *s);
bool fake_stream_blocking(struct CUstream_st *s);
/* Finish an operation that will never run (captured, then discarded). */
void fake_op_discard(struct fake_op *op);
/* An operation pushed into a capturing stream: kept for the graph (or
 * discarded when the capture was invalidated); takes op. */
void fake_capture_add_op(struct fake_capture *c, struct fake_op *op);
/* A potentially unsafe call (device memory allocation) by this thread:
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating the captures that
 * prohibit it, when the thread's capture mode forbids it now. */
CUresult fake_capture_check_unsafe(void);
/* A synchronization of ctx (context synchronize, cuMemFree): illegal in any
 * mode while a stream of ctx captures; invalidates those captures. */
CUresult fake_capture_check_sync(struct CUctx_st *ctx);
/* The context was synchronized anyway (a caller that cannot fail): its
 * captures are invalidated. */
void fake_capture_ctx_synchronized(struct CUctx_st *ctx);
/* Invalidate the capture s is in (a sync or query of s itself). */
void fake_capture_invalidate(struct fake_capture *c);
/* s is being destroyed: its capture sequence ends without a graph. */
void fake_capture_stream_gone(struct CUstream_st *s);

/* ---- graphs and graph memory (fake-graph.c); all under fake_lock --------- */
struct CUgraph_st;
/* A new empty graph (NULL: out of memory) and its handle check. */
struct CUgraph_st *fake_graph_new(void);
bool fake_graph_valid(struct CUgraph_st *g);
/* The handle goes; the contents when no executable graph uses them. */
void fake_graph_destroy(struct CUgraph_st *g);
/* A captured operation becomes a node (root: first of its capture); takes op. */
void fake_graph_add_op(struct CUgraph_st *g, struct fake_op *op, bool root);
/* A captured stream-ordered allocation becomes an allocation node on dev. */
CUresult fake_graph_add_alloc(struct CUgraph_st *g, int dev, size_t size, bool root, CUdeviceptr *dptr);
/* A captured cuMemFreeAsync: CUDA_ERROR_NOT_FOUND when dptr is no
 * allocation node's address (then it is no graph allocation); else the
 * free node's answer. */
CUresult fake_graph_add_free(struct CUgraph_st *g, CUdeviceptr dptr, bool root);
/* dptr is the address of an allocation node that still exists. */
bool fake_graph_alloc_address(CUdeviceptr dptr);
/* [p, p+n) lies in one allocation node's range (live or not). */
bool fake_graph_range(uintptr_t p, size_t n);
/* A live graph allocation (FAKE_K_GRAPH registry entry) is freed now:
 * cuMemFree, cuMemFreeAsync, context death. Frees a. */
void fake_graph_free_alloc(struct fake_alloc *a);
/* Context death: its executable graphs and live graph allocations go, the
 * graph pool's reserve for them back to the device. */
void fake_graph_release_ctx(struct CUctx_st *ctx);
/* fake-capture.c: a capture records into g right now. */
bool fake_capture_uses_graph(struct CUgraph_st *g);
/* fake-capture.c: captured allocation / free (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
 * once the capture is invalidated; free: CUDA_ERROR_NOT_FOUND as above). */
CUresult fake_capture_alloc(struct fake_capture *c, int dev, size_t size, CUdeviceptr *dptr);
CUresult fake_capture_free(struct fake_capture *c, CUdeviceptr dptr);
/* fake-stream.c: a copy of a captured operation (a cloned graph, or one to
 * run at a graph launch); NULL when out of memory. launch: an event record
 * is a new record of its event. */
struct fake_op *fake_op_clone(const struct fake_op *op, bool launch);
