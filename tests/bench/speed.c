/* speed: the speed bounds, each a ratio from one run, against the fake
 * driver, side by side in three modes.
 *
 *   speed SHIM                    run everything, print the figures
 *   speed --child MODE TASK ARGS  one measurement in this process; one line
 *                                 of key=value figures on stdout
 *
 * Modes (tests/bench/bench-common.h): none (no shim), off (the shim with
 * CUMEMCAP_POOL=off: the passthrough path) and pooled (CUMEMCAP_POOL=on, or
 * the parent's own CUMEMCAP_POOL / CUMEMCAP_RELEASE when set). Each child
 * process measures one mode; modes alternate child by child, so a noisy
 * moment hits all three. Every child first starts an idle thread (blocked
 * in pause()), the baseline's included: a real driver always runs threads,
 * and a second thread turns on glibc's atomics (malloc's, stdio's), which
 * a single-threaded baseline would not pay.
 *
 * Tasks (children):
 *   calls BATCHES OPS       per batch: OPS cuMemAlloc_v2+cuMemFree_v2 pairs
 *                           of 4 KiB, OPS cuMemGetInfo_v2 and OPS glibc
 *                           malloc(4096)+free pairs (the same process: the
 *                           pooled pair's target); then, per batch, OPS/5
 *                           cuMemAllocAsync+cuMemFreeAsync pairs of 4 KiB
 *                           (in runs of 128 on a stream whose worker a host
 *                           function holds while the run is timed; the
 *                           frees run at the untimed cuStreamSynchronize
 *                           after it; the default pool's release threshold
 *                           at its maximum, so chunks are reused) and OPS
 *                           cuMemGetInfo_v2 again, a pool now holding
 *                           memory
 *                           (the same process: the pooled pair's target)
 *   live NBLOCKS BATCHES OPS
 *                           NBLOCKS live cuMemAlloc_v2 blocks and NBLOCKS
 *                           live malloc blocks, both of the same 512..1024
 *                           bytes (xorshift32), then 4 KiB pairs of each,
 *                           timed before and while they are live
 *   threads N BATCHES OPS   N threads, each OPS pooled 4 KiB pairs per
 *                           batch (batches start and end at a barrier), then
 *                           the same with malloc(4096)+free; throughput
 *   threads-after BATCHES OPS
 *                           as threads, in one process: one new thread,
 *                           which then exits, then two new threads at once
 *                           (threads that come and go, as a program's do)
 *   churn COUNT WARMUP      8 MiB cuMemAlloc_v2+cuMemFree_v2 pairs: the
 *                           driver's synchronizations over COUNT pairs after
 *                           WARMUP (fakecuda_device_syncs, plus the calls of
 *                           cuCtxSynchronize, cuStreamSynchronize,
 *                           cuEventSynchronize, cuEventQuery, cuEventRecord)
 * Every child self-checks, untimed: every call succeeds; the shim is loaded
 * exactly in its modes; under the shim its `live` figure is what the child
 * holds (blocks rounded to 512 bytes when pooled) and its `allocs` and
 * `frees` moved by exactly the calls made (whatever a shim keeps per thread
 * must be folded on read); the shim's `reserved` is what the driver holds
 * (not after stream-ordered work, whose pool the shim reads lazily). A
 * failure prints "SELF-CHECK FAILED" and the benchmark exits non-zero; a
 * missed target prints "MISSES TARGET" and does not change the exit status.
 *
 * Instructions per operation: when valgrind is installed, the parent runs
 * the icount program beside this one under callgrind (off and pooled) and
 * counts the instructions executed in the shim's own object (its calls into
 * the driver and libc are not counted). BENCH_ICOUNT=0 skips it.
 * BENCH_CPU=N runs the single-thread children on CPU N (default: the
 * highest this process may use; see bench_cpu).
 * BENCH_QUICK=1 uses smaller counts; BENCH_SMOKE=1 tiny ones, for the test
 * suite's run of the self-checks (no callgrind, figures meaningless).
 * LD_PRELOAD_EXTRA (a sanitizer's runtime) goes before the shim. */
#include <cuda.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/utsname.h>

#include "bench-common.h"
#include "cumemcap.h"
#include "fakecuda.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define WARMUP_BATCHES 2
#define ASYNC_RUN 128
#define LIVE_SEED 0x5eed0004u
#define FAKE_DEVICES "80GiB"
#define NTHREADS 3
#define MAX_ROUNDS 16

static const int thread_counts[NTHREADS] = { 1, 2, 8 };

/* Through volatile pointers, so that the compiler cannot pair a malloc
 * with its free and drop both. */
static void *(*volatile malloc_fn)(size_t) = malloc;
static void (*volatile free_fn)(void *) = free;

/* ---- the child ------------------------------------------------------------------- */

static const char *child_mode = "?", *child_task = "?";

static _Noreturn void check_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void check_failed(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "speed: SELF-CHECK FAILED (%s, mode %s): ", child_task, child_mode);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(3);
}

static void *idle_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

typedef int (*get_stats_fn)(int, struct cumemcap_stats *, size_t);

static CUcontext the_ctx;
static get_stats_fn get_stats;
static enum bench_mode the_mode;

/* The idle thread, the device's primary context current in this thread
 * (cuMemGetInfo_v2 lets the shim do its first-use work untimed), and the
 * shim there exactly when the mode preloads it. */
static void setup(enum bench_mode m)
{
	pthread_t t;
	if (pthread_create(&t, NULL, idle_thread, NULL))
		check_failed("no idle thread");
	pthread_detach(t);
	CUdevice d;
	CUresult r;
	size_t freeb, total;
	if ((r = cuInit(0)) || (r = cuDeviceGet(&d, 0)) || (r = cuDevicePrimaryCtxRetain(&the_ctx, d)) ||
	    (r = cuCtxSetCurrent(the_ctx)) || (r = cuMemGetInfo_v2(&freeb, &total)))
		check_failed("driver setup failed: CUresult %d", (int)r);
	the_mode = m;
	get_stats = (get_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cumemcap_get_stats");
	if ((get_stats != NULL) != (m != M_NONE))
		check_failed("the shim is %s", get_stats ? "loaded" : "not loaded");
}

static struct cumemcap_stats stats(void)
{
	struct cumemcap_stats st;
	memset(&st, 0, sizeof(st));
	if (get_stats && get_stats(0, &st, sizeof(st)) != 0)
		check_failed("cumemcap_get_stats(0) failed after the device was used");
	return st;
}

/* Pooled blocks are live for their size rounded to the 512-byte unit. */
static uint64_t live_unit(void)
{
	const char *pool = getenv("CUMEMCAP_POOL");
	return the_mode == M_POOLED && !(pool && strcmp(pool, "off") == 0) ? 512 : 1;
}

/* Under the shim: its live figure is `live`, its allocs and frees moved by
 * exactly `calls` each since s0, and (with `reserved`) its reserved bytes
 * are what the driver holds (read twice around the driver's figure, in case
 * the shim's worker gave a segment back in between). Without the shim and
 * nothing live, the driver holds nothing. */
static void check_figures(struct cumemcap_stats s0, uint64_t live, uint64_t calls, bool reserved)
{
	if (!get_stats) {
		if (live == 0 && reserved && fakecuda_reserved(0) != 0)
			check_failed("the driver holds %" PRIu64 " bytes with nothing live", fakecuda_reserved(0));
		return;
	}
	struct cumemcap_stats a = stats();
	if (a.live != live)
		check_failed("the shim counts %" PRIu64 " bytes live, the program holds %" PRIu64, a.live, live);
	if (a.allocs - s0.allocs != calls || a.frees - s0.frees != calls)
		check_failed("the shim counts %" PRIu64 " allocations and %" PRIu64 " frees, the program made %" PRIu64
			     " of each",
			     a.allocs - s0.allocs, a.frees - s0.frees, calls);
	if (!reserved)
		return;
	uint64_t drv = fakecuda_reserved(0);
	struct cumemcap_stats b = stats();
	if (a.reserved != drv && b.reserved != drv)
		check_failed("the shim counts %" PRIu64 " bytes reserved, the driver holds %" PRIu64, b.reserved, drv);
}

static uint64_t parse_u64(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end) {
		fprintf(stderr, "speed: \"%s\" is not a number\n", s);
		exit(2);
	}
	return v;
}

static void cu_pair(uint64_t bytes)
{
	CUdeviceptr p;
	CUresult e = cuMemAlloc_v2(&p, bytes);
	if (e != CUDA_SUCCESS)
		check_failed("cuMemAlloc_v2(%" PRIu64 ") returned %d", bytes, (int)e);
	if ((e = cuMemFree_v2(p)) != CUDA_SUCCESS)
		check_failed("cuMemFree_v2 returned %d", (int)e);
}

static double time_cu_pairs(uint64_t bytes, int ops)
{
	double t0 = now_ns();
	for (int i = 0; i < ops; i++)
		cu_pair(bytes);
	return (now_ns() - t0) / ops;
}

static double time_malloc_pairs(size_t bytes, int ops)
{
	double t0 = now_ns();
	for (int i = 0; i < ops; i++) {
		void *p = malloc_fn(bytes);
		if (!p)
			check_failed("malloc(%zu) failed", bytes);
		free_fn(p);
	}
	return (now_ns() - t0) / ops;
}

/* The device's default pool keeps what it reserved (release threshold at
 * its maximum, as frameworks set it): in steady state an allocation reuses
 * a chunk instead of mapping one, so the driver's own cost is small and
 * steady next to the shim's. */
static void keep_pool_reserved(void)
{
	CUmemoryPool pool;
	cuuint64_t max = UINT64_MAX;
	CUresult e = cuDeviceGetDefaultMemPool(&pool, 0);
	if (!e)
		e = cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max);
	if (e)
		check_failed("setting the default pool's release threshold returned %d", (int)e);
}

/* A host function at the head of the stream holds its worker while a run
 * of stream-ordered calls is timed, so that the frees run after the timing
 * (at the untimed synchronization) instead of competing with it. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_is_open;
static _Atomic bool gate_reached;

static void CUDA_CB gate_wait(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&gate_mu);
	atomic_store(&gate_reached, true);
	while (!gate_is_open)
		pthread_cond_wait(&gate_cv, &gate_mu);
	pthread_mutex_unlock(&gate_mu);
}

static CUresult gate_close(CUstream s)
{
	pthread_mutex_lock(&gate_mu);
	gate_is_open = false;
	atomic_store(&gate_reached, false);
	pthread_mutex_unlock(&gate_mu);
	CUresult e = cuLaunchHostFunc(s, gate_wait, NULL);
	while (e == CUDA_SUCCESS && !atomic_load(&gate_reached))
		sched_yield();
	return e;
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate_mu);
	gate_is_open = true;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

static double time_info(int ops)
{
	double t0 = now_ns();
	for (int i = 0; i < ops; i++) {
		size_t f, t;
		CUresult e = cuMemGetInfo_v2(&f, &t);
		if (e != CUDA_SUCCESS)
			check_failed("cuMemGetInfo_v2 returned %d", (int)e);
	}
	return (now_ns() - t0) / ops;
}

/* ns per cuMemAllocAsync+cuMemFreeAsync pair over aops pairs on s. */
static double time_async(CUstream s, int aops)
{
	double ta = 0;
	for (int i = 0; i < aops; i += ASYNC_RUN) {
		CUdeviceptr run[ASYNC_RUN];
		CUresult e = gate_close(s);
		double a0 = now_ns();
		for (int j = 0; j < ASYNC_RUN && e == CUDA_SUCCESS; j++)
			e = cuMemAllocAsync(&run[j], 4 * KiB, s);
		for (int j = 0; j < ASYNC_RUN && e == CUDA_SUCCESS; j++)
			e = cuMemFreeAsync(run[j], s);
		ta += now_ns() - a0;
		gate_open();
		if (e != CUDA_SUCCESS)
			check_failed("cuMemAllocAsync/cuMemFreeAsync returned %d", (int)e);
		if ((e = cuStreamSynchronize(s)) != CUDA_SUCCESS)
			check_failed("cuStreamSynchronize returned %d", (int)e);
	}
	return ta / aops;
}

/* Two passes: pairs, cuMemGetInfo_v2 and malloc pairs with no
 * stream-ordered pool in use; then async pairs and cuMemGetInfo_v2 again,
 * now with the default pool holding chunks. */
static int task_calls(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int batches = (int)parse_u64(argv[0]), ops = (int)parse_u64(argv[1]);
	int aops = (ops / 5 + ASYNC_RUN - 1) / ASYNC_RUN * ASYNC_RUN;
	if (batches < 1 || batches > 1000 || ops < 1)
		return 2;
	CUstream s;
	if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
		check_failed("cuStreamCreate failed");
	struct cumemcap_stats s0 = stats();
	double pair[1000], info[1000], async[1000], mal[1000], infopool[1000];
	uint64_t calls = 0;
	for (int b = -WARMUP_BATCHES; b < batches; b++) {
		double tp = time_cu_pairs(4 * KiB, ops), ti = time_info(ops), tm = time_malloc_pairs(4096, ops);
		calls += (uint64_t)ops;
		if (b >= 0) {
			pair[b] = tp;
			info[b] = ti;
			mal[b] = tm;
		}
	}
	keep_pool_reserved();
	for (int b = -WARMUP_BATCHES; b < batches; b++) {
		double ta = time_async(s, aops), ti = time_info(ops);
		calls += (uint64_t)aops;
		if (b >= 0) {
			async[b] = ta;
			infopool[b] = ti;
		}
	}
	/* Stream-ordered pools are read lazily: no check of `reserved`. */
	check_figures(s0, 0, calls, false);
	size_t n = (size_t)batches;
	double mp = median(pair, n), mi = median(info, n), ma = median(async, n), mm = median(mal, n),
	       mip = median(infopool, n);
	/* median() sorted them: [0] is the fastest batch. */
	printf("pair=%.2f info=%.2f async=%.2f malloc=%.2f infopool=%.2f ratio=%.4f", mp, mi, ma, mm, mip, mp / mm);
	printf(" pairmin=%.2f infomin=%.2f asyncmin=%.2f mallocmin=%.2f infopoolmin=%.2f ratiomin=%.4f\n", pair[0],
	       info[0], async[0], mal[0], infopool[0], pair[0] / mal[0]);
	return 0;
}

static uint32_t xorshift32(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* Batches of 4 KiB cuMemAlloc_v2 pairs and malloc pairs, alternating;
 * the medians of their batch means. */
static void time_both(int batches, int ops, double *cu, double *mal)
{
	double *c = calloc((size_t)batches, sizeof(*c)), *m = calloc((size_t)batches, sizeof(*m));
	if (!c || !m)
		exit(1);
	for (int b = -WARMUP_BATCHES; b < batches; b++) {
		double x = time_cu_pairs(4 * KiB, ops), y = time_malloc_pairs(4096, ops);
		if (b >= 0) {
			c[b] = x;
			m[b] = y;
		}
	}
	*cu = median(c, (size_t)batches);
	*mal = median(m, (size_t)batches);
	free(c);
	free(m);
}

static int task_live(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	uint64_t n = parse_u64(argv[0]);
	int batches = (int)parse_u64(argv[1]), ops = (int)parse_u64(argv[2]);
	if (n == 0 || batches < 1 || ops < 1)
		return 2;
	uint32_t *size = malloc(n * sizeof(*size));
	CUdeviceptr *dev = malloc(n * sizeof(*dev));
	void **host = malloc(n * sizeof(*host));
	if (!size || !dev || !host)
		return 1;
	uint32_t seed = LIVE_SEED;
	uint64_t unit = live_unit(), live = 0;
	for (uint64_t i = 0; i < n; i++) {
		size[i] = 512 + xorshift32(&seed) % 513;
		live += (size[i] + unit - 1) / unit * unit;
	}
	struct cumemcap_stats s0 = stats();
	double cu0, mal0, cu1, mal1;
	time_both(batches, ops, &cu0, &mal0);
	for (uint64_t i = 0; i < n; i++) {
		CUresult e = cuMemAlloc_v2(&dev[i], size[i]);
		if (e != CUDA_SUCCESS)
			check_failed("cuMemAlloc_v2(%" PRIu32 ") of block %" PRIu64 " returned %d", size[i], i, (int)e);
		if (!(host[i] = malloc_fn(size[i])))
			check_failed("malloc(%" PRIu32 ") failed", size[i]);
	}
	uint64_t calls = (uint64_t)(batches + WARMUP_BATCHES) * (uint64_t)ops;
	struct cumemcap_stats s1 = stats();
	if (get_stats && s1.live != live)
		check_failed("with %" PRIu64 " blocks live the shim counts %" PRIu64 " bytes live, the program %" PRIu64, n,
			     s1.live, live);
	time_both(batches, ops, &cu1, &mal1);
	calls += (uint64_t)(batches + WARMUP_BATCHES) * (uint64_t)ops;
	for (uint64_t i = 0; i < n; i++) {
		CUresult e = cuMemFree_v2(dev[i]);
		if (e != CUDA_SUCCESS)
			check_failed("cuMemFree_v2 of block %" PRIu64 " returned %d", i, (int)e);
		free_fn(host[i]);
	}
	check_figures(s0, 0, calls + n, true);
	printf("cu0=%.2f mal0=%.2f cu1=%.2f mal1=%.2f\n", cu0, mal0, cu1, mal1);
	return 0;
}

struct thread_job {
	int batches, ops, nthreads, me;
	pthread_barrier_t *bar;
	double *start, *end; /* per thread, the current batch's */
	double *cu, *mal;    /* per batch, throughput (pairs per µs); thread 0 only */
};

/* A batch's window runs from the first thread's start to the last one's
 * end, each read by the thread itself on leaving the first barrier and on
 * reaching the second. A window one thread timed from its own wake-up
 * would open as late as the scheduler woke that thread, after the others
 * had done part of the batch: with 8 threads on 2 CPUs glibc's malloc
 * pairs "ran" at up to 5x their one-thread rate that way. */
static void *thread_main(void *arg)
{
	struct thread_job *j = arg;
	if (cuCtxSetCurrent(the_ctx) != CUDA_SUCCESS)
		check_failed("cuCtxSetCurrent failed in a thread");
	for (int b = -WARMUP_BATCHES; b < j->batches; b++) {
		for (int k = 0; k < 2; k++) {
			pthread_barrier_wait(j->bar);
			j->start[j->me] = now_ns();
			if (k == 0)
				time_cu_pairs(4 * KiB, j->ops);
			else
				time_malloc_pairs(4096, j->ops);
			j->end[j->me] = now_ns();
			pthread_barrier_wait(j->bar);
			if (j->cu && b >= 0) {
				double t0 = j->start[0], t1 = j->end[0];
				for (int t = 1; t < j->nthreads; t++) {
					t0 = j->start[t] < t0 ? j->start[t] : t0;
					t1 = j->end[t] > t1 ? j->end[t] : t1;
				}
				(k == 0 ? j->cu : j->mal)[b] = (double)j->ops * j->nthreads / ((t1 - t0) / 1e3);
			}
			/* Nobody starts the next batch before thread 0 has read this one. */
			pthread_barrier_wait(j->bar);
		}
	}
	return NULL;
}

static int task_threads(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int nt = (int)parse_u64(argv[0]), batches = (int)parse_u64(argv[1]), ops = (int)parse_u64(argv[2]);
	if (nt < 1 || nt > 64 || batches < 1 || ops < 1)
		return 2;
	struct cumemcap_stats s0 = stats();
	pthread_barrier_t bar;
	double start[64], end[64];
	pthread_t tid[64];
	struct thread_job jobs[64];
	double *cu = calloc((size_t)batches, sizeof(*cu)), *mal = calloc((size_t)batches, sizeof(*mal));
	if (!cu || !mal || pthread_barrier_init(&bar, NULL, (unsigned)nt))
		return 1;
	for (int t = 0; t < nt; t++) {
		jobs[t] = (struct thread_job){ batches, ops, nt, t, &bar, start, end, t ? NULL : cu, t ? NULL : mal };
		if (t > 0 && pthread_create(&tid[t], NULL, thread_main, &jobs[t]))
			return 1;
	}
	thread_main(&jobs[0]);
	for (int t = 1; t < nt; t++)
		pthread_join(tid[t], NULL);
	check_figures(s0, 0, (uint64_t)nt * (uint64_t)(batches + WARMUP_BATCHES) * (uint64_t)ops, true);
	double worst = cu[0];
	for (int b = 1; b < batches; b++)
		worst = cu[b] < worst ? cu[b] : worst;
	printf("cu=%.4f mal=%.4f worst=%.4f\n", median(cu, (size_t)batches), median(mal, (size_t)batches), worst);
	return 0;
}

/* The threads task's other case: one process where threads come and go, as
 * a program's do. One new thread times its pairs and exits, then two new
 * threads time theirs at once (the idle thread of setup still there). The
 * threads task starts every thread count in a fresh child, its thread 0
 * being the child's first thread to allocate; here the two measured
 * together come after another thread allocated and left. */
static void *run_job(void *arg)
{
	return thread_main(arg);
}

static double run_threads_now(int nt, int batches, int ops, double *cu, double *mal)
{
	pthread_barrier_t bar;
	double start[2], end[2];
	pthread_t tid[2];
	struct thread_job jobs[2];
	if (pthread_barrier_init(&bar, NULL, (unsigned)nt))
		check_failed("no barrier");
	for (int t = 0; t < nt; t++) {
		jobs[t] = (struct thread_job){ batches, ops, nt, t, &bar, start, end, t ? NULL : cu, t ? NULL : mal };
		if (pthread_create(&tid[t], NULL, run_job, &jobs[t]))
			check_failed("no thread");
	}
	for (int t = 0; t < nt; t++)
		pthread_join(tid[t], NULL);
	pthread_barrier_destroy(&bar);
	return median(cu, (size_t)batches);
}

static int task_threads_after(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int batches = (int)parse_u64(argv[0]), ops = (int)parse_u64(argv[1]);
	if (batches < 1 || ops < 1)
		return 2;
	struct cumemcap_stats s0 = stats();
	double *cu = calloc((size_t)batches, sizeof(*cu)), *mal = calloc((size_t)batches, sizeof(*mal));
	if (!cu || !mal)
		return 1;
	double cu1 = run_threads_now(1, batches, ops, cu, mal), mal1 = median(mal, (size_t)batches);
	double cu2 = run_threads_now(2, batches, ops, cu, mal), mal2 = median(mal, (size_t)batches);
	check_figures(s0, 0, 3 * (uint64_t)(batches + WARMUP_BATCHES) * (uint64_t)ops, true);
	printf("cu1=%.4f cu2=%.4f mal1=%.4f mal2=%.4f\n", cu1, cu2, mal1, mal2);
	return 0;
}

static const char *const sync_names[] = { "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
					  "cuEventQuery", "cuEventRecord" };
#define NSYNC (sizeof(sync_names) / sizeof(*sync_names))

static uint64_t calls_of(const char *name)
{
	/* Both stream variants of the per-thread default stream count too. */
	char ptsz[64];
	snprintf(ptsz, sizeof(ptsz), "%s_ptsz", name);
	return fakecuda_calls(name) + fakecuda_calls(ptsz);
}

static int task_churn(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	uint64_t count = parse_u64(argv[0]), warmup = parse_u64(argv[1]);
	if (count == 0)
		return 2;
	struct cumemcap_stats s0 = stats();
	for (uint64_t i = 0; i < warmup; i++)
		cu_pair(8 * MiB);
	uint64_t d0 = fakecuda_device_syncs(), a0 = calls_of("cuMemAlloc_v2"), f0 = calls_of("cuMemFree_v2"), c0[NSYNC];
	for (size_t k = 0; k < NSYNC; k++)
		c0[k] = calls_of(sync_names[k]);
	double t0 = now_ns();
	for (uint64_t i = 0; i < count; i++)
		cu_pair(8 * MiB);
	double ns = (now_ns() - t0) / (double)count;
	printf("ns=%.2f syncs=%" PRIu64 " dallocs=%" PRIu64 " dfrees=%" PRIu64, ns, fakecuda_device_syncs() - d0,
	       calls_of("cuMemAlloc_v2") - a0, calls_of("cuMemFree_v2") - f0);
	for (size_t k = 0; k < NSYNC; k++)
		printf(" %s=%" PRIu64, sync_names[k], calls_of(sync_names[k]) - c0[k]);
	printf("\n");
	check_figures(s0, 0, count + warmup, true);
	return 0;
}

static int child(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: speed --child none|off|pooled calls|live|threads|churn ARGS...\n");
		return 2;
	}
	enum bench_mode m = NMODES;
	for (int k = 0; k < NMODES; k++)
		if (strcmp(argv[0], mode_args[k]) == 0)
			m = (enum bench_mode)k;
	if (m == NMODES)
		return 2;
	child_mode = argv[0];
	child_task = argv[1];
	setup(m);
	int r = 2;
	if (strcmp(argv[1], "calls") == 0)
		r = task_calls(argc - 2, argv + 2);
	else if (strcmp(argv[1], "live") == 0)
		r = task_live(argc - 2, argv + 2);
	else if (strcmp(argv[1], "threads") == 0)
		r = task_threads(argc - 2, argv + 2);
	else if (strcmp(argv[1], "threads-after") == 0)
		r = task_threads_after(argc - 2, argv + 2);
	else if (strcmp(argv[1], "churn") == 0)
		r = task_churn(argc - 2, argv + 2);
	if (r == 2)
		fprintf(stderr, "speed: bad child arguments\n");
	fflush(stdout);
	return r;
}

/* ---- the parent ------------------------------------------------------------------ */

static char self_path[PATH_MAX];
static const char *shim_path, *pool_override, *release_override;
static bool any_failed;

struct mode_env {
	enum bench_mode m;
	const char *ld_library_path; /* or NULL: left as it is */
	bool quiet;                  /* stderr to /dev/null */
	int cpu;                     /* the CPU the child and all its threads run on; -1: any */
};

/* The CPU of the single-thread children (calls, live, churn), or -1. The
 * CPUs of a machine need not be equally fast (on the 2-core machines this
 * project runs on, one does the same single-thread work 1.3x slower than
 * the other, its neighbours' doing): a child left to the scheduler lands
 * on either, and "shim child minus no-shim child" then measures the CPUs
 * as much as the shim. Every such child of a run therefore runs on the
 * same CPU: BENCH_CPU, else the highest one this process may use (CPU 0
 * is where housekeeping the kernel cannot move lands). The threads task is
 * not pinned: it measures scaling over the CPUs. */
static int bench_cpu = -1;

static int choose_cpu(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2)
		return -1;
	const char *v = getenv("BENCH_CPU");
	if (v && *v) {
		char *end;
		long c = strtol(v, &end, 10);
		if (*end || c < 0 || c >= CPU_SETSIZE || !CPU_ISSET((int)c, &set)) {
			fprintf(stderr, "speed: BENCH_CPU=%s: not a CPU this process may run on (it may use:", v);
			for (int k = 0; k < CPU_SETSIZE; k++)
				if (CPU_ISSET(k, &set))
					fprintf(stderr, " %d", k);
			fprintf(stderr, ")\n");
			exit(2);
		}
		return (int)c;
	}
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set))
			return c;
	return -1;
}

static void prep_mode(void *arg)
{
	const struct mode_env *e = arg;
	bench_set_mode_env(e->m, shim_path, FAKE_DEVICES, pool_override, release_override);
	/* A sanitizer build's runtime must come first (LD_PRELOAD_EXTRA, as
	 * the integration tests set it). */
	const char *extra = getenv("LD_PRELOAD_EXTRA");
	if (e->m != M_NONE && extra && *extra) {
		char both[2 * PATH_MAX + 2];
		snprintf(both, sizeof(both), "%s:%s", extra, shim_path);
		setenv("LD_PRELOAD", both, 1);
	}
	if (e->ld_library_path)
		setenv("LD_LIBRARY_PATH", e->ld_library_path, 1);
	if (e->cpu >= 0) { /* kept across exec, and by every thread the child starts */
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(e->cpu, &one);
		(void)sched_setaffinity(0, sizeof(one), &one); /* refused (a sandbox): unpinned, as before */
	}
	if (e->quiet) {
		FILE *f = freopen("/dev/null", "w", stderr);
		(void)f;
	}
}

/* `speed --child MODE args...`; its line of figures in out; false (and the
 * whole run failed) when it failed. Pinned to bench_cpu unless the task is
 * "threads". */
static bool run_on(enum bench_mode m, char *out, size_t outlen, const char *const *args, int cpu)
{
	const char *argv[16] = { self_path, "--child", mode_args[m] };
	int k = 3;
	for (; *args && k < 15; args++)
		argv[k++] = *args;
	argv[k] = NULL;
	struct mode_env e = { m, NULL, false, cpu };
	int st = bench_run_child("speed", argv, prep_mode, &e, out, outlen);
	if (st != 0) {
		if (st > 0)
			fprintf(stderr, "speed: FAILED: child (mode %s, %s) exited with status %d\n", mode_args[m], argv[3],
				st);
		any_failed = true;
		return false;
	}
	return true;
}

static bool run(enum bench_mode m, char *out, size_t outlen, const char *const *args)
{
	return run_on(m, out, outlen, args, strncmp(args[0], "threads", 7) != 0 ? bench_cpu : -1);
}

/* The CPUs this process may run on, at most `max`, into cpus; how many. */
static int usable_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE && n < max; c++)
		if (CPU_ISSET(c, &set))
			cpus[n++] = c;
	return n;
}

/* The 1, 5 and 15 minute load averages in buf; returns the first (-1 if
 * unknown). */
static double loadavg(char *buf, size_t len)
{
	snprintf(buf, len, "?");
	FILE *f = fopen("/proc/loadavg", "r");
	if (!f)
		return -1;
	double a = -1, b, c;
	if (fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
		snprintf(buf, len, "%.2f %.2f %.2f", a, b, c);
	else
		a = -1;
	fclose(f);
	return a;
}

/* The kernel, the architecture and the CPU's model name. */
static void machine_of(char *buf, size_t len)
{
	struct utsname u;
	char model[256] = "?";
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f))
			if (strncmp(line, "model name", 10) == 0 && strchr(line, ':')) {
				snprintf(model, sizeof(model), "%s", strchr(line, ':') + 2);
				model[strcspn(model, "\n")] = '\0';
				break;
			}
		fclose(f);
	}
	if (uname(&u) == 0)
		snprintf(buf, len, "%s %s %s, %s", u.nodename, u.release, u.machine, model);
	else
		snprintf(buf, len, "%s", model);
}

/* `git describe --always --dirty` of the tree the library was built from
 * (its directory's work tree), else of the source tree this program was
 * built from. */
static void commit_of(const char *lib, char *buf, size_t len)
{
	char dir[PATH_MAX];
	snprintf(buf, len, "unknown (no git)");
	const char *dirs[2] = { NULL, BENCH_SOURCE_ROOT };
	if (realpath(lib, dir)) {
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		dirs[0] = dir;
	}
	for (int i = 0; i < 2; i++) {
		if (!dirs[i])
			continue;
		char cmd[PATH_MAX + 128];
		snprintf(cmd, sizeof(cmd), "git -C '%s' describe --always --dirty 2>/dev/null", dirs[i]);
		FILE *p = popen(cmd, "r");
		if (!p)
			continue;
		char line[128] = "";
		bool got = fgets(line, sizeof(line), p) != NULL;
		pclose(p);
		line[strcspn(line, "\n")] = '\0';
		if (got && line[0]) {
			snprintf(buf, len, "%s (git describe --always --dirty in %s)", line, dirs[i]);
			return;
		}
	}
}

/* ---- instruction counts (callgrind) ---------------------------------------------- */

/* In this order: the last cuMemGetInfo_v2 runs with the pool holding
 * chunks, as in the calls task's second pass. */
enum { IC_PAIR, IC_INFO, IC_ASYNC, IC_INFOPOOL, NIC };
static const char *const ic_ops[NIC] = { "pair", "info", "async", "info" };

static bool find_in_path(const char *prog, char *out, size_t len)
{
	const char *path = getenv("PATH");
	if (!path)
		return false;
	while (*path) {
		size_t k = strcspn(path, ":");
		snprintf(out, len, "%.*s/%s", (int)k, path, prog);
		if (k && access(out, X_OK) == 0)
			return true;
		path += k + (path[k] == ':');
	}
	return false;
}

/* The instructions executed in the object whose file name is `obj` (its
 * self cost: cost lines not right after a calls= line), from a callgrind
 * output file; -1 if unreadable or if nothing ran there. */
static double callgrind_self(const char *file, const char *obj)
{
	FILE *f = fopen(file, "r");
	if (!f)
		return -1;
	static char names[4096][64];
	bool in_obj = false, after_calls = false, seen = false;
	double sum = 0;
	char line[8192];
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "ob=", 3) == 0 || strncmp(line, "cob=", 4) == 0) {
			bool is_ob = line[0] == 'o';
			char *p = line + (is_ob ? 3 : 4), *name = p;
			long id = -1;
			if (*p == '(') {
				id = strtol(p + 1, &name, 10);
				if (*name == ')')
					name++;
				while (*name == ' ')
					name++;
			}
			name[strcspn(name, "\n")] = '\0';
			const char *base = strrchr(name, '/');
			base = base ? base + 1 : name;
			if (*base && id >= 0 && id < 4096)
				snprintf(names[id], sizeof(names[id]), "%s", base);
			else if (!*base && id >= 0 && id < 4096)
				base = names[id];
			if (is_ob)
				in_obj = strcmp(base, obj) == 0;
			continue;
		}
		if (strncmp(line, "calls=", 6) == 0) {
			after_calls = true;
			continue;
		}
		if ((line[0] >= '0' && line[0] <= '9') || line[0] == '+' || line[0] == '-' || line[0] == '*') {
			if (after_calls) {
				after_calls = false;
				continue;
			}
			if (in_obj) {
				char *p = line;
				strtod(p, &p); /* the position */
				sum += strtod(p, NULL);
				seen = true;
			}
			continue;
		}
		if (strncmp(line, "fn=", 3) == 0)
			after_calls = false;
	}
	fclose(f);
	return seen ? sum : -1;
}

/* ic[m][op]: instructions per operation in the shim's object, mode m (off,
 * pooled); -1 where not counted. Returns what it did, for the header. */
static const char *count_instructions(int n, double ic[NMODES][NIC], char *why, size_t whylen)
{
	for (int m = 0; m < NMODES; m++)
		for (int k = 0; k < NIC; k++)
			ic[m][k] = -1;
	const char *env = getenv("BENCH_ICOUNT");
	if (n <= 0)
		return "skipped (BENCH_SMOKE=1)";
	char valgrind[PATH_MAX], icount[PATH_MAX + 16], fakedir[PATH_MAX], shim_real[PATH_MAX];
	if (env && strcmp(env, "0") == 0)
		return "skipped (BENCH_ICOUNT=0)";
	if (!find_in_path("valgrind", valgrind, sizeof(valgrind)))
		return "skipped: valgrind is not installed";
	snprintf(icount, sizeof(icount), "%s", self_path);
	char *slash = strrchr(icount, '/');
	snprintf(slash ? slash + 1 : icount, sizeof(icount) - (size_t)(slash ? slash + 1 - icount : 0), "icount");
	if (access(icount, X_OK))
		return "skipped: no icount program beside this one";
	Dl_info di;
	if (!dladdr((void *)(uintptr_t)fakecuda_calls, &di) || !realpath(di.dli_fname, fakedir) ||
	    !realpath(shim_path, shim_real))
		return "skipped: the fake driver or the shim cannot be located";
	*strrchr(fakedir, '/') = '\0';
	const char *shim_base = strrchr(shim_real, '/') + 1;
	char dir[] = "/tmp/speed-icount-XXXXXX";
	if (!mkdtemp(dir))
		return "skipped: no temporary folder";
	char nbuf[16], outopt[PATH_MAX + 64];
	snprintf(nbuf, sizeof(nbuf), "%d", n);
	snprintf(outopt, sizeof(outopt), "--callgrind-out-file=%s/cg", dir);
	for (int m = M_OFF; m < NMODES; m++) {
		const char *argv[] = { valgrind, "--tool=callgrind", outopt, "--zero-before=icount_zero",
				       "--dump-before=icount_dump", icount, "marked", nbuf, ic_ops[0], ic_ops[1],
				       ic_ops[2], ic_ops[3], NULL };
		struct mode_env e = { (enum bench_mode)m, fakedir, true, -1 };
		char out[256];
		int st = bench_run_child("speed", argv, prep_mode, &e, out, sizeof(out));
		for (int k = 0; k < NIC; k++) {
			char file[PATH_MAX + 32];
			snprintf(file, sizeof(file), "%s/cg.%d", dir, k + 1);
			double v = st == 0 ? callgrind_self(file, shim_base) : -1;
			ic[m][k] = v < 0 ? -1 : v / n;
			unlink(file);
		}
		char file[PATH_MAX + 32];
		snprintf(file, sizeof(file), "%s/cg", dir);
		unlink(file);
		if (st != 0)
			snprintf(why, whylen, "callgrind failed in mode %s (status %d)", mode_args[m], st);
	}
	rmdir(dir);
	return why[0] ? why : NULL;
}

/* ---- printing -------------------------------------------------------------------- */

static void fmt(char *buf, size_t len, double v, int decimals)
{
	if (v < 0 || isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.*f", decimals, v);
}

/* Median, min and max of the n values that are >= 0; -1 when none. */
static void stats3(const double *v, int n, double *med, double *lo, double *hi)
{
	double tmp[MAX_ROUNDS];
	int k = 0;
	for (int i = 0; i < n; i++)
		if (v[i] >= 0)
			tmp[k++] = v[i];
	if (k == 0) {
		*med = *lo = *hi = -1;
		return;
	}
	*med = median(tmp, (size_t)k);
	*lo = tmp[0];
	*hi = tmp[k - 1];
}

static void target_line(const char *what, double v, const char *unit, const char *target, bool ok)
{
	char b[32];
	if (!isnan(v))
		snprintf(b, sizeof(b), "%+.1f%s", v, unit);
	else
		snprintf(b, sizeof(b), "FAILED");
	printf("  %-52s %14s   %-10s %s\n", what, b, target, isnan(v) ? "FAILED" : ok ? "ok" : "MISSES TARGET");
}

static void ratio_line(const char *what, double v, const char *target, bool ok)
{
	char b[32];
	if (v >= 0)
		snprintf(b, sizeof(b), "%.2fx", v);
	else
		snprintf(b, sizeof(b), "-");
	printf("  %-52s %14s   %-10s %s\n", what, b, target, v >= 0 ? (ok ? "ok" : "MISSES TARGET") : "FAILED");
}

/* A worst-round verdict; no round to judge is no verdict, not a failure. */
static void clean_line(const char *what, double v)
{
	if (v >= 0)
		ratio_line(what, v, ">= 1.5x", v >= 1.5);
	else
		printf("  %-52s %14s   %-10s no verdict (malloc did not scale in any round)\n", what, "-", ">= 1.5x");
}

struct sizes {
	int rounds, batches, ops;          /* calls */
	int live_rounds, live_blocks, live_batches, live_ops;
	int thread_rounds, thread_batches, thread_ops;
	int churn, churn_warmup;
	int icount_ops;
};

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return child(argc - 2, argv + 2);
	if (argc != 2) {
		fprintf(stderr, "usage: speed PATH/libcumemcap.so   (BENCH_QUICK=1: smaller counts; "
				"BENCH_ICOUNT=0: no callgrind)\n");
		return 2;
	}
	ssize_t sl = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
	if (sl <= 0)
		return 1;
	self_path[sl] = '\0';
	shim_path = argv[1];
	if (access(shim_path, R_OK)) {
		fprintf(stderr, "speed: %s: %s\n", shim_path, strerror(errno));
		return 2;
	}
	bench_cpu = choose_cpu();
	pool_override = getenv("CUMEMCAP_POOL");
	release_override = getenv("CUMEMCAP_RELEASE");
	bool quick = bench_quick();
	const char *smoke_env = getenv("BENCH_SMOKE");
	bool smoke = smoke_env && *smoke_env && strcmp(smoke_env, "0") != 0;
	struct sizes z = smoke   ? (struct sizes){ 1, 1, 200, 1, 1000, 1, 200, 1, 1, 200, 200, 64, 0 }
			 : quick ? (struct sizes){ 3, 11, 5000, 3, 100000, 7, 5000, 3, 7, 5000, 4000, 256, 2000 }
				 : (struct sizes){ 9, 21, 20000, 3, 1000000, 11, 20000, 7, 11, 20000, 20000, 1000, 10000 };
	double start = now_ns();
	char date[64], load0[64], commit[PATH_MAX + 128];
	time_t t = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	double busy0 = loadavg(load0, sizeof(load0));
	commit_of(shim_path, commit, sizeof(commit));
	char machine[512];
	machine_of(machine, sizeof(machine));

	printf("speed: the speed bounds against the fake driver (%s GPU); %s counts\n", FAKE_DEVICES,
	       smoke ? "smoke-test (BENCH_SMOKE=1: the self-checks, no meaningful figure)"
	       : quick ? "quick (BENCH_QUICK=1)" : "full");
	printf("date %s; nproc %d; load average at start %s\n", date, nproc(), load0);
	printf("library %s\ncommit %s\n", shim_path, commit);
	printf("machine %s\ncommand %s%s %s\n", machine, quick ? "BENCH_QUICK=1 " : "", argv[0], shim_path);
	printf("modes, each a child process, alternating: no shim | shim, CUMEMCAP_POOL=off | shim, CUMEMCAP_POOL=%s%s%s\n",
	       pool_override ? pool_override : "on", release_override ? ", CUMEMCAP_RELEASE=" : "",
	       release_override ? release_override : "");
	if (bench_cpu >= 0)
		printf("single-thread children (calls, live, churn) run on CPU %d with all their threads (BENCH_CPU "
		       "chooses); the threads task on every CPU\n",
		       bench_cpu);
	printf("every child runs an idle extra thread (baseline included); shim runs: CUMEMCAP_LOG=off CUMEMCAP_CONFIG= "
	       "(no limit)\n");
	printf("times are medians and vary with the machine's load (compare within one run); instruction counts\n"
	       "and driver call counts are deterministic and compare across runs\n\n");
	fflush(stdout);

	/* ---- 1. calls --------------------------------------------------------------- */
	enum { F_PAIR, F_INFO, F_ASYNC, F_INFOPOOL, F_MALLOC, F_RATIO, NF };
	static double fig[NMODES][NF][MAX_ROUNDS], figmin[NMODES][NF][MAX_ROUNDS];
	static const char *const keys[NF] = { "pair", "info", "async", "infopool", "malloc", "ratio" };
	char nb[16], no[16], out[1024];
	snprintf(nb, sizeof(nb), "%d", z.batches);
	snprintf(no, sizeof(no), "%d", z.ops);
	for (int r = 0; r < z.rounds; r++)
		for (int m = 0; m < NMODES; m++) {
			const char *args[] = { "calls", nb, no, NULL };
			bool ok = run((enum bench_mode)m, out, sizeof(out), args);
			for (int k = 0; k < NF; k++) {
				char key[32];
				snprintf(key, sizeof(key), "%smin", keys[k]);
				fig[m][k][r] = ok ? field(out, keys[k]) : -1;
				figmin[m][k][r] = ok ? field(out, key) : -1;
			}
		}
	double ic[NMODES][NIC];
	char why[256] = "";
	const char *icnote = count_instructions(z.icount_ops, ic, why, sizeof(why));
	double med[NMODES][NF];
	for (int m = 0; m < NMODES; m++)
		for (int k = 0; k < NF; k++) {
			double lo, hi;
			stats3(fig[m][k], z.rounds, &med[m][k], &lo, &hi);
		}
	/* What the shim adds: the median over rounds of (shim child - no-shim
	 * child of the same round), so that drift between rounds cancels. */
	double added[NMODES][NF];
	for (int m = M_OFF; m < NMODES; m++)
		for (int k = 0; k < NF; k++) {
			double d[MAX_ROUNDS];
			int nd = 0;
			for (int r = 0; r < z.rounds; r++)
				if (fig[m][k][r] >= 0 && fig[M_NONE][k][r] >= 0)
					d[nd++] = fig[m][k][r] - fig[M_NONE][k][r];
			added[m][k] = nd ? median(d, (size_t)nd) : NAN;
		}
	printf("1. ns per operation, one thread: median of %d children per mode, each the median of %d batch means\n"
	       "   (%d ops per batch, %d for the async pair, after %d warm-up batches; the async rows after the others,\n"
	       "   with the default pool's release threshold at its maximum); instructions per operation in\n"
	       "   the shim's own code (callgrind, %d ops after %d warm-up, in %s's object)%s%s\n",
	       z.rounds, z.batches, z.ops, (z.ops / 5 + ASYNC_RUN - 1) / ASYNC_RUN * ASYNC_RUN, WARMUP_BATCHES,
	       z.icount_ops, z.icount_ops / 10, strrchr(shim_path, '/') ? strrchr(shim_path, '/') + 1 : shim_path,
	       icnote ? ": " : "", icnote ? icnote : "");
	printf("%-40s %9s %9s %9s | %12s %12s\n", "", "no shim", "pool=off", "pooled", "instr. off", "instr. pooled");
	static const char *const rows[NF - 1] = { "cuMemAlloc_v2+cuMemFree_v2, 4 KiB", "cuMemGetInfo_v2",
						  "cuMemAllocAsync+cuMemFreeAsync, 4 KiB",
						  "cuMemGetInfo_v2, a pool holding chunks", "glibc malloc(4096)+free" };
	for (int k = 0; k < NF - 1; k++) {
		char v[NMODES][16], i1[16], i2[16];
		for (int m = 0; m < NMODES; m++)
			fmt(v[m], 16, med[m][k], 1);
		fmt(i1, 16, k < NIC ? ic[M_OFF][k] : -1, 1);
		fmt(i2, 16, k < NIC ? ic[M_POOLED][k] : -1, 1);
		printf("%-40s %9s %9s %9s | %12s %12s\n", rows[k], v[0], v[1], v[2], i1, i2);
	}
	double rmed, rlo, rhi;
	stats3(fig[M_POOLED][F_RATIO], z.rounds, &rmed, &rlo, &rhi);
	printf("targets (added: median over rounds of shim child minus no-shim child of the same round)\n");
	target_line("passthrough pair added (pool=off - no shim)", added[M_OFF][F_PAIR], " ns", "<= +100 ns",
		    added[M_OFF][F_PAIR] <= 100);
	target_line("cuMemGetInfo_v2 added, pool=off", added[M_OFF][F_INFO], " ns", "<= +15 ns",
		    added[M_OFF][F_INFO] <= 15);
	target_line("cuMemGetInfo_v2 added, pooled", added[M_POOLED][F_INFO], " ns", "<= +15 ns",
		    added[M_POOLED][F_INFO] <= 15);
	target_line("async pair added, pool=off", added[M_OFF][F_ASYNC], " ns", "<= +100 ns",
		    added[M_OFF][F_ASYNC] <= 100);
	target_line("async pair added, pooled", added[M_POOLED][F_ASYNC], " ns", "<= +100 ns",
		    added[M_POOLED][F_ASYNC] <= 100);
	for (int m = M_OFF; m < NMODES; m++) {
		char b[32], l[64];
		snprintf(b, sizeof(b), isnan(added[m][F_INFOPOOL]) ? "FAILED" : "%+.1f ns", added[m][F_INFOPOOL]);
		snprintf(l, sizeof(l), "cuMemGetInfo_v2 added, a pool holding chunks, %s", m == M_OFF ? "off" : "pooled");
		printf("  %-52s %14s   %-10s %s\n", l, b, "-", "(no target: the issue's figure has no pool in use)");
	}
	ratio_line("pooled 4 KiB pair / malloc(4096)+free, same process", rmed, "<= 2x", rmed <= 2);
	{
		char lo[16], hi[16];
		fmt(lo, 16, rlo, 2);
		fmt(hi, 16, rhi, 2);
		printf("  %-52s %6s .. %-6s\n", "  (that ratio per child: min .. max)", lo, hi);
	}
	/* The same from each child's fastest batch: preemption only ever adds
	 * time, so on a loaded machine these move less than the medians. */
	printf("the same from each child's fastest batch (median over children), less disturbed by load; no verdicts\n");
	for (int k = 0; k < NF - 1; k++) {
		double v3[NMODES], lo, hi;
		char v[NMODES][16];
		for (int m = 0; m < NMODES; m++) {
			stats3(figmin[m][k], z.rounds, &v3[m], &lo, &hi);
			fmt(v[m], 16, v3[m], 1);
		}
		printf("%-40s %9s %9s %9s\n", rows[k], v[0], v[1], v[2]);
	}
	{
		double a[NMODES][NF];
		for (int m = M_OFF; m < NMODES; m++)
			for (int k = 0; k < NF; k++) {
				double d[MAX_ROUNDS];
				int nd = 0;
				for (int r = 0; r < z.rounds; r++)
					if (figmin[m][k][r] >= 0 && figmin[M_NONE][k][r] >= 0)
						d[nd++] = figmin[m][k][r] - figmin[M_NONE][k][r];
				a[m][k] = nd ? median(d, (size_t)nd) : NAN;
			}
		double rm, lo, hi;
		stats3(figmin[M_POOLED][F_RATIO], z.rounds, &rm, &lo, &hi);
		printf("  added, pool=off: pair %+.1f, cuMemGetInfo_v2 %+.1f, async pair %+.1f; pooled: cuMemGetInfo_v2 "
		       "%+.1f,\n  async pair %+.1f; pooled pair / malloc pair %.2fx\n",
		       a[M_OFF][F_PAIR], a[M_OFF][F_INFO], a[M_OFF][F_ASYNC], a[M_POOLED][F_INFO], a[M_POOLED][F_ASYNC],
		       rm);
	}
	printf("\n");
	fflush(stdout);

	/* ---- 2. live blocks --------------------------------------------------------- */
	double live[4][MAX_ROUNDS], lratio[MAX_ROUNDS], lratio0[MAX_ROUNDS];
	{
		char n[32], b[16], o[16];
		snprintf(n, sizeof(n), "%d", z.live_blocks);
		snprintf(b, sizeof(b), "%d", z.live_batches);
		snprintf(o, sizeof(o), "%d", z.live_ops);
		for (int r = 0; r < z.live_rounds; r++) {
			const char *args[] = { "live", n, b, o, NULL };
			bool ok = run(M_POOLED, out, sizeof(out), args);
			static const char *const lk[4] = { "cu0", "mal0", "cu1", "mal1" };
			for (int k = 0; k < 4; k++)
				live[k][r] = ok ? field(out, lk[k]) : -1;
			lratio0[r] = ok && live[1][r] > 0 ? live[0][r] / live[1][r] : -1;
			lratio[r] = ok && live[3][r] > 0 ? live[2][r] / live[3][r] : -1;
		}
	}
	printf("2. pooled only: 4 KiB pairs with %d blocks live, each of cuMemAlloc_v2 and of malloc, both of the same\n"
	       "   512..1024 bytes (xorshift32 seed 0x%x); median of %d children, each the median of %d batch means of\n"
	       "   %d pairs, cuMemAlloc_v2 and malloc batches alternating\n",
	       z.live_blocks, LIVE_SEED, z.live_rounds, z.live_batches, z.live_ops);
	{
		double m[4], lo, hi, r0, r1, r1lo, r1hi;
		for (int k = 0; k < 4; k++)
			stats3(live[k], z.live_rounds, &m[k], &lo, &hi);
		stats3(lratio0, z.live_rounds, &r0, &lo, &hi);
		stats3(lratio, z.live_rounds, &r1, &r1lo, &r1hi);
		char v[6][16];
		fmt(v[0], 16, m[0], 1);
		fmt(v[1], 16, m[1], 1);
		fmt(v[2], 16, m[2], 1);
		fmt(v[3], 16, m[3], 1);
		fmt(v[4], 16, r0, 2);
		fmt(v[5], 16, r1, 2);
		printf("%-40s %12s %12s %9s\n", "", "pooled pair", "malloc pair", "ratio");
		printf("%-40s %12s %12s %9s\n", "ns, no block live", v[0], v[1], v[4]);
		char l[64];
		snprintf(l, sizeof(l), "ns, %d blocks live", z.live_blocks);
		printf("%-40s %12s %12s %9s\n", l, v[2], v[3], v[5]);
		char lb[80];
		snprintf(lb, sizeof(lb), "pooled / malloc with %d blocks live", z.live_blocks);
		ratio_line(lb, r1, "<= 2x", r1 <= 2);
		fmt(v[0], 16, r1lo, 2);
		fmt(v[1], 16, r1hi, 2);
		printf("  %-52s %6s .. %-6s\n", "  (per child: min .. max)", v[0], v[1]);
	}
	printf("\n");
	fflush(stdout);

	/* ---- 3. threads ------------------------------------------------------------- */
	/* T(1) is one child per CPU, each pinned there, and their mean: the
	 * throughput of one thread on this machine. The CPUs need not be
	 * equally fast (see bench_cpu; for minutes one may run the pooled
	 * pair at half speed while glibc's loses a fifth), and one unpinned
	 * child lands on either: T2/T1 then measured the host's choice as
	 * much as the shim (1.1x when the single thread had the fast CPU,
	 * 2.0x when it had the slow one, in one run). What two threads can
	 * reach is the sum over both CPUs, twice the mean. */
	enum { T1_CPUS_MAX = 8 };
	int t1_cpu[T1_CPUS_MAX];
	int t1_cpus = usable_cpus(t1_cpu, T1_CPUS_MAX);
	double tp[NTHREADS][3][MAX_ROUNDS]; /* cu mal worst */
	double t1_each[T1_CPUS_MAX][2][MAX_ROUNDS]; /* T(1) per CPU: cu mal */
	{
		char b[16], o[16];
		snprintf(b, sizeof(b), "%d", z.thread_batches);
		snprintf(o, sizeof(o), "%d", z.thread_ops);
		for (int r = 0; r < z.thread_rounds; r++)
			for (int i = 0; i < NTHREADS; i++) {
				char n[16];
				snprintf(n, sizeof(n), "%d", thread_counts[i]);
				const char *args[] = { "threads", n, b, o, NULL };
				if (thread_counts[i] != 1 || t1_cpus < 2) {
					bool ok = run(M_POOLED, out, sizeof(out), args);
					tp[i][0][r] = ok ? field(out, "cu") : -1;
					tp[i][1][r] = ok ? field(out, "mal") : -1;
					tp[i][2][r] = ok ? field(out, "worst") : -1;
					continue;
				}
				double sum[2] = { 0, 0 }, worst = -1;
				bool all = true;
				for (int c = 0; c < t1_cpus; c++) {
					bool ok = run_on(M_POOLED, out, sizeof(out), args, t1_cpu[c]);
					t1_each[c][0][r] = ok ? field(out, "cu") : -1;
					t1_each[c][1][r] = ok ? field(out, "mal") : -1;
					double w = ok ? field(out, "worst") : -1;
					all = all && ok && t1_each[c][0][r] > 0 && t1_each[c][1][r] > 0;
					sum[0] += t1_each[c][0][r];
					sum[1] += t1_each[c][1][r];
					worst = worst < 0 || (w >= 0 && w < worst) ? w : worst;
				}
				tp[i][0][r] = all ? sum[0] / t1_cpus : -1;
				tp[i][1][r] = all ? sum[1] / t1_cpus : -1;
				tp[i][2][r] = all ? worst : -1;
			}
	}
	printf("3. pooled only: throughput of 4 KiB pairs on 1, 2 and 8 threads (million pairs per second, all threads;\n"
	       "   each child the median of %d batches of %d pairs per thread, batches between barriers, after %d\n"
	       "   warm-up), and glibc malloc(4096)+free in the same children, batches alternating: what this machine\n"
	       "   lets threads scale to now. %d rounds, the thread counts alternating; ratio = T(n) / T(1) of the same\n"
	       "   round; T(1) is the mean of one child pinned on each CPU in turn (%d CPUs), the others are not pinned\n",
	       z.thread_batches, z.thread_ops, WARMUP_BATCHES, z.thread_rounds, t1_cpus < 2 ? 1 : t1_cpus);
	printf("%-10s | %-29s | %-21s | %-29s | %s\n", "", "      pooled, Mpairs/s", "ratio to 1 thread",
	       "      malloc, Mpairs/s", "malloc ratio");
	printf("%-10s | %9s %9s %9s | %6s %6s %6s | %9s %9s %9s | %s\n", "threads", "median", "min", "max", "median",
	       "min", "max", "median", "min", "max", "median");
	double ratio_med[NTHREADS], ratio_min[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		double cm, cl, ch, mm, ml, mh, rm, rl, rh, mrm, mrl, mrh, rr[MAX_ROUNDS], mr[MAX_ROUNDS];
		stats3(tp[i][0], z.thread_rounds, &cm, &cl, &ch);
		stats3(tp[i][1], z.thread_rounds, &mm, &ml, &mh);
		for (int r = 0; r < z.thread_rounds; r++) {
			rr[r] = tp[i][0][r] > 0 && tp[0][0][r] > 0 ? tp[i][0][r] / tp[0][0][r] : -1;
			mr[r] = tp[i][1][r] > 0 && tp[0][1][r] > 0 ? tp[i][1][r] / tp[0][1][r] : -1;
		}
		stats3(rr, z.thread_rounds, &rm, &rl, &rh);
		stats3(mr, z.thread_rounds, &mrm, &mrl, &mrh);
		ratio_med[i] = rm;
		ratio_min[i] = rl;
		char v[10][16];
		fmt(v[0], 16, cm, 2);
		fmt(v[1], 16, cl, 2);
		fmt(v[2], 16, ch, 2);
		fmt(v[3], 16, rm, 2);
		fmt(v[4], 16, rl, 2);
		fmt(v[5], 16, rh, 2);
		fmt(v[6], 16, mm, 2);
		fmt(v[7], 16, ml, 2);
		fmt(v[8], 16, mh, 2);
		fmt(v[9], 16, mrm, 2);
		printf("%-10d | %9s %9s %9s | %6s %6s %6s | %9s %9s %9s | %s\n", thread_counts[i], v[0], v[1], v[2],
		       v[3], v[4], v[5], v[6], v[7], v[8], v[9]);
	}
	if (t1_cpus >= 2) {
		printf("  T(1) per CPU, Mpairs/s pooled (malloc), median over rounds:");
		for (int c = 0; c < t1_cpus; c++) {
			double a, b, lo, hi;
			stats3(t1_each[c][0], z.thread_rounds, &a, &lo, &hi);
			stats3(t1_each[c][1], z.thread_rounds, &b, &lo, &hi);
			printf("%s CPU %d %.2f (%.2f)", c ? ";" : "", t1_cpu[c], a, b);
		}
		printf("\n");
	}
	/* Per round, T(n)/T(1) of the pooled pairs beside glibc's in the same
	 * children. A round where glibc's own pairs did not reach 1.7x did not
	 * have two free CPUs: the host took one. */
	printf("  per round, T(n)/T(1) pooled (malloc):");
	for (int r = 0; r < z.thread_rounds; r++)
		printf("%s T2 %.2f (%.2f) T8 %.2f (%.2f)", r ? ";" : "", tp[1][0][r] / tp[0][0][r],
		       tp[1][1][r] / tp[0][1][r], tp[2][0][r] / tp[0][0][r], tp[2][1][r] / tp[0][1][r]);
	printf("\n");
	{
		double worst = -1;
		for (int i = 0; i < NTHREADS; i++)
			for (int r = 0; r < z.thread_rounds; r++)
				if (tp[i][2][r] >= 0 && tp[0][0][r] > 0) {
					double x = tp[i][2][r] / tp[0][0][r];
					worst = worst < 0 || x < worst ? x : worst;
				}
		/* The worst round among those glibc's pairs say had the CPUs. */
		double clean_min[NTHREADS];
		int clean[NTHREADS];
		for (int i = 1; i < NTHREADS; i++) {
			clean_min[i] = -1;
			clean[i] = 0;
			for (int r = 0; r < z.thread_rounds; r++) {
				if (tp[i][0][r] <= 0 || tp[0][0][r] <= 0 || tp[i][1][r] <= 0 || tp[0][1][r] <= 0 ||
				    tp[i][1][r] / tp[0][1][r] < 1.7)
					continue;
				double x = tp[i][0][r] / tp[0][0][r];
				clean_min[i] = clean[i]++ == 0 || x < clean_min[i] ? x : clean_min[i];
			}
		}
		char what[96];
		ratio_line("pooled T2/T1, median over rounds", ratio_med[1], ">= 1.5x", ratio_med[1] >= 1.5);
		printf("  %-52s %13.2fx   (every round)\n", "pooled T2/T1, worst round", ratio_min[1]);
		snprintf(what, sizeof(what), "pooled T2/T1, worst of %d rounds malloc scaled in", clean[1]);
		clean_line(what, clean_min[1]);
		/* "8 threads no lower than 2": on 2 CPUs T(n)/T(1) cannot pass 2
		 * (glibc's own is beside it), so 8 threads are held to the 2-thread
		 * bar: oversubscribed 4x, no lower than what 2 threads must reach. */
		ratio_line("pooled T8/T1, median over rounds", ratio_med[2], ">= 1.5x", ratio_med[2] >= 1.5);
		printf("  %-52s %13.2fx   (every round)\n", "pooled T8/T1, worst round", ratio_min[2]);
		snprintf(what, sizeof(what), "pooled T8/T1, worst of %d rounds malloc scaled in", clean[2]);
		clean_line(what, clean_min[2]);
		double t82[MAX_ROUNDS], m82[MAX_ROUNDS], t82m, t82l, t82h, m82m, m82l, m82h;
		for (int r = 0; r < z.thread_rounds; r++) {
			t82[r] = tp[2][0][r] > 0 && tp[1][0][r] > 0 ? tp[2][0][r] / tp[1][0][r] : -1;
			m82[r] = tp[2][1][r] > 0 && tp[1][1][r] > 0 ? tp[2][1][r] / tp[1][1][r] : -1;
		}
		stats3(t82, z.thread_rounds, &t82m, &t82l, &t82h);
		stats3(m82, z.thread_rounds, &m82m, &m82l, &m82h);
		printf("  %-52s %8.2f .. %.2fx   (median, min; malloc %.2f, %.2f)\n", "pooled T8/T2", t82m, t82l, m82m,
		       m82l);
		if (clean[1] * 2 < z.thread_rounds)
			printf("  note: in most rounds malloc itself did not scale to 1.7x on 2 threads: this run did not\n"
			       "        have two free CPUs, and the pooled ratios say little about the shim\n");
		char w[16];
		fmt(w, 16, worst, 2);
		printf("  %-52s %13sx   (the slowest single batch of any thread count, over T(1) of its round)\n",
		       "  slowest batch / T(1)", w);
	}
	printf("\n");
	fflush(stdout);

	/* ---- 3b. threads that come and go in one process ---------------------------- */
	{
		char b[16], o[16];
		snprintf(b, sizeof(b), "%d", z.thread_batches);
		snprintf(o, sizeof(o), "%d", z.thread_ops);
		double ra[MAX_ROUNDS], ma[MAX_ROUNDS];
		for (int r = 0; r < z.thread_rounds; r++) {
			const char *args[] = { "threads-after", b, o, NULL };
			bool ok = run(M_POOLED, out, sizeof(out), args);
			double c1 = ok ? field(out, "cu1") : -1, c2 = ok ? field(out, "cu2") : -1;
			double m1 = ok ? field(out, "mal1") : -1, m2 = ok ? field(out, "mal2") : -1;
			ra[r] = c1 > 0 && c2 > 0 ? c2 / c1 : -1;
			ma[r] = m1 > 0 && m2 > 0 ? m2 / m1 : -1;
		}
		double rm, rl, rh, mm, ml, mh;
		stats3(ra, z.thread_rounds, &rm, &rl, &rh);
		stats3(ma, z.thread_rounds, &mm, &ml, &mh);
		printf("3b. pooled only, one process per round, unpinned: one new thread times its 4 KiB pairs and exits,\n"
		       "   then two new threads time theirs at once (batches and warm-up as in 3); ratio = the two\n"
		       "   threads' throughput over the one thread's, %d rounds\n",
		       z.thread_rounds);
		printf("  per round, T2/T1 pooled (malloc):");
		for (int r = 0; r < z.thread_rounds; r++)
			printf("%s %.2f (%.2f)", r ? ";" : "", ra[r], ma[r]);
		printf("\n");
		ratio_line("pooled T2/T1 after a thread left, median", rm, ">= 1.5x", rm >= 1.5);
		printf("  %-52s %13.2fx   (malloc median %.2fx, worst %.2fx)\n", "pooled T2/T1 after a thread left, worst",
		       rl, mm, ml);
	}
	printf("\n");
	fflush(stdout);

	/* ---- 4. 8 MiB churn --------------------------------------------------------- */
	double ch[NMODES][3 + NSYNC];
	{
		char c[32], w[32];
		snprintf(c, sizeof(c), "%d", z.churn);
		snprintf(w, sizeof(w), "%d", z.churn_warmup);
		for (int m = 0; m < NMODES; m++) {
			const char *args[] = { "churn", c, w, NULL };
			bool ok = run((enum bench_mode)m, out, sizeof(out), args);
			ch[m][0] = ok ? field(out, "ns") : -1;
			ch[m][1] = ok ? field(out, "syncs") : -1;
			ch[m][2] = ok ? field(out, "dallocs") : -1;
			for (size_t k = 0; k < NSYNC; k++)
				ch[m][3 + k] = ok ? field(out, sync_names[k]) : -1;
		}
	}
	printf("4. 8 MiB churn (cuMemAlloc_v2, cuMemFree_v2, again, same size): %d pairs after %d warm-up pairs, one\n"
	       "   child per mode; a reuse is an allocation the driver did not see (pairs - driver cuMemAlloc_v2 calls);\n"
	       "   synchronizations per 64 reuses (no shim, pool=off: per 64 pairs) as the fake counts them\n",
	       z.churn, z.churn_warmup);
	printf("%-44s %9s %9s %9s\n", "", "no shim", "pool=off", "pooled");
	{
		char v[NMODES][16];
		for (int m = 0; m < NMODES; m++)
			fmt(v[m], 16, ch[m][0], 1);
		printf("%-44s %9s %9s %9s\n", "ns per pair", v[0], v[1], v[2]);
		for (int m = 0; m < NMODES; m++)
			fmt(v[m], 16, ch[m][2] >= 0 ? z.churn - ch[m][2] : -1, 0);
		printf("%-44s %9s %9s %9s\n", "reuses", v[0], v[1], v[2]);
		double per[NMODES];
		for (int k = -1; k < (int)NSYNC; k++) {
			for (int m = 0; m < NMODES; m++) {
				double x = k < 0 ? ch[m][1] : ch[m][3 + k];
				double reuses = m == M_POOLED ? z.churn - ch[m][2] : z.churn;
				double p = x < 0 || ch[m][2] < 0 ? -1 : reuses > 0 ? 64 * x / reuses : x > 0 ? 1e9 : 0;
				if (k < 0)
					per[m] = p;
				fmt(v[m], 16, p, 2);
			}
			char l[64];
			snprintf(l, sizeof(l), "%s per 64", k < 0 ? "device synchronizations" : sync_names[k]);
			printf("%-44s %9s %9s %9s\n", l, v[0], v[1], v[2]);
		}
		char pb[32];
		fmt(pb, sizeof(pb), per[M_POOLED], 2);
		printf("  %-52s %14s   %-10s %s\n", "pooled device synchronizations per 64 reuses", per[M_POOLED] < 0 ? "FAILED" : pb,
		       "<= 1", per[M_POOLED] < 0 ? "FAILED" : per[M_POOLED] <= 1 ? "ok" : "MISSES TARGET");
		printf("  (device synchronizations: fakecuda_device_syncs, cuCtxSynchronize and cuMemFree's own wait for\n"
		       "   the context's streams; the other rows: calls of those entry points, _ptsz included)\n");
	}
	char load1[64];
	double busy1 = loadavg(load1, sizeof(load1));
	printf("\nspeed: %.1f s; load average at end %s\n", (now_ns() - start) / 1e9, load1);
	if (busy0 > nproc() || busy1 > nproc())
		printf("note: the load average passed nproc (%d) during this run: other processes took CPU time, so\n"
		       "      the times (and most of all the thread ratios) are unreliable; the counts are not affected\n",
		       nproc());
	if (any_failed)
		printf("speed: FAILED: a measurement or a self-check failed (see \"FAILED\" above)\n");
	return any_failed ? 1 : 0;
}
