/* nvml: what NVIDIA's management library says this process holds on a GPU.
 *
 * Owns the optional dlopen of libnvidia-ml.so.1, its initialization, the
 * device handles found by CUDA UUID (CUDA_VISIBLE_DEVICES cannot mix GPUs
 * up) and the real entry points the NVML hooks forward to. A missing or
 * failing NVML is silent ("unknown"). Never calls CUDA.
 *
 * Thread safety: the shim's own questions take one xmutex (fresh in a fork
 * child). The real entry points are resolved without a lock (a thread that
 * finds another resolving resolves its own copy, so a fork child never
 * waits), published once with release order, then only read. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* What NVML says of process `pid` on the GPU whose CUDA UUID is `uuid`.
 * The first question loads and initializes NVML. */
enum cumemcap_nvml_answer {
	CUMEMCAP_NVML_LISTED,   /* listed, with its figure in *bytes */
	CUMEMCAP_NVML_UNLISTED, /* NVML answered without it (a container's PID namespace) */
	CUMEMCAP_NVML_UNKNOWN,  /* no NVML, no such GPU, an error, or no figure */
};
enum cumemcap_nvml_answer cumemcap_nvml_process(const unsigned char uuid[16], unsigned pid, uint64_t *bytes);

/* The GPU's used memory, all processes'; false when unknown. */
bool cumemcap_nvml_device_used(const unsigned char uuid[16], uint64_t *used);

/* nvidia-smi's index of the GPU (PCI bus order); false when unknown. */
bool cumemcap_nvml_index(const unsigned char uuid[16], unsigned *index);

/* Whether NVML loads and initializes. */
bool cumemcap_nvml_available(void);

/* Whether this process is in the host's PID namespace (NVML's pids). */
bool cumemcap_nvml_host_pids(void);

void cumemcap_nvml_fork_child(void);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (41 bytes with the NUL). */
void cumemcap_nvml_format_uuid(const unsigned char uuid[16], const char *prefix, char out[48]);

/* NVML's ABI (no nvml.h is needed to build). */
typedef int nvmlReturn_t;
typedef struct cumemcap_nvml_dev *nvmlDevice_t;
#define CUMEMCAP_NVML_SUCCESS 0
#define CUMEMCAP_NVML_ERROR_UNINITIALIZED 1
#define CUMEMCAP_NVML_ERROR_FUNCTION_NOT_FOUND 13
#define CUMEMCAP_NVML_VALUE_NOT_AVAILABLE (~0ULL)

struct cumemcap_nvml_memory { /* nvmlMemory_t */
	unsigned long long total, free, used;
};

struct cumemcap_nvml_memory_v2 { /* nvmlMemory_v2_t */
	unsigned int version;
	unsigned long long total, reserved, free, used;
};

struct cumemcap_nvml_process { /* nvmlProcessInfo_t of _v2/_v3 (NVML 11+) */
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
};

struct cumemcap_nvml_process_v1 { /* nvmlProcessInfo_v1_t */
	unsigned int pid;
	unsigned long long usedGpuMemory;
};

typedef nvmlReturn_t (*cumemcap_nvml_procs_fn)(nvmlDevice_t device, unsigned int *count, void *infos);

/* The real library's entry points, each NULL when it does not export it. */
struct cumemcap_nvml_real {
	nvmlReturn_t (*init_v2)(void);
	nvmlReturn_t (*handle_by_uuid)(const char *uuid, nvmlDevice_t *device);
	nvmlReturn_t (*get_uuid)(nvmlDevice_t device, char *uuid, unsigned int length);
	nvmlReturn_t (*memory_info)(nvmlDevice_t device, struct cumemcap_nvml_memory *m);
	nvmlReturn_t (*memory_info_v2)(nvmlDevice_t device, struct cumemcap_nvml_memory_v2 *m);
	cumemcap_nvml_procs_fn procs;	 /* nvmlDeviceGetComputeRunningProcesses (v1 records) */
	cumemcap_nvml_procs_fn procs_v2; /* _v2 */
	cumemcap_nvml_procs_fn procs_v3; /* _v3 */
	nvmlReturn_t (*get_index)(nvmlDevice_t device, unsigned int *index);
	const void *base; /* the library's load address */
};

/* The real NVML's entry points, loaded (not initialized) the first time.
 * False, *out all NULL, without it. */
bool cumemcap_nvml_real(struct cumemcap_nvml_real *out);

/* Whether `sym` lies in the libnvidia-ml.so.1 loaded now. */
bool cumemcap_nvml_owns(const void *sym);
