/* hooks-graph: the entry points through which CUDA graphs take graph
 * memory (instantiation, upload, launch, an executable graph's destruction,
 * the pool's trim), every version and per-thread variant, over graph.h. A
 * refusal at the limit is CUDA_ERROR_OUT_OF_MEMORY.
 *
 * Thread safety: see graph.h. */
#include <stdio.h>

#include "platform/export.h"
#include "account/graph.h"
#include "entry/hooks.h"

/* The 5-argument instantiation of CUDA 10.0 and 11.0: a refusal says why
 * in the program's log buffer. */
static CUresult instantiate_log(PFN_cuGraphInstantiate_v11000 fn, const char *entry_point,
				CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
				char *log, size_t size)
{
	struct cumemcap_graph_op op;
	CUresult r = cumemcap_graph_instantiate_begin(&op, entry_point, graph, false);
	if (r == CUDA_ERROR_OUT_OF_MEMORY) {
		if (error_node)
			*error_node = NULL;
		if (log && size)
			snprintf(log, size, "cumemcap: the graph's memory nodes (%d GPU%s) would pass the limit",
				 op.n, op.n == 1 ? "" : "s");
	}
	if (r != CUDA_SUCCESS)
		return r;
	return cumemcap_graph_instantiate_end(&op, fn(exec, graph, error_node, log, size), exec);
}

LOCKED_ENTRY(cuGraphInstantiate,
	     (CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
	      size_t bufferSize),
	     instantiate_log(real_cuGraphInstantiate, __func__, phGraphExec, hGraph, phErrorNode,
			     logBuffer, bufferSize))
LOCKED_ENTRY(cuGraphInstantiate_v2,
	     (CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
	      size_t bufferSize),
	     instantiate_log(real_cuGraphInstantiate_v2, __func__, phGraphExec, hGraph, phErrorNode,
			     logBuffer, bufferSize))

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
							    unsigned long long flags)
{
	NEED(cuGraphInstantiateWithFlags);
	HOLD_DEATH_LOCK();
	struct cumemcap_graph_op op;
	CUresult r = cumemcap_graph_instantiate_begin(&op, __func__, hGraph,
						      (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0);
	if (r != CUDA_SUCCESS)
		return r;
	return cumemcap_graph_instantiate_end(&op, real_cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags),
					      phGraphExec);
}

static CUresult instantiate_params(PFN_cuGraphInstantiateWithParams_v12000 fn,
				   const char *entry_point, CUgraphExec *exec, CUgraph graph,
				   CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	struct cumemcap_graph_op op;
	bool upload = params && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
	CUresult r = cumemcap_graph_instantiate_begin(&op, entry_point, graph, upload);
	if (r != CUDA_SUCCESS) {
		if (params) {
			params->hErrNode_out = NULL;
			params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
		}
		return r;
	}
	return cumemcap_graph_instantiate_end(&op, fn(exec, graph, params), exec);
}

LOCKED_ENTRY(cuGraphInstantiateWithParams,
	     (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
	     instantiate_params(real_cuGraphInstantiateWithParams, __func__, phGraphExec, hGraph,
				instantiateParams))
LOCKED_ENTRY(cuGraphInstantiateWithParams_ptsz,
	     (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams),
	     instantiate_params(real_cuGraphInstantiateWithParams_ptsz, __func__, phGraphExec, hGraph,
				instantiateParams))

/* Upload and launch share a prototype. */
#define RUN(name, ptsz)                                                                            \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(CUgraphExec hGraphExec, CUstream hStream)            \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		struct cumemcap_graph_op op;                                                       \
		CUresult r = cumemcap_graph_launch_begin(&op, __func__, hGraphExec, hStream,       \
							 ptsz);                                    \
		if (r != CUDA_SUCCESS)                                                             \
			return r;                                                                  \
		return cumemcap_graph_launch_end(&op, real_##name(hGraphExec, hStream),            \
						 hGraphExec);                                      \
	}
RUN(cuGraphUpload, false)
RUN(cuGraphUpload_ptsz, true)
RUN(cuGraphLaunch, false)
RUN(cuGraphLaunch_ptsz, true)

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	NEED(cuGraphExecDestroy);
	HOLD_DEATH_LOCK();
	FORWARD_NOTING(real_cuGraphExecDestroy(hGraphExec), cumemcap_graph_exec_destroyed(hGraphExec));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
	NEED(cuDeviceGraphMemTrim);
	HOLD_DEATH_LOCK();
	FORWARD_NOTING(real_cuDeviceGraphMemTrim(device), cumemcap_graph_trimmed((int)device));
}
