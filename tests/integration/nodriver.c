/* nodriver: a CUDA client on a machine without libcuda.so.1. Under the
 * shim it must see exactly what it would see without it: dlopen fails, and
 * nothing crashes. Calling a preloaded entry point directly (the only way
 * to reach one without a driver) returns an error, not a crash. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (h) {
		fprintf(stderr, "nodriver: a libcuda.so.1 exists here; the test needs a machine without one\n");
		return 77;
	}
	CUresult (*alloc)(CUdeviceptr *, size_t) =
		(CUresult (*)(CUdeviceptr *, size_t))dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
	if (alloc) {
		CUdeviceptr p;
		CUresult r = alloc(&p, 1 << 20);
		if (r == CUDA_SUCCESS) {
			fprintf(stderr, "nodriver: an allocation succeeded without a driver\n");
			return 1;
		}
	}
	printf("nodriver: no driver, program ran normally\n");
	return 0;
}
