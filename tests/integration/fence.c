/* fence: the arenas prove freed blocks idle with events instead of a
 * context synchronization per reuse (src/arena/fence.h), one case per run.
 *
 *   fence DOOR CASE
 *
 * The checks are against the fake driver's record (its call counts, its
 * context synchronizations, the bytes in memory), never only against the
 * shim's figures. Cases that need slow streams run with
 * FAKECUDA_STREAM_DELAY_US=100000 (set by meson): a stream operation runs
 * 100 ms after it was queued. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

static struct api A;
static struct fake F;
static PFN_cuStreamCreateWithPriority_v5050 create_with_priority;

enum { REUSES = 1024 };

static uint64_t calls(const char *name)
{
	return F.calls(name);
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

/* One reuse of an 8 MiB block, so that the arena's first fence (always a
 * context synchronization) is behind us. */
static void warm_up(void)
{
	CUdeviceptr p, q;
	OK(A.cuMemAlloc(&p, 8 * MiB));
	OK(A.cuMemFree(p));
	OK(A.cuMemAlloc(&q, 8 * MiB));
	const char *rule = getenv("CUMEMCAP_RELEASE");
	CHECK(q == p || (rule && strcmp(rule, "immediate") == 0));
	OK(A.cuMemFree(q));
}

/* ---- steady churn: at most one synchronization per 64 reuses ---------------------- */

static void churn(void)
{
	/* Two idle non-blocking streams: the fence records on them too. */
	CUstream s1, s2;
	OK(create_with_priority(&s1, CU_STREAM_NON_BLOCKING, 0));
	OK(A.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CUdeviceptr first, p;
	OK(A.cuMemAlloc(&first, 8 * MiB));
	OK(A.cuMemFree(first));
	uint64_t syncs = F.device_syncs(), allocs = calls("cuMemAlloc_v2"), frees = calls("cuMemFree_v2");
	uint64_t records = calls("cuEventRecord"), queries = calls("cuEventQuery");
	uint64_t waits = calls("cuEventSynchronize"), asked = calls("cuStreamQuery");
	for (int i = 0; i < REUSES; i++) {
		OK(A.cuMemAlloc(&p, 8 * MiB));
		CHECK(p == first); /* the cached segment, every time */
		OK(A.cuMemFree(p));
	}
	syncs = F.device_syncs() - syncs;
	records = calls("cuEventRecord") - records;
	queries = calls("cuEventQuery") - queries;
	waits = calls("cuEventSynchronize") - waits;
	asked = calls("cuStreamQuery") - asked;
	CHECK(calls("cuMemAlloc_v2") == allocs && calls("cuMemFree_v2") == frees);
	CHECK(syncs * 64 <= REUSES);
	/* One fence per reuse: an event on the legacy stream; the two idle
	 * streams are only asked whether their queues are empty. */
	CHECK(records == REUSES - syncs);
	CHECK(queries == records);
	CHECK(asked == 2 * records);
	OK(A.cuStreamDestroy(s1));
	OK(A.cuStreamDestroy(s2));
	printf("fence: %d reuses of an 8 MiB block, %" PRIu64 " context synchronizations, "
	       "per reuse %.2f events recorded, %.2f queried, %.2f waited for, %.2f streams queried "
	       "(2 idle non-blocking streams)\n",
	       REUSES, syncs, (double)records / REUSES, (double)queries / REUSES, (double)waits / REUSES,
	       (double)asked / REUSES);
}

/* ---- a slow stream still writes the freed block ----------------------------------- */

/* Queue slow writes of the block at p on s (three: the last runs 300 ms
 * from now), free p, allocate the same size again and fill it on a
 * non-blocking stream of its own (runs 100 ms from then, ordered with
 * nothing else): the new owner's bytes must survive the stale writes. */
static void reuse_after_slow_write(CUdeviceptr p, CUstream s, bool destroy)
{
	CUstream fill;
	OK(A.cuStreamCreate(&fill, CU_STREAM_NON_BLOCKING));
	for (int i = 0; i < 3; i++)
		OK(A.cuMemsetD32Async(p, 0xdeadbeefu, 8 * MiB / 4, s));
	if (destroy)
		OK(A.cuStreamDestroy(s)); /* the writes still run */
	OK(A.cuMemFree(p));
	CUdeviceptr q;
	OK(A.cuMemAlloc(&q, 8 * MiB));
	OK(A.cuMemsetD32Async(q, 0x11111111u, 8 * MiB / 4, fill));
	OK(A.cuStreamSynchronize(fill));
	if (destroy)
		OK(A.cuCtxSynchronize());
	else
		OK(A.cuStreamSynchronize(s));
	CHECK(holds(q, 0x11, 8 * MiB));
	OK(A.cuMemFree(q));
	OK(A.cuStreamDestroy(fill));
}

static void nonblocking(void)
{
	warm_up();
	CUstream s;
	OK(create_with_priority(&s, CU_STREAM_NON_BLOCKING, -1));
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 8 * MiB));
	uint64_t records = calls("cuEventRecord");
	reuse_after_slow_write(p, s, false);
	CHECK(calls("cuEventRecord") - records == 2); /* the legacy stream and s */
	/* A blocking stream: the legacy stream's event covers it (it
	 * completes only once the stale writes have run). */
	CUstream b;
	OK(A.cuStreamCreate(&b, CU_STREAM_DEFAULT));
	OK(A.cuMemAlloc(&p, 8 * MiB));
	reuse_after_slow_write(p, b, false);
	OK(A.cuStreamDestroy(b));
	OK(A.cuStreamDestroy(s));
	printf("fence: blocks a slow non-blocking or blocking stream still wrote were reused only after it\n");
}

static void destroyed(void)
{
	warm_up();
	CUstream s;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 8 * MiB));
	uint64_t syncs = F.device_syncs();
	reuse_after_slow_write(p, s, true);
	CHECK(F.device_syncs() - syncs == 2); /* the arena's own, then the test's */
	/* Since the next synchronization (the fill stream's destruction
	 * asks for one), fences again. */
	warm_up();
	syncs = F.device_syncs();
	warm_up();
	CHECK(F.device_syncs() == syncs);
	printf("fence: a stream destroyed with work queued made the next reuse synchronize\n");
}

/* ---- no event recorded while a stream captures ------------------------------------ */

static void capture(void)
{
	warm_up();
	CUstream s;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUdeviceptr p, q;
	OK(A.cuMemAlloc(&p, 8 * MiB));
	OK(A.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
	OK(A.cuMemFree(p));
	uint64_t records = calls("cuEventRecord"), queries = calls("cuEventQuery"), syncs = F.device_syncs();
	OK(A.cuMemAlloc(&q, 8 * MiB));
	CHECK(q != p); /* the pending block waits for the capture's end */
	CHECK(calls("cuEventRecord") == records && calls("cuEventQuery") == queries);
	CHECK(F.device_syncs() == syncs);
	CUgraph g;
	OK(A.cuStreamEndCapture(s, &g)); /* not invalidated */
	OK(A.cuGraphDestroy(g));
	OK(A.cuMemFree(q));
	CUdeviceptr r;
	OK(A.cuMemAlloc(&r, 8 * MiB)); /* a fence now */
	CHECK(calls("cuEventRecord") > records);
	OK(A.cuMemFree(r));
	OK(A.cuStreamDestroy(s));
	printf("fence: nothing recorded or queried while a stream captured\n");
}

/* ---- a context's events and streams die with it ------------------------------------ */

static void context_death(void)
{
	CUdevice dev;
	OK(A.cuDeviceGet(&dev, 0));
	for (int round = 0; round < 2; round++) {
		CUcontext ctx;
		OK(A.cuCtxCreate(&ctx, 0, dev));
		CUstream s;
		OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
		uint64_t made = calls("cuEventCreate");
		warm_up(); /* the first fence: a synchronization */
		uint64_t syncs = F.device_syncs();
		for (int i = 0; i < 64; i++)
			warm_up();
		CHECK(F.device_syncs() == syncs);
		CHECK(calls("cuEventCreate") - made == 1); /* made anew in each context (s idle: none for it) */
		OK(A.cuCtxDestroy(ctx)); /* s and the events go with it */
	}
	printf("fence: a new context after a dead one fences with events of its own\n");
}

/* ---- CUMEMCAP_RELEASE=immediate: segments go back, nothing to fence ----------------- */

static void immediate(void)
{
	uint64_t records = calls("cuEventRecord"), frees = calls("cuMemFree_v2");
	for (int i = 0; i < 16; i++)
		warm_up();
	CHECK(calls("cuEventRecord") == records);
	CHECK(calls("cuMemFree_v2") - frees == 32); /* every free went back to the driver */
	printf("fence: CUMEMCAP_RELEASE=immediate gives every segment back, no fence\n");
}

/* ---- threads: fences of one arena from many threads, streams coming and going ---- */

enum { THREADS = 4, ROUNDS = 200 };
static CUcontext primary;
static _Atomic bool churning;

static void *churner(void *arg)
{
	unsigned char id = (unsigned char)(uintptr_t)arg;
	OK(A.cuCtxSetCurrent(primary));
	for (int i = 0; i < ROUNDS; i++) {
		CUdeviceptr p;
		OK(A.cuMemAlloc(&p, 8 * MiB));
		OK(A.cuMemsetD8(p, id, 8 * MiB));
		unsigned char buf[4096];
		OK(A.cuMemcpyDtoH(buf, p + 8 * MiB - sizeof(buf), sizeof(buf)));
		for (size_t k = 0; k < sizeof(buf); k++)
			CHECK(buf[k] == id); /* no other thread got the block meanwhile */
		OK(A.cuMemFree(p));
	}
	return NULL;
}

static void *stream_maker(void *arg)
{
	(void)arg;
	OK(A.cuCtxSetCurrent(primary));
	while (atomic_load(&churning)) {
		CUstream s;
		OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
		OK(A.cuStreamDestroy(s));
	}
	return NULL;
}

static void threads(void)
{
	atomic_store(&churning, true);
	pthread_t t[THREADS], maker;
	CHECK(pthread_create(&maker, NULL, stream_maker, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, churner, (void *)(uintptr_t)(i + 1)) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	atomic_store(&churning, false);
	CHECK(pthread_join(maker, NULL) == 0);
	printf("fence: %d threads x %d reuses of 8 MiB blocks while streams came and went\n", THREADS, ROUNDS);
}

struct fence_case {
	const char *name;
	void (*run)(void);
	bool primary;
};
static const struct fence_case cases[] = {
	{ "churn", churn, true },
	{ "nonblocking", nonblocking, true },
	{ "destroyed", destroyed, true },
	{ "capture", capture, true },
	{ "context-death", context_death, false },
	{ "immediate", immediate, true },
	{ "threads", threads, true },
};

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fence DOOR CASE\n");
		return 2;
	}
	const struct fence_case *c = NULL;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (strcmp(argv[2], cases[i].name) == 0)
			c = &cases[i];
	if (!c) {
		fprintf(stderr, "fence: unknown case %s\n", argv[2]);
		return 2;
	}
	load_api(argc, argv, &A, &F);
	if (c->primary)
		primary = use_primary(&A, 0);
	else
		OK(A.cuInit(0));
	void *fn = NULL;
	CUdriverProcAddressQueryResult st;
	OK(A.cuGetProcAddress("cuStreamCreateWithPriority", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
	CHECK(fn == shim_symbol("cuStreamCreateWithPriority")); /* the shim's hook */
	create_with_priority = (PFN_cuStreamCreateWithPriority_v5050)fn;
	c->run();
	CHECK(shim_stats(0).live == 0);
	return 0;
}
