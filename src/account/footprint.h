/* footprint: what the driver holds for the process outside the calls the
 * shim counts (contexts, modules, workspaces), learned per GPU as the
 * ledger's overhead (docs/footprint.md) from a source decided at the first
 * context: `nvml` (its usedGpuMemory less what the calls reserved),
 * `delta` (NVML does not list it: the GPU's used memory before and after
 * that context, per context) or `estimate` (no NVML:
 * CUMEMCAP_OVERHEAD_ESTIMATE per context, or `meminfo` when cuMemGetInfo
 * shows less used beyond the process's allocations). A reading can be low
 * (a request still in the driver) but never high, so it only raises the
 * overhead until a context is made or gone.
 *
 * Thread safety: one xmutex guards the per-GPU state and is held across
 * the NVML calls (never across a CUDA call); a forked child forgets
 * everything (no context survives a fork). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"

/* A context is about to be made on dev: before the first, read the GPU's used memory. */
void cumemcap_account_context_coming(int dev);

/* It was made (ctx, on dev; `primary`: the primary context became active). */
void cumemcap_account_context_made(int dev, CUcontext ctx, bool primary);

/* A context died: dev >= 0 names a primary context's device; otherwise
 * ctx is one made by cuCtxCreate (unknown ones are ignored). */
void cumemcap_account_context_gone(CUcontext ctx, int dev);

/* Learn dev's overhead again now (before a refusal), unless read in the last 10 ms. */
void cumemcap_account_footprint_refresh(int dev);

/* The worker's tick: every GPU with a context, at the log interval. */
uint32_t cumemcap_account_footprint_tick(uint64_t now_ms);

void cumemcap_account_footprint_fork_child(void);
