/* nodriver: a CUDA client on a machine without libcuda.so.1. Under the
 * shim it must see exactly what it would see without it: dlopen fails,
 * probing for driver functions with dlsym(RTLD_DEFAULT) or dlsym(RTLD_NEXT)
 * finds none (a program that finds one thinks CUDA is there), and nothing
 * crashes. Calling a preloaded entry point directly (found by the linker,
 * the only way to reach one without a driver) returns an error. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

/* Bound by ld.so to the preloaded shim when it is there, else NULL. */
#pragma weak cuMemAlloc_v2

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	if (h) {
		fprintf(stderr, "nodriver: a libcuda.so.1 exists here; the test needs a machine without one\n");
		return 77;
	}
	static const char *const probes[] = { "cuMemAlloc_v2", "cuGetProcAddress", "cuGetProcAddress_v2",
					      "cuMemGetInfo_v2", "cuMemFree_v2", NULL };
	for (const char *const *name = probes; *name; name++) {
		void *handles[] = { RTLD_DEFAULT, RTLD_NEXT };
		for (int i = 0; i < 2; i++) {
			void *f = dlsym(handles[i], *name);
			if (f) {
				fprintf(stderr, "nodriver: dlsym(%s, \"%s\") found %p without a driver\n",
					i ? "RTLD_NEXT" : "RTLD_DEFAULT", *name, f);
				return 1;
			}
		}
	}
	/* The linker still binds the name to the shim: an error, not a crash. */
	CUresult (*alloc)(CUdeviceptr *, size_t) = cuMemAlloc_v2;
	CUdeviceptr p;
	if (alloc && alloc(&p, 1 << 20) == CUDA_SUCCESS) {
		fprintf(stderr, "nodriver: an allocation succeeded without a driver\n");
		return 1;
	}
	printf("nodriver: no driver, program ran normally\n");
	return 0;
}
