/* driver: the only layer that talks to the real CUDA driver.
 *
 * Owns libcuda.so.1 (loaded at the first hook call, or adopted from a
 * program's own dlsym()) and a real_<symbol> pointer per entry of
 * hooks.def, of the driver's prototype, NULL when it lacks the symbol.
 * Units are the driver's (bytes, CUdevice ordinals). A hook calls the
 * real_ pointer of its own entry point; any other call is a verb below.
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

/* Code every dlsym call runs through, a sanitizer's start-up too: not
 * instrumented, calling no libc function. */
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

/* libc's dlsym and dlvsym, read from its symbol table: set when cumemcap_driver_libc_ready(). */
extern cumemcap_dlsym_fn cumemcap_real_dlsym;
extern cumemcap_dlvsym_fn cumemcap_real_dlvsym;
bool cumemcap_driver_libc_ready(void);

/* Make ctx current on this thread. True when it was pushed and must be
 * popped; false when it is current already or cannot be pushed. */
bool cumemcap_driver_push_ctx(CUcontext ctx);
void cumemcap_driver_pop_ctx(bool pushed);

/* The verbs (verbs.c) answer as below when the driver cannot say (no
 * entry point, or an error), their out-parameters then unspecified unless
 * said; none changes the driver's state. */

/* Device `dev`'s current (`current`) or default memory pool; NULL when unknown. */
CUmemoryPool cumemcap_driver_pool(int dev, bool current);

/* How many devices the driver sees (cuDeviceGetCount); 0 when unknown. */
int cumemcap_driver_device_count(void);

/* A figure in bytes of `pool` or of GPU `dev`'s graph memory pool: true
 * and *bytes when the driver answered. */
bool cumemcap_driver_pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, uint64_t *bytes);
bool cumemcap_driver_graph_mem(int dev, CUgraphMem_attribute attr, uint64_t *bytes);

/* Whether `dev`'s primary context is active; false when unknown. */
bool cumemcap_driver_primary_active(CUdevice dev);

/* cuStreamIsCapturing (_ptsz when ptsz): true and *status when answered. */
bool cumemcap_driver_stream_capturing(CUstream stream, bool ptsz, CUstreamCaptureStatus *status);

/* GPU `dev`: true with *total (cuDeviceTotalMem_v2), uuid (zeros when
 * unknown) and pci bus id ("" when unknown); false without its memory. */
bool cumemcap_driver_describe(int dev, uint64_t *total, unsigned char uuid[16], char *pci, size_t pci_len);

/* cuDriverGetVersion; 0 when unknown. */
int cumemcap_driver_version(void);

/* cuCtxGetCurrent: *ctx NULL when there is none. */
static inline CUresult cumemcap_driver_current_ctx(CUcontext *ctx)
{
	return real_cuCtxGetCurrent(ctx);
}

/* cuCtxGetDevice. */
static inline CUresult cumemcap_driver_current_device(CUdevice *dev)
{
	return real_cuCtxGetDevice(dev);
}

/* cuStreamGetCtx: true and *ctx when it names one, else *ctx untouched. */
bool cumemcap_driver_stream_ctx(CUstream stream, CUcontext *ctx);

/* `ctx`'s device, asked with ctx pushed (false when it is current). */
bool cumemcap_driver_ctx_device(CUcontext ctx, CUdevice *dev);

/* The card's memory, every process's (cuMemGetInfo_v2 with ctx current):
 * true with *free and *total when the driver answered for ctx. */
bool cumemcap_driver_card_memory(CUcontext ctx, uint64_t *free, uint64_t *total);

/* Calls `each` with the device and bytes of every allocation node on a
 * GPU of `graph` and its child graphs (to a depth of 8). False when the
 * driver cannot say: the graph is not known, whatever `each` was told. */
typedef void (*cumemcap_graph_alloc_fn)(void *arg, int dev, uint64_t bytes);
bool cumemcap_driver_graph_allocs(CUgraph graph, cumemcap_graph_alloc_fn each, void *arg);

/* An arena's segment: cuMemAlloc_v2, no hook, no charge. */
static inline CUresult cumemcap_driver_mem_alloc(CUdeviceptr *base, uint64_t bytes)
{
	return real_cuMemAlloc_v2(base, bytes);
}

/* cuMemFree_v2: synchronizes the device, so never while a stream captures. */
static inline CUresult cumemcap_driver_mem_free(CUdeviceptr base)
{
	return real_cuMemFree_v2(base);
}

/* cuCtxSynchronize and the fences' calls: CUDA_ERROR_NOT_SUPPORTED when the
 * driver lacks the entry point. */
static inline CUresult cumemcap_driver_ctx_synchronize(void)
{
	return real_cuCtxSynchronize ? real_cuCtxSynchronize() : CUDA_ERROR_NOT_SUPPORTED;
}

/* A reusable event of the current context, without timing. */
static inline CUresult cumemcap_driver_event_create(CUevent *ev)
{
	return real_cuEventCreate ? real_cuEventCreate(ev, CU_EVENT_DISABLE_TIMING) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Never on a capturing stream: it would become a node of the graph. */
static inline CUresult cumemcap_driver_event_record(CUevent ev, CUstream stream)
{
	return real_cuEventRecord ? real_cuEventRecord(ev, stream) : CUDA_ERROR_NOT_SUPPORTED;
}

/* CUDA_SUCCESS when ev's work is done, else CUDA_ERROR_NOT_READY, at once. */
static inline CUresult cumemcap_driver_event_query(CUevent ev)
{
	return real_cuEventQuery ? real_cuEventQuery(ev) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Likewise for all work queued on `stream`. */
static inline CUresult cumemcap_driver_stream_query(CUstream stream)
{
	return real_cuStreamQuery ? real_cuStreamQuery(stream) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Wait for ev's work. */
static inline CUresult cumemcap_driver_event_synchronize(CUevent ev)
{
	return real_cuEventSynchronize ? real_cuEventSynchronize(ev) : CUDA_ERROR_NOT_SUPPORTED;
}

/* Load libcuda.so.1 once: true when it is loaded with a cuGetProcAddress. */
bool cumemcap_driver_ready(void);

/* Whether `sym`, which the program's dlsym found, lies in the real driver.
 * Not loaded yet, the driver is adopted from that file, whatever its path. */
bool cumemcap_driver_owns(const void *sym);

/* Whether `addr` lies in the shim itself. */
bool cumemcap_driver_self(const void *addr);

/* The shim's own export `name` (the process may bind it to an earlier
 * preload); NULL when none. */
void *cumemcap_driver_own(const char *name);

/* What dlsym(RTLD_NEXT, name) from `caller` finds: the first function
 * `name` in an object loaded after the caller's (dlopen'ed ones too). */
void *cumemcap_driver_next(const void *caller, const char *name);
