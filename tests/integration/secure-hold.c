/* secure-hold: a CUDA client linked with the fake driver only: the shim
 * comes from /etc/ld.so.preload, as on a node that preloads it into every
 * program (ld.so loads that file's libraries under secure execution too).
 * test_shared_secure.py runs a setuid-root copy of it as another user, so
 * the kernel sets AT_SECURE and the shim sees a real secure execution.
 *
 * Prints AT_SECURE, allocates up to 2 GiB in 256 MiB steps and prints how
 * much it got (so the caller sees which limit applied), then holds its
 * memory until stdin closes (so the caller can read its metrics file).
 * Run plainly under LD_PRELOAD, it is the same test's metrics writer. */
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
		fprintf(stderr, "secure-hold: no GPU\n");
		return 2;
	}
	unsigned got = 0;
	for (int i = 0; i < 8; i++) {
		CUdeviceptr p;
		if (cuMemAlloc(&p, 256u << 20) == CUDA_SUCCESS)
			got += 256;
	}
	printf("allocated=%uMiB\n", got);
	fflush(stdout);
	while (getchar() != EOF)
		;
	return 0;
}
