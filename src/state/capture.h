/* capture: which streams of the process are capturing a CUDA graph now.
 *
 * While any stream captures, the driver fails synchronizing calls (a
 * context synchronize, cuMemFree's) and, in the default global mode, any
 * thread's "potentially unsafe" call, invalidating the capture; PyTorch
 * grows its pool with cudaMalloc inside captures. So the arenas neither
 * synchronize nor give segments back while any stream of the process
 * captures (a global-mode capture forbids the worker's calls too).
 *
 * Thread safety: a mutex around the set (never held across a driver call),
 * an atomic count read without it; a reader-writer lock (the quiet gate)
 * held across driver calls, replaced in a fork child as an xmutex is. */
#pragma once

#include <stdbool.h>

#include "platform/cuda-api.h"

/* Is `stream` capturing now (ptsz: asked through a per-thread-stream
 * entry point)? Asks the driver, only while any capture is active. */
bool cumemcap_capture_stream(CUstream stream, bool ptsz);

/* The shim's own synchronizing calls are made inside a quiet section, which
 * begins only when no stream captures or is beginning to, and keeps any from
 * beginning until it ends. It never waits, so never deadlocks. */
bool cumemcap_capture_quiet_enter(void);
void cumemcap_capture_quiet_exit(void);
/* The begin hooks: around the driver's begin call and capture_began. */
void cumemcap_capture_begin_lock(void);
void cumemcap_capture_begin_unlock(void);

/* A capture began on `stream`, or it no longer captures; with ptsz, 0 is
 * the calling thread's per-thread default stream. */
void cumemcap_capture_began(CUstream stream, bool ptsz);
void cumemcap_capture_ended(CUstream stream, bool ptsz);

/* Fork: the set's lock is held across fork(); the child forgets its captures. */
void cumemcap_capture_lock(void);
void cumemcap_capture_unlock(void);
void cumemcap_capture_fork_child(void);
