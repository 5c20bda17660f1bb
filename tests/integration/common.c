/* common: the three doors into the driver for test programs (common.h).
 * Built twice: with DOOR_LINKED for programs linked with -lcuda, and
 * without for programs that must not be. */
#include "common.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

const char *door = "?";

/* ---- a crash says where ----------------------------------------------------------
 * A test program killed by a signal leaves meson only "killed by signal
 * 11", and a CI page no core file. Outside the sanitizer builds (whose
 * runtimes report better) load_api installs this handler first, before the
 * program's first driver call arms the shim's own, which then calls it (the
 * shim calls a handler the program had): it writes the signal, the faulting
 * address and the stack (an address in a library as "lib.so(+0xOFFSET)",
 * for addr2line -e lib.so OFFSET on a build of the same commit) to stderr,
 * and the process then dies of the signal as it would have. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CRASH_REPORT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CRASH_REPORT 0
#endif
#endif
#ifndef CRASH_REPORT
#define CRASH_REPORT 1
#endif

#if CRASH_REPORT
static void put(const char *s)
{
	ssize_t r = write(STDERR_FILENO, s, strlen(s));
	(void)r;
}

static void put_hex(uintptr_t v)
{
	char buf[2 + 16 + 1];
	char *p = buf + sizeof(buf) - 1;
	*p = 0;
	do {
		*--p = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	*--p = 'x';
	*--p = '0';
	put(p);
}

static void on_crash(int sig, siginfo_t *info, void *uc)
{
	(void)uc;
	static const char *const names[] = { [SIGSEGV] = "SIGSEGV", [SIGBUS] = "SIGBUS",
					     [SIGFPE] = "SIGFPE", [SIGILL] = "SIGILL",
					     [SIGABRT] = "SIGABRT" };
	put("\n*** test program: ");
	put(sig < (int)(sizeof(names) / sizeof(names[0])) && names[sig] ? names[sig] : "signal");
	put(" at address ");
	put_hex((uintptr_t)info->si_addr);
	put(", door ");
	put(door);
	put("; stack:\n");
	void *frames[64];
	int n = backtrace(frames, 64);
	backtrace_symbols_fd(frames, n, STDERR_FILENO);
	/* Dies of it: a signal sent (raise, abort) is blocked until this
	 * returns; a fault recurs when the instruction runs again. */
	signal(sig, SIG_DFL);
	if (info->si_code <= 0)
		raise(sig);
}

static void crash_report_install(void)
{
	void *warm[1];
	backtrace(warm, 1); /* loads libgcc's unwinder now, not in the handler */
	static char stack[64 * 1024];
	stack_t ss = { .ss_sp = stack, .ss_size = sizeof(stack) };
	sigaltstack(&ss, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_crash;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	const int sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}
#else
static void crash_report_install(void)
{
}
#endif

#ifdef DOOR_LINKED
/* Not declared by cuda.h without CUDA_API_PER_THREAD_DEFAULT_STREAM. */
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

static void load_linked(struct api *a)
{
	a->cuInit = cuInit;
	a->cuDeviceGet = cuDeviceGet;
	a->cuDeviceGetCount = cuDeviceGetCount;
	a->cuDeviceTotalMem = cuDeviceTotalMem;
	a->cuDeviceGetUuid = cuDeviceGetUuid;
	a->cuDevicePrimaryCtxRetain = cuDevicePrimaryCtxRetain;
	a->cuDevicePrimaryCtxRelease = cuDevicePrimaryCtxRelease;
	a->cuDevicePrimaryCtxRelease_legacy = NULL; /* cuda.h maps the name to _v2 */
	a->cuDevicePrimaryCtxReset = cuDevicePrimaryCtxReset;
	a->cuDevicePrimaryCtxReset_legacy = NULL;
	a->cuDevicePrimaryCtxGetState = cuDevicePrimaryCtxGetState;
	a->cuStreamBeginCapture = cuStreamBeginCapture;
	a->cuStreamEndCapture = cuStreamEndCapture;
	a->cuThreadExchangeStreamCaptureMode = cuThreadExchangeStreamCaptureMode;
	a->cuGraphDestroy = cuGraphDestroy;
	a->cuGraphCreate = cuGraphCreate;
	a->cuGraphAddMemAllocNode = cuGraphAddMemAllocNode;
	a->cuGraphAddMemFreeNode = cuGraphAddMemFreeNode;
	a->cuGraphAddNode = cuGraphAddNode;
	a->cuGraphInstantiate_legacy = NULL; /* cuda.h maps the name to WithFlags */
	a->cuGraphInstantiateWithFlags = cuGraphInstantiateWithFlags;
	a->cuGraphInstantiateWithParams = cuGraphInstantiateWithParams;
	a->cuGraphUpload = cuGraphUpload;
	a->cuGraphLaunch = cuGraphLaunch;
	a->cuGraphExecDestroy = cuGraphExecDestroy;
	a->cuDeviceGraphMemTrim = cuDeviceGraphMemTrim;
	a->cuDeviceGetGraphMemAttribute = cuDeviceGetGraphMemAttribute;
	a->cuCtxPushCurrent = cuCtxPushCurrent;
	a->cuCtxPopCurrent = cuCtxPopCurrent;
	a->cuCtxSetCurrent = cuCtxSetCurrent;
	a->cuCtxCreate = NULL; /* cuda.h maps cuCtxCreate to the CUDA 13 form */
	a->cuCtxDestroy = cuCtxDestroy;
	a->cuCtxSynchronize = cuCtxSynchronize;
	a->cuMemGetInfo = cuMemGetInfo;
	a->cuMemAlloc = cuMemAlloc;
	a->cuMemAlloc_legacy = NULL; /* cuda.h offers no name for it */
	a->cuMemFree_legacy = NULL;
	a->cuMemAllocPitch = cuMemAllocPitch;
	a->cuMemAllocManaged = cuMemAllocManaged;
	a->cuMemFree = cuMemFree;
	a->cuMemsetD8 = cuMemsetD8;
	a->cuMemcpyHtoD = cuMemcpyHtoD;
	a->cuMemcpyDtoH = cuMemcpyDtoH;
	a->cuStreamCreate = cuStreamCreate;
	a->cuStreamSynchronize = cuStreamSynchronize;
	a->cuStreamDestroy = cuStreamDestroy;
	a->cuMemAllocAsync = cuMemAllocAsync;
	a->cuMemFreeAsync = cuMemFreeAsync;
	a->cuMemAllocAsync_ptsz = cuMemAllocAsync_ptsz;
	a->cuMemFreeAsync_ptsz = cuMemFreeAsync_ptsz;
	a->cuMemAllocFromPoolAsync = cuMemAllocFromPoolAsync;
	a->cuMemPoolCreate = cuMemPoolCreate;
	a->cuMemPoolDestroy = cuMemPoolDestroy;
	a->cuMemPoolTrimTo = cuMemPoolTrimTo;
	a->cuMemPoolGetAttribute = cuMemPoolGetAttribute;
	a->cuDeviceGetDefaultMemPool = cuDeviceGetDefaultMemPool;
	a->cuDeviceSetMemPool = cuDeviceSetMemPool;
	a->cuMemSetMemPool = cuMemSetMemPool;
	a->cuMemGetAllocationGranularity = cuMemGetAllocationGranularity;
	a->cuMemCreate = cuMemCreate;
	a->cuMemRelease = cuMemRelease;
	a->cuMemAddressReserve = cuMemAddressReserve;
	a->cuMemAddressFree = cuMemAddressFree;
	a->cuMemMap = cuMemMap;
	a->cuMemUnmap = cuMemUnmap;
	a->cuMemSetAccess = cuMemSetAccess;
	a->cuMemRetainAllocationHandle = cuMemRetainAllocationHandle;
	a->cuMemExportToShareableHandle = cuMemExportToShareableHandle;
	a->cuMemImportFromShareableHandle = cuMemImportFromShareableHandle;
	a->cuArrayCreate = cuArrayCreate;
	a->cuArray3DCreate = cuArray3DCreate;
	a->cuArrayDestroy = cuArrayDestroy;
	a->cuGetProcAddress = cuGetProcAddress;
	a->cuMemsetD32Async = cuMemsetD32Async;
	a->cuMemGetAddressRange = cuMemGetAddressRange;
	a->cuPointerGetAttribute = cuPointerGetAttribute;
	a->cuPointerGetAttributes = cuPointerGetAttributes;
	a->cuIpcGetMemHandle = cuIpcGetMemHandle;
	a->cuIpcOpenMemHandle = cuIpcOpenMemHandle;
	a->cuIpcCloseMemHandle = cuIpcCloseMemHandle;
}
#endif

static void *must_dlsym(void *h, const char *name)
{
	void *p = dlsym(h, name);
	if (!p) {
		fprintf(stderr, "dlsym(libcuda.so.1, %s) failed: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

/* (field, exported name, base name, version, flags) for the two run-time
 * doors; API_SAME for an entry point whose three names are one. */
#define API_SAME(X, name, version) X(name, #name, #name, version, 0)
#define API_ENTRIES(X)                                                                \
	API_SAME(X, cuInit, 2000)                                                     \
	API_SAME(X, cuDeviceGet, 2000)                                                \
	API_SAME(X, cuDeviceGetCount, 2000)                                           \
	X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", "cuDeviceTotalMem", 3020, 0)       \
	API_SAME(X, cuDeviceGetUuid, 9020)                                            \
	API_SAME(X, cuDevicePrimaryCtxRetain, 7000)                                   \
	X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", 11000, 0) \
	X(cuDevicePrimaryCtxRelease_legacy, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", 7000, 0) \
	X(cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset", 11000, 0) \
	X(cuDevicePrimaryCtxReset_legacy, "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset", 7000, 0) \
	API_SAME(X, cuDevicePrimaryCtxGetState, 7000)                                 \
	X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", "cuStreamBeginCapture", 10010, 0) \
	API_SAME(X, cuStreamEndCapture, 10000)                                        \
	API_SAME(X, cuThreadExchangeStreamCaptureMode, 10010)                         \
	API_SAME(X, cuGraphDestroy, 10000)                                            \
	API_SAME(X, cuGraphCreate, 10000)                                             \
	API_SAME(X, cuGraphAddMemAllocNode, 11040)                                    \
	API_SAME(X, cuGraphAddMemFreeNode, 11040)                                     \
	X(cuGraphAddNode, "cuGraphAddNode_v2", "cuGraphAddNode", 12030, 0)            \
	X(cuGraphInstantiate_legacy, "cuGraphInstantiate_v2", "cuGraphInstantiate", 11000, 0) \
	API_SAME(X, cuGraphInstantiateWithFlags, 11040)                               \
	API_SAME(X, cuGraphInstantiateWithParams, 12000)                              \
	API_SAME(X, cuGraphUpload, 11010)                                             \
	API_SAME(X, cuGraphLaunch, 10000)                                             \
	API_SAME(X, cuGraphExecDestroy, 10000)                                        \
	API_SAME(X, cuDeviceGraphMemTrim, 11040)                                      \
	API_SAME(X, cuDeviceGetGraphMemAttribute, 11040)                              \
	X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", "cuCtxPushCurrent", 4000, 0)       \
	X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", "cuCtxPopCurrent", 4000, 0)          \
	API_SAME(X, cuCtxSetCurrent, 4000)                                            \
	X(cuCtxCreate, "cuCtxCreate_v2", "cuCtxCreate", 3020, 0)                      \
	X(cuCtxDestroy, "cuCtxDestroy_v2", "cuCtxDestroy", 4000, 0)                   \
	API_SAME(X, cuCtxSynchronize, 2000)                                           \
	X(cuMemGetInfo, "cuMemGetInfo_v2", "cuMemGetInfo", 3020, 0)                   \
	X(cuMemAlloc, "cuMemAlloc_v2", "cuMemAlloc", 3020, 0)                         \
	X(cuMemAlloc_legacy, "cuMemAlloc", "cuMemAlloc", 2000, 0)                     \
	X(cuMemFree_legacy, "cuMemFree", "cuMemFree", 2000, 0)                        \
	X(cuMemAllocPitch, "cuMemAllocPitch_v2", "cuMemAllocPitch", 3020, 0)          \
	API_SAME(X, cuMemAllocManaged, 6000)                                          \
	X(cuMemFree, "cuMemFree_v2", "cuMemFree", 3020, 0)                            \
	X(cuMemsetD8, "cuMemsetD8_v2", "cuMemsetD8", 3020, 0)                         \
	X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD", 3020, 0)                   \
	X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH", 3020, 0)                   \
	API_SAME(X, cuStreamCreate, 2000)                                             \
	API_SAME(X, cuStreamSynchronize, 2000)                                        \
	X(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy", 4000, 0)          \
	API_SAME(X, cuMemAllocAsync, 11020)                                           \
	API_SAME(X, cuMemFreeAsync, 11020)                                            \
	X(cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz", "cuMemAllocAsync",            \
	  11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)                       \
	X(cuMemFreeAsync_ptsz, "cuMemFreeAsync_ptsz", "cuMemFreeAsync",               \
	  11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)                       \
	API_SAME(X, cuMemAllocFromPoolAsync, 11020)                                   \
	API_SAME(X, cuMemPoolCreate, 11020)                                           \
	API_SAME(X, cuMemPoolDestroy, 11020)                                          \
	API_SAME(X, cuMemPoolTrimTo, 11020)                                           \
	API_SAME(X, cuMemPoolGetAttribute, 11020)                                     \
	API_SAME(X, cuDeviceGetDefaultMemPool, 11020)                                 \
	API_SAME(X, cuDeviceSetMemPool, 11020)                                        \
	API_SAME(X, cuMemSetMemPool, 13000)                                           \
	API_SAME(X, cuMemGetAllocationGranularity, 10020)                             \
	API_SAME(X, cuMemCreate, 10020)                                               \
	API_SAME(X, cuMemRelease, 10020)                                              \
	API_SAME(X, cuMemAddressReserve, 10020)                                       \
	API_SAME(X, cuMemAddressFree, 10020)                                          \
	API_SAME(X, cuMemMap, 10020)                                                  \
	API_SAME(X, cuMemUnmap, 10020)                                                \
	API_SAME(X, cuMemSetAccess, 10020)                                            \
	API_SAME(X, cuMemRetainAllocationHandle, 11000)                               \
	API_SAME(X, cuMemExportToShareableHandle, 10020)                              \
	API_SAME(X, cuMemImportFromShareableHandle, 10020)                            \
	X(cuArrayCreate, "cuArrayCreate_v2", "cuArrayCreate", 3020, 0)                \
	X(cuArray3DCreate, "cuArray3DCreate_v2", "cuArray3DCreate", 3020, 0)          \
	API_SAME(X, cuArrayDestroy, 2000)                                             \
	API_SAME(X, cuMemsetD32Async, 3020)                                           \
	X(cuMemGetAddressRange, "cuMemGetAddressRange_v2", "cuMemGetAddressRange", 3020, 0) \
	API_SAME(X, cuPointerGetAttribute, 4000)                                      \
	API_SAME(X, cuPointerGetAttributes, 7000)                                     \
	API_SAME(X, cuIpcGetMemHandle, 4010)                                          \
	X(cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle", 11000, 0) \
	API_SAME(X, cuIpcCloseMemHandle, 4010)

static void load_dlsym(void *h, struct api *a)
{
#define X(field, exported, base, version, flags) a->field = must_dlsym(h, exported);
	API_ENTRIES(X)
#undef X
	a->cuGetProcAddress = must_dlsym(h, "cuGetProcAddress_v2");
}

static void load_procaddr(void *h, struct api *a)
{
	/* As libcudart: one dlsym, then ask the driver for cuGetProcAddress
	 * itself and use what it hands back for everything else. */
	PFN_cuGetProcAddress_v12000 first = must_dlsym(h, "cuGetProcAddress_v2");
	CUdriverProcAddressQueryResult st;
	void *p = NULL;
	OK(first("cuGetProcAddress", &p, 12000, 0, &st));
	CHECK(p != NULL && st == CU_GET_PROC_ADDRESS_SUCCESS);
	a->cuGetProcAddress = (PFN_cuGetProcAddress_v12000)p;
#define X(field, exported, base, version, flags)                                       \
	p = NULL;                                                                      \
	OK(a->cuGetProcAddress(base, &p, version, flags, &st));                       \
	if (!p || st != CU_GET_PROC_ADDRESS_SUCCESS) {                                 \
		fprintf(stderr, "cuGetProcAddress(%s, %d, %d) found nothing\n", base,  \
			version, (int)(flags));                                        \
		exit(1);                                                               \
	}                                                                              \
	a->field = p;
	API_ENTRIES(X)
#undef X
}

void load_api(int argc, char **argv, struct api *a, struct fake *f)
{
	crash_report_install();
	memset(a, 0, sizeof(*a));
	door = argc > 1 ? argv[1] : "";
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "cannot open libcuda.so.1: %s\n", dlerror());
		exit(1);
	}
	if (strcmp(door, "linked") == 0) {
#ifdef DOOR_LINKED
		load_linked(a);
#else
		fprintf(stderr, "this program is not linked with -lcuda\n");
		exit(1);
#endif
	} else if (strcmp(door, "dlsym") == 0) {
		load_dlsym(h, a);
	} else if (strcmp(door, "procaddr") == 0) {
		load_procaddr(h, a);
	} else {
		fprintf(stderr, "usage: %s linked|dlsym|procaddr\n", argv[0]);
		exit(2);
	}
	f->reserved = must_dlsym(h, "fakecuda_reserved");
	f->peak_reserved = must_dlsym(h, "fakecuda_peak_reserved");
	f->live_allocations = must_dlsym(h, "fakecuda_live_allocations");
	f->calls = must_dlsym(h, "fakecuda_calls");
	f->thread_calls = must_dlsym(h, "fakecuda_thread_calls");
	f->device_syncs = must_dlsym(h, "fakecuda_device_syncs");
}

void *shim_symbol(const char *name)
{
	Dl_info info;
	void *probe = dlsym(RTLD_DEFAULT, "cumemcap_get_stats");
	CHECK(probe != NULL && dladdr(probe, &info) && info.dli_fname);
	void *shim = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	CHECK(shim != NULL);
	void *p = dlsym(shim, name);
	dlclose(shim);
	return p;
}

struct cumemcap_stats shim_stats(int dev)
{
	int (*get)(int, struct cumemcap_stats *, size_t) =
		(int (*)(int, struct cumemcap_stats *, size_t))dlsym(RTLD_DEFAULT, "cumemcap_get_stats");
	struct cumemcap_stats st;
	memset(&st, 0, sizeof(st));
	CHECK(get != NULL);
	CHECK(get(dev, &st, sizeof(st)) == 0);
	return st;
}

CUcontext use_primary(const struct api *a, int dev)
{
	CUdevice d;
	CUcontext ctx;
	OK(a->cuInit(0));
	OK(a->cuDeviceGet(&d, dev));
	OK(a->cuDevicePrimaryCtxRetain(&ctx, d));
	OK(a->cuCtxSetCurrent(ctx));
	return ctx;
}

CUstream used_stream(const struct api *a)
{
	CUstream s;
	CUdeviceptr p;
	size_t fr, tot;
	OK(a->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(a->cuMemAllocAsync(&p, 4096, s));
	OK(a->cuMemFreeAsync(p, s));
	OK(a->cuStreamSynchronize(s)); /* the pool trims to its threshold, 0 */
	OK(a->cuMemGetInfo(&fr, &tot)); /* ... which the shim reads here (under a limit) */
	return s;
}
