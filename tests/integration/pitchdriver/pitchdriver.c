/* pitchdriver: a libcuda.so.1 over the fake driver (tests/fake) that pads
 * pitched rows far more than the usual 512 bytes, and exports no cuMemFree
 * or cuMemFree_v2. Every other entry point below jumps straight to the
 * fake's, loaded by full path (PITCHDRIVER_FAKE) and kept local, so the
 * shim finds the free calls missing. Use it through the dlsym door only
 * (cuGetProcAddress is the fake's, which knows its own free calls): open
 * it by full path and look up a name in it before any other CUDA call, so
 * the shim takes it for the driver.
 *
 * What it is for (drift.c, case pitch-nofree): the shim reserves the usual
 * padding for a pitched allocation and settles on the pitch the driver
 * chose; when that pitch passes the limit it must undo the allocation with
 * the matching free, and do without one when the driver has none (both
 * twins alike), never call through a NULL pointer.
 *
 * Thread safety: the fake's pointers are written once, at the first
 * cuInit, before any other entry point can be called; the test is one
 * thread. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;

#define API __attribute__((visibility("default")))

/* The fake's entry points that pass through unchanged. */
#define FORWARDED(X)                                                                 \
	X(cuDriverGetVersion) X(cuGetProcAddress) X(cuGetProcAddress_v2)   \
	X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxSetCurrent) X(cuCtxSynchronize)  \
	X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2) X(cuDeviceGet)                  \
	X(cuDeviceGetCount) X(cuDeviceGetUuid) X(cuDeviceGetUuid_v2)                 \
	X(cuDeviceGetPCIBusId) X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2)        \
	X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)                  \
	X(cuDevicePrimaryCtxGetState) X(cuMemGetInfo_v2) X(cuStreamGetCtx)

#define POINTER(name) void *fake_##name __attribute__((visibility("hidden")));
FORWARDED(POINTER)

/* Each forwarded name is a jump through the fake's pointer: the arguments
 * reach the fake untouched whatever the prototype. In .text explicitly:
 * top-level asm lands in whatever section the compiler left current (a
 * data section in the ASan build, where the jump then faulted). */
#define TRAMPOLINE(name)                                                             \
	__asm__(".pushsection .text\n.globl " #name "\n.type " #name ", @function\n" \
		#name ":\n\tjmp *fake_" #name "(%rip)\n.size " #name ", .-" #name   \
		"\n.popsection\n");
FORWARDED(TRAMPOLINE)

API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
				unsigned int ElementSizeBytes);
API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
			     unsigned int Height, unsigned int ElementSizeBytes);

static CUresult (*fake_pitch_v2)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
static CUresult (*fake_pitch)(CUdeviceptr_v1 *, unsigned int *, unsigned int, unsigned int, unsigned int);

/* The fake is looked up at cuInit, not when this library is loaded: the
 * shim sees every dlsym in the process, and adopts as the driver the
 * library the first driver symbol is found in. By cuInit the program has
 * looked up this library's names, so the shim has taken this one. */
static CUresult (*fake_cuInit)(unsigned int);

static void load_fake(void)
{
	const char *path = getenv("PITCHDRIVER_FAKE");
	void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!h) {
		fprintf(stderr, "pitchdriver: cannot load the fake driver (PITCHDRIVER_FAKE=%s): %s\n",
			path ? path : "(unset)", dlerror());
		abort();
	}
#define LOOKUP(name) fake_##name = dlsym(h, #name);
	FORWARDED(LOOKUP)
	*(void **)&fake_cuInit = dlsym(h, "cuInit");
	*(void **)&fake_pitch_v2 = dlsym(h, "cuMemAllocPitch_v2");
	*(void **)&fake_pitch = dlsym(h, "cuMemAllocPitch");
}

API CUresult cuInit(unsigned int flags);
API CUresult cuInit(unsigned int flags)
{
	if (!fake_cuInit)
		load_fake();
	return fake_cuInit(flags);
}

/* Rows four times as wide as asked: the pitch is four times what the shim
 * reserves for. */
API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
				unsigned int ElementSizeBytes)
{
	return fake_pitch_v2(dptr, pPitch, WidthInBytes * 4, Height, ElementSizeBytes);
}

API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
			     unsigned int Height, unsigned int ElementSizeBytes)
{
	return fake_pitch(dptr, pPitch, WidthInBytes * 4, Height, ElementSizeBytes);
}
