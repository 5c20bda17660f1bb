/* fake-pool: stream-ordered memory pools (cuMemAllocAsync and friends).
 *
 * A pool reserves device memory in chunks of the allocation rounded up to
 * 2 MiB, one chunk per allocation, reusing the smallest free chunk that
 * fits. Reservation (and CUDA_ERROR_OUT_OF_MEMORY, after trimming the
 * pool's free chunks once) happens at the allocation call, charged to the
 * pool's device; the allocation itself is registered with the size asked
 * for. cuMemFreeAsync returns the chunk to the pool only when the stream
 * reaches the free. Free chunks stay reserved (fakecuda_reserved,
 * RESERVED_MEM_CURRENT) until cuMemPoolTrimTo, or until a stream/event/
 * context synchronize finds the pool above its release threshold (default
 * 0) and releases free chunks until it is at or below the threshold.
 * USED_MEM_* count the chunks in use. Pools are device-level: a context's
 * teardown returns its stream-ordered allocations to their pools but leaves
 * the pools' reservations alone.
 *
 * Thread safety: everything under fake_lock; pools are found in a global
 * list (never freed; destroyed ones are marked), so a bad handle is an
 * error, never a dereference.
 */
#include "fake-internal.h"
#include "fake-extra.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct fake_chunk {
	struct fake_chunk *next;
	void *base;
	size_t size;
	bool in_use;
};

struct CUmemPoolHandle_st {
	int dev;
	bool is_default, destroyed;
	uint64_t threshold, reserved, reserved_high, used, used_high;
	int reuse[3];
	struct fake_chunk *chunks;
	struct CUmemPoolHandle_st *next;
};

static struct CUmemPoolHandle_st *all_pools;

/* ---- pools (helpers) ----------------------------------------------------------- */

static void chunk_release(struct CUmemPoolHandle_st *p, struct fake_chunk **pp)
{
	struct fake_chunk *c = *pp;
	*pp = c->next;
	munmap(c->base, c->size);
	fake_dev_uncharge(p->dev, c->size);
	p->reserved -= c->size;
	free(c);
}

/* Release free chunks while the pool reserves more than keep. */
static void pool_trim(struct CUmemPoolHandle_st *p, uint64_t keep)
{
	struct fake_chunk **pp = &p->chunks;
	while (*pp && p->reserved > keep) {
		if (!(*pp)->in_use)
			chunk_release(p, pp);
		else
			pp = &(*pp)->next;
	}
}

void fake_chunk_return(struct CUmemPoolHandle_st *p, struct fake_chunk *c)
{
	c->in_use = false;
	p->used -= c->size;
	if (p->destroyed)
		pool_trim(p, 0);
}

void fake_pools_trim_at_sync(int dev)
{
	for (struct CUmemPoolHandle_st *p = all_pools; p; p = p->next)
		if (p->dev == dev && !p->destroyed && p->reserved > p->threshold)
			pool_trim(p, p->threshold);
}

void fake_pool_free_now(struct fake_alloc *a)
{
	fake_chunk_return(a->pool, a->chunk);
}

/* ---- pools ------------------------------------------------------------------------ */

static struct CUmemPoolHandle_st *pool_new(int dev, bool is_default)
{
	struct CUmemPoolHandle_st *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->dev = dev;
	p->is_default = is_default;
	p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
	p->next = all_pools;
	all_pools = p;
	return p;
}

static struct CUmemPoolHandle_st *pool_default(int dev)
{
	struct fake_dev *d = &fake_cfg.dev[dev];
	if (!d->default_pool)
		d->default_pool = pool_new(dev, true);
	return d->default_pool;
}

static struct CUmemPoolHandle_st *pool_current(int dev)
{
	struct fake_dev *d = &fake_cfg.dev[dev];
	return d->cur_pool ? d->cur_pool : pool_default(dev);
}

static bool pool_valid(struct CUmemPoolHandle_st *p)
{
	for (struct CUmemPoolHandle_st *q = all_pools; q; q = q->next)
		if (q == p)
			return !q->destroyed;
	return false;
}

/* A device location (the only kind the fake has pools for) of a pinned type. */
static CUresult check_location(const CUmemLocation *loc, CUmemAllocationType type)
{
	if (!loc || loc->type != CU_MEM_LOCATION_TYPE_DEVICE || type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	return fake_check_dev(loc->id) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

static CUresult get_pool(CUmemoryPool *out, int dev, bool current)
{
	REQUIRE_INIT();
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	struct CUmemPoolHandle_st *p = current ? pool_current(dev) : pool_default(dev);
	pthread_mutex_unlock(&fake_lock);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*out = p;
	return CUDA_SUCCESS;
}

static CUresult set_pool(int dev, CUmemoryPool pool)
{
	REQUIRE_INIT();
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_SUCCESS;
	if (!pool_valid(pool))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (pool->dev != dev)
		r = CUDA_ERROR_INVALID_DEVICE;
	else
		fake_cfg.dev[dev].cur_pool = pool;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
	COUNT(cuDeviceGetDefaultMemPool);
	return get_pool(pool_out, dev, false);
}

FAKE_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	COUNT(cuDeviceGetMemPool);
	return get_pool(pool, dev, true);
}

FAKE_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
	COUNT(cuDeviceSetMemPool);
	return set_pool(dev, pool);
}

FAKE_API CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
	COUNT(cuMemGetDefaultMemPool);
	REQUIRE_INIT();
	CUresult r = check_location(location, type);
	return r ? r : get_pool(pool_out, location->id, false);
}

FAKE_API CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
	COUNT(cuMemGetMemPool);
	REQUIRE_INIT();
	CUresult r = check_location(location, type);
	return r ? r : get_pool(pool, location->id, true);
}

FAKE_API CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
	COUNT(cuMemSetMemPool);
	REQUIRE_INIT();
	CUresult r = check_location(location, type);
	return r ? r : set_pool(location->id, pool);
}

FAKE_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
	COUNT(cuMemPoolCreate);
	REQUIRE_INIT();
	if (!pool || !poolProps)
		return CUDA_ERROR_INVALID_VALUE;
	if ((poolProps->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = check_location(&poolProps->location, poolProps->allocType);
	if (r)
		return r;
	pthread_mutex_lock(&fake_lock);
	struct CUmemPoolHandle_st *p = pool_new(poolProps->location.id, false);
	pthread_mutex_unlock(&fake_lock);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*pool = p;
	return CUDA_SUCCESS;
}

/* Returns at once; chunks still in use are released when freed. */
FAKE_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	COUNT(cuMemPoolDestroy);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_SUCCESS;
	if (!pool_valid(pool) || pool->is_default) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else {
		if (fake_cfg.dev[pool->dev].cur_pool == pool)
			fake_cfg.dev[pool->dev].cur_pool = NULL;
		pool->destroyed = true;
		pool_trim(pool, 0);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
	COUNT(cuMemPoolTrimTo);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		pool_trim(pool, minBytesToKeep);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	COUNT(cuMemPoolSetAttribute);
	REQUIRE_INIT();
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		cuuint64_t v64 = 0;
		if (attr >= CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
			memcpy(&v64, value, sizeof v64);
		switch (attr) {
		case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
			memcpy(&pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES], value, sizeof(int));
			break;
		case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
			pool->threshold = v64;
			break;
		case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
			if (v64 != 0)
				r = CUDA_ERROR_INVALID_VALUE;
			else
				pool->reserved_high = pool->reserved;
			break;
		case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
			if (v64 != 0)
				r = CUDA_ERROR_INVALID_VALUE;
			else
				pool->used_high = pool->used;
			break;
		default: /* the _CURRENT ones are read-only */
			r = CUDA_ERROR_INVALID_VALUE;
		}
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
	COUNT(cuMemPoolGetAttribute);
	REQUIRE_INIT();
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = pool_valid(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		cuuint64_t v64 = 0;
		switch (attr) {
		case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
		case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
		case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
			memcpy(value, &pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES], sizeof(int));
			break;
		case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v64 = pool->threshold; break;
		case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v64 = pool->reserved; break;
		case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v64 = pool->reserved_high; break;
		case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v64 = pool->used; break;
		case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v64 = pool->used_high; break;
		default:
			r = CUDA_ERROR_INVALID_VALUE;
		}
		if (!r && attr >= CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
			memcpy(value, &v64, sizeof v64);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* Allocate from pool p (lock held). */
static CUresult pool_alloc(struct CUmemPoolHandle_st *p, size_t size, struct CUctx_st *ctx, CUdeviceptr *dptr)
{
	if (size > SIZE_MAX - FAKE_GRANULARITY)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t need = fake_round_up(size, FAKE_GRANULARITY);
	struct fake_alloc *a = calloc(1, sizeof *a);
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct fake_chunk *best = NULL;
	for (struct fake_chunk *c = p->chunks; c; c = c->next)
		if (!c->in_use && c->size >= need && (!best || c->size < best->size))
			best = c;
	if (!best) {
		CUresult r = fake_dev_charge(p->dev, need);
		if (r == CUDA_ERROR_OUT_OF_MEMORY) {
			pool_trim(p, 0);
			r = fake_dev_charge(p->dev, need);
		}
		void *mem = r ? NULL : fake_map(need, false);
		best = mem ? calloc(1, sizeof *best) : NULL;
		if (!best) {
			if (mem)
				munmap(mem, need);
			if (!r)
				fake_dev_uncharge(p->dev, need);
			free(a);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		best->base = mem;
		best->size = need;
		best->next = p->chunks;
		p->chunks = best;
		p->reserved += need;
		if (p->reserved > p->reserved_high)
			p->reserved_high = p->reserved;
	}
	best->in_use = true;
	p->used += best->size;
	if (p->used > p->used_high)
		p->used_high = p->used;
	a->base = (uintptr_t)best->base;
	a->size = size;
	a->kind = FAKE_K_POOL;
	a->dev = p->dev;
	a->ctx = ctx;
	a->buffer_id = fake_next_buffer_id();
	a->chunk = best;
	a->pool = p;
	fake_reg_insert(a);
	fake_cfg.dev[p->dev].live++;
	*dptr = a->base;
	return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream h, bool pt)
{
	REQUIRE_INIT();
	if (!dptr || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_ctx_require(&ctx);
	if (!r)
		r = fake_stream_lookup(h, pt, &ctx, &s);
	if (!r && pool && !pool_valid(pool))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r && !pool && !(pool = pool_current(ctx->dev)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	/* captured: an allocation node of the capture's graph, nothing from the
	 * pool (cuGraphAddMemAllocNode: "allocations captured from cuMemAllocAsync") */
	if (!r && s && fake_stream_capture(s))
		r = fake_capture_alloc(fake_stream_capture(s), pool->dev, size, dptr);
	else if (!r)
		r = pool_alloc(pool, size, ctx, dptr);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	COUNT(cuMemAllocAsync);
	return alloc_async(dptr, bytesize, NULL, hStream, false);
}

FAKE_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	COUNT(cuMemAllocAsync_ptsz);
	return alloc_async(dptr, bytesize, NULL, hStream, true);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream h, bool pt)
{
	if (!pool && !fake_initialized())
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_async(dptr, size, pool, h, pt);
}

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
	COUNT(cuMemAllocFromPoolAsync);
	return alloc_from_pool(dptr, bytesize, pool, hStream, false);
}

FAKE_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					       CUstream hStream)
{
	COUNT(cuMemAllocFromPoolAsync_ptsz);
	return alloc_from_pool(dptr, bytesize, pool, hStream, true);
}

/* Only stream-ordered and graph allocations may be freed here
 * (CUDA_ERROR_INVALID_VALUE for anything else, including cuMemAlloc memory).
 * On a capturing stream, an allocation node's address becomes a free node
 * (fake-graph.c). */
static CUresult free_async(CUdeviceptr dptr, CUstream h, bool pt)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_ctx_require(&ctx);
	if (!r)
		r = fake_stream_lookup(h, pt, &ctx, &s);
	if (!r && s && fake_stream_capture(s)) {
		/* a graph allocation's free becomes a free node of the capture */
		CUresult rc = fake_capture_free(fake_stream_capture(s), dptr);
		if (rc != CUDA_ERROR_NOT_FOUND) {
			pthread_mutex_unlock(&fake_lock);
			return rc;
		}
	}
	struct fake_alloc *a = r ? NULL : fake_reg_find(dptr);
	struct fake_op *op = NULL;
	if (!r && a && a->base == dptr && a->kind == FAKE_K_GRAPH) {
		fake_graph_free_alloc(a); /* at the call, as the fake reserves at the call */
		pthread_mutex_unlock(&fake_lock);
		return CUDA_SUCCESS;
	}
	if (!r && (!a || a->base != dptr || a->kind != FAKE_K_POOL))
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r && !(op = calloc(1, sizeof *op)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		fake_reg_remove(a);
		fake_cfg.dev[a->dev].live--;
		op->kind = FAKE_OP_POOL_FREE;
		op->dst = (void *)dptr; /* what a free node of a capture reports */
		op->chunk = a->chunk;
		op->chunk_pool = a->pool;
		free(a);
		fake_stream_submit(ctx, s, op, false);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	COUNT(cuMemFreeAsync);
	return free_async(dptr, hStream, false);
}

FAKE_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	COUNT(cuMemFreeAsync_ptsz);
	return free_async(dptr, hStream, true);
}
