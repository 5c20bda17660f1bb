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

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s dlsym|procaddr CASE\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[2], "array3d-deferred") == 0)
		array3d_deferred(argc, argv);
	else {
		fprintf(stderr, "unknown case %s\n", argv[2]);
		return 2;
	}
	printf("drift %s %s: ok\n", argv[1], argv[2]);
	return 0;
}
