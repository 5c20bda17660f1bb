/* demo-workload: a small CUDA program that behaves like a framework
 * sizing itself from the driver: it opens libcuda.so.1 at run time
 * (dlopen + dlsym, as TensorFlow and JAX do), asks how much memory the GPU
 * has, then takes it 512 MiB at a time until the driver says no, and
 * reports what it got. It knows nothing of cumemcap; run it with and
 * without the shim to see the difference. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>

#define MiB (1024.0 * 1024.0)
#define STEP (512ull << 20)
#define MAX_BLOCKS 4096

#define LOAD(name, sym)                                                   \
	name = (__typeof__(name))dlsym(h, sym);                           \
	if (!name) {                                                      \
		fprintf(stderr, "demo: %s missing from the driver\n", sym); \
		return 1;                                                 \
	}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0); /* keep our lines in order with the shim's */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "demo: no CUDA driver (libcuda.so.1) found\n");
		return 1;
	}
	CUresult (*init)(unsigned int);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*set_current)(CUcontext);
	CUresult (*get_info)(size_t *, size_t *);
	CUresult (*total_mem)(size_t *, CUdevice);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*release)(CUdeviceptr);
	CUresult (*error_name)(CUresult, const char **);
	LOAD(init, "cuInit");
	LOAD(device_get, "cuDeviceGet");
	LOAD(retain, "cuDevicePrimaryCtxRetain");
	LOAD(set_current, "cuCtxSetCurrent");
	LOAD(get_info, "cuMemGetInfo_v2");
	LOAD(total_mem, "cuDeviceTotalMem_v2");
	LOAD(alloc, "cuMemAlloc_v2");
	LOAD(release, "cuMemFree_v2");
	LOAD(error_name, "cuGetErrorName");

	CUdevice dev;
	CUcontext ctx;
	if (init(0) || device_get(&dev, 0) || retain(&ctx, dev) || set_current(ctx)) {
		fprintf(stderr, "demo: could not open GPU 0\n");
		return 1;
	}
	size_t free_b = 0, total_b = 0, dev_total = 0;
	get_info(&free_b, &total_b);
	total_mem(&dev_total, dev);
	printf("demo: the program sees a GPU of %.0f MiB (cuDeviceTotalMem), %.0f MiB free of %.0f MiB (cuMemGetInfo)\n",
	       dev_total / MiB, free_b / MiB, total_b / MiB);

	static CUdeviceptr blocks[MAX_BLOCKS];
	size_t n = 0;
	CUresult r = CUDA_SUCCESS;
	while (n < MAX_BLOCKS && (r = alloc(&blocks[n], STEP)) == CUDA_SUCCESS)
		n++;
	const char *name = "?";
	error_name(r, &name);
	printf("demo: took %zu blocks of 512 MiB = %.0f MiB; block %zu failed with %s\n", n,
	       n * (double)STEP / MiB, n + 1, name);
	get_info(&free_b, &total_b);
	printf("demo: now %.0f MiB free of %.0f MiB\n", free_b / MiB, total_b / MiB);
	/* Hold it for a moment, give half back, hold again: the footprint log
	 * samples each phase (CUMEMCAP_LOG_INTERVAL). */
	struct timespec hold = { 0, 400 * 1000 * 1000 };
	nanosleep(&hold, NULL);
	for (size_t i = 0; i < n / 2; i++)
		release(blocks[i]);
	/* Longer: the report and docs show the last sample, which must be
	 * of this phase even on a loaded machine. */
	struct timespec last = { 1, 0 };
	nanosleep(&last, NULL);
	for (size_t i = n / 2; i < n; i++)
		release(blocks[i]);
	return 0;
}
