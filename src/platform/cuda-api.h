/* cuda-api: the CUDA driver API declarations the shim is written against.
 * __CUDA_API_VERSION_INTERNAL makes cuda.h declare each symbol under its
 * real name (cuMemAlloc, cuMemAlloc_v2, ..._ptsz), not a macro, so each
 * hook is type-checked. Declarations only: no state, so thread-safe. */
#pragma once

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaTypedefs.h>

/* The most GPUs (CUdevice ordinals 0 .. 63) the shim keeps records for. */
#define CUMEMCAP_MAX_DEVICES 64
