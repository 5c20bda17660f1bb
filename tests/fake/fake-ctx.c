/* fake-ctx: devices, their attributes, primary and created contexts and the
 * per-thread context stack.
 *
 * A context costs FAKECUDA_CTX_OVERHEAD on its device while it is alive
 * (created and not destroyed; primary: retained). Destroying a context, the
 * last release of a primary context, or a primary reset waits for its
 * streams, then frees every allocation, array, stream and event made in it.
 * Context structs are never freed (a handle may still be current in another
 * thread; it then gets CUDA_ERROR_INVALID_CONTEXT).
 *
 * Thread safety: contexts and device counters under fake_lock; the context
 * stack is the thread's (struct fake_thread).
 */
#include "fake-extra.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct CUctx_st *all_ctxs;

#define CTX_STACK_MAX FAKE_CTX_STACK_MAX

/* ---- devices ---------------------------------------------------------------- */

FAKE_API CUresult cuDeviceGetCount(int *count)
{
	COUNT(cuDeviceGetCount);
	REQUIRE_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = fake_cfg.ndev;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	COUNT(cuDeviceGet);
	REQUIRE_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	COUNT(cuDeviceGetName);
	REQUIRE_INIT();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "Fake GPU %d", dev);
	return CUDA_SUCCESS;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
	REQUIRE_INIT();
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(uuid->bytes, fake_cfg.dev[dev].uuid, 16);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	COUNT(cuDeviceGetUuid);
	return get_uuid(uuid, dev);
}

FAKE_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
	COUNT(cuDeviceGetUuid_v2);
	return get_uuid(uuid, dev);
}

FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	COUNT(cuDeviceTotalMem_v2);
	REQUIRE_INIT();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = fake_cfg.dev[dev].total;
	return CUDA_SUCCESS;
}

/* Legacy 32-bit form: a capacity above UINT_MAX is reported as UINT_MAX
 * (saturated), never wrapped. */
FAKE_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	COUNT(cuDeviceTotalMem);
	REQUIRE_INIT();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	uint64_t t = fake_cfg.dev[dev].total;
	*bytes = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
	return CUDA_SUCCESS;
}

/* Every attribute of the CUDA 13 enum is answered (fake-attr.c). */
FAKE_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	COUNT(cuDeviceGetAttribute);
	REQUIRE_INIT();
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	return fake_device_attribute(dev, attrib, pi);
}

FAKE_API CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
	COUNT(cuDeviceGetPCIBusId);
	REQUIRE_INIT();
	if (!pciBusId || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	const struct fake_dev *d = &fake_cfg.dev[dev];
	snprintf(pciBusId, (size_t)len, "%04x:%02x:%02x.0", d->pci_domain, d->pci_bus, d->pci_device);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId)
{
	COUNT(cuDeviceGetByPCIBusId);
	REQUIRE_INIT();
	unsigned dom, bus, devn;
	if (!dev || !pciBusId)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fake_parse_pci(pciBusId, strlen(pciBusId), &dom, &bus, &devn))
		return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < fake_cfg.ndev; i++) {
		const struct fake_dev *d = &fake_cfg.dev[i];
		if (d->pci_domain == dom && d->pci_bus == bus && d->pci_device == devn) {
			*dev = i;
			return CUDA_SUCCESS;
		}
	}
	return CUDA_ERROR_INVALID_DEVICE;
}

/* The record (fakecuda.h): what this process's contexts cost on dev. */
FAKE_API uint64_t fakecuda_context_bytes(int dev)
{
	fake_config_load();
	if (fake_check_dev(dev))
		return 0;
	pthread_mutex_lock(&fake_lock);
	uint64_t v = (uint64_t)fake_cfg.dev[dev].nctx * fake_cfg.ctx_overhead;
	pthread_mutex_unlock(&fake_lock);
	return v;
}

/* ---- contexts ------------------------------------------------------------------ */

struct CUctx_st *fake_ctx_current(void)
{
	struct fake_thread *t = fake_thread();
	return t->ctx_depth > 0 ? t->ctx_stack[t->ctx_depth - 1] : NULL;
}

CUresult fake_ctx_require(struct CUctx_st **out)
{
	struct CUctx_st *c = fake_ctx_current();
	if (!c || !c->alive)
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = c;
	return CUDA_SUCCESS;
}

bool fake_ctx_valid(struct CUctx_st *c)
{
	for (struct CUctx_st *p = all_ctxs; p; p = p->next_all)
		if (p == c)
			return true;
	return false;
}

static struct CUctx_st *ctx_new(int dev, bool primary, unsigned flags)
{
	struct CUctx_st *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->magic = FAKE_CTX_MAGIC;
	c->dev = dev;
	c->primary = primary;
	c->flags = flags;
	c->next_all = all_ctxs;
	all_ctxs = c;
	return c;
}

static void ctx_activate(struct CUctx_st *c)
{
	c->alive = true;
	fake_dev_ctx_up(c->dev);
}

/* Tear down everything a context holds (lock held). The struct itself stays
 * (handles may still be current in other threads; they then get
 * CUDA_ERROR_INVALID_CONTEXT). */
static void ctx_teardown(struct CUctx_st *c)
{
	if (!c->alive)
		return;
	fake_ctx_drain(c);
	fake_ctx_release_streams(c);
	fake_graph_release_ctx(c); /* before the registry: its live graph allocations */
	fake_mem_release_ctx(c);
	fake_arrays_release_ctx(c);
	c->alive = false;
	fake_dev_ctx_down(c->dev);
	fake_broadcast();
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct fake_thread *t = fake_thread();
	REQUIRE_INIT();
	if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (t->ctx_depth == CTX_STACK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *c = ctx_new(dev, false, flags);
	if (c)
		ctx_activate(c);
	pthread_mutex_unlock(&fake_lock);
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	t->ctx_stack[t->ctx_depth++] = c;
	*pctx = c;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	COUNT(cuCtxCreate);
	return ctx_create(pctx, flags, dev);
}

FAKE_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	COUNT(cuCtxCreate_v2);
	return ctx_create(pctx, flags, dev);
}

/* Execution-affinity parameters are accepted and ignored (no SM partitions). */
FAKE_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
				 unsigned int flags, CUdevice dev)
{
	COUNT(cuCtxCreate_v3);
	CUresult r = fake_initialized();
	if (r)
		return r;
	if (numParams < 0 || (numParams > 0 && !paramsArray))
		return CUDA_ERROR_INVALID_VALUE;
	return ctx_create(pctx, flags, dev);
}

FAKE_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
				 CUdevice dev)
{
	COUNT(cuCtxCreate_v4);
	/* ctxCreateParams may be NULL; the affinity/CIG parameters are ignored. */
	(void)ctxCreateParams;
	return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
	struct fake_thread *t = fake_thread();
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	if (!ctx || !fake_ctx_valid(ctx) || ctx->primary || !ctx->alive) {
		pthread_mutex_unlock(&fake_lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	ctx_teardown(ctx);
	pthread_mutex_unlock(&fake_lock);
	/* "If the context is current to the calling thread then it will also be
	 * popped from the current thread's context stack." */
	if (t->ctx_depth > 0 && t->ctx_stack[t->ctx_depth - 1] == ctx)
		t->ctx_depth--;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxDestroy(CUcontext ctx)
{
	COUNT(cuCtxDestroy);
	return ctx_destroy(ctx);
}

FAKE_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	COUNT(cuCtxDestroy_v2);
	return ctx_destroy(ctx);
}

static CUresult ctx_push(CUcontext ctx)
{
	struct fake_thread *t = fake_thread();
	REQUIRE_INIT();
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	bool ok = fake_ctx_valid(ctx) && ctx->alive;
	pthread_mutex_unlock(&fake_lock);
	if (!ok)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (t->ctx_depth == CTX_STACK_MAX)
		return CUDA_ERROR_INVALID_VALUE;
	t->ctx_stack[t->ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent(CUcontext ctx)
{
	COUNT(cuCtxPushCurrent);
	return ctx_push(ctx);
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	COUNT(cuCtxPushCurrent_v2);
	return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext *pctx)
{
	struct fake_thread *t = fake_thread();
	REQUIRE_INIT();
	if (t->ctx_depth == 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct CUctx_st *c = t->ctx_stack[--t->ctx_depth];
	if (pctx)
		*pctx = c;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent(CUcontext *pctx)
{
	COUNT(cuCtxPopCurrent);
	return ctx_pop(pctx);
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	COUNT(cuCtxPopCurrent_v2);
	return ctx_pop(pctx);
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
	struct fake_thread *t = fake_thread();
	COUNT(cuCtxSetCurrent);
	REQUIRE_INIT();
	if (!ctx) {
		if (t->ctx_depth > 0)
			t->ctx_depth--;
		return CUDA_SUCCESS;
	}
	pthread_mutex_lock(&fake_lock);
	bool ok = fake_ctx_valid(ctx) && ctx->alive;
	pthread_mutex_unlock(&fake_lock);
	if (!ok)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (t->ctx_depth == 0)
		t->ctx_depth = 1;
	t->ctx_stack[t->ctx_depth - 1] = ctx;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	COUNT(cuCtxGetCurrent);
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = fake_ctx_current();
	return CUDA_SUCCESS;
}

/* ctx == NULL means the current context (CUDA 13 _v2 forms). */
static CUresult ctx_get_device(CUdevice *device, CUcontext ctx)
{
	REQUIRE_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_SUCCESS;
	if (!ctx)
		r = fake_ctx_require(&ctx);
	else if (!fake_ctx_valid(ctx) || !ctx->alive)
		r = CUDA_ERROR_INVALID_CONTEXT;
	if (!r)
		*device = ctx->dev;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *device)
{
	COUNT(cuCtxGetDevice);
	return ctx_get_device(device, NULL);
}

FAKE_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
	COUNT(cuCtxGetDevice_v2);
	return ctx_get_device(device, ctx);
}

static CUresult ctx_synchronize(CUcontext ctx)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_SUCCESS;
	if (!ctx)
		r = fake_ctx_require(&ctx);
	else if (!fake_ctx_valid(ctx) || !ctx->alive)
		r = CUDA_ERROR_INVALID_CONTEXT;
	/* Illegal while a stream of the context captures: fails, and
	 * invalidates the capture (fake-capture.c). */
	if (!r)
		r = fake_capture_check_sync(ctx);
	if (!r) {
		fake_ctx_drain(ctx);
		fake_count_device_sync();
		fake_pools_trim_at_sync(ctx->dev);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuCtxSynchronize(void)
{
	COUNT(cuCtxSynchronize);
	return ctx_synchronize(NULL);
}

FAKE_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	COUNT(cuCtxSynchronize_v2);
	return ctx_synchronize(ctx);
}

/* ---- primary contexts ------------------------------------------------------------- */

static struct CUctx_st *primary_of(int dev)
{
	struct fake_dev *d = &fake_cfg.dev[dev];
	if (!d->primary)
		d->primary = ctx_new(dev, true, 0);
	return d->primary;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	COUNT(cuDevicePrimaryCtxRetain);
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *c = primary_of(dev);
	if (c) {
		if (c->refcount++ == 0)
			ctx_activate(c);
		*pctx = c;
	}
	pthread_mutex_unlock(&fake_lock);
	return c ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult primary_release(CUdevice dev)
{
	REQUIRE_INIT();
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *c = fake_cfg.dev[dev].primary;
	CUresult r = CUDA_SUCCESS;
	if (!c || c->refcount == 0)
		r = CUDA_ERROR_INVALID_CONTEXT; /* released more often than retained */
	else if (--c->refcount == 0)
		ctx_teardown(c);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	COUNT(cuDevicePrimaryCtxRelease);
	return primary_release(dev);
}

FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	COUNT(cuDevicePrimaryCtxRelease_v2);
	return primary_release(dev);
}

/* Reset: "Destroy all allocations and reset all state on the primary
 * context ... Resetting the primary context does not release it, an
 * application that has retained the primary context should explicitly
 * release its usage", and "it is safe for other modules to call
 * cuDevicePrimaryCtxRelease() even after resetting the device" (driver API,
 * cuDevicePrimaryCtxReset_v2). So everything the context holds is freed,
 * and the references stay: a context still retained comes back at once
 * under the same handle with fresh state (its overhead charged again), and
 * its last release later tears it down as usual. Resetting an inactive
 * primary context is legal and changes nothing. */
static CUresult primary_reset(CUdevice dev)
{
	REQUIRE_INIT();
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *c = fake_cfg.dev[dev].primary;
	if (c && c->alive) {
		ctx_teardown(c);
		c->flags = 0;
		if (c->refcount > 0)
			ctx_activate(c);
	}
	pthread_mutex_unlock(&fake_lock);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	COUNT(cuDevicePrimaryCtxReset);
	return primary_reset(dev);
}

FAKE_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	COUNT(cuDevicePrimaryCtxReset_v2);
	return primary_reset(dev);
}

static CUresult primary_set_flags(CUdevice dev, unsigned int flags)
{
	REQUIRE_INIT();
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *c = primary_of(dev);
	if (c)
		c->flags = flags;
	pthread_mutex_unlock(&fake_lock);
	return c ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKE_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	COUNT(cuDevicePrimaryCtxSetFlags);
	return primary_set_flags(dev, flags);
}

FAKE_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	COUNT(cuDevicePrimaryCtxSetFlags_v2);
	return primary_set_flags(dev, flags);
}

FAKE_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	COUNT(cuDevicePrimaryCtxGetState);
	REQUIRE_INIT();
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	if (fake_check_dev(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *c = fake_cfg.dev[dev].primary;
	*flags = c ? c->flags : 0;
	*active = c && c->alive;
	pthread_mutex_unlock(&fake_lock);
	return CUDA_SUCCESS;
}
