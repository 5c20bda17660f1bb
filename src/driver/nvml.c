/* nvml: see nvml.h.
 *
 * The NVML types are declared here (no nvml.h is needed to build): the
 * calls used are stable parts of its ABI, nvmlInit_v2, nvmlShutdown,
 * nvmlDeviceGetHandleByUUID and nvmlDeviceGetComputeRunningProcesses_v3
 * (falling back to _v2, same record, and the original two-field form).
 * Thread safety: one mutex around every call (the worker thread is the
 * only caller; the lock keeps that true if it ever changes). */
#include "driver/nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "platform/cuda-api.h"

typedef int nvmlReturn_t;
typedef struct nvml_device_st *nvmlDevice_t;

/* nvmlProcessInfo_t of _v2/_v3 (NVML 11+). */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvml_process_info;

/* nvmlProcessInfo_v1_t of the unversioned call. */
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvml_process_info_v1;

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static enum { UNTRIED, READY, MISSING } state;
static nvmlReturn_t (*p_init)(void);
static nvmlReturn_t (*p_handle_by_uuid)(const char *uuid, nvmlDevice_t *device);
static nvmlReturn_t (*p_procs)(nvmlDevice_t device, unsigned int *count, void *infos);
static size_t proc_stride; /* sizeof the record p_procs fills */

/* Device handles by CUDA UUID; a GPU NVML does not know is remembered too. */
static struct {
	unsigned char uuid[16];
	bool used, known;
	nvmlDevice_t handle;
} handles[CUMEMCAP_MAX_DEVICES];

void cumemcap_nvml_format_uuid(const unsigned char uuid[16], const char *prefix, char out[48])
{
	static const char hex[] = "0123456789abcdef";
	size_t n = 0;
	for (; prefix[n] && n < 4; n++)
		out[n] = prefix[n];
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[n++] = '-';
		out[n++] = hex[uuid[i] >> 4];
		out[n++] = hex[uuid[i] & 15];
	}
	out[n] = '\0';
}

static bool load(void)
{
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return false;
	*(void **)&p_init = dlsym(lib, "nvmlInit_v2");
	*(void **)&p_handle_by_uuid = dlsym(lib, "nvmlDeviceGetHandleByUUID");
	proc_stride = sizeof(nvml_process_info);
	*(void **)&p_procs = dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	if (!p_procs)
		*(void **)&p_procs = dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
	if (!p_procs) {
		*(void **)&p_procs = dlsym(lib, "nvmlDeviceGetComputeRunningProcesses");
		proc_stride = sizeof(nvml_process_info_v1);
	}
	if (!p_init || !p_handle_by_uuid || !p_procs || p_init() != NVML_SUCCESS) {
		/* Keep the library loaded: unloading what an init may have
		 * started is riskier than a mapping. */
		return false;
	}
	return true;
}

static bool handle_for(const unsigned char uuid[16], nvmlDevice_t *out)
{
	int free_slot = -1;
	for (int i = 0; i < CUMEMCAP_MAX_DEVICES; i++) {
		if (!handles[i].used) {
			if (free_slot < 0)
				free_slot = i;
			continue;
		}
		if (memcmp(handles[i].uuid, uuid, 16) == 0) {
			*out = handles[i].handle;
			return handles[i].known;
		}
	}
	/* CUDA gives a MIG instance's UUID in the same 16 bytes; NVML names
	 * it MIG-... */
	char name[48];
	nvmlDevice_t h = NULL;
	cumemcap_nvml_format_uuid(uuid, "GPU-", name);
	bool known = p_handle_by_uuid(name, &h) == NVML_SUCCESS;
	if (!known) {
		cumemcap_nvml_format_uuid(uuid, "MIG-", name);
		known = p_handle_by_uuid(name, &h) == NVML_SUCCESS;
	}
	if (free_slot >= 0) {
		memcpy(handles[free_slot].uuid, uuid, 16);
		handles[free_slot].handle = h;
		handles[free_slot].known = known;
		handles[free_slot].used = true;
	}
	*out = h;
	return known;
}

/* Sum this pid's usedGpuMemory over the device's compute processes. A
 * listed process whose figure NVML cannot give (NVML_VALUE_NOT_AVAILABLE:
 * some containers, Windows WDDM) is unknown, not zero. */
static bool process_used(nvmlDevice_t h, unsigned pid, uint64_t *bytes)
{
	unsigned char stack_buf[64 * sizeof(nvml_process_info)];
	unsigned char *buf = stack_buf;
	unsigned cap = (unsigned)(sizeof(stack_buf) / proc_stride);
	bool found = false, unknown = false, answered = false;
	uint64_t sum = 0;
	for (int attempt = 0; attempt < 4 && !answered; attempt++) {
		unsigned count = cap;
		nvmlReturn_t r = p_procs(h, &count, buf);
		if (r == NVML_ERROR_INSUFFICIENT_SIZE && count > cap) {
			/* More processes than room: grow (the list may grow
			 * again before the next try). */
			unsigned want = count + 16;
			unsigned char *bigger = malloc((size_t)want * proc_stride);
			if (!bigger)
				break;
			if (buf != stack_buf)
				free(buf);
			buf = bigger;
			cap = want;
			continue;
		}
		if (r != NVML_SUCCESS)
			break;
		answered = true;
		if (count > cap)
			count = cap;
		for (unsigned i = 0; i < count; i++) {
			nvml_process_info p; /* the v1 record is its prefix */
			memcpy(&p, buf + (size_t)i * proc_stride, proc_stride);
			if (p.pid != pid)
				continue;
			found = true;
			if (p.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE)
				unknown = true;
			else
				sum += p.usedGpuMemory;
		}
	}
	if (buf != stack_buf)
		free(buf);
	if (!answered || !found || unknown)
		return false;
	*bytes = sum;
	return true;
}

bool cumemcap_nvml_process_used(const unsigned char uuid[16], unsigned pid, uint64_t *bytes)
{
	bool ok = false;
	pthread_mutex_lock(&lock);
	if (state == UNTRIED)
		state = load() ? READY : MISSING;
	nvmlDevice_t h;
	if (state == READY && handle_for(uuid, &h))
		ok = process_used(h, pid, bytes);
	pthread_mutex_unlock(&lock);
	return ok;
}
