/* secure-probe: a CUDA client linked with the shim itself (not preloaded:
 * ld.so ignores LD_PRELOAD paths under secure execution) and the fake
 * driver, through absolute DT_RPATH entries, which ld.so still honours
 * for a setuid program. test_hardening.py copies it, makes the copy
 * setuid root and runs it as another user, so the kernel sets AT_SECURE
 * and the shim sees a real secure execution.
 *
 * Prints AT_SECURE, then allocates 2 GiB in 256 MiB steps and prints how
 * much it got, so the caller can see whether a CUMEMCAP_LIMIT applied. */
#include <cuda.h>
#include <stdio.h>
#include <sys/auxv.h>

int main(void)
{
	printf("secure=%lu\n", getauxval(AT_SECURE));
	fflush(stdout);
	CUdevice dev;
	CUcontext ctx;
	if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
	    cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
		fprintf(stderr, "secure-probe: no GPU\n");
		return 2;
	}
	unsigned got = 0;
	for (int i = 0; i < 8; i++) {
		CUdeviceptr p;
		if (cuMemAlloc(&p, 256u << 20) == CUDA_SUCCESS)
			got += 256;
	}
	printf("allocated=%uMiB\n", got);
	return 0;
}
