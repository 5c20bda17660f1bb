/* fake-mem: device, managed and host allocations, copies and sets, pointer
 * queries and IPC handles.
 *
 * Device memory is host memory: a CUdeviceptr is the host address (aligned
 * to 512 bytes at least), so tests can check contents. Below 1 MiB it comes
 * from posix_memalign (no syscall per small allocation); from 1 MiB on from
 * mmap(MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE); legacy 32-bit allocations
 * from mmap(MAP_32BIT) so the address fits a CUdeviceptr_v1.
 *
 * Counting: a plain, pitched or managed allocation is charged exactly the
 * bytes it spans (bytesize; pitch * Height) to the device of the current
 * context. Host allocations are not device memory and are never counted.
 *
 * Every allocation is a range in one registry (a tsearch tree ordered by
 * address, ranges never overlap), which answers "which allocation holds this
 * address": copies and sets are range-checked against it, so an out-of-range
 * access is CUDA_ERROR_INVALID_VALUE, never a host crash.
 *
 * Thread safety: registry and counters under fake_lock; memory is obtained
 * and released outside it.
 */
#include "fake-internal.h"
#include "fake-extra.h"

#include <limits.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SMALL_LIMIT ((size_t)1 << 20)
#define PAGE ((size_t)4096)

static void *reg_root;
static uint64_t buffer_ids;

/* ---- registry ------------------------------------------------------------------ */

static int reg_cmp(const void *pa, const void *pb)
{
	const struct fake_alloc *a = pa, *b = pb;
	if (a->base + a->size <= b->base)
		return -1;
	if (b->base + b->size <= a->base)
		return 1;
	return 0; /* overlap: the same range for lookups */
}

uint64_t fake_next_buffer_id(void) { return ++buffer_ids; }

void fake_reg_insert(struct fake_alloc *a)
{
	if (!tsearch(a, &reg_root, reg_cmp))
		abort(); /* out of memory for a tree node: nothing sane to return */
}

void fake_reg_remove(struct fake_alloc *a)
{
	tdelete(a, &reg_root, reg_cmp);
}

struct fake_alloc *fake_reg_find(uintptr_t addr)
{
	struct fake_alloc key = {.base = addr, .size = 1};
	void **n = tfind(&key, &reg_root, reg_cmp);
	return n ? *n : NULL;
}

struct fake_alloc *fake_reg_find_range(uintptr_t addr, size_t size)
{
	struct fake_alloc key = {.base = addr, .size = size};
	void **n = tfind(&key, &reg_root, reg_cmp);
	return n ? *n : NULL;
}

static void release_memory(uintptr_t base, size_t map_len)
{
	if (map_len)
		munmap((void *)base, map_len);
	else
		free((void *)base);
}

struct collect { struct CUctx_st *ctx; struct fake_alloc **v; size_t n, cap; };

static void collect_ctx(const void *node, VISIT which, void *closure)
{
	struct collect *c = closure;
	struct fake_alloc *a = *(struct fake_alloc *const *)node;
	/* VMM mappings outlive contexts; graph allocations went first (fake-graph.c) */
	if ((which != postorder && which != leaf) || a->ctx != c->ctx || a->kind == FAKE_K_VMM ||
	    a->kind == FAKE_K_GRAPH)
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct fake_alloc **v = realloc(c->v, cap * sizeof *v);
		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = a;
}

void fake_mem_release_ctx(struct CUctx_st *ctx)
{
	struct collect c = {.ctx = ctx};
	twalk_r(reg_root, collect_ctx, &c);
	for (size_t i = 0; i < c.n; i++) {
		struct fake_alloc *a = c.v[i];
		fake_reg_remove(a);
		if (a->kind == FAKE_K_POOL) {
			fake_pool_free_now(a);
		} else {
			release_memory(a->base, a->map_len);
			if (a->counted)
				fake_dev_uncharge(a->dev, a->counted);
		}
		if (a->kind != FAKE_K_HOST)
			fake_cfg.dev[a->dev].live--;
		free(a);
	}
	free(c.v);
}

/* ---- allocation ------------------------------------------------------------------ */

static void *get_memory(size_t size, bool low32, size_t *map_len)
{
	if (!low32 && size < SMALL_LIMIT) {
		void *p = NULL;
		*map_len = 0;
		return posix_memalign(&p, FAKE_ALIGN, size) == 0 ? p : NULL;
	}
	if (size > SIZE_MAX - PAGE)
		return NULL;
	*map_len = fake_round_up(size, PAGE);
	return fake_map(*map_len, low32);
}

/* Allocate size bytes of kind for the current context; count them unless
 * kind is FAKE_K_HOST. */
static CUresult alloc_common(uintptr_t *out, size_t size, enum fake_kind kind)
{
	REQUIRE_INIT();
	if (!out || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUctx_st *ctx = fake_ctx_current();
	if (!ctx)
		return CUDA_ERROR_INVALID_CONTEXT;
	bool counted = kind != FAKE_K_HOST;
	if (counted) { /* device memory: a call stream capture may prohibit (fake-capture.c) */
		pthread_mutex_lock(&fake_lock);
		CUresult rc = fake_capture_check_unsafe();
		pthread_mutex_unlock(&fake_lock);
		if (rc)
			return rc;
	}
	if (counted && size > fake_cfg.dev[ctx->dev].total)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t map_len;
	void *mem = get_memory(size, kind == FAKE_K_LEGACY, &map_len);
	struct fake_alloc *a = mem ? malloc(sizeof *a) : NULL;
	if (!a) {
		if (mem)
			release_memory((uintptr_t)mem, map_len);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*a = (struct fake_alloc){
		.base = (uintptr_t)mem, .size = size, .counted = counted ? size : 0,
		.map_len = map_len, .kind = kind, .dev = ctx->dev, .ctx = ctx,
	};
	pthread_mutex_lock(&fake_lock);
	CUresult r = ctx->alive ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
	if (!r && counted)
		r = fake_dev_charge(ctx->dev, size);
	if (!r) {
		a->buffer_id = fake_next_buffer_id();
		fake_reg_insert(a);
		if (counted)
			fake_cfg.dev[ctx->dev].live++;
	}
	pthread_mutex_unlock(&fake_lock);
	if (r) {
		release_memory((uintptr_t)mem, map_len);
		free(a);
		return r;
	}
	*out = (uintptr_t)mem;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	COUNT(cuMemAlloc_v2);
	uintptr_t p;
	CUresult r = alloc_common(dptr ? &p : NULL, bytesize, FAKE_K_DEVICE);
	if (!r)
		*dptr = p;
	return r;
}

FAKE_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	COUNT(cuMemAlloc);
	uintptr_t p;
	CUresult r = alloc_common(dptr ? &p : NULL, bytesize, FAKE_K_LEGACY);
	if (!r)
		*dptr = (CUdeviceptr_v1)p;
	return r;
}

FAKE_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	COUNT(cuMemAllocManaged);
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	uintptr_t p;
	CUresult r = alloc_common(dptr ? &p : NULL, bytesize, FAKE_K_MANAGED);
	if (!r)
		*dptr = p;
	return r;
}

/* pitch = WidthInBytes rounded up to 512; bytes = pitch * Height. */
static CUresult pitch_size(size_t width, size_t height, unsigned elem, size_t *pitch, size_t *bytes)
{
	if (width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
		return CUDA_ERROR_INVALID_VALUE;
	if (width > SIZE_MAX - FAKE_ALIGN)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pitch = fake_round_up(width, FAKE_ALIGN);
	if (__builtin_mul_overflow(*pitch, height, bytes))
		return CUDA_ERROR_OUT_OF_MEMORY;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
				     unsigned int ElementSizeBytes)
{
	COUNT(cuMemAllocPitch_v2);
	REQUIRE_INIT();
	size_t pitch, bytes;
	if (!dptr || !pPitch)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = pitch_size(WidthInBytes, Height, ElementSizeBytes, &pitch, &bytes);
	uintptr_t p;
	if (!r)
		r = alloc_common(&p, bytes, FAKE_K_DEVICE);
	if (!r) {
		*dptr = p;
		*pPitch = pitch;
	}
	return r;
}

FAKE_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int WidthInBytes,
				  unsigned int Height, unsigned int ElementSizeBytes)
{
	COUNT(cuMemAllocPitch);
	REQUIRE_INIT();
	size_t pitch, bytes;
	if (!dptr || !pPitch)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = pitch_size(WidthInBytes, Height, ElementSizeBytes, &pitch, &bytes);
	if (!r && bytes > UINT_MAX)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t p;
	if (!r)
		r = alloc_common(&p, bytes, FAKE_K_LEGACY);
	if (!r) {
		*dptr = (CUdeviceptr_v1)p;
		*pPitch = (unsigned int)pitch;
	}
	return r;
}

/* cuMemFree: waits for every stream of the allocation's context (the real
 * cuMemFree synchronizes), then frees. Also frees stream-ordered and graph
 * allocations (after the same synchronization). */
static CUresult mem_free(CUdeviceptr dptr)
{
	REQUIRE_INIT();
	if (fake_cfg.free_delay_us)
		usleep(fake_cfg.free_delay_us);
	if (dptr == 0)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&fake_lock);
	struct fake_alloc *a = fake_reg_find(dptr);
	for (int pass = 0; pass < 2; pass++) {
		if (!a || a->base != dptr ||
		    (a->kind != FAKE_K_DEVICE && a->kind != FAKE_K_LEGACY && a->kind != FAKE_K_MANAGED &&
		     a->kind != FAKE_K_POOL && a->kind != FAKE_K_GRAPH)) {
			pthread_mutex_unlock(&fake_lock);
			return CUDA_ERROR_INVALID_VALUE;
		}
		if (pass == 0) {
			/* the free synchronizes the context: never during a capture */
			CUresult rc = fake_capture_check_sync(a->ctx);
			if (rc) {
				pthread_mutex_unlock(&fake_lock);
				return rc;
			}
			fake_ctx_drain(a->ctx);
			fake_count_device_sync();
			a = fake_reg_find(dptr); /* the lock was dropped while draining */
		}
	}
	if (a->kind == FAKE_K_GRAPH) { /* "passing the allocation to cuMemFreeAsync or cuMemFree" */
		fake_graph_free_alloc(a);
		pthread_mutex_unlock(&fake_lock);
		return CUDA_SUCCESS;
	}
	fake_reg_remove(a);
	fake_cfg.dev[a->dev].live--;
	if (a->kind == FAKE_K_POOL) {
		fake_pool_free_now(a);
		pthread_mutex_unlock(&fake_lock);
		free(a);
		return CUDA_SUCCESS;
	}
	fake_dev_uncharge(a->dev, a->counted);
	pthread_mutex_unlock(&fake_lock);
	release_memory(a->base, a->map_len);
	free(a);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	COUNT(cuMemFree_v2);
	return mem_free(dptr);
}

FAKE_API CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	COUNT(cuMemFree);
	return mem_free(dptr);
}

/* free/total of the current context's device: free = total - other_used -
 * context overheads - everything reserved. */
static CUresult mem_info(uint64_t *freeb, uint64_t *total)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (!r) {
		*freeb = fake_dev_free(ctx->dev);
		*total = fake_cfg.dev[ctx->dev].total;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
	COUNT(cuMemGetInfo_v2);
	uint64_t f, t;
	if (!free || !total)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	CUresult r = mem_info(&f, &t);
	if (!r) {
		*free = f;
		*total = t;
	}
	return r;
}

/* Legacy: values above UINT_MAX are saturated to UINT_MAX. */
FAKE_API CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
	COUNT(cuMemGetInfo);
	uint64_t f, t;
	if (!free || !total)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	CUresult r = mem_info(&f, &t);
	if (!r) {
		*free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
		*total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
	}
	return r;
}

/* ---- host memory ---------------------------------------------------------------- */

static CUresult host_alloc(void **pp, size_t size, unsigned flags)
{
	REQUIRE_INIT();
	unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
	if (!pp || (flags & ~known))
		return CUDA_ERROR_INVALID_VALUE;
	uintptr_t p;
	CUresult r = alloc_common(&p, size, FAKE_K_HOST);
	if (!r)
		*pp = (void *)p;
	return r;
}

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	COUNT(cuMemHostAlloc);
	return host_alloc(pp, bytesize, Flags);
}

FAKE_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	COUNT(cuMemAllocHost_v2);
	return host_alloc(pp, bytesize, 0);
}

FAKE_API CUresult cuMemAllocHost(void **pp, unsigned int bytesize)
{
	COUNT(cuMemAllocHost);
	return host_alloc(pp, bytesize, 0);
}

FAKE_API CUresult cuMemFreeHost(void *p)
{
	COUNT(cuMemFreeHost);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct fake_alloc *a = fake_reg_find((uintptr_t)p);
	if (!p || !a || a->base != (uintptr_t)p || a->kind != FAKE_K_HOST) {
		pthread_mutex_unlock(&fake_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	fake_reg_remove(a);
	pthread_mutex_unlock(&fake_lock);
	release_memory(a->base, a->map_len);
	free(a);
	return CUDA_SUCCESS;
}

/* ---- copies and sets ------------------------------------------------------------ */

/* [p, p+n) must lie in memory the fake handed out (lock held); a range may
 * run across adjacent VMM mappings, which must grant the access. Work
 * captured into a graph may also use a graph allocation that is not live
 * now (an allocation node's address, fake-graph.c). */
static CUresult check_range(uintptr_t p, size_t n, bool write, bool captured)
{
	if (captured && fake_graph_range(p, n))
		return CUDA_SUCCESS;
	while (n > 0) {
		struct fake_alloc *a = fake_reg_find(p);
		if (!a)
			return CUDA_ERROR_INVALID_VALUE;
		if (a->kind == FAKE_K_VMM) {
			unsigned need = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
			if ((a->access & need) != need)
				return CUDA_ERROR_INVALID_VALUE;
		}
		size_t avail = a->base + a->size - p;
		if (n <= avail)
			return CUDA_SUCCESS;
		if (a->kind != FAKE_K_VMM)
			return CUDA_ERROR_INVALID_VALUE;
		p += avail;
		n -= avail;
	}
	return CUDA_SUCCESS;
}

static bool is_pinned_host(const void *p)
{
	struct fake_alloc *a = fake_reg_find((uintptr_t)p);
	return a && a->kind == FAKE_K_HOST;
}

enum side { HOST, DEV, ANY };
enum mode { SYNC, SYNC_PT, ASYNC, ASYNC_PT };

/* One copy. dst/src are host or device addresses per their side (ANY: the
 * registry decides, as unified addressing does). Synchronous forms run on
 * the legacy stream (SYNC) or the per-thread stream (SYNC_PT) and return
 * when done; async forms enqueue. A pageable host source of an async copy
 * is staged at the call; a pageable host destination makes it wait, as the
 * real driver does. */
static CUresult do_copy(enum side ds, uintptr_t dst, enum side ss, uintptr_t src, size_t n, CUstream h,
			enum mode m)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (r || n == 0)
		goto out;
	struct CUstream_st *s = NULL;
	if (m != SYNC && (r = fake_stream_resolve(m == SYNC_PT ? NULL : h, m == SYNC_PT || m == ASYNC_PT, ctx, &s)))
		goto out;
	bool captured = s && fake_stream_capture(s);
	if (ds == ANY)
		ds = fake_reg_find(dst) || (captured && fake_graph_range(dst, 1)) ? DEV : HOST;
	if (ss == ANY)
		ss = fake_reg_find(src) || (captured && fake_graph_range(src, 1)) ? DEV : HOST;
	if ((ds == HOST && !dst) || (ss == HOST && !src)) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	if ((ds == DEV && (r = check_range(dst, n, true, captured))) ||
	    (ss == DEV && (r = check_range(src, n, false, captured))))
		goto out;
	struct fake_op *op = calloc(1, sizeof *op);
	if (!r && !op)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (r)
		goto out;
	op->kind = FAKE_OP_COPY;
	op->dst = (void *)dst;
	op->src = (const void *)src;
	op->n = n;
	bool wait = m == SYNC || m == SYNC_PT;
	if (!wait && s && ss == HOST && !is_pinned_host((void *)src)) {
		if (!(op->owned = malloc(n))) {
			free(op);
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		memcpy(op->owned, (void *)src, n);
		op->src = op->owned;
	}
	if (ds == HOST && !is_pinned_host((void *)dst))
		wait = true;
	fake_stream_submit(ctx, s, op, wait);
out:
	pthread_mutex_unlock(&fake_lock);
	return r;
}

static CUresult do_set(uintptr_t dst, uint32_t value, size_t n, unsigned width, CUstream h, enum mode m)
{
	REQUIRE_INIT();
	size_t bytes;
	if (__builtin_mul_overflow(n, (size_t)width, &bytes))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (!r && n > 0 && dst % width)
		r = CUDA_ERROR_INVALID_VALUE;
	struct CUstream_st *s = NULL;
	if (!r && n > 0 && m != SYNC)
		r = fake_stream_resolve(m == SYNC_PT ? NULL : h, m == SYNC_PT || m == ASYNC_PT, ctx, &s);
	if (!r && n > 0)
		r = check_range(dst, bytes, true, s && fake_stream_capture(s));
	struct fake_op *op = NULL;
	if (!r && n > 0 && !(op = calloc(1, sizeof *op)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (op) {
		op->kind = width == 1 ? FAKE_OP_SET8 : FAKE_OP_SET32;
		op->dst = (void *)dst;
		op->n = n;
		op->value = value;
		fake_stream_submit(ctx, s, op, m == SYNC || m == SYNC_PT);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

#define COPY_FN(name, params, ds, dst, ss, src, n, h, m) \
	FAKE_API CUresult name params { COUNT(name); return do_copy(ds, (uintptr_t)(dst), ss, (uintptr_t)(src), n, h, m); }

COPY_FN(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), ANY, dst, ANY, src, n, NULL, SYNC)
COPY_FN(cuMemcpy_ptds, (CUdeviceptr dst, CUdeviceptr src, size_t n), ANY, dst, ANY, src, n, NULL, SYNC_PT)
COPY_FN(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h), ANY, dst, ANY, src, n, h, ASYNC)
COPY_FN(cuMemcpyAsync_ptsz, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h), ANY, dst, ANY, src, n, h, ASYNC_PT)
COPY_FN(cuMemcpyHtoD, (CUdeviceptr_v1 d, const void *s, unsigned int n), DEV, d, HOST, s, n, NULL, SYNC)
COPY_FN(cuMemcpyHtoD_v2, (CUdeviceptr d, const void *s, size_t n), DEV, d, HOST, s, n, NULL, SYNC)
COPY_FN(cuMemcpyHtoD_v2_ptds, (CUdeviceptr d, const void *s, size_t n), DEV, d, HOST, s, n, NULL, SYNC_PT)
COPY_FN(cuMemcpyDtoH, (void *d, CUdeviceptr_v1 s, unsigned int n), HOST, d, DEV, s, n, NULL, SYNC)
COPY_FN(cuMemcpyDtoH_v2, (void *d, CUdeviceptr s, size_t n), HOST, d, DEV, s, n, NULL, SYNC)
COPY_FN(cuMemcpyDtoH_v2_ptds, (void *d, CUdeviceptr s, size_t n), HOST, d, DEV, s, n, NULL, SYNC_PT)
COPY_FN(cuMemcpyDtoD, (CUdeviceptr_v1 d, CUdeviceptr_v1 s, unsigned int n), DEV, d, DEV, s, n, NULL, SYNC)
COPY_FN(cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), DEV, d, DEV, s, n, NULL, SYNC)
COPY_FN(cuMemcpyDtoD_v2_ptds, (CUdeviceptr d, CUdeviceptr s, size_t n), DEV, d, DEV, s, n, NULL, SYNC_PT)
COPY_FN(cuMemcpyHtoDAsync, (CUdeviceptr_v1 d, const void *s, unsigned int n, CUstream h), DEV, d, HOST, s, n, h, ASYNC)
COPY_FN(cuMemcpyHtoDAsync_v2, (CUdeviceptr d, const void *s, size_t n, CUstream h), DEV, d, HOST, s, n, h, ASYNC)
COPY_FN(cuMemcpyHtoDAsync_v2_ptsz, (CUdeviceptr d, const void *s, size_t n, CUstream h), DEV, d, HOST, s, n, h, ASYNC_PT)
COPY_FN(cuMemcpyDtoHAsync, (void *d, CUdeviceptr_v1 s, unsigned int n, CUstream h), HOST, d, DEV, s, n, h, ASYNC)
COPY_FN(cuMemcpyDtoHAsync_v2, (void *d, CUdeviceptr s, size_t n, CUstream h), HOST, d, DEV, s, n, h, ASYNC)
COPY_FN(cuMemcpyDtoHAsync_v2_ptsz, (void *d, CUdeviceptr s, size_t n, CUstream h), HOST, d, DEV, s, n, h, ASYNC_PT)
COPY_FN(cuMemcpyDtoDAsync, (CUdeviceptr_v1 d, CUdeviceptr_v1 s, unsigned int n, CUstream h), DEV, d, DEV, s, n, h, ASYNC)
COPY_FN(cuMemcpyDtoDAsync_v2, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h), DEV, d, DEV, s, n, h, ASYNC)
COPY_FN(cuMemcpyDtoDAsync_v2_ptsz, (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h), DEV, d, DEV, s, n, h, ASYNC_PT)

#define SET_FN(name, params, d, v, n, w, h, m) \
	FAKE_API CUresult name params { COUNT(name); return do_set(d, v, n, w, h, m); }

SET_FN(cuMemsetD8, (CUdeviceptr_v1 d, unsigned char v, unsigned int n), d, v, n, 1, NULL, SYNC)
SET_FN(cuMemsetD8_v2, (CUdeviceptr d, unsigned char v, size_t n), d, v, n, 1, NULL, SYNC)
SET_FN(cuMemsetD8_v2_ptds, (CUdeviceptr d, unsigned char v, size_t n), d, v, n, 1, NULL, SYNC_PT)
SET_FN(cuMemsetD32, (CUdeviceptr_v1 d, unsigned int v, unsigned int n), d, v, n, 4, NULL, SYNC)
SET_FN(cuMemsetD32_v2, (CUdeviceptr d, unsigned int v, size_t n), d, v, n, 4, NULL, SYNC)
SET_FN(cuMemsetD32_v2_ptds, (CUdeviceptr d, unsigned int v, size_t n), d, v, n, 4, NULL, SYNC_PT)
SET_FN(cuMemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUstream h), d, v, n, 1, h, ASYNC)
SET_FN(cuMemsetD8Async_ptsz, (CUdeviceptr d, unsigned char v, size_t n, CUstream h), d, v, n, 1, h, ASYNC_PT)
SET_FN(cuMemsetD32Async, (CUdeviceptr d, unsigned int v, size_t n, CUstream h), d, v, n, 4, h, ASYNC)
SET_FN(cuMemsetD32Async_ptsz, (CUdeviceptr d, unsigned int v, size_t n, CUstream h), d, v, n, 4, h, ASYNC_PT)

/* ---- pointer queries ------------------------------------------------------------- */

/* Range of a: for a VMM mapping cuMemGetAddressRange gives the mapping. */
static CUresult address_range(CUdeviceptr dptr, uintptr_t *base, size_t *size)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct fake_alloc *a = fake_reg_find(dptr);
	if (a) {
		*base = a->base;
		*size = a->size;
	}
	pthread_mutex_unlock(&fake_lock);
	return a ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

FAKE_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	COUNT(cuMemGetAddressRange_v2);
	uintptr_t b;
	size_t s;
	CUresult r = address_range(dptr, &b, &s);
	if (!r) {
		if (pbase)
			*pbase = b;
		if (psize)
			*psize = s;
	}
	return r;
}

FAKE_API CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
	COUNT(cuMemGetAddressRange);
	uintptr_t b;
	size_t s;
	CUresult r = address_range(dptr, &b, &s);
	if (!r && (b > UINT_MAX || s > UINT_MAX))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		if (pbase)
			*pbase = (CUdeviceptr_v1)b;
		if (psize)
			*psize = (unsigned int)s;
	}
	return r;
}

/* One attribute of ptr (lock held). a == NULL: not a pointer the fake made;
 * for cuPointerGetAttributes defaults are written (NULL/0, ordinal -2).
 * Boolean attributes are written as unsigned int. */
static CUresult pointer_attr(void *data, CUpointer_attribute attr, CUdeviceptr ptr, const struct fake_alloc *a,
			     bool defaults)
{
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	if (!a && !defaults)
		return CUDA_ERROR_INVALID_VALUE;
	uintptr_t rbase = a ? a->base : 0;
	size_t rsize = a ? a->size : 0;
	if (a && a->kind == FAKE_K_VMM)
		fake_vmm_reservation(a->base, &rbase, &rsize);
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = a ? a->ctx : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = !a ? 0 : a->kind == FAKE_K_HOST ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = a ? ptr : 0;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (a && a->kind != FAKE_K_HOST && a->kind != FAKE_K_MANAGED) {
			if (!defaults)
				return CUDA_ERROR_INVALID_VALUE;
			*(void **)data = NULL;
		} else {
			*(void **)data = a ? (void *)ptr : NULL;
		}
		break;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = a ? a->buffer_id : 0;
		break;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned int *)data = a && a->kind == FAKE_K_MANAGED;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = a ? a->dev : -2;
		break;
	case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
		*(unsigned int *)data = a && (a->kind == FAKE_K_DEVICE || a->kind == FAKE_K_LEGACY);
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = rbase;
		break;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = rsize;
		break;
	case CU_POINTER_ATTRIBUTE_MAPPED:
		*(unsigned int *)data = a != NULL;
		break;
	case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
		*(CUmemoryPool *)data = a && a->kind == FAKE_K_POOL ? a->pool : NULL;
		break;
	case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
		*(unsigned int *)data = !a ? 0 : a->kind == FAKE_K_VMM ? a->access
								     : (unsigned)CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
	COUNT(cuPointerGetAttribute);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = pointer_attr(data, attribute, ptr, fake_reg_find(ptr), false);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
					 CUdeviceptr ptr)
{
	COUNT(cuPointerGetAttributes);
	REQUIRE_INIT();
	if (numAttributes == 0 || !attributes || !data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct fake_alloc *a = fake_reg_find(ptr);
	CUresult r = CUDA_SUCCESS;
	for (unsigned i = 0; i < numAttributes && !r; i++)
		r = pointer_attr(data[i], attributes[i], ptr, a, true);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* ---- IPC -------------------------------------------------------------------------- */

/* The handle names the whole allocation holding the pointer (its base), as
 * the real driver's does. Opening it in the same process succeeds and
 * returns that base (the real driver refuses same-process opens with
 * CUDA_ERROR_INVALID_CONTEXT; the fake opens them so tests can check what a
 * handle names). A handle from another process cannot be mapped by the fake:
 * CUDA_ERROR_NOT_SUPPORTED. */
struct ipc_payload {
	uint32_t magic;
	int32_t pid;
	uint64_t buffer_id;
	uint64_t base;
	uint64_t size;
};
#define IPC_MAGIC 0xfa4e1bcu
_Static_assert(sizeof(struct ipc_payload) <= CU_IPC_HANDLE_SIZE, "IPC payload fits the handle");

FAKE_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	COUNT(cuIpcGetMemHandle);
	REQUIRE_INIT();
	if (!pHandle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct fake_alloc *a = fake_reg_find(dptr);
	CUresult r = a && (a->kind == FAKE_K_DEVICE || a->kind == FAKE_K_LEGACY) ? CUDA_SUCCESS
										 : CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		struct ipc_payload pl = {IPC_MAGIC, (int32_t)getpid(), a->buffer_id, a->base, a->size};
		memset(pHandle, 0, sizeof *pHandle);
		memcpy(pHandle->reserved, &pl, sizeof pl);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	REQUIRE_INIT();
	struct ipc_payload pl;
	memcpy(&pl, handle.reserved, sizeof pl);
	if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || pl.magic != IPC_MAGIC)
		return CUDA_ERROR_INVALID_VALUE;
	if (pl.pid != (int32_t)getpid())
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	struct fake_alloc *a = r ? NULL : fake_reg_find(pl.base);
	if (!r && (!a || a->base != pl.base || a->buffer_id != pl.buffer_id))
		r = CUDA_ERROR_INVALID_VALUE; /* freed since */
	if (!r) {
		a->ipc_opens++;
		*pdptr = a->base;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	COUNT(cuIpcOpenMemHandle);
	return ipc_open(pdptr, handle, Flags);
}

FAKE_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
	COUNT(cuIpcOpenMemHandle_v2);
	return ipc_open(pdptr, handle, Flags);
}

FAKE_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	COUNT(cuIpcCloseMemHandle);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct fake_alloc *a = fake_reg_find(dptr);
	CUresult r = a && a->base == dptr && a->ipc_opens > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		a->ipc_opens--;
	pthread_mutex_unlock(&fake_lock);
	return r;
}
