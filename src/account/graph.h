/* graph: graph memory (docs/design.md, "Graph memory"), charged by what
 * each device's graph memory pool reserves. An upload or launch that may
 * map memory first reserves max(0, need - (reserved - used)).
 *
 * Thread safety: one mutex guards the table of executable graphs and the
 * per-device figures, never held across a driver call (fork takes it); an
 * xmutex is held across each pool query and the update that follows, so
 * updates apply in the order the driver answered. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"

/* The devices one executable graph may take memory on (more: unchecked). */
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

/* Before cuGraphInstantiate*: check what `graph` needs against the limit
 * (reserving the growth when the instantiation uploads).
 * CUDA_ERROR_OUT_OF_MEMORY when it cannot fit. */
CUresult cumemcap_graph_instantiate_begin(struct cumemcap_graph_op *op, const char *entry_point,
					  CUgraph graph, bool upload);
/* After it: on success remember the executable graph. Returns r. */
CUresult cumemcap_graph_instantiate_end(struct cumemcap_graph_op *op, CUresult r,
					const CUgraphExec *exec);

/* Before cuGraphLaunch / cuGraphUpload (ptsz: the per-thread-stream entry
 * point): reserve the growth the call may cause, or
 * CUDA_ERROR_OUT_OF_MEMORY. */
CUresult cumemcap_graph_launch_begin(struct cumemcap_graph_op *op, const char *entry_point,
				     CUgraphExec exec, CUstream stream, bool ptsz);
/* After it: read back what the pool reserves. Returns r. */
CUresult cumemcap_graph_launch_end(struct cumemcap_graph_op *op, CUresult r, CUgraphExec exec);

/* cuGraphExecDestroy succeeded. */
void cumemcap_graph_exec_destroyed(CUgraphExec exec);
/* cuDeviceGraphMemTrim(dev) succeeded: dev's graphs may be unmapped. */
void cumemcap_graph_trimmed(int dev);
/* Context `ctx` died (death lock held as writer) with its graphs. */
void cumemcap_graph_context_died(CUcontext ctx);

/* Fork: the table's lock across fork(); the child forgets every graph. */
void cumemcap_graph_lock(void);
void cumemcap_graph_unlock(void);
void cumemcap_graph_fork_child(void);
