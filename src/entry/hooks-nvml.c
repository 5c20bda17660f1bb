/* hooks-nvml: NVML asked from inside a capped process tells the same story
 * as cuMemGetInfo. A program linked to libnvidia-ml.so.1 binds to these
 * exports; dlsym (lookup.c) hands them out when the real answer lies in
 * libnvidia-ml (pynvml). Each calls the real NVML and returns its error
 * unchanged; on success it rewrites the figures of a GPU the shim caps,
 * found by UUID: memory info, and this process's usedGpuMemory as its
 * footprint. No hook calls CUDA (a program may use NVML, then fork) or nvmlInit.
 *
 * Thread safety: no state of its own; no lock is held across a real call. */
#include "entry/table.h"

#include <stdint.h>
#include <strings.h>
#include <unistd.h>

#include "driver/nvml.h"
#include "platform/export.h"
#include "state/device.h"
#include "group/group.h"
#include "state/ledger.h"

static bool same_gpu(const unsigned char uuid[16], const char *name)
{
	char mine[48];
	cumemcap_nvml_format_uuid(uuid, "GPU-", mine);
	if (strcasecmp(mine, name) == 0)
		return true;
	/* CUDA gives a MIG instance's UUID in the same 16 bytes. */
	cumemcap_nvml_format_uuid(uuid, "MIG-", mine);
	return strcasecmp(mine, name) == 0;
}

/* The GPU behind `device`, when the shim knows it: its ordinal (-1: one the
 * process has not used), its limit and the process's footprint there. */
static bool known(const struct cumemcap_nvml_real *real, nvmlDevice_t device, int *dev, uint64_t *limit,
		  uint64_t *footprint)
{
	char name[96];
	if (!real->get_uuid || real->get_uuid(device, name, sizeof(name)) != CUMEMCAP_NVML_SUCCESS)
		return false;
	name[sizeof(name) - 1] = '\0';
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++) {
		const struct cumemcap_device_info *info = cumemcap_device_info(d);
		if (!info || !same_gpu(info->uuid, name))
			continue;
		*dev = d;
		*limit = cumemcap_ledger_get(d, CUMEMCAP_FIG_limit);
		*footprint = cumemcap_ledger_get(d, CUMEMCAP_FIG_footprint); /* reserved + the driver's overhead */
		return true;
	}
	const struct cumemcap_device_info *all;
	int n = cumemcap_device_all(&all);
	for (int i = 0; i < n; i++) {
		if (!same_gpu(all[i].uuid, name))
			continue;
		*dev = -1;
		*limit = all[i].limit;
		*footprint = 0;
		return true;
	}
	return false;
}

/* NVML's memory figures as cuMemGetInfo tells them: the least of the limit
 * and the group's budget, and of what each leaves. False: neither caps it. */
static bool memory_seen(const struct cumemcap_nvml_real *real, nvmlDevice_t device,
			unsigned long long *total, unsigned long long *used, unsigned long long *free_bytes)
{
	int dev;
	uint64_t limit, footprint;
	if (!known(real, device, &dev, &limit, &footprint))
		return false;
	uint64_t left = limit == CUMEMCAP_NO_LIMIT ? UINT64_MAX : footprint < limit ? limit - footprint : 0;
	uint64_t budget, room;
	if (dev >= 0 && cumemcap_group_capacity(dev, &budget, &room)) {
		if (budget < limit)
			limit = budget;
		if (room < left)
			left = room;
	}
	if (limit == CUMEMCAP_NO_LIMIT)
		return false;
	*total = limit;
	*free_bytes = left < limit ? left : limit;
	*used = limit - *free_bytes;
	return true;
}

/* The real library's entry point `fn`, or the error to return. */
#define REAL_OR_RETURN(real, fn)                                                                   \
	do {                                                                                       \
		if (!cumemcap_nvml_real(&(real)))                                                  \
			return CUMEMCAP_NVML_ERROR_UNINITIALIZED;                                  \
		if (!(real).fn)                                                                    \
			return CUMEMCAP_NVML_ERROR_FUNCTION_NOT_FOUND;                             \
	} while (0)

/* nvmlDeviceGetMemoryInfo in either layout; `seen` runs when the GPU is
 * capped (v2: reserved = 0, so that total = reserved + used + free). */
#define MEMORY_INFO(name, fn, record, seen)                                                        \
	CUMEMCAP_EXPORT nvmlReturn_t name(nvmlDevice_t device, record *memory);                    \
	CUMEMCAP_EXPORT nvmlReturn_t name(nvmlDevice_t device, record *memory)                     \
	{                                                                                          \
		struct cumemcap_nvml_real real;                                                    \
		REAL_OR_RETURN(real, fn);                                                          \
		nvmlReturn_t r = real.fn(device, memory);                                          \
		if (r == CUMEMCAP_NVML_SUCCESS && memory &&                                        \
		    memory_seen(&real, device, &memory->total, &memory->used, &memory->free))      \
			seen;                                                                      \
		return r;                                                                          \
	}
MEMORY_INFO(nvmlDeviceGetMemoryInfo, memory_info, struct cumemcap_nvml_memory, (void)0)
MEMORY_INFO(nvmlDeviceGetMemoryInfo_v2, memory_info_v2, struct cumemcap_nvml_memory_v2,
	    memory->reserved = 0)

/* The real list, this process's usedGpuMemory its footprint on a capped
 * GPU. Every layout opens with pid, then usedGpuMemory (`stride`: a record). */
static nvmlReturn_t processes(cumemcap_nvml_procs_fn fn, nvmlDevice_t device, unsigned int *count,
			      void *infos, size_t stride, const struct cumemcap_nvml_real *real)
{
	nvmlReturn_t r = fn(device, count, infos);
	int dev;
	uint64_t limit, footprint;
	if (r != CUMEMCAP_NVML_SUCCESS || !count || !infos || *count == 0 ||
	    !known(real, device, &dev, &limit, &footprint) || limit == CUMEMCAP_NO_LIMIT)
		return r;
	unsigned int me = (unsigned int)getpid();
	for (unsigned int i = 0; i < *count; i++) {
		struct cumemcap_nvml_process_v1 *p =
			(struct cumemcap_nvml_process_v1 *)((unsigned char *)infos + (size_t)i * stride);
		if (p->pid == me && p->usedGpuMemory != CUMEMCAP_NVML_VALUE_NOT_AVAILABLE)
			p->usedGpuMemory = footprint;
	}
	return r;
}

#define PROCESSES(name, fn, record)                                                                \
	CUMEMCAP_EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *count,                \
					  record *infos);                                          \
	CUMEMCAP_EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *count, record *infos) \
	{                                                                                          \
		struct cumemcap_nvml_real real;                                                    \
		REAL_OR_RETURN(real, fn);                                                          \
		return processes(real.fn, device, count, infos, sizeof(*infos), &real);            \
	}
PROCESSES(nvmlDeviceGetComputeRunningProcesses, procs, struct cumemcap_nvml_process_v1)
PROCESSES(nvmlDeviceGetComputeRunningProcesses_v2, procs_v2, struct cumemcap_nvml_process)
PROCESSES(nvmlDeviceGetComputeRunningProcesses_v3, procs_v3, struct cumemcap_nvml_process)

CUMEMCAP_DLSYM_SAFE void *cumemcap_nvml_hook(const char *name)
{
	if (!name || name[0] != 'n' || name[1] != 'v' || name[2] != 'm' || name[3] != 'l')
		return NULL;
#define HOOK(fn)                        \
	if (cumemcap_str_eq(name, #fn)) \
		return (void *)fn;
	HOOK(nvmlDeviceGetMemoryInfo)
	HOOK(nvmlDeviceGetMemoryInfo_v2)
	HOOK(nvmlDeviceGetComputeRunningProcesses)
	HOOK(nvmlDeviceGetComputeRunningProcesses_v2)
	HOOK(nvmlDeviceGetComputeRunningProcesses_v3)
#undef HOOK
	return NULL;
}
