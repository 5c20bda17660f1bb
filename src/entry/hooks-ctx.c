/* hooks-ctx: the entry points by which a context is made and dies. Making
 * one (cuCtxCreate, the primary context's first retain) tells the
 * footprint before and after, to learn what the context costs. A context
 * dies on cuCtxDestroy, a primary context's reset and its last release,
 * each run as the writer of the death lock (death-lock.h).
 *
 * Thread safety: primary_lock (taken before the death lock's writer, never
 * inside it; an xmutex, as it is held across driver calls) orders retain,
 * release and reset, so that no retain revives a context before the shim
 * has looked; the handles are atomics. */
#include "account/footprint.h"
#include "account/graph.h"
#include "entry/hooks.h"
#include "platform/xmutex.h"

#include <stdatomic.h>

static struct cumemcap_xmutex primary_lock = CUMEMCAP_XMUTEX_INIT(primary_lock);
static _Atomic(CUcontext) primary[CUMEMCAP_MAX_DEVICES];

void cumemcap_hooks_ctx_fork_child(void)
{
	cumemcap_xmutex_fork_child(&primary_lock);
}

/* dev's primary context: the handle a retain returned, else the driver's.
 * The caller found it active and holds primary_lock: no last release here. */
static CUcontext primary_handle(CUdevice dev)
{
	CUcontext ctx = atomic_load(&primary[dev]);
	if (ctx || !real_cuDevicePrimaryCtxRetain || !real_cuDevicePrimaryCtxRelease_v2)
		return ctx;
	if (real_cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
		return NULL;
	real_cuDevicePrimaryCtxRelease_v2(dev);
	return ctx;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	NEED(cuDevicePrimaryCtxRetain);
	cumemcap_xmutex_lock(&primary_lock);
	bool first = cumemcap_ledger_valid(dev) && !cumemcap_driver_primary_active(dev);
	if (first)
		cumemcap_account_context_coming(dev);
	CUresult r = real_cuDevicePrimaryCtxRetain(pctx, dev);
	if (r == CUDA_SUCCESS && pctx && cumemcap_ledger_valid(dev)) {
		atomic_store(&primary[dev], *pctx);
		if (first)
			cumemcap_account_context_made(dev, *pctx, true);
	}
	cumemcap_xmutex_unlock(&primary_lock);
	return r;
}

#define CTX_CREATE(name, params, ...)                                                              \
	CUMEMCAP_EXPORT CUresult CUDAAPI name params                                               \
	{                                                                                          \
		NEED(name);                                                                        \
		cumemcap_account_context_coming(dev);                                              \
		CUresult r = real_##name(__VA_ARGS__);                                             \
		if (r == CUDA_SUCCESS && pctx)                                                     \
			cumemcap_account_context_made(dev, *pctx, false);                          \
		return r;                                                                          \
	}
CTX_CREATE(cuCtxCreate, (CUcontext *pctx, unsigned int flags, CUdevice dev), pctx, flags, dev)
CTX_CREATE(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev), pctx, flags, dev)
CTX_CREATE(cuCtxCreate_v3,
	   (CUcontext *pctx, CUexecAffinityParam *params, int count, unsigned int flags, CUdevice dev),
	   pctx, params, count, flags, dev)
CTX_CREATE(cuCtxCreate_v4, (CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev),
	   pctx, params, flags, dev)

/* A context died: its graphs go first (their pool figures settle before
 * the death's log record reads the ledger), then the rest of its records. */
static void died(CUcontext ctx, int dev, enum cumemcap_death why)
{
	if (ctx)
		cumemcap_graph_context_died(ctx);
	cumemcap_account_context_died(ctx, dev, why);
	cumemcap_account_context_gone(ctx, dev);
}

/* A reset kills an active primary context, a release when it is the last;
 * the handle is asked for while the context is still active. */
static CUresult primary_change(CUresult(CUDAAPI *fn)(CUdevice), CUdevice dev, enum cumemcap_death why)
{
	cumemcap_xmutex_lock(&primary_lock);
	cumemcap_death_lock_write();
	bool was_active = cumemcap_ledger_valid(dev) && cumemcap_driver_primary_active(dev);
	CUcontext ctx = was_active ? primary_handle(dev) : NULL;
	CUresult r = fn(dev);
	if (r == CUDA_SUCCESS && was_active &&
	    (why == CUMEMCAP_DEATH_RESET || !cumemcap_driver_primary_active(dev)))
		died(ctx, dev, why);
	cumemcap_death_unlock_write();
	cumemcap_xmutex_unlock(&primary_lock);
	return r;
}

ENTRY(cuDevicePrimaryCtxRelease_v2, (CUdevice dev),
      primary_change(real_cuDevicePrimaryCtxRelease_v2, dev, CUMEMCAP_DEATH_RELEASED))
ENTRY(cuDevicePrimaryCtxRelease, (CUdevice dev),
      primary_change(real_cuDevicePrimaryCtxRelease, dev, CUMEMCAP_DEATH_RELEASED))
ENTRY(cuDevicePrimaryCtxReset_v2, (CUdevice dev),
      primary_change(real_cuDevicePrimaryCtxReset_v2, dev, CUMEMCAP_DEATH_RESET))
ENTRY(cuDevicePrimaryCtxReset, (CUdevice dev),
      primary_change(real_cuDevicePrimaryCtxReset, dev, CUMEMCAP_DEATH_RESET))

static CUresult destroy(PFN_cuCtxDestroy_v4000 fn, CUcontext ctx)
{
	cumemcap_death_lock_write();
	CUresult r = fn(ctx);
	if (r == CUDA_SUCCESS && ctx)
		died(ctx, -1, CUMEMCAP_DEATH_DESTROYED);
	cumemcap_death_unlock_write();
	return r;
}

ENTRY(cuCtxDestroy_v2, (CUcontext ctx), destroy(real_cuCtxDestroy_v2, ctx))
ENTRY(cuCtxDestroy, (CUcontext ctx), destroy(real_cuCtxDestroy, ctx))
