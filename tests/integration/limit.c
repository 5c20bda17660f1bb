/* limit: the limit holds on every memory kind, through the door named on
 * the command line (linked, dlsym, procaddr).
 *
 * Run with FAKECUDA_DEVICES=4GiB and CUMEMCAP_LIMIT=1GiB. Every figure is
 * checked against the fake driver's own record as well as the shim's. */
#include <pthread.h>

#include "common.h"

#define LIMIT GiB

static struct api A;
static struct fake F;

/* The fake never held more than the limit, whatever the shim believes. */
static void check_driver_within_limit(void)
{
	CHECK(F.peak_reserved(0) <= LIMIT);
}

/* The door handed out the shim's hook, not the driver's function. */
static void check_hooked(void *fn, const char *exported)
{
	void *hook = shim_symbol(exported);
	if (fn != hook) {
		fprintf(stderr, "door %s: %s is %p, the shim's hook is %p\n", door, exported, fn, hook);
		exit(1);
	}
}

static void capacity_is_the_limit(void)
{
	size_t free_b = 0, total_b = 0, dev_total = 0;
	OK(A.cuMemGetInfo(&free_b, &total_b));
	CHECK(total_b == LIMIT);
	CHECK(free_b <= LIMIT);
	CHECK(free_b > LIMIT / 2); /* nothing allocated yet */
	OK(A.cuDeviceTotalMem(&dev_total, 0));
	CHECK(dev_total == LIMIT);
}

/* TensorFlow's BFC allocator: size from cuMemGetInfo, take it in one go. */
static void tensorflow_style(void)
{
	size_t free_b = 0, total_b = 0;
	OK(A.cuMemGetInfo(&free_b, &total_b));
	size_t big_size = free_b / 10 * 9;
	CUdeviceptr big = 0, more = 0;
	OK(A.cuMemAlloc(&big, big_size));
	CHECK(big % 256 == 0);
	CHECK(F.reserved(0) >= big_size);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&more, free_b / 5));
	check_driver_within_limit();

	/* Free memory as told now reflects what is held. */
	size_t free_after = 0;
	OK(A.cuMemGetInfo(&free_after, &total_b));
	CHECK(free_after <= LIMIT - big_size);

	/* The memory is real: a pattern goes in and comes back out. */
	unsigned char buf[4096];
	OK(A.cuMemsetD8(big + big_size - sizeof(buf), 0x5a, sizeof(buf)));
	OK(A.cuMemcpyDtoH(buf, big + big_size - sizeof(buf), sizeof(buf)));
	for (size_t i = 0; i < sizeof(buf); i++)
		CHECK(buf[i] == 0x5a);

	OK(A.cuMemFree(big));
	CHECK(F.reserved(0) == 0);
	CHECK(shim_stats(0).reserved == 0);
	OK(A.cuMemGetInfo(&free_after, &total_b));
	CHECK(free_after > LIMIT / 2);
}

/* Many small allocations: the last one that fits, then refusal. */
static void fill_with_small_blocks(void)
{
	enum { N = 2048 };
	static CUdeviceptr p[N];
	size_t n = 0;
	CUresult r = CUDA_SUCCESS;
	while (n < N && (r = A.cuMemAlloc(&p[n], 1 * MiB)) == CUDA_SUCCESS)
		n++;
	CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(n == LIMIT / MiB); /* nothing else is held right now */
	check_driver_within_limit();
	CHECK(shim_stats(0).refusals >= 1);
	for (size_t i = 0; i < n; i++)
		OK(A.cuMemFree(p[i]));
	CHECK(F.reserved(0) == 0);
}

static void pitched_and_managed(void)
{
	CUdeviceptr p = 0, m = 0;
	size_t pitch = 0;
	OK(A.cuMemAllocPitch(&p, &pitch, 1000, 1000, 4));
	CHECK(pitch >= 1000);
	CHECK(shim_stats(0).linear == pitch * 1000);
	CHECK(F.reserved(0) == pitch * 1000);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAllocPitch(&p, &pitch, 1 * MiB, 1024, 4));
	OK(A.cuMemAllocManaged(&m, 256 * MiB, CU_MEM_ATTACH_GLOBAL));
	CHECK(shim_stats(0).managed == 256 * MiB);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAllocManaged(&m, LIMIT, CU_MEM_ATTACH_GLOBAL));
	check_driver_within_limit();
	OK(A.cuMemFree(m));
	OK(A.cuMemFree(p));
	CHECK(F.reserved(0) == 0);
	CHECK(shim_stats(0).reserved == 0);
}

static void legacy_32bit(void)
{
	if (!A.cuMemAlloc_legacy) /* the linked door has no name for it */
		return;
	CUdeviceptr_v1 p = 0;
	OK(A.cuMemAlloc_legacy(&p, 64 * MiB));
	CHECK(shim_stats(0).linear == 64 * MiB);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc_legacy(&p, (unsigned int)LIMIT));
	OK(A.cuMemFree_legacy(p));
	CHECK(shim_stats(0).reserved == 0);
	CHECK(F.reserved(0) == 0);
}

/* A stream-ordered pool of the program's own on GPU 0 (pinned device
 * memory). */
static CUmemoryPool device0_pool(void)
{
	CUmemPoolProps props;
	memset(&props, 0, sizeof(props));
	props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	props.location.id = 0;
	CUmemoryPool pool;
	OK(A.cuMemPoolCreate(&pool, &props));
	return pool;
}

/* Stream-ordered allocations are counted by what the pool reserves. */
static void stream_ordered(void)
{
	CUstream s;
	CUmemoryPool pool;
	CUdeviceptr a = 0, b = 0, c = 0;
	cuuint64_t pool_reserved = 0;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(A.cuDeviceGetDefaultMemPool(&pool, 0));

	OK(A.cuMemAllocAsync(&a, 3 * MiB, s));
	OK(A.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &pool_reserved));
	CHECK(pool_reserved >= 3 * MiB);
	CHECK(shim_stats(0).pool == pool_reserved);
	CHECK(F.reserved(0) == pool_reserved);

	/* The per-thread-default-stream entry is hooked too. */
	OK(A.cuMemAllocAsync_ptsz(&b, 100 * MiB, s));
	CHECK(shim_stats(0).pool >= 103 * MiB);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAllocAsync_ptsz(&c, LIMIT - 50 * MiB, s));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAllocAsync(&c, LIMIT, s));
	check_driver_within_limit();

	/* Plain allocations and pools share one limit. */
	CUdeviceptr plain = 0;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&plain, LIMIT - 64 * MiB));

	OK(A.cuMemFreeAsync(a, s));
	OK(A.cuMemFreeAsync_ptsz(b, s));
	OK(A.cuStreamSynchronize(s));
	/* The pool gives its memory back at the synchronization (release
	 * threshold 0); the shim sees it the next time it looks. */
	OK(A.cuMemPoolTrimTo(pool, 0));
	CHECK(F.reserved(0) == 0);
	CHECK(shim_stats(0).reserved == 0);

	/* A pool of the program's own. */
	CUmemoryPool own = device0_pool();
	OK(A.cuMemAllocFromPoolAsync(&a, 512 * MiB, own, s));
	CHECK(shim_stats(0).pool >= 512 * MiB);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAllocFromPoolAsync(&b, 600 * MiB, own, s));
	check_driver_within_limit();
	OK(A.cuMemFreeAsync(a, s));
	OK(A.cuStreamSynchronize(s));
	OK(A.cuMemPoolDestroy(own));
	CHECK(shim_stats(0).reserved == 0);
	CHECK(F.reserved(0) == 0);
	OK(A.cuStreamDestroy(s));
}

/* What the device's pools reserve, by the driver: the shim's pool figure
 * must be the same. */
static cuuint64_t reserved_of(CUmemoryPool p)
{
	cuuint64_t v = 0;
	OK(A.cuMemPoolGetAttribute(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v));
	return v;
}

/* cuMemAllocAsync takes from the device's current pool, which the shim
 * caches: each change of it (cuDeviceSetMemPool, cuMemSetMemPool, the
 * current pool destroyed) must reach the figures at once. */
static void current_pool_changes(void)
{
	CUstream s;
	CUmemoryPool dflt, own;
	CUdeviceptr a = 0;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(A.cuDeviceGetDefaultMemPool(&dflt, 0));
	own = device0_pool();

	/* From the default pool: the shim learns (and keeps) which it is. */
	for (int i = 0; i < 2; i++) {
		OK(A.cuMemAllocAsync(&a, 3 * MiB, s));
		CHECK(reserved_of(dflt) >= 3 * MiB);
		CHECK(shim_stats(0).pool == reserved_of(dflt));
		OK(A.cuMemFreeAsync(a, s));
		OK(A.cuStreamSynchronize(s));
	}
	OK(A.cuMemPoolTrimTo(dflt, 0));
	CHECK(shim_stats(0).pool == 0);

	/* The program's pool becomes current. */
	OK(A.cuDeviceSetMemPool(0, own));
	OK(A.cuMemAllocAsync(&a, 5 * MiB, s));
	CHECK(reserved_of(own) >= 5 * MiB && reserved_of(dflt) == 0);
	CHECK(shim_stats(0).pool == reserved_of(own));
	CHECK(F.reserved(0) == shim_stats(0).reserved);
	OK(A.cuMemFreeAsync(a, s));
	OK(A.cuStreamSynchronize(s));
	OK(A.cuMemPoolTrimTo(own, 0));

	/* Back to the default through the newer call. */
	CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
	OK(A.cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, dflt));
	OK(A.cuMemAllocAsync(&a, 7 * MiB, s));
	CHECK(reserved_of(dflt) >= 7 * MiB && reserved_of(own) == 0);
	CHECK(shim_stats(0).pool == reserved_of(dflt));
	OK(A.cuMemFreeAsync(a, s));
	OK(A.cuStreamSynchronize(s));
	OK(A.cuMemPoolTrimTo(dflt, 0));

	/* The current pool destroyed: the default is current again. */
	OK(A.cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, own));
	OK(A.cuMemAllocAsync(&a, 5 * MiB, s));
	CHECK(shim_stats(0).pool == reserved_of(own));
	OK(A.cuMemFreeAsync(a, s));
	OK(A.cuStreamSynchronize(s));
	OK(A.cuMemPoolDestroy(own));
	OK(A.cuMemAllocAsync(&a, 9 * MiB, s));
	CHECK(reserved_of(dflt) >= 9 * MiB);
	CHECK(shim_stats(0).pool == reserved_of(dflt));
	CHECK(F.reserved(0) == shim_stats(0).reserved);
	OK(A.cuMemFreeAsync(a, s));
	OK(A.cuStreamSynchronize(s));
	OK(A.cuMemPoolTrimTo(dflt, 0));
	CHECK(shim_stats(0).reserved == 0);
	OK(A.cuStreamDestroy(s));
}

/* The context of the stream an allocation names is asked of the driver
 * once per stream, not per allocation (device.c remembers it), and asked
 * again after any stream's destruction (its handle may come back in
 * another context) and any context's death; the figures stay exact. */
static void stream_context_remembered(void)
{
	CUstream s, t;
	CUmemoryPool dflt;
	CUdeviceptr a = 0;
	OK(A.cuDeviceGetDefaultMemPool(&dflt, 0));
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(A.cuMemAllocAsync(&a, 1 * MiB, s));
	OK(A.cuMemFreeAsync(a, s));
	uint64_t asked = F.calls("cuStreamGetCtx");
	for (int i = 0; i < 8; i++) {
		OK(A.cuMemAllocAsync(&a, 1 * MiB, s));
		CHECK(shim_stats(0).pool == reserved_of(dflt));
		OK(A.cuMemFreeAsync(a, s));
	}
	CHECK(F.calls("cuStreamGetCtx") == asked);

	/* Another stream destroyed: s is asked about once more. */
	OK(A.cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
	OK(A.cuStreamDestroy(t));
	asked = F.calls("cuStreamGetCtx");
	for (int i = 0; i < 2; i++) {
		OK(A.cuMemAllocAsync(&a, 1 * MiB, s));
		OK(A.cuMemFreeAsync(a, s));
	}
	CHECK(F.calls("cuStreamGetCtx") == asked + 1);

	/* A context's death: once more again. */
	if (A.cuCtxCreate) {
		CUcontext other;
		CUdevice d;
		OK(A.cuDeviceGet(&d, 0));
		OK(A.cuCtxCreate(&other, 0, d));
		OK(A.cuCtxDestroy(other));
		use_primary(&A, 0);
		asked = F.calls("cuStreamGetCtx");
		for (int i = 0; i < 2; i++) {
			OK(A.cuMemAllocAsync(&a, 1 * MiB, s));
			OK(A.cuMemFreeAsync(a, s));
		}
		CHECK(F.calls("cuStreamGetCtx") == asked + 1);
	}
	OK(A.cuStreamSynchronize(s));
	OK(A.cuMemPoolTrimTo(dflt, 0));
	CHECK(shim_stats(0).pool == 0);
	OK(A.cuStreamDestroy(s));
}

/* Stream-ordered allocations from several threads at once, each on its
 * own stream, from the default pool and from a pool of the program's: the
 * pool table and the queries' order are shared (account.c's locks), and
 * what the pools held leaves the figures exactly when they are trimmed. */
#define POOL_THREADS 4
#define POOL_ROUNDS 300

static CUmemoryPool race_pool, dflt;

static void *pool_racer(void *arg)
{
	int id = (int)(intptr_t)arg;
	use_primary(&A, 0);
	CUstream s;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < POOL_ROUNDS; i++) {
		CUdeviceptr a, b;
		size_t bytes = (size_t)(1 + (i + id) % 5) * MiB;
		OK(A.cuMemAllocAsync(&a, bytes, s));
		OK(A.cuMemAllocFromPoolAsync(&b, bytes + 4096, race_pool, s));
		OK(A.cuMemFreeAsync(a, s));
		OK(A.cuMemFreeAsync(b, s));
		if (i % 16 == 0) {
			OK(A.cuStreamSynchronize(s));
			OK(A.cuMemPoolTrimTo(i % 32 ? race_pool : dflt, 0));
		}
	}
	OK(A.cuStreamSynchronize(s));
	OK(A.cuStreamDestroy(s));
	return NULL;
}

static void pools_from_threads(void)
{
	OK(A.cuDeviceGetDefaultMemPool(&dflt, 0));
	race_pool = device0_pool();
	pthread_t t[POOL_THREADS];
	for (int i = 0; i < POOL_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, pool_racer, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < POOL_THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	/* The pools released memory at the synchronizations, which the shim
	 * learns at its next look at them: here, the trims. */
	OK(A.cuMemPoolTrimTo(dflt, 0));
	OK(A.cuMemPoolTrimTo(race_pool, 0));
	CHECK(reserved_of(dflt) == 0 && reserved_of(race_pool) == 0);
	CHECK(shim_stats(0).pool == 0);
	CHECK(F.reserved(0) == 0 && shim_stats(0).reserved == 0);
	OK(A.cuMemPoolDestroy(race_pool));
	CHECK(shim_stats(0).reserved == 0);
}

/* VMM: physical memory is counted at cuMemCreate. */
static void virtual_memory(void)
{
	CUmemAllocationProp prop;
	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	size_t gran = 0;
	OK(A.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	CHECK(gran == 2 * MiB);
	CUmemGenericAllocationHandle h1, h2;
	OK(A.cuMemCreate(&h1, 768 * MiB, &prop, 0));
	CHECK(shim_stats(0).vmm == 768 * MiB);
	CHECK(F.reserved(0) == 768 * MiB);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemCreate(&h2, 512 * MiB, &prop, 0));
	check_driver_within_limit();
	OK(A.cuMemRelease(h1));
	CHECK(shim_stats(0).reserved == 0);
	CHECK(F.reserved(0) == 0);
}

static void arrays(void)
{
	CUDA_ARRAY_DESCRIPTOR d = { .Width = 4096, .Height = 4096, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 };
	CUarray arr;
	OK(A.cuArrayCreate(&arr, &d)); /* 256 MiB */
	CHECK(shim_stats(0).array == 256 * MiB);
	CHECK(F.reserved(0) == 256 * MiB);
	CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = 1024, .Height = 1024, .Depth = 256,
				       .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4 };
	CUarray arr3;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuArray3DCreate(&arr3, &d3)); /* 1 GiB more */
	d3.Depth = 64;
	OK(A.cuArray3DCreate(&arr3, &d3)); /* 256 MiB */
	check_driver_within_limit();
	OK(A.cuArrayDestroy(arr3));
	OK(A.cuArrayDestroy(arr));
	CHECK(shim_stats(0).reserved == 0);
	CHECK(F.reserved(0) == 0);
}

/* Wrong use gets the driver's own answer, never a crash. */
static void wrong_use(void)
{
	CUdeviceptr p = 0;
	static char not_device_memory[4096];
	CUresult expected = CUDA_ERROR_INVALID_VALUE;
	CHECK_CU(expected, A.cuMemFree((CUdeviceptr)(uintptr_t)not_device_memory));
	CHECK_CU(expected, A.cuMemFree((CUdeviceptr)0xdead0000));
	CHECK_CU(CUDA_SUCCESS, A.cuMemFree(0));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemAlloc(NULL, 1 * MiB));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemAlloc(&p, 0));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemGetInfo(NULL, NULL));
	/* Double free: the second is the driver's error and changes nothing. */
	OK(A.cuMemAlloc(&p, 1 * MiB));
	OK(A.cuMemFree(p));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemFree(p));
	CHECK(shim_stats(0).reserved == 0);
	/* With no current context the driver answers, not the shim. */
	OK(A.cuCtxSetCurrent(NULL));
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, A.cuMemAlloc(&p, 1 * MiB));
	size_t f, t;
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, A.cuMemGetInfo(&f, &t));
}

/* Destroying a context frees what was allocated in it. */
static void context_destroy(void)
{
	if (!A.cuCtxCreate)
		return;
	CUcontext ctx, primary;
	CUdevice d;
	OK(A.cuDeviceGet(&d, 0));
	OK(A.cuCtxCreate(&ctx, 0, d));
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 900 * MiB));
	CHECK(shim_stats(0).reserved == 900 * MiB);
	OK(A.cuCtxDestroy(ctx));
	CHECK(F.reserved(0) == 0);
	CHECK(shim_stats(0).reserved == 0);
	OK(A.cuDevicePrimaryCtxRetain(&primary, d));
	OK(A.cuCtxSetCurrent(primary));
	OK(A.cuMemAlloc(&p, 900 * MiB)); /* would be refused if still counted */
	OK(A.cuMemFree(p));
}

int main(int argc, char **argv)
{
	load_api(argc, argv, &A, &F);
	if (strcmp(door, "linked") != 0) {
		check_hooked((void *)A.cuMemAlloc, "cuMemAlloc_v2");
		check_hooked((void *)A.cuMemGetInfo, "cuMemGetInfo_v2");
		check_hooked((void *)A.cuMemAllocAsync_ptsz, "cuMemAllocAsync_ptsz");
		check_hooked((void *)A.cuMemCreate, "cuMemCreate");
		check_hooked((void *)A.cuGetProcAddress, "cuGetProcAddress_v2");
		if (A.cuMemAlloc_legacy)
			check_hooked((void *)A.cuMemAlloc_legacy, "cuMemAlloc");
	}
	use_primary(&A, 0);
	capacity_is_the_limit();
	tensorflow_style();
	fill_with_small_blocks();
	pitched_and_managed();
	legacy_32bit();
	stream_ordered();
	current_pool_changes();
	stream_context_remembered();
	pools_from_threads();
	virtual_memory();
	arrays();
	context_destroy();
	wrong_use();
	check_driver_within_limit();
	printf("limit (%s door): all checks passed; driver peak %" PRIu64 " MiB of %" PRIu64 " MiB\n", door,
	       (uint64_t)(F.peak_reserved(0) / MiB), (uint64_t)(LIMIT / MiB));
	return 0;
}
