/* icount: a fixed number of driver calls, for counting the instructions
 * the shim adds with callgrind (scripts/bench-icount and tests/bench/speed
 * run it). Counts are deterministic, so unlike times they compare across
 * runs and machines.
 *
 *   icount pair|info|async N
 *       N cuMemAlloc_v2(4 KiB) + cuMemFree_v2 pairs, N cuMemGetInfo_v2
 *       calls, or N cuMemAllocAsync(4 KiB) + cuMemFreeAsync pairs on a
 *       stream (a cuStreamSynchronize after every 128 pairs, counted with
 *       them; the default pool's release threshold at its maximum, so that
 *       the pool keeps and reuses its chunks), in device 0's primary
 *       context.
 *       scripts/bench-icount counts N = 11000 minus N = 1000. Whether the
 *       pair is pooled is the environment's (CUMEMCAP_POOL).
 *   icount marked N WHAT...
 *       for each WHAT (pair, info, async): N / 10 calls to warm up, then
 *       icount_zero(), N calls, icount_dump(): under
 *       `valgrind --tool=callgrind --zero-before=icount_zero
 *       --dump-before=icount_dump` each WHAT's N calls are one dump.
 * Single-threaded (the fake's stream worker aside). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_t)(CUdeviceptr);
typedef CUresult (*info_t)(size_t *, size_t *);
typedef CUresult (*alloc_async_t)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*free_async_t)(CUdeviceptr, CUstream);
typedef CUresult (*stream_create_t)(CUstream *, unsigned);
typedef CUresult (*stream_sync_t)(CUstream);

static alloc_t al;
static free_t fr;
static info_t in;
static alloc_async_t ala;
static free_async_t fra;
static stream_sync_t ssync;
static stream_create_t screate;
static CUstream stream;
static void *lib;

/* Markers for callgrind's --zero-before / --dump-before: never inlined,
 * never merged. */
__attribute__((noinline, used)) void icount_zero(void);
__attribute__((noinline, used)) void icount_dump(const char *what);
__attribute__((noinline, used)) void icount_zero(void)
{
	__asm__ volatile("" ::: "memory");
}
__attribute__((noinline, used)) void icount_dump(const char *what)
{
	__asm__ volatile("" : : "r"(what) : "memory");
}

/* The default pool keeps its chunks (release threshold at its maximum, as
 * frameworks set it; tests/bench/speed does the same). */
static int keep_pool(void)
{
	CUresult (*get_pool)(CUmemoryPool *, CUdevice) = dlsym(lib, "cuDeviceGetDefaultMemPool");
	CUresult (*set_attr)(CUmemoryPool, CUmemPool_attribute, void *) = dlsym(lib, "cuMemPoolSetAttribute");
	CUmemoryPool pool;
	cuuint64_t max = UINT64_MAX;
	if (!get_pool || !set_attr || get_pool(&pool, 0) != CUDA_SUCCESS)
		return 1;
	return set_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max) != CUDA_SUCCESS;
}

static int run(const char *what, int n)
{
	CUdeviceptr p, q[128];
	size_t a, b;
	if (!strcmp(what, "pair")) {
		for (int i = 0; i < n; i++) {
			al(&p, 4096);
			fr(p);
		}
	} else if (!strcmp(what, "info")) {
		for (int i = 0; i < n; i++)
			in(&a, &b);
	} else if (!strcmp(what, "async")) {
		if (!stream && (screate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS || keep_pool()))
			return 1;
		for (int i = 0; i < n; i += 128) {
			int k = n - i < 128 ? n - i : 128;
			for (int j = 0; j < k; j++) {
				ala(&q[j], 4096, stream);
				fra(q[j], stream);
			}
			ssync(stream);
		}
	} else {
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	int n = atoi(argv[2]);
	void *h = lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return 1;
	CUresult (*init)(unsigned) = dlsym(h, "cuInit");
	CUresult (*retain)(CUcontext *, CUdevice) = dlsym(h, "cuDevicePrimaryCtxRetain");
	CUresult (*setc)(CUcontext) = dlsym(h, "cuCtxSetCurrent");
	screate = dlsym(h, "cuStreamCreate");
	al = dlsym(h, "cuMemAlloc_v2");
	fr = dlsym(h, "cuMemFree_v2");
	in = dlsym(h, "cuMemGetInfo_v2");
	ala = dlsym(h, "cuMemAllocAsync");
	fra = dlsym(h, "cuMemFreeAsync");
	ssync = dlsym(h, "cuStreamSynchronize");
	CUcontext c;
	init(0);
	retain(&c, 0);
	setc(c);
	if (strcmp(argv[1], "marked") != 0)
		return argc == 3 ? run(argv[1], n) : 2;
	for (int i = 3; i < argc; i++) {
		if (run(argv[i], n / 10))
			return 2;
		icount_zero();
		run(argv[i], n);
		icount_dump(argv[i]);
	}
	return 0;
}
