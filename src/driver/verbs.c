/* verbs: the driver calls the other layers make (contracts in driver.h).
 * No state: thread-safe as driver.h says. */
#include "driver/driver.h"

#include <stdlib.h>
#include <string.h>

bool cumemcap_driver_push_ctx(CUcontext ctx)
{
	CUcontext cur = NULL;
	return real_cuCtxGetCurrent && real_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != ctx &&
	       real_cuCtxPushCurrent_v2 && real_cuCtxPushCurrent_v2(ctx) == CUDA_SUCCESS;
}

void cumemcap_driver_pop_ctx(bool pushed)
{
	CUcontext popped;
	if (pushed && real_cuCtxPopCurrent_v2)
		real_cuCtxPopCurrent_v2(&popped);
}

CUmemoryPool cumemcap_driver_pool(int dev, bool current)
{
	PFN_cuDeviceGetMemPool_v11020 get = current ? real_cuDeviceGetMemPool : real_cuDeviceGetDefaultMemPool;
	CUmemoryPool pool;
	return get && get(&pool, dev) == CUDA_SUCCESS ? pool : NULL;
}

int cumemcap_driver_device_count(void)
{
	int count = 0;
	return real_cuDeviceGetCount && real_cuDeviceGetCount(&count) == CUDA_SUCCESS ? count : 0;
}

bool cumemcap_driver_pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, uint64_t *bytes)
{
	return real_cuMemPoolGetAttribute && real_cuMemPoolGetAttribute(pool, attr, bytes) == CUDA_SUCCESS;
}

bool cumemcap_driver_graph_mem(int dev, CUgraphMem_attribute attr, uint64_t *bytes)
{
	return real_cuDeviceGetGraphMemAttribute &&
	       real_cuDeviceGetGraphMemAttribute((CUdevice)dev, attr, bytes) == CUDA_SUCCESS;
}

bool cumemcap_driver_primary_active(CUdevice dev)
{
	unsigned int flags;
	int active = 0;
	return real_cuDevicePrimaryCtxGetState &&
	       real_cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active;
}

bool cumemcap_driver_stream_capturing(CUstream stream, bool ptsz, CUstreamCaptureStatus *status)
{
	PFN_cuStreamIsCapturing_v10000 is = ptsz ? real_cuStreamIsCapturing_ptsz : real_cuStreamIsCapturing;
	return is && is(stream, status) == CUDA_SUCCESS;
}

bool cumemcap_driver_describe(int dev, uint64_t *total, unsigned char uuid[16], char *pci, size_t pci_len)
{
	size_t t = 0;
	CUuuid u;
	if (!real_cuDeviceTotalMem_v2 || real_cuDeviceTotalMem_v2(&t, dev) != CUDA_SUCCESS)
		return false;
	*total = t;
	if (real_cuDeviceGetUuid && real_cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS)
		memcpy(uuid, u.bytes, 16);
	else
		memset(uuid, 0, 16);
	if (!real_cuDeviceGetPCIBusId || real_cuDeviceGetPCIBusId(pci, (int)pci_len, dev) != CUDA_SUCCESS)
		pci[0] = '\0';
	return true;
}

int cumemcap_driver_version(void)
{
	int v = 0;
	return real_cuDriverGetVersion && real_cuDriverGetVersion(&v) == CUDA_SUCCESS ? v : 0;
}

bool cumemcap_driver_stream_ctx(CUstream stream, CUcontext *ctx)
{
	CUcontext owner;
	if (!real_cuStreamGetCtx || real_cuStreamGetCtx(stream, &owner) != CUDA_SUCCESS || !owner)
		return false;
	*ctx = owner;
	return true;
}

bool cumemcap_driver_ctx_device(CUcontext ctx, CUdevice *dev)
{
	bool pushed = cumemcap_driver_push_ctx(ctx);
	CUresult r = pushed ? real_cuCtxGetDevice(dev) : CUDA_ERROR_INVALID_CONTEXT;
	cumemcap_driver_pop_ctx(pushed);
	return r == CUDA_SUCCESS;
}

bool cumemcap_driver_card_memory(CUcontext ctx, uint64_t *free, uint64_t *total)
{
	CUcontext cur = NULL;
	if (!ctx || !real_cuMemGetInfo_v2 || !real_cuCtxGetCurrent || real_cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
		return false;
	bool pushed = cur != ctx && cumemcap_driver_push_ctx(ctx);
	if (cur != ctx && !pushed)
		return false; /* the answer would be another context's */
	size_t f = 0, t = 0;
	CUresult r = real_cuMemGetInfo_v2(&f, &t);
	cumemcap_driver_pop_ctx(pushed);
	if (r != CUDA_SUCCESS)
		return false;
	*free = f;
	*total = t;
	return true;
}

#define GRAPH_MAX_DEPTH 8 /* child graphs deeper are not looked into */

static bool graph_walk(CUgraph graph, int depth, cumemcap_graph_alloc_fn each, void *arg)
{
	size_t n = 0;
	if (real_cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS)
		return false;
	if (n == 0)
		return true;
	CUgraphNode *nodes = malloc(n * sizeof(*nodes));
	if (!nodes)
		return false;
	bool ok = real_cuGraphGetNodes(graph, nodes, &n) == CUDA_SUCCESS;
	for (size_t i = 0; ok && i < n; i++) {
		CUgraphNodeType type;
		if (real_cuGraphNodeGetType(nodes[i], &type) != CUDA_SUCCESS)
			continue;
		if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
			CUDA_MEM_ALLOC_NODE_PARAMS p;
			memset(&p, 0, sizeof(p));
			if (real_cuGraphMemAllocNodeGetParams(nodes[i], &p) == CUDA_SUCCESS &&
			    p.poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE)
				each(arg, p.poolProps.location.id, p.bytesize);
		} else if (type == CU_GRAPH_NODE_TYPE_GRAPH && depth < GRAPH_MAX_DEPTH &&
			   real_cuGraphChildGraphNodeGetGraph) {
			CUgraph child;
			if (real_cuGraphChildGraphNodeGetGraph(nodes[i], &child) == CUDA_SUCCESS)
				ok = graph_walk(child, depth + 1, each, arg);
		}
	}
	free(nodes);
	return ok;
}

bool cumemcap_driver_graph_allocs(CUgraph graph, cumemcap_graph_alloc_fn each, void *arg)
{
	if (!real_cuGraphGetNodes || !real_cuGraphNodeGetType || !real_cuGraphMemAllocNodeGetParams)
		return false;
	return graph_walk(graph, 0, each, arg);
}
