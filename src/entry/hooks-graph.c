/* hooks-graph: the entry points through which CUDA graphs take graph
 * memory (instantiation, upload, launch, destruction, trim), every version
 * and per-thread variant, over graph.h.
 *
 * Thread safety: see graph.h. */
#include <stdio.h>

#include "account/graph.h"
#include "entry/hooks.h"

/* The 5-argument instantiation of CUDA 10.0 and 11.0 says why it refused
 * in the program's log buffer. */
static void refused_log(const struct cumemcap_graph_op *op, CUgraphNode *error_node, char *log,
			size_t size)
{
	if (error_node)
		*error_node = NULL;
	if (log && size)
		snprintf(log, size, "cumemcap: the graph's memory nodes (%d GPU%s) would pass the limit",
			 op->n, op->n == 1 ? "" : "s");
}

/* `upload`: it uploads too; a refusal (out of memory) runs `refused`. */
#define INSTANTIATE(name, params, upload, refused, call)                                           \
	CUMEMCAP_EXPORT CUresult CUDAAPI name params                                               \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		struct cumemcap_graph_op op;                                                       \
		CUresult r = cumemcap_graph_instantiate_begin(&op, __func__, hGraph, upload);      \
		if (r != CUDA_SUCCESS) {                                                           \
			refused;                                                                   \
			return r;                                                                  \
		}                                                                                  \
		return cumemcap_graph_instantiate_end(&op, call, phGraphExec);                     \
	}
#define WITH_LOG(name)                                                                             \
	INSTANTIATE(name,                                                                          \
		    (CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,           \
		     char *logBuffer, size_t bufferSize),                                          \
		    false, refused_log(&op, phErrorNode, logBuffer, bufferSize),                \
		    real_##name(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize))
WITH_LOG(cuGraphInstantiate)
WITH_LOG(cuGraphInstantiate_v2)
INSTANTIATE(cuGraphInstantiateWithFlags,
	    (CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags),
	    (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0, (void)0,
	    real_cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags))

/* A refusal is reported in the params as well. */
static void refused_params(CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	if (params) {
		params->hErrNode_out = NULL;
		params->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
	}
}

#define WITH_PARAMS(name)                                                                          \
	INSTANTIATE(name,                                                                          \
		    (CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p), \
		    p && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD), refused_params(p),        \
		    real_##name(phGraphExec, hGraph, p))
WITH_PARAMS(cuGraphInstantiateWithParams)
WITH_PARAMS(cuGraphInstantiateWithParams_ptsz)

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

LOCKED_ENTRY_AROUND(cuGraphExecDestroy, (CUgraphExec hGraphExec), (hGraphExec), (void)0,
		    cumemcap_graph_exec_destroyed(hGraphExec))
LOCKED_ENTRY_AROUND(cuDeviceGraphMemTrim, (CUdevice device), (device), (void)0,
		    cumemcap_graph_trimmed((int)device))
