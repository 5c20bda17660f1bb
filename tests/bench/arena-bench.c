/* arena-bench: the pooled arena's figures, against the fake driver.
 *
 *   arena-bench SHIM TRACE...     run everything: each measurement is a child
 *                                 process of this program in each of three
 *                                 modes; print the tables
 *   arena-bench --child MODE TASK ARGS...
 *                                 one measurement in this process, one line
 *                                 of key=value figures on stdout
 *
 * Modes (the parent sets the environment of each child):
 *   none    no shim: LD_PRELOAD unset, the program talks to the fake driver
 *   off     the shim with CUMEMCAP_POOL=off: accounting passthrough
 *   pooled  the shim with CUMEMCAP_POOL=on (the default; the parent's own
 *           CUMEMCAP_POOL / CUMEMCAP_RELEASE, if set, are passed to this mode
 *           only, e.g. CUMEMCAP_POOL=nopack or CUMEMCAP_RELEASE=never)
 * Every child gets FAKECUDA_DEVICES=80GiB, CUMEMCAP_LOG=off,
 * CUMEMCAP_CONFIG="" (no file) and no other CUMEMCAP_* variable, so no limit.
 *
 * Tasks (children):
 *   pairs BYTES THREADS BATCHES OPS
 *       BATCHES batches of OPS cuMemAlloc_v2+cuMemFree_v2 pairs of BYTES in
 *       each of THREADS threads (a barrier before every batch, two untimed
 *       warm-up batches first); prints the median of the batch means (ns per
 *       pair, as one thread sees it).
 *   loop BYTES COUNT        COUNT pairs of BYTES: driver calls and syncs
 *   trace FILE              replay a trace (format: traces/gen-traces.py),
 *                           with a self-check (below)
 *   heap NBLOCKS BATCHES OPS
 *       NBLOCKS live blocks of 512..1024 bytes: heap (mallinfo2 uordblks +
 *       hblkhd) and RSS growth while they are allocated, what the driver
 *       holds for them, and ns per 1 KiB pair with none and with all of
 *       them live.
 *
 * The replayer's self-check (trace and heap tasks, never timed): every
 * pointer is 512-byte aligned and overlaps no other live block (an interval
 * set); every call succeeds; after a trace that frees everything, nothing is
 * live, and without pooling the driver itself holds nothing; under the shim,
 * the shim's `reserved` equals what the driver holds. A failure prints
 * "SELF-CHECK FAILED" and the child exits 3; the parent then exits non-zero.
 *
 * Figures that miss the targets are printed with "MISSES TARGET";
 * they do not change the exit status (this is a benchmark, not a test).
 * BENCH_QUICK=1 uses smaller counts. The replayer calls the driver API
 * linked against libcuda.so.1 (the shim interposes it when preloaded) and
 * never calls cuCtxSynchronize. */
#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <search.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-common.h"
#include "cumemcap.h"
#include "fakecuda.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define ALIGN 512
#define WARMUP_BATCHES 2
#define HEAP_SEED 0x5eed0004u
#define FAKE_DEVICES "80GiB"
#define MAX_ID (1u << 26) /* trace block IDs index an array */

/* ---- small helpers ------------------------------------------------------------ */





static uint64_t parse_u64(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end) {
		fprintf(stderr, "arena-bench: \"%s\" is not a number\n", s);
		exit(2);
	}
	return v;
}

static const char *child_mode = "?";
static const char *child_what = "?";

static _Noreturn void check_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void check_failed(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "arena-bench: SELF-CHECK FAILED (%s, mode %s): ", child_what, child_mode);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(3);
}

/* ---- the driver: context and counters -------------------------------------------- */

static CUcontext the_ctx;

/* The device's primary context, current in this thread. cuMemGetInfo_v2
 * (hooked, allocating nothing) lets the shim do its first-use work before
 * anything is timed or counted. */
static void setup_ctx(void)
{
	CUdevice d;
	CUresult r;
	size_t freeb, total;
	if ((r = cuInit(0)) || (r = cuDeviceGet(&d, 0)) || (r = cuDevicePrimaryCtxRetain(&the_ctx, d)) ||
	    (r = cuCtxSetCurrent(the_ctx)) || (r = cuMemGetInfo_v2(&freeb, &total))) {
		fprintf(stderr, "arena-bench: driver setup failed: CUresult %d\n", (int)r);
		exit(1);
	}
}

/* Every allocating/freeing entry point a device-memory pool could use:
 * the figure is the sum (in practice cuMemAlloc_v2 + cuMemFree_v2). */
static const char *const driver_alloc_names[] = {
	"cuMemAlloc_v2", "cuMemAlloc", "cuMemAllocPitch_v2", "cuMemCreate", "cuMemAllocAsync",
	"cuMemAllocFromPoolAsync", "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync_ptsz",
};
static const char *const driver_free_names[] = {
	"cuMemFree_v2", "cuMemFree", "cuMemRelease", "cuMemFreeAsync", "cuMemFreeAsync_ptsz",
};

struct counters {
	uint64_t allocs, frees, syncs;
};

static struct counters driver_counters(void)
{
	struct counters c = { 0, 0, fakecuda_device_syncs() };
	for (size_t i = 0; i < sizeof(driver_alloc_names) / sizeof(*driver_alloc_names); i++)
		c.allocs += fakecuda_calls(driver_alloc_names[i]);
	for (size_t i = 0; i < sizeof(driver_free_names) / sizeof(*driver_free_names); i++)
		c.frees += fakecuda_calls(driver_free_names[i]);
	return c;
}

typedef int (*get_stats_fn)(int, struct cumemcap_stats *, size_t);

/* The shim is there exactly in the modes that preload it. */
static get_stats_fn check_shim(enum bench_mode m)
{
	get_stats_fn get = (get_stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cumemcap_get_stats");
	if ((get != NULL) != (m != M_NONE)) {
		fprintf(stderr, "arena-bench: mode %s but the shim is %s\n", mode_args[m],
			get ? "loaded" : "not loaded");
		exit(1);
	}
	return get;
}

/* Under the shim: the shim's `reserved` is what the driver holds (read
 * twice around the driver's figure, in case the shim's worker released a
 * segment in between). */
static void check_reserved(get_stats_fn get)
{
	if (!get)
		return;
	struct cumemcap_stats a, b;
	if (get(0, &a, sizeof(a)) != 0)
		check_failed("cumemcap_get_stats(0) failed after the device was used");
	uint64_t drv = fakecuda_reserved(0);
	if (get(0, &b, sizeof(b)) != 0)
		check_failed("cumemcap_get_stats(0) failed");
	if (a.reserved != drv && b.reserved != drv)
		check_failed("the shim counts %" PRIu64 " bytes reserved, the driver holds %" PRIu64,
			     b.reserved, drv);
}

static enum bench_mode parse_mode(const char *s)
{
	for (int m = 0; m < NMODES; m++)
		if (strcmp(s, mode_args[m]) == 0)
			return (enum bench_mode)m;
	fprintf(stderr, "arena-bench: unknown mode \"%s\"\n", s);
	exit(2);
}

/* ---- task: pairs ---------------------------------------------------------------------- */

struct pair_job {
	uint64_t bytes;
	int batches, ops;
	pthread_barrier_t *bar;
	double *means; /* batches */
	int failed;
};

static void *pair_thread(void *arg)
{
	struct pair_job *j = arg;
	if (cuCtxSetCurrent(the_ctx) != CUDA_SUCCESS) {
		j->failed = 1;
		return NULL;
	}
	for (int b = -WARMUP_BATCHES; b < j->batches; b++) {
		if (j->bar)
			pthread_barrier_wait(j->bar);
		double t0 = now_ns();
		for (int i = 0; i < j->ops; i++) {
			CUdeviceptr p;
			if (cuMemAlloc_v2(&p, j->bytes) != CUDA_SUCCESS || cuMemFree_v2(p) != CUDA_SUCCESS) {
				j->failed = 1;
				/* keep meeting the barrier so the other threads finish */
			}
		}
		double t1 = now_ns();
		if (b >= 0)
			j->means[b] = (t1 - t0) / j->ops;
	}
	return NULL;
}

static int task_pairs(enum bench_mode m, int argc, char **argv)
{
	if (argc != 4)
		return 2;
	uint64_t bytes = parse_u64(argv[0]);
	int threads = (int)parse_u64(argv[1]), batches = (int)parse_u64(argv[2]), ops = (int)parse_u64(argv[3]);
	if (threads < 1 || batches < 1 || ops < 1)
		return 2;
	setup_ctx();
	check_shim(m);
	struct pair_job *jobs = calloc((size_t)threads, sizeof(*jobs));
	double *means = calloc((size_t)threads * (size_t)batches, sizeof(*means));
	pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
	pthread_barrier_t bar;
	if (!jobs || !means || !tid || pthread_barrier_init(&bar, NULL, (unsigned)threads))
		return 1;
	for (int t = 0; t < threads; t++) {
		jobs[t] = (struct pair_job){ bytes, batches, ops, threads > 1 ? &bar : NULL,
					     means + (size_t)t * (size_t)batches, 0 };
		if (t > 0 && pthread_create(&tid[t], NULL, pair_thread, &jobs[t]))
			return 1;
	}
	pair_thread(&jobs[0]);
	int failed = jobs[0].failed;
	for (int t = 1; t < threads; t++) {
		pthread_join(tid[t], NULL);
		failed |= jobs[t].failed;
	}
	if (failed) {
		fprintf(stderr, "arena-bench: a cuMemAlloc_v2/cuMemFree_v2 of %" PRIu64 " bytes failed (mode %s)\n",
			bytes, mode_args[m]);
		return 1;
	}
	printf("ns=%.2f\n", median(means, (size_t)threads * (size_t)batches));
	return 0;
}

/* ---- task: loop and trace -------------------------------------------------------------- */

struct op {
	uint64_t bytes; /* 0: a free */
	uint32_t id;
};

struct block {
	uintptr_t base;
	uint64_t size;
	bool live, used;
};

static int block_cmp(const void *pa, const void *pb)
{
	const struct block *a = pa, *b = pb;
	if (a->base + a->size <= b->base)
		return -1;
	if (b->base + b->size <= a->base)
		return 1;
	return 0; /* overlapping ranges compare equal */
}

static int load_trace(const char *path, struct op **ops_out, size_t *nops_out, uint32_t *max_id_out)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "arena-bench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct op *ops = NULL;
	size_t n = 0, cap = 0, lineno = 0, len = 0;
	uint32_t max_id = 0;
	char *line = NULL;
	while (getline(&line, &len, f) > 0) {
		lineno++;
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || *p == '\0')
			continue;
		unsigned long long id, bytes = 0;
		char kind, extra;
		int k = sscanf(p, "%c %llu %llu %c", &kind, &id, &bytes, &extra);
		if (!((kind == 'a' && k == 3 && bytes > 0) || (kind == 'f' && k == 2)) || id >= MAX_ID) {
			fprintf(stderr, "arena-bench: %s:%zu: not an operation: %s", path, lineno, line);
			free(line);
			free(ops);
			fclose(f);
			return -1;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			struct op *o = realloc(ops, cap * sizeof(*o));
			if (!o)
				exit(1);
			ops = o;
		}
		ops[n++] = (struct op){ kind == 'a' ? bytes : 0, (uint32_t)id };
		if (id > max_id)
			max_id = (uint32_t)id;
	}
	free(line);
	fclose(f);
	*ops_out = ops;
	*nops_out = n;
	*max_id_out = max_id;
	return 0;
}

struct replay {
	uint64_t allocs, frees, live, peak_live, nlive;
	double call_ns; /* time inside the driver API calls */
	/* Under the shim: its `live` figure is checked after every call
	 * (untimed) against what the trace holds, each block rounded to
	 * `unit` bytes (512 pooled, 1 passthrough). */
	get_stats_fn get;
	uint64_t unit, live_rounded;
};

/* Pooled blocks are live for their size rounded to the 512-byte unit. */
static uint64_t live_unit(enum bench_mode m)
{
	const char *pool = getenv("CUMEMCAP_POOL");
	return m == M_POOLED && !(pool && strcmp(pool, "off") == 0) ? 512 : 1;
}

static void check_live(struct replay *r, uint32_t id, const char *after)
{
	struct cumemcap_stats st;
	if (!r->get)
		return;
	if (r->get(0, &st, sizeof(st)) != 0)
		check_failed("cumemcap_get_stats failed");
	if (st.live != r->live_rounded)
		check_failed("after %s of block %" PRIu32 " the shim counts %" PRIu64 " bytes live, the trace %" PRIu64,
			     after, id, st.live, r->live_rounded);
}

/* Replay ops (checked as it goes); blocks has max_id + 1 entries. */
static void replay(const struct op *ops, size_t nops, struct block *blocks, struct replay *r)
{
	void *root = NULL;
	for (size_t i = 0; i < nops; i++) {
		struct block *b = &blocks[ops[i].id];
		if (ops[i].bytes) {
			if (b->used)
				check_failed("the trace allocates block %" PRIu32 " twice", ops[i].id);
			CUdeviceptr p = 0;
			double t0 = now_ns();
			CUresult e = cuMemAlloc_v2(&p, ops[i].bytes);
			r->call_ns += now_ns() - t0;
			if (e != CUDA_SUCCESS)
				check_failed("cuMemAlloc_v2(%" PRIu64 ") of block %" PRIu32 " returned %d",
					     ops[i].bytes, ops[i].id, (int)e);
			if (p % ALIGN)
				check_failed("block %" PRIu32 " at 0x%llx is not %d-byte aligned", ops[i].id,
					     (unsigned long long)p, ALIGN);
			*b = (struct block){ (uintptr_t)p, ops[i].bytes, true, true };
			void **node = tsearch(b, &root, block_cmp);
			if (!node)
				exit(1);
			if (*node != b) {
				const struct block *o = *node;
				check_failed("block %" PRIu32 " [0x%llx, +%" PRIu64 ") overlaps a live block [0x%llx, +%" PRIu64 ")",
					     ops[i].id, (unsigned long long)b->base, b->size,
					     (unsigned long long)o->base, o->size);
			}
			r->allocs++;
			r->nlive++;
			r->live += b->size;
			if (r->live > r->peak_live)
				r->peak_live = r->live;
			r->live_rounded += (b->size + r->unit - 1) / r->unit * r->unit;
			check_live(r, ops[i].id, "the allocation");
		} else {
			if (!b->live)
				check_failed("the trace frees block %" PRIu32 ", which is not live", ops[i].id);
			double t0 = now_ns();
			CUresult e = cuMemFree_v2((CUdeviceptr)b->base);
			r->call_ns += now_ns() - t0;
			if (e != CUDA_SUCCESS)
				check_failed("cuMemFree_v2 of block %" PRIu32 " returned %d", ops[i].id, (int)e);
			if (!tdelete(b, &root, block_cmp))
				check_failed("block %" PRIu32 " vanished from the interval set", ops[i].id);
			b->live = false;
			r->frees++;
			r->nlive--;
			r->live -= b->size;
			r->live_rounded -= (b->size + r->unit - 1) / r->unit * r->unit;
			check_live(r, ops[i].id, "the free");
		}
	}
	/* tdestroy is a GNU extension; the remaining nodes go with the process. */
}

static void print_work(const struct replay *r, struct counters c0, struct counters c1, bool frees_all)
{
	printf("allocs=%" PRIu64 " frees=%" PRIu64 " dallocs=%" PRIu64 " dfrees=%" PRIu64 " syncs=%" PRIu64
	       " peaklive=%" PRIu64 " peakres=%" PRIu64 " callns=%.0f freesall=%d\n",
	       r->allocs, r->frees, c1.allocs - c0.allocs, c1.frees - c0.frees, c1.syncs - c0.syncs,
	       r->peak_live, fakecuda_peak_reserved(0), r->call_ns, frees_all ? 1 : 0);
}

static void check_empty(enum bench_mode m, get_stats_fn get, const struct replay *r)
{
	if (r->nlive != 0 || r->live != 0)
		check_failed("%" PRIu64 " blocks (%" PRIu64 " bytes) live after the trace freed everything",
			     r->nlive, r->live);
	if (m != M_POOLED && (fakecuda_live_allocations(0) != 0 || fakecuda_reserved(0) != 0))
		check_failed("without pooling the driver still holds %" PRIu64 " allocations, %" PRIu64 " bytes",
			     fakecuda_live_allocations(0), fakecuda_reserved(0));
	check_reserved(get);
}

static int task_trace(enum bench_mode m, int argc, char **argv)
{
	if (argc != 1)
		return 2;
	struct op *ops;
	size_t nops;
	uint32_t max_id;
	if (load_trace(argv[0], &ops, &nops, &max_id))
		return 1;
	struct block *blocks = calloc((size_t)max_id + 1, sizeof(*blocks));
	if (!blocks)
		return 1;
	setup_ctx();
	get_stats_fn get = check_shim(m);
	fakecuda_reset_peak(0);
	struct replay r = { .get = get, .unit = live_unit(m) };
	struct counters c0 = driver_counters();
	replay(ops, nops, blocks, &r);
	struct counters c1 = driver_counters();
	bool frees_all = r.nlive == 0;
	if (frees_all)
		check_empty(m, get, &r);
	else
		check_reserved(get);
	print_work(&r, c0, c1, frees_all);
	return 0;
}

static int task_loop(enum bench_mode m, int argc, char **argv)
{
	if (argc != 2)
		return 2;
	uint64_t bytes = parse_u64(argv[0]), count = parse_u64(argv[1]);
	struct op *ops = malloc(2 * count * sizeof(*ops));
	struct block *blocks = calloc(count, sizeof(*blocks));
	if (!ops || !blocks)
		return 1;
	for (uint64_t i = 0; i < count; i++) {
		ops[2 * i] = (struct op){ bytes, (uint32_t)i };
		ops[2 * i + 1] = (struct op){ 0, (uint32_t)i };
	}
	setup_ctx();
	get_stats_fn get = check_shim(m);
	fakecuda_reset_peak(0);
	struct replay r = { .get = get, .unit = live_unit(m) };
	struct counters c0 = driver_counters();
	replay(ops, 2 * count, blocks, &r);
	struct counters c1 = driver_counters();
	check_empty(m, get, &r);
	print_work(&r, c0, c1, true);
	return 0;
}

/* ---- task: heap ------------------------------------------------------------------------ */

static uint64_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();
	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

static uint64_t rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long long size = 0, resident = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &resident) != 2)
		resident = 0;
	fclose(f);
	return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static double time_pairs(uint64_t bytes, int batches, int ops)
{
	double *means = calloc((size_t)batches, sizeof(*means));
	if (!means)
		exit(1);
	struct pair_job j = { bytes, batches, ops, NULL, means, 0 };
	pair_thread(&j);
	if (j.failed)
		check_failed("a cuMemAlloc_v2/cuMemFree_v2 pair of %" PRIu64 " bytes failed", bytes);
	double med = median(means, (size_t)batches);
	free(means);
	return med;
}

static uint32_t xorshift32(uint32_t *s)
{
	uint32_t x = *s;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

static int cmp_block_base(const void *pa, const void *pb)
{
	const struct block *a = pa, *b = pb;
	return a->base < b->base ? -1 : a->base > b->base;
}

static int task_heap(enum bench_mode m, int argc, char **argv)
{
	if (argc != 3)
		return 2;
	uint64_t n = parse_u64(argv[0]);
	int batches = (int)parse_u64(argv[1]), ops = (int)parse_u64(argv[2]);
	if (n == 0 || batches < 1 || ops < 1)
		return 2;
	/* What the benchmark itself needs is allocated and touched before
	 * the baseline. */
	struct block *blocks = calloc(n, sizeof(*blocks));
	if (!blocks)
		return 1;
	memset(blocks, 0, n * sizeof(*blocks));
	uint32_t seed = HEAP_SEED;
	for (uint64_t i = 0; i < n; i++)
		blocks[i].size = 512 + xorshift32(&seed) % 513;
	setup_ctx();
	get_stats_fn get = check_shim(m);
	double ns_none = time_pairs(KiB, batches, ops);
	uint64_t heap0 = heap_bytes(), rss0 = rss_bytes();
	uint64_t dlive0 = fakecuda_live_allocations(0), dres0 = fakecuda_reserved(0);
	for (uint64_t i = 0; i < n; i++) {
		CUdeviceptr p;
		CUresult e = cuMemAlloc_v2(&p, blocks[i].size);
		if (e != CUDA_SUCCESS)
			check_failed("cuMemAlloc_v2(%" PRIu64 ") of block %" PRIu64 " returned %d", blocks[i].size, i,
				     (int)e);
		blocks[i].base = (uintptr_t)p;
	}
	uint64_t heap1 = heap_bytes(), rss1 = rss_bytes();
	uint64_t dlive1 = fakecuda_live_allocations(0), dres1 = fakecuda_reserved(0);
	double ns_live = time_pairs(KiB, batches, ops);
	check_reserved(get);
	/* Self-check: aligned, and no two live blocks overlap. */
	struct block *sorted = malloc(n * sizeof(*sorted));
	if (!sorted)
		return 1;
	memcpy(sorted, blocks, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_block_base);
	for (uint64_t i = 0; i < n; i++) {
		if (sorted[i].base % ALIGN)
			check_failed("block at 0x%llx is not %d-byte aligned", (unsigned long long)sorted[i].base, ALIGN);
		if (i + 1 < n && sorted[i].base + sorted[i].size > sorted[i + 1].base)
			check_failed("blocks [0x%llx, +%" PRIu64 ") and [0x%llx, +%" PRIu64 ") overlap",
				     (unsigned long long)sorted[i].base, sorted[i].size,
				     (unsigned long long)sorted[i + 1].base, sorted[i + 1].size);
	}
	free(sorted);
	for (uint64_t i = 0; i < n; i++) {
		CUresult e = cuMemFree_v2((CUdeviceptr)blocks[i].base);
		if (e != CUDA_SUCCESS)
			check_failed("cuMemFree_v2 of block %" PRIu64 " returned %d", i, (int)e);
	}
	if (m != M_POOLED && (fakecuda_live_allocations(0) != 0 || fakecuda_reserved(0) != 0))
		check_failed("without pooling the driver still holds %" PRIu64 " allocations after every free",
			     fakecuda_live_allocations(0));
	check_reserved(get);
	printf("heap=%.2f rss=%.2f ns0=%.2f ns1=%.2f dlive=%.0f dres=%.0f\n", ((double)heap1 - (double)heap0) / (double)n,
	       ((double)rss1 - (double)rss0) / (double)n, ns_none, ns_live, (double)dlive1 - (double)dlive0,
	       (double)dres1 - (double)dres0);
	return 0;
}

static int child(int argc, char **argv)
{
	/* argv: MODE TASK ARGS... */
	if (argc < 2) {
		fprintf(stderr, "usage: arena-bench --child none|off|pooled pairs|loop|trace|heap ARGS...\n");
		return 2;
	}
	enum bench_mode m = parse_mode(argv[0]);
	child_mode = argv[0];
	child_what = argv[1];
	if (strcmp(argv[1], "trace") == 0 && argc > 2)
		child_what = argv[2];
	int r = 2;
	if (strcmp(argv[1], "pairs") == 0)
		r = task_pairs(m, argc - 2, argv + 2);
	else if (strcmp(argv[1], "loop") == 0)
		r = task_loop(m, argc - 2, argv + 2);
	else if (strcmp(argv[1], "trace") == 0)
		r = task_trace(m, argc - 2, argv + 2);
	else if (strcmp(argv[1], "heap") == 0)
		r = task_heap(m, argc - 2, argv + 2);
	if (r == 2)
		fprintf(stderr, "arena-bench: bad child arguments\n");
	fflush(stdout);
	return r;
}

/* ---- the parent --------------------------------------------------------------------------- */

static const char *self_path, *shim_path;
static bool any_failed;

struct mode_prep {
	enum bench_mode m;
	const char *pool_override, *release_override;
};

/* This process's environment for a mode (called in the forked child). */
static void set_mode_env(void *arg)
{
	const struct mode_prep *p = arg;
	bench_set_mode_env(p->m, shim_path, FAKE_DEVICES, p->pool_override, p->release_override);
}
static const char *pool_override, *release_override;

/* Run `arena-bench --child MODE args...`; its one line of output in out. */
static int run_child(enum bench_mode m, char *out, size_t outlen, const char *const *args)
{
	const char *argv[16] = { self_path, "--child", mode_args[m] };
	int k = 3;
	for (const char *const *a = args; *a && k < 15; a++)
		argv[k++] = *a;
	argv[k] = NULL;
	struct mode_prep prep = { m, pool_override, release_override };
	int st = bench_run_child("arena-bench", argv, set_mode_env, &prep, out, outlen);
	if (st != 0) {
		if (st > 0)
			fprintf(stderr, "arena-bench: FAILED: child (mode %s, %s) exited with status %d\n", mode_args[m],
				args[0] ? args[0] : "", st);
		any_failed = true;
		return -1;
	}
	return 0;
}


static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* The "# seed: N" line of a trace, for the header. */
static void trace_seed(const char *path, char *seed, size_t len)
{
	snprintf(seed, len, "?");
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512];
	for (int i = 0; i < 40 && fgets(line, sizeof(line), f); i++) {
		unsigned long long v;
		if (sscanf(line, "# seed: %llu", &v) == 1) {
			snprintf(seed, len, "%llu", v);
			break;
		}
	}
	fclose(f);
}

struct sizes {
	int rounds, batches, small_ops, large_ops, loop_small, loop_large, heap_blocks, heap_batches, heap_ops;
};

static void fmt_ratio(char *buf, size_t len, double a, double b)
{
	if (a >= 0 && b > 0)
		snprintf(buf, len, "%.2f", a / b);
	else
		snprintf(buf, len, "-");
}

static void fmt_num(char *buf, size_t len, double v, int decimals)
{
	if (v < 0)
		snprintf(buf, len, "FAILED");
	else
		snprintf(buf, len, "%.*f", decimals, v);
}

#define NPAIRCFG 4
#define MAXWORK 16

struct work {
	char name[64];
	char args[3][512];
	bool churn;
	/* per mode */
	double allocs[NMODES], frees[NMODES], dcalls[NMODES], syncs[NMODES], peaklive[NMODES], peakres[NMODES],
		callns[NMODES];
	bool ok[NMODES];
	bool is_trace;
};

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return child(argc - 2, argv + 2);
	if (argc < 2) {
		fprintf(stderr, "usage: arena-bench PATH/libcumemcap.so [TRACE...]\n");
		return 2;
	}
	self_path = "/proc/self/exe";
	static char self_buf[4096];
	ssize_t sl = readlink("/proc/self/exe", self_buf, sizeof(self_buf) - 1);
	if (sl > 0) {
		self_buf[sl] = '\0';
		self_path = self_buf;
	}
	shim_path = argv[1];
	if (access(shim_path, R_OK)) {
		fprintf(stderr, "arena-bench: %s: %s\n", shim_path, strerror(errno));
		return 2;
	}
	pool_override = getenv("CUMEMCAP_POOL");
	release_override = getenv("CUMEMCAP_RELEASE");
	bool quick = bench_quick();
	struct sizes z = quick ? (struct sizes){ 3, 11, 5000, 500, 50000, 5000, 100000, 11, 5000 }
			       : (struct sizes){ 7, 21, 20000, 2000, 200000, 20000, 1000000, 21, 20000 };
	int ncpu = nproc();
	double start = now_ns();

	printf("arena-bench: pooled arenas against the fake driver (%s GPU); %s counts; nproc %d\n", FAKE_DEVICES,
	       quick ? "quick (BENCH_QUICK=1)" : "full", ncpu);
	printf("modes, each a child process: no shim | shim, CUMEMCAP_POOL=off | shim, CUMEMCAP_POOL=%s, "
	       "CUMEMCAP_RELEASE=%s\n",
	       pool_override ? pool_override : "on", release_override ? release_override : "(default)");
	printf("every shim run: LD_PRELOAD=%s CUMEMCAP_LOG=off CUMEMCAP_CONFIG= (no limit)\n", shim_path);
	printf("traces:");
	for (int i = 2; i < argc; i++) {
		char seed[64];
		trace_seed(argv[i], seed, sizeof(seed));
		printf(" %s (seed %s)%s", base_name(argv[i]), seed, i + 1 < argc ? "," : "");
	}
	printf("\nheap blocks: %d of 512..1024 bytes (xorshift32 seed 0x%x)\n\n", z.heap_blocks, HEAP_SEED);

	/* ---- 1. pairs -------------------------------------------------------------- */
	struct {
		const char *label;
		uint64_t bytes;
		int threads, ops;
		bool target;
	} pc[NPAIRCFG] = {
		{ "4 KiB", 4 * KiB, 1, z.small_ops, true },
		{ "4 KiB", 4 * KiB, ncpu, z.small_ops, false },
		{ "8 MiB", 8 * MiB, 1, z.large_ops, true },
		{ "8 MiB", 8 * MiB, ncpu, z.large_ops, false },
	};
	static double pairs[NPAIRCFG][NMODES][16];
	for (int r = 0; r < z.rounds; r++) {
		for (int c = 0; c < NPAIRCFG; c++) {
			for (int m = 0; m < NMODES; m++) {
				char b[32], t[16], nb[16], no[16], out[512];
				snprintf(b, sizeof(b), "%" PRIu64, pc[c].bytes);
				snprintf(t, sizeof(t), "%d", pc[c].threads);
				snprintf(nb, sizeof(nb), "%d", z.batches);
				snprintf(no, sizeof(no), "%d", pc[c].ops);
				const char *args[] = { "pairs", b, t, nb, no, NULL };
				pairs[c][m][r] = run_child((enum bench_mode)m, out, sizeof(out), args) ? -1 : field(out, "ns");
			}
		}
	}
	printf("1. median ns per cuMemAlloc_v2+cuMemFree_v2 pair (per thread; median of %d children, each the\n"
	       "   median of %d batch means after %d warm-up batches; %d pairs per batch at 4 KiB, %d at 8 MiB)\n",
	       z.rounds, z.batches, WARMUP_BATCHES, z.small_ops, z.large_ops);
	printf("%-24s %9s %9s %9s %9s %9s %9s  %s\n", "", "no shim", "pool=off", "pooled", "off/none",
	       "pool/none", "pool/off", "target (pooled, 1 thread)");
	for (int c = 0; c < NPAIRCFG; c++) {
		double med[NMODES];
		for (int m = 0; m < NMODES; m++) {
			bool bad = false;
			for (int r = 0; r < z.rounds; r++)
				bad |= pairs[c][m][r] < 0;
			med[m] = bad ? -1 : median(pairs[c][m], (size_t)z.rounds);
		}
		char label[64], v[NMODES][16], r1[16], r2[16], r3[16];
		snprintf(label, sizeof(label), "%s, %d thread%s%s", pc[c].label, pc[c].threads,
			 pc[c].threads > 1 ? "s" : "", c % 2 ? " (nproc)" : "");
		for (int m = 0; m < NMODES; m++)
			fmt_num(v[m], sizeof(v[m]), med[m], 1);
		fmt_ratio(r1, sizeof(r1), med[M_OFF], med[M_NONE]);
		fmt_ratio(r2, sizeof(r2), med[M_POOLED], med[M_NONE]);
		fmt_ratio(r3, sizeof(r3), med[M_POOLED], med[M_OFF]);
		const char *verdict = !pc[c].target ? "-" : med[M_POOLED] < 0 ? "FAILED"
			: med[M_POOLED] <= 100 ? "<= 100 ns: ok" : "<= 100 ns: MISSES TARGET";
		printf("%-24s %9s %9s %9s %9s %9s %9s  %s\n", label, v[0], v[1], v[2], r1, r2, r3, verdict);
	}
	printf("\n");

	/* ---- 2 and 3. loops and traces ------------------------------------------------ */
	static struct work w[MAXWORK];
	int nw = 0;
	snprintf(w[nw].name, sizeof(w[nw].name), "pairs 4 KiB x %d", z.loop_small);
	snprintf(w[nw].args[0], 512, "loop");
	snprintf(w[nw].args[1], 512, "%" PRIu64, 4 * KiB);
	snprintf(w[nw].args[2], 512, "%d", z.loop_small);
	w[nw++].churn = true;
	snprintf(w[nw].name, sizeof(w[nw].name), "pairs 8 MiB x %d", z.loop_large);
	snprintf(w[nw].args[0], 512, "loop");
	snprintf(w[nw].args[1], 512, "%" PRIu64, 8 * MiB);
	snprintf(w[nw].args[2], 512, "%d", z.loop_large);
	w[nw++].churn = true;
	for (int i = 2; i < argc && nw < MAXWORK; i++, nw++) {
		snprintf(w[nw].name, sizeof(w[nw].name), "%s", base_name(argv[i]));
		char *dot = strstr(w[nw].name, ".trace");
		if (dot)
			*dot = '\0';
		snprintf(w[nw].args[0], 512, "trace");
		snprintf(w[nw].args[1], 512, "%s", argv[i]);
		w[nw].is_trace = true;
	}
	for (int i = 0; i < nw; i++) {
		for (int m = 0; m < NMODES; m++) {
			char out[512];
			const char *args[] = { w[i].args[0], w[i].args[1], w[i].is_trace ? NULL : w[i].args[2], NULL };
			w[i].ok[m] = run_child((enum bench_mode)m, out, sizeof(out), args) == 0;
			if (!w[i].ok[m])
				continue;
			w[i].allocs[m] = field(out, "allocs");
			w[i].frees[m] = field(out, "frees");
			w[i].dcalls[m] = field(out, "dallocs") + field(out, "dfrees");
			w[i].syncs[m] = field(out, "syncs");
			w[i].peaklive[m] = field(out, "peaklive");
			w[i].peakres[m] = field(out, "peakres");
			w[i].callns[m] = field(out, "callns");
			if (w[i].frees[m] > 0)
				w[i].churn = true;
		}
	}
	printf("2. driver alloc/free calls avoided = 1 - (driver cuMemAlloc_v2 + cuMemFree_v2 calls) / (allocs +\n"
	       "   frees the program made); device synchronizations (fakecuda_device_syncs) per 1000 program frees;\n"
	       "   mean ns per cuMemAlloc_v2/cuMemFree_v2 call as the program saw it\n");
	printf("%-22s %9s | %-26s | %-26s | %-26s | %s\n", "", "program", "      driver calls avoided",
	       "    syncs per 1000 frees", "       ns per call", "target");
	printf("%-22s %9s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s | %s\n", "workload", "calls", "no shim",
	       "pool=off", "pooled", "no shim", "pool=off", "pooled", "no shim", "pool=off", "pooled",
	       "(pooled)");
	bool pooling_seen = false, pooling_known = false;
	for (int i = 0; i < nw; i++) {
		char av[NMODES][16], sy[NMODES][16], ns[NMODES][16], prog[16];
		double calls = w[i].ok[M_NONE] ? w[i].allocs[M_NONE] + w[i].frees[M_NONE] : -1;
		fmt_num(prog, sizeof(prog), calls, 0);
		for (int m = 0; m < NMODES; m++) {
			double c = w[i].allocs[m] + w[i].frees[m];
			if (!w[i].ok[m]) {
				snprintf(av[m], 16, "FAILED");
				snprintf(sy[m], 16, "FAILED");
				snprintf(ns[m], 16, "FAILED");
				continue;
			}
			snprintf(av[m], 16, "%.1f%%", c > 0 ? 100.0 * (1 - w[i].dcalls[m] / c) : 0.0);
			if (w[i].frees[m] > 0)
				snprintf(sy[m], 16, "%.1f", 1000.0 * w[i].syncs[m] / w[i].frees[m]);
			else
				snprintf(sy[m], 16, "-");
			snprintf(ns[m], 16, "%.0f", c > 0 ? w[i].callns[m] / c : 0.0);
		}
		const char *verdict = "- (no frees)";
		if (!w[i].ok[M_POOLED]) {
			verdict = "FAILED";
		} else if (w[i].churn) {
			double c = w[i].allocs[M_POOLED] + w[i].frees[M_POOLED];
			verdict = c > 0 && 1 - w[i].dcalls[M_POOLED] / c >= 0.95 ? ">= 95%: ok" : ">= 95%: MISSES TARGET";
		}
		if (i == 0 && w[i].ok[M_POOLED]) {
			pooling_known = true;
			pooling_seen = w[i].dcalls[M_POOLED] < w[i].allocs[M_POOLED] + w[i].frees[M_POOLED];
		}
		printf("%-22s %9s | %8s %8s %8s | %8s %8s %8s | %8s %8s %8s | %s\n", w[i].name, prog, av[0], av[1],
		       av[2], sy[0], sy[1], sy[2], ns[0], ns[1], ns[2], verdict);
	}
	if (pooling_known && !pooling_seen)
		printf("note: the pooled mode sent every call to the driver: this build's arena does not pool yet\n"
		       "      (src/arena/), so \"pooled\" measures the passthrough path.\n");
	printf("\n");

	printf("3. footprint = peak reserved (fakecuda_peak_reserved: what the driver gave the process) / peak live\n"
	       "   (the most bytes the trace had requested and not freed at once)\n");
	printf("%-22s %10s | %-32s | %-26s | %s\n", "", "peak live", "      peak reserved, MiB", "    reserved / live",
	       "target");
	printf("%-22s %10s | %10s %10s %10s | %8s %8s %8s | %s\n", "trace", "MiB", "no shim", "pool=off", "pooled",
	       "no shim", "pool=off", "pooled", "(pooled)");
	for (int i = 0; i < nw; i++) {
		if (!w[i].is_trace)
			continue;
		char pr[NMODES][16], ra[NMODES][16], live[16];
		fmt_num(live, sizeof(live), w[i].ok[M_NONE] ? w[i].peaklive[M_NONE] / (double)MiB : -1, 1);
		for (int m = 0; m < NMODES; m++) {
			fmt_num(pr[m], 16, w[i].ok[m] ? w[i].peakres[m] / (double)MiB : -1, 1);
			if (w[i].ok[m])
				fmt_ratio(ra[m], 16, w[i].peakres[m], w[i].peaklive[m]);
			else
				snprintf(ra[m], 16, "FAILED");
		}
		const char *verdict = !w[i].ok[M_POOLED] ? "FAILED"
			: w[i].peakres[M_POOLED] <= 1.15 * w[i].peaklive[M_POOLED] ? "<= 1.15: ok"
										: "<= 1.15: MISSES TARGET";
		printf("%-22s %10s | %10s %10s %10s | %8s %8s %8s | %s\n", w[i].name, live, pr[0], pr[1], pr[2], ra[0],
		       ra[1], ra[2], verdict);
	}
	printf("\n");

	/* ---- 4. bookkeeping ---------------------------------------------------------- */
	double heap[NMODES], rss[NMODES], ns0[NMODES], ns1[NMODES], dlive[NMODES], dres[NMODES];
	bool hok[NMODES];
	for (int m = 0; m < NMODES; m++) {
		char n[32], nb[16], no[16], out[512];
		snprintf(n, sizeof(n), "%d", z.heap_blocks);
		snprintf(nb, sizeof(nb), "%d", z.heap_batches);
		snprintf(no, sizeof(no), "%d", z.heap_ops);
		const char *args[] = { "heap", n, nb, no, NULL };
		hok[m] = run_child((enum bench_mode)m, out, sizeof(out), args) == 0;
		heap[m] = hok[m] ? field(out, "heap") : -1;
		rss[m] = hok[m] ? field(out, "rss") : -1;
		ns0[m] = hok[m] ? field(out, "ns0") : -1;
		ns1[m] = hok[m] ? field(out, "ns1") : -1;
		dlive[m] = hok[m] ? field(out, "dlive") : -1;
		dres[m] = hok[m] ? field(out, "dres") : -1;
	}
	printf("4. host memory per live block, %d live blocks of 512..1024 B (heap: mallinfo2 uordblks + hblkhd;\n"
	       "   RSS: /proc/self/statm), and ns per 1 KiB alloc+free pair with none / all of them live\n"
	       "   (median of %d batch means of %d pairs)\n",
	       z.heap_blocks, z.heap_batches, z.heap_ops);
	printf("%-40s %9s %9s %9s  %s\n", "", "no shim", "pool=off", "pooled", "target");
	char v[NMODES][16];
	for (int m = 0; m < NMODES; m++)
		fmt_num(v[m], 16, hok[m] ? heap[m] : -1, 1);
	printf("%-40s %9s %9s %9s\n", "heap growth, B per live block", v[0], v[1], v[2]);
	for (int m = 0; m < NMODES; m++)
		fmt_num(v[m], 16, hok[m] ? rss[m] : -1, 1);
	printf("%-40s %9s %9s %9s\n", "RSS growth, B per live block", v[0], v[1], v[2]);
	for (int m = 0; m < NMODES; m++)
		fmt_num(v[m], 16, hok[m] ? 1000 * dlive[m] / z.heap_blocks : -1, 1);
	printf("%-40s %9s %9s %9s\n", "driver allocations per 1000 live blocks", v[0], v[1], v[2]);
	for (int m = 0; m < NMODES; m++)
		fmt_num(v[m], 16, hok[m] ? dres[m] / z.heap_blocks : -1, 1);
	printf("%-40s %9s %9s %9s\n", "device bytes reserved per live block", v[0], v[1], v[2]);
	/* The fake backs allocations below 1 MiB with malloc (in the heap
	 * figure), larger ones with mmap (outside it): the pooled figure is
	 * the shim's own only when the driver's allocations are >= 1 MiB. */
	bool pooled_heap_clean = hok[M_POOLED] && (dlive[M_POOLED] <= 0 || dres[M_POOLED] / dlive[M_POOLED] >= (double)MiB);
	{
		char off[16], pooled[16];
		const char *verdict;
		if (hok[M_OFF] && hok[M_NONE])
			snprintf(off, 16, "%.1f", heap[M_OFF] - heap[M_NONE]);
		else
			snprintf(off, 16, "FAILED");
		if (!hok[M_POOLED]) {
			snprintf(pooled, 16, "FAILED");
			verdict = "FAILED";
		} else if (!pooled_heap_clean) {
			snprintf(pooled, 16, "n/a");
			verdict = "n/a: pooled segments < 1 MiB are in the fake's heap";
		} else {
			snprintf(pooled, 16, "%.1f", heap[M_POOLED]);
			verdict = heap[M_POOLED] <= 64 ? "<= 64 B pooled: ok" : "<= 64 B pooled: MISSES TARGET";
		}
		printf("%-40s %9s %9s %9s  %s\n", "shim's bookkeeping, B per live block", "-", off, pooled, verdict);
	}
	for (int m = 0; m < NMODES; m++)
		fmt_num(v[m], 16, hok[m] ? ns0[m] : -1, 1);
	printf("%-40s %9s %9s %9s\n", "ns per pair, no block live", v[0], v[1], v[2]);
	for (int m = 0; m < NMODES; m++)
		fmt_num(v[m], 16, hok[m] ? ns1[m] : -1, 1);
	char lbl[64];
	snprintf(lbl, sizeof(lbl), "ns per pair, %d blocks live", z.heap_blocks);
	printf("%-40s %9s %9s %9s\n", lbl, v[0], v[1], v[2]);
	for (int m = 0; m < NMODES; m++)
		fmt_ratio(v[m], 16, hok[m] ? ns1[m] : -1, hok[m] ? ns0[m] : -1);
	printf("%-40s %9s %9s %9s\n", "  ratio, live / none", v[0], v[1], v[2]);
	printf("   (shim's bookkeeping: pool=off minus no shim, the same driver calls underneath; pooled: its heap\n"
	       "   growth as measured, since the driver then holds only segments >= 1 MiB, which the fake maps\n"
	       "   outside the heap, plus ~150 B of the fake's own records per segment)\n\n");

	printf("arena-bench: %.1f s\n", (now_ns() - start) / 1e9);
	if (any_failed)
		printf("arena-bench: FAILED: a measurement or a self-check failed (see \"FAILED\" above)\n");
	return any_failed ? 1 : 0;
}
