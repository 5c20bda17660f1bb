/* early-cuda: a preloaded library whose constructor uses CUDA before the
 * shim's constructor has run (LD_PRELOAD=SHIM:early-cuda.so runs this
 * constructor first): cuInit, then a cuMemAlloc_v2 through the shim's hook
 * (no context: the driver refuses it; what counts is that a hook ran).
 * The shim must still start whole: its exit record is written
 * (test_startup.py). Single-threaded. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

__attribute__((constructor)) static void early(void)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	int (*init)(unsigned) = cuda ? (int (*)(unsigned))dlsym(cuda, "cuInit") : NULL;
	int (*alloc)(unsigned long long *, size_t) =
		(int (*)(unsigned long long *, size_t))dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
	unsigned long long p;
	if (!init || init(0) != 0 || !alloc)
		fprintf(stderr, "early-cuda: no driver\n");
	else
		(void)alloc(&p, 4096);
}
