/* capture: which streams of the process are capturing a CUDA graph now.
 *
 * While any stream captures, the driver forbids synchronizing (a context
 * synchronize, cuMemFree's implicit one) in every capture mode, and in the
 * default global mode any thread's "potentially unsafe" call: the call fails
 * with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and the capture is invalidated.
 * PyTorch grows its pool with cudaMalloc inside captures (relaxed mode), so
 * the arenas make no synchronization and give no segment back while
 * cumemcap_capture_active(). Process-wide on purpose: a global-mode capture
 * forbids the worker thread's calls as well as the capturing thread's.
 *
 * Thread safety: a mutex around the set (never held across a driver call),
 * an atomic count read without it; a reader-writer lock (the quiet gate)
 * held across driver calls, replaced in a fork child as an xmutex is. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "platform/cuda-api.h"

extern _Atomic int cumemcap_captures;

/* Is any stream of the process capturing? One acquire load. */
static inline bool cumemcap_capture_active(void)
{
	return atomic_load_explicit(&cumemcap_captures, memory_order_acquire) > 0;
}

/* Is `stream` capturing now (ptsz: asked through a per-thread-stream
 * entry point)? Asks the driver, only while any capture is active. */
bool cumemcap_capture_stream(CUstream stream, bool ptsz);

/* The shim's own synchronizing calls (a segment's cuMemFree, a context
 * synchronize) are made inside a quiet section, so that they never race a
 * capture's beginning: quiet_enter succeeds only when no stream captures
 * and none is beginning, and until quiet_exit no capture can begin. A
 * section never waits, so it never deadlocks with its caller's locks. */
bool cumemcap_capture_quiet_enter(void);
void cumemcap_capture_quiet_exit(void);
/* The begin hooks: around the driver's begin call and
 * cumemcap_capture_began(). */
void cumemcap_capture_begin_lock(void);
void cumemcap_capture_begin_unlock(void);

/* A capture began on `stream`, or it no longer captures (ended, or found
 * over); ptsz: asked through a per-thread-stream entry point, so that 0 is
 * the calling thread's per-thread default stream. */
void cumemcap_capture_began(CUstream stream, bool ptsz);
void cumemcap_capture_ended(CUstream stream, bool ptsz);

/* Fork: the set's lock is held across fork(); the child's handler also
 * forgets the parent's captures. */
void cumemcap_capture_lock(void);
void cumemcap_capture_unlock(void);
void cumemcap_capture_fork_child(void);
