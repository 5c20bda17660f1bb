/* hooks: the driver entry points cumemcap defines (link-time door).
 *
 * Every function here has the driver's exact name and prototype (checked
 * against cudaTypedefs.h in table.c) and is a thin forwarder: it asks the
 * account layer for a charge, calls the real driver, and settles. The
 * driver's return code reaches the program unchanged, except a refusal at
 * the limit, which is CUDA_ERROR_OUT_OF_MEMORY. A NULL out-parameter is
 * passed straight to the driver, whose answer the program gets.
 *
 * Thread safety: no state here; see account.h. */
#include "account.h"
#include "arena.h"
#include "device.h"
#include "driver.h"
#include "export.h"
#include "msg.h"

#include <limits.h>

/* Without a driver there is nothing to forward to. */
#define NEED(sym)                                               \
	do {                                                    \
		if (!cumemcap_driver_ready() || !real_##sym)    \
			return CUDA_ERROR_NOT_INITIALIZED;      \
	} while (0)

static void cancel(struct cumemcap_charge *c)
{
	cumemcap_charge_finish(c, CUDA_ERROR_UNKNOWN, 0, 0);
}

/* ---- capacity ------------------------------------------------------------ */

/* Clamp the driver's figures for the current device to its limit. What
 * the arenas cache is free for the program: it counts as free whether or
 * not there is a limit. */
static void virtualize_info(uint64_t *free_bytes, uint64_t *total_bytes)
{
	CUcontext ctx;
	int dev;
	if (cumemcap_device_current(&ctx, &dev) != CUDA_SUCCESS)
		return;
	uint64_t limit = cumemcap_ledger_limit(dev);
	uint64_t cached = cumemcap_arena_cached(dev);
	if (limit != CUMEMCAP_NO_LIMIT) {
		uint64_t headroom = cumemcap_ledger_headroom(dev);
		*total_bytes = limit;
		if (*free_bytes > headroom)
			*free_bytes = headroom;
	}
	*free_bytes = *free_bytes > UINT64_MAX - cached ? UINT64_MAX : *free_bytes + cached;
	if (*free_bytes > *total_bytes)
		*free_bytes = *total_bytes;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
	NEED(cuMemGetInfo_v2);
	CUresult r = real_cuMemGetInfo_v2(free, total);
	if (r != CUDA_SUCCESS)
		return r;
	uint64_t f = *free, t = *total;
	virtualize_info(&f, &t);
	*free = (size_t)f;
	*total = (size_t)t;
	return r;
}

static unsigned int saturate_uint(uint64_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	NEED(cuMemGetInfo);
	CUresult r = real_cuMemGetInfo(free, total);
	size_t f64, t64;
	if (r != CUDA_SUCCESS || !real_cuMemGetInfo_v2 || real_cuMemGetInfo_v2(&f64, &t64) != CUDA_SUCCESS)
		return r;
	uint64_t f = f64, t = t64;
	virtualize_info(&f, &t);
	*free = saturate_uint(f);
	*total = saturate_uint(t);
	return r;
}

static uint64_t device_total(CUdevice dev, uint64_t real_total)
{
	if (!cumemcap_device_ensure(dev))
		return real_total;
	uint64_t limit = cumemcap_ledger_limit(dev);
	return limit == CUMEMCAP_NO_LIMIT ? real_total : limit;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	NEED(cuDeviceTotalMem_v2);
	CUresult r = real_cuDeviceTotalMem_v2(bytes, dev);
	if (r == CUDA_SUCCESS)
		*bytes = (size_t)device_total(dev, *bytes);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	NEED(cuDeviceTotalMem);
	CUresult r = real_cuDeviceTotalMem(bytes, dev);
	size_t t64;
	if (r == CUDA_SUCCESS && real_cuDeviceTotalMem_v2 &&
	    real_cuDeviceTotalMem_v2(&t64, dev) == CUDA_SUCCESS)
		*bytes = saturate_uint(device_total(dev, t64));
	return r;
}

/* ---- linear memory ------------------------------------------------------- */

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	NEED(cuMemAlloc_v2);
	if (!dptr)
		return real_cuMemAlloc_v2(dptr, bytesize);
	CUresult r;
	if (cumemcap_arena_alloc(dptr, bytesize, __func__, &r))
		return r;
	struct cumemcap_charge c;
	r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_linear, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemAlloc_v2(dptr, bytesize);
	return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? *dptr : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	NEED(cuMemAlloc);
	if (!dptr)
		return real_cuMemAlloc(dptr, bytesize);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_linear, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemAlloc(dptr, bytesize);
	return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? *dptr : 0);
}

/* Pitched rows are padded by the driver; reserve the usual padding (512
 * bytes) and settle on the pitch the driver chose. */
static uint64_t pitch_estimate(uint64_t width, uint64_t height)
{
	uint64_t pitch = (width + 511) / 512 * 512;
	if (pitch < width || (height && pitch > UINT64_MAX / height))
		return UINT64_MAX;
	return pitch * height;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
						   size_t WidthInBytes, size_t Height,
						   unsigned int ElementSizeBytes)
{
	NEED(cuMemAllocPitch_v2);
	if (!dptr || !pPitch)
		return real_cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_linear,
					   pitch_estimate(WidthInBytes, Height));
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
	if (r == CUDA_SUCCESS && !cumemcap_charge_adjust(&c, (uint64_t)*pPitch * Height)) {
		real_cuMemFree_v2(*dptr);
		cancel(&c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? *dptr : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
						unsigned int WidthInBytes, unsigned int Height,
						unsigned int ElementSizeBytes)
{
	NEED(cuMemAllocPitch);
	if (!dptr || !pPitch)
		return real_cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_linear,
					   pitch_estimate(WidthInBytes, Height));
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
	if (r == CUDA_SUCCESS && !cumemcap_charge_adjust(&c, (uint64_t)*pPitch * Height)) {
		if (real_cuMemFree)
			real_cuMemFree(*dptr);
		cancel(&c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? *dptr : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
						  unsigned int flags)
{
	NEED(cuMemAllocManaged);
	if (!dptr)
		return real_cuMemAllocManaged(dptr, bytesize, flags);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_managed, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemAllocManaged(dptr, bytesize, flags);
	return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? *dptr : 0);
}

/* A device pointer from any allocation call: linear, managed, or
 * stream-ordered (cuMemFree and cuMemFreeAsync each may free either; a
 * pointer is recorded under one kind only). */
static bool take_pointer(uint64_t ptr, struct cumemcap_block *b)
{
	return cumemcap_release_take(CUMEMCAP_HANDLE_PTR, ptr, b) ||
	       cumemcap_release_take(CUMEMCAP_HANDLE_ASYNC, ptr, b);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	NEED(cuMemFree_v2);
	CUresult r;
	if (cumemcap_arena_free(dptr, &r))
		return r;
	struct cumemcap_block b;
	bool found = take_pointer(dptr, &b);
	return cumemcap_release_settle(found, &b, real_cuMemFree_v2(dptr));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
	NEED(cuMemFree);
	CUresult r;
	if (cumemcap_arena_free(dptr, &r))
		return r;
	struct cumemcap_block b;
	bool found = take_pointer(dptr, &b);
	return cumemcap_release_settle(found, &b, real_cuMemFree(dptr));
}

/* ---- stream-ordered allocation --------------------------------------------- */

struct async_call {
	PFN_cuMemAllocAsync_v11020 alloc;             /* one of alloc / from_pool */
	PFN_cuMemAllocFromPoolAsync_v11020 from_pool;
	PFN_cuMemFreeAsync_v11020 free;               /* the matching free, to undo */
};

static CUresult async_alloc(const char *door, const struct async_call *call, CUdeviceptr *dptr,
			    size_t bytesize, CUmemoryPool pool, CUstream stream)
{
#define CALL() (call->alloc ? call->alloc(dptr, bytesize, stream) \
			    : call->from_pool(dptr, bytesize, pool, stream))
	CUcontext ctx;
	int dev;
	if (!dptr || cumemcap_device_current(&ctx, &dev) != CUDA_SUCCESS)
		return CALL();
	if (call->alloc) {
		if (!real_cuDeviceGetMemPool || real_cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS)
			pool = NULL;
	} else {
		dev = cumemcap_pool_device(pool, dev);
	}

	uint64_t estimate = cumemcap_pool_estimate(bytesize);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, door, dev, CUMEMCAP_KIND_pool, estimate);
	if (r != CUDA_SUCCESS)
		return r;
	c.ctx = ctx;
	r = CALL();
	if (r != CUDA_SUCCESS || c.dev < 0 || !pool)
		return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_ASYNC, r == CUDA_SUCCESS ? *dptr : 0);

	/* Account what the pool really took instead of the estimate: it may
	 * have served the request from memory it already held. */
	uint64_t grew = cumemcap_pool_settle(pool, dev);
	cumemcap_ledger_sub(dev, CUMEMCAP_KIND_pool, estimate);
	uint64_t limit = cumemcap_ledger_limit(dev);
	if (grew > estimate && atomic_load(&cumemcap_ledger[dev].reserved) > limit) {
		call->free(*dptr, stream);
		cumemcap_note_refusal(dev, door, bytesize);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	c.bytes = 0; /* the bytes live in the pool's figure */
	c.live = bytesize;
	return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_ASYNC, *dptr);
#undef CALL
}

static CUresult async_free(PFN_cuMemFreeAsync_v11020 fn, CUdeviceptr dptr, CUstream stream)
{
	/* A pooled block freed in stream order waits like any other freed
	 * block until a synchronization proves the streams past it. */
	CUresult r;
	if (cumemcap_arena_free(dptr, &r))
		return r;
	struct cumemcap_block b;
	bool found = take_pointer(dptr, &b);
	return cumemcap_release_settle(found, &b, fn(dptr, stream));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	NEED(cuMemAllocAsync);
	const struct async_call call = { .alloc = real_cuMemAllocAsync, .free = real_cuMemFreeAsync };
	return async_alloc(__func__, &call, dptr, bytesize, NULL, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						     CUstream hStream)
{
	NEED(cuMemAllocAsync_ptsz);
	const struct async_call call = { .alloc = real_cuMemAllocAsync_ptsz,
					 .free = real_cuMemFreeAsync_ptsz };
	return async_alloc(__func__, &call, dptr, bytesize, NULL, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
							CUmemoryPool pool, CUstream hStream)
{
	NEED(cuMemAllocFromPoolAsync);
	const struct async_call call = { .from_pool = real_cuMemAllocFromPoolAsync,
					 .free = real_cuMemFreeAsync };
	return async_alloc(__func__, &call, dptr, bytesize, pool, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
							     CUmemoryPool pool, CUstream hStream)
{
	NEED(cuMemAllocFromPoolAsync_ptsz);
	const struct async_call call = { .from_pool = real_cuMemAllocFromPoolAsync_ptsz,
					 .free = real_cuMemFreeAsync_ptsz };
	return async_alloc(__func__, &call, dptr, bytesize, pool, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	NEED(cuMemFreeAsync);
	return async_free(real_cuMemFreeAsync, dptr, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	NEED(cuMemFreeAsync_ptsz);
	return async_free(real_cuMemFreeAsync_ptsz, dptr, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	NEED(cuMemPoolCreate);
	CUresult r = real_cuMemPoolCreate(pool, poolProps);
	if (r == CUDA_SUCCESS && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		cumemcap_pool_created(*pool, poolProps->location.id);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	NEED(cuMemPoolDestroy);
	CUresult r = real_cuMemPoolDestroy(pool);
	if (r == CUDA_SUCCESS)
		cumemcap_pool_destroyed(pool);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	NEED(cuMemPoolTrimTo);
	CUresult r = real_cuMemPoolTrimTo(pool, minBytesToKeep);
	int dev = cumemcap_pool_device(pool, -1);
	if (r == CUDA_SUCCESS && dev >= 0)
		cumemcap_pool_settle(pool, dev);
	return r;
}

/* ---- virtual memory management ------------------------------------------------ */

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
					    const CUmemAllocationProp *prop, unsigned long long flags)
{
	NEED(cuMemCreate);
	if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return real_cuMemCreate(handle, size, prop, flags);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, prop->location.id, CUMEMCAP_KIND_vmm, size);
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemCreate(handle, size, prop, flags);
	return cumemcap_charge_finish(&c, r, CUMEMCAP_HANDLE_VMM, r == CUDA_SUCCESS ? *handle : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	NEED(cuMemRelease);
	struct cumemcap_block b;
	bool found = cumemcap_release_take(CUMEMCAP_HANDLE_VMM, handle, &b);
	return cumemcap_release_settle(found, &b, real_cuMemRelease(handle));
}

/* ---- arrays ---------------------------------------------------------------- */

/* Arrays are opaque: estimate Width x Height x Depth x channels x element
 * size, rounded up to 512 bytes (the fake driver counts the same way). */
static uint64_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 16; /* packed, compressed or new formats: stay on the safe side */
	}
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, uint64_t channels, CUarray_format f)
{
	unsigned __int128 n = (unsigned __int128)w * (h ? h : 1) * (d ? d : 1) * channels * format_bytes(f);
	n = (n + 511) / 512 * 512;
	return n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
}

static CUresult array_finish(struct cumemcap_charge *c, CUresult r, enum cumemcap_handle_kind kind,
			     uint64_t key)
{
	return cumemcap_charge_finish(c, r, kind, r == CUDA_SUCCESS ? key : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle,
						 const CUDA_ARRAY_DESCRIPTOR *d)
{
	NEED(cuArrayCreate_v2);
	if (!pHandle || !d)
		return real_cuArrayCreate_v2(pHandle, d);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_array,
					   array_bytes(d->Width, d->Height, 1, d->NumChannels, d->Format));
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuArrayCreate_v2(pHandle, d);
	return array_finish(&c, r, CUMEMCAP_HANDLE_ARRAY, (uint64_t)(uintptr_t)*pHandle);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	NEED(cuArrayCreate);
	if (!pHandle || !d)
		return real_cuArrayCreate(pHandle, d);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_array,
					   array_bytes(d->Width, d->Height, 1, d->NumChannels, d->Format));
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuArrayCreate(pHandle, d);
	return array_finish(&c, r, CUMEMCAP_HANDLE_ARRAY, (uint64_t)(uintptr_t)*pHandle);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle,
						   const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	NEED(cuArray3DCreate_v2);
	/* Deferred-mapping arrays hold no memory until mapped. */
	if (!pHandle || !d || (d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING))
		return real_cuArray3DCreate_v2(pHandle, d);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_array,
					   array_bytes(d->Width, d->Height, d->Depth, d->NumChannels, d->Format));
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuArray3DCreate_v2(pHandle, d);
	return array_finish(&c, r, CUMEMCAP_HANDLE_ARRAY, (uint64_t)(uintptr_t)*pHandle);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray *pHandle,
						const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	NEED(cuArray3DCreate);
	if (!pHandle || !d)
		return real_cuArray3DCreate(pHandle, d);
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_array,
					   array_bytes(d->Width, d->Height, d->Depth, d->NumChannels, d->Format));
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuArray3DCreate(pHandle, d);
	return array_finish(&c, r, CUMEMCAP_HANDLE_ARRAY, (uint64_t)(uintptr_t)*pHandle);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
	NEED(cuArrayDestroy);
	struct cumemcap_block b;
	bool found = cumemcap_release_take(CUMEMCAP_HANDLE_ARRAY, (uint64_t)(uintptr_t)hArray, &b);
	return cumemcap_release_settle(found, &b, real_cuArrayDestroy(hArray));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
						       const CUDA_ARRAY3D_DESCRIPTOR *d,
						       unsigned int numMipmapLevels)
{
	NEED(cuMipmappedArrayCreate);
	if (!pHandle || !d || (d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING))
		return real_cuMipmappedArrayCreate(pHandle, d, numMipmapLevels);
	uint64_t bytes = 0, w = d->Width, h = d->Height, dep = d->Depth;
	for (unsigned int l = 0; l < numMipmapLevels && bytes != UINT64_MAX; l++) {
		uint64_t level = array_bytes(w, h, dep, d->NumChannels, d->Format);
		bytes = level > UINT64_MAX - bytes ? UINT64_MAX : bytes + level;
		w = w > 1 ? w / 2 : 1;
		h = h > 1 ? h / 2 : h;
		dep = dep > 1 ? dep / 2 : dep;
	}
	struct cumemcap_charge c;
	CUresult r = cumemcap_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_array, bytes);
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMipmappedArrayCreate(pHandle, d, numMipmapLevels);
	return array_finish(&c, r, CUMEMCAP_HANDLE_MIPMAP, (uint64_t)(uintptr_t)*pHandle);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	NEED(cuMipmappedArrayDestroy);
	struct cumemcap_block b;
	bool found = cumemcap_release_take(CUMEMCAP_HANDLE_MIPMAP,
					   (uint64_t)(uintptr_t)hMipmappedArray, &b);
	return cumemcap_release_settle(found, &b, real_cuMipmappedArrayDestroy(hMipmappedArray));
}

/* ---- what a pooled block looks like -------------------------------------------- */

/* A pooled block is described as the allocation the program got; an
 * address in a segment outside any live block is memory the program does
 * not hold (the driver says CUDA_ERROR_NOT_FOUND for freed memory). */
static CUresult block_range(CUdeviceptr dptr, CUdeviceptr *base, uint64_t *size, bool *ours)
{
	enum cumemcap_arena_where w = cumemcap_arena_lookup(dptr, base, size);
	*ours = w != CUMEMCAP_ARENA_NOT_OURS;
	return w == CUMEMCAP_ARENA_NOT_LIVE ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
							CUdeviceptr dptr)
{
	NEED(cuMemGetAddressRange_v2);
	CUdeviceptr base;
	uint64_t size;
	bool ours;
	CUresult r = block_range(dptr, &base, &size, &ours);
	if (!ours)
		return real_cuMemGetAddressRange_v2(pbase, psize, dptr);
	if (r == CUDA_SUCCESS) {
		if (pbase)
			*pbase = base;
		if (psize)
			*psize = (size_t)size;
	}
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
						     CUdeviceptr_v1 dptr)
{
	NEED(cuMemGetAddressRange);
	CUdeviceptr base;
	uint64_t size;
	bool ours;
	CUresult r = block_range(dptr, &base, &size, &ours);
	if (!ours)
		return real_cuMemGetAddressRange(pbase, psize, dptr);
	if (r == CUDA_SUCCESS && (base > UINT_MAX || size > UINT_MAX))
		r = CUDA_ERROR_INVALID_VALUE;
	if (r == CUDA_SUCCESS) {
		if (pbase)
			*pbase = (CUdeviceptr_v1)base;
		if (psize)
			*psize = (unsigned int)size;
	}
	return r;
}

/* Put a block's range into the range attributes the driver wrote. */
static CUresult fix_range_attr(CUpointer_attribute attr, void *data, CUdeviceptr dptr)
{
	if (!data || (attr != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && attr != CU_POINTER_ATTRIBUTE_RANGE_SIZE))
		return CUDA_SUCCESS;
	CUdeviceptr base;
	uint64_t size;
	bool ours;
	CUresult r = block_range(dptr, &base, &size, &ours);
	if (!ours)
		return CUDA_SUCCESS;
	if (r != CUDA_SUCCESS)
		base = size = 0;
	if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)
		*(CUdeviceptr *)data = base;
	else
		*(size_t *)data = (size_t)size;
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
						      CUdeviceptr ptr)
{
	NEED(cuPointerGetAttribute);
	CUresult r = real_cuPointerGetAttribute(data, attribute, ptr);
	if (r != CUDA_SUCCESS)
		return r;
	/* Freed memory inside a segment: the driver's answer for freed
	 * memory, not the segment's range. */
	return fix_range_attr(attribute, data, ptr) == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
						       CUpointer_attribute *attributes, void **data,
						       CUdeviceptr ptr)
{
	NEED(cuPointerGetAttributes);
	CUresult r = real_cuPointerGetAttributes(numAttributes, attributes, data, ptr);
	if (r != CUDA_SUCCESS || !attributes || !data)
		return r;
	for (unsigned int i = 0; i < numAttributes; i++)
		fix_range_attr(attributes[i], data[i], ptr); /* freed: range 0, 0 */
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	NEED(cuIpcGetMemHandle);
	CUdeviceptr base;
	uint64_t size;
	switch (cumemcap_arena_lookup(dptr, &base, &size)) {
	case CUMEMCAP_ARENA_NOT_LIVE:
		return CUDA_ERROR_INVALID_VALUE;
	case CUMEMCAP_ARENA_PACKED:
		/* A handle names a whole driver allocation: for a packed block
		 * it would open the segment, not the block. */
		if (cumemcap_arena_warn_ipc())
			cumemcap_msg("cuIpcGetMemHandle on a block that shares its segment with others "
				     "is not supported (CUDA_ERROR_NOT_SUPPORTED); set CUMEMCAP_POOL=nopack "
				     "(every allocation its own segment) or CUMEMCAP_POOL=off");
		return CUDA_ERROR_NOT_SUPPORTED;
	case CUMEMCAP_ARENA_WHOLE: /* the block is its segment: the driver's handle is right */
	case CUMEMCAP_ARENA_NOT_OURS:
		break;
	}
	return real_cuIpcGetMemHandle(pHandle, dptr);
}

/* ---- contexts ---------------------------------------------------------------- */

CUMEMCAP_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
	NEED(cuCtxDestroy_v2);
	CUresult r = real_cuCtxDestroy_v2(ctx);
	if (r == CUDA_SUCCESS)
		cumemcap_forget_ctx(ctx);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
	NEED(cuCtxDestroy);
	CUresult r = real_cuCtxDestroy(ctx);
	if (r == CUDA_SUCCESS)
		cumemcap_forget_ctx(ctx);
	return r;
}

/* The primary context of `dev` if it is active (a reset frees its memory). */
static CUcontext active_primary(CUdevice dev)
{
	unsigned int flags;
	int active = 0;
	CUcontext ctx = NULL;
	if (!real_cuDevicePrimaryCtxGetState || !real_cuDevicePrimaryCtxRetain ||
	    !real_cuDevicePrimaryCtxRelease_v2 ||
	    real_cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active)
		return NULL;
	if (real_cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
		return NULL;
	real_cuDevicePrimaryCtxRelease_v2(dev);
	return ctx;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	NEED(cuDevicePrimaryCtxReset_v2);
	CUcontext ctx = active_primary(dev);
	CUresult r = real_cuDevicePrimaryCtxReset_v2(dev);
	if (r == CUDA_SUCCESS)
		cumemcap_forget_ctx(ctx);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
	NEED(cuDevicePrimaryCtxReset);
	CUcontext ctx = active_primary(dev);
	CUresult r = real_cuDevicePrimaryCtxReset(dev);
	if (r == CUDA_SUCCESS)
		cumemcap_forget_ctx(ctx);
	return r;
}
