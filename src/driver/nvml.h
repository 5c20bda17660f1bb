/* nvml: what NVIDIA's management library says this process holds on a GPU.
 *
 * Owns the optional run-time link to libnvidia-ml.so.1 (dlopen, never a
 * link-time dependency), its initialization and a cache of device handles
 * found by the CUDA UUID (so CUDA_VISIBLE_DEVICES reordering cannot mix GPUs
 * up). NVML's per-process figure (usedGpuMemory, what nvidia-smi shows)
 * includes the CUDA context and everything the driver holds for the
 * process, which the shim cannot see through the allocation calls.
 *
 * Called only from the worker thread (the log's samples), never from a
 * hook: loading and initializing NVML can take long. One mutex guards the
 * state anyway; the log calls in only under its tick lock, which it holds
 * across fork(), so this one is free in a forked child. A missing or
 * failing NVML is silent: the answer is just "unknown". Never calls CUDA. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Bytes NVML reports process `pid` uses on the GPU whose CUDA UUID is
 * `uuid` (16 bytes, as cuDeviceGetUuid gives them). False when NVML is
 * missing or fails, does not know the GPU, does not list the process (as
 * in a container whose PID namespace is not the host's), or cannot say.
 * The first call loads and initializes NVML. */
bool cumemcap_nvml_process_used(const unsigned char uuid[16], unsigned pid, uint64_t *bytes);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (41 bytes with the NUL). */
void cumemcap_nvml_format_uuid(const unsigned char uuid[16], const char *prefix, char out[48]);
