/* hooks-nvml: NVML asked from inside a capped process tells the same story
 * as cuMemGetInfo.
 *
 * The shim exports nvmlDeviceGetMemoryInfo, _v2 and
 * nvmlDeviceGetComputeRunningProcesses, _v2, _v3: a program linked to
 * libnvidia-ml.so.1 binds to them under LD_PRELOAD, and dlsym
 * (lookup.c) hands them out for a lookup whose real answer lies in
 * libnvidia-ml (pynvml's dlopen + dlsym). Each calls the real NVML first
 * (nvml.h: the library's own functions, never these), returns its error
 * unchanged, and on success rewrites the figures of a GPU the shim knows
 * and caps:
 *   memory info: total = the limit (or the group's budget, when less),
 *     free = limit - footprint (0 past it; or the group's room, when
 *     less), used = total - free; v2: reserved = 0, so total =
 *     reserved + used + free as NVML documents (v2's used includes
 *     reserved);
 *   compute processes: the entries whose pid is getpid() get the footprint
 *     as usedGpuMemory, unless NVML said NVML_VALUE_NOT_AVAILABLE.
 * The GPU is found by the UUID the real nvmlDeviceGetUUID gives the handle,
 * among the GPUs the device layer knows: a GPU with no limit, or one the
 * process's CUDA has not seen (not initialized, not visible), gets the real
 * answer. A known GPU the process has not used yet holds nothing of the
 * shim's: its footprint reads 0. No hook calls CUDA (a program may use
 * NVML, then fork), loads the driver, or calls nvmlInit: the program's own
 * initialization is what the real calls answer under.
 *
 * NVML missing (the shim's dlopen of libnvidia-ml.so.1 fails): a program
 * cannot reach these hooks then (linked, it would not start; through dlsym
 * dlsym hands them out only for a function found in the library), so
 * the answer is NVML's own for an unusable library,
 * NVML_ERROR_UNINITIALIZED; a real function the library lacks answers
 * NVML_ERROR_FUNCTION_NOT_FOUND.
 *
 * Thread safety: no state of its own; the real entry points are published
 * once (nvml.h), the device facts are immutable once known (device.h) and
 * the ledger's figures are atomics; no lock is held across a real call. */
#include "entry/hooks-nvml.h"

#include <stdint.h>
#include <strings.h>
#include <unistd.h>

#include "driver/nvml.h"
#include "platform/export.h"
#include "state/device.h"
#include "group/group.h"
#include "state/ledger.h"

typedef cumemcap_nvml_return nvmlReturn_t;
typedef cumemcap_nvml_device nvmlDevice_t;

CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, struct cumemcap_nvml_memory *memory);
CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
							struct cumemcap_nvml_memory_v2 *memory);
CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
								  struct cumemcap_nvml_process_v1 *infos);
CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
								     struct cumemcap_nvml_process *infos);
CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
								     struct cumemcap_nvml_process *infos);

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

/* The GPU behind `device`, when the shim knows it: its ordinal (-1 for a
 * GPU CUDA reported that the process has not used: it holds nothing), its
 * limit (CUMEMCAP_NO_LIMIT: none) and the process's footprint there. */
static bool known(const struct cumemcap_nvml_real *real, nvmlDevice_t device, int *dev, uint64_t *limit,
		  uint64_t *footprint)
{
	char name[96];
	if (!real->get_uuid || real->get_uuid(device, name, sizeof(name)) != CUMEMCAP_NVML_SUCCESS)
		return false;
	name[sizeof(name) - 1] = '\0';
	/* A GPU the process used: the ledger's books. */
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++) {
		const struct cumemcap_device_info *info = cumemcap_device_info(d);
		if (!info || !same_gpu(info->uuid, name))
			continue;
		*dev = d;
		*limit = cumemcap_ledger_limit(d);
		*footprint = cumemcap_ledger_footprint(d); /* reserved + the driver's overhead */
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

/* The limit and the footprint of the GPU behind `device`, when the shim
 * knows it and the process has a limit there. */
static bool capped(const struct cumemcap_nvml_real *real, nvmlDevice_t device, uint64_t *limit,
		   uint64_t *footprint)
{
	int dev;
	return known(real, device, &dev, limit, footprint) && *limit != CUMEMCAP_NO_LIMIT;
}

/* What the process may see of the GPU behind `device`, as cuMemGetInfo
 * tells it: the total is the least of its limit and its group's budget,
 * the free the least of what each leaves. False: neither caps it. */
static bool memory_seen(const struct cumemcap_nvml_real *real, nvmlDevice_t device, uint64_t *total,
			uint64_t *free_bytes)
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
	return true;
}

/* The real library's entry point `fn`, or the error to return. */
#define REAL_OR_RETURN(real, fn)                                                \
	do {                                                                    \
		if (!cumemcap_nvml_real(&(real)))                               \
			return CUMEMCAP_NVML_ERROR_UNINITIALIZED;               \
		if (!(real).fn)                                                 \
			return CUMEMCAP_NVML_ERROR_FUNCTION_NOT_FOUND;          \
	} while (0)

static void tell(uint64_t total, uint64_t free_bytes, unsigned long long *total_out, unsigned long long *used,
		 unsigned long long *free_out)
{
	*total_out = total;
	*used = total - free_bytes;
	*free_out = free_bytes;
}

CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, struct cumemcap_nvml_memory *memory)
{
	struct cumemcap_nvml_real real;
	REAL_OR_RETURN(real, memory_info);
	nvmlReturn_t r = real.memory_info(device, memory);
	uint64_t total, free_bytes;
	if (r == CUMEMCAP_NVML_SUCCESS && memory && memory_seen(&real, device, &total, &free_bytes))
		tell(total, free_bytes, &memory->total, &memory->used, &memory->free);
	return r;
}

CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
							struct cumemcap_nvml_memory_v2 *memory)
{
	struct cumemcap_nvml_real real;
	REAL_OR_RETURN(real, memory_info_v2);
	nvmlReturn_t r = real.memory_info_v2(device, memory);
	uint64_t total, free_bytes;
	if (r == CUMEMCAP_NVML_SUCCESS && memory && memory_seen(&real, device, &total, &free_bytes)) {
		memory->reserved = 0;
		tell(total, free_bytes, &memory->total, &memory->used, &memory->free);
	}
	return r;
}

/* The real list, with this process's usedGpuMemory made its footprint on
 * a capped GPU. `used_at`: where usedGpuMemory lies in a record of
 * `stride` bytes (the records' pid is their first field). */
static nvmlReturn_t processes(cumemcap_nvml_procs_fn fn, nvmlDevice_t device, unsigned int *count,
			      void *infos, size_t stride, const struct cumemcap_nvml_real *real)
{
	nvmlReturn_t r = fn(device, count, infos);
	uint64_t limit, footprint;
	if (r != CUMEMCAP_NVML_SUCCESS || !count || !infos || *count == 0 ||
	    !capped(real, device, &limit, &footprint))
		return r;
	unsigned int me = (unsigned int)getpid();
	for (unsigned int i = 0; i < *count; i++) {
		/* Both record layouts open with pid, then usedGpuMemory. */
		struct cumemcap_nvml_process_v1 *p =
			(struct cumemcap_nvml_process_v1 *)((unsigned char *)infos + (size_t)i * stride);
		if (p->pid == me && p->usedGpuMemory != CUMEMCAP_NVML_VALUE_NOT_AVAILABLE)
			p->usedGpuMemory = footprint;
	}
	return r;
}

CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count,
								  struct cumemcap_nvml_process_v1 *infos)
{
	struct cumemcap_nvml_real real;
	REAL_OR_RETURN(real, procs);
	return processes(real.procs, device, count, infos, sizeof(*infos), &real);
}

CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *count,
								     struct cumemcap_nvml_process *infos)
{
	struct cumemcap_nvml_real real;
	REAL_OR_RETURN(real, procs_v2);
	return processes(real.procs_v2, device, count, infos, sizeof(*infos), &real);
}

CUMEMCAP_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
								     struct cumemcap_nvml_process *infos)
{
	struct cumemcap_nvml_real real;
	REAL_OR_RETURN(real, procs_v3);
	return processes(real.procs_v3, device, count, infos, sizeof(*infos), &real);
}

/* ---- the table dlsym answers from ------------------------------------------ */

static const struct {
	const char *name;
	void *hook;
} nvml_hooks[] = {
	{ "nvmlDeviceGetMemoryInfo", (void *)nvmlDeviceGetMemoryInfo },
	{ "nvmlDeviceGetMemoryInfo_v2", (void *)nvmlDeviceGetMemoryInfo_v2 },
	{ "nvmlDeviceGetComputeRunningProcesses", (void *)nvmlDeviceGetComputeRunningProcesses },
	{ "nvmlDeviceGetComputeRunningProcesses_v2", (void *)nvmlDeviceGetComputeRunningProcesses_v2 },
	{ "nvmlDeviceGetComputeRunningProcesses_v3", (void *)nvmlDeviceGetComputeRunningProcesses_v3 },
};

CUMEMCAP_DLSYM_SAFE void *cumemcap_nvml_hook(const char *name)
{
	/* Most dlsym calls are for other names and leave here. */
	if (!name || name[0] != 'n' || name[1] != 'v' || name[2] != 'm' || name[3] != 'l')
		return NULL;
	for (size_t i = 0; i < sizeof(nvml_hooks) / sizeof(nvml_hooks[0]); i++)
		if (cumemcap_str_eq(nvml_hooks[i].name, name))
			return nvml_hooks[i].hook;
	return NULL;
}
