/* drift: twin hooks (legacy / _v2 / _ptsz) of one entry point behave alike.
 * Each case once drifted between twins; the case calls every twin and
 * asserts the same outcome.
 *
 *   array3d-deferred  a deferred-mapping 3D array holds no memory until it
 *                     is mapped: neither cuArray3DCreate_v2 nor the legacy
 *                     cuArray3DCreate charges it, so one larger than the
 *                     limit is created through both (the legacy twin used
 *                     to charge it and refuse it at the limit).
 *                     Run with CUMEMCAP_LIMIT=64MiB, FAKECUDA_DEVICES=4GiB.
 *   pitch-nofree      over pitchdriver (wide pitches, no cuMemFree_v2 or
 *                     cuMemFree): a pitched allocation whose real pitch
 *                     passes the limit is refused by both twins, neither
 *                     calling a free the driver lacks (_v2 used to call
 *                     through the NULL real_cuMemFree_v2 and crash).
 *                     Run with CUMEMCAP_LIMIT=64MiB, CUMEMCAP_POOL=off,
 *                     PITCHDRIVER_LIB=<pitchdriver's libcuda.so.1>.
 *
 * One thread; the shim's books are read through cumemcap_get_stats.
 *
 * Usage: drift dlsym|procaddr CASE */
#include "common.h"

/* The legacy 3D descriptor (cuda.h declares it only for the driver's own
 * build). */
typedef struct {
	unsigned int Width, Height, Depth;
	CUarray_format Format;
	unsigned int NumChannels;
	unsigned int Flags;
} array3d_desc_v1;
typedef CUresult(CUDAAPI *legacy_array3d_fn)(CUarray *, const array3d_desc_v1 *);
typedef CUresult(CUDAAPI *legacy_pitch_fn)(CUdeviceptr_v1 *, unsigned int *, unsigned int, unsigned int,
					   unsigned int);

#define LIMIT (64 * MiB)

/* An entry point through the door: exported name for dlsym, base name and
 * version for cuGetProcAddress. */
static void *entry(void *h, const char *exported, const char *base, int version)
{
	void *p = NULL;
	if (strcmp(door, "procaddr") == 0) {
		PFN_cuGetProcAddress_v12000 gpa = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
		CUdriverProcAddressQueryResult st;
		CHECK(gpa != NULL);
		OK(gpa(base, &p, version, 0, &st));
	} else {
		p = dlsym(h, exported);
	}
	if (!p) {
		fprintf(stderr, "%s door: no %s\n", door, exported);
		exit(1);
	}
	return p;
}

static void array3d_deferred(int argc, char **argv)
{
	struct api A;
	struct fake F;
	load_api(argc, argv, &A, &F);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	CHECK(h != NULL);
	legacy_array3d_fn legacy = (legacy_array3d_fn)entry(h, "cuArray3DCreate", "cuArray3DCreate", 2000);
	PFN_cuArray3DCreate_v3020 v2 = (PFN_cuArray3DCreate_v3020)entry(h, "cuArray3DCreate_v2",
									 "cuArray3DCreate", 3020);
	use_primary(&A, 0);
	size_t free_b, total_b;
	OK(A.cuMemGetInfo(&free_b, &total_b)); /* the shim knows the device now */
	CHECK(total_b == LIMIT);

	/* 4096 x 4096 x 1 x 4 floats: 256 MiB, four times the limit. */
	CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 4096, .Height = 4096, .Depth = 1,
				      .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4,
				      .Flags = CUDA_ARRAY3D_DEFERRED_MAPPING };
	array3d_desc_v1 d1 = { .Width = 4096, .Height = 4096, .Depth = 1,
			       .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4,
			       .Flags = CUDA_ARRAY3D_DEFERRED_MAPPING };
	CUarray a = NULL, b = NULL;
	OK(v2(&a, &d));
	CHECK(shim_stats(0).reserved == 0);
	OK(legacy(&b, &d1));
	CHECK(shim_stats(0).reserved == 0);
	OK(A.cuArrayDestroy(a));
	OK(A.cuArrayDestroy(b));

	/* Without the flag both twins charge, and refuse past the limit. */
	d.Flags = d1.Flags = 0;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, v2(&a, &d));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, legacy(&b, &d1));
	d.Width = d1.Width = 256; /* 16 MiB each: both fit */
	OK(v2(&a, &d));
	CHECK(shim_stats(0).reserved == 16 * MiB);
	OK(legacy(&b, &d1));
	CHECK(shim_stats(0).reserved == 32 * MiB);
	OK(A.cuArrayDestroy(a));
	OK(A.cuArrayDestroy(b));
	CHECK(shim_stats(0).reserved == 0);
	CHECK(F.reserved(0) == 0);
}

static void pitch_nofree(int argc, char **argv)
{
	door = argv[1];
	/* pitchdriver by full path, whatever else is on the library path:
	 * its first symbol looked up makes the shim take it for the driver. */
	const char *lib = getenv("PITCHDRIVER_LIB");
	void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
	if (!h) {
		fprintf(stderr, "cannot open pitchdriver (PITCHDRIVER_LIB=%s): %s\n", lib ? lib : "(unset)",
			dlerror());
		exit(1);
	}
	PFN_cuInit_v2000 init = (PFN_cuInit_v2000)dlsym(h, "cuInit");
	PFN_cuDevicePrimaryCtxRetain_v7000 retain =
		(PFN_cuDevicePrimaryCtxRetain_v7000)dlsym(h, "cuDevicePrimaryCtxRetain");
	PFN_cuCtxSetCurrent_v4000 set = (PFN_cuCtxSetCurrent_v4000)dlsym(h, "cuCtxSetCurrent");
	CHECK(init && retain && set);
	/* The driver has no free call at all: the shim hands out none. */
	CHECK(dlsym(h, "cuMemFree_v2") == NULL && dlsym(h, "cuMemFree") == NULL);
	PFN_cuMemAllocPitch_v3020 v2 = (PFN_cuMemAllocPitch_v3020)entry(h, "cuMemAllocPitch_v2",
									 "cuMemAllocPitch", 3020);
	legacy_pitch_fn legacy = (legacy_pitch_fn)entry(h, "cuMemAllocPitch", "cuMemAllocPitch", 2000);
	CUcontext ctx;
	OK(init(0));
	OK(retain(&ctx, 0));
	OK(set(ctx));

	/* 4 MiB rows x 4: 16 MiB reserved, the driver's pitch takes 64 MiB
	 * and more: past the limit. */
	CUdeviceptr p = 0;
	size_t pitch = 0;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, v2(&p, &pitch, 4 * MiB, 5, 4));
	CHECK(shim_stats(0).reserved == 0);
	CUdeviceptr_v1 p1 = 0;
	unsigned int pitch1 = 0;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, legacy(&p1, &pitch1, 4 * MiB, 5, 4));
	CHECK(shim_stats(0).reserved == 0);

	/* Within the limit, both settle on the driver's pitch. */
	OK(v2(&p, &pitch, 1 * MiB, 4, 4));
	CHECK(pitch == 4 * MiB);
	CHECK(shim_stats(0).reserved == 16 * MiB);
	OK(legacy(&p1, &pitch1, 1 * MiB, 4, 4));
	CHECK(pitch1 == 4 * MiB);
	CHECK(shim_stats(0).reserved == 32 * MiB);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s dlsym|procaddr CASE\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[2], "array3d-deferred") == 0)
		array3d_deferred(argc, argv);
	else if (strcmp(argv[2], "pitch-nofree") == 0)
		pitch_nofree(argc, argv);
	else {
		fprintf(stderr, "unknown case %s\n", argv[2]);
		return 2;
	}
	printf("drift %s %s: ok\n", argv[1], argv[2]);
	return 0;
}
