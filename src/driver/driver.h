/* driver: the only layer that talks to the real CUDA driver.
 *
 * Owns the handle on the real libcuda.so.1 and one real_<symbol> pointer
 * per entry of hooks.def, resolved on the first hook call (or adopted from
 * the library a program's own dlsym() found): a process that never uses
 * CUDA never touches the driver.
 *
 * Contract: every real_<symbol> has the driver's exact prototype and
 * returns the driver's CUresult unchanged; out-parameters and units are
 * the driver's (bytes, CUdevice ordinals). A real_ pointer is NULL when
 * the driver is absent or lacks that symbol. The hooks call the real_
 * pointer of the entry point they hook; every other driver call (DRIVER in
 * hooks.def) is one of the verbs below.
 *
 * Thread safety: the pointers are written once, under the load lock,
 * before the driver counts as loaded, then only read; the verbs keep no
 * state but a pushed context (the calling thread's until popped). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "platform/cuda-api.h"

#define HOOK(symbol, base, version, variant) \
	typedef CUMEMCAP_PFN_##variant(base, version) symbol##_fn; \
	extern symbol##_fn real_##symbol;
#define DRIVER(symbol, pfn) \
	typedef pfn symbol##_fn; \
	extern symbol##_fn real_##symbol;
#define CUMEMCAP_PFN_LEGACY(base, version) PFN_##base##_v##version
#define CUMEMCAP_PFN_PTSZ(base, version) PFN_##base##_v##version##_ptsz
#define CUMEMCAP_PFN_PTDS(base, version) PFN_##base##_v##version##_ptds
#include "driver/hooks.def"

/* For the code every dlsym call in the process runs through, which may run
 * inside a sanitizer runtime's start-up (ASan resolves its interceptors
 * with dlsym): not instrumented, and it calls no libc function. */
#define CUMEMCAP_DLSYM_SAFE __attribute__((no_sanitize("address", "undefined", "thread")))

/* strcmp(a, b) == 0, without calling libc. */
CUMEMCAP_DLSYM_SAFE static inline bool cumemcap_str_eq(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

typedef void *(*cumemcap_dlsym_fn)(void *handle, const char *name);
typedef void *(*cumemcap_dlvsym_fn)(void *handle, const char *name, const char *version);

/* libc's dlsym / dlvsym, found by reading libc's dynamic symbol table (the
 * process's dlsym is the shim's). Set when cumemcap_driver_libc_ready(). */
extern cumemcap_dlsym_fn cumemcap_real_dlsym;
extern cumemcap_dlvsym_fn cumemcap_real_dlvsym;
bool cumemcap_driver_libc_ready(void);

/* Make ctx current on this thread for a driver call about it. Returns
 * whether it was pushed and must be popped with cumemcap_driver_pop_ctx;
 * false when it is current already or cannot be pushed (the call then
 * goes to whatever context is current). */
bool cumemcap_driver_push_ctx(CUcontext ctx);
void cumemcap_driver_pop_ctx(bool pushed);

/* The verbs (verbs.c) answer as below when the driver cannot say (no
 * entry point, or an error); none changes the driver's state. */

/* Device `dev`'s current memory pool (cuDeviceGetMemPool, the one
 * cuMemAllocAsync takes from) or its default one; NULL when unknown. */
CUmemoryPool cumemcap_driver_current_pool(int dev);
CUmemoryPool cumemcap_driver_default_pool(int dev);

/* How many devices the driver sees (cuDeviceGetCount); 0 when unknown. */
int cumemcap_driver_device_count(void);

/* What `pool` reserves now (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), or the
 * most since it was made or its watermark reset (_HIGH), in bytes: true
 * and *bytes when the driver answered. */
bool cumemcap_driver_pool_reserved(CUmemoryPool pool, uint64_t *bytes);
bool cumemcap_driver_pool_high(CUmemoryPool pool, uint64_t *bytes);

/* A figure of GPU `dev`'s graph memory pool in bytes
 * (cuDeviceGetGraphMemAttribute): true and *bytes when the driver answered. */
bool cumemcap_driver_graph_mem(int dev, CUgraphMem_attribute attr, uint64_t *bytes);

/* Whether `dev`'s primary context is active (cuDevicePrimaryCtxGetState);
 * false when unknown. */
bool cumemcap_driver_primary_active(CUdevice dev);

/* Whether `stream` captures (cuStreamIsCapturing, its _ptsz variant when
 * ptsz): true and *status when the driver answered. */
bool cumemcap_driver_stream_capturing(CUstream stream, bool ptsz, CUstreamCaptureStatus *status);

/* GPU `dev` as the driver describes it: true with *total
 * (cuDeviceTotalMem_v2), uuid (cuDeviceGetUuid; zeros when unknown) and
 * pci (cuDeviceGetPCIBusId; "" when unknown); false without its memory. */
bool cumemcap_driver_describe(int dev, uint64_t *total, unsigned char uuid[16], char *pci, size_t pci_len);

/* cuDriverGetVersion; 0 when unknown. */
int cumemcap_driver_version(void);

/* The calling thread's current context (cuCtxGetCurrent); *ctx NULL when
 * there is none. */
static inline CUresult cumemcap_driver_current_ctx(CUcontext *ctx)
{
	return real_cuCtxGetCurrent(ctx);
}

/* The current context's device (cuCtxGetDevice): the driver's answer. */
static inline CUresult cumemcap_driver_current_device(CUdevice *dev)
{
	return real_cuCtxGetDevice(dev);
}

/* The context `stream` belongs to (cuStreamGetCtx): true and *ctx when
 * the driver named one; *ctx untouched otherwise. */
bool cumemcap_driver_stream_ctx(CUstream stream, CUcontext *ctx);

/* Context `ctx`'s device, asked with it pushed for the call: true and
 * *dev when the driver answered. */
bool cumemcap_driver_ctx_device(CUcontext ctx, CUdevice *dev);

/* The card's memory as context `ctx` sees it (cuMemGetInfo_v2, ctx
 * current for the call; every process's memory is in it): true with
 * *free and *total when the driver answered for ctx. */
bool cumemcap_driver_card_memory(CUcontext ctx, uint64_t *free, uint64_t *total);

/* Calls `each` with the device and bytes of every allocation node of
 * `graph` and its child graphs (to a depth of 8) whose memory lies on a
 * GPU. False when the driver cannot say: the graph is then not known,
 * whatever `each` was told. */
typedef void (*cumemcap_graph_alloc_fn)(void *arg, int dev, uint64_t bytes);
bool cumemcap_driver_graph_allocs(CUgraph graph, cumemcap_graph_alloc_fn each, void *arg);

/* An arena's segment: a cuMemAlloc_v2 for the shim itself (no hook, no
 * charge). */
static inline CUresult cumemcap_driver_mem_alloc(CUdeviceptr *base, uint64_t bytes)
{
	return real_cuMemAlloc_v2(base, bytes);
}

/* Give a segment back (cuMemFree_v2). It synchronizes the device, so it
 * is never called while a stream captures (state/capture.h). */
static inline CUresult cumemcap_driver_mem_free(CUdeviceptr base)
{
	return real_cuMemFree_v2(base);
}

/* Wait for the current context's work (cuCtxSynchronize); NOT_SUPPORTED
 * when the driver lacks it. */
static inline CUresult cumemcap_driver_ctx_synchronize(void)
{
	return real_cuCtxSynchronize ? real_cuCtxSynchronize() : CUDA_ERROR_NOT_SUPPORTED;
}

/* Load the real driver ("libcuda.so.1" from the library search path)
 * once: true when it is loaded with a cuGetProcAddress (or _v2). */
bool cumemcap_driver_ready(void);

/* Whether `sym`, which the program's dlsym found, lies in the real driver.
 * Not loaded yet, the driver is adopted from that same file (so a driver
 * dlopened by full path is the one the shim forwards to). */
bool cumemcap_driver_owns(const void *sym);

/* Whether `addr` lies in the shim itself. */
bool cumemcap_driver_self(const void *addr);

/* The shim's own exported function `name`, from its own symbol table (the
 * process may bind the name to a library preloaded before the shim); NULL
 * when it exports none. */
void *cumemcap_driver_own(const char *name);

/* What dlsym(RTLD_NEXT, name) called from `caller` finds: the first
 * definition of function `name` in an object loaded after the caller's,
 * in load order (objects dlopen'ed later too, as if global). */
void *cumemcap_driver_next(const void *caller, const char *name);
