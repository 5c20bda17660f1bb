/* nvml-probe: what NVML tells a program, through the link-time door or a
 * run-time lookup, after the program used the driver (test_nvml.py).
 *
 *   nvml-probe DOOR [init] [alloc DEV BYTES]...
 *
 * DOOR: linked (the NVML functions this program is linked with),
 * default (dlsym(RTLD_DEFAULT, name)), handle (dlopen("libnvidia-ml.so.1")
 * + dlsym(handle, name)). init: cuInit; alloc: cuMemAlloc_v2 in DEV's
 * primary context, through the linked driver. Then one JSON object on
 * stdout: nvmlInit's answer, and per NVML device its UUID, memory info (v1
 * and v2) and this process's entry in the compute-process lists (v1, v2,
 * v3), each with the call's return code; and fakecuda_reserved per device
 * (the driver's own record).
 *
 * Single-threaded; no locks needed. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda.h"

typedef int nvmlReturn_t;
typedef struct nvml_dev *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gi, ci; } nvmlProcessInfo_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; } nvmlProcessInfo_v1_t;

nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *p);

static struct {
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*count)(unsigned int *);
	nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
	nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
	nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*mem2)(nvmlDevice_t, nvmlMemory_v2_t *);
	nvmlReturn_t (*procs1)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *);
	nvmlReturn_t (*procs2)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
	nvmlReturn_t (*procs3)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
} f;

static void *find(void *handle, const char *name)
{
	void *p = dlsym(handle, name);
	if (!p) {
		fprintf(stderr, "nvml-probe: %s not found\n", name);
		exit(2);
	}
	return p;
}

static void resolve(const char *door)
{
	if (strcmp(door, "linked") == 0) {
		f.init = nvmlInit_v2, f.count = nvmlDeviceGetCount_v2, f.by_index = nvmlDeviceGetHandleByIndex_v2;
		f.uuid = nvmlDeviceGetUUID, f.mem = nvmlDeviceGetMemoryInfo, f.mem2 = nvmlDeviceGetMemoryInfo_v2;
		f.procs1 = nvmlDeviceGetComputeRunningProcesses;
		f.procs2 = nvmlDeviceGetComputeRunningProcesses_v2;
		f.procs3 = nvmlDeviceGetComputeRunningProcesses_v3;
		return;
	}
	void *h = RTLD_DEFAULT;
	if (strcmp(door, "handle") == 0) {
		h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "nvml-probe: %s\n", dlerror());
			exit(2);
		}
	} else if (strcmp(door, "default") != 0) {
		fprintf(stderr, "nvml-probe: bad door %s\n", door);
		exit(2);
	}
	*(void **)&f.init = find(h, "nvmlInit_v2");
	*(void **)&f.count = find(h, "nvmlDeviceGetCount_v2");
	*(void **)&f.by_index = find(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&f.uuid = find(h, "nvmlDeviceGetUUID");
	*(void **)&f.mem = find(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&f.mem2 = find(h, "nvmlDeviceGetMemoryInfo_v2");
	*(void **)&f.procs1 = find(h, "nvmlDeviceGetComputeRunningProcesses");
	*(void **)&f.procs2 = find(h, "nvmlDeviceGetComputeRunningProcesses_v2");
	*(void **)&f.procs3 = find(h, "nvmlDeviceGetComputeRunningProcesses_v3");
}

/* This process's usedGpuMemory in a list (NVML_VALUE_NOT_AVAILABLE prints
 * as -1), -2 when it is not listed. */
static void print_mine(const char *key, int r, unsigned n, const void *recs, size_t stride)
{
	long long mine = -2;
	for (unsigned i = 0; r == 0 && i < n; i++) {
		nvmlProcessInfo_v1_t p;
		memcpy(&p, (const char *)recs + i * stride, sizeof p);
		if (p.pid == (unsigned)getpid())
			mine = (long long)p.usedGpuMemory;
	}
	printf(", \"%s\": {\"r\": %d, \"n\": %u, \"mine\": %lld}", key, r, n, mine);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	resolve(argv[1]);
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "init") == 0) {
			if (cuInit(0) != CUDA_SUCCESS)
				return 3;
		} else if (strcmp(argv[i], "alloc") == 0 && i + 2 < argc) {
			int dev = atoi(argv[++i]);
			size_t bytes = strtoull(argv[++i], NULL, 0);
			CUcontext ctx;
			CUdeviceptr p;
			if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
			    cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS)
				return 4;
		} else {
			return 2;
		}
	}
	/* Before nvmlInit: each call's own error. */
	nvmlMemory_t m0;
	nvmlMemory_v2_t m20 = { .version = (unsigned)sizeof(nvmlMemory_v2_t) | (2u << 24) };
	nvmlProcessInfo_t p0[1];
	unsigned n0 = 1;
	int pre_mem = f.mem(NULL, &m0), pre_mem2 = f.mem2(NULL, &m20), pre_procs = f.procs3(NULL, &n0, p0);
	int r = f.init();
	unsigned count = 0;
	printf("{\"pre\": [%d, %d, %d], \"init\": %d, \"reserved\": [%llu, %llu], \"gpus\": [",
	       pre_mem, pre_mem2, pre_procs, r,
	       (unsigned long long)fakecuda_reserved(0), (unsigned long long)fakecuda_reserved(1));
	if (r == 0 && f.count(&count) != 0)
		count = 0;
	for (unsigned d = 0; d < count; d++) {
		nvmlDevice_t h;
		char uuid[96] = "";
		if (f.by_index(d, &h) != 0 || f.uuid(h, uuid, sizeof uuid) != 0)
			return 5;
		nvmlMemory_t m = { 0, 0, 0 };
		nvmlMemory_v2_t m2 = { .version = (unsigned)sizeof(nvmlMemory_v2_t) | (2u << 24) };
		int rm = f.mem(h, &m), rm2 = f.mem2(h, &m2);
		printf("%s{\"uuid\": \"%s\", \"mem\": {\"r\": %d, \"total\": %llu, \"free\": %llu, \"used\": %llu}"
		       ", \"mem2\": {\"r\": %d, \"total\": %llu, \"reserved\": %llu, \"free\": %llu, \"used\": %llu}",
		       d ? ", " : "", uuid, rm, m.total, m.free, m.used, rm2, m2.total, m2.reserved, m2.free, m2.used);
		nvmlProcessInfo_v1_t p1[8];
		nvmlProcessInfo_t p2[8];
		unsigned n = 8;
		int rp = f.procs1(h, &n, p1);
		print_mine("procs1", rp, n, p1, sizeof p1[0]);
		n = 8;
		rp = f.procs2(h, &n, p2);
		print_mine("procs2", rp, n, p2, sizeof p2[0]);
		n = 8;
		rp = f.procs3(h, &n, p2);
		print_mine("procs3", rp, n, p2, sizeof p2[0]);
		printf("}");
	}
	printf("]}\n");
	return 0;
}
