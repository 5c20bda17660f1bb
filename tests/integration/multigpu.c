/* multigpu: GPUs of different sizes get the limits their rules name.
 *
 * Run with FAKECUDA_DEVICES=2GiB,1GiB,4GiB,4GiB, the fake's default UUIDs and
 * PCI ids, and
 *   CUMEMCAP_DEVICE_LIMITS=0=512MiB,GPU-fa4ec0da-0000-4000-8000-000000000001=256MiB,0000:12:00.0=25%
 *   CUMEMCAP_LIMIT=50%
 * so device 0 is limited by ordinal, 1 by UUID, 2 by PCI bus id as a
 * percentage, and 3 by the global percentage. */
#include "common.h"

static struct api A;
static struct fake F;

static void check_device(int dev, uint64_t expected_limit)
{
	CUcontext ctx = use_primary(&A, dev);
	(void)ctx;
	size_t free_b, total_b, dev_total;
	OK(A.cuMemGetInfo(&free_b, &total_b));
	CHECK(total_b == expected_limit);
	CHECK(free_b <= expected_limit);
	OK(A.cuDeviceTotalMem(&dev_total, dev));
	CHECK(dev_total == expected_limit);

	/* Exactly the limit fits; one byte more does not. */
	CUdeviceptr all = 0, extra = 0;
	OK(A.cuMemAlloc(&all, expected_limit));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&extra, 1));
	CHECK(F.peak_reserved(dev) == expected_limit);
	OK(A.cuMemFree(all));
	CHECK(F.reserved(dev) == 0);
	struct cumemcap_stats st = shim_stats(dev);
	CHECK(st.limit == expected_limit);
	CHECK(st.peak_reserved == expected_limit);
	CHECK(st.reserved == 0);
	printf("device %d: limit %" PRIu64 " MiB held\n", dev, (uint64_t)(expected_limit / MiB));
}

int main(int argc, char **argv)
{
	load_api(argc, argv, &A, &F);
	int count = 0;
	OK(A.cuInit(0));
	OK(A.cuDeviceGetCount(&count));
	CHECK(count == 4);
	check_device(0, 512 * MiB);
	check_device(1, 256 * MiB);
	check_device(2, 1 * GiB);
	check_device(3, 2 * GiB);
	/* Other devices' books are untouched by one device's traffic. */
	CHECK(shim_stats(0).allocs == 1);
	CHECK(shim_stats(3).allocs == 1);
	printf("multigpu (%s door): all checks passed\n", door);
	return 0;
}
