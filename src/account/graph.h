/* graph: graph memory, what CUDA graphs' memory nodes take.
 *
 * Allocation nodes (cuGraphAddMemAllocNode, cuGraphAddNode with a
 * memory-allocation node, cuMemAllocAsync captured into a graph) take no
 * memory where they are made: a per-device graph memory pool maps physical
 * memory for an executable graph when it is uploaded or launched (the
 * first time, and again after cuDeviceGraphMemTrim unmapped it), keeps
 * what it reserved when graphs go, and gives it back only at a trim. So
 * graph memory is charged (ledger kind `graph`) by what the pool reserves,
 * CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, read back after each event that
 * can change it; and before an upload or launch that may map memory, the
 * growth it can cause is reserved against the limit:
 *
 *     growth <= max(0, need - (reserved - used))
 *
 * where `need` is the sum of the executable graph's allocation nodes on
 * that GPU (each rounded up to the pool granularity, 2 MiB; found by
 * walking the graph at instantiation, child graphs included) and
 * reserved - used is what the pool holds unmapped. An upper bound: the
 * driver may share physical memory between allocations whose lifetimes do
 * not overlap. A launch or upload that would pass the limit, and an
 * instantiation of a graph that could not be launched within it now, get
 * CUDA_ERROR_OUT_OF_MEMORY, as from a full card.
 *
 * Launching a graph into a capturing stream captures it (no memory is
 * mapped) and passes through.
 *
 * Thread safety: one mutex guards the table of executable graphs and the
 * per-device figures and is never held across a driver call (fork takes
 * it); an xmutex is held across each reserved-memory query and the update
 * that follows, so updates apply in the order the driver answered. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"

/* The devices one executable graph may take memory on (a graph's nodes
 * rarely span more than one; past this, the rest is not checked). */
#define CUMEMCAP_GRAPH_DEVICES 4

struct cumemcap_graph_need {
	int dev;
	uint64_t bytes;
	uint64_t held; /* growth reserved in the ledger while the driver maps */
};

/* One instantiation, upload or launch under way. */
struct cumemcap_graph_op {
	const char *entry_point;
	int n;                 /* entries of need[]; -1: the graph is not known */
	bool map;              /* the call may map memory: settle after it */
	CUcontext ctx;
	struct cumemcap_graph_need need[CUMEMCAP_GRAPH_DEVICES];
};

/* Before cuGraphInstantiate*: find what `graph` needs and check it against
 * the limit (reserving the growth when `upload`, the instantiation uploads).
 * CUDA_ERROR_OUT_OF_MEMORY when it cannot fit. */
CUresult cumemcap_graph_instantiate_begin(struct cumemcap_graph_op *op, const char *entry_point,
					  CUgraph graph, bool upload);
/* After it: on success remember the executable graph. Returns r. */
CUresult cumemcap_graph_instantiate_end(struct cumemcap_graph_op *op, CUresult r,
					const CUgraphExec *exec);

/* Before cuGraphLaunch / cuGraphUpload (ptsz: the per-thread-stream entry
 * point): reserve the growth the call may cause. CUDA_ERROR_OUT_OF_MEMORY
 * when it would pass the limit. */
CUresult cumemcap_graph_launch_begin(struct cumemcap_graph_op *op, const char *entry_point,
				     CUgraphExec exec, CUstream stream, bool ptsz);
/* After it: read back what the pool reserves. Returns r. */
CUresult cumemcap_graph_launch_end(struct cumemcap_graph_op *op, CUresult r, CUgraphExec exec);

/* cuGraphExecDestroy succeeded. */
void cumemcap_graph_exec_destroyed(CUgraphExec exec);
/* cuDeviceGraphMemTrim(dev) succeeded: every executable graph on dev may
 * have been unmapped. */
void cumemcap_graph_trimmed(int dev);
/* Context `ctx` died (death lock held as writer): its executable graphs went with
 * it; read every device's graph pool again. */
void cumemcap_graph_context_died(CUcontext ctx);

/* Fork: the table's lock across fork(); the child forgets every graph. */
void cumemcap_graph_lock(void);
void cumemcap_graph_unlock(void);
void cumemcap_graph_fork_child(void);
