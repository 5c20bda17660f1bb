/* nvml: what NVIDIA's management library says this process holds on a GPU.
 *
 * Owns the optional run-time link to libnvidia-ml.so.1 (dlopen, never a
 * link-time dependency), its initialization and a cache of device handles
 * found by the CUDA UUID (so CUDA_VISIBLE_DEVICES reordering cannot mix GPUs
 * up). NVML's per-process figure (usedGpuMemory, what nvidia-smi shows)
 * includes the CUDA context and everything the driver holds for the
 * process, which the shim cannot see through the allocation calls.
 *
 * Called from the worker thread (the log's samples, the overhead's
 * refresh) and from the hooks that make a context or refuse a request
 * (loading and initializing NVML can take long; so can making a context).
 * One xmutex guards the state; a forked child gets a fresh one
 * (cumemcap_nvml_fork_child). A missing or failing NVML is silent: the
 * answer is just "unknown". Never calls CUDA. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Bytes NVML reports process `pid` uses on the GPU whose CUDA UUID is
 * `uuid` (16 bytes, as cuDeviceGetUuid gives them). False when NVML is
 * missing or fails, does not know the GPU, does not list the process (as
 * in a container whose PID namespace is not the host's), or cannot say.
 * The first call loads and initializes NVML. */
bool cumemcap_nvml_process_used(const unsigned char uuid[16], unsigned pid, uint64_t *bytes);

/* What NVML says of a process on a GPU. */
enum cumemcap_nvml_answer {
	CUMEMCAP_NVML_LISTED,   /* listed, with its figure */
	CUMEMCAP_NVML_UNLISTED, /* NVML answered, without the process */
	CUMEMCAP_NVML_UNKNOWN,  /* no NVML, no such GPU, an error, or no figure */
};
enum cumemcap_nvml_answer cumemcap_nvml_process(const unsigned char uuid[16], unsigned pid, uint64_t *bytes);

/* The GPU's used memory, all processes (nvmlDeviceGetMemoryInfo). False
 * when NVML cannot say. */
bool cumemcap_nvml_device_used(const unsigned char uuid[16], uint64_t *used);

/* Whether NVML loads and initializes. */
bool cumemcap_nvml_available(void);

/* Whether this process is in the host's PID namespace, where NVML's pids
 * are its own (false in most containers). */
bool cumemcap_nvml_host_pids(void);

void cumemcap_nvml_fork_child(void);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (41 bytes with the NUL). */
void cumemcap_nvml_format_uuid(const unsigned char uuid[16], const char *prefix, char out[48]);
