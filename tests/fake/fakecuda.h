/* fakecuda: the fake CUDA driver's own record, for tests.
 *
 * The fake libcuda.so.1 built under tests/fake exports these functions next
 * to the CUDA driver API. Tests (and benchmarks) look them up with
 * dlsym(RTLD_DEFAULT, "fakecuda_...") or link against the fake directly.
 * They describe what the *driver* holds, independent of anything the shim
 * believes, so a test can check a limit against the driver's view.
 *
 * Configuration (environment, read at the first call into the fake):
 *   FAKECUDA_DEVICES        comma list of device capacities, one per device:
 *                           "16GiB,8GiB" (K/M/G/T, KiB..TiB binary, plain bytes).
 *                           Default "16GiB" (one device). "none": zero devices
 *                           (cuInit returns CUDA_ERROR_NO_DEVICE).
 *   FAKECUDA_UUIDS          comma list of "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
 *                           one per device. Default: GPU-fa4ec0da-0000-4000-8000-00000000000N
 *                           with N the ordinal in hex.
 *   FAKECUDA_PCI            comma list of PCI bus ids "0000:3b:00.0", one per
 *                           device. Default "0000:NN:00.0" with NN = 0x10 + ordinal.
 *   FAKECUDA_OTHER_USED     comma list of bytes per device held by other
 *                           processes (lowers free memory). Default 0.
 *   FAKECUDA_CTX_OVERHEAD   bytes a context costs on its device while it
 *                           exists (lowers free memory, never allocatable,
 *                           not counted in fakecuda_reserved). Default 0.
 *   FAKECUDA_DRIVER_GROW    "SIZE@SECONDS" ("256MiB@0.5"): SECONDS after a
 *                           context comes to life on a device that had none,
 *                           the driver holds SIZE more there for this process
 *                           (module images, library workspaces), as
 *                           fakecuda_driver_grow would add it: taken at the
 *                           first look (cuMemGetInfo, an allocation, NVML, the
 *                           record) once due and once it fits what is free.
 *                           Default: none.
 *   FAKECUDA_DRIVER_VERSION cuDriverGetVersion value. Default 13000.
 *   FAKECUDA_STREAM_DELAY_US microseconds every stream operation sleeps before
 *                           it runs on the stream's worker. Default 0.
 *   FAKECUDA_FREE_DELAY_US  microseconds cuMemFree sleeps before it looks at
 *                           anything (a thread preempted just before the
 *                           call, made repeatable). Default 0.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of device memory this process holds from the fake on device `dev`
 * right now: plain, pitched and managed allocations, stream-ordered pool
 * reservations (what the pools hold, used or not), the graph memory pool's
 * reservation (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), VMM physical handles
 * (cuMemCreate) and arrays. Returns 0 for a bad ordinal. */
uint64_t fakecuda_reserved(int dev);

/* The highest fakecuda_reserved(dev) has been since start or the last reset. */
uint64_t fakecuda_peak_reserved(int dev);
void fakecuda_reset_peak(int dev);

/* Bytes the live contexts of this process cost on `dev` right now:
 * FAKECUDA_CTX_OVERHEAD per context (created and not destroyed; primary:
 * retained). Not part of fakecuda_reserved. Returns 0 for a bad ordinal. */
uint64_t fakecuda_context_bytes(int dev);

/* Driver-side memory that grows after the context exists, outside any
 * allocation call, as a real driver's does (module images loaded, library
 * handles, communication buffers): `bytes` more (negative: less, clamped at
 * 0) held for this process on `dev`. It counts like the contexts' cost: it
 * lowers cuMemGetInfo's free, allocations that would pass the card with it
 * are refused, the fake NVML shows it in the process's usedGpuMemory and
 * the device's used. It lives with the device's contexts: when the last one
 * there dies, it is gone. Returns 0 (CUDA_SUCCESS), or with nothing changed
 * CUDA_ERROR_OUT_OF_MEMORY (2) when `bytes` exceeds what is free on the
 * card, CUDA_ERROR_INVALID_DEVICE (101) for a bad ordinal,
 * CUDA_ERROR_INVALID_CONTEXT (201) when no context lives on `dev`. */
int fakecuda_driver_grow(int dev, int64_t bytes);

/* What the driver holds for this process on `dev` outside allocations:
 * fakecuda_context_bytes + what has grown (fakecuda_driver_grow,
 * FAKECUDA_DRIVER_GROW). The fake NVML reports fakecuda_reserved + this.
 * Returns 0 for a bad ordinal. */
uint64_t fakecuda_driver_held(int dev);

/* Number of live allocations on `dev` (plain + pitched + managed + live
 * stream-ordered allocations + live graph allocations + VMM handles +
 * arrays). */
uint64_t fakecuda_live_allocations(int dev);

/* How many times the entry point with this exported name has been called,
 * e.g. "cuMemAlloc_v2", "cuMemAllocAsync_ptsz". 0 for unknown names. */
uint64_t fakecuda_calls(const char *exported_name);

/* The same, counted in the calling thread's block only (a block may carry
 * the counts of an exited thread that had it before): the difference of
 * two reads by one thread is that thread's calls, what a test asserts of
 * its own calls while the shim's worker thread may call the driver too. */
uint64_t fakecuda_thread_calls(const char *exported_name);

/* How many times the fake waited for every stream of a context to drain
 * (cuCtxSynchronize and the implicit synchronization of cuMemFree etc). */
uint64_t fakecuda_device_syncs(void);

#ifdef __cplusplus
}
#endif
