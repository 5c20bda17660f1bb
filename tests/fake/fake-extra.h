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
