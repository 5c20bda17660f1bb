/* device: what the shim knows about each GPU the process uses.
 *
 * Owns, per CUdevice ordinal, the facts the rules need and the resolved
 * limit, filled in once when a hook first touches the device (double-checked
 * under a mutex, then read without locks); finds the device of the current
 * context and of a stream through per-thread caches. */
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

/* Who is told, once per GPU and outside the lock, that it became known. */
void cumemcap_device_listen(void (*known)(int dev));

/* Make sure device `dev` is known; false if the driver cannot describe it. */
bool cumemcap_device_ensure(int dev);

/* 0 when the driver reports exactly one GPU and it is known (every context
 * is on it: no cuCtxGetCurrent needed), else -1; a 0 never changes. */
int cumemcap_device_only(void);

/* The facts about an ensured device, or NULL. */
const struct cumemcap_device_info *cumemcap_device_info(int dev);

/* Every GPU the driver reported when the first one was used, described;
 * returns how many (0 before). Never changes; calls no driver. */
int cumemcap_device_all(const struct cumemcap_device_info **out);

/* cuDriverGetVersion, asked when the first GPU was used; 0 if unknown. */
int cumemcap_device_driver_version(void);

/* A context died (its handle may be reused), or this is a fork child:
 * every thread's cached contexts and streams are stale. */
void cumemcap_device_forget_contexts(void);

/* The calling thread's current context and its device (ensured), or the
 * driver's error: the caller then lets the driver answer the program. */
CUresult cumemcap_device_current(CUcontext *ctx, int *dev);

/* cumemcap_device_current, and in *arena this thread's cached arena for the
 * context, or NULL once its context changed or a context died. */
CUresult cumemcap_device_current_arena(CUcontext *ctx, int *dev, void **arena);

/* Cache `arena` as this thread's arena for ctx, if ctx is the context
 * cumemcap_device_current last saw; a NULL arena clears it whatever ctx. */
void cumemcap_device_cache_arena(CUcontext ctx, void *arena);

/* The context and device of stream `s`, asked of the driver and remembered.
 * *ctx and *dev hold the current ones on entry, left alone for the default
 * streams or when the driver cannot say. */
void cumemcap_device_of_stream(CUstream s, CUcontext *ctx, int *dev);

/* True, with *ctx and *dev, when cumemcap_device_of_stream last answered
 * for `s` on this thread and the answer still holds: no driver call. */
bool cumemcap_device_of_stream_known(CUstream s, CUcontext *ctx, int *dev);
