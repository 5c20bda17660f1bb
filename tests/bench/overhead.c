/* overhead: what the shim adds per driver call, against the fake driver.
 *
 *   overhead [SHIM]          measure: runs itself as a child in three
 *                            configurations, alternating, ROUNDS times each,
 *                            and prints the medians and the differences
 *   overhead --child         one measurement in this process, one line
 *
 * Configurations: the driver alone; under the shim with no limit (pure
 * passthrough, still counting); under the shim with a limit. Each child
 * times BATCHES batches of OPS calls and reports the median batch, per
 * call, in nanoseconds, for: a cuMemAlloc_v2 + cuMemFree_v2 pair (4 KiB),
 * cuMemGetInfo_v2, and cuMemAllocAsync (timed in runs of ASYNC_SYNC_EVERY
 * allocations on an idle stream; the frees and a cuStreamSynchronize after
 * each run are not timed, because the fake runs them on a worker thread
 * whose scheduling noise is larger than the shim's cost). The
 * figures are medians of the children's medians. Run on a quiet machine;
 * compare figures from one run only. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-common.h"

#define OPS 20000
#define BATCHES 31
#define ROUNDS 9
#define ASYNC_SYNC_EVERY 128

#define LOAD(var, name)                                                    \
	do {                                                               \
		*(void **)&var = dlsym(h, name);                           \
		if (!var) {                                                \
			fprintf(stderr, "overhead: no %s in libcuda.so.1\n", name); \
			exit(1);                                           \
		}                                                          \
	} while (0)

static int child(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		fprintf(stderr, "overhead: libcuda.so.1 not found (set LD_LIBRARY_PATH to the fake driver)\n");
		return 1;
	}
	CUresult (*init)(unsigned), (*dev_get)(CUdevice *, int), (*retain)(CUcontext *, CUdevice),
		(*set_cur)(CUcontext), (*alloc)(CUdeviceptr *, size_t), (*release)(CUdeviceptr),
		(*info)(size_t *, size_t *), (*alloc_async)(CUdeviceptr *, size_t, CUstream),
		(*free_async)(CUdeviceptr, CUstream), (*stream_create)(CUstream *, unsigned),
		(*stream_sync)(CUstream);
	LOAD(init, "cuInit");
	LOAD(dev_get, "cuDeviceGet");
	LOAD(retain, "cuDevicePrimaryCtxRetain");
	LOAD(set_cur, "cuCtxSetCurrent");
	LOAD(alloc, "cuMemAlloc_v2");
	LOAD(release, "cuMemFree_v2");
	LOAD(info, "cuMemGetInfo_v2");
	LOAD(alloc_async, "cuMemAllocAsync");
	LOAD(free_async, "cuMemFreeAsync");
	LOAD(stream_create, "cuStreamCreate");
	LOAD(stream_sync, "cuStreamSynchronize");
	CUdevice d;
	CUcontext ctx;
	CUstream s;
	if (init(0) || dev_get(&d, 0) || retain(&ctx, d) || set_cur(ctx) ||
	    stream_create(&s, CU_STREAM_NON_BLOCKING)) {
		fprintf(stderr, "overhead: driver setup failed\n");
		return 1;
	}
	double pair[BATCHES], getinfo[BATCHES], async_pair[BATCHES];
	for (int b = 0; b < BATCHES; b++) {
		CUdeviceptr p;
		size_t f, t;
		double t0 = now_ns();
		for (int i = 0; i < OPS; i++) {
			if (alloc(&p, 4096) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS)
				return 1;
		}
		double t1 = now_ns();
		for (int i = 0; i < OPS; i++)
			if (info(&f, &t) != CUDA_SUCCESS)
				return 1;
		double t2 = now_ns(), async_ns = 0;
		CUdeviceptr batch[ASYNC_SYNC_EVERY];
		for (int i = 0; i < OPS; i += ASYNC_SYNC_EVERY) {
			/* Timed: the allocations only, with the stream idle. */
			double a0 = now_ns();
			for (int j = 0; j < ASYNC_SYNC_EVERY; j++)
				if (alloc_async(&batch[j], 4096, s) != CUDA_SUCCESS)
					return 1;
			async_ns += now_ns() - a0;
			/* Untimed: the frees run on the fake's stream worker; wait
			 * for them so the pool can reuse its chunks. */
			for (int j = 0; j < ASYNC_SYNC_EVERY; j++)
				if (free_async(batch[j], s) != CUDA_SUCCESS)
					return 1;
			if (stream_sync(s) != CUDA_SUCCESS)
				return 1;
		}
		pair[b] = (t1 - t0) / OPS;
		getinfo[b] = (t2 - t1) / OPS;
		async_pair[b] = async_ns / OPS;
	}
	printf("%.1f %.1f %.1f\n", median(pair, BATCHES), median(getinfo, BATCHES),
	       median(async_pair, BATCHES));
	return 0;
}

static int run_child(const char *self, const char *preload, const char *limit, const char *group_dir,
		     double out[3])
{
	int fds[2];
	if (pipe(fds))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		if (preload)
			setenv("LD_PRELOAD", preload, 1);
		else
			unsetenv("LD_PRELOAD");
		if (limit)
			setenv("CUMEMCAP_LIMIT", limit, 1);
		else
			unsetenv("CUMEMCAP_LIMIT");
		/* The passthrough cost: every call reaches the driver (the
		 * pooled figures are tests/bench/arena-bench's). */
		setenv("CUMEMCAP_POOL", "off", 1);
		setenv("CUMEMCAP_LOG", "off", 1);
		if (group_dir) {
			/* A group of one whose budget is the limit: what the
			 * group's books add when a request fits. */
			setenv("CUMEMCAP_GROUP", "bench", 1);
			setenv("CUMEMCAP_GROUP_LIMIT", limit, 1);
			setenv("CUMEMCAP_GROUP_DIR", group_dir, 1);
		} else {
			unsetenv("CUMEMCAP_GROUP");
		}
		execl(self, self, "--child", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	char buf[256] = "";
	ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	int st;
	waitpid(pid, &st, 0);
	if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
	    sscanf(buf, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return child();
	const char *shim = argc > 1 ? argv[1] : getenv("CUMEMCAP_SHIM");
	if (!shim) {
		fprintf(stderr, "usage: overhead PATH/libcumemcap.so\n");
		return 2;
	}
	static const char *const names[] = { "driver alone", "shim, no limit", "shim, 8GiB limit",
					     "shim, 8GiB group" };
	enum { CONFIGS = 4 };
	char dir[] = "/tmp/cumemcap-bench-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("overhead: mkdtemp");
		return 1;
	}
	double fig[CONFIGS][3][ROUNDS];
	int failed = 0;
	for (int r = 0; r < ROUNDS && !failed; r++) {
		for (int c = 0; c < CONFIGS && !failed; c++) {
			double out[3];
			if (run_child(argv[0], c ? shim : NULL, c >= 2 ? "8GiB" : NULL, c == 3 ? dir : NULL, out)) {
				fprintf(stderr, "overhead: a measurement failed (%s)\n", names[c]);
				failed = 1;
				break;
			}
			for (int k = 0; k < 3; k++)
				fig[c][k][r] = out[k];
		}
	}
	char book[sizeof(dir) + 32];
	snprintf(book, sizeof(book), "%s/cumemcap-group.bench", dir);
	unlink(book);
	rmdir(dir);
	if (failed)
		return 1;
	double med[CONFIGS][3];
	for (int c = 0; c < CONFIGS; c++)
		for (int k = 0; k < 3; k++)
			med[c][k] = median(fig[c][k], ROUNDS);
	printf("median ns per call, %d rounds x %d batches x %d calls, fake driver\n", ROUNDS, BATCHES, OPS);
	printf("%-20s %16s %16s %20s\n", "", "alloc+free pair", "cuMemGetInfo", "cuMemAllocAsync");
	for (int c = 0; c < CONFIGS; c++)
		printf("%-20s %16.1f %16.1f %20.1f\n", names[c], med[c][0], med[c][1], med[c][2]);
	for (int c = 1; c < CONFIGS; c++)
		printf("added (%s) %7.1f per pair (%.1f per call) %8.1f %20.1f\n",
		       names[c] + 6, med[c][0] - med[0][0], (med[c][0] - med[0][0]) / 2,
		       med[c][1] - med[0][1], med[c][2] - med[0][2]);
	printf("the group over the limit alone: %+.1f per pair (target: <= 20, no system call)\n",
	       med[3][0] - med[2][0]);
	return 0;
}
