/* hooks: the memory entry points (linear, pitched, managed, stream-ordered,
 * pools, capacity, address queries); the other hooks-*.c hold the rest.
 * Twins that differ only in types (legacy 32-bit, _v2) are one macro. The
 * real entry point writes the shim's locals (NULL where the program's was);
 * the program's out-parameters are written only on success.
 *
 * Thread safety: no state here; see account.h. */
#include "arena/arena.h"
#include "state/capture.h"
#include "state/device.h"
#include "group/group.h"
#include "entry/hooks.h"
#include "platform/msg.h"

/* A capacity figure in the width T: a legacy one saturates. */
#define FIT(T, v) ((v) > (T)-1 ? (T)-1 : (T)(v))

/* The limit and headroom of GPU `dev`, within a group's budget and room. */
static void process_capacity(int dev, struct cumemcap_ledger_capacity *c)
{
	uint64_t budget, room;
	cumemcap_ledger_capacity(dev, c);
	if (cumemcap_group_member() && cumemcap_group_capacity(dev, &budget, &room)) {
		if (budget < c->limit)
			c->limit = budget;
		if (room < c->headroom)
			c->headroom = room;
	}
}

/* Out of line, so that process_capacity stays inline on the common path:
 * pools may have trimmed at a synchronization the shim did not see. */
static __attribute__((noinline)) void pools_read_again(int dev, struct cumemcap_ledger_capacity *c)
{
	cumemcap_account_pool_refresh_now(dev);
	process_capacity(dev, c);
}

/* The driver's figures for the current context's device, capped at the
 * limit and headroom, the arenas' cache counted free. No device: the error
 * for a missing context, never uncapped figures. Device-level: no lock. */
static inline __attribute__((always_inline)) CUresult mem_info(uint64_t *free_bytes,
							       uint64_t *total_bytes)
{
	CUcontext ctx;
	size_t f, t;
	/* One GPU: the driver's answer tells that a context is current there. */
	int dev = cumemcap_device_only();
	CUresult found = __builtin_expect(dev == 0, 1) ? CUDA_SUCCESS : cumemcap_device_current(&ctx, &dev);
	CUresult r = real_cuMemGetInfo_v2(&f, &t);
	if (r != CUDA_SUCCESS)
		return r;
	if (found != CUDA_SUCCESS)
		return found == CUDA_ERROR_INVALID_DEVICE ? found : CUDA_ERROR_INVALID_CONTEXT;
	struct cumemcap_ledger_capacity c;
	process_capacity(dev, &c);
	if (__builtin_expect(c.limit != CUMEMCAP_NO_LIMIT && cumemcap_ledger_holds(dev, CUMEMCAP_KIND_pool), 0))
		pools_read_again(dev, &c);
	if (c.limit != CUMEMCAP_NO_LIMIT) {
		t = c.limit;
		if (f > c.headroom)
			f = c.headroom;
	}
	uint64_t with_pooled = f > UINT64_MAX - c.pooled ? UINT64_MAX : f + c.pooled;
	*free_bytes = with_pooled > t ? t : with_pooled;
	*total_bytes = t;
	return CUDA_SUCCESS;
}

/* cuMemGetInfo in the width T. A NULL out-parameter, or no cuMemGetInfo_v2,
 * gets the twin's own answer, uncapped. */
#define GET_INFO(name, T)                                                                          \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(T *free, T *total)                                   \
	{                                                                                          \
		NEED(name);                                                                        \
		uint64_t f = 0, t = 0;                                                             \
		CUresult r;                                                                        \
		if (!free || !total || !real_cuMemGetInfo_v2) {                                    \
			T f_ = 0, t_ = 0;                                                          \
			r = real_##name(free ? &f_ : NULL, total ? &t_ : NULL);                    \
			f = f_;                                                                    \
			t = t_;                                                                    \
		} else {                                                                           \
			r = mem_info(&f, &t);                                                      \
		}                                                                                  \
		if (r == CUDA_SUCCESS && free)                                                     \
			*free = FIT(T, f);                                                         \
		if (r == CUDA_SUCCESS && total)                                                    \
			*total = FIT(T, t);                                                        \
		return r;                                                                          \
	}
GET_INFO(cuMemGetInfo_v2, size_t)
GET_INFO(cuMemGetInfo, unsigned int)

static CUresult device_total(CUdevice dev, uint64_t *total)
{
	size_t t64;
	CUresult r = real_cuDeviceTotalMem_v2(&t64, dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!cumemcap_device_ensure(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	uint64_t limit = cumemcap_ledger_get(dev, CUMEMCAP_FIG_limit);
	*total = limit != CUMEMCAP_NO_LIMIT ? limit : t64;
	uint64_t budget, room;
	if (cumemcap_group_member() && cumemcap_group_capacity(dev, &budget, &room) && budget < *total)
		*total = budget;
	return CUDA_SUCCESS;
}

/* cuDeviceTotalMem in the width T, capped at the limit and the group's
 * budget. A NULL out-parameter, or no cuDeviceTotalMem_v2, gets the twin's. */
#define TOTAL_MEM(name, T)                                                                         \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(T *bytes, CUdevice dev)                              \
	{                                                                                          \
		NEED(name);                                                                        \
		uint64_t total;                                                                    \
		CUresult r;                                                                        \
		if (!bytes || !real_cuDeviceTotalMem_v2) {                                         \
			T b = 0;                                                                   \
			r = real_##name(bytes ? &b : NULL, dev);                                   \
			total = b;                                                                 \
		} else {                                                                           \
			r = device_total(dev, &total);                                             \
		}                                                                                  \
		if (r == CUDA_SUCCESS && bytes)                                                    \
			*bytes = FIT(T, total);                                                    \
		return r;                                                                          \
	}
TOTAL_MEM(cuDeviceTotalMem_v2, size_t)
TOTAL_MEM(cuDeviceTotalMem, unsigned int)

/* cuMemAlloc in the widths T and S. Only the _v2 twin tries the arenas
 * (`pooled`): segments do not lie in the 32-bit address space. */
#define MEM_ALLOC(name, T, S, pooled)                                                              \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(T *dptr, S bytesize)                                 \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		if (!dptr)                                                                         \
			return real_##name(NULL, bytesize);                                        \
		CUresult r;                                                                        \
		if (pooled)                                                                        \
			return r;                                                                  \
		CHARGE(c, -1, CUMEMCAP_KIND_linear, bytesize);                                     \
		T p = 0;                                                                           \
		r = real_##name(&p, bytesize);                                                     \
		if (r == CUDA_SUCCESS)                                                             \
			*dptr = p;                                                                 \
		return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR,                  \
						      r == CUDA_SUCCESS ? p : 0);                  \
	}
MEM_ALLOC(cuMemAlloc_v2, CUdeviceptr, size_t, cumemcap_account_alloc_pooled(dptr, bytesize, __func__, &r))
MEM_ALLOC(cuMemAlloc, CUdeviceptr_v1, unsigned int, false)

/* Rows padded to 512 bytes; the pitch the driver chose settles it. */
static uint64_t pitch_estimate(uint64_t width, uint64_t height)
{
	uint64_t pitch = (width + 511) / 512 * 512;
	if (pitch < width || (height && pitch > UINT64_MAX / height))
		return UINT64_MAX;
	return pitch * height;
}

/* cuMemAllocPitch in the widths T and S. A pitch past the limit is undone
 * by `free_fn`, the twin's free (none: left unrecorded), and refused. */
#define MEM_ALLOC_PITCH(name, T, S, free_fn)                                                       \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(T *dptr, S *pPitch, S WidthInBytes, S Height,        \
					      unsigned int ElementSizeBytes)                       \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		T p = 0;                                                                           \
		S pitch = 0;                                                                       \
		CUresult r;                                                                        \
		if (!dptr || !pPitch) {                                                            \
			r = real_##name(dptr ? &p : NULL, pPitch ? &pitch : NULL, WidthInBytes,    \
					Height, ElementSizeBytes);                                 \
			if (r == CUDA_SUCCESS && dptr)                                             \
				*dptr = p;                                                         \
			if (r == CUDA_SUCCESS && pPitch)                                           \
				*pPitch = pitch;                                                   \
			return r;                                                                  \
		}                                                                                  \
		CHARGE(c, -1, CUMEMCAP_KIND_linear, pitch_estimate(WidthInBytes, Height));         \
		r = real_##name(&p, &pitch, WidthInBytes, Height, ElementSizeBytes);               \
		if (r == CUDA_SUCCESS &&                                                           \
		    !cumemcap_account_charge_adjust(&c, (uint64_t)pitch * Height)) {               \
			if (free_fn)                                                               \
				free_fn(p);                                                        \
			cumemcap_account_charge_finish(&c, CUDA_ERROR_UNKNOWN, 0, 0);              \
			return CUDA_ERROR_OUT_OF_MEMORY;                                           \
		}                                                                                  \
		if (r == CUDA_SUCCESS) {                                                           \
			*dptr = p;                                                                 \
			*pPitch = pitch;                                                           \
		}                                                                                  \
		return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR,                  \
						      r == CUDA_SUCCESS ? p : 0);                  \
	}
MEM_ALLOC_PITCH(cuMemAllocPitch_v2, CUdeviceptr, size_t, real_cuMemFree_v2)
MEM_ALLOC_PITCH(cuMemAllocPitch, CUdeviceptr_v1, unsigned int, real_cuMemFree)

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
						  unsigned int flags)
{
	NEED(cuMemAllocManaged);
	HOLD_DEATH_LOCK();
	if (!dptr)
		return real_cuMemAllocManaged(dptr, bytesize, flags);
	CHARGE(c, -1, CUMEMCAP_KIND_managed, bytesize);
	CUresult r = real_cuMemAllocManaged(dptr, bytesize, flags);
	return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? *dptr : 0);
}

/* cuMemFree in the width T. Linear, managed and stream-ordered pointers are
 * one namespace: cuMemFree and cuMemFreeAsync each may free either. */
#define MEM_FREE(name, T)                                                                          \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(T dptr)                                              \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		CUresult r;                                                                        \
		if (cumemcap_account_free_pooled(dptr, &r))                                        \
			return r;                                                                  \
		struct cumemcap_block b;                                                           \
		bool found = cumemcap_account_release_take(CUMEMCAP_HANDLE_PTR, dptr, &b);         \
		return cumemcap_account_release_settle(found, &b, real_##name(dptr));              \
	}
MEM_FREE(cuMemFree_v2, CUdeviceptr)
MEM_FREE(cuMemFree, CUdeviceptr_v1)

/* cuMemAllocAsync and cuMemAllocFromPoolAsync, either stream variant:
 * `alloc` or `from_pool` is the real entry point, `undo` its free. */
static CUresult async_alloc(const char *entry_point, PFN_cuMemAllocAsync_v11020 alloc,
			    PFN_cuMemAllocFromPoolAsync_v11020 from_pool,
			    PFN_cuMemFreeAsync_v11020 undo, bool ptsz, CUdeviceptr *dptr,
			    size_t bytesize, CUmemoryPool pool, CUstream stream)
{
#define CALL() (alloc ? alloc(dptr, bytesize, stream) : from_pool(dptr, bytesize, pool, stream))
	CUcontext ctx;
	int dev;
	if (!dptr)
		return CALL();
	/* The stream's context: the stream this thread used last is known; any
	 * other needs the current context (which says the driver answers). */
	bool known = cumemcap_device_of_stream_known(stream, &ctx, &dev);
	if (!known && cumemcap_device_current(&ctx, &dev) != CUDA_SUCCESS)
		return CALL();
	/* A capturing stream gets an allocation node and takes nothing now. */
	if (cumemcap_capture_stream(stream, ptsz))
		return CALL();
	if (!known)
		cumemcap_device_of_stream(stream, &ctx, &dev);
	struct cumemcap_pool_alloc a;
	CUresult r = cumemcap_account_pool_alloc_begin(&a, entry_point, ctx, dev, alloc != NULL,
						       pool, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = CALL();
	CUresult settled = cumemcap_account_pool_alloc_finish(&a, r, r == CUDA_SUCCESS ? *dptr : 0);
	if (settled != r && undo)
		undo(*dptr, stream); /* past the limit: the program is refused */
	return settled;
#undef CALL
}

static CUresult async_free(PFN_cuMemFreeAsync_v11020 fn, CUdeviceptr dptr, CUstream stream)
{
	/* The record map first, then the arenas (whose lookup takes a lock). */
	struct cumemcap_block b;
	bool found = cumemcap_account_release_take(CUMEMCAP_HANDLE_PTR, dptr, &b);
	CUresult r;
	if (!found && cumemcap_account_free_pooled(dptr, &r))
		return r;
	return cumemcap_account_release_settle(found, &b, fn(dptr, stream));
}

LOCKED_ENTRY(cuMemAllocAsync, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
	     async_alloc(__func__, real_cuMemAllocAsync, NULL, real_cuMemFreeAsync, false, dptr,
			 bytesize, NULL, hStream))
LOCKED_ENTRY(cuMemAllocAsync_ptsz, (CUdeviceptr *dptr, size_t bytesize, CUstream hStream),
	     async_alloc(__func__, real_cuMemAllocAsync_ptsz, NULL, real_cuMemFreeAsync_ptsz, true,
			 dptr, bytesize, NULL, hStream))
LOCKED_ENTRY(cuMemAllocFromPoolAsync,
	     (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
	     async_alloc(__func__, NULL, real_cuMemAllocFromPoolAsync, real_cuMemFreeAsync, false,
			 dptr, bytesize, pool, hStream))
LOCKED_ENTRY(cuMemAllocFromPoolAsync_ptsz,
	     (CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
	     async_alloc(__func__, NULL, real_cuMemAllocFromPoolAsync_ptsz, real_cuMemFreeAsync_ptsz,
			 true, dptr, bytesize, pool, hStream))
LOCKED_ENTRY(cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream),
	     async_free(real_cuMemFreeAsync, dptr, hStream))
LOCKED_ENTRY(cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream),
	     async_free(real_cuMemFreeAsync_ptsz, dptr, hStream))

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	NEED(cuMemPoolCreate);
	HOLD_DEATH_LOCK();
	CUresult r = real_cuMemPoolCreate(pool, poolProps);
	if (r == CUDA_SUCCESS && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		cumemcap_account_pool_hold(*pool, poolProps->location.id, 0);
	return r;
}

/* A pool's unread growth is read while the pool still holds it. */
LOCKED_ENTRY_AROUND(cuMemPoolDestroy, (CUmemoryPool pool), (pool),
		    cumemcap_account_pool_read(pool, false), cumemcap_account_pool_destroyed(pool))
LOCKED_ENTRY_AROUND(cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep),
		    (pool, minBytesToKeep), cumemcap_account_pool_read(pool, false),
		    cumemcap_account_pool_read(pool, true))

/* A device's current pool (account.h caches it) changed. */
LOCKED_ENTRY_AROUND(cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool), (dev, pool), (void)0,
		    cumemcap_account_pools_changed())
LOCKED_ENTRY_AROUND(cuMemSetMemPool,
		    (CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool),
		    (location, type, pool), (void)0, cumemcap_account_pools_changed())

/* A pooled block's range is the allocation the program got; an address in
 * a segment outside any live block is freed memory (CUDA_ERROR_NOT_FOUND). */
static CUresult block_range(CUdeviceptr dptr, CUdeviceptr *base, uint64_t *size, bool *ours)
{
	enum cumemcap_arena_where w = cumemcap_arena_lookup(dptr, base, size);
	*ours = w != CUMEMCAP_ARENA_NOT_OURS;
	return w == CUMEMCAP_ARENA_NOT_LIVE ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}

/* cuMemGetAddressRange in the widths T and S: a pooled block's own range
 * (CUDA_ERROR_INVALID_VALUE when it does not fit), else the driver's. */
#define ADDRESS_RANGE(name, T, S)                                                                  \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(T *pbase, S *psize, T dptr)                          \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		CUdeviceptr base;                                                                  \
		uint64_t size;                                                                     \
		bool ours;                                                                         \
		CUresult r = block_range(dptr, &base, &size, &ours);                               \
		if (!ours) {                                                                       \
			T b = 0;                                                                   \
			S n = 0;                                                                   \
			r = real_##name(pbase ? &b : NULL, psize ? &n : NULL, dptr);               \
			base = b;                                                                  \
			size = n;                                                                  \
		} else if (r == CUDA_SUCCESS && (base > (T)-1 || size > (S)-1)) {                  \
			r = CUDA_ERROR_INVALID_VALUE;                                              \
		}                                                                                  \
		if (r == CUDA_SUCCESS && pbase)                                                    \
			*pbase = (T)base;                                                          \
		if (r == CUDA_SUCCESS && psize)                                                    \
			*psize = (S)size;                                                          \
		return r;                                                                          \
	}
ADDRESS_RANGE(cuMemGetAddressRange_v2, CUdeviceptr, size_t)
ADDRESS_RANGE(cuMemGetAddressRange, CUdeviceptr_v1, unsigned int)

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
	HOLD_DEATH_LOCK();
	CUresult r = real_cuPointerGetAttribute(data, attribute, ptr);
	if (r != CUDA_SUCCESS)
		return r;
	/* Freed memory inside a segment: the answer for freed memory. */
	return fix_range_attr(attribute, data, ptr) == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
						       CUpointer_attribute *attributes, void **data,
						       CUdeviceptr ptr)
{
	NEED(cuPointerGetAttributes);
	HOLD_DEATH_LOCK();
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
	HOLD_DEATH_LOCK();
	CUdeviceptr base;
	uint64_t size;
	switch (cumemcap_arena_lookup(dptr, &base, &size)) {
	case CUMEMCAP_ARENA_NOT_LIVE:
		return CUDA_ERROR_INVALID_VALUE;
	case CUMEMCAP_ARENA_PACKED:
		/* A handle would open the whole segment, not the block. */
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
