/* common: what every integration test program shares.
 *
 * A test program is an ordinary CUDA driver client run under
 * LD_PRELOAD=libcumemcap.so against the fake driver. It reaches the driver
 * through one of the three doors, chosen on its command line:
 *
 *   linked    the program is linked with -lcuda and calls cuMemAlloc_v2 &co
 *             by name (the link-time door),
 *   dlsym     dlopen("libcuda.so.1") + dlsym(handle, "cuMemAlloc_v2"), as
 *             TensorFlow/XLA and cuFFT do,
 *   procaddr  only cuGetProcAddress_v2 is taken from the library; every other
 *             entry point is asked of it by base name and version, as
 *             NVIDIA's libcudart does.
 *
 * Whatever the door, the test asserts on what the program saw and on the
 * fake driver's own record (fakecuda_*), never only on what the shim says.
 * A failed CHECK prints the file, line and expression and exits 1. */
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemcap.h"

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
				#cond);                                               \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

#define CHECK_CU(expected, call)                                                      \
	do {                                                                          \
		CUresult r_ = (call);                                                 \
		if (r_ != (expected)) {                                               \
			fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s)\n",  \
				__FILE__, __LINE__, #call, (int)r_, (int)(expected),  \
				#expected);                                           \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

#define OK(call) CHECK_CU(CUDA_SUCCESS, call)

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

/* The legacy 32-bit ABI (cuda.h declares it only for the driver's own
 * build): what cuGetProcAddress("cuMemAlloc", 2000) hands out. */
typedef unsigned int CUdeviceptr_v1;
typedef CUresult(CUDAAPI *legacy_alloc_fn)(CUdeviceptr_v1 *dptr, unsigned int bytesize);
typedef CUresult(CUDAAPI *legacy_free_fn)(CUdeviceptr_v1 dptr);
/* cuDevicePrimaryCtxRelease and _Reset before CUDA 11 (same prototype as _v2). */
typedef CUresult(CUDAAPI *legacy_primary_fn)(CUdevice dev);
/* cuGraphInstantiate of CUDA 10.0 and 11.0 (cuGraphInstantiate_v2): with an
 * error node and a log buffer. */
typedef CUresult(CUDAAPI *legacy_instantiate_fn)(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
						 char *log, size_t size);

/* The driver entry points the tests use, whichever door filled them. */
struct api {
	PFN_cuInit_v2000 cuInit;
	PFN_cuDeviceGet_v2000 cuDeviceGet;
	PFN_cuDeviceGetCount_v2000 cuDeviceGetCount;
	PFN_cuDeviceTotalMem_v3020 cuDeviceTotalMem;
	PFN_cuDeviceGetUuid_v9020 cuDeviceGetUuid;
	PFN_cuDevicePrimaryCtxRetain_v7000 cuDevicePrimaryCtxRetain;
	PFN_cuDevicePrimaryCtxRelease_v11000 cuDevicePrimaryCtxRelease;
	legacy_primary_fn cuDevicePrimaryCtxRelease_legacy; /* NULL when linked */
	PFN_cuDevicePrimaryCtxReset_v11000 cuDevicePrimaryCtxReset;
	legacy_primary_fn cuDevicePrimaryCtxReset_legacy; /* NULL when linked */
	PFN_cuDevicePrimaryCtxGetState_v7000 cuDevicePrimaryCtxGetState;
	PFN_cuStreamBeginCapture_v10010 cuStreamBeginCapture;
	PFN_cuStreamEndCapture_v10000 cuStreamEndCapture;
	PFN_cuThreadExchangeStreamCaptureMode_v10010 cuThreadExchangeStreamCaptureMode;
	PFN_cuGraphDestroy_v10000 cuGraphDestroy;
	PFN_cuGraphCreate_v10000 cuGraphCreate;
	PFN_cuGraphAddMemAllocNode_v11040 cuGraphAddMemAllocNode;
	PFN_cuGraphAddMemFreeNode_v11040 cuGraphAddMemFreeNode;
	PFN_cuGraphAddNode_v12030 cuGraphAddNode;
	legacy_instantiate_fn cuGraphInstantiate_legacy; /* NULL when linked */
	PFN_cuGraphInstantiateWithFlags_v11040 cuGraphInstantiateWithFlags;
	PFN_cuGraphInstantiateWithParams_v12000 cuGraphInstantiateWithParams;
	PFN_cuGraphUpload_v11010 cuGraphUpload;
	PFN_cuGraphLaunch_v10000 cuGraphLaunch;
	PFN_cuGraphExecDestroy_v10000 cuGraphExecDestroy;
	PFN_cuDeviceGraphMemTrim_v11040 cuDeviceGraphMemTrim;
	PFN_cuDeviceGetGraphMemAttribute_v11040 cuDeviceGetGraphMemAttribute;
	PFN_cuCtxPushCurrent_v4000 cuCtxPushCurrent;
	PFN_cuCtxPopCurrent_v4000 cuCtxPopCurrent;
	PFN_cuCtxSetCurrent_v4000 cuCtxSetCurrent;
	PFN_cuCtxCreate_v3020 cuCtxCreate;
	PFN_cuCtxDestroy_v4000 cuCtxDestroy;
	PFN_cuCtxSynchronize_v2000 cuCtxSynchronize;
	PFN_cuMemGetInfo_v3020 cuMemGetInfo;
	PFN_cuMemAlloc_v3020 cuMemAlloc;
	legacy_alloc_fn cuMemAlloc_legacy;
	legacy_free_fn cuMemFree_legacy;
	PFN_cuMemAllocPitch_v3020 cuMemAllocPitch;
	PFN_cuMemAllocManaged_v6000 cuMemAllocManaged;
	PFN_cuMemFree_v3020 cuMemFree;
	PFN_cuMemsetD8_v3020 cuMemsetD8;
	PFN_cuMemcpyHtoD_v3020 cuMemcpyHtoD;
	PFN_cuMemcpyDtoH_v3020 cuMemcpyDtoH;
	PFN_cuStreamCreate_v2000 cuStreamCreate;
	PFN_cuStreamSynchronize_v2000 cuStreamSynchronize;
	PFN_cuStreamDestroy_v4000 cuStreamDestroy;
	PFN_cuMemAllocAsync_v11020 cuMemAllocAsync;
	PFN_cuMemFreeAsync_v11020 cuMemFreeAsync;
	PFN_cuMemAllocAsync_v11020_ptsz cuMemAllocAsync_ptsz;
	PFN_cuMemFreeAsync_v11020_ptsz cuMemFreeAsync_ptsz;
	PFN_cuMemAllocFromPoolAsync_v11020 cuMemAllocFromPoolAsync;
	PFN_cuMemPoolCreate_v11020 cuMemPoolCreate;
	PFN_cuMemPoolDestroy_v11020 cuMemPoolDestroy;
	PFN_cuMemPoolTrimTo_v11020 cuMemPoolTrimTo;
	PFN_cuMemPoolGetAttribute_v11020 cuMemPoolGetAttribute;
	PFN_cuDeviceGetDefaultMemPool_v11020 cuDeviceGetDefaultMemPool;
	PFN_cuDeviceSetMemPool_v11020 cuDeviceSetMemPool;
	PFN_cuMemSetMemPool_v13000 cuMemSetMemPool;
	PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity;
	PFN_cuMemCreate_v10020 cuMemCreate;
	PFN_cuMemRelease_v10020 cuMemRelease;
	PFN_cuMemAddressReserve_v10020 cuMemAddressReserve;
	PFN_cuMemAddressFree_v10020 cuMemAddressFree;
	PFN_cuMemMap_v10020 cuMemMap;
	PFN_cuMemUnmap_v10020 cuMemUnmap;
	PFN_cuMemSetAccess_v10020 cuMemSetAccess;
	PFN_cuMemRetainAllocationHandle_v11000 cuMemRetainAllocationHandle;
	PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle;
	PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle;
	PFN_cuArrayCreate_v3020 cuArrayCreate;
	PFN_cuArray3DCreate_v3020 cuArray3DCreate;
	PFN_cuArrayDestroy_v2000 cuArrayDestroy;
	PFN_cuGetProcAddress_v12000 cuGetProcAddress;
	PFN_cuMemsetD32Async_v3020 cuMemsetD32Async;
	PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange;
	PFN_cuPointerGetAttribute_v4000 cuPointerGetAttribute;
	PFN_cuPointerGetAttributes_v7000 cuPointerGetAttributes;
	PFN_cuIpcGetMemHandle_v4010 cuIpcGetMemHandle;
	PFN_cuIpcOpenMemHandle_v11000 cuIpcOpenMemHandle;
	PFN_cuIpcCloseMemHandle_v4010 cuIpcCloseMemHandle;
};

/* The fake driver's record (tests/fake/fakecuda.h), looked up in the
 * library the program opened. */
struct fake {
	uint64_t (*reserved)(int dev);
	uint64_t (*peak_reserved)(int dev);
	uint64_t (*live_allocations)(int dev);
	uint64_t (*calls)(const char *name);
	uint64_t (*thread_calls)(const char *name); /* the calling thread's only */
	uint64_t (*device_syncs)(void);
};

/* Which door this run uses ("linked", "dlsym", "procaddr"). */
extern const char *door;

/* Fill *a through the door named in argv[1] and *f from the fake driver.
 * Exits with a message on an unknown door or a missing entry point. */
void load_api(int argc, char **argv, struct api *a, struct fake *f);

/* The shim's own function for an exported name (via its library handle),
 * to check that a door handed out the hook and not the driver's function. */
void *shim_symbol(const char *name);

/* The shim's figures for a device; exits if the shim is not loaded. */
struct cumemcap_stats shim_stats(int dev);

/* cuInit, retain device `dev`'s primary context and make it current. */
CUcontext use_primary(const struct api *a, int dev);

/* A non-blocking stream of the current context that this thread has used
 * for one stream-ordered pair (so the shim knows it without the driver),
 * synchronized, the default pool trimmed back and, under a limit, read
 * again by the shim (cuMemGetInfo): its figures match the driver's. */
CUstream used_stream(const struct api *a);
