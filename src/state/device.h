/* device: what the shim knows about each GPU the process uses.
 *
 * Owns, per CUdevice ordinal, the facts the rules need and the resolved
 * limit, filled in once from the real driver the first time a hook
 * touches the device (double-checked under a mutex; afterwards read
 * without locks). Also finds the device of the calling thread's current
 * context, and of a stream, through per-thread caches. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"
#include "config/policy.h"

struct cumemcap_device_info {
	uint64_t total;  /* cuDeviceTotalMem_v2 of the real driver */
	uint64_t limit;  /* CUMEMCAP_NO_LIMIT when none applies */
	struct cumemcap_source limit_src; /* where the limit came from */
	unsigned char uuid[16];
	char pci_bus_id[32];
};

/* Who is told, once per GPU, that it became known, outside the device
 * lock (the log: it writes its start record). entry/setup.c registers it
 * before any hook can make a GPU known. */
void cumemcap_device_listen(void (*known)(int dev));

/* Make sure device `dev` is known; false if the driver cannot describe it
 * (then the shim does not account on it). */
bool cumemcap_device_ensure(int dev);

/* 0 when the driver reports exactly one GPU and it is known: every
 * context is then on GPU 0, so a caller whose own driver call answers for
 * the current context needs no cuCtxGetCurrent. -1 otherwise. Calls no
 * driver; a 0 never changes. */
int cumemcap_device_only(void);

/* The facts about an ensured device, or NULL. */
const struct cumemcap_device_info *cumemcap_device_info(int dev);

/* Every GPU the driver reported when the first one was used, described
 * (limits resolved); never changes afterwards. Returns how many (0 before
 * the first GPU use). Calls no driver. */
int cumemcap_device_all(const struct cumemcap_device_info **out);

/* cuDriverGetVersion, asked when the first GPU was used; 0 if unknown. */
int cumemcap_device_driver_version(void);

/* A context was destroyed or reset (its handle may be reused), or this is
 * a fork child: every thread's cached contexts and streams are stale. */
void cumemcap_device_forget_contexts(void);

/* The calling thread's current context and its device (ensured). Returns
 * the driver's error when there is none; the caller then lets the driver
 * answer the program's call itself. */
CUresult cumemcap_device_current(CUcontext *ctx, int *dev);

/* cumemcap_device_current, and in *arena the arena this thread cached for
 * that context (the arena layer's struct arena), or NULL once the thread's
 * current context changed or a context died. Meaningful on CUDA_SUCCESS. */
CUresult cumemcap_device_current_arena(CUcontext *ctx, int *dev, void **arena);

/* Cache `arena` as the calling thread's arena for ctx, if ctx is its
 * current context as cumemcap_device_current last saw it. A NULL arena
 * clears the cache whatever ctx is (the arenas emptied in a fork child). */
void cumemcap_device_cache_arena(CUcontext ctx, void *arena);

/* The context and device stream `s` belongs to, asked of the driver and
 * remembered for cumemcap_device_of_stream_known. *ctx and *dev hold the
 * calling thread's current ones on entry and are left alone for the
 * default streams or when the driver cannot say. */
void cumemcap_device_of_stream(CUstream s, CUcontext *ctx, int *dev);

/* True, with *ctx and *dev, when `s` is a stream of the program's that
 * cumemcap_device_of_stream answered last on this thread and the answer
 * still holds: no driver call at all. */
bool cumemcap_device_of_stream_known(CUstream s, CUcontext *ctx, int *dev);
