/* secure-probe: a CUDA client for real secure execution: a test copies it,
 * makes the copy setuid root and runs it as another user, so the kernel
 * sets AT_SECURE and the shim sees a real secure execution. Built twice
 * (meson.build):
 *   - secure-probe, linked with the shim itself (not preloaded: ld.so
 *     ignores LD_PRELOAD paths under secure execution) and the fake
 *     driver, through absolute DT_RPATH entries, which ld.so still
 *     honours for a setuid program (test_hardening.py);
 *   - secure-hold (HOLD defined), linked with the fake driver only: the
 *     shim comes from /etc/ld.so.preload, as on a node that preloads it
 *     into every program (ld.so loads that file's libraries under secure
 *     execution too). Run plainly under LD_PRELOAD, it is also
 *     test_shared_secure.py's metrics writer.
 *
 * Prints AT_SECURE, allocates up to 2 GiB in 256 MiB steps and prints how
 * much it got (so the caller sees which limit applied); with HOLD, then
 * holds its memory until stdin closes (so the caller can read its
 * metrics file). */
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
#ifdef HOLD
	fflush(stdout);
	while (getchar() != EOF)
		;
#endif
	return 0;
}
