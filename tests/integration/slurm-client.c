/* slurm-client: the job test_slurm.py runs under Slurm, over the fake driver.
 *
 *   slurm-client CHUNK_MIB [WAIT_FILE]
 *
 * Loads libcuda.so.1 with dlopen (the shim, when the plugin preloaded it,
 * answers), makes GPU 0's primary context current, and prints one JSON line:
 * what it was told (cuMemGetInfo's total and free), then what it got by
 * taking CHUNK_MIB MiB blocks until the driver (or the shim) refused one,
 * and its cumemcap group. With WAIT_FILE it then prints {"holding": true}
 * and keeps its memory until that file exists (at most 120 s), so jobs can
 * hold memory at the same time. Exit status 0 unless CUDA setup failed.
 * Single-threaded. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_fn)(CUcontext);
typedef CUresult (*info_fn)(size_t *, size_t *);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);

static void *need(void *lib, const char *name)
{
	void *fn = dlsym(lib, name);
	if (!fn) {
		fprintf(stderr, "slurm-client: no %s in libcuda.so.1\n", name);
		exit(2);
	}
	return fn;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: slurm-client CHUNK_MIB [WAIT_FILE]\n");
		return 2;
	}
	unsigned long long chunk = strtoull(argv[1], NULL, 10) * MiB;
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "slurm-client: %s\n", dlerror());
		return 2;
	}
	init_fn cu_init = (init_fn)need(lib, "cuInit");
	retain_fn retain = (retain_fn)need(lib, "cuDevicePrimaryCtxRetain");
	set_fn set_current = (set_fn)need(lib, "cuCtxSetCurrent");
	info_fn info = (info_fn)need(lib, "cuMemGetInfo_v2");
	alloc_fn alloc = (alloc_fn)need(lib, "cuMemAlloc_v2");

	CUcontext ctx;
	size_t free_b = 0, total_b = 0;
	if (cu_init(0) != CUDA_SUCCESS || retain(&ctx, 0) != CUDA_SUCCESS ||
	    set_current(ctx) != CUDA_SUCCESS || info(&free_b, &total_b) != CUDA_SUCCESS) {
		fprintf(stderr, "slurm-client: CUDA setup failed\n");
		return 2;
	}
	unsigned long long got = 0;
	CUresult refused = CUDA_SUCCESS;
	for (int i = 0; i < 4096; i++) {
		CUdeviceptr p;
		refused = alloc(&p, chunk);
		if (refused != CUDA_SUCCESS)
			break;
		got += chunk;
	}
	const char *group = getenv("CUMEMCAP_GROUP");
	printf("{\"told_total\": %zu, \"told_free\": %zu, \"got\": %llu, \"refused\": %d, "
	       "\"group\": \"%s\"}\n",
	       total_b, free_b, got, (int)refused, group ? group : "");
	fflush(stdout);
	if (argc > 2) {
		printf("{\"holding\": true}\n");
		fflush(stdout);
		struct timespec tick = {0, 50 * 1000 * 1000};
		for (int i = 0; i < 2400 && access(argv[2], F_OK) != 0; i++)
			nanosleep(&tick, NULL);
	}
	return 0;
}
