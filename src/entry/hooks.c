/* hooks: the memory entry points cumemcap defines (link-time entry_point), but
 * for the arrays (hooks-array.c), stream captures (hooks-capture.c),
 * context deaths (hooks-ctx.c), graphs (hooks-graph.c) and virtual memory
 * management (hooks-vmm.c).
 *
 * Every exported function here has the driver's exact name and prototype
 * (checked against cudaTypedefs.h in table.c) and is thin: past NEED and
 * SECTION (hooks.h), one line that calls its family's static helper with
 * the twin's real entry point (legacy, _v2, _ptsz twins share the helper,
 * so what one twin checks, all do). The helper asks the account layer
 * for a charge, calls the real driver, and settles. A legacy twin's
 * 32-bit types are handled by a *_v1 adapter that calls the legacy entry
 * point in the _v2 prototype. The driver's return code reaches the
 * program unchanged, except a refusal at the limit, which is
 * CUDA_ERROR_OUT_OF_MEMORY. A NULL out-parameter is passed on to the
 * driver as NULL, whose answer the program gets.
 *
 * Thread safety: no state here; see account.h. */
#include "account/account.h"
#include "arena/arena.h"
#include "state/capture.h"
#include "state/device.h"
#include "group/group.h"
#include "driver/driver.h"
#include "platform/export.h"
#include "entry/hooks.h"
#include "platform/msg.h"

#include <limits.h>


static void cancel(struct cumemcap_charge *c)
{
	cumemcap_account_charge_finish(c, CUDA_ERROR_UNKNOWN, 0, 0);
}

/* ---- widths ---------------------------------------------------------------- */

/* A byte count or device pointer the program gets back, in the width its
 * entry point has: size_t / CUdeviceptr for the _v2 twins, the legacy
 * 32-bit unsigned int / CUdeviceptr_v1 for the others. Each hook family
 * below works in 64 bits and calls the real entry point in the _v2
 * prototype; a legacy twin passes a small adapter (a *_v1 function) that
 * calls the legacy entry point in that prototype. */
struct out_param {
	void *p; /* NULL: the program passed NULL */
	bool narrow;
};
#define WIDE(ptr) ((struct out_param){ (ptr), false })
#define NARROW(ptr) ((struct out_param){ (ptr), true })

static unsigned int saturate_uint(uint64_t v)
{
	return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

/* A capacity figure: a legacy one saturates. */
static void put_saturated(struct out_param o, uint64_t v)
{
	if (o.narrow)
		*(unsigned int *)o.p = saturate_uint(v);
	else
		*(uint64_t *)o.p = v; /* size_t and CUdeviceptr are 64-bit */
}

/* An address or a size that must be exact: false when a legacy one cannot
 * hold it. */
static bool fits(struct out_param o, uint64_t v)
{
	return !o.narrow || v <= UINT_MAX;
}

static void put_exact(struct out_param o, uint64_t v)
{
	if (!o.p)
		return;
	if (o.narrow)
		*(unsigned int *)o.p = (unsigned int)v;
	else
		*(uint64_t *)o.p = v;
}

_Static_assert(sizeof(size_t) == sizeof(uint64_t) && sizeof(CUdeviceptr) == sizeof(uint64_t),
	       "a wide out-parameter is 64-bit");
_Static_assert(sizeof(CUdeviceptr_v1) == sizeof(unsigned int), "a narrow out-parameter is 32-bit");

/* The legacy entry points in the _v2 prototypes. Arguments come from the
 * legacy hook, so narrowing them back loses nothing; an out-parameter is
 * NULL where the program's was, and is written back only on success.
 * Each runs behind its hook's NEED, which found the legacy entry point,
 * except mem_free_v1 (also the legacy pitch twin's undo), which answers
 * CUDA_ERROR_NOT_SUPPORTED when the driver lacks cuMemFree. */
static CUresult CUDAAPI mem_get_info_v1(size_t *free, size_t *total)
{
	unsigned int f = 0, t = 0;
	CUresult r = real_cuMemGetInfo(free ? &f : NULL, total ? &t : NULL);
	if (r == CUDA_SUCCESS) {
		if (free)
			*free = f;
		if (total)
			*total = t;
	}
	return r;
}

static CUresult CUDAAPI device_total_mem_v1(size_t *bytes, CUdevice dev)
{
	unsigned int b = 0;
	CUresult r = real_cuDeviceTotalMem(bytes ? &b : NULL, dev);
	if (r == CUDA_SUCCESS && bytes)
		*bytes = b;
	return r;
}

static CUresult CUDAAPI mem_alloc_v1(CUdeviceptr *dptr, size_t bytesize)
{
	CUdeviceptr_v1 p = 0;
	CUresult r = real_cuMemAlloc(dptr ? &p : NULL, (unsigned int)bytesize);
	if (r == CUDA_SUCCESS && dptr)
		*dptr = p;
	return r;
}

static CUresult CUDAAPI mem_alloc_pitch_v1(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
					   size_t Height, unsigned int ElementSizeBytes)
{
	CUdeviceptr_v1 p = 0;
	unsigned int pitch = 0;
	CUresult r = real_cuMemAllocPitch(dptr ? &p : NULL, pPitch ? &pitch : NULL,
					  (unsigned int)WidthInBytes, (unsigned int)Height, ElementSizeBytes);
	if (r == CUDA_SUCCESS) {
		if (dptr)
			*dptr = p;
		if (pPitch)
			*pPitch = pitch;
	}
	return r;
}

static CUresult CUDAAPI mem_free_v1(CUdeviceptr dptr)
{
	return real_cuMemFree ? real_cuMemFree((CUdeviceptr_v1)dptr) : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult CUDAAPI mem_get_address_range_v1(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	CUdeviceptr_v1 b = 0;
	unsigned int n = 0;
	CUresult r = real_cuMemGetAddressRange(pbase ? &b : NULL, psize ? &n : NULL, (CUdeviceptr_v1)dptr);
	if (r == CUDA_SUCCESS) {
		if (pbase)
			*pbase = b;
		if (psize)
			*psize = n;
	}
	return r;
}

/* ---- capacity ------------------------------------------------------------ */

/* Clamp the driver's figures for `dev` to its limit. What the arenas
 * cache is free for the program: it counts as free whether or not there
 * is a limit. Under a limit, pools that trimmed at a synchronization the
 * shim did not see are read again first, so their memory is in the
 * headroom too (nothing to read, one load, when no pool bytes are counted
 * on dev). Without one the answer is the driver's figures plus `pooled`,
 * which no pool's figure changes: nothing is read (the figures of a pool
 * whose growth is unread stay unread). The ledger's figures come in one inline
 * read (cumemcap_ledger_capacity: the limit, the headroom, and `pooled`,
 * what the arenas cache). */
static inline __attribute__((always_inline)) void clamp_info(const struct cumemcap_ledger_capacity *c,
							     uint64_t *free_bytes, uint64_t *total_bytes)
{
	uint64_t f = *free_bytes, t = *total_bytes;
	if (c->limit != CUMEMCAP_NO_LIMIT) {
		t = c->limit;
		if (f > c->headroom)
			f = c->headroom;
	}
	f = f > UINT64_MAX - c->pooled ? UINT64_MAX : f + c->pooled;
	*free_bytes = f > t ? t : f;
	*total_bytes = t;
}

/* A group member: the group's budget and room join the process's own, so
 * that the total is the least of the limits and the headroom the least of
 * the rooms (the card's figures are clamped by both in clamp_info). */
static __attribute__((noinline)) void add_group(int dev, struct cumemcap_ledger_capacity *c)
{
	uint64_t budget, room;
	if (!cumemcap_group_capacity(dev, &budget, &room))
		return;
	if (budget < c->limit)
		c->limit = budget;
	if (room < c->headroom)
		c->headroom = room;
}

static void process_capacity(int dev, struct cumemcap_ledger_capacity *c)
{
	cumemcap_ledger_capacity(dev, c);
	if (cumemcap_group_member())
		add_group(dev, c);
}

/* With pools to read again first. */
static __attribute__((noinline)) void virtualize_info_pools(int dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
	cumemcap_account_pool_refresh_now(dev);
	struct cumemcap_ledger_capacity c;
	process_capacity(dev, &c);
	clamp_info(&c, free_bytes, total_bytes);
}

static inline __attribute__((always_inline)) void virtualize_info(int dev, uint64_t *free_bytes,
								  uint64_t *total_bytes)
{
	struct cumemcap_ledger_capacity c;
	process_capacity(dev, &c);
	if (__builtin_expect(c.limit != CUMEMCAP_NO_LIMIT && cumemcap_ledger_holds(dev, CUMEMCAP_KIND_pool), 0)) {
		virtualize_info_pools(dev, free_bytes, total_bytes);
		return;
	}
	clamp_info(&c, free_bytes, total_bytes);
}

/* cuMemGetInfo for the current context: the driver's figures, capped. The
 * device is found first (with one GPU, it is that one: cumemcap_device_only);
 * when it cannot be (no current context, or it died under another
 * thread), the answer is the error the driver gives for a missing
 * context, never the driver's uncapped figures. It reads
 * device-level figures only, so it does not hold the death lock
 * (death-lock.h).
 * real_cuMemGetInfo_v2 is there (the caller checked). */
static inline __attribute__((always_inline)) CUresult mem_info(uint64_t *f, uint64_t *t)
{
	CUcontext ctx;
	size_t f64, t64;
	/* With one GPU, the driver's answer tells that a context is current,
	 * and it is on that GPU: no cuCtxGetCurrent. */
	int dev = cumemcap_device_only();
	CUresult found = __builtin_expect(dev == 0, 1) ? CUDA_SUCCESS : cumemcap_device_current(&ctx, &dev);
	CUresult r = real_cuMemGetInfo_v2(&f64, &t64);
	if (r != CUDA_SUCCESS)
		return r;
	if (found != CUDA_SUCCESS)
		return found == CUDA_ERROR_INVALID_DEVICE ? found : CUDA_ERROR_INVALID_CONTEXT;
	*f = f64;
	*t = t64;
	virtualize_info(dev, f, t);
	return CUDA_SUCCESS;
}

/* cuMemGetInfo with a NULL out-parameter, or in a driver without
 * cuMemGetInfo_v2 (the shim cannot read the figures in 64 bits): `fn`
 * answers, uncapped. */
static __attribute__((noinline)) CUresult
get_info_plain(PFN_cuMemGetInfo_v3020 fn, struct out_param free, struct out_param total)
{
	size_t f64 = 0, t64 = 0;
	CUresult r = fn(free.p ? &f64 : NULL, total.p ? &t64 : NULL);
	if (r == CUDA_SUCCESS) {
		put_exact(free, f64);
		put_exact(total, t64);
	}
	return r;
}

/* cuMemGetInfo, either width: the driver's figures for the current
 * context's device, capped (mem_info). Inline in each twin, so that the
 * _v2 one stores its figures whole (put_saturated on a constant width). */
static inline __attribute__((always_inline)) CUresult
get_info(PFN_cuMemGetInfo_v3020 fn, struct out_param free, struct out_param total)
{
	if (__builtin_expect(!free.p || !total.p || !real_cuMemGetInfo_v2, 0))
		return get_info_plain(fn, free, total);
	uint64_t f, t;
	CUresult r = mem_info(&f, &t);
	if (r == CUDA_SUCCESS) {
		put_saturated(free, f);
		put_saturated(total, t);
	}
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
	NEED(cuMemGetInfo_v2);
	return get_info(real_cuMemGetInfo_v2, WIDE(free), WIDE(total));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	NEED(cuMemGetInfo);
	return get_info(mem_get_info_v1, NARROW(free), NARROW(total));
}

/* A device's capacity: the driver's (cuDeviceTotalMem_v2), capped at its
 * limit and at its group's budget. A device the shim cannot describe gets
 * the driver's answer for a device that is not there, never its real
 * capacity uncapped. */
static CUresult device_total(CUdevice dev, uint64_t *total)
{
	size_t t64;
	CUresult r = real_cuDeviceTotalMem_v2(&t64, dev);
	if (r != CUDA_SUCCESS)
		return r;
	if (!cumemcap_device_ensure(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	uint64_t limit = cumemcap_ledger_limit(dev);
	*total = limit != CUMEMCAP_NO_LIMIT ? limit : t64;
	uint64_t budget, room;
	if (cumemcap_group_member() && cumemcap_group_capacity(dev, &budget, &room) && budget < *total)
		*total = budget;
	return CUDA_SUCCESS;
}

/* cuDeviceTotalMem, either width: the device's capacity, capped
 * (device_total). `fn` answers a NULL out-parameter, and every call when
 * there is no cuDeviceTotalMem_v2. */
static CUresult total_mem(PFN_cuDeviceTotalMem_v3020 fn, struct out_param bytes, CUdevice dev)
{
	if (!bytes.p || !real_cuDeviceTotalMem_v2) {
		size_t b64 = 0;
		CUresult r = fn(bytes.p ? &b64 : NULL, dev);
		if (r == CUDA_SUCCESS)
			put_exact(bytes, b64);
		return r;
	}
	uint64_t t;
	CUresult r = device_total(dev, &t);
	if (r == CUDA_SUCCESS)
		put_saturated(bytes, t);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	NEED(cuDeviceTotalMem_v2);
	return total_mem(real_cuDeviceTotalMem_v2, WIDE(bytes), dev);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	NEED(cuDeviceTotalMem);
	return total_mem(device_total_mem_v1, NARROW(bytes), dev);
}

/* ---- linear memory ------------------------------------------------------- */

/* cuMemAlloc, either width. Only the 64-bit twin is served from the
 * arenas: their segments do not lie in the legacy 32-bit address space. */
static CUresult alloc_linear(const char *entry_point, PFN_cuMemAlloc_v3020 fn,
			     struct out_param dptr, size_t bytesize)
{
	CUdeviceptr p = 0;
	if (!dptr.p)
		return fn(NULL, bytesize);
	CUresult r;
	if (!dptr.narrow && cumemcap_account_alloc_pooled(dptr.p, bytesize, entry_point, &r))
		return r;
	struct cumemcap_charge c;
	r = cumemcap_account_charge_begin(&c, entry_point, -1, CUMEMCAP_KIND_linear, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = fn(&p, bytesize);
	if (r == CUDA_SUCCESS)
		put_exact(dptr, p);
	return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? p : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	NEED(cuMemAlloc_v2);
	HOLD_DEATH_LOCK();
	return alloc_linear(__func__, real_cuMemAlloc_v2, WIDE(dptr), bytesize);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	NEED(cuMemAlloc);
	HOLD_DEATH_LOCK();
	return alloc_linear(__func__, mem_alloc_v1, NARROW(dptr), bytesize);
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

/* cuMemAllocPitch, either width. When the pitch the driver chose takes
 * the allocation past the limit, it is undone by `undo`, the twin's own
 * free (none when the driver lacks it: the block then stays with the
 * driver, unrecorded), and the program is refused. */
static CUresult alloc_pitch(const char *entry_point, PFN_cuMemAllocPitch_v3020 fn,
			    PFN_cuMemFree_v3020 undo, struct out_param dptr,
			    struct out_param pPitch, size_t width, size_t height, unsigned int elem)
{
	CUdeviceptr p = 0;
	size_t pitch = 0;
	if (!dptr.p || !pPitch.p) {
		CUresult r = fn(dptr.p ? &p : NULL, pPitch.p ? &pitch : NULL, width, height, elem);
		if (r == CUDA_SUCCESS) {
			put_exact(dptr, p);
			put_exact(pPitch, pitch);
		}
		return r;
	}
	struct cumemcap_charge c;
	CUresult r = cumemcap_account_charge_begin(&c, entry_point, -1, CUMEMCAP_KIND_linear,
						   pitch_estimate(width, height));
	if (r != CUDA_SUCCESS)
		return r;
	r = fn(&p, &pitch, width, height, elem);
	if (r == CUDA_SUCCESS && !cumemcap_account_charge_adjust(&c, (uint64_t)pitch * height)) {
		if (undo)
			undo(p);
		cancel(&c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r == CUDA_SUCCESS) {
		put_exact(dptr, p);
		put_exact(pPitch, pitch);
	}
	return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? p : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
						   size_t WidthInBytes, size_t Height,
						   unsigned int ElementSizeBytes)
{
	NEED(cuMemAllocPitch_v2);
	HOLD_DEATH_LOCK();
	return alloc_pitch(__func__, real_cuMemAllocPitch_v2, real_cuMemFree_v2, WIDE(dptr), WIDE(pPitch),
			   WidthInBytes, Height, ElementSizeBytes);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
						unsigned int WidthInBytes, unsigned int Height,
						unsigned int ElementSizeBytes)
{
	NEED(cuMemAllocPitch);
	HOLD_DEATH_LOCK();
	return alloc_pitch(__func__, mem_alloc_pitch_v1, real_cuMemFree ? mem_free_v1 : NULL, NARROW(dptr),
			   NARROW(pPitch), WidthInBytes, Height, ElementSizeBytes);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
						  unsigned int flags)
{
	NEED(cuMemAllocManaged);
	HOLD_DEATH_LOCK();
	if (!dptr)
		return real_cuMemAllocManaged(dptr, bytesize, flags);
	struct cumemcap_charge c;
	CUresult r = cumemcap_account_charge_begin(&c, __func__, -1, CUMEMCAP_KIND_managed, bytesize);
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemAllocManaged(dptr, bytesize, flags);
	return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_PTR, r == CUDA_SUCCESS ? *dptr : 0);
}

/* A device pointer from any allocation call: linear, managed, or
 * stream-ordered (cuMemFree and cuMemFreeAsync each may free either; the
 * record map keeps both kinds of pointer in one namespace: one lookup). */
static bool take_pointer(uint64_t ptr, struct cumemcap_block *b)
{
	return cumemcap_account_release_take(CUMEMCAP_HANDLE_PTR, ptr, b);
}

/* cuMemFree, either width. */
static CUresult free_pointer(PFN_cuMemFree_v3020 fn, CUdeviceptr dptr)
{
	CUresult r;
	if (cumemcap_account_free_pooled(dptr, &r))
		return r;
	struct cumemcap_block b;
	bool found = take_pointer(dptr, &b);
	return cumemcap_account_release_settle(found, &b, fn(dptr));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	NEED(cuMemFree_v2);
	HOLD_DEATH_LOCK();
	return free_pointer(real_cuMemFree_v2, dptr);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
	NEED(cuMemFree);
	HOLD_DEATH_LOCK();
	return free_pointer(mem_free_v1, dptr);
}

/* ---- stream-ordered allocation --------------------------------------------- */

/* cuMemAllocAsync and cuMemAllocFromPoolAsync, either stream variant:
 * `alloc` or `from_pool` is the twin's real entry point, `undo` its
 * matching free, ptsz whether it is the per-thread-stream one. The
 * accounting is account.h's (cumemcap_pool_alloc_*). */
static CUresult async_alloc(const char *entry_point, PFN_cuMemAllocAsync_v11020 alloc,
			    PFN_cuMemAllocFromPoolAsync_v11020 from_pool,
			    PFN_cuMemFreeAsync_v11020 undo, bool ptsz, CUdeviceptr *dptr,
			    size_t bytesize, CUmemoryPool pool, CUstream stream)
{
#define CALL() (alloc ? alloc(dptr, bytesize, stream) : from_pool(dptr, bytesize, pool, stream))
	CUcontext ctx;
	int dev;
	/* The allocation belongs to the stream's context. The stream this
	 * thread used last is known without a driver call; any other stream,
	 * and a default stream, needs the current context (which also tells
	 * that the driver can be called at all). */
	if (!dptr)
		return CALL();
	bool known = cumemcap_device_of_stream_known(stream, &ctx, &dev);
	if (!known && cumemcap_device_current(&ctx, &dev) != CUDA_SUCCESS)
		return CALL();
	/* Into a capturing stream, the call adds an allocation node to the
	 * graph and takes nothing now: graph memory is charged when the
	 * graph is uploaded or launched (graph.h). */
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
	/* Most pointers freed in stream order were allocated in stream order:
	 * the record map first (the arenas keep no record there, so a pointer
	 * is in one or the other), then the arenas, whose lookup takes an
	 * arena's lock. A pooled block freed in stream order waits like any
	 * other freed block until a synchronization proves the streams past
	 * it. */
	struct cumemcap_block b;
	bool found = take_pointer(dptr, &b);
	CUresult r;
	if (!found && cumemcap_account_free_pooled(dptr, &r))
		return r;
	return cumemcap_account_release_settle(found, &b, fn(dptr, stream));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	NEED(cuMemAllocAsync);
	HOLD_DEATH_LOCK();
	return async_alloc(__func__, real_cuMemAllocAsync, NULL, real_cuMemFreeAsync, false, dptr, bytesize,
			   NULL, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						     CUstream hStream)
{
	NEED(cuMemAllocAsync_ptsz);
	HOLD_DEATH_LOCK();
	return async_alloc(__func__, real_cuMemAllocAsync_ptsz, NULL, real_cuMemFreeAsync_ptsz, true, dptr,
			   bytesize, NULL, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
							CUmemoryPool pool, CUstream hStream)
{
	NEED(cuMemAllocFromPoolAsync);
	HOLD_DEATH_LOCK();
	return async_alloc(__func__, NULL, real_cuMemAllocFromPoolAsync, real_cuMemFreeAsync, false, dptr,
			   bytesize, pool, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
							     CUmemoryPool pool, CUstream hStream)
{
	NEED(cuMemAllocFromPoolAsync_ptsz);
	HOLD_DEATH_LOCK();
	return async_alloc(__func__, NULL, real_cuMemAllocFromPoolAsync_ptsz, real_cuMemFreeAsync_ptsz, true,
			   dptr, bytesize, pool, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	NEED(cuMemFreeAsync);
	HOLD_DEATH_LOCK();
	return async_free(real_cuMemFreeAsync, dptr, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	NEED(cuMemFreeAsync_ptsz);
	HOLD_DEATH_LOCK();
	return async_free(real_cuMemFreeAsync_ptsz, dptr, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	NEED(cuMemPoolCreate);
	HOLD_DEATH_LOCK();
	CUresult r = real_cuMemPoolCreate(pool, poolProps);
	if (r == CUDA_SUCCESS && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
		cumemcap_account_pool_created(*pool, poolProps->location.id);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
	NEED(cuMemPoolDestroy);
	HOLD_DEATH_LOCK();
	cumemcap_account_pool_read(pool); /* unread growth: counted before it goes */
	FORWARD_NOTING(real_cuMemPoolDestroy(pool), cumemcap_account_pool_destroyed(pool));
}

/* A device's current pool, which cuMemAllocAsync takes from, changes
 * (account.h caches it). */
CUMEMCAP_EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	NEED(cuDeviceSetMemPool);
	FORWARD_NOTING(real_cuDeviceSetMemPool(dev, pool), cumemcap_account_pools_changed());
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
						CUmemoryPool pool)
{
	NEED(cuMemSetMemPool);
	FORWARD_NOTING(real_cuMemSetMemPool(location, type, pool), cumemcap_account_pools_changed());
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	NEED(cuMemPoolTrimTo);
	HOLD_DEATH_LOCK();
	cumemcap_account_pool_read(pool);
	FORWARD_NOTING(real_cuMemPoolTrimTo(pool, minBytesToKeep), cumemcap_account_pool_trimmed(pool));
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

/* cuMemGetAddressRange, either width: a pooled block's own range, the
 * driver's answer for anything else. A legacy twin that cannot hold the
 * range gets CUDA_ERROR_INVALID_VALUE. */
static CUresult address_range(PFN_cuMemGetAddressRange_v3020 fn, struct out_param pbase,
			      struct out_param psize, CUdeviceptr dptr)
{
	CUdeviceptr base;
	uint64_t size;
	bool ours;
	CUresult r = block_range(dptr, &base, &size, &ours);
	if (!ours) {
		CUdeviceptr b = 0;
		size_t n = 0;
		r = fn(pbase.p ? &b : NULL, psize.p ? &n : NULL, dptr);
		base = b;
		size = n;
	} else if (r == CUDA_SUCCESS && (!fits(pbase, base) || !fits(psize, size))) {
		r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS) {
		put_exact(pbase, base);
		put_exact(psize, size);
	}
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
							CUdeviceptr dptr)
{
	NEED(cuMemGetAddressRange_v2);
	HOLD_DEATH_LOCK();
	return address_range(real_cuMemGetAddressRange_v2, WIDE(pbase), WIDE(psize), dptr);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
						     CUdeviceptr_v1 dptr)
{
	NEED(cuMemGetAddressRange);
	HOLD_DEATH_LOCK();
	return address_range(mem_get_address_range_v1, NARROW(pbase), NARROW(psize), dptr);
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
	HOLD_DEATH_LOCK();
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
