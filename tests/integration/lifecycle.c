/* lifecycle: the books through every context's life and death, every
 * stream-ordered pool and several contexts on one GPU.
 *
 *   lifecycle DOOR CASE
 *
 * Each case is run by meson through every door and with CUMEMCAP_POOL=on,
 * nopack and off, and asserts on the fake driver's own record as well as
 * on the shim's figures. "stress" is the multi-thread case (seed printed;
 * LIFECYCLE_SEED repeats one). */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static struct api A;
static struct fake F;

static const char *pool_mode(void)
{
	const char *p = getenv("CUMEMCAP_POOL");
	return p ? p : "on";
}

static bool pooled(void)
{
	return strcmp(pool_mode(), "off") != 0;
}

static CUcontext create_ctx(int dev)
{
	CUcontext ctx;
	CUdevice d;
	OK(A.cuDeviceGet(&d, dev));
#ifdef DOOR_LINKED
	if (!A.cuCtxCreate) {
		OK(cuCtxCreate_v4(&ctx, NULL, 0, d));
		return ctx;
	}
#endif
	OK(A.cuCtxCreate(&ctx, 0, d));
	return ctx;
}

/* The shim's figures equal the driver's record on dev. */
static void books_match(int dev)
{
	struct cumemcap_stats s = shim_stats(dev);
	if (s.reserved != F.reserved(dev)) {
		fprintf(stderr, "GPU %d: shim reserved %" PRIu64 ", driver %" PRIu64 "\n", dev, s.reserved,
			F.reserved(dev));
		exit(1);
	}
}

static void books_empty(int dev)
{
	struct cumemcap_stats s = shim_stats(dev);
	CHECK(F.reserved(dev) == 0);
	CHECK(s.reserved == 0);
	CHECK(s.live == 0);
	CHECK(s.pooled == 0);
	CHECK(s.linear == 0);
}

static void write_read(CUdeviceptr p, size_t n, unsigned char v)
{
	unsigned char *buf = malloc(n), *back = malloc(n);
	CHECK(buf && back);
	memset(buf, v, n);
	OK(A.cuMemcpyHtoD(p, buf, n));
	OK(A.cuMemcpyDtoH(back, p, n));
	CHECK(memcmp(buf, back, n) == 0);
	free(buf);
	free(back);
}

/* ---- 1. the last release of a primary context --------------------------------- */

typedef CUresult(CUDAAPI *release_fn)(CUdevice);

static void release_last_with(release_fn release)
{
	CUcontext ctx, again;
	CUdeviceptr big, small, kept, q;
	OK(A.cuInit(0));
	OK(A.cuDevicePrimaryCtxRetain(&ctx, 0));
	OK(A.cuCtxSetCurrent(ctx));
	OK(A.cuMemAlloc(&big, 256 * MiB));
	OK(A.cuMemAlloc(&small, 64 * 1024));
	OK(A.cuMemAlloc(&kept, MiB));
	write_read(kept, MiB, 0x5a);
	OK(A.cuMemFree(big));
	OK(A.cuMemFree(small)); /* pooled: both wait in the arena's cache */
	books_match(0);
	OK(release(0)); /* the last reference: the driver frees everything */
	books_empty(0);
	/* Re-retained: the same handle, a clean context. A block handed
	 * out of a segment the driver freed would fail the copies. */
	OK(A.cuDevicePrimaryCtxRetain(&again, 0));
	OK(A.cuCtxSetCurrent(again));
	OK(A.cuMemAlloc(&q, 256 * MiB));
	write_read(q, 4096, 0xa5);
	books_match(0);
	/* The idle release (0.2 s here) must not give the driver the dead
	 * segments' addresses: they may be the program's new memory. */
	usleep(700 * 1000);
	write_read(q, 4096, 0x3c);
	CHECK(F.live_allocations(0) >= 1);
	books_match(0);
	OK(A.cuMemFree(q));
	OK(A.cuDevicePrimaryCtxRelease(0));
	books_empty(0);
}

static void release_last(void)
{
	release_last_with(A.cuDevicePrimaryCtxRelease);
	if (A.cuDevicePrimaryCtxRelease_legacy)
		release_last_with(A.cuDevicePrimaryCtxRelease_legacy);
}

/* ---- resets, active and not ------------------------------------------------------ */

static void reset_with(release_fn reset)
{
	CUcontext ctx;
	CUdeviceptr p, c;
	unsigned int flags;
	int active;
	/* Active: everything it holds goes; it stays retained, fresh. */
	OK(A.cuInit(0));
	OK(A.cuDevicePrimaryCtxRetain(&ctx, 0));
	OK(A.cuCtxSetCurrent(ctx));
	OK(A.cuMemAlloc(&p, 128 * MiB));
	OK(A.cuMemAlloc(&c, 64 * MiB));
	OK(A.cuMemFree(c));
	OK(reset(0));
	books_empty(0);
	OK(A.cuDevicePrimaryCtxGetState(0, &flags, &active));
	CHECK(active == 1);
	OK(A.cuMemAlloc(&p, 32 * MiB));
	write_read(p, 4096, 0x11);
	books_match(0);
	CHECK(shim_stats(0).live == 32 * MiB);
	OK(A.cuMemFree(p));
	OK(A.cuDevicePrimaryCtxRelease(0));
	books_empty(0);
	/* Inactive: legal, and nothing of a new context is lost. */
	OK(reset(0));
	OK(A.cuDevicePrimaryCtxRetain(&ctx, 0));
	OK(A.cuCtxSetCurrent(ctx));
	OK(A.cuMemAlloc(&p, 16 * MiB));
	books_match(0);
	CHECK(shim_stats(0).live == 16 * MiB);
	OK(A.cuMemFree(p));
	OK(A.cuDevicePrimaryCtxRelease(0));
	books_empty(0);
}

static void reset(void)
{
	reset_with(A.cuDevicePrimaryCtxReset);
	if (A.cuDevicePrimaryCtxReset_legacy)
		reset_with(A.cuDevicePrimaryCtxReset_legacy);
}

/* ---- 3. stream-ordered pools ------------------------------------------------------ */

/* Memory a pool trimmed at a synchronization is free again for a plain
 * allocation and in cuMemGetInfo (limit 64 MiB). */
static void pool_trim(void)
{
	CUdeviceptr a, p;
	size_t fr, tot;
	use_primary(&A, 0);
	for (int i = 0; i < 2; i++) {
		OK(A.cuMemAllocAsync(&a, 48 * MiB, NULL));
		OK(A.cuMemFreeAsync(a, NULL));
		OK(A.cuCtxSynchronize()); /* the default pool trims to its threshold, 0 */
		CHECK(F.reserved(0) == 0);
		if (i == 0) { /* the allocation sees it first */
			OK(A.cuMemAlloc(&p, 32 * MiB));
			OK(A.cuMemGetInfo(&fr, &tot));
			CHECK(tot == 64 * MiB && fr == 32 * MiB);
		} else { /* cuMemGetInfo sees it first */
			OK(A.cuMemGetInfo(&fr, &tot));
			CHECK(tot == 64 * MiB && fr == 64 * MiB);
			OK(A.cuMemAlloc(&p, 32 * MiB));
		}
		books_match(0);
		OK(A.cuMemFree(p));
		OK(A.cuCtxSynchronize());
	}
}

/* At the limit, async allocations never push the figures past it, not
 * even the peaks (limit 64 MiB). */
static void pool_peak(void)
{
	CUdeviceptr p[64];
	int n = 0;
	CUresult r;
	use_primary(&A, 0);
	while ((r = A.cuMemAllocAsync(&p[n], 6 * MiB, NULL)) == CUDA_SUCCESS)
		CHECK(++n < 64);
	CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(n == 10);
	struct cumemcap_stats s = shim_stats(0);
	CHECK(s.reserved <= 64 * MiB);
	CHECK(s.peak_reserved <= 64 * MiB);
	CHECK(F.peak_reserved(0) <= 64 * MiB);
	books_match(0);
	for (int i = 0; i < n; i++)
		OK(A.cuMemFreeAsync(p[i], NULL));
	OK(A.cuCtxSynchronize());
	CUdeviceptr q;
	OK(A.cuMemAlloc(&q, 60 * MiB));
	OK(A.cuMemFree(q));
	CHECK(shim_stats(0).peak_reserved <= 64 * MiB);
}

/* A pool is charged to its own device, whatever context allocates from
 * it (GPU 0: 1 GiB, GPU 1: 64 MiB). */
static void pool_other_device(void)
{
	CUmemoryPool pool1;
	CUdeviceptr p, q;
	CUstream s1;
	CUcontext c1, popped;
	OK(A.cuInit(0));
	OK(A.cuDevicePrimaryCtxRetain(&c1, 1));
	OK(A.cuCtxPushCurrent(c1));
	OK(A.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	OK(A.cuCtxPopCurrent(&popped));
	use_primary(&A, 0);
	OK(A.cuDeviceGetDefaultMemPool(&pool1, 1));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAllocFromPoolAsync(&p, 1 * GiB, pool1, NULL));
	CHECK(F.reserved(1) == 0);
	OK(A.cuMemAllocFromPoolAsync(&p, 32 * MiB, pool1, NULL));
	CHECK(shim_stats(1).pool == 32 * MiB);
	CHECK(shim_stats(0).pool == 0);
	/* cuMemAllocAsync on a stream of GPU 1's context takes GPU 1's pool. */
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAllocAsync(&q, 48 * MiB, s1));
	OK(A.cuMemAllocAsync(&q, 16 * MiB, s1));
	CHECK(shim_stats(1).pool == 48 * MiB);
	CHECK(F.reserved(1) == 48 * MiB);
	CHECK(F.peak_reserved(1) <= 64 * MiB);
	books_match(0);
	books_match(1);
	OK(A.cuMemFreeAsync(p, NULL));
	OK(A.cuMemFreeAsync(q, s1));
	OK(A.cuStreamSynchronize(s1));
	OK(A.cuStreamDestroy(s1));
}

/* With no limit a pool's growth is left unread and read back when
 * the figures are read (account.h): the stats still see every byte the
 * pools reserve, and the peaks count growth that a synchronization
 * released before anything read it, at the pool's high watermark (no
 * limit: this case runs without one). */
/* A peak of `reserved` without a limit, as ledger.h's rule has it: never
 * under, over by at most 64 KiB for each other thread that moved the
 * figure (the shim's worker may read the pools too). */
static bool peak_is(uint64_t peak, uint64_t exact)
{
	if (peak < exact || peak > exact + 2 * (64 << 10)) {
		fprintf(stderr, "peak_reserved %" PRIu64 ", driver's peak %" PRIu64 "\n", peak, exact);
		return false;
	}
	return true;
}

static void pool_growth_unread(void)
{
	CUmemoryPool mine;
	CUdeviceptr a, b;
	use_primary(&A, 0);
	CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
	/* A pool of the program's grows by 8 MiB and gives it back at a
	 * synchronization (threshold 0), then is destroyed: nothing read
	 * the figures in between. */
	OK(A.cuMemPoolCreate(&mine, &props));
	OK(A.cuMemAllocFromPoolAsync(&a, 8 * MiB, mine, NULL));
	OK(A.cuMemFreeAsync(a, NULL));
	OK(A.cuCtxSynchronize());
	CHECK(F.reserved(0) == 0);
	OK(A.cuMemPoolDestroy(mine));
	struct cumemcap_stats s = shim_stats(0);
	CHECK(s.pool == 0 && s.reserved == 0);
	CHECK(peak_is(s.peak_reserved, 8 * MiB) && F.peak_reserved(0) == 8 * MiB);
	/* The default pool: a block of 4 KiB takes 2 MiB, read right away. */
	OK(A.cuMemAllocAsync(&a, 4096, NULL));
	s = shim_stats(0);
	CHECK(s.pool == 2 * MiB && s.live == 4096);
	books_match(0);
	/* It grows by 48 MiB more and trims back at a synchronization before
	 * any read: the peak saw it; the figures follow the pool down. */
	OK(A.cuMemAllocAsync(&b, 48 * MiB, NULL));
	OK(A.cuMemFreeAsync(b, NULL));
	OK(A.cuMemFreeAsync(a, NULL));
	OK(A.cuCtxSynchronize());
	CHECK(F.reserved(0) == 0);
	s = shim_stats(0);
	CHECK(s.pool == 0 && s.live == 0);
	CHECK(peak_is(s.peak_reserved, 50 * MiB) && F.peak_reserved(0) == 50 * MiB);
	books_match(0);
	/* Growth kept by the pool is read by cuMemPoolTrimTo's hook before
	 * the trim gives it back. */
	OK(A.cuMemAllocAsync(&a, 64 * MiB, NULL));
	OK(A.cuMemFreeAsync(a, NULL));
	OK(A.cuStreamSynchronize(NULL));
	CUmemoryPool dflt;
	OK(A.cuDeviceGetDefaultMemPool(&dflt, 0));
	OK(A.cuMemPoolTrimTo(dflt, 0));
	s = shim_stats(0);
	CHECK(s.pool == 0 && peak_is(s.peak_reserved, 64 * MiB) && F.peak_reserved(0) == 64 * MiB);
	books_match(0);
	/* cuMemFreeAsync looks in the record map first, then the arenas: an
	 * arena's block (cuMemAlloc, pooled) freed in stream order
	 * leaves the books, and a second free is the driver's error. */
	if (!pooled())
		return; /* the driver's cuMemFreeAsync refuses cuMemAlloc's blocks */
	uint64_t frees = s.frees;
	OK(A.cuMemAlloc(&a, 4096));
	OK(A.cuMemFreeAsync(a, NULL));
	OK(A.cuCtxSynchronize());
	s = shim_stats(0);
	CHECK(s.live == 0 && s.frees == frees + 1);
	CHECK(A.cuMemFreeAsync(a, NULL) != CUDA_SUCCESS);
	CHECK(shim_stats(0).frees == frees + 1);
}

/* Owed growth with threads: four allocate from the default pool on their
 * own streams (growing it, and trimming it at their synchronizations)
 * while the main thread reads the figures; at the end the books match
 * the driver's, and the peak is the pool's, within the rule (no limit). */
static CUcontext unread_ctx;
static _Atomic int unread_running;

static void *unread_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	CUstream st;
	CUdeviceptr p[8];
	OK(A.cuCtxSetCurrent(unread_ctx));
	OK(A.cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
	for (int round = 0; round < 200; round++) {
		int n = 1 + (int)(rand_r(&seed) % 8);
		for (int i = 0; i < n; i++)
			OK(A.cuMemAllocAsync(&p[i], 1 + rand_r(&seed) % (3 * MiB), st));
		for (int i = 0; i < n; i++)
			OK(A.cuMemFreeAsync(p[i], st));
		if (rand_r(&seed) % 4 == 0)
			OK(A.cuStreamSynchronize(st));
	}
	OK(A.cuStreamSynchronize(st));
	OK(A.cuStreamDestroy(st));
	atomic_fetch_sub(&unread_running, 1);
	return NULL;
}

static void pool_growth_unread_threads(void)
{
	enum { T = 4 };
	pthread_t t[T];
	unread_ctx = use_primary(&A, 0);
	atomic_store(&unread_running, T);
	for (int i = 0; i < T; i++)
		CHECK(pthread_create(&t[i], NULL, unread_thread, (void *)(uintptr_t)(i * 7919 + 1)) == 0);
	while (atomic_load(&unread_running) > 0) {
		struct cumemcap_stats s = shim_stats(0);
		CHECK(s.reserved == s.pool && s.peak_reserved >= s.reserved);
	}
	for (int i = 0; i < T; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	OK(A.cuCtxSynchronize());
	struct cumemcap_stats s = shim_stats(0);
	CHECK(s.live == 0 && s.pool == F.reserved(0));
	books_match(0);
	CHECK(s.peak_reserved >= F.peak_reserved(0) && s.peak_reserved <= F.peak_reserved(0) + (T + 2) * (64 << 10));
}

/* Any number of pools is counted: past the 256th too (limit 1 GiB, 600
 * pools of 2 MiB, so the limit is reached at the 512th). */
static void many_pools(void)
{
	enum { N = 600 };
	static CUmemoryPool pools[N];
	static CUdeviceptr p[N];
	int ok = 0;
	use_primary(&A, 0);
	CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
				 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
	for (int i = 0; i < N; i++) {
		OK(A.cuMemPoolCreate(&pools[i], &props));
		CUresult r = A.cuMemAllocFromPoolAsync(&p[i], 2 * MiB, pools[i], NULL);
		CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY);
		if (r == CUDA_SUCCESS)
			ok++;
		else
			p[i] = 0;
	}
	CHECK(ok == 512);
	CHECK(F.peak_reserved(0) <= GiB);
	books_match(0);
	for (int i = 0; i < N; i++) {
		if (p[i])
			OK(A.cuMemFreeAsync(p[i], NULL));
	}
	OK(A.cuCtxSynchronize());
	for (int i = 0; i < N; i++)
		OK(A.cuMemPoolDestroy(pools[i]));
	books_empty(0);
}

/* ---- 4. several contexts on one GPU ----------------------------------------------- */

/* One limit per GPU: what one context caches is given back before another
 * is refused, for pooled requests and for every other kind (limit 1 GiB,
 * CUMEMCAP_RELEASE=never). */
static void two_contexts(void)
{
	CUcontext a = use_primary(&A, 0);
	CUdeviceptr p[3], m, q;
	size_t fr, tot;
	for (int i = 0; i < 3; i++)
		OK(A.cuMemAlloc(&p[i], 256 * MiB));
	for (int i = 0; i < 3; i++)
		OK(A.cuMemFree(p[i])); /* pooled: A caches 768 MiB */
	CUcontext b = create_ctx(0);
	OK(A.cuMemAlloc(&q, 512 * MiB)); /* a segment for B: A's cache goes */
	books_match(0);
	OK(A.cuMemGetInfo(&fr, &tot));
	CHECK(tot == GiB && fr == 512 * MiB);
	OK(A.cuMemFree(q)); /* pooled: B caches 512 MiB */
	OK(A.cuCtxSetCurrent(a));
	OK(A.cuMemAllocManaged(&m, 768 * MiB, CU_MEM_ATTACH_GLOBAL)); /* B's cache goes */
	OK(A.cuMemGetInfo(&fr, &tot));
	CHECK(tot == GiB && fr == 256 * MiB);
	CHECK(F.peak_reserved(0) <= GiB);
	books_match(0);
	OK(A.cuMemFree(m));
	OK(A.cuCtxDestroy(b));
	books_match(0);
}

/* One preallocation per GPU (CUMEMCAP_GROWTH=preallocate:256MiB, limit
 * 512 MiB): a second context allocates on demand. */
static void prealloc_two_contexts(void)
{
	CUdeviceptr p, q;
	use_primary(&A, 0);
	OK(A.cuMemAlloc(&p, MiB));
	CUcontext b = create_ctx(0);
	OK(A.cuMemAlloc(&q, 64 * MiB));
	CHECK(F.reserved(0) == (pooled() ? 256 * MiB : MiB) + 64 * MiB);
	books_match(0);
	OK(A.cuMemFree(q));
	OK(A.cuCtxDestroy(b));
}

/* ---- physical memory on the host ---------------------------------------------------- */

/* cuMemCreate with a host location makes host memory (NCCL, ggml): never
 * charged to a GPU, whatever its size (limit 64 MiB). */
static void vmm_host(void)
{
	size_t fr, tot;
	use_primary(&A, 0);
	OK(A.cuMemGetInfo(&fr, &tot)); /* the shim knows the GPU from here on */
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { .type = CU_MEM_LOCATION_TYPE_HOST } };
	CUmemGenericAllocationHandle h[3];
	OK(A.cuMemCreate(&h[0], 256 * MiB, &prop, 0));
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
	prop.location.id = 0;
	OK(A.cuMemCreate(&h[1], 256 * MiB, &prop, 0));
	prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
	OK(A.cuMemCreate(&h[2], 256 * MiB, &prop, 0));
	struct cumemcap_stats s = shim_stats(0);
	CHECK(s.vmm == 0 && s.reserved == 0 && s.refusals == 0);
	CHECK(F.reserved(0) == 0);
	/* device memory is still counted */
	CUmemGenericAllocationHandle d;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemCreate(&d, 128 * MiB, &prop, 0));
	OK(A.cuMemCreate(&d, 64 * MiB, &prop, 0));
	CHECK(shim_stats(0).vmm == 64 * MiB);
	OK(A.cuMemRelease(d));
	for (int i = 0; i < 3; i++)
		OK(A.cuMemRelease(h[i]));
	books_match(0);
}

/* ---- 5. capacity never fails open ------------------------------------------------- */

static void meminfo_no_context(void)
{
	size_t fr = 7, tot = 7;
	OK(A.cuInit(0));
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, A.cuMemGetInfo(&fr, &tot));
	CHECK(fr == 7 && tot == 7);
	size_t t;
	OK(A.cuDeviceTotalMem(&t, 0));
	CHECK(t == 64 * MiB);
}

/* One GPU: cuMemGetInfo knows its device without asking for the current
 * context (the driver's own answer says whether there is one), and still
 * answers the capped figures, or the driver's error without a context.
 * Counted: this thread's calls (the worker's arena tick may ask). */
static void meminfo_one_gpu(void)
{
	CUcontext ctx;
	CUdeviceptr p;
	size_t fr, tot;
	OK(A.cuInit(0));
	OK(A.cuDevicePrimaryCtxRetain(&ctx, 0));
	OK(A.cuCtxSetCurrent(ctx));
	OK(A.cuMemAlloc(&p, 16 * MiB)); /* GPU 0 is known */
	uint64_t asked = F.thread_calls("cuCtxGetCurrent");
	for (int i = 0; i < 100; i++) {
		OK(A.cuMemGetInfo(&fr, &tot));
		CHECK(tot == 64 * MiB && fr <= 48 * MiB);
	}
	CHECK(F.thread_calls("cuCtxGetCurrent") == asked);
	OK(A.cuCtxSetCurrent(NULL));
	fr = tot = 7;
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, A.cuMemGetInfo(&fr, &tot));
	CHECK(fr == 7 && tot == 7);
	OK(A.cuCtxSetCurrent(ctx));
	OK(A.cuMemFree(p));
	OK(A.cuMemGetInfo(&fr, &tot));
	CHECK(tot == 64 * MiB);
	OK(A.cuDevicePrimaryCtxRelease(0));
}

/* No limit: cuMemGetInfo's answer is the driver's figures plus what the
 * arenas cache, which no pool's figure changes, so it asks the driver
 * nothing about the pools even while pool bytes are counted (under a
 * limit it reads them again: pool-trim). The calls counted are this
 * thread's: the shim's worker may read the pools at its footprint tick
 * (counting every thread's once failed under ThreadSanitizer's timing). */
static void meminfo_pool_no_limit(void)
{
	CUdeviceptr a;
	size_t fr, tot;
	use_primary(&A, 0);
	OK(A.cuMemAllocAsync(&a, 4096, NULL));
	struct cumemcap_stats s = shim_stats(0); /* the pool's growth, read */
	CHECK(s.pool == 2 * MiB && s.limit == CUMEMCAP_NO_LIMIT_VALUE);
	uint64_t asked = F.thread_calls("cuMemPoolGetAttribute");
	for (int i = 0; i < 100; i++) {
		OK(A.cuMemGetInfo(&fr, &tot));
		CHECK(tot == 4 * GiB && fr == 4 * GiB - F.reserved(0) + s.pooled);
	}
	CHECK(F.thread_calls("cuMemPoolGetAttribute") == asked);
	OK(A.cuMemFreeAsync(a, NULL));
	OK(A.cuCtxSynchronize());
	s = shim_stats(0);
	CHECK(s.pool == 0 && s.live == 0);
	books_match(0);
}

/* A stream this thread used is known to the shim without the driver: a
 * stream-ordered allocation on it with no context current is the
 * driver's to refuse, and the shim's figures do not move (64 MiB limit,
 * so the allocation is charged before the driver answers). */
static void async_stream_no_context(void)
{
	CUcontext ctx = use_primary(&A, 0);
	CUstream s = used_stream(&A);
	CUdeviceptr a;
	struct cumemcap_stats s0 = shim_stats(0);
	books_match(0);
	uint64_t driver0 = F.reserved(0), live0 = F.live_allocations(0);
	OK(A.cuCtxSetCurrent(NULL));
	CHECK_CU(CUDA_ERROR_INVALID_CONTEXT, A.cuMemAllocAsync(&a, 4 * MiB, s));
	struct cumemcap_stats s1 = shim_stats(0);
	CHECK(s1.reserved == s0.reserved && s1.pool == s0.pool && s1.live == s0.live);
	CHECK(s1.allocs == s0.allocs && s1.refusals == s0.refusals && s1.driver_oom == s0.driver_oom);
	CHECK(F.reserved(0) == driver0 && F.live_allocations(0) == live0);
	OK(A.cuCtxSetCurrent(ctx));
	OK(A.cuMemAllocAsync(&a, 4 * MiB, s)); /* the same stream, a context current: counted */
	CHECK(shim_stats(0).live == s0.live + 4 * MiB);
	OK(A.cuMemFreeAsync(a, s));
	OK(A.cuStreamDestroy(s));
	OK(A.cuCtxSynchronize());
	CHECK(shim_stats(0).live == s0.live);
}

/* ---- 2. the stress ---------------------------------------------------------------- */

/* Threads that retain GPU 0's or 1's primary context and allocate without
 * ever freeing (their memory goes with the resets and last releases),
 * threads that churn allocations and frees (pooled, async from their own
 * and the other GPU's pools, VMM) in contexts they create and destroy with
 * memory still live, a thread that checks cuMemGetInfo, and one that
 * resets the primary contexts and releases them while the others work.
 * After each phase everything dies, and the shim's figures must equal the
 * driver's record: no drift, and never over the limit in either's peaks. */
#define DEVS 2
#define LIMIT (256 * MiB)
static _Atomic bool stop;
static _Atomic unsigned long failures;

static unsigned long next_rand(unsigned long *s)
{
	*s = *s * 6364136223846793005ul + 1442695040888963407ul;
	return *s >> 33;
}

static void fail(const char *what, CUresult r)
{
	fprintf(stderr, "stress: %s returned %d\n", what, (int)r);
	atomic_fetch_add(&failures, 1);
}

static bool expected(CUresult r)
{
	/* Out of memory at the limit; a context that died under the call. */
	return r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY || r == CUDA_ERROR_INVALID_CONTEXT ||
	       r == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

static void *victim(void *arg)
{
	unsigned long seed = (unsigned long)(uintptr_t)arg;
	int dev = (int)(seed & 1);
	while (!atomic_load(&stop)) {
		CUcontext ctx;
		CUresult r = A.cuDevicePrimaryCtxRetain(&ctx, dev);
		if (r != CUDA_SUCCESS) {
			fail("retain", r);
			continue;
		}
		A.cuCtxSetCurrent(ctx);
		for (int i = 0; i < 8; i++) {
			CUdeviceptr p;
			size_t n = (next_rand(&seed) % 4096 + 1) * 4096;
			switch (next_rand(&seed) % 4) {
			case 0:
			case 1: r = A.cuMemAlloc(&p, n); break;
			case 2: r = A.cuMemAllocAsync(&p, n, NULL); break;
			default: r = A.cuMemAllocManaged(&p, n, CU_MEM_ATTACH_GLOBAL); break;
			}
			if (!expected(r))
				fail("victim alloc", r);
		}
		r = A.cuDevicePrimaryCtxRelease(dev);
		if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_CONTEXT) /* after a reset */
			fail("release", r);
	}
	A.cuCtxSetCurrent(NULL);
	return NULL;
}

static void *churner(void *arg)
{
	unsigned long seed = (unsigned long)(uintptr_t)arg;
	int dev = (int)(seed & 1);
	size_t gran = 2 * MiB;
	while (!atomic_load(&stop)) {
		CUcontext ctx = create_ctx(dev);
		CUmemoryPool other;
		OK(A.cuDeviceGetDefaultMemPool(&other, 1 - dev));
		CUdeviceptr held[32];
		int n = 0;
		for (int i = 0; i < 64; i++) {
			CUdeviceptr p;
			CUresult r;
			size_t sz = (next_rand(&seed) % 2048 + 1) * 1024;
			unsigned op = (unsigned)(next_rand(&seed) % 6);
			if (op == 0 && n > 0) {
				int k = (int)(next_rand(&seed) % (unsigned long)n);
				r = A.cuMemFree(held[k]);
				if (r != CUDA_SUCCESS)
					r = A.cuMemFreeAsync(held[k], NULL);
				if (r != CUDA_SUCCESS)
					fail("churn free", r);
				held[k] = held[--n];
				continue;
			}
			if (op == 1) {
				r = A.cuMemAllocAsync(&p, sz, NULL);
			} else if (op == 2) {
				r = A.cuMemAllocFromPoolAsync(&p, sz, other, NULL);
			} else if (op == 3) {
				CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
							     .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE,
									   .id = dev } };
				CUmemGenericAllocationHandle h;
				r = A.cuMemCreate(&h, gran, &prop, 0);
				if (r == CUDA_SUCCESS && A.cuMemRelease(h) != CUDA_SUCCESS)
					fail("vmm release", r);
				if (!expected(r))
					fail("vmm", r);
				continue;
			} else {
				r = A.cuMemAlloc(&p, sz);
			}
			if (!expected(r))
				fail("churn alloc", r);
			if (r == CUDA_SUCCESS && n < 32)
				held[n++] = p;
			else if (r == CUDA_SUCCESS && A.cuMemFree(p) != CUDA_SUCCESS)
				A.cuMemFreeAsync(p, NULL);
		}
		/* Destroyed with memory live: the destroy frees it. */
		CUresult r = A.cuCtxDestroy(ctx);
		if (r != CUDA_SUCCESS)
			fail("destroy", r);
	}
	return NULL;
}

static void *watcher(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		CUcontext ctx;
		int dev = rand() & 1;
		if (A.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
			continue;
		A.cuCtxSetCurrent(ctx);
		for (int i = 0; i < 50; i++) {
			size_t fr, tot;
			CUresult r = A.cuMemGetInfo(&fr, &tot);
			if (r == CUDA_SUCCESS && (tot != LIMIT || fr > LIMIT)) {
				fprintf(stderr, "stress: cuMemGetInfo said %zu free of %zu\n", fr, tot);
				atomic_fetch_add(&failures, 1);
			} else if (!expected(r)) {
				fail("cuMemGetInfo", r);
			}
		}
		A.cuCtxSetCurrent(NULL);
		A.cuDevicePrimaryCtxRelease(dev);
	}
	return NULL;
}

static void *killer(void *arg)
{
	unsigned long seed = (unsigned long)(uintptr_t)arg;
	while (!atomic_load(&stop)) {
		int dev = (int)(next_rand(&seed) & 1);
		CUresult r = (next_rand(&seed) & 1) ? A.cuDevicePrimaryCtxReset(dev)
						     : (A.cuDevicePrimaryCtxReset_legacy
							    ? A.cuDevicePrimaryCtxReset_legacy(dev)
							    : A.cuDevicePrimaryCtxReset(dev));
		if (r != CUDA_SUCCESS)
			fail("reset", r);
		usleep((useconds_t)(next_rand(&seed) % 3000));
	}
	return NULL;
}

static void stress(void)
{
	unsigned long seed = (unsigned long)time(NULL);
	const char *fixed = getenv("LIFECYCLE_SEED");
	if (fixed)
		seed = strtoul(fixed, NULL, 0);
	printf("stress: seed %lu (LIFECYCLE_SEED=%lu repeats this run)\n", seed, seed);
	fflush(stdout);
	srand((unsigned)seed);
	OK(A.cuInit(0));
	for (int phase = 0; phase < 4; phase++) {
		enum { V = 3, C = 2 };
		pthread_t t[V + C + 2];
		atomic_store(&stop, false);
		int k = 0;
		for (int i = 0; i < V; i++)
			CHECK(pthread_create(&t[k++], NULL, victim, (void *)(uintptr_t)(seed + (unsigned long)i * 7919 + (unsigned long)phase)) == 0);
		for (int i = 0; i < C; i++)
			CHECK(pthread_create(&t[k++], NULL, churner, (void *)(uintptr_t)(seed * 31 + (unsigned long)i + (unsigned long)phase)) == 0);
		CHECK(pthread_create(&t[k++], NULL, watcher, NULL) == 0);
		CHECK(pthread_create(&t[k++], NULL, killer, (void *)(uintptr_t)(seed ^ (unsigned long)phase)) == 0);
		usleep(400 * 1000);
		atomic_store(&stop, true);
		for (int i = 0; i < k; i++)
			pthread_join(t[i], NULL);
		/* Everything dies: the primary contexts are reset (the
		 * victims may still hold references; a reset frees all the
		 * same), the pools give back what they keep. */
		for (int d = 0; d < DEVS; d++) {
			CUcontext ctx;
			CUmemoryPool pool;
			OK(A.cuDevicePrimaryCtxReset(d));
			OK(A.cuDevicePrimaryCtxRetain(&ctx, d));
			OK(A.cuCtxSetCurrent(ctx));
			OK(A.cuCtxSynchronize());
			OK(A.cuDeviceGetDefaultMemPool(&pool, d));
			OK(A.cuMemPoolTrimTo(pool, 0));
			size_t fr, tot;
			OK(A.cuMemGetInfo(&fr, &tot));
			CHECK(tot == LIMIT && fr == LIMIT);
			OK(A.cuDevicePrimaryCtxRelease(d));
		}
		for (int d = 0; d < DEVS; d++) {
			struct cumemcap_stats s = shim_stats(d);
			printf("stress: phase %d GPU %d: driver peak %" PRIu64 " MiB, shim peak %" PRIu64
			       " MiB, refusals %" PRIu64 ", allocs %" PRIu64 "\n",
			       phase, d, (uint64_t)(F.peak_reserved(d) / MiB), (uint64_t)(s.peak_reserved / MiB),
			       s.refusals, s.allocs);
			CHECK(F.reserved(d) == 0);
			CHECK(s.reserved == 0);
			CHECK(s.live == 0);
			CHECK(s.pooled == 0);
			CHECK(s.linear == 0 && s.managed == 0 && s.pool == 0 && s.vmm == 0 && s.array == 0);
			CHECK(s.peak_reserved <= LIMIT);
			CHECK(F.peak_reserved(d) <= LIMIT);
		}
		CHECK(atomic_load(&failures) == 0);
	}
}

int main(int argc, char **argv)
{
	load_api(argc, argv, &A, &F);
	const char *c = argc > 2 ? argv[2] : "";
	if (strcmp(c, "release-last") == 0)
		release_last();
	else if (strcmp(c, "reset") == 0)
		reset();
	else if (strcmp(c, "pool-trim") == 0)
		pool_trim();
	else if (strcmp(c, "pool-peak") == 0)
		pool_peak();
	else if (strcmp(c, "pool-other-device") == 0)
		pool_other_device();
	else if (strcmp(c, "pool-growth-unread") == 0)
		pool_growth_unread();
	else if (strcmp(c, "pool-growth-unread-threads") == 0)
		pool_growth_unread_threads();
	else if (strcmp(c, "many-pools") == 0)
		many_pools();
	else if (strcmp(c, "two-contexts") == 0)
		two_contexts();
	else if (strcmp(c, "prealloc-two-contexts") == 0)
		prealloc_two_contexts();
	else if (strcmp(c, "vmm-host") == 0)
		vmm_host();
	else if (strcmp(c, "meminfo-no-context") == 0)
		meminfo_no_context();
	else if (strcmp(c, "meminfo-one-gpu") == 0)
		meminfo_one_gpu();
	else if (strcmp(c, "meminfo-pool-no-limit") == 0)
		meminfo_pool_no_limit();
	else if (strcmp(c, "async-stream-no-context") == 0)
		async_stream_no_context();
	else if (strcmp(c, "stress") == 0)
		stress();
	else {
		fprintf(stderr, "lifecycle: unknown case %s\n", c);
		return 2;
	}
	printf("lifecycle %s (%s door, CUMEMCAP_POOL=%s): all checks passed\n", c, door, pool_mode());
	return 0;
}
