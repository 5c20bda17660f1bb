/* fake-nvml: a fake libnvidia-ml.so.1 next to the fake libcuda.so.1.
 *
 * Describes the same GPUs as the fake driver (FAKECUDA_DEVICES,
 * FAKECUDA_UUIDS, FAKECUDA_OTHER_USED, read here with the same defaults)
 * and answers, per GPU, what the real NVML answers for a process:
 * usedGpuMemory = what the fake driver holds for this process there
 * (fakecuda_reserved) + what the driver holds for it outside allocations
 * (fakecuda_driver_held: FAKECUDA_CTX_OVERHEAD per live context, and what
 * fakecuda_driver_grow / FAKECUDA_DRIVER_GROW added). The device's used
 * memory is that + FAKECUDA_OTHER_USED. A process with nothing there is
 * not listed. Both record functions are found with
 * dlsym(RTLD_DEFAULT, ...), or in libcuda.so.1 by name when it was loaded
 * RTLD_LOCAL (ctypes, the shim): the fake driver lives in the same
 * process, or the process has no GPU memory at all.
 *
 * FAKECUDA_NVML (this library only; any other value aborts with one line):
 *   on (default)  as above
 *   off           nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   na            processes are listed with usedGpuMemory =
 *                 NVML_VALUE_NOT_AVAILABLE (as in some containers)
 *   nopid         as on, but this process is listed under another pid,
 *                 getpid() + 4194304 (above any pid_max, so no pid here):
 *                 NVML in a container without the host PID namespace lists
 *                 host pids, so a lookup by getpid() finds nothing
 *
 * The calls cumemcap uses (nvmlInit, device handles by index and UUID,
 * nvmlDeviceGetMemoryInfo, nvmlDeviceGetComputeRunningProcesses in all
 * versions), and the device queries monitoring tools and GPU probes make at
 * start (name, PCI info, memory v2, BAR1, utilization, clocks, temperature,
 * power, PCIe link, throttle reasons, compute capability, graphics and MPS
 * process lists, driver and CUDA versions), so that no client that resolves
 * them calls a NULL pointer. The device is described as the fake driver
 * describes it ("Fake GPU N", FAKECUDA_PCI, an H100-like part at idle): a
 * GPU the fake has no reading for (a fan on an SXM board) answers
 * NVML_ERROR_NOT_SUPPORTED, as the real NVML does there.
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

typedef struct {
	unsigned int version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2 ((unsigned)sizeof(nvmlMemory_v2_t) | (2u << 24))

typedef struct {
	unsigned long long bar1Total, bar1Free, bar1Used;
} nvmlBAR1Memory_t;

typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;

typedef struct { /* nvmlDeviceGetPciInfo_v2/_v3 */
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct { /* nvmlDeviceGetPciInfo (v1) */
	char busId[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfo_v1_t;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
};
#define PCI_DEVICE_ID 0x233010deu    /* H100 SXM5 80GB, NVIDIA's vendor id below */
#define PCI_SUBSYSTEM_ID 0x16c110deu
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
API nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length);
API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length);
API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_v1_t *pci);
API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory);
API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
API nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
						 unsigned int *samplingPeriodUs);
API nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
						 unsigned int *samplingPeriodUs);
API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp);
API nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int thresholdType, unsigned int *temp);
API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed);
API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen);
API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth);
API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen);
API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth);
API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons);
API nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons);
API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons);
API nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons);
API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit);
API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int *limit);
API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit);
API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *minLimit,
							     unsigned int *maxLimit);
API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int *pState);
API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int *computeMode);
API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, int *persistence);
API nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, int *display);
API nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, int *isActive);
API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, int *current, int *pending);
API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode);
API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch);
API nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int *multiGpuBool);
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
							  nvmlProcessInfo_t *infos);
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
							  nvmlProcessInfo_t *infos);
API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *count,
						       nvmlProcessInfo_v1_t *infos);
API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
							    nvmlProcessInfo_t *infos);
API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
							    nvmlProcessInfo_t *infos);
API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
							 nvmlProcessInfo_v1_t *infos);

struct fake_nvml_dev {
	int index;
	uint64_t total, other_used;
	char uuid[48];
	unsigned pci_domain, pci_bus, pci_device;
};

static struct fake_nvml_dev devs[MAX_DEVICES];
static int ndev;
static enum { NVML_ON, NVML_OFF, NVML_NA, NVML_NOPID } mode;
#define NOPID_OFFSET 4194304u /* PID_MAX_LIMIT on 64-bit Linux */
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

/* "[domain:]bus:device.function" in hex, as the fake driver reads it (the
 * driver aborts on a malformed value before NVML is asked). */
static void parse_pci(const char *s, size_t len, struct fake_nvml_dev *d)
{
	char buf[32];
	unsigned a, b, c, f;
	if (len >= sizeof buf)
		return;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (sscanf(buf, "%x:%x:%x.%x", &a, &b, &c, &f) == 4) {
		d->pci_domain = a, d->pci_bus = b, d->pci_device = c;
	} else if (sscanf(buf, "%x:%x.%x", &b, &c, &f) == 3) {
		d->pci_domain = 0, d->pci_bus = b, d->pci_device = c;
	}
}

static void configure(void)
{
	const char *v = getenv("FAKECUDA_NVML");
	mode = NVML_ON;
	if (v && strcmp(v, "off") == 0)
		mode = NVML_OFF;
	else if (v && strcmp(v, "na") == 0)
		mode = NVML_NA;
	else if (v && strcmp(v, "nopid") == 0)
		mode = NVML_NOPID;
	else if (v && strcmp(v, "on") != 0) {
		/* As the fake driver's knobs: a typo must not test "on" silently. */
		fprintf(stderr, "fakecuda: bad FAKECUDA_NVML=\"%s\": expected on, off, na or nopid\n", v);
		abort();
	}
	const char *sizes = getenv("FAKECUDA_DEVICES");
	const char *uuids = getenv("FAKECUDA_UUIDS");
	const char *other = getenv("FAKECUDA_OTHER_USED");
	const char *pci = getenv("FAKECUDA_PCI");
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
		d->pci_bus = 0x10u + (unsigned)ndev;
		if (pci && item(pci, ndev, &s, &len))
			parse_pci(s, len, d);
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
	uint64_t (*held)(int) = (uint64_t (*)(int))dlsym(RTLD_DEFAULT, "fakecuda_driver_held");
	if (!reserved || !held) {
		/* Loaded RTLD_LOCAL (ctypes, the shim): ask it by name, if it
		 * is loaded at all. */
		void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
		if (!lib)
			return false;
		reserved = (uint64_t (*)(int))dlsym(lib, "fakecuda_reserved");
		held = (uint64_t (*)(int))dlsym(lib, "fakecuda_driver_held");
		dlclose(lib); /* only the reference NOLOAD took; it stays loaded */
	}
	if (!reserved || !held)
		return false;
	uint64_t r = reserved(d->index), c = held(d->index);
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
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
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

/* The process list: this process (under another pid in nopid mode), or
 * nobody. */
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
		.pid = (unsigned)getpid() + (mode == NVML_NOPID ? NOPID_OFFSET : 0),
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

/* ---- what monitoring tools and GPU probes ask ------------------------------------ */

API nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
	(void)flags; /* NO_GPUS / NO_ATTACH: nothing to attach here either way */
	return nvmlInit_v2();
}

/* A string answer: NVML_ERROR_INSUFFICIENT_SIZE when it does not fit. */
static nvmlReturn_t put_string(char *out, unsigned int length, const char *value)
{
	if (!out)
		return NVML_ERROR_INVALID_ARGUMENT;
	size_t n = strlen(value);
	if (length <= n)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(out, value, n + 1);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	nvmlReturn_t r = ready();
	return r ? r : put_string(version, length, "580.65.06");
}

API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	nvmlReturn_t r = ready();
	return r ? r : put_string(version, length, "13.580.65.06");
}

/* Works without nvmlInit, as documented; the fake driver's version. */
API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
	if (!cudaDriverVersion)
		return NVML_ERROR_INVALID_ARGUMENT;
	const char *v = getenv("FAKECUDA_DRIVER_VERSION");
	*cudaDriverVersion = v && *v ? atoi(v) : 13000;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
	return nvmlSystemGetCudaDriverVersion_v2(cudaDriverVersion);
}

API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
	nvmlReturn_t r = ready();
	if (r)
		return r;
	if (!pciBusId || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	struct fake_nvml_dev want = {0};
	want.pci_bus = ~0u;
	parse_pci(pciBusId, strlen(pciBusId), &want);
	for (int i = 0; i < ndev; i++)
		if (devs[i].pci_domain == want.pci_domain && devs[i].pci_bus == want.pci_bus &&
		    devs[i].pci_device == want.pci_device) {
			*device = &devs[i];
			return NVML_SUCCESS;
		}
	return NVML_ERROR_NOT_FOUND;
}

API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
	return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

/* The checks every device query starts with. */
#define DEVICE_QUERY(dev, out)                         \
	do {                                           \
		nvmlReturn_t r_ = ready();             \
		if (r_)                                \
			return r_;                     \
		if (!valid(dev) || !(out))             \
			return NVML_ERROR_INVALID_ARGUMENT; \
	} while (0)

/* The same name the fake driver's cuDeviceGetName gives. */
API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	DEVICE_QUERY(device, name);
	char buf[32];
	snprintf(buf, sizeof buf, "Fake GPU %d", device->index);
	return put_string(name, length, buf);
}

API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
	DEVICE_QUERY(device, index);
	*index = (unsigned)device->index;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
	DEVICE_QUERY(device, minorNumber);
	*minorNumber = (unsigned)device->index;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
	DEVICE_QUERY(device, serial);
	char buf[32];
	snprintf(buf, sizeof buf, "1650000000%03d", device->index);
	return put_string(serial, length, buf);
}

API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
	DEVICE_QUERY(device, version);
	return put_string(version, length, "96.00.74.00.01");
}

static void pci_info(nvmlDevice_t d, nvmlPciInfo_t *p)
{
	memset(p, 0, sizeof *p);
	p->domain = d->pci_domain;
	p->bus = d->pci_bus;
	p->device = d->pci_device;
	p->pciDeviceId = PCI_DEVICE_ID;
	p->pciSubSystemId = PCI_SUBSYSTEM_ID;
	snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04x:%02x:%02x.0", d->pci_domain & 0xffff, d->pci_bus & 0xff,
		 d->pci_device & 0xff);
	snprintf(p->busId, sizeof p->busId, "%08x:%02x:%02x.0", d->pci_domain, d->pci_bus & 0xff, d->pci_device & 0xff);
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	DEVICE_QUERY(device, pci);
	pci_info(device, pci);
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	return nvmlDeviceGetPciInfo_v3(device, pci);
}

API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_v1_t *pci)
{
	DEVICE_QUERY(device, pci);
	nvmlPciInfo_t p;
	pci_info(device, &p);
	memset(pci, 0, sizeof *pci);
	memcpy(pci->busId, p.busIdLegacy, sizeof pci->busId);
	pci->domain = p.domain;
	pci->bus = p.bus;
	pci->device = p.device;
	pci->pciDeviceId = p.pciDeviceId;
	pci->pciSubSystemId = p.pciSubSystemId;
	return NVML_SUCCESS;
}

/* v2 splits the driver's own reservation out of "used"; the fake driver
 * reserves nothing of its own, so used and free agree with v1. */
API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	DEVICE_QUERY(device, memory);
	if (memory->version != NVML_MEMORY_V2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	nvmlMemory_t m;
	nvmlReturn_t r = nvmlDeviceGetMemoryInfo(device, &m);
	if (r)
		return r;
	memory->total = m.total;
	memory->reserved = 0;
	memory->used = m.used;
	memory->free = m.free;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory)
{
	DEVICE_QUERY(device, bar1Memory);
	bar1Memory->bar1Total = 128ull << 30;
	bar1Memory->bar1Used = 2ull << 20;
	bar1Memory->bar1Free = bar1Memory->bar1Total - bar1Memory->bar1Used;
	return NVML_SUCCESS;
}

/* The fake runs no kernels: the GPU is idle. */
API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
	DEVICE_QUERY(device, utilization);
	utilization->gpu = 0;
	utilization->memory = 0;
	return NVML_SUCCESS;
}

static nvmlReturn_t codec_utilization(nvmlDevice_t device, unsigned int *util, unsigned int *period)
{
	DEVICE_QUERY(device, util);
	if (!period)
		return NVML_ERROR_INVALID_ARGUMENT;
	*util = 0;
	*period = 167000;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
						 unsigned int *samplingPeriodUs)
{
	return codec_utilization(device, utilization, samplingPeriodUs);
}

API nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
						 unsigned int *samplingPeriodUs)
{
	return codec_utilization(device, utilization, samplingPeriodUs);
}

/* NVML_TEMPERATURE_GPU (0) is the only sensor. */
API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensorType, unsigned int *temp)
{
	DEVICE_QUERY(device, temp);
	if (sensorType != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*temp = 33;
	return NVML_SUCCESS;
}

/* Shutdown, slowdown, memory max, GPU max (nvmlTemperatureThresholds_t 0..3). */
API nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int thresholdType, unsigned int *temp)
{
	DEVICE_QUERY(device, temp);
	static const unsigned t[] = {92, 89, 95, 87};
	if (thresholdType < 0 || thresholdType >= (int)(sizeof t / sizeof t[0]))
		return NVML_ERROR_NOT_SUPPORTED;
	*temp = t[thresholdType];
	return NVML_SUCCESS;
}

/* An SXM board has no fan of its own. */
API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
	DEVICE_QUERY(device, speed);
	return NVML_ERROR_NOT_SUPPORTED;
}

/* Graphics, SM, memory, video clocks in MHz (nvmlClockType_t 0..3). */
static nvmlReturn_t clock_info(nvmlDevice_t device, int type, unsigned int *clock, bool max)
{
	DEVICE_QUERY(device, clock);
	static const unsigned idle[] = {345, 345, 2619, 765}, top[] = {1980, 1980, 2619, 1755};
	if (type < 0 || type > 3)
		return NVML_ERROR_INVALID_ARGUMENT;
	*clock = max ? top[type] : idle[type];
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
	return clock_info(device, type, clock, false);
}

API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
	return clock_info(device, type, clock, true);
}

static nvmlReturn_t uint_answer(nvmlDevice_t device, unsigned int *out, unsigned int value)
{
	DEVICE_QUERY(device, out);
	*out = value;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
	return uint_answer(device, currLinkGen, 5);
}

API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
	return uint_answer(device, currLinkWidth, 16);
}

API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen)
{
	return uint_answer(device, maxLinkGen, 5);
}

API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)
{
	return uint_answer(device, maxLinkWidth, 16);
}

/* Idle (nvmlClocksEventReasonGpuIdle = 1); the supported mask covers the
 * documented reasons up to HW power brake slowdown (0x1ff). */
static nvmlReturn_t reasons(nvmlDevice_t device, unsigned long long *out, unsigned long long value)
{
	DEVICE_QUERY(device, out);
	*out = value;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r)
{
	return reasons(device, r, 0x1);
}

API nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r)
{
	return reasons(device, r, 0x1ff);
}

API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *r)
{
	return reasons(device, r, 0x1);
}

API nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device, unsigned long long *r)
{
	return reasons(device, r, 0x1ff);
}

/* Milliwatts: an idle 700 W part. */
API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
	return uint_answer(device, power, 72000);
}

API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
	return uint_answer(device, limit, 700000);
}

API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int *limit)
{
	return uint_answer(device, limit, 700000);
}

API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
	return uint_answer(device, limit, 700000);
}

API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *minLimit,
							     unsigned int *maxLimit)
{
	DEVICE_QUERY(device, minLimit);
	if (!maxLimit)
		return NVML_ERROR_INVALID_ARGUMENT;
	*minLimit = 200000;
	*maxLimit = 700000;
	return NVML_SUCCESS;
}

static nvmlReturn_t int_answer(nvmlDevice_t device, int *out, int value)
{
	DEVICE_QUERY(device, out);
	*out = value;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int *pState)
{
	return int_answer(device, pState, 0); /* P0 */
}

API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, int *computeMode)
{
	return int_answer(device, computeMode, 0); /* NVML_COMPUTEMODE_DEFAULT */
}

API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, int *persistence)
{
	return int_answer(device, persistence, 1); /* enabled, as on servers */
}

API nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, int *display)
{
	return int_answer(device, display, 0);
}

API nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, int *isActive)
{
	return int_answer(device, isActive, 0);
}

API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, int *current, int *pending)
{
	DEVICE_QUERY(device, current);
	if (!pending)
		return NVML_ERROR_INVALID_ARGUMENT;
	*current = *pending = 1;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
	DEVICE_QUERY(device, currentMode);
	if (!pendingMode)
		return NVML_ERROR_INVALID_ARGUMENT;
	*currentMode = *pendingMode = 0; /* NVML_DEVICE_MIG_DISABLE */
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
	DEVICE_QUERY(device, major);
	if (!minor)
		return NVML_ERROR_INVALID_ARGUMENT;
	*major = 9;
	*minor = 0;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch)
{
	return uint_answer(device, arch, 9); /* NVML_DEVICE_ARCH_HOPPER */
}

API nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device, unsigned int *multiGpuBool)
{
	return uint_answer(device, multiGpuBool, 0);
}

/* Graphics and MPS clients: none (the fake's contexts are plain compute). */
static nvmlReturn_t no_processes(nvmlDevice_t device, unsigned int *count)
{
	DEVICE_QUERY(device, count);
	*count = 0;
	return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
							  nvmlProcessInfo_t *infos)
{
	(void)infos;
	return no_processes(device, count);
}

API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
							  nvmlProcessInfo_t *infos)
{
	(void)infos;
	return no_processes(device, count);
}

API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *count,
						       nvmlProcessInfo_v1_t *infos)
{
	(void)infos;
	return no_processes(device, count);
}

API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
							    nvmlProcessInfo_t *infos)
{
	(void)infos;
	return no_processes(device, count);
}

API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
							    nvmlProcessInfo_t *infos)
{
	(void)infos;
	return no_processes(device, count);
}

API nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
							 nvmlProcessInfo_v1_t *infos)
{
	(void)infos;
	return no_processes(device, count);
}
