/* hooks-graph: the entry points through which CUDA graphs take graph
 * memory — every instantiation (each may upload), upload and launch, the
 * executable graph's destruction and the pool's trim — in every version
 * and per-thread variant. Each is one line over a helper of graph.h; the
 * driver's answer reaches the program unchanged, and a refusal at the
 * limit is CUDA_ERROR_OUT_OF_MEMORY.
 *
 * Thread safety: see graph.h. */
#include <stdio.h>

#include "platform/export.h"
#include "account/graph.h"
#include "entry/hooks.h"

/* A refused instantiation says why where the program reads diagnostics. */
static void refused_log(CUresult r, const struct cumemcap_graph_op *op, CUgraphNode *error_node,
			char *log, size_t size)
{
	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		return;
	if (error_node)
		*error_node = NULL;
	if (log && size)
		snprintf(log, size, "cumemcap: the graph's memory nodes (%d GPU%s) would pass the limit",
			 op->n, op->n == 1 ? "" : "s");
}

/* The 5-argument instantiation of CUDA 10.0 and 11.0. */
static CUresult instantiate_log(PFN_cuGraphInstantiate_v11000 fn, const char *entry_point,
				CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
				char *log, size_t size)
{
	struct cumemcap_graph_op op;
	CUresult r = cumemcap_graph_instantiate_begin(&op, entry_point, graph, false);
	if (r != CUDA_SUCCESS) {
		refused_log(r, &op, error_node, log, size);
		return r;
	}
	return cumemcap_graph_instantiate_end(&op, fn(exec, graph, error_node, log, size), exec);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
						   CUgraphNode *phErrorNode, char *logBuffer,
						   size_t bufferSize)
{
	NEED(cuGraphInstantiate);
	HOLD_DEATH_LOCK();
	return instantiate_log(real_cuGraphInstantiate, __func__, phGraphExec, hGraph, phErrorNode,
			       logBuffer, bufferSize);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
						      CUgraphNode *phErrorNode, char *logBuffer,
						      size_t bufferSize)
{
	NEED(cuGraphInstantiate_v2);
	HOLD_DEATH_LOCK();
	return instantiate_log(real_cuGraphInstantiate_v2, __func__, phGraphExec, hGraph, phErrorNode,
			       logBuffer, bufferSize);
}

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

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
							     CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	NEED(cuGraphInstantiateWithParams);
	HOLD_DEATH_LOCK();
	return instantiate_params(real_cuGraphInstantiateWithParams, __func__, phGraphExec, hGraph,
				  instantiateParams);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
								  CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	NEED(cuGraphInstantiateWithParams_ptsz);
	HOLD_DEATH_LOCK();
	return instantiate_params(real_cuGraphInstantiateWithParams_ptsz, __func__, phGraphExec, hGraph,
				  instantiateParams);
}

/* Upload and launch share a prototype. */
static CUresult run(PFN_cuGraphLaunch_v10000 fn, const char *entry_point, bool ptsz,
		    CUgraphExec exec, CUstream stream)
{
	struct cumemcap_graph_op op;
	CUresult r = cumemcap_graph_launch_begin(&op, entry_point, exec, stream, ptsz);
	if (r != CUDA_SUCCESS)
		return r;
	return cumemcap_graph_launch_end(&op, fn(exec, stream), exec);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	NEED(cuGraphUpload);
	HOLD_DEATH_LOCK();
	return run(real_cuGraphUpload, __func__, false, hGraphExec, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	NEED(cuGraphUpload_ptsz);
	HOLD_DEATH_LOCK();
	return run(real_cuGraphUpload_ptsz, __func__, true, hGraphExec, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	NEED(cuGraphLaunch);
	HOLD_DEATH_LOCK();
	return run(real_cuGraphLaunch, __func__, false, hGraphExec, hStream);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	NEED(cuGraphLaunch_ptsz);
	HOLD_DEATH_LOCK();
	return run(real_cuGraphLaunch_ptsz, __func__, true, hGraphExec, hStream);
}

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
