/* fake-misc: context settings (limits, cache and shared-memory config),
 * peer access, profiler start/stop and registered host memory.
 *
 * Settings live per context in a small side table (contexts are never freed,
 * so the pointer is a stable key); a context that has never set one answers
 * the driver's default. Peer access: any two different devices can reach each
 * other (as on an NVLink board); a device cannot be its own peer. Registered
 * host memory (cuMemHostRegister) is kept in a list of ranges: it is pinned
 * host memory, never device memory, so nothing is charged for it.
 *
 * Thread safety: everything under fake_lock.
 */
#include "fake-extra.h"

#include <stdlib.h>

/* ---- per-context settings ---------------------------------------------------- */

struct ctx_settings {
	struct CUctx_st *ctx;
	size_t limit[CU_LIMIT_MAX];
	bool limit_set[CU_LIMIT_MAX];
	CUfunc_cache cache;
	CUsharedconfig shmem;
	struct ctx_settings *next;
};
static struct ctx_settings *settings;

static const size_t limit_default[CU_LIMIT_MAX] = {
	[CU_LIMIT_STACK_SIZE] = 1024,
	[CU_LIMIT_PRINTF_FIFO_SIZE] = 1048576,
	[CU_LIMIT_MALLOC_HEAP_SIZE] = 8388608,
	[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
	[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
	[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
	[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
	[CU_LIMIT_SHMEM_SIZE] = 0,
	[CU_LIMIT_CIG_ENABLED] = 0,
	[CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED] = 0,
};

/* The settings of the current context, made on first use (lock held). */
static CUresult current_settings(struct ctx_settings **out, bool create)
{
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (r)
		return r;
	for (struct ctx_settings *s = settings; s; s = s->next)
		if (s->ctx == ctx) {
			*out = s;
			return CUDA_SUCCESS;
		}
	if (!create) {
		*out = NULL;
		return CUDA_SUCCESS;
	}
	struct ctx_settings *s = calloc(1, sizeof *s);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->ctx = ctx;
	s->cache = CU_FUNC_CACHE_PREFER_NONE;
	s->shmem = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
	s->next = settings;
	settings = s;
	*out = s;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
	COUNT(cuCtxSetLimit);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct ctx_settings *s;
	CUresult r = current_settings(&s, false);
	if (!r && ((int)limit < 0 || limit >= CU_LIMIT_MAX))
		r = CUDA_ERROR_INVALID_VALUE;
	else if (!r && (limit == CU_LIMIT_SHMEM_SIZE || limit == CU_LIMIT_CIG_ENABLED))
		r = CUDA_ERROR_UNSUPPORTED_LIMIT; /* query-only */
	else if (!r && limit == CU_LIMIT_MAX_L2_FETCH_GRANULARITY && value > 128)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		r = current_settings(&s, true);
	if (!r) {
		s->limit[limit] = value;
		s->limit_set[limit] = true;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
	COUNT(cuCtxGetLimit);
	REQUIRE_INIT();
	if (!pvalue || (int)limit < 0 || limit >= CU_LIMIT_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct ctx_settings *s;
	CUresult r = current_settings(&s, false);
	if (!r)
		*pvalue = s && s->limit_set[limit] ? s->limit[limit] : limit_default[limit];
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
	COUNT(cuCtxGetCacheConfig);
	REQUIRE_INIT();
	if (!pconfig)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct ctx_settings *s;
	CUresult r = current_settings(&s, false);
	if (!r)
		*pconfig = s ? s->cache : CU_FUNC_CACHE_PREFER_NONE;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuCtxSetCacheConfig(CUfunc_cache config)
{
	COUNT(cuCtxSetCacheConfig);
	REQUIRE_INIT();
	if ((int)config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct ctx_settings *s;
	CUresult r = current_settings(&s, true);
	if (!r)
		s->cache = config;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* Bank size configuration is deprecated and has no effect on Hopper: the
 * getter always reports four-byte banks; the setter validates and accepts. */
FAKE_API CUresult cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
	COUNT(cuCtxGetSharedMemConfig);
	REQUIRE_INIT();
	if (!pConfig)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct ctx_settings *s;
	CUresult r = current_settings(&s, false);
	if (!r)
		*pConfig = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuCtxSetSharedMemConfig(CUsharedconfig config)
{
	COUNT(cuCtxSetSharedMemConfig);
	REQUIRE_INIT();
	if ((int)config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE || config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct ctx_settings *s;
	CUresult r = current_settings(&s, true);
	if (!r)
		s->shmem = config;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* ---- peer access ------------------------------------------------------------------ */

struct peer { struct CUctx_st *from, *to; struct peer *next; };
static struct peer *peers;

FAKE_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	COUNT(cuDeviceCanAccessPeer);
	REQUIRE_INIT();
	if (!canAccessPeer)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev) || fake_check_dev(peerDev))
		return CUDA_ERROR_INVALID_DEVICE;
	*canAccessPeer = dev != peerDev;
	return CUDA_SUCCESS;
}

static struct peer **find_peer(struct CUctx_st *from, struct CUctx_st *to)
{
	for (struct peer **pp = &peers; *pp; pp = &(*pp)->next)
		if ((*pp)->from == from && (*pp)->to == to)
			return pp;
	return NULL;
}

/* Documented: INVALID_CONTEXT without a current context, for an invalid
 * peer or the current context itself; PEER_ACCESS_UNSUPPORTED where
 * cuDeviceCanAccessPeer says no; ALREADY_ENABLED on a repeat; Flags must be 0. */
FAKE_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	COUNT(cuCtxEnablePeerAccess);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (!r && (!fake_ctx_valid(peerContext) || !peerContext->alive || peerContext == ctx))
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r && Flags)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r && peerContext->dev == ctx->dev)
		r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	if (!r && find_peer(ctx, peerContext))
		r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
	struct peer *p = NULL;
	if (!r && !(p = malloc(sizeof *p)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		*p = (struct peer){ctx, peerContext, peers};
		peers = p;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
	COUNT(cuCtxDisablePeerAccess);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (!r && (!fake_ctx_valid(peerContext) || !peerContext->alive))
		r = CUDA_ERROR_INVALID_CONTEXT;
	struct peer **pp = r ? NULL : find_peer(ctx, peerContext);
	if (!r && !pp)
		r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	if (!r) {
		struct peer *p = *pp;
		*pp = p->next;
		free(p);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* INVALID_DEVICE for a bad ordinal or the same device twice (documented). */
FAKE_API CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
					  CUdevice dstDevice)
{
	COUNT(cuDeviceGetP2PAttribute);
	REQUIRE_INIT();
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(srcDevice) || fake_check_dev(dstDevice) || srcDevice == dstDevice)
		return CUDA_ERROR_INVALID_DEVICE;
	switch (attrib) {
	case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *value = 0; break;
	case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED: *value = 1; break;
	case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED: *value = 1; break;
	case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *value = 1; break;
	case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED: *value = 0; break;
	default: return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* ---- profiler ---------------------------------------------------------------------- */

/* No profiler is attached: starting and stopping collection are no-ops that
 * still need a current context. */
static CUresult profiler_toggle(void)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuProfilerStart(void)
{
	COUNT(cuProfilerStart);
	return profiler_toggle();
}

FAKE_API CUresult cuProfilerStop(void)
{
	COUNT(cuProfilerStop);
	return profiler_toggle();
}

/* ---- registered host memory ----------------------------------------------------------- */

struct hostreg { uintptr_t base; size_t size; struct hostreg *next; };
static struct hostreg *hostregs;

bool fake_host_registered(uintptr_t p, size_t n)
{
	for (struct hostreg *h = hostregs; h; h = h->next)
		if (p >= h->base && p - h->base <= h->size && n <= h->size - (p - h->base))
			return true;
	return false;
}

static CUresult host_register(void *p, size_t size, unsigned flags)
{
	REQUIRE_INIT();
	unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |
			 CU_MEMHOSTREGISTER_READ_ONLY;
	if (!p || size == 0 || (flags & ~known) || (uintptr_t)p > UINTPTR_MAX - size)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
		return CUDA_ERROR_NOT_SUPPORTED; /* no I/O memory to map here */
	uintptr_t b = (uintptr_t)p;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	for (struct hostreg *h = hostregs; !r && h; h = h->next)
		if (b < h->base + h->size && h->base < b + size)
			r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	if (!r && fake_reg_find_range(b, size))
		r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED; /* memory the fake handed out */
	struct hostreg *h = NULL;
	if (!r && !(h = malloc(sizeof *h)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		*h = (struct hostreg){b, size, hostregs};
		hostregs = h;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	COUNT(cuMemHostRegister);
	return host_register(p, bytesize, Flags);
}

FAKE_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	COUNT(cuMemHostRegister_v2);
	return host_register(p, bytesize, Flags);
}

FAKE_API CUresult cuMemHostUnregister(void *p)
{
	COUNT(cuMemHostUnregister);
	REQUIRE_INIT();
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	struct hostreg **pp = &hostregs;
	while (!r && *pp && (*pp)->base != (uintptr_t)p)
		pp = &(*pp)->next;
	if (!r && !*pp)
		r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	if (!r) {
		struct hostreg *h = *pp;
		*pp = h->next;
		free(h);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* With unified addressing the device pointer of mapped pinned memory is its
 * host address. Flags must be 0; p must lie in pinned memory (cuMemHostAlloc,
 * cuMemAllocHost or cuMemHostRegister), else CUDA_ERROR_INVALID_VALUE. */
static CUresult host_device_pointer(uintptr_t *out, void *p, unsigned flags)
{
	REQUIRE_INIT();
	if (!out || !p || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (!r) {
		struct fake_alloc *a = fake_reg_find((uintptr_t)p);
		if (!(a && a->kind == FAKE_K_HOST) && !fake_host_registered((uintptr_t)p, 1))
			r = CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&fake_lock);
	if (!r)
		*out = (uintptr_t)p;
	return r;
}

FAKE_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
	COUNT(cuMemHostGetDevicePointer_v2);
	uintptr_t d = 0;
	CUresult r = pdptr ? host_device_pointer(&d, p, Flags) : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*pdptr = d;
	return r;
}

/* Legacy 32-bit form: a pointer that does not fit is CUDA_ERROR_INVALID_VALUE. */
FAKE_API CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
	COUNT(cuMemHostGetDevicePointer);
	uintptr_t d = 0;
	CUresult r = pdptr ? host_device_pointer(&d, p, Flags) : CUDA_ERROR_INVALID_VALUE;
	if (!r && d > UINT32_MAX)
		r = CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*pdptr = (CUdeviceptr_v1)d;
	return r;
}
