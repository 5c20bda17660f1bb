/* driver: the only layer that talks to the real CUDA driver.
 *
 * Owns the handle on the real libcuda.so.1 and one real_<symbol> pointer
 * per entry of hooks.def, resolved once on the first hook call, or adopted
 * from the library a program's own dlsym() found, so a process that never
 * uses CUDA never touches the driver.
 *
 * Contract: every real_<symbol> has the driver's exact prototype and
 * returns the driver's CUresult unchanged; out-parameters and units are the
 * driver's (bytes, CUdevice ordinals). A real_ pointer is NULL when the
 * driver is absent or does not export that symbol; callers check
 * cumemcap_driver_ready() (or the pointer) before calling. The hooks call
 * the real_ pointer of the entry point they hook; every other driver call
 * (DRIVER in hooks.def) is one of the verbs below.
 *
 * Thread safety: the pointers are written once, under the load lock,
 * before the driver counts as loaded, and only read afterwards; the verbs
 * keep no state but a pushed context (the calling thread's until popped).
 *
 * The real dlsym/dlvsym are found by reading libc's dynamic symbol table,
 * because the shim's own dlsym is what every call to dlsym in the process
 * reaches, including the shim's. */
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

/* For the code every dlsym call in the process runs through: it may run
 * inside a sanitizer runtime's own start-up (ASan resolves its interceptors
 * with dlsym), before instrumented code or intercepted libc functions can
 * work. Such code is not instrumented and calls no libc function. */
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

/* libc's dlsym / dlvsym. Never NULL after cumemcap_driver_libc_ready(). */
extern cumemcap_dlsym_fn cumemcap_real_dlsym;
extern cumemcap_dlvsym_fn cumemcap_real_dlvsym;
bool cumemcap_driver_libc_ready(void);

/* Make ctx current on this thread for a driver call about it (a wait, a
 * free, a question about that context). Returns whether it was pushed and
 * must be popped with cumemcap_driver_pop_ctx; false when it is current
 * already or cannot be pushed (the driver then answers the call for
 * whatever context is current, and fails it for a foreign pointer). */
bool cumemcap_driver_push_ctx(CUcontext ctx);
void cumemcap_driver_pop_ctx(bool pushed);

/* The verbs (verbs.c) answer "no" when the driver cannot say (pointer
 * NULL, or an error), as documented; none changes the driver's state. */

/* Device `dev`'s current memory pool (cuDeviceGetMemPool, the pool
 * cuMemAllocAsync takes from) or its default one
 * (cuDeviceGetDefaultMemPool); NULL when the driver cannot say. */
CUmemoryPool cumemcap_driver_current_pool(int dev);
CUmemoryPool cumemcap_driver_default_pool(int dev);

/* How many devices the driver sees (cuDeviceGetCount); 0 when it cannot
 * say. */
int cumemcap_driver_device_count(void);

/* What `pool` reserves now (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), or the
 * most it reserved since it was created or the program last reset the
 * watermark (_HIGH), in bytes: true and *bytes when the driver answered. */
bool cumemcap_driver_pool_reserved(CUmemoryPool pool, uint64_t *bytes);
bool cumemcap_driver_pool_high(CUmemoryPool pool, uint64_t *bytes);

/* A figure of GPU `dev`'s graph memory pool, in bytes
 * (cuDeviceGetGraphMemAttribute: RESERVED_MEM_CURRENT, USED_MEM_CURRENT,
 * ...): true and *bytes when the driver answered. */
bool cumemcap_driver_graph_mem(int dev, CUgraphMem_attribute attr, uint64_t *bytes);

/* Whether `dev`'s primary context is active (cuDevicePrimaryCtxGetState);
 * false when the driver cannot say. */
bool cumemcap_driver_primary_active(CUdevice dev);

/* Ask the driver whether `stream` captures (cuStreamIsCapturing, or its
 * per-thread-default-stream variant when ptsz): true and *status when it
 * answered, false (status untouched) when it cannot say. */
bool cumemcap_driver_stream_capturing(CUstream stream, bool ptsz, CUstreamCaptureStatus *status);

/* GPU `dev` as the driver describes it: true with *total
 * (cuDeviceTotalMem_v2), uuid (cuDeviceGetUuid; zeros when it cannot say)
 * and pci (cuDeviceGetPCIBusId; "" when it cannot say); false when the
 * driver cannot give its memory (the shim does not account on it). */
bool cumemcap_driver_describe(int dev, uint64_t *total, unsigned char uuid[16], char *pci, size_t pci_len);

/* cuDriverGetVersion; 0 when the driver cannot say. */
int cumemcap_driver_version(void);

/* The calling thread's current context (cuCtxGetCurrent): the driver's
 * answer, *ctx NULL when there is none. Every accounted call asks it. */
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
 * the driver answered with one. */
bool cumemcap_driver_stream_ctx(CUstream stream, CUcontext *ctx);

/* Context `ctx`'s device, asked with it pushed current for the call (and
 * popped after): true and *dev when the driver answered. */
bool cumemcap_driver_ctx_device(CUcontext ctx, CUdevice *dev);

/* The card's memory as context `ctx` sees it (cuMemGetInfo_v2, asked with
 * ctx current for the call): true with *free and *total when the driver
 * answered for ctx. Device-wide: every process's memory is in it. */
bool cumemcap_driver_card_memory(CUcontext ctx, uint64_t *free, uint64_t *total);

/* The allocation nodes of `graph` and of its child graphs (to a depth of
 * 8): `each` is called with the device and the bytes of every node whose
 * memory lies on a GPU. False when the driver cannot say (then the graph
 * is not known, whatever `each` was told). */
typedef void (*cumemcap_graph_alloc_fn)(void *arg, int dev, uint64_t bytes);
bool cumemcap_driver_graph_allocs(CUgraph graph, cumemcap_graph_alloc_fn each, void *arg);

/* The arenas' segments: a cuMemAlloc_v2 of `bytes` for the shim itself
 * (not the program's: no hook, no charge), the driver's answer. */
static inline CUresult cumemcap_driver_mem_alloc(CUdeviceptr *base, uint64_t bytes)
{
	return real_cuMemAlloc_v2(base, bytes);
}

/* Give a segment back (cuMemFree_v2): the driver's answer. It
 * synchronizes the device, so it is never called while a stream captures
 * (state/capture.h: the quiet section). */
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

/* Load the real driver once ("libcuda.so.1" from the library search path).
 * Returns true when it is loaded and real_cuGetProcAddress_v2 or
 * real_cuGetProcAddress is available. Cheap after the first call. */
bool cumemcap_driver_ready(void);

/* The program's dlsym found `sym` in some library. If the driver is not
 * loaded yet, load it from that same file (so a driver dlopened by full
 * path is the one the shim forwards to). Returns true when `sym` lies in
 * the real driver. */
bool cumemcap_driver_owns(const void *sym);

/* Whether `addr` lies in the shim itself. */
bool cumemcap_driver_self(const void *addr);

/* The shim's own exported function `name`. The hook table's pointers are
 * the symbols as the process binds them, which another library preloaded
 * before the shim may have taken over; this is the shim's own definition,
 * found in its own symbol table. NULL when it exports no such function. */
void *cumemcap_driver_own(const char *name);

/* What dlsym(RTLD_NEXT, name) called from `caller` finds: the first
 * definition of the function `name` in an object loaded after the
 * caller's, in load order (the order ld.so searches preloads and their
 * dependencies). Objects dlopen'ed later are searched too, as if global. */
void *cumemcap_driver_next(const void *caller, const char *name);
