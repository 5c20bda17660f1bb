/* olddriver: a libcuda.so.1 of the CUDA 11.3 kind, as far as the shim can
 * tell: the entry points a driver of that age exports for the calls below,
 * and none of the newer ones the shim also resolves (graph memory, capture
 * to a graph, cuGetProcAddress_v2, ...). Nothing allocates; the program
 * only looks names up. */
#include <stddef.h>
#include <string.h>

typedef int CUresult;
typedef void *CUcontext;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

#define API __attribute__((visibility("default")))

API CUresult cuInit(unsigned int flags);
API CUresult cuDriverGetVersion(int *version);
API CUresult cuCtxGetCurrent(CUcontext *ctx);
API CUresult cuCtxGetDevice(CUdevice *dev);
API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes);
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags);

API CUresult cuInit(unsigned int flags)
{
	return flags ? 1 : 0;
}

API CUresult cuDriverGetVersion(int *version)
{
	if (!version)
		return 1;
	*version = 11030;
	return 0;
}

API CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	if (!ctx)
		return 1;
	*ctx = NULL;
	return 0;
}

API CUresult cuCtxGetDevice(CUdevice *dev)
{
	(void)dev;
	return 201; /* CUDA_ERROR_INVALID_CONTEXT: none is current */
}

API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
	(void)dptr;
	(void)bytes;
	return 201;
}

/* The CUDA 11.3 door: four arguments; finds only the names above. */
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, unsigned long long flags)
{
	(void)version;
	(void)flags;
	if (!symbol || !pfn)
		return 1;
	*pfn = !strcmp(symbol, "cuInit")	       ? (void *)cuInit
	       : !strcmp(symbol, "cuDriverGetVersion") ? (void *)cuDriverGetVersion
	       : !strcmp(symbol, "cuCtxGetCurrent")    ? (void *)cuCtxGetCurrent
	       : !strcmp(symbol, "cuCtxGetDevice")     ? (void *)cuCtxGetDevice
	       : !strcmp(symbol, "cuMemAlloc")	       ? (void *)cuMemAlloc_v2
						       : NULL;
	return *pfn ? 0 : 500; /* CUDA_ERROR_NOT_FOUND */
}
