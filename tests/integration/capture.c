/* capture: the shim during CUDA graph capture.
 *
 *   capture DOOR CASE
 *
 * PyTorch grows its pool with cudaMalloc while a graph is captured, after
 * switching the thread to relaxed mode; the capture itself is usually in
 * global mode. The driver fails any synchronization then (and in global
 * mode any other thread's unsafe call) with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture. The
 * fake models that (tests/fake/fake-capture.c); each case asserts that the
 * program's capture survives the shim: cuStreamEndCapture returns a graph. */
#include "common.h"

#include <unistd.h>

static struct api A;
static struct fake F;

static bool pooled(void)
{
	const char *p = getenv("CUMEMCAP_POOL");
	return !p || strcmp(p, "off") != 0;
}

static CUstream begin(void)
{
	CUstream s;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	OK(A.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	return s;
}

static void end(CUstream s)
{
	CUgraph g = NULL;
	OK(A.cuStreamEndCapture(s, &g)); /* not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
	CHECK(g != NULL);
	OK(A.cuGraphDestroy(g));
	OK(A.cuStreamDestroy(s));
}

static CUresult relaxed_alloc(CUdeviceptr *p, size_t n)
{
	CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
	OK(A.cuThreadExchangeStreamCaptureMode(&m));
	CUresult r = A.cuMemAlloc(p, n);
	OK(A.cuThreadExchangeStreamCaptureMode(&m));
	return r;
}

/* Pending frees and allocations inside a capture: served without a
 * synchronization; the pending blocks are used after it. */
static void pending(void)
{
	CUdeviceptr a, b, c, d;
	use_primary(&A, 0);
	OK(A.cuMemAlloc(&a, MiB));
	OK(A.cuMemAlloc(&b, 8 * MiB));
	OK(A.cuMemFree(a));
	OK(A.cuMemFree(b)); /* pooled: pending until the streams are past them */
	uint64_t syncs = F.device_syncs();
	CUstream s = begin();
	OK(relaxed_alloc(&c, MiB));
	OK(relaxed_alloc(&d, 8 * MiB));
	CHECK(F.device_syncs() == syncs);
	end(s);
	OK(A.cuMemFree(c));
	OK(A.cuMemFree(d));
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.live == 0);
	CHECK(st.reserved == F.reserved(0));
}

/* At the limit, what is cached cannot go back during a capture (cuMemFree
 * synchronizes): the request is refused, as from a full card, and the
 * capture survives; afterwards the cache is given back and it fits
 * (limit 64 MiB, CUMEMCAP_RELEASE=never). */
static void at_limit(void)
{
	CUdeviceptr a, b;
	use_primary(&A, 0);
	OK(A.cuMemAlloc(&a, 48 * MiB));
	OK(A.cuMemFree(a));
	CUstream s = begin();
	CUresult r = relaxed_alloc(&b, 32 * MiB);
	/* Pooled: 48 MiB cached, 16 MiB left. Off: nothing cached. */
	CHECK(r == (pooled() ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS));
	CHECK(shim_stats(0).refusals == (pooled() ? 1u : 0u));
	end(s);
	if (r == CUDA_SUCCESS)
		OK(A.cuMemFree(b));
	OK(A.cuMemAlloc(&b, 32 * MiB));
	CHECK(F.peak_reserved(0) <= 64 * MiB);
	OK(A.cuMemFree(b));
}

/* The worker's idle release is another thread's unsafe call, prohibited by
 * a global-mode capture: it waits for the capture's end
 * (CUMEMCAP_RELEASE=idle:0.05). */
static void worker(void)
{
	CUdeviceptr a;
	use_primary(&A, 0);
	OK(A.cuMemAlloc(&a, 16 * MiB));
	OK(A.cuMemFree(a));
	CUstream s = begin();
	usleep(400 * 1000);
	/* Kept through the capture: checked before it ends, since the worker
	 * may release it as soon as it has (a check after end() raced it). */
	if (pooled())
		CHECK(F.reserved(0) == 16 * MiB);
	end(s);
	for (int i = 0; i < 250 && F.reserved(0); i++)
		usleep(20 * 1000);
	CHECK(F.reserved(0) == 0); /* released after it */
}

/* The worker decided to give a segment back before the capture began, and
 * is slow to get there (FAKECUDA_FREE_DELAY_US=300000: the driver looks
 * at the cuMemFree 0.3 s after the call, a preemption made repeatable).
 * It must not land inside the capture: the capture's beginning waits for
 * it (CUMEMCAP_RELEASE=idle:0.05). */
static void worker_race(void)
{
	CUdeviceptr a;
	use_primary(&A, 0);
	OK(A.cuMemAlloc(&a, 16 * MiB));
	OK(A.cuMemFree(a));
	/* Past the idle time the worker is inside its cuMemFree (pooled). */
	usleep(150 * 1000);
	CUstream s = begin();
	usleep(400 * 1000);
	end(s); /* not CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
	for (int i = 0; i < 250 && F.reserved(0); i++)
		usleep(20 * 1000);
	CHECK(F.reserved(0) == 0);
}

int main(int argc, char **argv)
{
	load_api(argc, argv, &A, &F);
	const char *c = argc > 2 ? argv[2] : "";
	if (strcmp(c, "pending") == 0)
		pending();
	else if (strcmp(c, "at-limit") == 0)
		at_limit();
	else if (strcmp(c, "worker") == 0)
		worker();
	else if (strcmp(c, "worker-race") == 0)
		worker_race();
	else {
		fprintf(stderr, "capture: unknown case %s\n", c);
		return 2;
	}
	printf("capture %s (%s door): all checks passed\n", c, door);
	return 0;
}
