/* fake-nvml: a fake libnvidia-ml.so.1 next to the fake libcuda.so.1.
 *
 * Describes the same GPUs as the fake driver (FAKECUDA_DEVICES,
 * FAKECUDA_UUIDS, FAKECUDA_OTHER_USED, read here with the same defaults)
 * and answers, per GPU, what the real NVML answers for a process:
 * usedGpuMemory = what the fake driver holds for this process there
 * (fakecuda_reserved) + the cost of its live contexts there
 * (fakecuda_context_bytes: FAKECUDA_CTX_OVERHEAD per context). A process
 * with neither is not listed. Both record functions are found with
 * dlsym(RTLD_DEFAULT, ...), or in libcuda.so.1 by name when it was loaded
 * RTLD_LOCAL (ctypes, the shim): the fake driver lives in the same
 * process, or the process has no GPU memory at all.
 *
 * FAKECUDA_NVML (this library only):
 *   on (default)  as above
 *   off           nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   na            processes are listed with usedGpuMemory =
 *                 NVML_VALUE_NOT_AVAILABLE (as in some containers)
 *
 * Only the calls cumemcap and its tests use: nvmlInit(_v2), nvmlShutdown,
 * nvmlErrorString, nvmlDeviceGetCount(_v2), nvmlDeviceGetHandleByIndex(_v2),
 * nvmlDeviceGetHandleByUUID, nvmlDeviceGetUUID, nvmlDeviceGetMemoryInfo,
 * nvmlDeviceGetComputeRunningProcesses (_v2, _v3).
 *
 * Thread safety: the configuration is read once (pthread_once); the init
 * count is an atomic; everything else is read-only or asks the fake
 * driver, which has its own lock. */
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct fake_nvml_dev *nvmlDevice_t;

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
};
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define MAX_DEVICES 16

/* The exported calls (prototypes for -Wmissing-prototypes). */
API nvmlReturn_t nvmlInit_v2(void);
API nvmlReturn_t nvmlInit(void);
API nvmlReturn_t nvmlShutdown(void);
API const char *nvmlErrorString(nvmlReturn_t r);
API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count);
API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
							 nvmlProcessInfo_t *infos);
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
							 nvmlProcessInfo_t *infos);
API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
						      nvmlProcessInfo_v1_t *infos);

struct fake_nvml_dev {
	int index;
	uint64_t total, other_used;
	char uuid[48];
};

static struct fake_nvml_dev devs[MAX_DEVICES];
static int ndev;
static enum { NVML_ON, NVML_OFF, NVML_NA } mode;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Atomic int inits;

/* One size as the fake driver reads it: digits, an optional fraction, a
 * unit (K/M/G/T powers of 1024, KiB..TiB too, KB..TB powers of 1000). */
static uint64_t parse_size(const char *s, size_t len)
{
	char buf[64], unit[8];
	if (len >= sizeof buf)
		return 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	char *end;
	double v = strtod(buf, &end);
	size_t ul = strlen(end);
	if (ul >= sizeof unit)
		return 0;
	for (size_t i = 0; i <= ul; i++)
		unit[i] = (char)tolower((unsigned char)end[i]);
	static const struct { const char *u; double m; } units[] = {
		{"", 1}, {"b", 1}, {"k", 1024.0}, {"kib", 1024.0}, {"kb", 1e3},
		{"m", 1048576.0}, {"mib", 1048576.0}, {"mb", 1e6},
		{"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
		{"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
	};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(unit, units[i].u) == 0) {
			/* Whole bytes as the fake computes them: integer part
			 * times the unit, plus the truncated fraction. */
			double whole = (double)(uint64_t)v;
			return (uint64_t)whole * (uint64_t)units[i].m +
			       (uint64_t)((v - whole) * units[i].m);
		}
	return 0;
}

/* The i-th comma-separated item of s. */
static bool item(const char *s, int i, const char **start, size_t *len)
{
	for (; i > 0; i--) {
		s = strchr(s, ',');
		if (!s)
			return false;
		s++;
	}
	const char *c = strchr(s, ',');
	*start = s;
	*len = c ? (size_t)(c - s) : strlen(s);
	return true;
}

static void configure(void)
{
	const char *v = getenv("FAKECUDA_NVML");
	mode = v && strcmp(v, "off") == 0 ? NVML_OFF : v && strcmp(v, "na") == 0 ? NVML_NA : NVML_ON;
	const char *sizes = getenv("FAKECUDA_DEVICES");
	const char *uuids = getenv("FAKECUDA_UUIDS");
	const char *other = getenv("FAKECUDA_OTHER_USED");
	if (sizes && strcmp(sizes, "none") == 0)
		return;
	const char *s;
	size_t len;
	for (ndev = 0; ndev < MAX_DEVICES; ndev++) {
		struct fake_nvml_dev *d = &devs[ndev];
		d->index = ndev;
		if (!sizes)
			d->total = ndev == 0 ? 16ull << 30 : 0;
		else if (item(sizes, ndev, &s, &len))
			d->total = parse_size(s, len);
		if (!d->total)
			break;
		if (uuids && item(uuids, ndev, &s, &len) && len < sizeof d->uuid) {
			memcpy(d->uuid, s, len);
			d->uuid[len] = '\0';
		} else {
			snprintf(d->uuid, sizeof d->uuid, "GPU-fa4ec0da-0000-4000-8000-%012x", ndev);
		}
		if (other && item(other, ndev, &s, &len))
			d->other_used = parse_size(s, len);
	}
}

static nvmlReturn_t ready(void)
{
	pthread_once(&once, configure);
	return atomic_load(&inits) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static bool valid(nvmlDevice_t d)
{
	return d >= devs && d < devs + ndev;
}

/* What this process holds on d, from the fake driver; false when it has
 * nothing there (no context, no memory) or the driver is not loaded. */
static bool this_process(nvmlDevice_t d, uint64_t *bytes)
{
	uint64_t (*reserved)(int) = (uint64_t (*)(int))dlsym(RTLD_DEFAULT, "fakecuda_reserved");
	uint64_t (*ctx)(int) = (uint64_t (*)(int))dlsym(RTLD_DEFAULT, "fakecuda_context_bytes");
	if (!reserved || !ctx) {
		/* Loaded RTLD_LOCAL (ctypes, the shim): ask it by name, if it
		 * is loaded at all. */
		void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (!lib)
			return false;
		reserved = (uint64_t (*)(int))dlsym(lib, "fakecuda_reserved");
		ctx = (uint64_t (*)(int))dlsym(lib, "fakecuda_context_bytes");
		dlclose(lib); /* only the reference NOLOAD took; it stays loaded */
	}
	if (!reserved || !ctx)
		return false;
	uint64_t r = reserved(d->index), c = ctx(d->index);
	*bytes = r + c;
	return r || c;
}

API nvmlReturn_t nvmlInit_v2(void)
{
	pthread_once(&once, configure);
	if (mode == NVML_OFF)
		return NVML_ERROR_DRIVER_NOT_LOADED;
	atomic_fetch_add(&inits, 1);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlInit(void)
{
	return nvmlInit_v2();
}

API nvmlReturn_t nvmlShutdown(void)
{
	int n = atomic_load(&inits);
	while (n > 0 && !atomic_compare_exchange_weak(&inits, &n, n - 1))
		;
	return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

API const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS: return "Success";
	case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
	case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
	case NVML_ERROR_NOT_FOUND: return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	default: return "Unknown Error";
	}
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	nvmlReturn_t r = ready();
	if (r)
		return r;
	if (!count)
		return NVML_ERROR_INVALID_ARGUMENT;
	*count = (unsigned)ndev;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
	return nvmlDeviceGetCount_v2(count);
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	nvmlReturn_t r = ready();
	if (r)
		return r;
	if (!device || index >= (unsigned)ndev)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &devs[index];
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByIndex_v2(index, device);
}

API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
	nvmlReturn_t r = ready();
	if (r)
		return r;
	if (!uuid || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < ndev; i++)
		if (strcasecmp(devs[i].uuid, uuid) == 0) {
			*device = &devs[i];
			return NVML_SUCCESS;
		}
	return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	nvmlReturn_t r = ready();
	if (r)
		return r;
	if (!valid(device) || !uuid)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (length <= strlen(device->uuid))
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(uuid, device->uuid, strlen(device->uuid) + 1);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	nvmlReturn_t r = ready();
	if (r)
		return r;
	if (!valid(device) || !memory)
		return NVML_ERROR_INVALID_ARGUMENT;
	uint64_t mine = 0;
	this_process(device, &mine);
	memory->total = device->total;
	memory->used = device->other_used + mine;
	memory->free = memory->used < memory->total ? memory->total - memory->used : 0;
	return NVML_SUCCESS;
}

/* The process list: this process, or nobody. */
static nvmlReturn_t processes(nvmlDevice_t device, unsigned int *count, void *infos, size_t stride)
{
	nvmlReturn_t r = ready();
	if (r)
		return r;
	if (!valid(device) || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	uint64_t mine;
	if (!this_process(device, &mine)) {
		*count = 0;
		return NVML_SUCCESS;
	}
	if (*count < 1 || !infos) {
		*count = 1;
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	nvmlProcessInfo_t p = {
		.pid = (unsigned)getpid(),
		.usedGpuMemory = mode == NVML_NA ? NVML_VALUE_NOT_AVAILABLE : mine,
		.gpuInstanceId = 0xffffffffu,
		.computeInstanceId = 0xffffffffu,
	};
	if (stride == sizeof(nvmlProcessInfo_v1_t)) {
		nvmlProcessInfo_v1_t v1 = { .pid = p.pid, .usedGpuMemory = p.usedGpuMemory };
		memcpy(infos, &v1, sizeof v1);
	} else {
		memcpy(infos, &p, sizeof p);
	}
	*count = 1;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
							 nvmlProcessInfo_t *infos)
{
	return processes(device, count, infos, sizeof *infos);
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
							 nvmlProcessInfo_t *infos)
{
	return processes(device, count, infos, sizeof *infos);
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
						      nvmlProcessInfo_v1_t *infos)
{
	return processes(device, count, infos, sizeof *infos);
}
