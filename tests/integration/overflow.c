/* overflow: a CUDA client whose stack overflows, in the main thread (the
 * one that used the GPU first, where the shim arms its handlers) or in a
 * thread that entered the shim later.
 *
 *   overflow main|thread
 *
 * Uses the fake driver through dlopen/dlsym, then recurses until the guard
 * page: SIGSEGV with no stack left. Under the shim with a log file the exit
 * record must still be written (test_hardening.py reads it). */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);

static alloc_fn alloc;
static set_fn set_current;
static CUcontext ctx;

static void use_gpu(void)
{
	CUdeviceptr p;
	if (set_current(ctx) != CUDA_SUCCESS || alloc(&p, 1 << 20) != CUDA_SUCCESS) {
		fprintf(stderr, "overflow: cuMemAlloc failed\n");
		_exit(2);
	}
}

/* Not a tail call, and each frame keeps a page of stack; the bound is
 * never reached (the compiler must not know that). */
static volatile unsigned long bound = ~0ul;

static unsigned long recurse(unsigned long depth)
{
	volatile char frame[4096];
	memset((char *)frame, (int)depth, sizeof(frame));
	if (depth >= bound)
		return 0;
	return recurse(depth + 1) + frame[depth % sizeof(frame)];
}

static void *thread_body(void *arg)
{
	(void)arg;
	use_gpu();
	printf("overflowing\n");
	fflush(stdout);
	recurse(0);
	return NULL;
}

int main(int argc, char **argv)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h || argc != 2)
		return 2;
	init_fn init = (init_fn)dlsym(h, "cuInit");
	retain_fn retain = (retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain");
	set_current = (set_fn)dlsym(h, "cuCtxSetCurrent");
	alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
	if (!init || !retain || !set_current || !alloc || init(0) != CUDA_SUCCESS ||
	    retain(&ctx, 0) != CUDA_SUCCESS)
		return 2;
	use_gpu();
	if (strcmp(argv[1], "thread") == 0) {
		pthread_t t;
		pthread_create(&t, NULL, thread_body, NULL);
		pthread_join(t, NULL);
		return 3;
	}
	printf("overflowing\n");
	fflush(stdout);
	recurse(0);
	return 3;
}
