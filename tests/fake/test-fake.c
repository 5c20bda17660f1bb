/* test-fake: the fake driver's own test, with Check.
 *
 * The fake reads FAKECUDA_* once per process, so every test runs in its own
 * forked child (fork mode is forced in main) and sets its configuration with
 * setenv before its first call into the fake; the parent never calls it.
 * Every assertion checks behaviour that a wrong fake would get wrong.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaGLTypedefs.h> /* GL/gl.h: gl-stub/ on the include path */
#include <cudaProfilerTypedefs.h>
#include <cudaTypedefs.h>

#include <check.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake-entries.h"
#include "fakecuda.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define CK(call) ck_assert_int_eq((call), CUDA_SUCCESS)

/* Compile-time: every row's function has the type of its PFN typedef in
 * cudaTypedefs.h (a wrong version names a missing typedef; a wrong
 * signature fails the assertion). */
#define CHECK_ROW(b, v, s, f) \
	_Static_assert(__builtin_types_compatible_p(PFN_##b##_v##v##s, __typeof__(&f)), #f " is PFN_" #b "_v" #v #s);
FAKE_ENTRY_POINTS(CHECK_ROW)

struct row { const char *base; int version; bool pt; const char *name; };
#define ROW(b, v, s, f) {#b, v, sizeof(#s) > 1, #f},
static const struct row rows[] = {FAKE_ENTRY_POINTS(ROW)};

static void init_ctx(CUcontext *ctx)
{
	CK(cuInit(0));
	CK(cuCtxCreate_v2(ctx, 0, 0));
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A byte of memory that a queued stream operation will write: the tests
 * look while the operation is still waiting, to show it has not run yet,
 * the way a program can race a GPU's asynchronous copy. That read races
 * with the stream's worker by design, so it is left out of
 * ThreadSanitizer's view (not instrumented, not inlined into a caller
 * that is); every other access to such memory is after a synchronize. */
__attribute__((noinline, no_sanitize("thread"))) static unsigned peek_byte(const volatile void *p)
{
	return *(const volatile unsigned char *)p;
}

static atomic_int flag_a, flag_b;
static void sleep_then_set_a(void *arg) { sleep_ms((int)(intptr_t)arg); atomic_store(&flag_a, 1); }
static void sleep_then_set_b(void *arg) { sleep_ms((int)(intptr_t)arg); atomic_store(&flag_b, 1); }
static void copy_a_to_b(void *arg) { (void)arg; atomic_store(&flag_b, atomic_load(&flag_a) + 10); }

/* ---- init and configuration --------------------------------------------------- */

START_TEST(fake_init_required)
{
	int n = -1, v = 0;
	CUdeviceptr p;
	void *fn = NULL;
	ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	ck_assert_int_eq(cuMemAlloc_v2(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
	ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_NOT_INITIALIZED);
	CK(cuDriverGetVersion(&v));
	ck_assert_int_eq(v, 13000);
	CK(cuGetProcAddress_v2("cuInit", &fn, 2000, 0, NULL));
	ck_assert_ptr_nonnull(fn);
	ck_assert_int_eq(cuInit(1), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	CK(((PFN_cuInit_v2000)fn)(0));
	CK(cuDeviceGetCount(&n));
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(cuMemAlloc_v2(&p, 16), CUDA_ERROR_INVALID_CONTEXT); /* no context yet */
}
END_TEST

START_TEST(fake_no_devices)
{
	int n;
	setenv("FAKECUDA_DEVICES", "none", 1);
	ck_assert_int_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
	ck_assert_int_eq(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}
END_TEST

START_TEST(fake_devices_from_env)
{
	setenv("FAKECUDA_DEVICES", "8GiB,1.5G,1000000", 1);
	setenv("FAKECUDA_UUIDS", "GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f,GPU-00000000-0000-0000-0000-000000000001,"
				 "GPU-FFFFFFFF-ffff-ffff-ffff-fffffffffffe", 1);
	setenv("FAKECUDA_PCI", "0000:3b:00.0,0001:AF:1f.0,5e:00.0", 1);
	setenv("FAKECUDA_DRIVER_VERSION", "12040", 1);
	int n, v, pi;
	size_t total;
	unsigned int total32;
	CUuuid u;
	char buf[64];
	CUdevice d;
	CK(cuInit(0));
	CK(cuDeviceGetCount(&n));
	ck_assert_int_eq(n, 3);
	CK(cuDriverGetVersion(&v));
	ck_assert_int_eq(v, 12040);
	CK(cuDeviceTotalMem_v2(&total, 0));
	ck_assert_uint_eq(total, 8 * GiB);
	CK(cuDeviceTotalMem_v2(&total, 1));
	ck_assert_uint_eq(total, 3 * GiB / 2);
	CK(cuDeviceTotalMem_v2(&total, 2));
	ck_assert_uint_eq(total, 1000000);
	CK(cuDeviceTotalMem(&total32, 0));
	ck_assert_uint_eq(total32, UINT_MAX); /* saturated */
	CK(cuDeviceTotalMem(&total32, 2));
	ck_assert_uint_eq(total32, 1000000);
	ck_assert_int_eq(cuDeviceTotalMem_v2(&total, 3), CUDA_ERROR_INVALID_DEVICE);
	ck_assert_int_eq(cuDeviceGet(&d, 3), CUDA_ERROR_INVALID_DEVICE);
	ck_assert_int_eq(cuDeviceGet(&d, -1), CUDA_ERROR_INVALID_DEVICE);
	CK(cuDeviceGetUuid_v2(&u, 0));
	static const unsigned char want0[16] = {0x8e, 0x6b, 0xd7, 0xc8, 0x95, 0xe4, 0x2e, 0x0f,
						0xc1, 0xd9, 0x6e, 0x2a, 0x0b, 0x1c, 0x4d, 0x5f};
	ck_assert_mem_eq(u.bytes, want0, 16);
	CK(cuDeviceGetUuid(&u, 2));
	ck_assert_uint_eq((unsigned char)u.bytes[0], 0xff);
	ck_assert_uint_eq((unsigned char)u.bytes[15], 0xfe);
	CK(cuDeviceGetPCIBusId(buf, sizeof buf, 0));
	ck_assert_str_eq(buf, "0000:3b:00.0");
	CK(cuDeviceGetPCIBusId(buf, sizeof buf, 1));
	ck_assert_str_eq(buf, "0001:af:1f.0");
	CK(cuDeviceGetPCIBusId(buf, sizeof buf, 2));
	ck_assert_str_eq(buf, "0000:5e:00.0");
	CK(cuDeviceGetByPCIBusId(&d, "0001:AF:1F.0"));
	ck_assert_int_eq(d, 1);
	CK(cuDeviceGetByPCIBusId(&d, "5e:00.0"));
	ck_assert_int_eq(d, 2);
	ck_assert_int_eq(cuDeviceGetByPCIBusId(&d, "0000:3c:00.0"), CUDA_ERROR_INVALID_DEVICE);
	CK(cuDeviceGetAttribute(&pi, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0));
	ck_assert_int_eq(pi, 0x3b);
	CK(cuDeviceGetAttribute(&pi, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 1));
	ck_assert_int_eq(pi, 0x1f);
	CK(cuDeviceGetAttribute(&pi, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 1));
	ck_assert_int_eq(pi, 1);
	CK(cuDeviceGetAttribute(&pi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
	ck_assert_int_eq(pi, 9);
	CK(cuDeviceGetAttribute(&pi, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 0));
	ck_assert_int_eq(pi, 1);
	CK(cuDeviceGetAttribute(&pi, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 0));
	ck_assert_int_eq(pi, 32);
	ck_assert_int_eq(cuDeviceGetAttribute(&pi, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuDeviceGetName(buf, sizeof buf, 2));
	ck_assert_str_eq(buf, "Fake GPU 2");
}
END_TEST

START_TEST(fake_default_config)
{
	CUuuid u;
	char buf[32];
	size_t total;
	CK(cuInit(0));
	CK(cuDeviceTotalMem_v2(&total, 0));
	ck_assert_uint_eq(total, 16 * GiB);
	CK(cuDeviceGetUuid_v2(&u, 0));
	static const unsigned char want[16] = {0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0};
	ck_assert_mem_eq(u.bytes, want, 16);
	CK(cuDeviceGetPCIBusId(buf, sizeof buf, 0));
	ck_assert_str_eq(buf, "0000:10:00.0");
}
END_TEST

START_TEST(fake_malformed_env_aborts)
{
	static const char *const bad[][2] = {
		{"FAKECUDA_DEVICES", "12QB"}, {"FAKECUDA_DEVICES", "0"}, {"FAKECUDA_UUIDS", "GPU-1234"},
		{"FAKECUDA_PCI", "3b:00"}, {"FAKECUDA_OTHER_USED", "1GiB,2GiB"}, {"FAKECUDA_DRIVER_VERSION", "13.0"},
		{"FAKECUDA_STREAM_DELAY_US", "-1"}, {"FAKECUDA_FREE_DELAY_US", "soon"}, {"FAKECUDA_CTX_OVERHEAD", "lots"},
		{"FAKECUDA_DRIVER_GROW", "256MiB"}, {"FAKECUDA_DRIVER_GROW", "0@1"}, {"FAKECUDA_DRIVER_GROW", "1MiB@-1"},
		{"FAKECUDA_DRIVER_GROW", "1MiB@1s"}, {"FAKECUDA_DRIVER_GROW", "@1"}, {"FAKECUDA_DRIVER_GROW", "1MiB@"},
		{"FAKECUDA_DRIVER_GROW", "1MiB@86401"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			setenv(bad[i][0], bad[i][1], 1);
			int v;
			cuDriverGetVersion(&v);
			_exit(0);
		}
		int st;
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%s=%s did not abort", bad[i][0], bad[i][1]);
	}
}
END_TEST

/* ---- device queries real programs make at start --------------------------------------- */

static int attr(CUdevice_attribute a)
{
	int v = -12345;
	CK(cuDeviceGetAttribute(&v, a, 0));
	return v;
}

START_TEST(fake_every_attribute_answered)
{
	CK(cuInit(0));
	int v;
	/* every attribute of the header's enum has an answer ... */
	for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++)
		ck_assert_msg(cuDeviceGetAttribute(&v, (CUdevice_attribute)a, 0) == CUDA_SUCCESS,
			      "attribute %d refused", a);
	/* ... and nothing outside it */
	static const int invalid[] = {0, -1, CU_DEVICE_ATTRIBUTE_MAX, CU_DEVICE_ATTRIBUTE_MAX + 1, 100000};
	for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
		ck_assert_int_eq(cuDeviceGetAttribute(&v, (CUdevice_attribute)invalid[i], 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 1), CUDA_ERROR_INVALID_DEVICE);
	ck_assert_int_eq(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
	/* an H100-like device: plausible and consistent answers */
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT), 0);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 9);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 0);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 132);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE), 32);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE), CU_COMPUTEMODE_DEFAULT);
	ck_assert_int_gt(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE), 1000000);
	ck_assert_int_gt(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE), 1000000);
	ck_assert_int_gt(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH), 0);
	ck_assert_int_gt(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), 0);
	ck_assert_int_gt(attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT), 0);
	ck_assert_int_ge(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
			 attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
	ck_assert_int_ge(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
			 attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
	ck_assert_int_ge(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
			 attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
	ck_assert_int_le(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_INTEGRATED), 0);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING), 1);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY), 1);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED), 1);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED), 1);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), 1);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT), 512);
	ck_assert_int_eq(attr(CU_DEVICE_ATTRIBUTE_GPU_PCI_DEVICE_ID) & 0xffff, 0x10de); /* NVIDIA's vendor id */
	/* the legacy forms agree with the attributes */
	int major = 0, minor = -1;
	CK(cuDeviceComputeCapability(&major, &minor, 0));
	ck_assert_int_eq(major, 9);
	ck_assert_int_eq(minor, 0);
	ck_assert_int_eq(cuDeviceComputeCapability(&major, &minor, 3), CUDA_ERROR_INVALID_DEVICE);
	ck_assert_int_eq(cuDeviceComputeCapability(NULL, &minor, 0), CUDA_ERROR_INVALID_VALUE);
	CUdevprop prop;
	memset(&prop, 0, sizeof prop);
	CK(cuDeviceGetProperties(&prop, 0));
	ck_assert_int_eq(prop.maxThreadsPerBlock, attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
	ck_assert_int_eq(prop.maxThreadsDim[2], attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z));
	ck_assert_int_eq(prop.maxGridSize[0], attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X));
	ck_assert_int_eq(prop.sharedMemPerBlock, attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
	ck_assert_int_eq(prop.SIMDWidth, 32);
	ck_assert_int_eq(prop.clockRate, attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
	ck_assert_int_eq(prop.textureAlign, 512);
	ck_assert_int_eq(cuDeviceGetProperties(NULL, 0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* ---- entry points real programs resolve at start ------------------------------------------- */

START_TEST(fake_ctx_settings)
{
	size_t v = 0;
	CUfunc_cache cc;
	CUsharedconfig sc;
	CK(cuInit(0));
	ck_assert_int_eq(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(cuCtxGetCacheConfig(&cc), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT);
	CUcontext c1, c2;
	CK(cuCtxCreate_v2(&c1, 0, 0));
	CK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
	ck_assert_uint_eq(v, 8 * MiB); /* the documented default */
	CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 * MiB));
	CK(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 12345));
	CK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
	ck_assert_uint_eq(v, 64 * MiB);
	CK(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE));
	ck_assert_uint_eq(v, 12345);
	ck_assert_int_eq(cuCtxSetLimit(CU_LIMIT_MAX, 1), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuCtxSetLimit(CU_LIMIT_SHMEM_SIZE, 1), CUDA_ERROR_UNSUPPORTED_LIMIT);
	ck_assert_int_eq(cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE);
	CK(cuCtxGetCacheConfig(&cc));
	ck_assert_int_eq(cc, CU_FUNC_CACHE_PREFER_NONE);
	CK(cuCtxSetCacheConfig(CU_FUNC_CACHE_PREFER_SHARED));
	CK(cuCtxGetCacheConfig(&cc));
	ck_assert_int_eq(cc, CU_FUNC_CACHE_PREFER_SHARED);
	ck_assert_int_eq(cuCtxSetCacheConfig((CUfunc_cache)7), CUDA_ERROR_INVALID_VALUE);
	CK(cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE));
	CK(cuCtxGetSharedMemConfig(&sc));
	ck_assert_int_eq(sc, CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE); /* no bank modes on Hopper */
	ck_assert_int_eq(cuCtxSetSharedMemConfig((CUsharedconfig)9), CUDA_ERROR_INVALID_VALUE);
	/* settings belong to their context */
	CK(cuCtxCreate_v2(&c2, 0, 0));
	CK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
	ck_assert_uint_eq(v, 8 * MiB);
	CK(cuCtxGetCacheConfig(&cc));
	ck_assert_int_eq(cc, CU_FUNC_CACHE_PREFER_NONE);
	CK(cuCtxSetCurrent(c1));
	CK(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
	ck_assert_uint_eq(v, 64 * MiB);
	/* the profiler calls need a context and do nothing else */
	CK(cuProfilerStart());
	CK(cuProfilerStop());
}
END_TEST

START_TEST(fake_peer_access)
{
	setenv("FAKECUDA_DEVICES", "1GiB,1GiB", 1);
	int can = -1, v = -1;
	CK(cuInit(0));
	CK(cuDeviceCanAccessPeer(&can, 0, 1));
	ck_assert_int_eq(can, 1);
	CK(cuDeviceCanAccessPeer(&can, 0, 0));
	ck_assert_int_eq(can, 0);
	ck_assert_int_eq(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE);
	CK(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 0));
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 1),
			 CUDA_ERROR_INVALID_DEVICE);
	ck_assert_int_eq(cuDeviceGetP2PAttribute(&v, (CUdevice_P2PAttribute)99, 0, 1), CUDA_ERROR_INVALID_VALUE);
	CUcontext a, b, a2;
	CK(cuCtxCreate_v2(&b, 0, 1));
	CK(cuCtxCreate_v2(&a2, 0, 0));
	CK(cuCtxCreate_v2(&a, 0, 0)); /* current */
	ck_assert_int_eq(cuCtxEnablePeerAccess(b, 1), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuCtxDisablePeerAccess(b), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	CK(cuCtxEnablePeerAccess(b, 0));
	ck_assert_int_eq(cuCtxEnablePeerAccess(b, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
	ck_assert_int_eq(cuCtxEnablePeerAccess(a, 0), CUDA_ERROR_INVALID_CONTEXT);       /* itself */
	ck_assert_int_eq(cuCtxEnablePeerAccess(a2, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED); /* same device */
	ck_assert_int_eq(cuCtxEnablePeerAccess((CUcontext)&v, 0), CUDA_ERROR_INVALID_CONTEXT);
	CK(cuCtxDisablePeerAccess(b));
	ck_assert_int_eq(cuCtxDisablePeerAccess(b), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	CK(cuCtxEnablePeerAccess(b, 0)); /* again after a disable */
}
END_TEST

START_TEST(fake_host_register)
{
	CUcontext ctx;
	init_ctx(&ctx);
	size_t n = 64 * 1024;
	unsigned char *buf = malloc(n);
	CUdeviceptr d = 0;
	ck_assert_int_eq(cuMemHostGetDevicePointer_v2(&d, buf, 0), CUDA_ERROR_INVALID_VALUE); /* pageable */
	CK(cuMemHostRegister_v2(buf, n, CU_MEMHOSTREGISTER_DEVICEMAP));
	ck_assert_int_eq(cuMemHostRegister_v2(buf + 100, 10, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	ck_assert_int_eq(cuMemHostRegister(buf, n, 0x100), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemHostGetDevicePointer_v2(&d, buf + 10, 0));
	ck_assert_uint_eq(d, (uintptr_t)(buf + 10)); /* unified addressing */
	ck_assert_int_eq(cuMemHostGetDevicePointer_v2(&d, buf, 1), CUDA_ERROR_INVALID_VALUE);
	/* registered memory is pinned: an async copy from it reads it when it runs */
	CUstream s;
	CUdeviceptr p;
	CK(cuStreamCreate(&s, 0));
	CK(cuMemAlloc_v2(&p, 64));
	memcpy(buf, "pinned", 7);
	CK(cuLaunchHostFunc(s, sleep_then_set_a, (void *)(intptr_t)200));
	CK(cuMemcpyHtoDAsync_v2(p, buf, 7, s));
	ck_assert_uint_eq(fakecuda_reserved(0), 64); /* not device memory */
	ck_assert_int_eq(cuMemHostUnregister(buf + 1), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CK(cuStreamSynchronize(s));
	ck_assert_str_eq((char *)p, "pinned");
	CK(cuMemHostUnregister(buf));
	ck_assert_int_eq(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	ck_assert_int_eq(cuMemHostGetDevicePointer_v2(&d, buf, 0), CUDA_ERROR_INVALID_VALUE);
	/* cuMemHostAlloc memory is mapped too */
	void *h;
	CK(cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	CK(cuMemHostGetDevicePointer_v2(&d, h, 0));
	ck_assert_uint_eq(d, (uintptr_t)h);
	ck_assert_int_eq(cuMemHostRegister_v2(h, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	free(buf);
}
END_TEST

static void fill_image(unsigned char *img, size_t pitch, size_t w, size_t h, unsigned seed)
{
	for (size_t y = 0; y < h; y++)
		for (size_t x = 0; x < pitch; x++)
			img[y * pitch + x] = x < w ? (unsigned char)(seed + y * 31 + x) : 0xee;
}

START_TEST(fake_copy_2d_3d)
{
	setenv("FAKECUDA_STREAM_DELAY_US", "300000", 1); /* the async copy waits; the test looks first */
	CUcontext ctx;
	init_ctx(&ctx);
	const size_t w = 100, h = 7, hp = 128; /* host pitch */
	CUdeviceptr d;
	size_t dp;
	CK(cuMemAllocPitch_v2(&d, &dp, w, h, 4));
	memset((void *)d, 0, dp * h);
	unsigned char *img = malloc(hp * h), *back = calloc(1, hp * h);
	fill_image(img, hp, w, h, 3);
	CUDA_MEMCPY2D c = {
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = img, .srcPitch = hp,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = dp,
		.WidthInBytes = w, .Height = h,
	};
	CK(cuMemcpy2D_v2(&c));
	for (size_t y = 0; y < h; y++) {
		ck_assert_mem_eq((unsigned char *)d + y * dp, img + y * hp, w);
		ck_assert_uint_eq(((unsigned char *)d)[y * dp + w], 0); /* nothing past the width */
	}
	/* back to the host with an offset window and another pitch */
	CUDA_MEMCPY2D b = {
		.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = dp, .srcXInBytes = 10, .srcY = 2,
		.dstMemoryType = CU_MEMORYTYPE_UNIFIED, .dstDevice = (CUdeviceptr)back, .dstPitch = hp,
		.WidthInBytes = 50, .Height = 4,
	};
	CK(cuMemcpy2DUnaligned_v2(&b));
	for (size_t y = 0; y < 4; y++)
		ck_assert_mem_eq(back + y * hp, img + (y + 2) * hp + 10, 50);
	/* async: runs later on the stream; a pageable source is read at the call */
	CUstream s;
	CK(cuStreamCreate(&s, 0));
	fill_image(img, hp, w, h, 77);
	CK(cuMemcpy2DAsync_v2(&c, s));
	unsigned char want[100];
	memcpy(want, img + hp, w);
	memset(img, 0, hp * h);
	ck_assert_uint_ne(peek_byte((unsigned char *)d + dp), want[0]); /* not yet */
	CK(cuStreamSynchronize(s));
	ck_assert_mem_eq((unsigned char *)d + dp, want, w);
	/* per-thread forms */
	fill_image(img, hp, w, h, 9);
	CK(cuMemcpy2D_v2_ptds(&c));
	ck_assert_mem_eq((unsigned char *)d + 6 * dp, img + 6 * hp, w);
	fill_image(img, hp, w, h, 10);
	CK(cuMemcpy2DAsync_v2_ptsz(&c, NULL));
	CK(cuStreamSynchronize_ptsz(NULL));
	ck_assert_mem_eq((unsigned char *)d + 6 * dp, img + 6 * hp, w);
	/* checked like the driver: ranges, pitches, kinds */
	CUDA_MEMCPY2D bad = c;
	bad.Height = h + 1; /* one row past the allocation */
	ck_assert_int_eq(cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
	bad = c;
	bad.dstPitch = w - 1;
	ck_assert_int_eq(cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
	bad = c;
	bad.dstDevice = (CUdeviceptr)back; /* not device memory */
	ck_assert_int_eq(cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
	bad = c;
	bad.srcHost = NULL;
	ck_assert_int_eq(cuMemcpy2D_v2(&bad), CUDA_ERROR_INVALID_VALUE);
	bad = c;
	bad.dstMemoryType = CU_MEMORYTYPE_ARRAY;
	bad.dstArray = (CUarray)&bad;
	ck_assert_int_eq(cuMemcpy2D_v2(&bad), CUDA_ERROR_NOT_SUPPORTED); /* arrays hold no bytes in the fake */
	ck_assert_int_eq(cuMemcpy2D_v2(NULL), CUDA_ERROR_INVALID_VALUE);
	/* 3D: two slices of a 16x4 volume into device memory and back */
	unsigned char vol[2][4][16], out[2][4][16];
	for (int z = 0; z < 2; z++)
		for (int y = 0; y < 4; y++)
			for (int x = 0; x < 16; x++)
				vol[z][y][x] = (unsigned char)(z * 100 + y * 16 + x);
	CUdeviceptr v;
	CK(cuMemAlloc_v2(&v, 2 * 4 * 32));
	CUDA_MEMCPY3D c3 = {
		.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = vol, .srcPitch = 16, .srcHeight = 4,
		.dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = v, .dstPitch = 32, .dstHeight = 4,
		.WidthInBytes = 16, .Height = 4, .Depth = 2,
	};
	CK(cuMemcpy3D_v2(&c3));
	ck_assert_mem_eq((unsigned char *)v + 4 * 32 + 3 * 32, vol[1][3], 16);
	CUDA_MEMCPY3D r3 = {
		.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = v, .srcPitch = 32, .srcHeight = 4,
		.dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out, .dstPitch = 16, .dstHeight = 4,
		.WidthInBytes = 16, .Height = 4, .Depth = 2,
	};
	memset(out, 0, sizeof out);
	CK(cuMemcpy3DAsync_v2(&r3, s)); /* pageable destination: returns when done */
	ck_assert_mem_eq(out, vol, sizeof vol);
	memset(out, 0, sizeof out);
	CK(cuMemcpy3D_v2_ptds(&r3));
	CK(cuMemcpy3DAsync_v2_ptsz(&r3, NULL));
	ck_assert_mem_eq(out, vol, sizeof vol);
	r3.Depth = 3;
	ck_assert_int_eq(cuMemcpy3D_v2(&r3), CUDA_ERROR_INVALID_VALUE);
	free(img);
	free(back);
}
END_TEST

static atomic_int cb_calls;
static CUstream cb_stream;
static CUresult cb_status = (CUresult)-1;
static void stream_cb(CUstream hStream, CUresult status, void *user)
{
	cb_stream = hStream;
	cb_status = status;
	atomic_fetch_add(&cb_calls, (int)(intptr_t)user);
}

START_TEST(fake_stream_callback_and_event_timing)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s;
	CK(cuStreamCreate(&s, 0));
	CK(cuLaunchHostFunc(s, sleep_then_set_a, (void *)(intptr_t)200));
	CK(cuStreamAddCallback(s, stream_cb, (void *)(intptr_t)5, 0));
	ck_assert_int_eq(atomic_load(&cb_calls), 0); /* queued behind the host function */
	CK(cuStreamSynchronize(s));
	ck_assert_int_eq(atomic_load(&cb_calls), 5);
	ck_assert_ptr_eq(cb_stream, s);
	ck_assert_int_eq(cb_status, CUDA_SUCCESS);
	CK(cuStreamAddCallback_ptsz(NULL, stream_cb, (void *)(intptr_t)1, 0));
	CK(cuStreamSynchronize_ptsz(NULL));
	ck_assert_int_eq(atomic_load(&cb_calls), 6);
	ck_assert_int_eq(cuStreamAddCallback(s, stream_cb, NULL, 1), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuStreamAddCallback(s, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
	/* elapsed time between two records around 150 ms of stream work */
	CUevent e0, e1, notime;
	float ms = -1;
	CK(cuEventCreate(&e0, 0));
	CK(cuEventCreate(&e1, 0));
	CK(cuEventCreate(&notime, CU_EVENT_DISABLE_TIMING));
	ck_assert_int_eq(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_INVALID_HANDLE); /* never recorded */
	CK(cuEventRecord(e0, s));
	CK(cuLaunchHostFunc(s, sleep_then_set_b, (void *)(intptr_t)150));
	CK(cuEventRecord(e1, s));
	ck_assert_int_eq(cuEventElapsedTime_v2(&ms, e0, e1), CUDA_ERROR_NOT_READY);
	CK(cuEventSynchronize(e1));
	CK(cuEventElapsedTime(&ms, e0, e1));
	ck_assert_float_ge(ms, 140.0f);
	ck_assert_float_lt(ms, 5000.0f);
	CK(cuEventElapsedTime_v2(&ms, e1, e0));
	ck_assert_float_le(ms, -140.0f);
	CK(cuEventRecord(notime, s));
	CK(cuEventSynchronize(notime));
	ck_assert_int_eq(cuEventElapsedTime(&ms, e0, notime), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuEventElapsedTime(NULL, e0, e1), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(fake_no_device_code)
{
	static const char ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n";
	static const unsigned char elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
	static const unsigned char fatbin[] = {0x50, 0xed, 0x55, 0xba, 1, 0, 0x10, 0};
	CUmodule m = NULL;
	CUfunction f = NULL;
	CK(cuInit(0));
	ck_assert_int_eq(cuModuleLoadData(&m, ptx), CUDA_ERROR_INVALID_CONTEXT);
	CUcontext ctx;
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	ck_assert_int_eq(cuModuleLoadData(&m, ptx), CUDA_ERROR_JIT_COMPILER_NOT_FOUND);
	ck_assert_int_eq(cuModuleLoadData(&m, elf), CUDA_ERROR_NO_BINARY_FOR_GPU);
	ck_assert_int_eq(cuModuleLoadFatBinary(&m, fatbin), CUDA_ERROR_NO_BINARY_FOR_GPU);
	ck_assert_int_eq(cuModuleLoadDataEx(&m, "not an image", 0, NULL, NULL), CUDA_ERROR_INVALID_IMAGE);
	ck_assert_int_eq(cuModuleLoadData(NULL, ptx), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuModuleLoad(&m, "/nonexistent/kernels.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
	ck_assert_ptr_null(m);
	ck_assert_int_eq(cuModuleGetFunction(&f, (CUmodule)&m, "k"), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuModuleUnload((CUmodule)&m), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuModuleUnload(NULL), CUDA_ERROR_INVALID_VALUE);
	int fa = -1;
	ck_assert_int_eq(cuFuncGetAttribute(&fa, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)&f), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuFuncSetAttribute((CUfunction)&f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024),
			 CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuFuncSetCacheConfig(NULL, CU_FUNC_CACHE_PREFER_L1), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuLaunchKernel_ptsz((CUfunction)&f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
			 CUDA_ERROR_INVALID_HANDLE);
	/* a link can be made and destroyed; nothing links */
	CUlinkState l;
	void *cubin;
	size_t size;
	CK(cuLinkCreate_v2(0, NULL, NULL, &l));
	ck_assert_int_eq(cuLinkAddData_v2(l, CU_JIT_INPUT_PTX, (void *)ptx, sizeof ptx, "k.ptx", 0, NULL, NULL),
			 CUDA_ERROR_JIT_COMPILER_NOT_FOUND);
	ck_assert_int_eq(cuLinkAddData(l, CU_JIT_INPUT_CUBIN, (void *)elf, sizeof elf, "k.cubin", 0, NULL, NULL),
			 CUDA_ERROR_NO_BINARY_FOR_GPU);
	ck_assert_int_eq(cuLinkAddFile_v2(l, CU_JIT_INPUT_PTX, "/nonexistent.ptx", 0, NULL, NULL),
			 CUDA_ERROR_FILE_NOT_FOUND);
	ck_assert_int_eq(cuLinkComplete(l, &cubin, &size), CUDA_ERROR_INVALID_IMAGE);
	CK(cuLinkDestroy(l));
	ck_assert_int_eq(cuLinkDestroy(l), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuLinkComplete(l, &cubin, &size), CUDA_ERROR_INVALID_HANDLE);
	/* texture objects are handles; graphics interop finds no graphics API */
	CUDA_RESOURCE_DESC rd = {.resType = CU_RESOURCE_TYPE_LINEAR};
	CUDA_TEXTURE_DESC td = {0};
	CUtexObject t;
	CK(cuTexObjectCreate(&t, &rd, &td, NULL));
	CK(cuTexObjectDestroy(t));
	ck_assert_int_eq(cuTexObjectDestroy(t), CUDA_ERROR_INVALID_VALUE);
	CUgraphicsResource res = NULL;
	unsigned int n = 7;
	CUdevice devs[2];
	ck_assert_int_eq(cuGraphicsGLRegisterImage(&res, 1, 0x0de1, 0), CUDA_ERROR_INVALID_GRAPHICS_CONTEXT);
	ck_assert_int_eq(cuGraphicsGLRegisterBuffer(&res, 1, 0), CUDA_ERROR_INVALID_GRAPHICS_CONTEXT);
	ck_assert_int_eq(cuGLGetDevices_v2(&n, devs, 2, CU_GL_DEVICE_LIST_ALL), CUDA_ERROR_INVALID_GRAPHICS_CONTEXT);
	ck_assert_ptr_null(res);
	ck_assert_int_eq(cuGraphicsMapResources(1, &res, NULL), CUDA_ERROR_INVALID_VALUE);
	res = (CUgraphicsResource)&n;
	ck_assert_int_eq(cuGraphicsMapResources_ptsz(1, &res, NULL), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuGraphicsUnregisterResource(res), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

/* ---- the fake NVML, as monitoring tools use it ------------------------------------------- */

START_TEST(fake_nvml_monitoring_queries)
{
	setenv("FAKECUDA_DEVICES", "4GiB,2GiB", 1);
	setenv("FAKECUDA_PCI", "0000:3b:00.0,0001:af:1f.0", 1);
	setenv("FAKECUDA_DRIVER_VERSION", "12040", 1);
	void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	ck_assert_ptr_nonnull(nv);
	/* every query a monitoring tool or probe resolves exists (a NULL one
	 * is what crashed a client) */
	static const char *const names[] = {
		"nvmlInit", "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString",
		"nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion",
		"nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetCount", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByUUID",
		"nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetName",
		"nvmlDeviceGetUUID", "nvmlDeviceGetIndex", "nvmlDeviceGetMinorNumber", "nvmlDeviceGetSerial",
		"nvmlDeviceGetVbiosVersion", "nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo_v3",
		"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetBAR1MemoryInfo",
		"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization",
		"nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetFanSpeed",
		"nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetCurrPcieLinkGeneration",
		"nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
		"nvmlDeviceGetCurrentClocksThrottleReasons", "nvmlDeviceGetSupportedClocksThrottleReasons",
		"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetSupportedClocksEventReasons",
		"nvmlDeviceGetPowerUsage", "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerManagementDefaultLimit",
		"nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimitConstraints",
		"nvmlDeviceGetPerformanceState", "nvmlDeviceGetComputeMode", "nvmlDeviceGetPersistenceMode",
		"nvmlDeviceGetDisplayMode", "nvmlDeviceGetDisplayActive", "nvmlDeviceGetEccMode", "nvmlDeviceGetMigMode",
		"nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetArchitecture", "nvmlDeviceGetMultiGpuBoard",
		"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2",
		"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses",
		"nvmlDeviceGetGraphicsRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses_v3",
		"nvmlDeviceGetMPSComputeRunningProcesses", "nvmlDeviceGetMPSComputeRunningProcesses_v2",
		"nvmlDeviceGetMPSComputeRunningProcesses_v3",
	};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		ck_assert_msg(dlsym(nv, names[i]) != NULL, "%s missing", names[i]);
#define NV(name, ...) ((int (*)(__VA_ARGS__))dlsym(nv, name))
	typedef void *dev_t_;
	dev_t_ d0 = NULL, d1 = NULL, d = NULL;
	char buf[96], cubuf[96];
	unsigned u = 0, u2 = 0;
	int i1 = 0, i2 = 0;
	ck_assert_int_eq(NV("nvmlDeviceGetHandleByIndex_v2", unsigned, dev_t_ *)(0, &d0), 1); /* uninitialized */
	ck_assert_int_eq(NV("nvmlSystemGetCudaDriverVersion_v2", int *)(&i1), 0); /* works before init */
	ck_assert_int_eq(i1, 12040);
	ck_assert_int_eq(NV("nvmlInit_v2", void)(), 0);
	ck_assert_int_eq(NV("nvmlDeviceGetHandleByIndex_v2", unsigned, dev_t_ *)(0, &d0), 0);
	ck_assert_int_eq(NV("nvmlDeviceGetHandleByIndex_v2", unsigned, dev_t_ *)(1, &d1), 0);
	/* the names and PCI locations the driver gives */
	CK(cuInit(0));
	ck_assert_int_eq(NV("nvmlDeviceGetName", dev_t_, char *, unsigned)(d1, buf, sizeof buf), 0);
	CK(cuDeviceGetName(cubuf, sizeof cubuf, 1));
	ck_assert_str_eq(buf, cubuf);
	ck_assert_int_eq(NV("nvmlDeviceGetName", dev_t_, char *, unsigned)(d1, buf, 3), 7); /* insufficient size */
	struct { char legacy[16]; unsigned domain, bus, device, id, subsys; char busId[32]; } pci;
	ck_assert_int_eq(NV("nvmlDeviceGetPciInfo_v3", dev_t_, void *)(d1, &pci), 0);
	ck_assert_str_eq(pci.busId, "00000001:af:1f.0");
	ck_assert_uint_eq(pci.bus, 0xaf);
	ck_assert_uint_eq(pci.id & 0xffff, 0x10de);
	CK(cuDeviceGetPCIBusId(cubuf, sizeof cubuf, 1));
	ck_assert_str_eq(pci.legacy, cubuf);
	ck_assert_int_eq(NV("nvmlDeviceGetHandleByPciBusId_v2", const char *, dev_t_ *)("0000:3b:00.0", &d), 0);
	ck_assert_ptr_eq(d, d0);
	ck_assert_int_eq(NV("nvmlDeviceGetHandleByPciBusId_v2", const char *, dev_t_ *)("0000:3c:00.0", &d), 6);
	/* memory v1 and v2 agree with each other and with this process's use */
	CUcontext ctx;
	CUdeviceptr p;
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	CK(cuMemAlloc_v2(&p, 64 * MiB));
	struct { unsigned long long total, free, used; } m1;
	struct { unsigned version; unsigned long long total, reserved, free, used; } m2 = {0};
	ck_assert_int_eq(NV("nvmlDeviceGetMemoryInfo_v2", dev_t_, void *)(d0, &m2), 25); /* version mismatch */
	m2.version = (unsigned)sizeof m2 | (2u << 24);
	ck_assert_int_eq(NV("nvmlDeviceGetMemoryInfo_v2", dev_t_, void *)(d0, &m2), 0);
	ck_assert_int_eq(NV("nvmlDeviceGetMemoryInfo", dev_t_, void *)(d0, &m1), 0);
	ck_assert_uint_eq(m2.total, 4 * GiB);
	ck_assert_uint_eq(m1.total, m2.total);
	ck_assert_uint_eq(m2.used, 64 * MiB);
	ck_assert_uint_eq(m1.used, m2.used);
	ck_assert_uint_eq(m2.free, m2.total - m2.used);
	/* the process lists of every version */
	struct { unsigned pid; unsigned long long used; unsigned gi, ci; } p3[4];
	struct { unsigned pid; unsigned long long used; } p1[4];
	u = 4;
	ck_assert_int_eq(NV("nvmlDeviceGetComputeRunningProcesses_v3", dev_t_, unsigned *, void *)(d0, &u, p3), 0);
	ck_assert_uint_eq(u, 1);
	ck_assert_uint_eq(p3[0].pid, (unsigned)getpid());
	ck_assert_uint_eq(p3[0].used, 64 * MiB);
	u = 4;
	ck_assert_int_eq(NV("nvmlDeviceGetComputeRunningProcesses", dev_t_, unsigned *, void *)(d0, &u, p1), 0);
	ck_assert_uint_eq(u, 1);
	ck_assert_uint_eq(p1[0].used, 64 * MiB);
	u = 4;
	ck_assert_int_eq(NV("nvmlDeviceGetGraphicsRunningProcesses_v3", dev_t_, unsigned *, void *)(d0, &u, p3), 0);
	ck_assert_uint_eq(u, 0);
	u = 4;
	ck_assert_int_eq(NV("nvmlDeviceGetMPSComputeRunningProcesses_v2", dev_t_, unsigned *, void *)(d0, &u, p3), 0);
	ck_assert_uint_eq(u, 0);
	/* an idle H100-like GPU */
	struct { unsigned gpu, memory; } util = {99, 99};
	ck_assert_int_eq(NV("nvmlDeviceGetUtilizationRates", dev_t_, void *)(d0, &util), 0);
	ck_assert_uint_eq(util.gpu, 0);
	ck_assert_int_eq(NV("nvmlDeviceGetCudaComputeCapability", dev_t_, int *, int *)(d0, &i1, &i2), 0);
	ck_assert_int_eq(i1, 9);
	ck_assert_int_eq(i2, 0);
	ck_assert_int_eq(NV("nvmlDeviceGetTemperature", dev_t_, int, unsigned *)(d0, 0, &u), 0);
	ck_assert_uint_gt(u, 0);
	ck_assert_uint_lt(u, 100);
	ck_assert_int_eq(NV("nvmlDeviceGetFanSpeed", dev_t_, unsigned *)(d0, &u), 3); /* not supported */
	ck_assert_int_eq(NV("nvmlDeviceGetMaxClockInfo", dev_t_, int, unsigned *)(d0, 1, &u), 0);
	ck_assert_int_eq(NV("nvmlDeviceGetClockInfo", dev_t_, int, unsigned *)(d0, 1, &u2), 0);
	ck_assert_uint_le(u2, u);
	ck_assert_int_eq(NV("nvmlDeviceGetPowerUsage", dev_t_, unsigned *)(d0, &u2), 0);
	ck_assert_int_eq(NV("nvmlDeviceGetEnforcedPowerLimit", dev_t_, unsigned *)(d0, &u), 0);
	ck_assert_uint_lt(u2, u);
	ck_assert_int_eq(NV("nvmlSystemGetDriverVersion", char *, unsigned)(buf, sizeof buf), 0);
	ck_assert_int_gt((int)strlen(buf), 0);
	ck_assert_int_eq(NV("nvmlDeviceGetName", dev_t_, char *, unsigned)((dev_t_)&u, buf, sizeof buf), 2);
#undef NV
	dlclose(nv);
}
END_TEST

/* ---- what the process holds beyond its allocations, everywhere it shows -------------------- */

/* The fake NVML, initialized. */
static void *nvml_open(void)
{
	void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	ck_assert_ptr_nonnull(nv);
	ck_assert_int_eq(((int (*)(void))dlsym(nv, "nvmlInit_v2"))(), 0);
	return nv;
}

static void *nvml_dev(void *nv, unsigned idx)
{
	void *d = NULL;
	ck_assert_int_eq(((int (*)(unsigned, void **))dlsym(nv, "nvmlDeviceGetHandleByIndex_v2"))(idx, &d), 0);
	return d;
}

struct nv_mem { unsigned long long total, free, used; };

/* nvmlDeviceGetMemoryInfo of GPU idx, checked against _v2 (the same). */
static struct nv_mem nvml_mem(void *nv, unsigned idx)
{
	void *d = nvml_dev(nv, idx);
	struct nv_mem m1;
	struct { unsigned version; unsigned long long total, reserved, free, used; } m2 = {0};
	m2.version = (unsigned)sizeof m2 | (2u << 24);
	ck_assert_int_eq(((int (*)(void *, void *))dlsym(nv, "nvmlDeviceGetMemoryInfo"))(d, &m1), 0);
	ck_assert_int_eq(((int (*)(void *, void *))dlsym(nv, "nvmlDeviceGetMemoryInfo_v2"))(d, &m2), 0);
	ck_assert_uint_eq(m2.total, m1.total);
	ck_assert_uint_eq(m2.used, m1.used);
	ck_assert_uint_eq(m2.free, m1.free);
	ck_assert_uint_eq(m1.free + m1.used, m1.total);
	return m1;
}

/* The compute process list of GPU idx in every version (they must agree):
 * how many are listed; *used: the entry of pid's usedGpuMemory, 0 if pid
 * is not listed; *first_pid: the first entry's pid (0 if none). */
static unsigned nvml_procs(void *nv, unsigned idx, unsigned pid, unsigned long long *used, unsigned *first_pid)
{
	void *d = nvml_dev(nv, idx);
	struct { unsigned pid; unsigned long long used; unsigned gi, ci; } p3[4], p2[4];
	struct { unsigned pid; unsigned long long used; } p1[4];
	unsigned n3 = 4, n2 = 4, n1 = 4;
	typedef int (*list_fn)(void *, unsigned *, void *);
	ck_assert_int_eq(((list_fn)dlsym(nv, "nvmlDeviceGetComputeRunningProcesses_v3"))(d, &n3, p3), 0);
	ck_assert_int_eq(((list_fn)dlsym(nv, "nvmlDeviceGetComputeRunningProcesses_v2"))(d, &n2, p2), 0);
	ck_assert_int_eq(((list_fn)dlsym(nv, "nvmlDeviceGetComputeRunningProcesses"))(d, &n1, p1), 0);
	ck_assert_uint_eq(n2, n3);
	ck_assert_uint_eq(n1, n3);
	*used = 0;
	*first_pid = n3 ? p3[0].pid : 0;
	for (unsigned i = 0; i < n3; i++) {
		ck_assert_uint_eq(p2[i].pid, p3[i].pid);
		ck_assert_uint_eq(p1[i].pid, p3[i].pid);
		ck_assert_uint_eq(p2[i].used, p3[i].used);
		ck_assert_uint_eq(p1[i].used, p3[i].used);
		if (p3[i].pid == pid)
			*used = p3[i].used;
	}
	return n3;
}

/* This process's usedGpuMemory on GPU idx (0: not listed). */
static unsigned long long nvml_mine(void *nv, unsigned idx)
{
	unsigned long long used;
	unsigned first;
	nvml_procs(nv, idx, (unsigned)getpid(), &used, &first);
	return used;
}

/* The current context's free bytes (cuMemGetInfo_v2). */
static uint64_t cu_free(void)
{
	size_t f, t;
	CK(cuMemGetInfo_v2(&f, &t));
	return f;
}

START_TEST(fake_ctx_overhead_everywhere)
{
	setenv("FAKECUDA_DEVICES", "1GiB,512MiB", 1);
	setenv("FAKECUDA_OTHER_USED", "100MiB,0", 1);
	setenv("FAKECUDA_CTX_OVERHEAD", "300MiB", 1);
	void *nv = nvml_open();
	CK(cuInit(0));
	/* no context: other tenants only, this process not listed */
	ck_assert_uint_eq(nvml_mem(nv, 0).used, 100 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 0);
	CUcontext ctx, ctx2, pc;
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	ck_assert_uint_eq(fakecuda_context_bytes(0), 300 * MiB);
	ck_assert_uint_eq(fakecuda_driver_held(0), 300 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(cu_free(), 624 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 300 * MiB); /* listed for its context alone */
	struct nv_mem m = nvml_mem(nv, 0);
	ck_assert_uint_eq(m.total, 1 * GiB);
	ck_assert_uint_eq(m.used, 400 * MiB);
	ck_assert_uint_eq(m.free, 624 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 1), 0); /* nothing on the other GPU */
	ck_assert_uint_eq(nvml_mem(nv, 1).used, 0);
	/* allocations + contexts + other tenants may not pass the card */
	CUdeviceptr a, b;
	CK(cuMemAlloc_v2(&a, 200 * MiB));
	ck_assert_uint_eq(cu_free(), 424 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 500 * MiB);
	ck_assert_uint_eq(nvml_mem(nv, 0).used, 600 * MiB);
	ck_assert_int_eq(cuMemAlloc_v2(&b, 424 * MiB + 512), CUDA_ERROR_OUT_OF_MEMORY);
	CK(cuMemAlloc_v2(&b, 424 * MiB));
	ck_assert_uint_eq(cu_free(), 0);
	m = nvml_mem(nv, 0);
	ck_assert_uint_eq(m.used, 1 * GiB);
	ck_assert_uint_eq(m.free, 0);
	ck_assert_int_eq(cuMemAlloc_v2(&a, 1), CUDA_ERROR_OUT_OF_MEMORY);
	CK(cuMemFree_v2(b));
	/* every live context costs it: a second one on the same GPU */
	CK(cuCtxCreate_v2(&ctx2, 0, 0));
	ck_assert_uint_eq(cu_free(), 124 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 800 * MiB);
	ck_assert_uint_eq(nvml_mem(nv, 0).used, 900 * MiB);
	ck_assert_int_eq(cuMemAlloc_v2(&b, 124 * MiB + 512), CUDA_ERROR_OUT_OF_MEMORY);
	CK(cuCtxDestroy_v2(ctx2));
	ck_assert_uint_eq(cu_free(), 424 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 500 * MiB);
	/* a retained primary context on the other GPU */
	CK(cuDevicePrimaryCtxRetain(&pc, 1));
	CK(cuCtxPushCurrent_v2(pc));
	ck_assert_uint_eq(cu_free(), 212 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 1), 300 * MiB);
	ck_assert_uint_eq(nvml_mem(nv, 1).used, 300 * MiB);
	CK(cuDevicePrimaryCtxRelease_v2(1));
	ck_assert_uint_eq(nvml_mine(nv, 1), 0);
	ck_assert_uint_eq(nvml_mem(nv, 1).used, 0);
	ck_assert_uint_eq(nvml_mine(nv, 0), 500 * MiB);
}
END_TEST

START_TEST(fake_driver_grow_counts)
{
	setenv("FAKECUDA_DEVICES", "1GiB,1GiB", 1);
	setenv("FAKECUDA_OTHER_USED", "100MiB,0", 1);
	setenv("FAKECUDA_CTX_OVERHEAD", "100MiB", 1);
	void *nv = nvml_open();
	CK(cuInit(0));
	/* nothing of this process lives there yet; no such GPU */
	ck_assert_int_eq(fakecuda_driver_grow(0, (int64_t)MiB), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(fakecuda_driver_grow(2, (int64_t)MiB), CUDA_ERROR_INVALID_DEVICE);
	ck_assert_int_eq(fakecuda_driver_grow(-1, (int64_t)MiB), CUDA_ERROR_INVALID_DEVICE);
	ck_assert_uint_eq(fakecuda_driver_held(0), 0);
	ck_assert_uint_eq(fakecuda_driver_held(2), 0);
	CUcontext ctx;
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	ck_assert_uint_eq(fakecuda_driver_held(0), 100 * MiB);
	/* grown after the context: counts like the context, is no allocation */
	CK(fakecuda_driver_grow(0, 200 * (int64_t)MiB));
	ck_assert_uint_eq(fakecuda_driver_held(0), 300 * MiB);
	ck_assert_uint_eq(fakecuda_context_bytes(0), 100 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	ck_assert_uint_eq(cu_free(), 624 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 300 * MiB);
	struct nv_mem m = nvml_mem(nv, 0);
	ck_assert_uint_eq(m.used, 400 * MiB);
	ck_assert_uint_eq(m.free, 624 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 1), 0); /* on that GPU only */
	ck_assert_uint_eq(fakecuda_driver_held(1), 0);
	/* allocations that would pass the card with it are refused */
	CUdeviceptr a, b;
	ck_assert_int_eq(cuMemAlloc_v2(&a, 624 * MiB + 512), CUDA_ERROR_OUT_OF_MEMORY);
	CK(cuMemAlloc_v2(&a, 600 * MiB));
	ck_assert_uint_eq(cu_free(), 24 * MiB);
	/* and the driver cannot take more than the card has */
	ck_assert_int_eq(fakecuda_driver_grow(0, 24 * (int64_t)MiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_uint_eq(fakecuda_driver_held(0), 300 * MiB);
	CK(fakecuda_driver_grow(0, 24 * (int64_t)MiB));
	ck_assert_uint_eq(cu_free(), 0);
	ck_assert_int_eq(cuMemAlloc_v2(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_uint_eq(nvml_mine(nv, 0), 924 * MiB);
	ck_assert_uint_eq(nvml_mem(nv, 0).used, 1 * GiB);
	/* it shrinks, never below nothing: the context's own cost stays */
	CK(fakecuda_driver_grow(0, -50 * (int64_t)MiB));
	ck_assert_uint_eq(fakecuda_driver_held(0), 274 * MiB);
	ck_assert_uint_eq(cu_free(), 50 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 874 * MiB);
	CK(fakecuda_driver_grow(0, INT64_MIN));
	ck_assert_uint_eq(fakecuda_driver_held(0), 100 * MiB);
	ck_assert_uint_eq(cu_free(), 224 * MiB);
	CK(fakecuda_driver_grow(0, 0));
	ck_assert_uint_eq(fakecuda_driver_held(0), 100 * MiB);
	/* it goes with the device's last context */
	CUcontext ctx2;
	CK(fakecuda_driver_grow(0, 10 * (int64_t)MiB));
	CK(cuCtxCreate_v2(&ctx2, 0, 0));
	ck_assert_uint_eq(fakecuda_driver_held(0), 210 * MiB);
	CK(cuCtxDestroy_v2(ctx2));
	ck_assert_uint_eq(fakecuda_driver_held(0), 110 * MiB); /* one context left */
	CK(cuCtxDestroy_v2(ctx));
	ck_assert_uint_eq(fakecuda_driver_held(0), 0);
	ck_assert_uint_eq(nvml_mine(nv, 0), 0);
	ck_assert_uint_eq(nvml_mem(nv, 0).used, 100 * MiB);
	ck_assert_int_eq(fakecuda_driver_grow(0, (int64_t)MiB), CUDA_ERROR_INVALID_CONTEXT);
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	ck_assert_uint_eq(fakecuda_driver_held(0), 100 * MiB);
	ck_assert_uint_eq(cu_free(), 824 * MiB);
}
END_TEST

START_TEST(fake_driver_grow_timed)
{
	setenv("FAKECUDA_DEVICES", "1GiB,1GiB", 1);
	setenv("FAKECUDA_CTX_OVERHEAD", "100MiB", 1);
	setenv("FAKECUDA_DRIVER_GROW", "256MiB@0.5", 1);
	void *nv = nvml_open();
	CK(cuInit(0));
	CUcontext ctx, pc;
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	ck_assert_uint_eq(fakecuda_driver_held(0), 100 * MiB); /* not yet */
	ck_assert_uint_eq(cu_free(), 924 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 100 * MiB);
	sleep_ms(300);
	CK(cuDevicePrimaryCtxRetain(&pc, 1)); /* the other GPU's clock starts here */
	sleep_ms(300);
	/* 0.6 s after GPU 0's first context, 0.3 s after GPU 1's */
	ck_assert_uint_eq(fakecuda_driver_held(1), 100 * MiB);
	ck_assert_uint_eq(cu_free(), 668 * MiB);
	ck_assert_uint_eq(fakecuda_driver_held(0), 356 * MiB);
	ck_assert_uint_eq(fakecuda_context_bytes(0), 100 * MiB);
	ck_assert_uint_eq(nvml_mine(nv, 0), 356 * MiB);
	ck_assert_uint_eq(nvml_mem(nv, 0).used, 356 * MiB);
	sleep_ms(300);
	ck_assert_uint_eq(nvml_mine(nv, 1), 356 * MiB);
	ck_assert_uint_eq(fakecuda_driver_held(1), 356 * MiB);
	CUdeviceptr a;
	ck_assert_int_eq(cuMemAlloc_v2(&a, 668 * MiB + 512), CUDA_ERROR_OUT_OF_MEMORY);
	/* once: it does not grow again */
	sleep_ms(600);
	ck_assert_uint_eq(fakecuda_driver_held(0), 356 * MiB);
	/* it goes with the last context; the next one starts the clock again */
	CK(cuCtxDestroy_v2(ctx));
	ck_assert_uint_eq(fakecuda_driver_held(0), 0);
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	ck_assert_uint_eq(fakecuda_driver_held(0), 100 * MiB);
	/* due while the card has no room: taken once it fits */
	CK(cuMemAlloc_v2(&a, 800 * MiB));
	sleep_ms(600);
	ck_assert_uint_eq(fakecuda_driver_held(0), 100 * MiB);
	ck_assert_uint_eq(cu_free(), 124 * MiB);
	CK(cuMemFree_v2(a));
	ck_assert_uint_eq(cu_free(), 668 * MiB);
	ck_assert_uint_eq(fakecuda_driver_held(0), 356 * MiB);
}
END_TEST

START_TEST(fake_nvml_bad_mode_aborts)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("FAKECUDA_NVML", "nopids", 1);
		void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
		if (nv)
			((int (*)(void))dlsym(nv, "nvmlInit_v2"))();
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "FAKECUDA_NVML=nopids did not abort");
}
END_TEST

START_TEST(fake_nvml_nopid)
{
	setenv("FAKECUDA_NVML", "nopid", 1);
	setenv("FAKECUDA_DEVICES", "1GiB,1GiB", 1);
	setenv("FAKECUDA_OTHER_USED", "100MiB,0", 1);
	setenv("FAKECUDA_CTX_OVERHEAD", "100MiB", 1);
	void *nv = nvml_open();
	CK(cuInit(0));
	CUcontext ctx;
	CUdeviceptr a;
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	CK(cuMemAlloc_v2(&a, 20 * MiB));
	CK(fakecuda_driver_grow(0, 30 * (int64_t)MiB));
	/* the device figures are right */
	struct nv_mem m = nvml_mem(nv, 0);
	ck_assert_uint_eq(m.used, 250 * MiB);
	ck_assert_uint_eq(m.free, 774 * MiB);
	ck_assert_uint_eq(cu_free(), 774 * MiB);
	/* the memory is listed, under a pid that is not getpid() */
	unsigned long long used;
	unsigned first;
	ck_assert_uint_eq(nvml_procs(nv, 0, (unsigned)getpid(), &used, &first), 1);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_ne(first, (unsigned)getpid());
	ck_assert_uint_eq(first, (unsigned)getpid() + 4194304u);
	ck_assert_uint_eq(nvml_procs(nv, 0, first, &used, &first), 1);
	ck_assert_uint_eq(used, 150 * MiB);
	/* nothing on the other GPU: not listed there */
	ck_assert_uint_eq(nvml_procs(nv, 1, (unsigned)getpid(), &used, &first), 0);
	ck_assert_uint_eq(nvml_mem(nv, 1).used, 0);
}
END_TEST

/* ---- stream capture ----------------------------------------------------------------------- */

static CUstreamCaptureStatus capture_status(CUstream s)
{
	CUstreamCaptureStatus st = (CUstreamCaptureStatus)99;
	CK(cuStreamIsCapturing(s, &st));
	return st;
}

START_TEST(fake_capture_records_instead_of_running)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s;
	CUdeviceptr p;
	CUevent e;
	CUgraph g = NULL, g2 = NULL;
	CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CK(cuMemAlloc_v2(&p, 4096));
	CK(cuMemsetD8_v2(p, 0, 4096));
	CK(cuEventCreate(&e, 0));
	ck_assert_int_eq(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_int_eq(cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
			 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_int_eq(cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
	ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	ck_assert_int_eq(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
	ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CUstreamCaptureStatus st;
	ck_assert_int_eq(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT); /* blocking stream */
	cuuint64_t id = 0;
	CUgraph cg = NULL;
	const CUgraphNode *deps = (const CUgraphNode *)&id;
	const CUgraphEdgeData *edges = (const CUgraphEdgeData *)&id;
	size_t ndeps = 9;
	CK(cuStreamGetCaptureInfo_v3(s, &st, &id, &cg, &deps, &edges, &ndeps));
	ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	ck_assert_uint_ne(id, 0);
	ck_assert_ptr_nonnull(cg);
	ck_assert_uint_eq(ndeps, 0);
	/* work pushed into the stream is captured, not run */
	CK(cuMemsetD8Async(p, 0x77, 4096, s));
	CK(cuLaunchHostFunc(s, sleep_then_set_a, (void *)(intptr_t)0));
	CK(cuEventRecord(e, s));
	CK(cuEventQuery(e)); /* not recorded now: a graph node */
	CK(cuStreamEndCapture(s, &g));
	ck_assert_ptr_eq(g, cg);
	ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);
	CK(cuStreamIsCapturing(NULL, &st));
	ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
	sleep_ms(50);
	ck_assert_int_eq(atomic_load(&flag_a), 0);
	ck_assert_uint_eq(((unsigned char *)p)[100], 0);
	CK(cuStreamSynchronize(s));
	CK(cuGraphDestroy(g));
	ck_assert_int_eq(cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
	/* the stream works as before afterwards */
	CK(cuMemsetD8Async(p, 0x55, 4096, s));
	CK(cuStreamSynchronize(s));
	ck_assert_uint_eq(((unsigned char *)p)[100], 0x55);
	/* into a graph of the program's own; per-thread stream forms */
	CK(cuGraphCreate(&g2, 0));
	CK(cuStreamBeginCaptureToGraph(s, g2, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
	ck_assert_int_eq(cuGraphDestroy(g2), CUDA_ERROR_ILLEGAL_STATE);
	CK(cuStreamEndCapture(s, &g));
	ck_assert_ptr_eq(g, g2);
	CK(cuGraphDestroy(g2));
	CK(cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	CK(cuStreamIsCapturing_ptsz(NULL, &st));
	ck_assert_int_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CK(cuStreamEndCapture_ptsz(NULL, &g));
	ck_assert_ptr_nonnull(g);
	CK(cuGraphDestroy(g));
}
END_TEST

/* Begin a capture in mode m, make call, and return what EndCapture said. */
#define CAPTURE_AROUND(s, m, call, want_call)                                         \
	do {                                                                          \
		CUgraph g_ = (CUgraph)1;                                              \
		CK(cuStreamBeginCapture_v2(s, m));                                    \
		ck_assert_int_eq((call), (want_call));                                \
		ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED); \
		ck_assert_int_eq(cuStreamEndCapture(s, &g_), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED); \
		ck_assert_ptr_null(g_);                                               \
		ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_NONE);   \
	} while (0)

START_TEST(fake_capture_prohibits_unsafe_calls)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s;
	CUdeviceptr p, q = 0;
	size_t pitch;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuMemAlloc_v2(&p, 4096));
	uint64_t held = fakecuda_reserved(0);
	/* global and thread-local captures: allocation and synchronization fail and invalidate */
	CAPTURE_AROUND(s, CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemAlloc_v2(&q, 4096), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CAPTURE_AROUND(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, cuMemAllocPitch_v2(&q, &pitch, 64, 64, 4),
		       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CAPTURE_AROUND(s, CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemAllocManaged(&q, 64, CU_MEM_ATTACH_GLOBAL),
		       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_uint_eq(fakecuda_reserved(0), held); /* nothing was allocated */
	CAPTURE_AROUND(s, CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemFree_v2(p), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_uint_eq(fakecuda_reserved(0), held); /* nor freed */
	CAPTURE_AROUND(s, CU_STREAM_CAPTURE_MODE_GLOBAL, cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CAPTURE_AROUND(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, cuStreamQuery(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	/* context synchronization fails and invalidates the capture, in
	 * every mode */
	CUgraph g = (CUgraph)1;
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	ck_assert_int_eq(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_int_eq(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	ck_assert_ptr_null(g);
	/* relaxed: this thread may allocate during the capture, but never synchronize */
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	CK(cuThreadExchangeStreamCaptureMode(&m));
	ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL); /* the default */
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuMemAlloc_v2(&q, 4096));
	ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
	CK(cuStreamEndCapture(s, &g));
	ck_assert_ptr_nonnull(g);
	CK(cuGraphDestroy(g));
	CAPTURE_AROUND(s, CU_STREAM_CAPTURE_MODE_GLOBAL, cuMemFree_v2(q), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CK(cuThreadExchangeStreamCaptureMode(&m)); /* back to global */
	ck_assert_int_eq(m, CU_STREAM_CAPTURE_MODE_RELAXED);
	/* a capture begun relaxed does not prohibit this thread's allocations */
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	CUdeviceptr r;
	CK(cuMemAlloc_v2(&r, 512));
	CK(cuStreamEndCapture(s, &g));
	ck_assert_ptr_nonnull(g);
	CK(cuGraphDestroy(g));
	/* after the capture everything is allowed again */
	CK(cuMemFree_v2(q));
	CK(cuMemFree_v2(r));
	CK(cuMemFree_v2(p));
	CK(cuCtxSynchronize());
	m = (CUstreamCaptureMode)5;
	ck_assert_int_eq(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

static CUcontext cap_ctx;
static CUstream cap_stream;
static CUstreamCaptureMode cap_thread_mode;
static CUresult cap_result;
static CUgraph cap_graph;

static void *alloc_in_thread(void *arg)
{
	(void)arg;
	CUstreamCaptureMode m = cap_thread_mode;
	CUdeviceptr p = 0;
	if (cuCtxSetCurrent(cap_ctx) || cuThreadExchangeStreamCaptureMode(&m))
		return (void *)1;
	cap_result = cuMemAlloc_v2(&p, 256); /* freed with the context: a free would synchronize */
	return NULL;
}

static void *end_in_thread(void *arg)
{
	(void)arg;
	cap_result = cuStreamEndCapture(cap_stream, &cap_graph);
	return NULL;
}

static CUresult in_thread(void *(*fn)(void *))
{
	pthread_t t;
	void *ret = (void *)1;
	ck_assert_int_eq(pthread_create(&t, NULL, fn, NULL), 0);
	pthread_join(t, &ret);
	ck_assert_ptr_null(ret);
	return cap_result;
}

START_TEST(fake_capture_modes_across_threads)
{
	init_ctx(&cap_ctx);
	CK(cuStreamCreate(&cap_stream, CU_STREAM_NON_BLOCKING));
	CUgraph g;
	/* a global capture here prohibits another thread in global mode ... */
	CK(cuStreamBeginCapture_v2(cap_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
	cap_thread_mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
	CK(in_thread(alloc_in_thread)); /* ... not one in thread-local mode ... */
	cap_thread_mode = CU_STREAM_CAPTURE_MODE_RELAXED;
	CK(in_thread(alloc_in_thread)); /* ... nor a relaxed one ... */
	ck_assert_int_eq(capture_status(cap_stream), CU_STREAM_CAPTURE_STATUS_ACTIVE);
	cap_thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
	ck_assert_int_eq(in_thread(alloc_in_thread), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_int_eq(capture_status(cap_stream), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	ck_assert_int_eq(cuStreamEndCapture(cap_stream, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	/* a thread-local capture does not reach other threads */
	CK(cuStreamBeginCapture_v2(cap_stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
	CK(in_thread(alloc_in_thread));
	/* only the beginning thread may end a capture not begun relaxed */
	ck_assert_int_eq(in_thread(end_in_thread), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
	CK(cuStreamEndCapture(cap_stream, &g));
	CK(cuGraphDestroy(g));
	CK(cuStreamBeginCapture_v2(cap_stream, CU_STREAM_CAPTURE_MODE_RELAXED));
	CK(in_thread(end_in_thread));
	ck_assert_ptr_nonnull(cap_graph);
	CK(cuGraphDestroy(cap_graph));
	/* destroying a capturing stream ends its capture */
	CK(cuStreamBeginCapture_v2(cap_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuStreamDestroy_v2(cap_stream));
	CUdeviceptr p;
	CK(cuMemAlloc_v2(&p, 256));
	CK(cuMemFree_v2(p));
}
END_TEST

/* ---- memory ----------------------------------------------------------------------- */

START_TEST(fake_memory_roundtrip)
{
	CUcontext ctx;
	init_ctx(&ctx);
	size_t sizes[] = {4096, 3 * MiB};
	for (int k = 0; k < 2; k++) {
		size_t n = sizes[k];
		CUdeviceptr a, b;
		CK(cuMemAlloc_v2(&a, n));
		CK(cuMemAlloc_v2(&b, n));
		unsigned char *src = malloc(n), *dst = malloc(n);
		for (size_t i = 0; i < n; i++)
			src[i] = (unsigned char)(i * 7 + k);
		CK(cuMemcpyHtoD_v2(a, src, n));
		ck_assert_mem_eq((void *)a, src, n); /* host-backed: visible at the address */
		CK(cuMemcpyDtoD_v2(b, a, n));
		memset(dst, 0, n);
		CK(cuMemcpyDtoH_v2(dst, b, n));
		ck_assert_mem_eq(dst, src, n);
		CK(cuMemsetD8_v2(a + 1, 0xab, 3));
		ck_assert_uint_eq(((unsigned char *)a)[0], src[0]);
		ck_assert_uint_eq(((unsigned char *)a)[3], 0xab);
		ck_assert_uint_eq(((unsigned char *)a)[4], src[4]);
		CK(cuMemsetD32_v2(b + 8, 0xdeadbeef, 2));
		ck_assert_uint_eq(((uint32_t *)b)[2], 0xdeadbeef);
		ck_assert_uint_eq(((uint32_t *)b)[3], 0xdeadbeef);
		ck_assert_uint_ne(((uint32_t *)b)[4], 0xdeadbeef);
		CK(cuMemFree_v2(a));
		CK(cuMemFree_v2(b));
		free(src);
		free(dst);
	}
	/* legacy 32-bit allocation: the address fits and works */
	CUdeviceptr_v1 p32;
	CK(cuMemAlloc(&p32, 1000));
	ck_assert_uint_eq(p32 % 512, 0);
	CK(cuMemcpyHtoD(p32, "hello", 6));
	ck_assert_str_eq((char *)(uintptr_t)p32, "hello");
	CK(cuMemFree(p32));
}
END_TEST

START_TEST(fake_alignment)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUdeviceptr p[300];
	for (int i = 0; i < 300; i++) {
		CK(cuMemAlloc_v2(&p[i], (size_t)(i * 37 + 1)));
		ck_assert_uint_eq(p[i] % 512, 0);
	}
	for (int i = 0; i < 300; i++)
		CK(cuMemFree_v2(p[i]));
	CUdeviceptr q;
	size_t pitch;
	CK(cuMemAllocPitch_v2(&q, &pitch, 100, 10, 4));
	ck_assert_uint_eq(pitch, 512);
	ck_assert_uint_eq(q % 512, 0);
	ck_assert_uint_eq(fakecuda_reserved(0), 5120);
	ck_assert_int_eq(cuMemAllocPitch_v2(&q, &pitch, 100, 10, 3), CUDA_ERROR_INVALID_VALUE);
	CUdeviceptr m;
	CK(cuMemAllocManaged(&m, 1000, CU_MEM_ATTACH_GLOBAL));
	ck_assert_uint_eq(m % 512, 0);
	ck_assert_uint_eq(fakecuda_reserved(0), 5120 + 1000);
	ck_assert_int_eq(cuMemAllocManaged(&m, 1000, 0), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(fake_copy_range_checked)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUdeviceptr p;
	char buf[8192];
	CK(cuMemAlloc_v2(&p, 4096));
	ck_assert_int_eq(cuMemcpyDtoH_v2(buf, p, 4097), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemcpyHtoD_v2(p + 4000, buf, 97), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemcpyHtoD_v2(p + 4000, buf, 96));
	ck_assert_int_eq(cuMemcpyHtoD_v2((CUdeviceptr)buf, buf, 16), CUDA_ERROR_INVALID_VALUE); /* not device memory */
	ck_assert_int_eq(cuMemsetD8_v2(p + 1, 0, 4096), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemsetD32_v2(p + 2, 0, 4), CUDA_ERROR_INVALID_VALUE); /* misaligned */
	ck_assert_int_eq(cuMemsetD32_v2(p, 0, 1025), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemcpyDtoD_v2(p, p + 2048, 2049), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

START_TEST(fake_oom_at_capacity)
{
	setenv("FAKECUDA_DEVICES", "64MiB", 1);
	setenv("FAKECUDA_OTHER_USED", "8MiB", 1);
	setenv("FAKECUDA_CTX_OVERHEAD", "16MiB", 1);
	CK(cuInit(0));
	size_t fr, tot;
	unsigned int fr32, tot32;
	CUcontext ctx;
	CK(cuCtxCreate_v2(&ctx, 0, 0));
	CK(cuMemGetInfo_v2(&fr, &tot));
	ck_assert_uint_eq(tot, 64 * MiB);
	ck_assert_uint_eq(fr, 40 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 0); /* overhead is not reserved */
	CUdeviceptr a, b;
	ck_assert_int_eq(cuMemAlloc_v2(&a, 40 * MiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
	CK(cuMemAlloc_v2(&a, 30 * MiB));
	CK(cuMemAlloc_v2(&b, 10 * MiB));
	CUdeviceptr c;
	ck_assert_int_eq(cuMemAlloc_v2(&c, 1), CUDA_ERROR_OUT_OF_MEMORY);
	CK(cuMemGetInfo(&fr32, &tot32));
	ck_assert_uint_eq(fr32, 0);
	ck_assert_uint_eq(tot32, 64 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 40 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 2);
	CK(cuMemFree_v2(a));
	CK(cuMemGetInfo_v2(&fr, &tot));
	ck_assert_uint_eq(fr, 30 * MiB);
	ck_assert_uint_eq(fakecuda_peak_reserved(0), 40 * MiB);
	fakecuda_reset_peak(0);
	ck_assert_uint_eq(fakecuda_peak_reserved(0), 10 * MiB);
	/* a second context costs its overhead too */
	CUcontext ctx2;
	CK(cuCtxCreate_v2(&ctx2, 0, 0));
	CK(cuMemGetInfo_v2(&fr, &tot));
	ck_assert_uint_eq(fr, 14 * MiB);
	CK(cuCtxDestroy_v2(ctx2));
	CK(cuMemGetInfo_v2(&fr, &tot));
	ck_assert_uint_eq(fr, 30 * MiB);
	CUarray arr;
	CUDA_ARRAY_DESCRIPTOR ad = {.Width = 31 * MiB, .Height = 1, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
	ck_assert_int_eq(cuArrayCreate_v2(&arr, &ad), CUDA_ERROR_OUT_OF_MEMORY);
}
END_TEST

START_TEST(fake_free_errors)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUdeviceptr p;
	int local;
	CK(cuMemAlloc_v2(&p, 4096));
	ck_assert_int_eq(cuMemFree_v2((CUdeviceptr)&local), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemFree_v2(p + 512), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree_v2(0));
	CK(cuMemFree_v2(p));
	ck_assert_int_eq(cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE); /* double free */
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	void *h;
	CK(cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_PORTABLE));
	ck_assert_uint_eq(fakecuda_reserved(0), 0); /* host memory is not device memory */
	ck_assert_int_eq(cuMemFree_v2((CUdeviceptr)h), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFreeHost(h));
	ck_assert_int_eq(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemAlloc_v2(NULL, 16), CUDA_ERROR_INVALID_VALUE);
	CK(cuCtxPopCurrent_v2(NULL));
	ck_assert_int_eq(cuMemAlloc_v2(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
	size_t f, t;
	ck_assert_int_eq(cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
}
END_TEST

START_TEST(fake_free_waits_for_streams)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s;
	CUdeviceptr p;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuMemAlloc_v2(&p, 64));
	uint64_t syncs = fakecuda_device_syncs();
	CK(cuLaunchHostFunc(s, sleep_then_set_a, (void *)(intptr_t)300));
	ck_assert_int_eq(atomic_load(&flag_a), 0);
	CK(cuMemFree_v2(p));
	ck_assert_int_eq(atomic_load(&flag_a), 1); /* the free waited for the stream */
	ck_assert_uint_eq(fakecuda_device_syncs(), syncs + 1);
}
END_TEST

/* ---- streams and events ------------------------------------------------------------ */

START_TEST(fake_stream_runs_later)
{
	setenv("FAKECUDA_STREAM_DELAY_US", "200000", 1);
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s;
	CUdeviceptr p;
	CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CK(cuMemAlloc_v2(&p, 256));
	memset((void *)p, 0, 256);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CK(cuMemsetD8Async(p, 0x5a, 256, s));
	sleep_ms(50); /* well inside the 200 ms every operation waits */
	ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	ck_assert_uint_eq(peek_byte((void *)p), 0); /* not yet */
	CK(cuLaunchHostFunc(s, sleep_then_set_a, (void *)(intptr_t)0));
	CK(cuStreamSynchronize(s));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	ck_assert_int_ge(ms, 400); /* two operations, 200 ms each */
	ck_assert_uint_eq(((unsigned char *)p)[255], 0x5a);
	ck_assert_int_eq(atomic_load(&flag_a), 1);
	CK(cuStreamQuery(s));
	/* an async copy from pageable memory reads the source at the call */
	char src[16] = "staged";
	CK(cuMemcpyHtoDAsync_v2(p, src, sizeof src, s));
	strcpy(src, "changed");
	CK(cuStreamSynchronize(s));
	ck_assert_str_eq((char *)p, "staged");
	CK(cuStreamDestroy_v2(s));
	ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
}
END_TEST

START_TEST(fake_legacy_stream_semantics)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream blocking, nonblocking;
	CUdeviceptr p;
	CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
	CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
	CK(cuMemAlloc_v2(&p, 64));
	CK(cuLaunchHostFunc(blocking, sleep_then_set_a, (void *)(intptr_t)300));
	CK(cuLaunchHostFunc(nonblocking, sleep_then_set_b, (void *)(intptr_t)600));
	CK(cuMemsetD8_v2(p, 1, 64)); /* legacy stream: waits for the blocking stream only */
	ck_assert_int_eq(atomic_load(&flag_a), 1);
	ck_assert_int_eq(atomic_load(&flag_b), 0);
	CK(cuStreamQuery(blocking));
	ck_assert_int_eq(cuStreamQuery(nonblocking), CUDA_ERROR_NOT_READY);
	CK(cuStreamSynchronize(nonblocking));
	ck_assert_int_eq(atomic_load(&flag_b), 1);
	/* the per-thread default stream is a stream of its own, and blocking */
	atomic_store(&flag_a, 0);
	CK(cuLaunchHostFunc_ptsz(NULL, sleep_then_set_a, (void *)(intptr_t)300));
	ck_assert_int_eq(cuStreamQuery_ptsz(NULL), CUDA_ERROR_NOT_READY);
	ck_assert_int_eq(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
	CK(cuStreamQuery(nonblocking));
	CK(cuMemsetD8_v2(p, 2, 64));
	ck_assert_int_eq(atomic_load(&flag_a), 1);
}
END_TEST

START_TEST(fake_events)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s1, s2;
	CUevent e;
	CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CK(cuEventQuery(e)); /* never recorded: complete */
	CK(cuLaunchHostFunc(s1, sleep_then_set_a, (void *)(intptr_t)300));
	CK(cuEventRecord(e, s1));
	ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
	CK(cuStreamWaitEvent(s2, e, 0));
	CK(cuLaunchHostFunc(s2, copy_a_to_b, NULL));
	CK(cuStreamSynchronize(s2));
	ck_assert_int_eq(atomic_load(&flag_b), 11); /* s2 ran after s1's work */
	CK(cuEventSynchronize(e));
	CK(cuEventQuery(e));
	CK(cuEventDestroy_v2(e));
	ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuEventCreate(&e, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
}
END_TEST

/* An event recorded on the legacy stream: the record returns at once, and
 * the event completes when what the blocking streams had queued has run,
 * whatever the non-blocking streams do. */
START_TEST(fake_legacy_event_record)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream blocking, nonblocking;
	CUevent e;
	CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
	CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
	CK(cuEventRecord(e, CU_STREAM_LEGACY));
	CK(cuEventQuery(e)); /* nothing queued: complete at once */
	CK(cuLaunchHostFunc(blocking, sleep_then_set_a, (void *)(intptr_t)300));
	CK(cuLaunchHostFunc(nonblocking, sleep_then_set_b, (void *)(intptr_t)900));
	CK(cuEventRecord(e, NULL));
	ck_assert_int_eq(atomic_load(&flag_a), 0); /* the record did not wait */
	ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
	CK(cuEventSynchronize(e));
	ck_assert_int_eq(atomic_load(&flag_a), 1);
	ck_assert_int_eq(atomic_load(&flag_b), 0); /* not waited for */
	CK(cuEventQuery(e));
	/* A stream waiting on it waits for the blocking stream's work. */
	atomic_store(&flag_a, 0);
	CK(cuLaunchHostFunc(blocking, sleep_then_set_a, (void *)(intptr_t)300));
	CK(cuEventRecord(e, CU_STREAM_LEGACY));
	CK(cuStreamWaitEvent(nonblocking, e, 0));
	CK(cuLaunchHostFunc(nonblocking, copy_a_to_b, NULL));
	CK(cuStreamSynchronize(nonblocking));
	ck_assert_int_eq(atomic_load(&flag_b), 11);
	CK(cuEventDestroy_v2(e));
}
END_TEST

START_TEST(fake_sync_forms_complete)
{
	setenv("FAKECUDA_STREAM_DELAY_US", "100000", 1);
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s;
	CUdeviceptr p;
	char buf[64] = {0};
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuMemAlloc_v2(&p, 64));
	/* per-thread synchronous forms run on the per-thread stream (delayed)
	 * and still return only when done */
	CK(cuMemsetD8_v2_ptds(p, 7, 64));
	ck_assert_uint_eq(((unsigned char *)p)[63], 7);
	CK(cuMemcpyHtoD_v2_ptds(p, "ptds", 5));
	ck_assert_str_eq((char *)p, "ptds");
	CK(cuMemcpyDtoH_v2_ptds(buf, p, 5));
	ck_assert_str_eq(buf, "ptds");
	/* an async copy into pageable host memory returns when it is done */
	memset(buf, 0, sizeof buf);
	CK(cuMemcpyDtoHAsync_v2(buf, p, 5, s));
	ck_assert_str_eq(buf, "ptds");
	/* into pinned host memory it is truly asynchronous */
	char *pinned;
	CK(cuMemAllocHost_v2((void **)&pinned, 64));
	memset(pinned, 0, 64);
	CK(cuMemcpyDtoHAsync_v2(pinned, p, 5, s));
	ck_assert_uint_eq(peek_byte(pinned), 0);
	CK(cuStreamSynchronize(s));
	ck_assert_str_eq(pinned, "ptds");
}
END_TEST

/* ---- pools ---------------------------------------------------------------------------- */

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
	cuuint64_t v = 0;
	CK(cuMemPoolGetAttribute(pool, a, &v));
	return v;
}

START_TEST(fake_pool_chunks_and_trim)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUmemoryPool pool, cur;
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
	CK(cuDeviceGetDefaultMemPool(&pool, 0));
	CK(cuDeviceGetMemPool(&cur, 0));
	ck_assert_ptr_eq(pool, cur);
	CUdeviceptr a, b;
	CK(cuMemAllocAsync(&a, 1 * MiB, s));
	ck_assert_uint_eq(fakecuda_reserved(0), 2 * MiB); /* reserved at the call */
	CK(cuMemAllocAsync(&b, 3 * MiB, s));
	ck_assert_uint_eq(fakecuda_reserved(0), 6 * MiB);
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 6 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 2);
	memset((void *)b, 1, 3 * MiB);
	CUdeviceptr base;
	size_t size;
	CK(cuMemGetAddressRange_v2(&base, &size, b + 100));
	ck_assert_uint_eq(base, b);
	ck_assert_uint_eq(size, 3 * MiB);
	CK(cuMemFreeAsync(a, s));
	CK(cuMemFreeAsync(b, s));
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	ck_assert_uint_eq(fakecuda_reserved(0), 6 * MiB); /* freed chunks stay reserved */
	cuuint64_t thr = 4 * MiB;
	CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
	CUdeviceptr c;
	CK(cuStreamSynchronize(s)); /* trims to the threshold */
	ck_assert_uint_le(fakecuda_reserved(0), 4 * MiB);
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), fakecuda_reserved(0));
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 6 * MiB);
	cuuint64_t zero = 0;
	CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
	/* reuse of a free chunk: no new reservation */
	uint64_t before = fakecuda_reserved(0);
	ck_assert_uint_gt(before, 0);
	CK(cuMemAllocAsync(&c, 1000, s));
	ck_assert_uint_eq(fakecuda_reserved(0), before);
	CK(cuMemFreeAsync(c, s));
	CK(cuStreamSynchronize(s));
	ck_assert_uint_eq(fakecuda_reserved(0), before); /* below the threshold: kept */
	CK(cuMemPoolTrimTo(pool, 0));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
}
END_TEST

START_TEST(fake_pool_threshold_zero_and_oom)
{
	setenv("FAKECUDA_DEVICES", "8MiB", 1);
	CUcontext ctx;
	init_ctx(&ctx);
	CUmemoryPool pool;
	CK(cuDeviceGetDefaultMemPool(&pool, 0));
	CUdeviceptr a, b, p;
	CK(cuMemAllocAsync(&a, 5 * MiB, NULL)); /* 6 MiB chunk */
	ck_assert_uint_eq(fakecuda_reserved(0), 6 * MiB);
	ck_assert_int_eq(cuMemAllocAsync(&b, 3 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	CK(cuMemFreeAsync(a, NULL)); /* legacy stream: done at return */
	ck_assert_uint_eq(fakecuda_reserved(0), 6 * MiB);
	ck_assert_int_eq(cuMemAlloc_v2(&p, 4 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* the pool holds it */
	CK(cuMemAllocAsync(&b, 7 * MiB, NULL)); /* trims the free 6 MiB chunk, then fits */
	ck_assert_uint_eq(fakecuda_reserved(0), 8 * MiB);
	CK(cuMemFreeAsync(b, NULL));
	CK(cuCtxSynchronize()); /* threshold 0: everything free goes back */
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_int_eq(cuMemFreeAsync(b, NULL), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemAlloc_v2(&p, 4 * MiB));
	ck_assert_int_eq(cuMemFreeAsync(p, NULL), CUDA_ERROR_INVALID_VALUE); /* not stream-ordered memory */
	/* a created pool, and the CUDA 13 location forms */
	CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
	CUmemoryPool mine, got;
	CK(cuMemPoolCreate(&mine, &props));
	CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
	CK(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, mine));
	CK(cuMemGetMemPool(&got, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
	ck_assert_ptr_eq(got, mine);
	CK(cuMemGetDefaultMemPool(&got, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
	ck_assert_ptr_eq(got, pool);
	CK(cuMemAllocAsync(&a, 1, NULL));
	ck_assert_uint_eq(pool_attr(mine, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	CK(cuMemFreeAsync(a, NULL));
	CK(cuMemPoolDestroy(mine));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB);
	ck_assert_int_eq(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE); /* the default pool */
	loc.id = 1;
	ck_assert_int_eq(cuMemGetMemPool(&got, &loc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_ERROR_INVALID_DEVICE);
}
END_TEST

/* ---- VMM and arrays ---------------------------------------------------------------------- */

START_TEST(fake_vmm)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
	size_t g;
	CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	ck_assert_uint_eq(g, 2 * MiB);
	CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
	ck_assert_uint_eq(g, 2 * MiB);
	CUmemGenericAllocationHandle h, h2;
	ck_assert_int_eq(cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemCreate(&h, 4 * MiB, &prop, 0));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1);
	CUdeviceptr va;
	CK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB); /* address space is free */
	ck_assert_uint_eq(va % (2 * MiB), 0);
	CK(cuMemMap(va + 2 * MiB, 4 * MiB, 0, h, 0));
	ck_assert_int_eq(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlaps */
	ck_assert_int_eq(cuMemsetD8_v2(va + 2 * MiB, 1, 16), CUDA_ERROR_INVALID_VALUE); /* no access yet */
	CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CK(cuMemSetAccess(va + 2 * MiB, 4 * MiB, &acc, 1));
	CK(cuMemsetD8_v2(va + 2 * MiB, 0x77, 4 * MiB));
	ck_assert_uint_eq(((unsigned char *)(va + 6 * MiB))[-1], 0x77);
	CUdeviceptr base;
	size_t size;
	CK(cuMemGetAddressRange_v2(&base, &size, va + 3 * MiB));
	ck_assert_uint_eq(base, va + 2 * MiB);
	ck_assert_uint_eq(size, 4 * MiB);
	CK(cuMemRetainAllocationHandle(&h2, (void *)(va + 5 * MiB)));
	ck_assert_uint_eq(h2, h);
	CK(cuMemRelease(h2));
	CK(cuMemRelease(h));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB); /* still mapped */
	ck_assert_int_eq(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE); /* still mapped */
	CK(cuMemUnmap(va + 2 * MiB, 4 * MiB));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	CK(cuMemAddressFree(va, 8 * MiB));
}
END_TEST

/* CUDA frees VMM memory once its handle is released and its last mapping
 * unmapped, in either order; cuMemUnmap takes whole mappings only. */
START_TEST(fake_vmm_release_and_unmap)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0},
				    .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
	CUmemGenericAllocationHandle h, h2;
	CUdeviceptr va;
	CK(cuMemAddressReserve(&va, 16 * MiB, 0, 0, 0));
	/* Released right after mapping it twice: the memory lives until the
	 * second mapping goes. */
	CK(cuMemCreate(&h, 4 * MiB, &prop, 0));
	CK(cuMemMap(va, 4 * MiB, 0, h, 0));
	CK(cuMemMap(va + 4 * MiB, 2 * MiB, 2 * MiB, h, 0));
	CK(cuMemRelease(h));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB);
	ck_assert_int_eq(cuMemMap(va + 8 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* released */
	ck_assert_int_eq(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE); /* part of a mapping */
	CK(cuMemUnmap(va, 4 * MiB));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB);
	/* a retain through a live mapping is a reference again */
	CK(cuMemRetainAllocationHandle(&h2, (void *)(va + 4 * MiB)));
	CK(cuMemUnmap(va + 4 * MiB, 2 * MiB));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB); /* the retained reference */
	CK(cuMemRelease(h2));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	/* Unmapped first, released after (PyTorch's expandable segments);
	 * one cuMemUnmap over two adjacent mappings. */
	CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
	CK(cuMemCreate(&h2, 2 * MiB, &prop, 0));
	CK(cuMemMap(va, 2 * MiB, 0, h, 0));
	CK(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h2, 0));
	CK(cuMemUnmap(va, 4 * MiB));
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB);
	CK(cuMemRelease(h));
	CK(cuMemRelease(h2));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	/* Export and import: this process's own file gives a new handle to
	 * the same memory, which lives until both handles are released and
	 * every mapping through either is unmapped; another process's file
	 * is its memory. */
	int fd = -1;
	CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
	CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	ck_assert_int_ge(fd, 0);
	CK(cuMemImportFromShareableHandle(&h2, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	ck_assert_uint_ne(h2, h);
	CK(cuMemMap(va, 2 * MiB, 0, h2, 0));
	CK(cuMemRelease(h));
	CK(cuMemRelease(h2));
	ck_assert_uint_eq(fakecuda_reserved(0), 2 * MiB); /* the mapping through the import */
	ck_assert_int_eq(cuMemRelease(h2), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemUnmap(va, 2 * MiB));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	close(fd);
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
	ck_assert_int_eq(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
			 CUDA_ERROR_INVALID_VALUE); /* not requested at create */
	CK(cuMemRelease(h));
	int other = memfd_create("another-process", 0);
	ck_assert_int_eq(ftruncate(other, 4 * MiB), 0);
	CK(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)other, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	CK(cuMemMap(va, 4 * MiB, 0, h, 0));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	CK(cuMemRelease(h));
	CK(cuMemUnmap(va, 4 * MiB));
	close(other);
	CK(cuMemAddressFree(va, 16 * MiB));
}
END_TEST

START_TEST(fake_arrays_counted)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUarray a, b;
	CUmipmappedArray m;
	CUDA_ARRAY_DESCRIPTOR d2 = {.Width = 100, .Height = 50, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
	CK(cuArrayCreate_v2(&a, &d2));
	ck_assert_uint_eq(fakecuda_reserved(0), 80384); /* 100*50*4*4 = 80000 -> 512-rounded */
	CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 10, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
	CK(cuArray3DCreate_v2(&b, &d3));
	ck_assert_uint_eq(fakecuda_reserved(0), 80384 + 512);
	CUDA_ARRAY3D_DESCRIPTOR dm = {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_HALF, .NumChannels = 2};
	CK(cuMipmappedArrayCreate(&m, &dm, 3)); /* 16384 + 4096 + 1024 */
	ck_assert_uint_eq(fakecuda_reserved(0), 80384 + 512 + 21504);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 3);
	CUDA_ARRAY_DESCRIPTOR_v1 legacy = {.Width = 7, .Height = 3, .Format = CU_AD_FORMAT_SIGNED_INT16, .NumChannels = 2};
	CUarray c;
	CK(cuArrayCreate(&c, &legacy));
	ck_assert_uint_eq(fakecuda_reserved(0), 80384 + 512 + 21504 + 512);
	d2.NumChannels = 3;
	ck_assert_int_eq(cuArrayCreate_v2(&a, &d2), CUDA_ERROR_INVALID_VALUE);
	CK(cuArrayDestroy(c));
	CK(cuArrayDestroy(b));
	ck_assert_int_eq(cuArrayDestroy(b), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuArrayDestroy((CUarray)m), CUDA_ERROR_INVALID_HANDLE);
	CK(cuMipmappedArrayDestroy(m));
	ck_assert_uint_eq(fakecuda_reserved(0), 80384);
}
END_TEST

/* ---- pointer queries and IPC -------------------------------------------------------------- */

START_TEST(fake_pointer_queries)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUdeviceptr p, m, base, dp;
	size_t size;
	CK(cuMemAlloc_v2(&p, 10000));
	CK(cuMemAllocManaged(&m, 100, CU_MEM_ATTACH_HOST));
	CK(cuMemGetAddressRange_v2(&base, &size, p + 9999));
	ck_assert_uint_eq(base, p);
	ck_assert_uint_eq(size, 10000);
	ck_assert_int_eq(cuMemGetAddressRange_v2(&base, &size, p + 10000 + 4096 * 1024), CUDA_ERROR_NOT_FOUND);
	CUcontext c;
	unsigned int type, managed;
	int ord;
	unsigned long long id1, id2;
	CK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p + 5));
	ck_assert_ptr_eq(c, ctx);
	CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 5));
	ck_assert_uint_eq(type, CU_MEMORYTYPE_DEVICE);
	CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 5));
	ck_assert_uint_eq(dp, p);
	CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 5));
	ck_assert_uint_eq(size, 10000);
	CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
	ck_assert_int_eq(ord, 0);
	CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
	ck_assert_uint_eq(managed, 0);
	CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
	ck_assert_uint_eq(managed, 1);
	CK(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
	CK(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, m));
	ck_assert_uint_ne(id1, id2);
	CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 7));
	ck_assert_uint_eq(dp, p + 7);
	int local;
	ck_assert_int_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)&local),
			 CUDA_ERROR_INVALID_VALUE);
	CUpointer_attribute attrs[2] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT};
	type = 99;
	c = ctx;
	void *data[2] = {&type, &c};
	CK(cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)&local));
	ck_assert_uint_eq(type, 0);
	ck_assert_ptr_null(c);
	void *h;
	CK(cuMemAllocHost_v2(&h, 100));
	CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h));
	ck_assert_uint_eq(type, CU_MEMORYTYPE_HOST);
}
END_TEST

START_TEST(fake_ipc_names_base)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUdeviceptr p, q;
	CUipcMemHandle h;
	CK(cuMemAlloc_v2(&p, 2 * MiB));
	CK(cuIpcGetMemHandle(&h, p + 4096));
	CK(cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	ck_assert_uint_eq(q, p); /* the whole allocation, not the pointer */
	CK(cuIpcCloseMemHandle(q));
	ck_assert_int_eq(cuIpcCloseMemHandle(q), CUDA_ERROR_INVALID_VALUE);
	CK(cuIpcOpenMemHandle(&q, h, 0));
	CK(cuIpcCloseMemHandle(q));
	CK(cuMemFree_v2(p));
	ck_assert_int_eq(cuIpcOpenMemHandle_v2(&q, h, 0), CUDA_ERROR_INVALID_VALUE);
	void *hp;
	CK(cuMemHostAlloc(&hp, 64, 0));
	ck_assert_int_eq(cuIpcGetMemHandle(&h, (CUdeviceptr)hp), CUDA_ERROR_INVALID_VALUE);
	const void *tbl = (void *)1;
	CUuuid id = {{0}};
	ck_assert_int_eq(cuGetExportTable(&tbl, &id), CUDA_ERROR_NOT_SUPPORTED);
}
END_TEST

/* ---- contexts --------------------------------------------------------------------------------- */

START_TEST(fake_ctx_destroy_frees)
{
	setenv("FAKECUDA_CTX_OVERHEAD", "100MiB", 1);
	CUcontext ctx, cur;
	init_ctx(&ctx);
	CK(cuCtxGetCurrent(&cur));
	ck_assert_ptr_eq(cur, ctx);
	CUdeviceptr a, b, m, pa;
	size_t pitch;
	CUstream s;
	CUevent e;
	CUarray arr;
	CUDA_ARRAY_DESCRIPTOR d = {.Width = 1000, .Height = 1, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
	CK(cuMemAlloc_v2(&a, 1000));
	CK(cuMemAlloc_v2(&b, 5 * MiB));
	CK(cuMemAllocPitch_v2(&pa, &pitch, 1000, 2, 8));
	CK(cuMemAllocManaged(&m, 10, CU_MEM_ATTACH_GLOBAL));
	CK(cuArrayCreate_v2(&arr, &d));
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuEventCreate(&e, 0));
	CK(cuLaunchHostFunc(s, sleep_then_set_a, (void *)(intptr_t)200));
	ck_assert_uint_eq(fakecuda_live_allocations(0), 5);
	ck_assert_uint_eq(fakecuda_reserved(0), 1000 + 5 * MiB + 2048 + 10 + 1024);
	CK(cuCtxDestroy_v2(ctx));
	ck_assert_int_eq(atomic_load(&flag_a), 1); /* drained first */
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	CK(cuCtxGetCurrent(&cur));
	ck_assert_ptr_null(cur); /* popped */
	ck_assert_int_eq(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(cuCtxDestroy_v2(ctx), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(cuCtxSetCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
	/* primary context: retain costs the overhead, reset frees */
	CUcontext pc, pc2;
	unsigned int flags;
	int active;
	size_t fr, tot;
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	ck_assert_int_eq(active, 0);
	CK(cuDevicePrimaryCtxRetain(&pc, 0));
	CK(cuDevicePrimaryCtxRetain(&pc2, 0));
	ck_assert_ptr_eq(pc, pc2);
	CK(cuCtxSetCurrent(pc));
	CK(cuMemGetInfo_v2(&fr, &tot));
	ck_assert_uint_eq(fr, tot - 100 * MiB);
	CK(cuMemAlloc_v2(&a, 4096));
	CK(cuDevicePrimaryCtxRelease_v2(0));
	ck_assert_uint_eq(fakecuda_reserved(0), 4096); /* still retained once */
	CK(cuDevicePrimaryCtxReset_v2(0));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	/* a reset does not release: still retained once, fresh and usable */
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	ck_assert_int_eq(active, 1);
	ck_assert_uint_eq(fakecuda_context_bytes(0), 100 * MiB);
	CK(cuMemAlloc_v2(&a, 16));
	ck_assert_uint_eq(fakecuda_reserved(0), 16);
	/* the last release resets it: its memory goes with it */
	CK(cuDevicePrimaryCtxRelease_v2(0));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_context_bytes(0), 0);
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	ck_assert_int_eq(active, 0);
	ck_assert_int_eq(cuMemAlloc_v2(&a, 16), CUDA_ERROR_INVALID_CONTEXT);
	ck_assert_int_eq(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
	CK(cuDevicePrimaryCtxReset_v2(0)); /* an inactive one: legal, nothing changes */
	CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
	ck_assert_int_eq(active, 0);
	/* re-retained: the same handle, clean */
	CK(cuDevicePrimaryCtxRetain(&pc2, 0));
	ck_assert_ptr_eq(pc, pc2);
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	CK(cuDevicePrimaryCtxRelease_v2(0));
	/* context stack */
	CUcontext c1, c2;
	CUdevice dev;
	CK(cuCtxCreate_v4(&c1, NULL, 0, 0));
	CK(cuCtxCreate_v2(&c2, 0, 0));
	CK(cuCtxPopCurrent_v2(&cur));
	ck_assert_ptr_eq(cur, c2);
	CK(cuCtxGetCurrent(&cur));
	ck_assert_ptr_eq(cur, c1);
	CK(cuCtxPushCurrent_v2(c2));
	CK(cuCtxGetDevice(&dev));
	ck_assert_int_eq(dev, 0);
	CK(cuCtxSynchronize());
}
END_TEST

/* ---- graphs and graph memory (fake-graph.c) --------------------------------------------- */

static cuuint64_t gmem_attr(CUgraphMem_attribute a)
{
	cuuint64_t v = 12345;
	CK(cuDeviceGetGraphMemAttribute(0, a, &v));
	return v;
}
#define G_USED() gmem_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)
#define G_RESERVED() gmem_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT)

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(int dev, size_t size)
{
	CUDA_MEM_ALLOC_NODE_PARAMS p;
	memset(&p, 0, sizeof p);
	p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.poolProps.location.id = dev;
	p.bytesize = size;
	return p;
}

/* Add an allocation node of size bytes on device 0; its address. */
static CUdeviceptr add_alloc_node(CUgraph g, size_t size, CUgraphNode *node)
{
	CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(0, size);
	CUgraphNode n;
	CK(cuGraphAddMemAllocNode(node ? node : &n, g, NULL, 0, &p));
	ck_assert_uint_ne(p.dptr, 0);
	return p.dptr;
}

START_TEST(fake_graph_memory_nodes)
{
	setenv("FAKECUDA_DEVICES", "16GiB,8GiB", 1);
	CUcontext ctx;
	init_ctx(&ctx);
	CUgraph g, g2, c;
	CUgraphNode na, nb, nf, ne, nodes[8], roots[8];
	CK(cuGraphCreate(&g, 0));
	CK(cuGraphCreate(&g2, 0));
	/* parameters (cuGraphAddMemAllocNode, CUDA_MEM_ALLOC_NODE_PARAMS) */
	CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(0, 0);
	ck_assert_int_eq(cuGraphAddMemAllocNode(&na, g, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE); /* 0 bytes */
	p = alloc_params(2, MiB);
	ck_assert_int_eq(cuGraphAddMemAllocNode(&na, g, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE); /* no device 2 */
	p = alloc_params(0, MiB);
	p.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; /* "IPC is not supported" */
	ck_assert_int_eq(cuGraphAddMemAllocNode(&na, g, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
	p = alloc_params(0, MiB);
	p.poolProps.location.type = CU_MEM_LOCATION_TYPE_HOST;
	ck_assert_int_eq(cuGraphAddMemAllocNode(&na, g, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
	p = alloc_params(0, MiB);
	p.accessDescCount = 3; /* more than the 2 devices */
	CUmemAccessDesc acc[3] = {{{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
	p.accessDescs = acc;
	ck_assert_int_eq(cuGraphAddMemAllocNode(&na, g, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGraphAddMemAllocNode(&na, g, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGraphAddMemAllocNode(&na, (CUgraph)&p, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
	size_t n = 8;
	CK(cuGraphGetNodes(g, NULL, &n));
	ck_assert_uint_eq(n, 0); /* the failures added nothing */
	/* fixed, distinct addresses; no device memory taken */
	p.accessDescCount = 1;
	CK(cuGraphAddMemAllocNode(&na, g, NULL, 0, &p));
	CUdeviceptr a = p.dptr;
	CUdeviceptr b = add_alloc_node(g, 3 * MiB, &nb);
	CUdeviceptr other;
	CK(cuMemAlloc_v2(&other, MiB));
	ck_assert_uint_ne(a, b);
	ck_assert(a + MiB <= b || b + 3 * MiB <= a);
	ck_assert(other + MiB <= a || a + MiB <= other);
	ck_assert(other + MiB <= b || b + 3 * MiB <= other);
	ck_assert_uint_eq(fakecuda_reserved(0), MiB); /* the cuMemAlloc only */
	ck_assert_uint_eq(G_RESERVED(), 0);
	CUDA_MEM_ALLOC_NODE_PARAMS got;
	CK(cuGraphMemAllocNodeGetParams(na, &got));
	ck_assert_uint_eq(got.dptr, a);
	ck_assert_uint_eq(got.bytesize, MiB);
	ck_assert_int_eq(got.poolProps.location.id, 0);
	ck_assert_uint_eq(got.accessDescCount, 1);
	ck_assert_int_eq(got.accessDescs[0].location.id, 1);
	/* not an allocation: the memory is not there before a launch */
	ck_assert_int_eq(cuMemsetD8_v2(a, 1, 16), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
	/* free nodes (cuGraphAddMemFreeNode) */
	ck_assert_int_eq(cuGraphAddMemFreeNode(&nf, g, &nb, 1, other), CUDA_ERROR_INVALID_VALUE); /* not from a node */
	ck_assert_int_eq(cuGraphAddMemFreeNode(&nf, g, &nb, 1, b + 512), CUDA_ERROR_INVALID_VALUE); /* inside */
	ck_assert_int_eq(cuGraphAddMemFreeNode(&nf, g, &nf, 1, b), CUDA_ERROR_INVALID_VALUE); /* a made-up dependency */
	CUgraphNode twice[2] = {nb, nb};
	ck_assert_int_eq(cuGraphAddMemFreeNode(&nf, g, twice, 2, b), CUDA_ERROR_INVALID_VALUE); /* duplicate */
	CK(cuGraphAddMemFreeNode(&nf, g, &nb, 1, b));
	ck_assert_int_eq(cuGraphAddMemFreeNode(&ne, g, &nf, 1, b), CUDA_ERROR_INVALID_VALUE); /* twice */
	ck_assert_int_eq(cuGraphAddMemFreeNode(&ne, g2, NULL, 0, b), CUDA_ERROR_INVALID_VALUE); /* freed in its graph */
	CK(cuGraphAddMemFreeNode(&ne, g2, NULL, 0, a)); /* freed in another graph ... */
	ck_assert_int_eq(cuGraphAddMemFreeNode(&nf, g, NULL, 0, a), CUDA_ERROR_INVALID_VALUE); /* ... not in its own */
	CUdeviceptr fd = 0;
	CK(cuGraphMemFreeNodeGetParams(ne, &fd));
	ck_assert_uint_eq(fd, a);
	ck_assert_int_eq(cuGraphMemFreeNodeGetParams(na, &fd), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGraphMemAllocNodeGetParams(ne, &got), CUDA_ERROR_INVALID_VALUE);
	/* nodes, roots, types */
	CK(cuGraphAddEmptyNode(&ne, g, &nf, 1));
	n = 8;
	CK(cuGraphGetNodes(g, nodes, &n));
	ck_assert_uint_eq(n, 4);
	ck_assert_ptr_eq(nodes[0], na);
	ck_assert_ptr_eq(nodes[1], nb);
	ck_assert_ptr_null(nodes[4]);
	n = 1;
	CK(cuGraphGetNodes(g, nodes, &n));
	ck_assert_uint_eq(n, 1);
	n = 8;
	CK(cuGraphGetRootNodes(g, roots, &n));
	ck_assert_uint_eq(n, 2); /* the two allocation nodes */
	CUgraphNodeType t;
	CK(cuGraphNodeGetType(na, &t));
	ck_assert_int_eq(t, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
	CK(cuGraphNodeGetType(nodes[2], &t));
	ck_assert_int_eq(t, CU_GRAPH_NODE_TYPE_MEM_FREE);
	CK(cuGraphNodeGetType(ne, &t));
	ck_assert_int_eq(t, CU_GRAPH_NODE_TYPE_EMPTY);
	ck_assert_int_eq(cuGraphNodeGetType((CUgraphNode)&t, &t), CUDA_ERROR_INVALID_VALUE);
	/* cuGraphAddNode: the same node kinds through CUgraphNodeParams */
	CUgraphNodeParams np;
	memset(&np, 0, sizeof np);
	np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
	np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.alloc.poolProps.location.id = 1;
	np.alloc.bytesize = 5 * MiB;
	CUgraphNode nc;
	CK(cuGraphAddNode_v2(&nc, g2, NULL, NULL, 0, &np));
	ck_assert_uint_ne(np.alloc.dptr, 0);
	CK(cuGraphMemAllocNodeGetParams(nc, &got));
	ck_assert_uint_eq(got.dptr, np.alloc.dptr);
	ck_assert_int_eq(got.poolProps.location.id, 1);
	CUdeviceptr on1 = np.alloc.dptr;
	memset(&np, 0, sizeof np);
	np.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
	np.free.dptr = on1;
	CK(cuGraphAddNode(&nc, g2, &nc, 1, &np));
	ck_assert_int_eq(cuGraphAddNode(&nc, g2, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE); /* twice */
	memset(&np, 0, sizeof np);
	np.type = CU_GRAPH_NODE_TYPE_EMPTY;
	np.reserved0[1] = 1; /* "must be zero" */
	ck_assert_int_eq(cuGraphAddNode_v2(&nc, g2, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
	memset(&np, 0, sizeof np);
	np.type = CU_GRAPH_NODE_TYPE_KERNEL; /* no function */
	ck_assert_int_eq(cuGraphAddNode_v2(&nc, g2, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE);
	np.kernel.func = (CUfunction)&np; /* none the fake made */
	ck_assert_int_eq(cuGraphAddNode_v2(&nc, g2, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_HANDLE);
	/* restrictions on graphs with memory nodes */
	ck_assert_int_eq(cuGraphClone(&c, g), CUDA_ERROR_NOT_SUPPORTED);
	ck_assert_int_eq(cuGraphAddChildGraphNode(&nc, g2, NULL, 0, g), CUDA_ERROR_INVALID_VALUE);
	CUgraph plain, clone, inner;
	CK(cuGraphCreate(&plain, 0));
	CK(cuGraphAddEmptyNode(&nc, plain, NULL, 0));
	CK(cuGraphClone(&clone, plain));
	CK(cuGraphAddChildGraphNode(&nc, g2, NULL, 0, plain));
	CK(cuGraphNodeGetType(nc, &t));
	ck_assert_int_eq(t, CU_GRAPH_NODE_TYPE_GRAPH);
	CK(cuGraphChildGraphNodeGetGraph(nc, &inner));
	ck_assert_ptr_ne(inner, plain); /* cloned */
	p = alloc_params(0, MiB);
	ck_assert_int_eq(cuGraphAddMemAllocNode(&nb, inner, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGraphDestroy(inner), CUDA_ERROR_INVALID_VALUE); /* the node owns it */
	/* moved ownership takes a graph with memory nodes */
	CUgraph moved;
	CK(cuGraphCreate(&moved, 0));
	add_alloc_node(moved, MiB, NULL);
	memset(&np, 0, sizeof np);
	np.type = CU_GRAPH_NODE_TYPE_GRAPH;
	np.graph.graph = moved;
	ck_assert_int_eq(cuGraphAddNode_v2(&nc, plain, NULL, NULL, 0, &np), CUDA_ERROR_INVALID_VALUE); /* clone */
	np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
	CK(cuGraphAddNode_v2(&nc, plain, NULL, NULL, 0, &np));
	CUgraphExec e;
	ck_assert_int_eq(cuGraphInstantiateWithFlags(&e, moved, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGraphDestroy(moved), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGraphClone(&c, plain), CUDA_ERROR_NOT_SUPPORTED);
	CK(cuGraphDestroy(plain));
	CK(cuGraphDestroy(clone));
	CK(cuGraphDestroy(g));
	CK(cuGraphDestroy(g2));
	ck_assert_int_eq(cuGraphNodeGetType(na, &t), CUDA_ERROR_INVALID_VALUE);
	ck_assert_uint_eq(fakecuda_reserved(0), MiB);
	ck_assert_uint_eq(fakecuda_reserved(1), 0);
}
END_TEST

START_TEST(fake_graph_launch_maps_pool)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUgraph g;
	CUgraphNode nb;
	CK(cuGraphCreate(&g, 0));
	CUdeviceptr a = add_alloc_node(g, 3 * MiB, NULL);   /* 4 MiB mapped */
	CUdeviceptr b = add_alloc_node(g, 100, &nb);        /* 2 MiB mapped, freed in the graph */
	CUgraphNode nf;
	CK(cuGraphAddMemFreeNode(&nf, g, &nb, 1, b));
	uint64_t free0 = cu_free();
	CUgraphExec e, e2;
	CUgraphNode errnode = (CUgraphNode)&e;
	char log[64] = "x";
	CK(cuGraphInstantiate_v2(&e, g, &errnode, log, sizeof log));
	ck_assert_ptr_null(errnode);
	/* instantiation maps nothing */
	ck_assert_uint_eq(G_RESERVED(), 0);
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	/* "at most one executable graph in existence for that graph" */
	ck_assert_int_eq(cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGraphInstantiate(&e2, g, &errnode, log, sizeof log), CUDA_ERROR_INVALID_VALUE);
	CK(cuGraphLaunch(e, s));
	ck_assert_uint_eq(G_RESERVED(), 6 * MiB);
	ck_assert_uint_eq(G_USED(), 6 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 6 * MiB);
	ck_assert_uint_eq(cu_free(), free0 - 6 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1); /* a; b was freed by the graph */
	/* the live allocation is device memory at its fixed address */
	unsigned char buf[64];
	CK(cuMemsetD8_v2(a + 3 * MiB - 64, 0x5a, 64));
	CK(cuMemcpyDtoH_v2(buf, a + 3 * MiB - 64, 64));
	ck_assert_uint_eq(buf[63], 0x5a);
	ck_assert_int_eq(cuMemsetD8_v2(a + 3 * MiB - 64, 0, 65), CUDA_ERROR_INVALID_VALUE); /* past its end */
	ck_assert_int_eq(cuMemsetD8_v2(b, 0, 16), CUDA_ERROR_INVALID_VALUE); /* freed in the graph */
	CUdeviceptr base;
	size_t size;
	CK(cuMemGetAddressRange_v2(&base, &size, a + 5));
	ck_assert_uint_eq(base, a);
	ck_assert_uint_eq(size, 3 * MiB);
	/* relaunch while a is unfreed, no AUTO_FREE_ON_LAUNCH: cuGraphLaunch's rule */
	ck_assert_int_eq(cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
	ck_assert_uint_eq(G_USED(), 6 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1);
	/* freed: the memory stays with the executable graph */
	CK(cuMemFree_v2(a));
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	ck_assert_uint_eq(G_USED(), 6 * MiB);
	ck_assert_int_eq(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
	CK(cuGraphLaunch_ptsz(e, NULL));
	ck_assert_uint_eq(G_RESERVED(), 6 * MiB); /* mapped already: no growth */
	CK(cuMemFreeAsync(a, s));
	ck_assert_int_eq(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
	/* exec destroy: back to the unused reserve */
	CK(cuGraphExecDestroy(e));
	ck_assert_int_eq(cuGraphExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
	ck_assert_uint_eq(G_USED(), 0);
	ck_assert_uint_eq(G_RESERVED(), 6 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 6 * MiB);
	/* a new instantiation reuses the reserve; upload maps */
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = 0, .hErrNode_out = nf, .result_out = CUDA_GRAPH_INSTANTIATE_ERROR};
	CK(cuGraphInstantiateWithParams(&e2, g, &ip));
	ck_assert_int_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	ck_assert_ptr_null(ip.hErrNode_out);
	ck_assert_uint_eq(G_USED(), 0);
	CK(cuGraphUpload(e2, s));
	ck_assert_uint_eq(G_USED(), 6 * MiB);
	ck_assert_uint_eq(G_RESERVED(), 6 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0); /* upload allocates nothing */
	/* trim: an idle executable graph is unmapped, the reserve goes */
	CK(cuDeviceGraphMemTrim(0));
	ck_assert_uint_eq(G_USED(), 0);
	ck_assert_uint_eq(G_RESERVED(), 0);
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(cu_free(), free0);
	ck_assert_int_eq(cuDeviceGraphMemTrim(1), CUDA_ERROR_INVALID_DEVICE);
	/* the first launch after the trim maps again */
	CK(cuGraphLaunch(e2, s));
	ck_assert_uint_eq(G_RESERVED(), 6 * MiB);
	ck_assert_uint_eq(G_USED(), 6 * MiB);
	/* high watermarks: reset to zero only */
	ck_assert_uint_eq(gmem_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 6 * MiB);
	ck_assert_uint_eq(gmem_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 6 * MiB);
	cuuint64_t v = 1;
	ck_assert_int_eq(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v), CUDA_ERROR_INVALID_VALUE);
	v = 0;
	ck_assert_int_eq(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v),
			 CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuDeviceSetGraphMemAttribute(1, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v), CUDA_ERROR_INVALID_DEVICE);
	CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v));
	CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &v));
	ck_assert_uint_eq(gmem_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 0);
	ck_assert_uint_eq(gmem_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 0);
	ck_assert_int_eq(cuDeviceGetGraphMemAttribute(0, (CUgraphMem_attribute)99, &v), CUDA_ERROR_INVALID_VALUE);
	/* cuGraphDestroy frees no live allocation */
	CK(cuGraphDestroy(g));
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1);
	CK(cuMemsetD8_v2(a, 1, 16));
	CK(cuGraphExecDestroy(e2)); /* a is still live: its 4 MiB stay used */
	ck_assert_uint_eq(G_USED(), 4 * MiB);
	CK(cuDeviceGraphMemTrim(0));
	ck_assert_uint_eq(G_RESERVED(), 4 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 4 * MiB);
	CK(cuMemFree_v2(a));
	ck_assert_uint_eq(G_USED(), 0);
	ck_assert_uint_eq(G_RESERVED(), 4 * MiB);
	CK(cuDeviceGraphMemTrim(0));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
}
END_TEST

START_TEST(fake_graph_launch_out_of_memory)
{
	setenv("FAKECUDA_DEVICES", "64MiB", 1);
	CUcontext ctx;
	init_ctx(&ctx);
	CUdeviceptr big;
	CK(cuMemAlloc_v2(&big, 40 * MiB));
	CUgraph g;
	CK(cuGraphCreate(&g, 0));
	CUdeviceptr a = add_alloc_node(g, 30 * MiB - 5, NULL); /* 30 MiB mapped */
	CUgraphExec e;
	CK(cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
	ck_assert_int_eq(cuGraphLaunch(e, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_int_eq(cuGraphUpload(e, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	/* nothing changed */
	ck_assert_uint_eq(G_RESERVED(), 0);
	ck_assert_uint_eq(G_USED(), 0);
	ck_assert_uint_eq(fakecuda_reserved(0), 40 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1);
	ck_assert_int_eq(cuMemsetD8_v2(a, 0, 1), CUDA_ERROR_INVALID_VALUE);
	CK(cuGraphExecDestroy(e));
	/* instantiate-with-upload fails the same way and leaves no executable graph */
	CUDA_GRAPH_INSTANTIATE_PARAMS ip = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, .hUploadStream = NULL};
	ck_assert_int_eq(cuGraphInstantiateWithParams(&e, g, &ip), CUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_int_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_ERROR);
	ck_assert_int_eq(cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD), CUDA_ERROR_INVALID_VALUE);
	CK(cuMemFree_v2(big));
	ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD | CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
	CK(cuGraphInstantiateWithParams_ptsz(&e, g, &ip)); /* so the first one went */
	ck_assert_int_eq(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
	ck_assert_uint_eq(G_RESERVED(), 30 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 30 * MiB);
	/* the device cannot give a plain allocation what the pool holds */
	ck_assert_int_eq(cuMemAlloc_v2(&big, 40 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	/* AUTO_FREE_ON_LAUNCH: each launch frees the previous one's allocation */
	CK(cuGraphLaunch(e, NULL));
	CK(cuMemsetD8_v2(a, 7, 30 * MiB - 5));
	CK(cuGraphLaunch(e, NULL));
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1);
	ck_assert_uint_eq(G_USED(), 30 * MiB);
	ck_assert_uint_eq(G_RESERVED(), 30 * MiB);
	/* the growth is max(0, need - (reserved - used)) */
	CUgraph g2;
	CK(cuGraphCreate(&g2, 0));
	add_alloc_node(g2, 40 * MiB, NULL);
	CUgraphExec e2;
	CK(cuGraphInstantiateWithFlags(&e2, g2, 0));
	CK(cuGraphExecDestroy(e)); /* a stays live: 30 MiB used, none unused */
	ck_assert_int_eq(cuGraphLaunch(e2, NULL), CUDA_ERROR_OUT_OF_MEMORY); /* 30 + 40 > 64 */
	ck_assert_uint_eq(G_RESERVED(), 30 * MiB);
	CK(cuMemFree_v2(a)); /* its 30 MiB back to the unused reserve */
	ck_assert_uint_eq(G_USED(), 0);
	CK(cuGraphLaunch(e2, NULL)); /* 30 from the reserve, 10 from the device */
	ck_assert_uint_eq(G_RESERVED(), 40 * MiB);
	ck_assert_uint_eq(G_USED(), 40 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 40 * MiB);
}
END_TEST

START_TEST(fake_graph_captured_alloc)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUstream s, s2;
	CUmemoryPool pool;
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CK(cuDeviceGetDefaultMemPool(&pool, 0));
	CUdeviceptr p, q, r;
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuMemAllocAsync(&p, 5 * MiB, s));
	CK(cuMemAllocFromPoolAsync(&q, MiB, pool, s));
	/* nothing from the stream-ordered pool */
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	CK(cuMemsetD8Async(p, 0x42, 5 * MiB, s)); /* captured work may use it */
	CK(cuMemcpyAsync(q, p, 16, s));
	CK(cuMemFreeAsync(p, s));
	ck_assert_int_eq(cuMemFreeAsync(p, s), CUDA_ERROR_INVALID_VALUE); /* twice in the same graph */
	CUgraph g;
	CK(cuStreamEndCapture(s, &g));
	CUgraphNode nodes[8];
	size_t n = 8;
	CK(cuGraphGetNodes(g, nodes, &n));
	ck_assert_uint_eq(n, 5);
	static const CUgraphNodeType want[5] = {CU_GRAPH_NODE_TYPE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_MEM_ALLOC,
						CU_GRAPH_NODE_TYPE_MEMSET, CU_GRAPH_NODE_TYPE_MEMCPY,
						CU_GRAPH_NODE_TYPE_MEM_FREE};
	for (size_t i = 0; i < n; i++) {
		CUgraphNodeType t;
		CK(cuGraphNodeGetType(nodes[i], &t));
		ck_assert_int_eq(t, want[i]);
	}
	n = 8;
	CK(cuGraphGetRootNodes(g, NULL, &n));
	ck_assert_uint_eq(n, 1); /* a stream's captured work is a chain */
	CUDA_MEM_ALLOC_NODE_PARAMS ap;
	CK(cuGraphMemAllocNodeGetParams(nodes[0], &ap));
	ck_assert_uint_eq(ap.dptr, p);
	ck_assert_uint_eq(ap.bytesize, 5 * MiB);
	ck_assert_int_eq(ap.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
	ck_assert_int_eq(ap.poolProps.location.id, 0);
	CUdeviceptr fd;
	CK(cuGraphMemFreeNodeGetParams(nodes[4], &fd));
	ck_assert_uint_eq(fd, p);
	/* what an executable graph of it will need: the nodes' sizes, 2 MiB rounded */
	uint64_t need = 0;
	for (size_t i = 0; i < 5; i++)
		if (cuGraphMemAllocNodeGetParams(nodes[i], &ap) == CUDA_SUCCESS)
			need += (ap.bytesize + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
	ck_assert_uint_eq(need, 8 * MiB);
	CUgraphExec e;
	CK(cuGraphInstantiateWithFlags(&e, g, 0));
	CK(cuGraphLaunch(e, s2));
	ck_assert_uint_eq(G_RESERVED() - 0, need);
	ck_assert_uint_eq(fakecuda_reserved(0), need);
	/* the graph ran: q holds the copy of p's bytes; p was freed in it */
	unsigned char buf[16];
	CK(cuMemcpyDtoH_v2(buf, q, 16));
	ck_assert_uint_eq(buf[0], 0x42);
	ck_assert_uint_eq(buf[15], 0x42);
	ck_assert_int_eq(cuMemsetD8_v2(p, 0, 1), CUDA_ERROR_INVALID_VALUE);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1);
	ck_assert_uint_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
	/* a later capture frees q: a free node of another graph */
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuMemFreeAsync(q, s));
	/* launching a graph with memory nodes into a capture: not capturable */
	ck_assert_int_eq(cuGraphLaunch(e, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	ck_assert_int_eq(capture_status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
	ck_assert_int_eq(cuMemAllocAsync(&r, MiB, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CUgraph g2 = (CUgraph)1;
	ck_assert_int_eq(cuStreamEndCapture(s, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuMemFreeAsync(q, s));
	CK(cuStreamEndCapture(s, &g2));
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1); /* captured, not run */
	CUgraphExec e2;
	CK(cuGraphInstantiateWithFlags(&e2, g2, 0));
	CK(cuGraphLaunch(e2, s));
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	ck_assert_int_eq(cuGraphLaunch(e2, s), CUDA_ERROR_INVALID_VALUE); /* q is not live now */
	ck_assert_uint_eq(G_USED(), need); /* still e's mapping */
	/* a graph without memory nodes launched into a capture is captured */
	CUgraph g3, g4;
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuLaunchHostFunc(s, sleep_then_set_a, (void *)(intptr_t)0));
	CK(cuStreamEndCapture(s, &g3));
	CUgraphExec e3;
	CK(cuGraphInstantiateWithFlags(&e3, g3, 0));
	CK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CK(cuGraphLaunch(e3, s));
	CK(cuStreamEndCapture(s, &g4));
	ck_assert_int_eq(atomic_load(&flag_a), 0);
	n = 0;
	CK(cuGraphGetNodes(g4, NULL, &n));
	ck_assert_uint_eq(n, 1);
	CK(cuGraphLaunch(e3, s)); /* runs, and returns when done */
	ck_assert_int_eq(atomic_load(&flag_a), 1);
	CK(cuGraphExecDestroy(e3));
	CK(cuGraphExecDestroy(e2));
	CK(cuGraphExecDestroy(e));
	CK(cuGraphDestroy(g));
	CK(cuGraphDestroy(g2));
	CK(cuGraphDestroy(g3));
	CK(cuGraphDestroy(g4));
	ck_assert_uint_eq(G_USED(), 0);
}
END_TEST

START_TEST(fake_graph_context_death)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUgraph g, g2;
	CK(cuGraphCreate(&g, 0));
	CK(cuGraphCreate(&g2, 0));
	CUdeviceptr a = add_alloc_node(g, 2 * MiB, NULL);
	add_alloc_node(g2, 4 * MiB, NULL);
	CUgraphExec e, e2;
	CK(cuGraphInstantiateWithFlags(&e, g, 0));
	CK(cuGraphInstantiateWithFlags(&e2, g2, 0));
	CK(cuGraphLaunch(e, NULL));
	CK(cuGraphUpload(e2, NULL));
	ck_assert_uint_eq(G_RESERVED(), 6 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 1);
	/* another context's reserve stays */
	CUcontext other;
	CK(cuCtxCreate_v2(&other, 0, 0));
	CUgraph g3;
	CK(cuGraphCreate(&g3, 0));
	add_alloc_node(g3, MiB, NULL);
	CUgraphExec e3;
	CK(cuGraphInstantiateWithFlags(&e3, g3, 0));
	CK(cuGraphUpload(e3, NULL));
	ck_assert_uint_eq(G_RESERVED(), 8 * MiB);
	CK(cuCtxDestroy_v2(ctx));
	ck_assert_uint_eq(G_RESERVED(), 2 * MiB);
	ck_assert_uint_eq(G_USED(), 2 * MiB);
	ck_assert_uint_eq(fakecuda_reserved(0), 2 * MiB);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	ck_assert_int_eq(cuGraphExecDestroy(e), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
	/* the graph itself is no context's: a new executable graph of it works */
	CK(cuGraphInstantiateWithFlags(&e, g, 0));
	CK(cuGraphLaunch(e, NULL));
	CK(cuMemsetD8_v2(a, 1, 2 * MiB));
	CK(cuGraphExecDestroy(e));
	CK(cuGraphExecDestroy(e3));
	CK(cuMemFree_v2(a));
	CK(cuDeviceGraphMemTrim(0));
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
}
END_TEST

/* ---- cuGetProcAddress ------------------------------------------------------------------------- */

START_TEST(fake_procaddr_every_row)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	ck_assert_ptr_nonnull(lib);
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		void *want = dlsym(lib, rows[i].name), *got = NULL;
		CUdriverProcAddressQueryResult st = 99;
		ck_assert_msg(want != NULL, "%s not exported", rows[i].name);
		CK(cuGetProcAddress_v2(rows[i].base, &got, rows[i].version,
				       rows[i].pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st));
		ck_assert_msg(got == want, "%s@%d gave the wrong function (want %s)", rows[i].base, rows[i].version,
			      rows[i].name);
		ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
	}
	dlclose(lib);
}
END_TEST

START_TEST(fake_procaddr_rules)
{
	void *fn;
	CUdriverProcAddressQueryResult st;
#define LOOK(sym, ver, fl) (fn = NULL, st = 99, cuGetProcAddress_v2(sym, &fn, ver, fl, &st))
	CK(LOOK("cuMemAlloc", 2000, 0));
	ck_assert_ptr_eq(fn, (void *)cuMemAlloc);
	CK(LOOK("cuMemAlloc", 3020, 0));
	ck_assert_ptr_eq(fn, (void *)cuMemAlloc_v2);
	CK(LOOK("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
	ck_assert_ptr_eq(fn, (void *)cuMemAlloc_v2); /* no per-thread variant */
	CK(LOOK("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
	ck_assert_ptr_eq(fn, (void *)cuMemcpyHtoD_v2_ptds);
	CK(LOOK("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM));
	ck_assert_ptr_eq(fn, (void *)cuMemcpyHtoD_v2);
	CK(LOOK("cuMemcpyHtoD", 6000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
	ck_assert_ptr_eq(fn, (void *)cuMemcpyHtoD_v2); /* ptds only from 7000 */
	CK(LOOK("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
	ck_assert_ptr_eq(fn, (void *)cuMemAllocAsync_ptsz);
	CK(LOOK("cuMemAllocAsync", 12000, 0));
	ck_assert_ptr_eq(fn, (void *)cuMemAllocAsync);
	CK(LOOK("cuMemAllocAsync", 11010, 0));
	ck_assert_ptr_null(fn);
	ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	CK(LOOK("cuNoSuchFunction", 13000, 0));
	ck_assert_ptr_null(fn);
	ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CK(LOOK("", 0, 0));
	ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	ck_assert_int_eq(LOOK("cuMemAlloc", 13010, 0), CUDA_ERROR_INVALID_VALUE); /* newer than the driver */
	ck_assert_int_eq(cuGetProcAddress_v2(NULL, &fn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
	ck_assert_int_eq(cuGetProcAddress_v2("cuInit", NULL, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
	CK(cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL));
	ck_assert_ptr_eq(fn, (void *)cuInit);
	CK(LOOK("cuGetProcAddress", 11030, 0));
	ck_assert_ptr_eq(fn, (void *)cuGetProcAddress);
	CK(LOOK("cuGetProcAddress", 12000, 0));
	ck_assert_ptr_eq(fn, (void *)cuGetProcAddress_v2);
	CK(LOOK("cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
	ck_assert_ptr_eq(fn, (void *)cuGetProcAddress_v2);
	CK(LOOK("cuDeviceGetUuid", 11040, 0));
	ck_assert_ptr_eq(fn, (void *)cuDeviceGetUuid_v2);
	CK(LOOK("cuCtxCreate", 12050, 0));
	ck_assert_ptr_eq(fn, (void *)cuCtxCreate_v4);
	/* the 4-argument ABI reports misses as CUDA_ERROR_NOT_FOUND */
	CK(cuGetProcAddress("cuMemFree", &fn, 3020, 0));
	ck_assert_ptr_eq(fn, (void *)cuMemFree_v2);
	ck_assert_int_eq(cuGetProcAddress("cuNoSuchFunction", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
	ck_assert_ptr_null(fn);
#undef LOOK
}
END_TEST

START_TEST(fake_procaddr_driver_version)
{
	setenv("FAKECUDA_DRIVER_VERSION", "12020", 1);
	void *fn;
	CUdriverProcAddressQueryResult st;
	ck_assert_int_eq(cuGetProcAddress_v2("cuMemGetMemPool", &fn, 13000, 0, &st), CUDA_ERROR_INVALID_VALUE);
	CK(cuGetProcAddress_v2("cuMemGetMemPool", &fn, 12020, 0, &st));
	ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}
END_TEST

/* ---- record, threads, fork ---------------------------------------------------------------------- */

START_TEST(fake_calls_counted)
{
	CUcontext ctx;
	init_ctx(&ctx);
	CUdeviceptr p;
	uint64_t before = fakecuda_calls("cuMemAlloc_v2");
	for (int i = 0; i < 5; i++) {
		CK(cuMemAlloc_v2(&p, 64));
		CK(cuMemFree_v2(p));
	}
	ck_assert_uint_eq(fakecuda_calls("cuMemAlloc_v2"), before + 5);
	ck_assert_uint_eq(fakecuda_calls("cuMemFree_v2"), 5);
	ck_assert_uint_eq(fakecuda_calls("cuMemAlloc"), 0);
	void *fn;
	CK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
	CK(((PFN_cuMemAllocAsync_v11020_ptsz)fn)(&p, 10, NULL));
	ck_assert_uint_eq(fakecuda_calls("cuMemAllocAsync_ptsz"), 1);
	ck_assert_uint_eq(fakecuda_calls("cuMemAllocAsync"), 0);
	ck_assert_uint_eq(fakecuda_calls("cuGetProcAddress_v2"), 1);
	ck_assert_uint_eq(fakecuda_calls("cuInit"), 1);
	ck_assert_uint_eq(fakecuda_calls("no_such_function"), 0);
	ck_assert_uint_eq(fakecuda_calls(NULL), 0);
	ck_assert_uint_eq(fakecuda_reserved(7), 0);
}
END_TEST

static CUcontext shared_ctx;
static void *hammer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	if (cuCtxSetCurrent(shared_ctx) != CUDA_SUCCESS)
		return (void *)1;
	CUdeviceptr p[8] = {0};
	for (int i = 0; i < 3000; i++) {
		int k = (int)(rand_r(&seed) % 8);
		if (p[k]) {
			if (cuMemFree_v2(p[k]) != CUDA_SUCCESS)
				return (void *)2;
			p[k] = 0;
		} else if (cuMemAlloc_v2(&p[k], 1 + rand_r(&seed) % 100000) != CUDA_SUCCESS) {
			return (void *)3;
		}
	}
	for (int k = 0; k < 8; k++)
		if (p[k] && cuMemFree_v2(p[k]) != CUDA_SUCCESS)
			return (void *)4;
	return NULL;
}

START_TEST(fake_thread_safety)
{
	init_ctx(&shared_ctx);
	pthread_t t[8];
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, hammer, (void *)(uintptr_t)(i + 1)), 0);
	for (int i = 0; i < 8; i++) {
		void *ret;
		pthread_join(t[i], &ret);
		ck_assert_ptr_null(ret);
	}
	ck_assert_uint_eq(fakecuda_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_live_allocations(0), 0);
	ck_assert_uint_gt(fakecuda_peak_reserved(0), 0);
	ck_assert_uint_eq(fakecuda_calls("cuMemAlloc_v2"), fakecuda_calls("cuMemFree_v2"));
}
END_TEST

/* Calls are counted per thread and summed on read: every call of every
 * thread counts, while threads run, after they exit, and when a later
 * thread takes over an exited thread's block. */
static void *count_calls(void *arg)
{
	CUcontext c;
	for (int i = 0; i < (int)(uintptr_t)arg; i++)
		if (cuCtxGetCurrent(&c) != CUDA_SUCCESS)
			return (void *)1;
	return NULL;
}

START_TEST(fake_calls_counted_per_thread)
{
	CUcontext ctx;
	init_ctx(&ctx);
	uint64_t before = fakecuda_calls("cuCtxGetCurrent");
	uint64_t want = before;
	for (int round = 0; round < 3; round++) {
		pthread_t t[6];
		for (int i = 0; i < 6; i++) {
			uintptr_t n = 1000u * (uintptr_t)(i + 1) + (uintptr_t)round;
			want += n;
			ck_assert_int_eq(pthread_create(&t[i], NULL, count_calls, (void *)n), 0);
		}
		for (int i = 0; i < 6; i++) {
			void *ret;
			pthread_join(t[i], &ret);
			ck_assert_ptr_null(ret);
		}
		ck_assert_uint_eq(fakecuda_calls("cuCtxGetCurrent"), want);
	}
	CUcontext c;
	CK(cuCtxGetCurrent(&c));
	ck_assert_uint_eq(fakecuda_calls("cuCtxGetCurrent"), want + 1);
}
END_TEST

/* fakecuda_thread_calls: the calling thread's calls move it, another
 * thread's (running now) do not. */
static void *count_calls_slowly(void *arg)
{
	_Atomic int *stop = arg;
	CUcontext c;
	while (!atomic_load(stop))
		if (cuCtxGetCurrent(&c) != CUDA_SUCCESS)
			return (void *)1;
	return NULL;
}

START_TEST(fake_thread_calls_are_the_threads)
{
	CUcontext ctx, c;
	init_ctx(&ctx);
	_Atomic int stop = 0;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, count_calls_slowly, &stop), 0);
	while (fakecuda_calls("cuCtxGetCurrent") < 1000) /* the other thread is calling */
		sched_yield();
	uint64_t mine = fakecuda_thread_calls("cuCtxGetCurrent");
	uint64_t all = fakecuda_calls("cuCtxGetCurrent");
	for (int i = 0; i < 10; i++)
		CK(cuCtxGetCurrent(&c));
	while (fakecuda_calls("cuCtxGetCurrent") < all + 10 + 1000) /* and goes on */
		sched_yield();
	ck_assert_uint_eq(fakecuda_thread_calls("cuCtxGetCurrent"), mine + 10);
	atomic_store(&stop, 1);
	void *ret;
	pthread_join(t, &ret);
	ck_assert_ptr_null(ret);
	ck_assert_uint_eq(fakecuda_thread_calls("no_such_entry_point"), 0);
}
END_TEST

START_TEST(fake_fork_child_not_initialized)
{
	CUcontext ctx;
	init_ctx(&ctx);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int n;
		CUdeviceptr p;
		int ok = cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED &&
			 cuMemAlloc_v2(&p, 16) == CUDA_ERROR_NOT_INITIALIZED && cuInit(0) == CUDA_ERROR_NOT_INITIALIZED &&
			 fakecuda_reserved(0) == 0;
		_exit(ok ? 0 : 1);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CUdeviceptr p; /* the parent is unaffected */
	CK(cuMemAlloc_v2(&p, 16));
}
END_TEST

static Suite *fake_suite(void)
{
	Suite *s = suite_create("fake");
	TCase *tc = tcase_create("driver");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, fake_init_required);
	tcase_add_test(tc, fake_no_devices);
	tcase_add_test(tc, fake_devices_from_env);
	tcase_add_test(tc, fake_default_config);
	tcase_add_test(tc, fake_malformed_env_aborts);
	tcase_add_test(tc, fake_every_attribute_answered);
	tcase_add_test(tc, fake_ctx_settings);
	tcase_add_test(tc, fake_peer_access);
	tcase_add_test(tc, fake_host_register);
	tcase_add_test(tc, fake_copy_2d_3d);
	tcase_add_test(tc, fake_stream_callback_and_event_timing);
	tcase_add_test(tc, fake_no_device_code);
	tcase_add_test(tc, fake_nvml_monitoring_queries);
	tcase_add_test(tc, fake_ctx_overhead_everywhere);
	tcase_add_test(tc, fake_driver_grow_counts);
	tcase_add_test(tc, fake_driver_grow_timed);
	tcase_add_test(tc, fake_nvml_nopid);
	tcase_add_test(tc, fake_nvml_bad_mode_aborts);
	tcase_add_test(tc, fake_capture_records_instead_of_running);
	tcase_add_test(tc, fake_capture_prohibits_unsafe_calls);
	tcase_add_test(tc, fake_capture_modes_across_threads);
	tcase_add_test(tc, fake_graph_memory_nodes);
	tcase_add_test(tc, fake_graph_launch_maps_pool);
	tcase_add_test(tc, fake_graph_launch_out_of_memory);
	tcase_add_test(tc, fake_graph_captured_alloc);
	tcase_add_test(tc, fake_graph_context_death);
	tcase_add_test(tc, fake_memory_roundtrip);
	tcase_add_test(tc, fake_alignment);
	tcase_add_test(tc, fake_copy_range_checked);
	tcase_add_test(tc, fake_oom_at_capacity);
	tcase_add_test(tc, fake_free_errors);
	tcase_add_test(tc, fake_free_waits_for_streams);
	tcase_add_test(tc, fake_stream_runs_later);
	tcase_add_test(tc, fake_legacy_stream_semantics);
	tcase_add_test(tc, fake_events);
	tcase_add_test(tc, fake_legacy_event_record);
	tcase_add_test(tc, fake_sync_forms_complete);
	tcase_add_test(tc, fake_pool_chunks_and_trim);
	tcase_add_test(tc, fake_pool_threshold_zero_and_oom);
	tcase_add_test(tc, fake_vmm);
	tcase_add_test(tc, fake_vmm_release_and_unmap);
	tcase_add_test(tc, fake_arrays_counted);
	tcase_add_test(tc, fake_pointer_queries);
	tcase_add_test(tc, fake_ipc_names_base);
	tcase_add_test(tc, fake_ctx_destroy_frees);
	tcase_add_test(tc, fake_procaddr_every_row);
	tcase_add_test(tc, fake_procaddr_rules);
	tcase_add_test(tc, fake_procaddr_driver_version);
	tcase_add_test(tc, fake_calls_counted);
	tcase_add_test(tc, fake_thread_safety);
	tcase_add_test(tc, fake_calls_counted_per_thread);
	tcase_add_test(tc, fake_thread_calls_are_the_threads);
	tcase_add_test(tc, fake_fork_child_not_initialized);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	/* Each test configures the fake through its environment before its
	 * first call: that needs a fresh process per test. */
	static const char *const vars[] = {"FAKECUDA_DEVICES", "FAKECUDA_UUIDS", "FAKECUDA_PCI", "FAKECUDA_OTHER_USED",
					   "FAKECUDA_CTX_OVERHEAD", "FAKECUDA_DRIVER_VERSION", "FAKECUDA_STREAM_DELAY_US",
					   "FAKECUDA_FREE_DELAY_US", "FAKECUDA_DRIVER_GROW", "FAKECUDA_NVML"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
	SRunner *sr = srunner_create(fake_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
