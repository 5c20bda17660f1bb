/* graph: graph memory under a cap.
 *
 *   graph DOOR CASE
 *
 * CUDA graphs' allocation nodes take memory from the device's graph memory
 * pool when an executable graph is uploaded or launched; the pool keeps
 * it until cuDeviceGraphMemTrim. The shim charges what the pool reserves
 * (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) and refuses an instantiation,
 * upload or launch that would pass the limit with
 * CUDA_ERROR_OUT_OF_MEMORY. The fake models the pool
 * (tests/fake/fake-graph.c); each case asserts on the driver's own figures
 * as well as the shim's. */
#include "common.h"

static struct api A;
static struct fake F;

static uint64_t graph_attr(CUgraphMem_attribute attr)
{
	cuuint64_t v = 0;
	OK(A.cuDeviceGetGraphMemAttribute(0, attr, &v));
	return v;
}

static uint64_t pool_reserved(void)
{
	return graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
}

/* A graph with one allocation node of `bytes` on GPU 0, freed in the
 * graph when `free_it`; the node's address in *dptr. */
static CUgraph alloc_graph(size_t bytes, bool free_it, CUdeviceptr *dptr)
{
	CUgraph g;
	OK(A.cuGraphCreate(&g, 0));
	CUDA_MEM_ALLOC_NODE_PARAMS p;
	memset(&p, 0, sizeof(p));
	p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.poolProps.location.id = 0;
	p.bytesize = bytes;
	CUgraphNode alloc, freed;
	OK(A.cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p));
	if (free_it)
		OK(A.cuGraphAddMemFreeNode(&freed, g, &alloc, 1, p.dptr));
	if (dptr)
		*dptr = p.dptr;
	return g;
}

/* The shim's graph figure is the pool's, and within the limit. */
static void agree(uint64_t limit)
{
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.graph == pool_reserved());
	CHECK(st.reserved <= limit);
}

/* Limit 256 MiB. A 192 MiB graph runs; a 128 MiB cuMemAlloc and a second
 * 128 MiB graph are refused while the first graph holds its memory; when
 * it is destroyed its memory is the pool's to reuse, and after a trim the
 * program's own allocations fit again. */
static void at_limit(void)
{
	use_primary(&A, 0);
	CUgraphExec e1, e2;
	CUgraph g1 = alloc_graph(192 * MiB, true, NULL);
	OK(A.cuGraphInstantiateWithFlags(&e1, g1, 0));
	CHECK(pool_reserved() == 0); /* instantiation maps nothing */
	OK(A.cuGraphLaunch(e1, NULL));
	CHECK(pool_reserved() == 192 * MiB);
	agree(256 * MiB);

	CUdeviceptr p;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&p, 128 * MiB));
	CUgraph g2 = alloc_graph(128 * MiB, true, NULL);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuGraphInstantiateWithFlags(&e2, g2, 0));
	CHECK(shim_stats(0).refusals == 2);

	/* Relaunching needs nothing new, even at the limit. */
	OK(A.cuGraphLaunch(e1, NULL));
	OK(A.cuGraphExecDestroy(e1));
	CHECK(pool_reserved() == 192 * MiB); /* kept by the pool */
	OK(A.cuGraphInstantiateWithFlags(&e2, g2, 0));
	OK(A.cuGraphLaunch(e2, NULL));
	CHECK(pool_reserved() == 192 * MiB); /* served from what it kept */
	agree(256 * MiB);

	OK(A.cuDeviceGraphMemTrim(0));
	CHECK(pool_reserved() == 0);
	CHECK(shim_stats(0).graph == 0);
	OK(A.cuMemAlloc(&p, 128 * MiB));
	/* e2 was unmapped by the trim: launching it maps 128 MiB again, which
	 * just fits; then nothing more does. */
	OK(A.cuGraphLaunch(e2, NULL));
	CHECK(pool_reserved() == 128 * MiB);
	agree(256 * MiB);
	CUdeviceptr q;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&q, 2 * MiB));
	OK(A.cuMemFree(p));
	OK(A.cuGraphExecDestroy(e2));
	OK(A.cuGraphDestroy(g1));
	OK(A.cuGraphDestroy(g2));
	OK(A.cuDeviceGraphMemTrim(0));
	CHECK(shim_stats(0).graph == 0 && pool_reserved() == 0);
}

/* Limit 256 MiB. Room taken between instantiation and launch: the launch
 * is refused and maps nothing; an upload, the same. With room again, the
 * upload maps and the launch after it needs nothing. */
static void launch_over(void)
{
	use_primary(&A, 0);
	CUgraphExec e;
	CUgraph g = alloc_graph(128 * MiB, true, NULL);
	OK(A.cuGraphInstantiateWithFlags(&e, g, 0));
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 192 * MiB));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuGraphLaunch(e, NULL));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuGraphUpload(e, NULL));
	CHECK(pool_reserved() == 0);
	CHECK(shim_stats(0).refusals == 2);
	OK(A.cuMemFree(p));
	OK(A.cuGraphUpload(e, NULL));
	CHECK(pool_reserved() == 128 * MiB);
	agree(256 * MiB);
	OK(A.cuMemAlloc(&p, 128 * MiB)); /* exactly the rest */
	OK(A.cuGraphLaunch(e, NULL));    /* mapped at the upload */
	agree(256 * MiB);
	OK(A.cuMemFree(p));
	OK(A.cuGraphExecDestroy(e));
	OK(A.cuGraphDestroy(g));
}

/* Limit 96 MiB. cuMemAllocAsync captured into a graph takes nothing then
 * (it becomes an allocation node), even past the limit; the graph's
 * instantiation is what is refused. A graph within the limit runs, and
 * its allocation, not freed in the graph, lives after the launch until
 * the program frees it. */
static void captured(void)
{
	use_primary(&A, 0);
	CUstream s;
	OK(A.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	CUdeviceptr big, small;
	CUgraph g;
	CUgraphExec e;
	OK(A.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	OK(A.cuMemAllocAsync(&big, 128 * MiB, s));
	OK(A.cuMemFreeAsync(big, s));
	OK(A.cuStreamEndCapture(s, &g));
	struct cumemcap_stats st = shim_stats(0);
	CHECK(st.reserved == 0 && st.pool == 0 && st.refusals == 0);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuGraphInstantiateWithFlags(&e, g, 0));
	CHECK(shim_stats(0).refusals == 1);
	OK(A.cuGraphDestroy(g));

	OK(A.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	OK(A.cuMemAllocAsync(&small, 64 * MiB, s));
	OK(A.cuStreamEndCapture(s, &g));
	OK(A.cuGraphInstantiateWithFlags(&e, g, 0));
	OK(A.cuGraphLaunch(e, s));
	OK(A.cuStreamSynchronize(s));
	CHECK(pool_reserved() == 64 * MiB);
	agree(96 * MiB);
	/* The allocation is live: the program uses it, then frees it. */
	OK(A.cuMemsetD8(small, 0x5a, 4096));
	unsigned char back[4096];
	OK(A.cuMemcpyDtoH(back, small, sizeof(back)));
	CHECK(back[0] == 0x5a && back[4095] == 0x5a);
	OK(A.cuMemFreeAsync(small, s));
	OK(A.cuStreamSynchronize(s));
	OK(A.cuGraphExecDestroy(e));
	OK(A.cuGraphDestroy(g));
	OK(A.cuDeviceGraphMemTrim(0));
	CHECK(shim_stats(0).graph == 0 && pool_reserved() == 0);
	OK(A.cuStreamDestroy(s));
}

/* Limit 128 MiB. Instantiations that upload are charged there, through
 * each entry point: WithFlags and WithParams with the upload flag (the
 * refused one says so in result_out), the legacy 5-argument one, and a
 * graph built with cuGraphAddNode. */
static void instantiate_kinds(void)
{
	use_primary(&A, 0);
	CUgraphExec e;
	CUdeviceptr p;
	OK(A.cuMemAlloc(&p, 64 * MiB));

	CUgraph g = alloc_graph(96 * MiB, true, NULL);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY,
		 A.cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD));
	CUDA_GRAPH_INSTANTIATE_PARAMS ip;
	memset(&ip, 0, sizeof(ip));
	ip.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD;
	ip.result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuGraphInstantiateWithParams(&e, g, &ip));
	CHECK(ip.result_out == CUDA_GRAPH_INSTANTIATE_ERROR);
	if (A.cuGraphInstantiate_legacy) {
		char log[256] = "";
		CUgraphNode bad = (CUgraphNode)1;
		CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuGraphInstantiate_legacy(&e, g, &bad, log, sizeof(log)));
		CHECK(bad == NULL && strstr(log, "limit") != NULL);
	}
	CHECK(pool_reserved() == 0);
	OK(A.cuMemFree(p));

	OK(A.cuGraphInstantiateWithParams(&e, g, &ip));
	CHECK(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
	CHECK(pool_reserved() == 96 * MiB); /* uploaded at instantiation */
	agree(128 * MiB);
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemAlloc(&p, 64 * MiB));
	OK(A.cuGraphExecDestroy(e));
	OK(A.cuGraphDestroy(g));
	OK(A.cuDeviceGraphMemTrim(0));
	CHECK(shim_stats(0).graph == 0);

	/* cuGraphAddNode with a memory-allocation node. */
	OK(A.cuGraphCreate(&g, 0));
	CUgraphNodeParams np;
	memset(&np, 0, sizeof(np));
	np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
	np.alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	np.alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	np.alloc.poolProps.location.id = 0;
	np.alloc.bytesize = 160 * MiB;
	CUgraphNode n;
	OK(A.cuGraphAddNode(&n, g, NULL, NULL, 0, &np));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuGraphInstantiateWithFlags(&e, g, 0));
	OK(A.cuGraphDestroy(g));
	CHECK(pool_reserved() == 0 && shim_stats(0).reserved == 0);
}

/* No limit: the figure follows the pool through launch, exec destroy,
 * trim and the death of the context that ran the graph. */
static void context_death(void)
{
	CUcontext ctx;
	CUdevice dev;
	OK(A.cuDeviceGet(&dev, 0));
	OK(A.cuDevicePrimaryCtxRetain(&ctx, dev));
	OK(A.cuCtxSetCurrent(ctx));
	CUgraphExec e;
	CUgraph g = alloc_graph(64 * MiB, true, NULL);
	OK(A.cuGraphInstantiateWithFlags(&e, g, 0));
	OK(A.cuGraphLaunch(e, NULL));
	CHECK(shim_stats(0).graph == 64 * MiB);
	CHECK(pool_reserved() == 64 * MiB);
	OK(A.cuGraphDestroy(g));
	OK(A.cuDevicePrimaryCtxReset(dev)); /* the executable graph goes with it */
	OK(A.cuDevicePrimaryCtxRetain(&ctx, dev));
	OK(A.cuCtxSetCurrent(ctx));
	CHECK(pool_reserved() == 0);
	CHECK(shim_stats(0).graph == 0);
	CHECK(shim_stats(0).reserved == 0);
	OK(A.cuDevicePrimaryCtxRelease(dev));
	OK(A.cuDevicePrimaryCtxRelease(dev));
}

int main(int argc, char **argv)
{
	load_api(argc, argv, &A, &F);
	const char *c = argc > 2 ? argv[2] : "";
	OK(A.cuInit(0));
	if (strcmp(c, "at-limit") == 0)
		at_limit();
	else if (strcmp(c, "launch-over") == 0)
		launch_over();
	else if (strcmp(c, "captured") == 0)
		captured();
	else if (strcmp(c, "instantiate-kinds") == 0)
		instantiate_kinds();
	else if (strcmp(c, "context-death") == 0)
		context_death();
	else {
		fprintf(stderr, "graph: unknown case \"%s\"\n", c);
		return 2;
	}
	printf("graph %s %s: ok\n", door, c);
	return 0;
}
