/* nvml: see nvml.h.
 *
 * The NVML types are declared here (no nvml.h is needed to build): the
 * calls used are stable parts of its ABI, nvmlInit_v2, nvmlShutdown,
 * nvmlDeviceGetHandleByUUID and nvmlDeviceGetComputeRunningProcesses_v3
 * (falling back to _v2, same record, and the original two-field form).
 * Thread safety: one xmutex around every call (the worker, and hooks that
 * learn a context's overhead, call in; a forked child gets a fresh one). */
#include "driver/nvml.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "platform/cuda-api.h"
#include "platform/xmutex.h"

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

/* nvmlMemory_t (v1). */
typedef struct {
	unsigned long long total, free, used;
} nvml_memory;

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

static struct cumemcap_xmutex lock = CUMEMCAP_XMUTEX_INIT(lock);
static enum { UNTRIED, READY, MISSING } state;
static nvmlReturn_t (*p_init)(void);
static nvmlReturn_t (*p_handle_by_uuid)(const char *uuid, nvmlDevice_t *device);
static nvmlReturn_t (*p_procs)(nvmlDevice_t device, unsigned int *count, void *infos);
static nvmlReturn_t (*p_memory)(nvmlDevice_t device, nvml_memory *memory);
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
	*(void **)&p_memory = dlsym(lib, "nvmlDeviceGetMemoryInfo"); /* optional */
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
static enum cumemcap_nvml_answer process_used(nvmlDevice_t h, unsigned pid, uint64_t *bytes)
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
	if (!answered || unknown)
		return CUMEMCAP_NVML_UNKNOWN;
	if (!found)
		return CUMEMCAP_NVML_UNLISTED;
	*bytes = sum;
	return CUMEMCAP_NVML_LISTED;
}

/* Caller holds the lock: whether NVML is ready, loading it the first time. */
static bool ready(void)
{
	if (state == UNTRIED)
		state = load() ? READY : MISSING;
	return state == READY;
}

enum cumemcap_nvml_answer cumemcap_nvml_process(const unsigned char uuid[16], unsigned pid, uint64_t *bytes)
{
	enum cumemcap_nvml_answer a = CUMEMCAP_NVML_UNKNOWN;
	cumemcap_xmutex_lock(&lock);
	nvmlDevice_t h;
	if (ready() && handle_for(uuid, &h))
		a = process_used(h, pid, bytes);
	cumemcap_xmutex_unlock(&lock);
	return a;
}

bool cumemcap_nvml_process_used(const unsigned char uuid[16], unsigned pid, uint64_t *bytes)
{
	return cumemcap_nvml_process(uuid, pid, bytes) == CUMEMCAP_NVML_LISTED;
}

bool cumemcap_nvml_device_used(const unsigned char uuid[16], uint64_t *used)
{
	bool ok = false;
	cumemcap_xmutex_lock(&lock);
	nvmlDevice_t h;
	nvml_memory m;
	if (ready() && p_memory && handle_for(uuid, &h) && p_memory(h, &m) == NVML_SUCCESS) {
		*used = m.used;
		ok = true;
	}
	cumemcap_xmutex_unlock(&lock);
	return ok;
}

bool cumemcap_nvml_available(void)
{
	cumemcap_xmutex_lock(&lock);
	bool ok = ready();
	cumemcap_xmutex_unlock(&lock);
	return ok;
}

void cumemcap_nvml_fork_child(void)
{
	cumemcap_xmutex_fork_child(&lock);
}

bool cumemcap_nvml_host_pids(void)
{
	/* The initial PID namespace's inode (PROC_PID_INIT_INO, fixed by the
	 * kernel); NVML lists processes by their pids there. */
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 && st.st_ino == 0xEFFFFFFCu;
}
