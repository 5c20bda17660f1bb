/* icount: a fixed number of driver calls, for counting the instructions
 * the shim adds with callgrind (scripts/bench-icount runs it). Counts are
 * deterministic, so unlike times they compare across runs and machines.
 *
 *   icount pair|info N    N cuMemAlloc_v2(4 KiB) + cuMemFree_v2 pairs, or N
 *                         cuMemGetInfo_v2 calls, in device 0's primary context */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef CUresult (*alloc_t)(CUdeviceptr *, size_t);
typedef CUresult (*free_t)(CUdeviceptr);
typedef CUresult (*info_t)(size_t *, size_t *);
int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	int n = atoi(argv[2]);
	void *h = dlopen("libcuda.so.1", RTLD_NOW);
	CUresult (*init)(unsigned) = dlsym(h, "cuInit");
	CUresult (*retain)(CUcontext *, CUdevice) = dlsym(h, "cuDevicePrimaryCtxRetain");
	CUresult (*setc)(CUcontext) = dlsym(h, "cuCtxSetCurrent");
	alloc_t al = dlsym(h, "cuMemAlloc_v2");
	free_t fr = dlsym(h, "cuMemFree_v2");
	info_t in = dlsym(h, "cuMemGetInfo_v2");
	CUcontext c;
	init(0); retain(&c, 0); setc(c);
	CUdeviceptr p; size_t a, b;
	if (!strcmp(argv[1], "pair")) for (int i = 0; i < n; i++) { al(&p, 4096); fr(p); }
	else for (int i = 0; i < n; i++) in(&a, &b);
	return 0;
}
