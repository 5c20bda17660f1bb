/* arena: what pooling must never break, one case per run.
 *
 *   arena DOOR CASE
 *
 * Each case states the environment it needs (set by meson). Every check
 * is against what the program sees or what the fake driver really holds
 * (its reserved bytes, its call counts, its synchronizations, the bytes
 * in memory), never only against the shim's own figures. */
#include "common.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static struct api A;
static struct fake F;

static uint64_t calls(const char *name)
{
	return F.calls(name);
}

static void fill(CUdeviceptr p, unsigned char v, size_t n)
{
	OK(A.cuMemsetD8(p, v, n));
}

/* Every byte of [p, p+n) is v. */
static bool holds(CUdeviceptr p, unsigned char v, size_t n)
{
	static unsigned char buf[1 << 20];
	for (size_t done = 0; done < n;) {
		size_t k = n - done < sizeof(buf) ? n - done : sizeof(buf);
		OK(A.cuMemcpyDtoH(buf, p + done, k));
		for (size_t i = 0; i < k; i++)
			if (buf[i] != v)
				return false;
		done += k;
	}
	return true;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* ---- stream safety (FAKECUDA_STREAM_DELAY_US=100000) ----------------------------- */

/* A slow stream op still writes a freed block while the program makes a
 * new allocation: the new owner's data must survive. */
static void reuse_waits_for(CUdeviceptr first, size_t n, CUstream s, CUdeviceptr *again)
{
	/* Queued now, runs 100 ms later on the stream's worker. */
	OK(A.cuMemsetD32Async(first, 0xdeadbeefu, n / 4, s));
	OK(A.cuMemFree(first));
	uint64_t syncs = F.device_syncs(), waits = calls("cuEventSynchronize");
	OK(A.cuMemAlloc(again, n));
	fill(*again, 0x11, n);
	OK(A.cuStreamSynchronize(s));
	CHECK(holds(*again, 0x11, n));
	/* The pool waited once for the streams (a context synchronization, or
	 * its fence's event on the slow stream: src/arena/fence.h) instead of
	 * handing out memory a stream still writes. */
	CHECK(*again != first || F.device_syncs() + calls("cuEventSynchronize") == syncs + waits + 1);
}

static void stream_safety(void)
{
	CUstream s;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	/* Packed blocks: one full segment (the arena's only one, so the
	 * pending block is worth waiting for), its first block freed while
	 * a stream writes it. */
	CUdeviceptr p, q, r;
	OK(A.cuMemAlloc(&p, 1 * MiB));
	OK(A.cuMemAlloc(&q, 1 * MiB));
	reuse_waits_for(p, 1 * MiB, s, &r);
	CHECK(r == p);
	OK(A.cuMemFree(q));
	OK(A.cuMemFree(r));

	/* Whole segments at the limit (64 MiB): the only memory for the
	 * second request is the first one's segment. */
	CUdeviceptr a, b;
	OK(A.cuMemAlloc(&a, 40 * MiB));
	reuse_waits_for(a, 40 * MiB, s, &b);
	CHECK(b == a); /* reused, not grown past the limit */
	OK(A.cuMemFree(b));
	OK(A.cuStreamDestroy(s));
	CHECK(calls("cuMemFree_v2") == 0 || shim_stats(0).segments_released > 0);
	printf("arena: a block a slow stream still wrote was reused only after one synchronization\n");
}

/* ---- frees in bursts cost one synchronization ------------------------------------ */

static void burst(void)
{
	enum { N = 64 };
	static const size_t sizes[] = { 64 << 10, 4 * MiB };
	for (size_t k = 0; k < 2; k++) {
		CUdeviceptr p[N];
		for (int i = 0; i < N; i++)
			OK(A.cuMemAlloc(&p[i], sizes[k]));
		uint64_t driver_frees = calls("cuMemFree_v2"), before = F.device_syncs();
		for (int i = 0; i < N; i++)
			OK(A.cuMemFree(p[i]));
		CHECK(calls("cuMemFree_v2") == driver_frees); /* no free reached the driver */
		CHECK(F.device_syncs() == before);            /* and none synchronized */
		uint64_t syncs = F.device_syncs(), allocs = calls("cuMemAlloc_v2");
		for (int i = 0; i < N; i++)
			OK(A.cuMemAlloc(&p[i], sizes[k]));
		CHECK(F.device_syncs() - syncs <= 1);        /* at most one for the whole burst (none once a fence can prove it) */
		CHECK(calls("cuMemAlloc_v2") == allocs);     /* all served from the pool */
		for (int i = 0; i < N; i++)
			OK(A.cuMemFree(p[i]));
	}
	CHECK(shim_stats(0).avoided >= 3 * N);
	printf("arena: 2 x %d frees in bursts, at most 1 synchronization per burst, no driver free\n", N);
}

/* ---- alignment and no overlap --------------------------------------------------------- */

static void alignment(void)
{
	enum { N = 600 };
	static CUdeviceptr p[N];
	static size_t n[N];
	unsigned seed = 12345;
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++) {
			seed = seed * 1103515245u + 12345u;
			n[i] = 1 + (seed >> 8) % (i % 10 == 0 ? 3 * MiB : 70000);
			OK(A.cuMemAlloc(&p[i], n[i]));
			CHECK(p[i] % 512 == 0);
			fill(p[i], (unsigned char)(i + round), n[i]);
		}
		for (int i = 0; i < N; i++)
			CHECK(holds(p[i], (unsigned char)(i + round), n[i])); /* nobody overlapped */
		for (int i = 0; i < N; i += 2)
			OK(A.cuMemFree(p[i]));
		for (int i = 1; i < N; i += 2)
			OK(A.cuMemFree(p[i]));
	}
	printf("arena: %d blocks x 3 rounds aligned to 512 bytes, none overlapping\n", N);
}

/* ---- a pooled block looks like an allocation of its own -------------------------- */

static void ranges(void)
{
	CUdeviceptr p, q, w, base = 0;
	size_t size = 0;
	OK(A.cuMemAlloc(&p, 1000));
	OK(A.cuMemAlloc(&q, 3000));
	OK(A.cuMemAlloc(&w, 5 * MiB + 3));
	CHECK(q != p);

	OK(A.cuMemGetAddressRange(&base, &size, p + 100));
	CHECK(base == p && size == 1000);
	OK(A.cuMemGetAddressRange(&base, &size, q + 2999));
	CHECK(base == q && size == 3000);
	OK(A.cuMemGetAddressRange(&base, &size, w + 5 * MiB));
	CHECK(base == w && size == 5 * MiB + 3);
	/* Past the block's end but inside its segment: not the program's. */
	CHECK_CU(CUDA_ERROR_NOT_FOUND, A.cuMemGetAddressRange(&base, &size, w + 5 * MiB + 512));

	CUdeviceptr start = 0;
	size_t len = 0;
	OK(A.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, q + 10));
	OK(A.cuPointerGetAttribute(&len, CU_POINTER_ATTRIBUTE_RANGE_SIZE, q + 10));
	CHECK(start == q && len == 3000);
	CUpointer_attribute attrs[3] = { CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
					 CU_POINTER_ATTRIBUTE_MEMORY_TYPE };
	unsigned int type = 0;
	void *data[3] = { &start, &len, &type };
	OK(A.cuPointerGetAttributes(3, attrs, data, p + 1));
	CHECK(start == p && len == 1000 && type == CU_MEMORYTYPE_DEVICE);

	/* Freed: the driver's answers for memory the program does not hold. */
	OK(A.cuMemFree(p));
	CHECK_CU(CUDA_ERROR_NOT_FOUND, A.cuMemGetAddressRange(&base, &size, p));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemFree(p));      /* double free */
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemFree(w + 512)); /* not a block's base */
	CHECK(calls("cuMemFree_v2") == 0); /* the driver never saw our segments freed */
	OK(A.cuMemFree(q));
	OK(A.cuMemFree(w));

	/* A pointer the arenas never made is the driver's business. */
	CUdeviceptr m;
	OK(A.cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
	OK(A.cuMemGetAddressRange(&base, &size, m + 5));
	CHECK(base == m && size == 4096);
	OK(A.cuMemFree(m));
	CHECK_CU(CUDA_ERROR_NOT_FOUND, A.cuMemGetAddressRange(&base, &size, 0x1000));
	printf("arena: address ranges and range attributes describe the block, not the segment\n");
}

/* ---- IPC ------------------------------------------------------------------------------ */

/* Run fn with stderr captured; returns the text. */
static char captured[4096];
static void capture(void (*fn)(void *), void *arg)
{
	int fds[2];
	CHECK(pipe(fds) == 0);
	fflush(stderr);
	int saved = dup(2);
	dup2(fds[1], 2);
	fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fds[1]);
	ssize_t n = read(fds[0], captured, sizeof(captured) - 1);
	captured[n > 0 ? n : 0] = '\0';
	close(fds[0]);
}

static CUresult ipc_result;
static void export_it(void *arg)
{
	CUipcMemHandle h;
	ipc_result = A.cuIpcGetMemHandle(&h, *(CUdeviceptr *)arg);
}

static void ipc_opens(CUdeviceptr p)
{
	CUipcMemHandle h;
	CUdeviceptr opened = 0;
	OK(A.cuIpcGetMemHandle(&h, p));
	OK(A.cuIpcOpenMemHandle(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	CHECK(opened == p); /* the handle names the block's own bytes */
	OK(A.cuIpcCloseMemHandle(opened));
}

static void ipc(void)
{
	CUdeviceptr w, p, q;
	OK(A.cuMemAlloc(&w, 8 * MiB));
	ipc_opens(w);
	OK(A.cuMemAlloc(&p, 4096));
	OK(A.cuMemAlloc(&q, 4096));
	capture(export_it, &q);
	CHECK(ipc_result == CUDA_ERROR_NOT_SUPPORTED);
	CHECK(strstr(captured, "CUMEMCAP_POOL=nopack") != NULL);
	CHECK(strchr(captured, '\n') == strrchr(captured, '\n')); /* one line */
	capture(export_it, &p);
	CHECK(ipc_result == CUDA_ERROR_NOT_SUPPORTED);
	CHECK(captured[0] == '\0'); /* said once */
	CHECK(calls("cuIpcGetMemHandle") == 1); /* the driver never named a segment */
	OK(A.cuMemFree(q));
	capture(export_it, &q);
	CHECK(ipc_result == CUDA_ERROR_INVALID_VALUE); /* freed */
	OK(A.cuMemFree(p));
	OK(A.cuMemFree(w));
	printf("arena: IPC works for a whole-segment block and is refused, once said, for packed ones\n");
}

static void ipc_nopack(void)
{
	CUdeviceptr p, q;
	OK(A.cuMemAlloc(&p, 4096));
	OK(A.cuMemAlloc(&q, 4096));
	ipc_opens(p);
	ipc_opens(q);
	OK(A.cuMemFree(p));
	OK(A.cuMemFree(q));
	printf("arena: with CUMEMCAP_POOL=nopack every block exports\n");
}

/* ---- capacity, limit, release --------------------------------------------------------- */

static void meminfo(void) /* CUMEMCAP_LIMIT=64MiB */
{
	size_t free_b, total_b;
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 8 * MiB));
	OK(A.cuMemGetInfo(&free_b, &total_b));
	CHECK(total_b == 64 * MiB && free_b == 56 * MiB);
	OK(A.cuMemFree(p));
	CHECK(F.reserved(0) == 8 * MiB); /* cached ... */
	OK(A.cuMemGetInfo(&free_b, &total_b));
	CHECK(free_b == 64 * MiB);       /* ... and free for the program */
	printf("arena: cached memory counts as free in cuMemGetInfo\n");
}

/* CUMEMCAP_RELEASE=never, and either CUMEMCAP_LIMIT=64MiB or a 64 MiB GPU
 * without a limit (then the driver says out of memory). */
static void limit_release(void)
{
	bool limited = getenv("CUMEMCAP_LIMIT") != NULL;
	CUdeviceptr held, a, b, c;
	OK(A.cuMemAlloc(&held, 40 * MiB));
	OK(A.cuMemAlloc(&a, 2 * MiB));
	OK(A.cuMemFree(a));
	CHECK(F.reserved(0) == 42 * MiB); /* a's segment is cached */
	/* 24 MiB does not fit a's segment, the growth rule (never, here)
	 * keeps it cached, and 40 + 2 + 24 MiB do not fit in 64: only giving
	 * a's segment back lets it through. */
	OK(A.cuMemAlloc(&b, 24 * MiB));
	CHECK(F.reserved(0) == 64 * MiB);
	CHECK(F.peak_reserved(0) <= 64 * MiB);
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.refusals == 0 && st.driver_oom == 0 && st.segments_released == 1);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&c, 8 * MiB));
	st = shim_stats(0);
	CHECK(limited ? st.refusals == 1 && st.driver_oom == 0 : st.refusals == 0 && st.driver_oom == 1);
	CHECK(F.peak_reserved(0) <= 64 * MiB);
	OK(A.cuMemFree(b));
	OK(A.cuMemFree(held));
	printf("arena: cached segments go back before %s; the limit counts them\n",
	       limited ? "a refusal at the limit" : "the driver's out-of-memory answer");
}

/* The growth budget (default release rule): what the arena holds stays
 * within 9/8 of the most it ever had live, yet cached segments stay while
 * the program's live bytes are below that peak; over the budget, a cached
 * segment up to twice a request serves it while the bytes such blocks
 * leave unused stay within 1/16 of the peak. */
static void budget(void)
{
	/* Sizes that drift upward: each fits none of the segments before it.
	 * The pending one goes back (after one wait) before the next is
	 * taken, so the driver never holds more than the budget. */
	static const size_t drift[] = { 16, 21, 27, 35, 46, 60 };
	for (size_t i = 0; i < sizeof(drift) / sizeof(drift[0]); i++) {
		CUdeviceptr p;
		OK(A.cuMemAlloc(&p, drift[i] * MiB));
		OK(A.cuMemFree(p));
	}
	CHECK(F.peak_reserved(0) <= 60 * MiB * 9 / 8);
	double drift_peak = F.peak_reserved(0) / (double)MiB;

	/* Live bytes that swing under their peak: a persistent 64 MiB, then
	 * a step of 4 x 8 MiB (peak 96 MiB live, budget 108), one of 12 MiB
	 * (which fits none of them), and 4 x 8 MiB again: the 12 MiB step
	 * kept all four cached (64 + 12 + 32 = 108), so the driver sees no
	 * call. */
	CUdeviceptr w, q[4], big;
	OK(A.cuMemAlloc(&w, 64 * MiB));
	for (int i = 0; i < 4; i++)
		OK(A.cuMemAlloc(&q[i], 8 * MiB));
	for (int i = 0; i < 4; i++)
		OK(A.cuMemFree(q[i]));
	OK(A.cuMemAlloc(&big, 12 * MiB));
	OK(A.cuMemFree(big));
	uint64_t allocs = calls("cuMemAlloc_v2"), frees = calls("cuMemFree_v2");
	for (int i = 0; i < 4; i++)
		OK(A.cuMemAlloc(&q[i], 8 * MiB));
	CHECK(calls("cuMemAlloc_v2") == allocs);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < i; j++)
			CHECK(q[i] != q[j]);
	for (int i = 0; i < 4; i++)
		OK(A.cuMemFree(q[i]));
	CHECK(F.reserved(0) == 108 * MiB);

	/* At the budget, 5 MiB requests fit no segment within 1/4, so two
	 * take 8 MiB segments (3 + 3 MiB unused, the most 1/16 of 96 MiB
	 * allows) and the third grows, giving the 12 MiB segment back. */
	CUdeviceptr f[3];
	OK(A.cuMemAlloc(&f[0], 5 * MiB));
	OK(A.cuMemAlloc(&f[1], 5 * MiB));
	CHECK(calls("cuMemAlloc_v2") == allocs && calls("cuMemFree_v2") == frees);
	CHECK(F.reserved(0) == 108 * MiB);
	OK(A.cuMemAlloc(&f[2], 5 * MiB));
	CHECK(calls("cuMemAlloc_v2") == allocs + 1 && calls("cuMemFree_v2") == frees + 1);
	CHECK(F.reserved(0) == 101 * MiB);
	/* Each still looks like a 5 MiB allocation, and counts as one. */
	for (int i = 0; i < 3; i++) {
		CUdeviceptr base;
		size_t size;
		OK(A.cuMemGetAddressRange(&base, &size, f[i] + 1));
		CHECK(base == f[i] && size == 5 * MiB);
	}
	CHECK(shim_stats(0).live == (64 + 15) * MiB);
	CHECK(F.peak_reserved(0) <= 96 * MiB * 9 / 8);
	for (int i = 0; i < 3; i++)
		OK(A.cuMemFree(f[i]));
	OK(A.cuMemFree(w));
	printf("arena: drifting sizes held at most %.0f MiB for 60 MiB live; a swing below the peak "
	       "kept its segments; at the budget 2 of 3 requests took larger cached segments\n", drift_peak);
}

static void release_rule(void)
{
	const char *rule = getenv("CUMEMCAP_RELEASE");
	CUdeviceptr p[8], w;
	for (int i = 0; i < 8; i++)
		OK(A.cuMemAlloc(&p[i], 100000));
	OK(A.cuMemAlloc(&w, 16 * MiB));
	for (int i = 0; i < 8; i++)
		OK(A.cuMemFree(p[i]));
	OK(A.cuMemFree(w));
	uint64_t right_after = F.reserved(0);
	if (strcmp(rule, "immediate") == 0) {
		CHECK(right_after == 0);
	} else if (strcmp(rule, "never") == 0) {
		sleep_ms(1500);
		CHECK(F.reserved(0) == right_after && right_after >= 18 * MiB);
		/* Nor when the arena grows with a size that fits nothing cached
		 * (8 MiB: the pending frees are waited for, the 16 MiB segment
		 * is more than 8 + 1/4 and stays cached). */
		OK(A.cuMemAlloc(&w, 8 * MiB));
		CHECK(F.reserved(0) == right_after + 8 * MiB);
		OK(A.cuMemFree(w));
	} else { /* idle:0.3 */
		CHECK(right_after >= 18 * MiB);
		int waited = 0;
		while (F.reserved(0) != 0 && waited < 5000) {
			sleep_ms(50);
			waited += 50;
		}
		CHECK(F.reserved(0) == 0);
		CHECK(waited >= 250); /* not before it was idle */
		CHECK(shim_stats(0).pooled == 0);
	}
	printf("arena: release=%s: %.1f MiB held right after the frees, %.1f MiB now\n", rule,
	       right_after / (double)MiB, F.reserved(0) / (double)MiB);
}

static void preallocate(void) /* CUMEMCAP_GROWTH=preallocate, CUMEMCAP_LIMIT=256MiB */
{
	CUdeviceptr p, q, r;
	OK(A.cuMemAlloc(&p, 1 * MiB));
	CHECK(F.reserved(0) == 256 * MiB);
	CHECK(calls("cuMemAlloc_v2") == 1);
	OK(A.cuMemAlloc(&q, 200 * MiB));
	CHECK(calls("cuMemAlloc_v2") == 1);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&r, 100 * MiB));
	size_t free_b, total_b;
	OK(A.cuMemGetInfo(&free_b, &total_b));
	CHECK(total_b == 256 * MiB && free_b == 256 * MiB - 201 * MiB);
	OK(A.cuMemFree(q));
	OK(A.cuMemAlloc(&r, 100 * MiB));
	CHECK(F.reserved(0) == 256 * MiB);
	OK(A.cuMemFree(r));
	OK(A.cuMemFree(p));
	CHECK(F.reserved(0) == 256 * MiB); /* kept for the job */
	printf("arena: preallocate took the limit once and served everything from it\n");
}

static void preallocate_fails_it(void *arg)
{
	(void)arg;
	CUdeviceptr p;
	ipc_result = A.cuMemAlloc(&p, 4096);
}

static void preallocate_fails(void) /* CUMEMCAP_GROWTH=preallocate:32GiB on a 16 GiB GPU */
{
	capture(preallocate_fails_it, NULL);
	CHECK(ipc_result == CUDA_ERROR_OUT_OF_MEMORY);
	CHECK(strstr(captured, "could not preallocate 32 GiB") != NULL);
	CHECK(strchr(captured, '\n') == strrchr(captured, '\n'));
	CHECK(F.reserved(0) == 0);
	capture(preallocate_fails_it, NULL);
	CHECK(ipc_result == CUDA_ERROR_OUT_OF_MEMORY);
	printf("arena: a preallocation that cannot be had fails at once, with a message\n");
}

static void preallocate_nothing_it(void *arg)
{
	ipc_result = A.cuMemAlloc((CUdeviceptr *)arg, 4096);
}

static void preallocate_nothing(void) /* CUMEMCAP_GROWTH=preallocate, no limit and no size */
{
	CUdeviceptr p;
	capture(preallocate_nothing_it, &p);
	OK(ipc_result);
	CHECK(strstr(captured, "GPU 0 has no limit: CUMEMCAP_GROWTH=preallocate takes nothing there") != NULL);
	CHECK(F.reserved(0) > 0 && F.reserved(0) < 256 * MiB); /* a segment as without preallocation */
	OK(A.cuMemFree(p));
	printf("arena: preallocate with nothing to take says so and serves as usual\n");
}

static void context_destroy(void)
{
	if (!A.cuCtxCreate)
		return;
	CUdevice d;
	CUcontext c;
	OK(A.cuDeviceGet(&d, 0));
	OK(A.cuCtxCreate(&c, 0, d));
	CUdeviceptr p, q;
	OK(A.cuMemAlloc(&p, 4096));
	OK(A.cuMemAlloc(&q, 4 * MiB));
	OK(A.cuMemFree(q));
	struct cumemcap_stats before = shim_stats(0);
	CHECK(before.reserved >= 6 * MiB);
	CHECK(before.allocs >= 2 && before.frees >= 1 && before.avoided >= 1);
	OK(A.cuCtxDestroy(c));
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.reserved == 0 && st.live == 0 && st.pooled == 0);
	/* The arena is gone, its counts are not. */
	CHECK(st.allocs == before.allocs && st.frees == before.frees && st.avoided == before.avoided);
	CHECK(F.reserved(0) == 0);
	printf("arena: destroying a context empties its arena\n");
}

/* ---- shards: threads on arenas of their own (arena-internal.h SHARDS) ------------------- */

struct shard_job {
	CUcontext ctx;
	size_t bytes;
	CUdeviceptr got, got2;
	CUresult r, r2;
	bool free_it, then_small; /* then_small: 4 KiB more, kept */
};

static void *shard_thread(void *arg)
{
	struct shard_job *j = arg;
	OK(A.cuCtxSetCurrent(j->ctx));
	j->r = A.cuMemAlloc(&j->got, j->bytes);
	if (j->r == CUDA_SUCCESS && j->free_it)
		OK(A.cuMemFree(j->got));
	if (j->then_small)
		j->r2 = A.cuMemAlloc(&j->got2, 4096);
	return NULL;
}

/* Run one job on a thread of its own (a new thread takes the next shard:
 * this program's threads are the primary's and three others). */
static void on_new_thread(struct shard_job *j)
{
	pthread_t t;
	CHECK(pthread_create(&t, NULL, shard_thread, j) == 0);
	pthread_join(t, NULL);
}

/* ---- immediate release after a wait (CUMEMCAP_RELEASE=immediate) ----------------- */

/* A segment whose last live block is freed while its other blocks wait in
 * a reclaim (proven idle by a fence, the arena's lock dropped) cannot go
 * back at that free; it must go back once they are ready, not stay cached
 * for good (a stress run under ASan ended with 2 MiB still reserved). */
static CUdeviceptr late_q1;
static _Atomic int late_freed;
static void *free_later(void *arg)
{
	(void)arg;
	sleep_ms(100); /* inside the main thread's fence, which waits ~400 ms */
	use_primary(&A, 0);
	if (A.cuMemFree(late_q1) != CUDA_SUCCESS)
		return (void *)1;
	atomic_store(&late_freed, 1);
	return NULL;
}

/* Two full packed segments, S1 = p1 (512 KiB) q1 (1 MiB) x1 (512 KiB) and
 * S2 = p2 q2 (1 MiB each); x1 freed, p1 freed while a slow write is queued
 * on it, then p2. A 1 MiB request then waits for them (the slow write,
 * ~400 ms) while another thread frees q1, S1's last live block, which
 * therefore cannot go back at that free; the request gets p2, the best
 * fit (S1's two ready halves are apart). *frees: cuMemFree_v2 calls into
 * the driver before the request. */
struct emptied_in_wait {
	CUstream s;
	CUdeviceptr p2, q2, r;
	uint64_t frees;
};

static void empty_s1_in_wait(struct emptied_in_wait *e)
{
	OK(A.cuStreamCreate(&e->s, 0)); /* blocking: the legacy stream waits for it */
	CUdeviceptr p1, q1, x1;
	OK(A.cuMemAlloc(&p1, MiB / 2));
	OK(A.cuMemAlloc(&q1, 1 * MiB));
	OK(A.cuMemAlloc(&x1, MiB / 2));
	OK(A.cuMemAlloc(&e->p2, 1 * MiB));
	OK(A.cuMemAlloc(&e->q2, 1 * MiB));
	CHECK(F.reserved(0) == 4 * MiB);
	OK(A.cuMemFree(x1));
	OK(A.cuMemsetD32Async(p1, 0, MiB / 8, e->s));
	OK(A.cuMemFree(p1));
	OK(A.cuMemFree(e->p2));
	e->frees = calls("cuMemFree_v2");
	late_q1 = q1;
	atomic_store(&late_freed, 0);
	pthread_t t;
	CHECK(pthread_create(&t, NULL, free_later, NULL) == 0);
	OK(A.cuMemAlloc(&e->r, 1 * MiB));
	void *ret;
	pthread_join(t, &ret);
	CHECK(ret == NULL);
	CHECK(atomic_load(&late_freed));
	CHECK(e->r == e->p2);
}

static void immediate_after_wait(void)
{
	struct emptied_in_wait e;
	empty_s1_in_wait(&e);
	/* The next 1 MiB request fits no ready block: it waits again, which
	 * makes q1 ready and S1 wholly free, and is served from S2. */
	CUdeviceptr r2;
	OK(A.cuMemFree(e.r));
	OK(A.cuMemAlloc(&r2, 1 * MiB));
	CHECK(r2 == e.p2);
	OK(A.cuMemFree(r2));
	OK(A.cuMemFree(e.q2));
	OK(A.cuStreamSynchronize(e.s));
	OK(A.cuStreamDestroy(e.s));
	struct cumemcap_stats st = shim_stats(0);
	/* Everything was freed: with release=immediate every segment is back. */
	CHECK(st.live == 0);
	CHECK(st.pooled == 0);
	CHECK(st.reserved == 0);
	CHECK(F.reserved(0) == 0);
	printf("arena: a segment emptied during a wait went back once its blocks were ready\n");
}

/* The same segment emptied during a wait, and then no later wait: the
 * program asks for nothing that finds only pending blocks. The free of
 * q1 (its last live block) could not give S1 back, its other blocks
 * being in the reclaim's limbo, and q1 itself waits on the pending list,
 * not proven idle by that reclaim: so S1 was never wholly free, and it
 * stayed cached for good (stress-*-pooled ended with a segment still
 * reserved about 2 runs in 50). The reclaim gives it back at its end. */
static void immediate_emptied_in_wait(void)
{
	struct emptied_in_wait e;
	empty_s1_in_wait(&e);
	/* S1 went back at the end of that wait, q1 with it (cuMemFree
	 * synchronizes): one cuMemFree, S2 alone held. */
	CHECK(calls("cuMemFree_v2") == e.frees + 1);
	CHECK(F.reserved(0) == 2 * MiB);
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.reserved == 2 * MiB && st.pooled == 0 && st.live == 2 * MiB);
	/* The rest freed, no request in between: nothing stays held. */
	OK(A.cuMemFree(e.r));
	OK(A.cuMemFree(e.q2));
	OK(A.cuStreamSynchronize(e.s));
	OK(A.cuStreamDestroy(e.s));
	st = shim_stats(0);
	CHECK(st.live == 0 && st.pooled == 0 && st.reserved == 0);
	CHECK(st.segments_taken == 2 && st.segments_released == 2);
	CHECK(F.reserved(0) == 0);
	printf("arena: a segment emptied during a wait went back at that wait's end, with no later request\n");
}

/* CUMEMCAP_LIMIT=8MiB CUMEMCAP_RELEASE=never: a second thread's small
 * blocks come from a segment of its own; whole segments stay shared (a
 * freed one serves any thread); at the limit a thread whose own shard has
 * nothing takes another shard's ready block rather than being refused;
 * any thread frees any block. */
static void shards(void)
{
	CUcontext ctx = use_primary(&A, 0);
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 4096)); /* this thread: the primary */
	struct shard_job one = { .ctx = ctx, .bytes = 4096 };
	on_new_thread(&one);
	OK(one.r);
	CHECK(F.reserved(0) == 4 * MiB && shim_stats(0).segments_taken == 2);
	struct shard_job whole = { .ctx = ctx, .bytes = 3 * MiB, .free_it = true };
	on_new_thread(&whole);
	OK(whole.r);
	CHECK(F.reserved(0) == 7 * MiB);
	/* A third thread: the freed 3 MiB segment serves it, and its 4 KiB
	 * block (no room for a segment of its own) comes from another shard. */
	struct shard_job again = { .ctx = ctx, .bytes = 3 * MiB, .then_small = true };
	on_new_thread(&again);
	OK(again.r);
	OK(again.r2);
	struct shard_job small = { .got = again.got2 };
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.segments_taken == 3 && st.segments_released == 0 && st.refusals == 0);
	CHECK(F.reserved(0) == 7 * MiB && st.live == 3 * 4096 + 3 * MiB);
	fill(one.got, 0x5a, 4096);
	fill(small.got, 0xa5, 4096);
	CHECK(holds(one.got, 0x5a, 4096) && holds(small.got, 0xa5, 4096) && small.got != one.got && small.got != p);
	OK(A.cuMemFree(one.got));
	OK(A.cuMemFree(small.got));
	OK(A.cuMemFree(again.got));
	OK(A.cuMemFree(p));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemFree(one.got));
	st = shim_stats(0);
	CHECK(st.live == 0 && st.pooled == 7 * MiB && st.allocs == st.frees);
	printf("arena: threads allocate from shards of their own, and share whole segments and the limit\n");
}

/* ---- quick lists (src/arena/arena-internal.h) ----------------------------------------- */

enum { QBLOCK = 4096, QCOUNT = (int)(2 * MiB / QBLOCK) };

/* The arena's only segment (CUMEMCAP_LIMIT=2MiB) filled with 4 KiB blocks,
 * all freed, then one taken back: the wait for the pending frees puts the
 * others on the quick list of their size. Returns that one, and in *other
 * another of the freed blocks. */
static CUdeviceptr quick_fill(CUdeviceptr *other)
{
	static CUdeviceptr p[QCOUNT];
	for (int i = 0; i < QCOUNT; i++)
		OK(A.cuMemAlloc(&p[i], QBLOCK));
	CHECK(F.reserved(0) == 2 * MiB);
	for (int i = 0; i < QCOUNT; i++)
		OK(A.cuMemFree(p[i]));
	CUdeviceptr q;
	OK(A.cuMemAlloc(&q, QBLOCK));
	bool ours = false;
	for (int i = 0; i < QCOUNT; i++)
		ours |= p[i] == q;
	CHECK(ours && F.reserved(0) == 2 * MiB);
	*other = p[0] != q ? p[0] : p[1];
	return q;
}

/* A block taken from a quick list and freed again waits for a fence like
 * any other: freed while a slow stream writes it, it is not the next
 * 4 KiB block handed out (the list's others are) unless the pool waited
 * for the stream first. */
static void quick_stream_safety(void) /* CUMEMCAP_LIMIT=2MiB FAKECUDA_STREAM_DELAY_US=100000 */
{
	CUstream s;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr other, r, q = quick_fill(&other);
	uint64_t syncs = F.device_syncs(), waits = calls("cuEventSynchronize");
	reuse_waits_for(q, QBLOCK, s, &r);
	CHECK(r != q);
	/* Served from the quick list: no other wait. */
	CHECK(F.device_syncs() + calls("cuEventSynchronize") == syncs + waits);
	OK(A.cuMemFree(r));
	OK(A.cuStreamDestroy(s));
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 1 * MiB)); /* everything back to the bins, then waited for */
	OK(A.cuMemFree(p));
	printf("arena: a 4 KiB block freed from a quick list waited for its stream like any other\n");
}

/* At the limit, memory on the quick lists serves a request of another
 * size: the lists go back to the bins, coalesced, before the arena grows
 * or refuses; the driver sees no call. The lookups answer for a quick
 * block as for any freed one. */
static void quick_limit(void) /* CUMEMCAP_LIMIT=2MiB */
{
	CUdeviceptr other, big, base, q = quick_fill(&other);
	uint64_t allocs = calls("cuMemAlloc_v2"), frees = calls("cuMemFree_v2");
	size_t size;
	/* Another 4 KiB block of the segment, now on a quick list: not live. */
	CUipcMemHandle h;
	CHECK_CU(CUDA_ERROR_NOT_FOUND, A.cuMemGetAddressRange(&base, &size, other));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuIpcGetMemHandle(&h, other));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemFree(other)); /* a double free */
	OK(A.cuMemAlloc(&big, 1 * MiB));
	CHECK(calls("cuMemAlloc_v2") == allocs && calls("cuMemFree_v2") == frees);
	CHECK(F.reserved(0) == 2 * MiB && F.peak_reserved(0) <= 2 * MiB);
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.refusals == 0 && st.segments_released == 0);
	CHECK(st.live == 1 * MiB + QBLOCK);
	OK(A.cuMemFree(big));
	OK(A.cuMemFree(q));
	printf("arena: 4 KiB blocks on a quick list served a 1 MiB request at the limit, no driver call\n");
}

/* In a large arena, a steady run of 4 KiB pairs waits for its frees once
 * 4 MiB of them are pending (src/arena/grow.c, PENDING_ENOUGH), not only
 * at 1/16 of the arena (10 MiB here): the memory it walks through, and
 * the segments it takes meanwhile, stay bounded. */
static void pending_enough(void) /* CUMEMCAP_RELEASE=never */
{
	CUdeviceptr big, p;
	OK(A.cuMemAlloc(&big, 160 * MiB));
	uint64_t allocs = calls("cuMemAlloc_v2");
	for (int i = 0; i < 4000; i++) {
		OK(A.cuMemAlloc(&p, QBLOCK));
		OK(A.cuMemFree(p));
	}
	/* 4 MiB pending at most, in 2 MiB segments (and the first one's
	 * split): at most three segments; at 1/16 of the arena it took six. */
	CHECK(calls("cuMemAlloc_v2") - allocs <= 3);
	OK(A.cuMemFree(big));
	printf("arena: 4000 pairs of 4 KiB beside 160 MiB live took %llu segments\n",
	       (unsigned long long)(calls("cuMemAlloc_v2") - allocs));
}

/* The cases, each with the settings it runs under. This table is the only
 * list: tests/integration/meson.build reads its CASE lines (the text
 * between the first two pairs of quotes: name and settings) to define one
 * test per case, and the program checks that it runs under the settings
 * its line names. Every case runs with FAKECUDA_DEVICES=16GiB and
 * CUMEMCAP_LOG=off unless its settings say otherwise. */
struct arena_case {
	const char *name;
	const char *settings; /* space-separated NAME=VALUE */
	void (*run)(void);
};
#define CASE(name, settings, fn) { name, settings, fn },
static const struct arena_case cases[] = {
	CASE("stream-safety", "CUMEMCAP_LIMIT=64MiB FAKECUDA_STREAM_DELAY_US=100000", stream_safety)
	CASE("burst", "CUMEMCAP_RELEASE=never", burst)
	CASE("alignment", "CUMEMCAP_RELEASE=immediate", alignment)
	CASE("ranges", "CUMEMCAP_RELEASE=never", ranges)
	CASE("ipc", "", ipc)
	CASE("ipc-nopack", "CUMEMCAP_POOL=nopack", ipc_nopack)
	CASE("meminfo", "CUMEMCAP_LIMIT=64MiB CUMEMCAP_RELEASE=never", meminfo)
	CASE("limit-release", "CUMEMCAP_LIMIT=64MiB CUMEMCAP_RELEASE=never", limit_release)
	CASE("driver-oom-release", "FAKECUDA_DEVICES=64MiB CUMEMCAP_RELEASE=never", limit_release)
	CASE("release-immediate", "CUMEMCAP_RELEASE=immediate", release_rule)
	CASE("release-never", "CUMEMCAP_RELEASE=never", release_rule)
	CASE("release-idle", "CUMEMCAP_RELEASE=idle:0.3", release_rule)
	CASE("budget", "", budget)
	CASE("preallocate", "CUMEMCAP_GROWTH=preallocate CUMEMCAP_LIMIT=256MiB", preallocate)
	CASE("preallocate-fails", "CUMEMCAP_GROWTH=preallocate:32GiB", preallocate_fails)
	CASE("preallocate-nothing", "CUMEMCAP_GROWTH=preallocate", preallocate_nothing)
	CASE("context-destroy", "", context_destroy)
	CASE("shards", "CUMEMCAP_LIMIT=8MiB CUMEMCAP_RELEASE=never", shards)
	CASE("quick-stream-safety", "CUMEMCAP_LIMIT=2MiB FAKECUDA_STREAM_DELAY_US=100000", quick_stream_safety)
	CASE("quick-limit", "CUMEMCAP_LIMIT=2MiB", quick_limit)
	CASE("pending-enough", "CUMEMCAP_RELEASE=never", pending_enough)
	CASE("immediate-after-wait", "CUMEMCAP_RELEASE=immediate FAKECUDA_STREAM_DELAY_US=400000", immediate_after_wait)
	CASE("immediate-emptied-in-wait", "CUMEMCAP_RELEASE=immediate FAKECUDA_STREAM_DELAY_US=400000", immediate_emptied_in_wait)
};
#undef CASE

/* Whether the environment has every NAME=VALUE of `settings`. */
static bool settings_applied(const char *settings)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", settings);
	for (char *save = NULL, *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(kv, '=');
		if (!eq)
			return false;
		*eq = '\0';
		const char *v = getenv(kv);
		if (!v || strcmp(v, eq + 1) != 0) {
			fprintf(stderr, "arena: %s is %s, the case wants %s\n", kv, v ? v : "unset", eq + 1);
			return false;
		}
	}
	return true;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: arena DOOR CASE\n");
		return 2;
	}
	const struct arena_case *c = NULL;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(argv[2], cases[i].name) == 0)
			c = &cases[i];
	if (!c) {
		fprintf(stderr, "arena: unknown case %s\n", argv[2]);
		return 2;
	}
	if (!settings_applied(c->settings))
		return 2;
	load_api(argc, argv, &A, &F);
	use_primary(&A, 0);
	c->run();
	CHECK(shim_stats(0).live == 0 || c->run == context_destroy);
	return 0;
}
