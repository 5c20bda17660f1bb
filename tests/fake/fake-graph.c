/* fake-graph: graphs, their nodes, executable graphs and graph memory, with
 * the rules the driver API documents (doc comments of cuda.h, cited by
 * function name below; the CUDA programming guide's "Graph Memory Nodes").
 *
 * Graphs hold nodes in the order they were added; the fake keeps no edges
 * (dependencies are checked, then forgotten) and runs a graph's nodes in
 * that order. Nodes: operations captured from a stream (memcpy, memset,
 * host, event record/wait nodes), empty nodes, child graph nodes, memory
 * allocation and free nodes. Nodes of other types cannot be built here:
 * a kernel node has no function the fake could have made (NULL function:
 * CUDA_ERROR_INVALID_VALUE, any other: CUDA_ERROR_INVALID_HANDLE, as
 * cuLaunchKernel answers); memcpy, memset, host, event, semaphore, memop
 * and conditional nodes given to cuGraphAddNode are CUDA_ERROR_NOT_SUPPORTED
 * (a listed code of cuGraphAddNode; a limit of the fake, not the driver's
 * answer: extend the fake if a test needs them).
 *
 * Allocation nodes (cuGraphAddMemAllocNode, cuGraphAddNode with
 * CU_GRAPH_NODE_TYPE_MEM_ALLOC, and cuMemAllocAsync/cuMemAllocFromPoolAsync
 * on a capturing stream) get a fixed address at creation, returned in dptr:
 * "The allocation's address remains fixed across instantiations and
 * launches" (cuGraphAddMemAllocNode). It is a range of host address space
 * (mmap NORESERVE, bytesize rounded up to 2 MiB) the node owns, so it never
 * overlaps another allocation of the fake. poolProps: allocType PINNED,
 * handleTypes NONE ("IPC is not supported"), a DEVICE location with a valid
 * ordinal, at most one access descriptor per device; otherwise, or bytesize
 * 0, CUDA_ERROR_INVALID_VALUE. Creating a node takes no device memory.
 *
 * Free nodes (cuGraphAddMemFreeNode, cuGraphAddNode with MEM_FREE, and
 * cuMemFreeAsync of an allocation node's address on a capturing stream):
 * CUDA_ERROR_INVALID_VALUE for "an allocation twice in the same graph", "an
 * address that was not returned by an allocation node", "an invalid
 * address", and, as "It is not possible to free an allocation in both the
 * owning graph and another graph", a free node in the owning graph once
 * another graph frees it or the other way round (cuGraphAddMemAllocNode).
 * A cuMemFreeAsync of a stream-ordered pool allocation on a capturing
 * stream stays what it was before (fake-pool.c): a node of type MEM_FREE
 * whose block goes back when the graph goes, never run by a launch.
 *
 * Restrictions on graphs with memory nodes (cuGraphAddMemAllocNode): "The
 * graph can only be used in a child node if the ownership is moved to the
 * parent" (cuGraphAddChildGraphNode, which clones: CUDA_ERROR_INVALID_VALUE;
 * cuGraphAddNode with CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE moves it, and the
 * moved graph "Cannot be independently instantiated or destroyed" and
 * "Cannot have additional memory allocation or free nodes added":
 * CUDA_ERROR_INVALID_VALUE); "Only one instantiation of the graph may exist
 * at any point in time" (a second cuGraphInstantiate*: CUDA_ERROR_INVALID_VALUE,
 * the only error listed); "The graph cannot be cloned" (cuGraphClone:
 * CUDA_ERROR_NOT_SUPPORTED, per its note "Cloning is not supported for
 * graphs which contain memory allocation nodes, memory free nodes"). Memory
 * nodes cannot be added to the graph of a child node at all
 * (cuGraphChildGraphNodeGetGraph: CUDA_ERROR_INVALID_VALUE).
 *
 * Graph memory pool, one per device (cuDeviceGetGraphMemAttribute): USED
 * is "memory currently associated with graphs" - the mapped allocation
 * nodes of executable graphs plus live allocations whose executable graph
 * is gone; RESERVED is what the pool holds from the device, which counts as
 * used device memory (cuMemGetInfo, fakecuda_reserved, the fake NVML).
 * Instantiation maps nothing (except CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
 * which uploads). The first cuGraphUpload or cuGraphLaunch of an executable
 * graph, and the first after a trim unmapped it, maps each allocation node
 * (2 MiB rounded, no sharing between executable graphs): from the pool's
 * unused reserve (reserved - used) first, the shortfall charged to the
 * device - so an executable graph's growth is exactly
 * max(0, sum of unmapped rounded node sizes - (reserved - used)). When the
 * device cannot give it: CUDA_ERROR_OUT_OF_MEMORY, nothing changed.
 * RESERVED_MEM_HIGH/USED_MEM_HIGH are only reset, to 0
 * (cuDeviceSetGraphMemAttribute: "High watermark can only be reset to
 * zero"); any other set is CUDA_ERROR_INVALID_VALUE.
 *
 * Launch runs at the call, like the fake's legacy-stream work: allocation
 * and free nodes take effect in node order, then copies of the captured
 * operations go to the stream and the call waits for them. An allocation
 * not freed in the graph is live afterwards at its address (registry kind
 * FAKE_K_GRAPH: copies, sets and pointer queries work) until cuMemFree,
 * cuMemFreeAsync (at the call), a launched free node, or the next launch of
 * an executable graph instantiated with AUTO_FREE_ON_LAUNCH ("each launch
 * behave as though it called cuMemFreeAsync for every unfreed allocation").
 * A freed allocation's memory stays mapped to its executable graph (used).
 * "If any allocations created by hGraphExec remain unfreed (from a previous
 * launch) and hGraphExec was not instantiated with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, the launch will fail with
 * CUDA_ERROR_INVALID_VALUE" (cuGraphLaunch); the fake also refuses, with the
 * same code, a launch whose free node names an allocation not live then.
 * A launch into a capturing stream is captured: its operations become nodes
 * of the capture; a graph with memory nodes cannot become a child graph
 * node that way (cloned, see above), so that launch is
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, as any
 * call a capture cannot take; an upload into a capturing stream likewise.
 *
 * cuGraphExecDestroy: mapped memory goes back to the unused reserve (used
 * drops, reserved stays), except live allocations, which stay used until
 * freed. cuGraphDestroy frees no live allocation. cuDeviceGraphMemTrim:
 * "Blocks which are not in use by a graph that is either currently
 * executing or scheduled to execute are freed" - nothing is executing in
 * the fake, so every idle executable graph is unmapped and reserved drops
 * to used (live allocations). Context death (fake-ctx.c): its executable
 * graphs and live graph allocations go and the pool gives what they held
 * back to the device.
 *
 * Thread safety: everything under fake_lock; graphs, nodes, executable
 * graphs and ranges are found in global lists, so a stale handle is
 * CUDA_ERROR_INVALID_VALUE, never a dereference. A launch waiting for its
 * operations keeps a reference on its graph's nodes.
 */
#include "fake-extra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The fixed range of one allocation node. */
struct fake_gmem {
	uintptr_t base;
	size_t size, span;
	int dev;
	int refs;                     /* its allocation node, free nodes naming it, its live allocation */
	bool mapped;                  /* backed by the pool: counted in used */
	bool live;                    /* allocated: launched and not yet freed */
	bool sim;                     /* scratch: liveness while a launch is checked */
	struct fake_alloc *alloc;     /* registry entry while live */
	struct CUgraph_st *home;      /* graph of its allocation node (NULL once that is freed) */
	int frees_home, frees_other;  /* free nodes naming it in its home graph / in others */
	struct CUgraphExec_st *owner; /* the executable graph its mapping belongs to (NULL: none) */
	struct fake_gmem *next;
};

struct CUgraphNode_st {
	struct CUgraph_st *graph;
	CUgraphNodeType type;
	bool root;
	bool free_home;                  /* MEM_FREE in the allocation's own graph */
	struct fake_op *op;              /* captured operation */
	struct fake_gmem *mem;           /* MEM_ALLOC: its range; MEM_FREE: the range it frees */
	CUDA_MEM_ALLOC_NODE_PARAMS alloc; /* MEM_ALLOC: as given, dptr filled in */
	CUmemAccessDesc *access;         /* owned copy of alloc.accessDescs */
	CUdeviceptr free_addr;           /* MEM_FREE */
	struct CUgraph_st *child;        /* GRAPH: the embedded graph */
	struct CUgraphNode_st *next;
};

struct CUgraph_st {
	struct CUgraphNode_st *head, *tail;
	size_t nodes;
	bool has_mem;                 /* holds memory nodes (itself or a moved child) */
	struct CUgraphNode_st *parent; /* embedded in this child graph node */
	bool moved;                   /* embedded by CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE */
	struct CUgraphExec_st *exec;  /* has_mem: its one executable graph */
	int refs;                     /* executable graphs and running launches using its nodes */
	bool destroyed;
	struct CUgraph_st *next;
};

struct CUgraphExec_st {
	struct CUctx_st *ctx;
	unsigned long long flags;
	struct CUgraph_st *graph;        /* referenced while the executable graph exists */
	struct CUgraphNode_st **nodes;   /* flattened through child graphs, in order */
	size_t n;
	bool has_mem;
	struct CUgraphExec_st *next;
};

struct graph_pool {
	uint64_t reserved, reserved_high, used, used_high;
};

static struct CUgraph_st *graphs; /* every handle the program may use (embedded ones too) */
static struct CUgraphExec_st *execs;
static struct fake_gmem *gmems;
static struct graph_pool gpools[FAKE_MAX_DEVICES];

#define KNOWN_INSTANTIATE_FLAGS                                                                          \
	(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |          \
	 CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

/* ---- ranges and the pool ------------------------------------------------------ */

static struct fake_gmem *gmem_find(CUdeviceptr dptr)
{
	for (struct fake_gmem *m = gmems; m; m = m->next)
		if (m->base == dptr)
			return m;
	return NULL;
}

bool fake_graph_alloc_address(CUdeviceptr dptr)
{
	return gmem_find(dptr) != NULL;
}

bool fake_graph_range(uintptr_t p, size_t n)
{
	for (struct fake_gmem *m = gmems; m; m = m->next)
		if (p >= m->base && p - m->base <= m->size && n <= m->size - (p - m->base))
			return true;
	return false;
}

static CUresult gmem_new(int dev, size_t size, struct CUgraph_st *home, struct fake_gmem **out)
{
	if (size > SIZE_MAX - FAKE_GRANULARITY)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t span = fake_round_up(size, FAKE_GRANULARITY);
	void *va = fake_map(span, false);
	struct fake_gmem *m = va ? calloc(1, sizeof *m) : NULL;
	if (!m) {
		if (va)
			munmap(va, span);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	m->base = (uintptr_t)va;
	m->size = size;
	m->span = span;
	m->dev = dev;
	m->refs = 1;
	m->home = home;
	m->next = gmems;
	gmems = m;
	*out = m;
	return CUDA_SUCCESS;
}

static void gmem_unref(struct fake_gmem *m)
{
	if (--m->refs > 0)
		return;
	for (struct fake_gmem **pp = &gmems; *pp; pp = &(*pp)->next)
		if (*pp == m) {
			*pp = m->next;
			break;
		}
	munmap((void *)m->base, m->span);
	free(m);
}

static void gmem_unmap(struct fake_gmem *m)
{
	m->mapped = false;
	m->owner = NULL;
	gpools[m->dev].used -= m->span;
	madvise((void *)m->base, m->span, MADV_DONTNEED); /* the contents go with the memory */
}

/* Give up to bytes of the pool's unused reserve back to the device. */
static void pool_release(int dev, uint64_t bytes)
{
	struct graph_pool *p = &gpools[dev];
	uint64_t spare = p->reserved - p->used;
	if (bytes > spare)
		bytes = spare;
	p->reserved -= bytes;
	fake_dev_uncharge(dev, bytes);
}

/* m is allocated now, for ctx; a is its registry entry (ownership passes). */
static void gmem_make_live(struct fake_gmem *m, struct fake_alloc *a, struct CUctx_st *ctx)
{
	*a = (struct fake_alloc){
		.base = m->base, .size = m->size, .kind = FAKE_K_GRAPH, .dev = m->dev, .ctx = ctx,
		.buffer_id = fake_next_buffer_id(), .gmem = m,
	};
	fake_reg_insert(a);
	fake_cfg.dev[m->dev].live++;
	m->alloc = a;
	m->live = true;
	m->refs++;
}

/* The live allocation of m is freed; its memory stays mapped to its
 * executable graph, or goes back to the unused reserve if it has none. */
static void gmem_free_live(struct fake_gmem *m)
{
	fake_reg_remove(m->alloc);
	fake_cfg.dev[m->dev].live--;
	free(m->alloc);
	m->alloc = NULL;
	m->live = false;
	if (m->mapped && !m->owner)
		gmem_unmap(m);
	gmem_unref(m);
}

void fake_graph_free_alloc(struct fake_alloc *a)
{
	gmem_free_live(a->gmem); /* frees a */
}

/* ---- graphs and nodes ------------------------------------------------------------ */

bool fake_graph_valid(struct CUgraph_st *g)
{
	for (struct CUgraph_st *p = graphs; p; p = p->next)
		if (p == g)
			return true;
	return false;
}

static bool node_valid(struct CUgraphNode_st *n)
{
	for (struct CUgraph_st *g = graphs; g; g = g->next)
		for (struct CUgraphNode_st *p = g->head; p; p = p->next)
			if (p == n)
				return true;
	return false;
}

static struct CUgraph_st *graph_alloc(void)
{
	struct CUgraph_st *g = calloc(1, sizeof *g);
	if (g) {
		g->next = graphs;
		graphs = g;
	}
	return g;
}

struct CUgraph_st *fake_graph_new(void)
{
	return graph_alloc();
}

static void graph_unlink(struct CUgraph_st *g)
{
	for (struct CUgraph_st **pp = &graphs; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			break;
		}
}

/* Free g's nodes and g (already unlinked). */
static void graph_free(struct CUgraph_st *g)
{
	struct CUgraphNode_st *n = g->head;
	while (n) {
		struct CUgraphNode_st *next = n->next;
		if (n->op)
			fake_op_discard(n->op);
		if (n->child) {
			graph_unlink(n->child);
			graph_free(n->child);
		}
		if (n->mem) {
			if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
				n->mem->home = NULL;
			else if (n->free_home)
				n->mem->frees_home--;
			else
				n->mem->frees_other--;
			gmem_unref(n->mem);
		}
		free(n->access);
		free(n);
		n = next;
	}
	free(g);
}

static void graph_unref(struct CUgraph_st *g)
{
	if (--g->refs == 0 && g->destroyed)
		graph_free(g);
}

void fake_graph_destroy(struct CUgraph_st *g)
{
	graph_unlink(g);
	g->destroyed = true;
	if (g->refs == 0)
		graph_free(g);
}

static struct CUgraphNode_st *node_new(struct CUgraph_st *g, CUgraphNodeType type, bool root)
{
	struct CUgraphNode_st *n = calloc(1, sizeof *n);
	if (!n)
		return NULL;
	n->graph = g;
	n->type = type;
	n->root = root;
	return n;
}

static void node_append(struct CUgraph_st *g, struct CUgraphNode_st *n)
{
	if (g->tail)
		g->tail->next = n;
	else
		g->head = n;
	g->tail = n;
	g->nodes++;
}

static CUgraphNodeType op_node_type(enum fake_op_kind k)
{
	switch (k) {
	case FAKE_OP_COPY: return CU_GRAPH_NODE_TYPE_MEMCPY;
	case FAKE_OP_SET8:
	case FAKE_OP_SET32: return CU_GRAPH_NODE_TYPE_MEMSET;
	case FAKE_OP_HOSTFN: return CU_GRAPH_NODE_TYPE_HOST;
	case FAKE_OP_EVENT_RECORD: return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
	case FAKE_OP_WAIT_EVENT: return CU_GRAPH_NODE_TYPE_WAIT_EVENT;
	case FAKE_OP_POOL_FREE: return CU_GRAPH_NODE_TYPE_MEM_FREE;
	}
	return CU_GRAPH_NODE_TYPE_EMPTY;
}

void fake_graph_add_op(struct CUgraph_st *g, struct fake_op *op, bool root)
{
	struct CUgraphNode_st *n = node_new(g, op_node_type(op->kind), root);
	if (!n) {
		fake_op_discard(op); /* out of memory for a node: the operation is lost */
		return;
	}
	n->op = op;
	op->next = NULL;
	if (op->kind == FAKE_OP_POOL_FREE) {
		n->free_addr = (uintptr_t)op->dst;
		g->has_mem = true;
	}
	node_append(g, n);
}

/* Dependencies: nodes of g, no duplicates. */
static CUresult check_deps(struct CUgraph_st *g, const CUgraphNode *deps, size_t ndeps)
{
	if (ndeps && !deps)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < ndeps; i++) {
		bool found = false;
		for (struct CUgraphNode_st *n = g->head; n && !found; n = n->next)
			found = n == deps[i];
		if (!found)
			return CUDA_ERROR_INVALID_VALUE;
		for (size_t j = 0; j < i; j++)
			if (deps[j] == deps[i])
				return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult check_alloc_params(const CUDA_MEM_ALLOC_NODE_PARAMS *p)
{
	const CUmemPoolProps *pp = &p->poolProps;
	if (p->bytesize == 0 || pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE || pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
	    fake_check_dev(pp->location.id))
		return CUDA_ERROR_INVALID_VALUE;
	if (p->accessDescCount > (size_t)fake_cfg.ndev || (p->accessDescCount && !p->accessDescs))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < p->accessDescCount; i++) {
		const CUmemAccessDesc *d = &p->accessDescs[i];
		if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE || fake_check_dev(d->location.id) ||
		    d->flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult add_alloc(struct CUgraph_st *g, const CUDA_MEM_ALLOC_NODE_PARAMS *p, bool root,
			  struct CUgraphNode_st **out)
{
	if (g->parent)
		return CUDA_ERROR_INVALID_VALUE; /* a child node's graph takes no memory nodes */
	CUresult r = check_alloc_params(p);
	if (r)
		return r;
	struct CUgraphNode_st *n = node_new(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, root);
	if (n && p->accessDescCount && !(n->access = malloc(p->accessDescCount * sizeof *n->access))) {
		free(n);
		n = NULL;
	}
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	struct fake_gmem *m;
	if ((r = gmem_new(p->poolProps.location.id, p->bytesize, g, &m))) {
		free(n->access);
		free(n);
		return r;
	}
	if (p->accessDescCount)
		memcpy(n->access, p->accessDescs, p->accessDescCount * sizeof *n->access);
	n->alloc = *p;
	n->alloc.accessDescs = n->access;
	n->alloc.dptr = m->base;
	n->mem = m;
	node_append(g, n);
	g->has_mem = true;
	*out = n;
	return CUDA_SUCCESS;
}

static CUresult add_free(struct CUgraph_st *g, CUdeviceptr dptr, bool root, struct CUgraphNode_st **out)
{
	if (g->parent)
		return CUDA_ERROR_INVALID_VALUE;
	struct fake_gmem *m = gmem_find(dptr);
	if (!m)
		return CUDA_ERROR_INVALID_VALUE; /* not an allocation node's address */
	bool home = m->home == g;
	if (home ? m->frees_home || m->frees_other : m->frees_home > 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (struct CUgraphNode_st *p = g->head; p; p = p->next)
		if (p->type == CU_GRAPH_NODE_TYPE_MEM_FREE && p->mem == m)
			return CUDA_ERROR_INVALID_VALUE; /* twice in the same graph */
	struct CUgraphNode_st *n = node_new(g, CU_GRAPH_NODE_TYPE_MEM_FREE, root);
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->mem = m;
	n->free_addr = dptr;
	n->free_home = home;
	m->refs++;
	if (home)
		m->frees_home++;
	else
		m->frees_other++;
	node_append(g, n);
	g->has_mem = true;
	*out = n;
	return CUDA_SUCCESS;
}

CUresult fake_graph_add_alloc(struct CUgraph_st *g, int dev, size_t size, bool root, CUdeviceptr *dptr)
{
	CUDA_MEM_ALLOC_NODE_PARAMS p = {
		.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
			      .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev}},
		.bytesize = size,
	};
	struct CUgraphNode_st *n;
	CUresult r = add_alloc(g, &p, root, &n);
	if (!r)
		*dptr = n->alloc.dptr;
	return r;
}

CUresult fake_graph_add_free(struct CUgraph_st *g, CUdeviceptr dptr, bool root)
{
	if (!gmem_find(dptr))
		return CUDA_ERROR_NOT_FOUND;
	struct CUgraphNode_st *n;
	return add_free(g, dptr, root, &n);
}

/* A copy of src's nodes as a new graph (no memory nodes in src). */
static struct CUgraph_st *graph_clone(struct CUgraph_st *src)
{
	struct CUgraph_st *g = graph_alloc();
	for (struct CUgraphNode_st *s = src->head; g && s; s = s->next) {
		struct CUgraphNode_st *n = node_new(g, s->type, s->root);
		if (n && s->op && !(n->op = fake_op_clone(s->op, false))) {
			free(n);
			n = NULL;
		}
		if (n && s->child && !(n->child = graph_clone(s->child))) {
			if (n->op)
				fake_op_discard(n->op);
			free(n);
			n = NULL;
		}
		if (!n) {
			fake_graph_destroy(g);
			return NULL;
		}
		if (n->child)
			n->child->parent = n;
		node_append(g, n);
	}
	return g;
}

/* ---- graph entry points ------------------------------------------------------------- */

FAKE_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	COUNT(cuGraphCreate);
	REQUIRE_INIT();
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUgraph_st *g = graph_alloc();
	pthread_mutex_unlock(&fake_lock);
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = g;
	return CUDA_SUCCESS;
}

/* A graph embedded in a child node is destroyed with its parent (moved:
 * "Cannot be independently ... destroyed"): CUDA_ERROR_INVALID_VALUE. */
FAKE_API CUresult cuGraphDestroy(CUgraph hGraph)
{
	COUNT(cuGraphDestroy);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = fake_graph_valid(hGraph) && !hGraph->parent ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r && fake_capture_uses_graph(hGraph))
		r = CUDA_ERROR_ILLEGAL_STATE; /* still being captured into */
	if (!r)
		fake_graph_destroy(hGraph);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

static CUresult add_node_common(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t ndeps)
{
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!fake_graph_valid(g))
		return CUDA_ERROR_INVALID_VALUE;
	return check_deps(g, deps, ndeps);
}

FAKE_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					 size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
	COUNT(cuGraphAddMemAllocNode);
	REQUIRE_INIT();
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *n = NULL;
	CUresult r = add_node_common(phGraphNode, hGraph, dependencies, numDependencies);
	if (!r)
		r = add_alloc(hGraph, nodeParams, numDependencies == 0, &n);
	if (!r) {
		nodeParams->dptr = n->alloc.dptr;
		*phGraphNode = n;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					size_t numDependencies, CUdeviceptr dptr)
{
	COUNT(cuGraphAddMemFreeNode);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *n = NULL;
	CUresult r = add_node_common(phGraphNode, hGraph, dependencies, numDependencies);
	if (!r)
		r = add_free(hGraph, dptr, numDependencies == 0, &n);
	if (!r)
		*phGraphNode = n;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
	COUNT(cuGraphMemAllocNodeGetParams);
	REQUIRE_INIT();
	if (!params_out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = node_valid(hNode) && hNode->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && hNode->mem
			     ? CUDA_SUCCESS
			     : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*params_out = hNode->alloc;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
	COUNT(cuGraphMemFreeNodeGetParams);
	REQUIRE_INIT();
	if (!dptr_out)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = node_valid(hNode) && hNode->type == CU_GRAPH_NODE_TYPE_MEM_FREE ? CUDA_SUCCESS
										    : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*dptr_out = hNode->free_addr;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				      size_t numDependencies)
{
	COUNT(cuGraphAddEmptyNode);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *n = NULL;
	CUresult r = add_node_common(phGraphNode, hGraph, dependencies, numDependencies);
	if (!r && !(n = node_new(hGraph, CU_GRAPH_NODE_TYPE_EMPTY, numDependencies == 0)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		node_append(hGraph, n);
		*phGraphNode = n;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* A child graph node for child in g (lock held): cloned, or moved. */
static CUresult add_child(struct CUgraph_st *g, struct CUgraph_st *child, bool move, bool root,
			  struct CUgraphNode_st **out)
{
	if (!fake_graph_valid(child) || child->parent || child == g)
		return CUDA_ERROR_INVALID_VALUE;
	if (!move && child->has_mem)
		return CUDA_ERROR_INVALID_VALUE; /* "If childGraph contains allocation nodes, free nodes ... an error" */
	if (move) {
		/* a graph cannot hold itself, nor be moved while instantiated or captured into */
		for (struct CUgraph_st *p = g; p; p = p->parent ? p->parent->graph : NULL)
			if (p == child)
				return CUDA_ERROR_INVALID_VALUE;
		if (child->refs || fake_capture_uses_graph(child))
			return CUDA_ERROR_INVALID_VALUE;
		if (child->has_mem && (g->parent || g->exec))
			return CUDA_ERROR_INVALID_VALUE;
	}
	struct CUgraphNode_st *n = node_new(g, CU_GRAPH_NODE_TYPE_GRAPH, root);
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (move) {
		n->child = child;
		child->moved = true;
		if (child->has_mem)
			g->has_mem = true;
	} else if (!(n->child = graph_clone(child))) {
		free(n);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	n->child->parent = n;
	node_append(g, n);
	*out = n;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
					   size_t numDependencies, CUgraph childGraph)
{
	COUNT(cuGraphAddChildGraphNode);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *n = NULL;
	CUresult r = add_node_common(phGraphNode, hGraph, dependencies, numDependencies);
	if (!r)
		r = add_child(hGraph, childGraph, false, numDependencies == 0, &n);
	if (!r)
		*phGraphNode = n;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
	COUNT(cuGraphChildGraphNodeGetGraph);
	REQUIRE_INIT();
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = node_valid(hNode) && hNode->type == CU_GRAPH_NODE_TYPE_GRAPH ? CUDA_SUCCESS
										 : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*phGraph = hNode->child;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return false;
	return true;
}

/* cuGraphAddNode: "All unused bytes - that is, reserved0 and all bytes past
 * the utilized union member - must be set to zero". */
static CUresult add_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
			 CUgraphNodeParams *p)
{
	REQUIRE_INIT();
	if (!p || !all_zero(p->reserved0, sizeof p->reserved0) || p->reserved2)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *n = NULL;
	bool root = ndeps == 0;
	CUresult r = add_node_common(phGraphNode, hGraph, deps, ndeps);
	if (!r) {
		switch (p->type) {
		case CU_GRAPH_NODE_TYPE_EMPTY:
			if (!all_zero(p->reserved1, sizeof p->reserved1))
				r = CUDA_ERROR_INVALID_VALUE;
			else if (!(n = node_new(hGraph, CU_GRAPH_NODE_TYPE_EMPTY, root)))
				r = CUDA_ERROR_OUT_OF_MEMORY;
			else
				node_append(hGraph, n);
			break;
		case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
			CUDA_MEM_ALLOC_NODE_PARAMS a = {
				.poolProps = p->alloc.poolProps, .accessDescs = p->alloc.accessDescs,
				.accessDescCount = p->alloc.accessDescCount, .bytesize = p->alloc.bytesize,
			};
			r = add_alloc(hGraph, &a, root, &n);
			if (!r)
				p->alloc.dptr = n->alloc.dptr; /* an out parameter */
			break;
		}
		case CU_GRAPH_NODE_TYPE_MEM_FREE:
			r = add_free(hGraph, p->free.dptr, root, &n);
			break;
		case CU_GRAPH_NODE_TYPE_GRAPH:
			if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
			    p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
				r = CUDA_ERROR_INVALID_VALUE;
			else
				r = add_child(hGraph, p->graph.graph, p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE,
					      root, &n);
			break;
		case CU_GRAPH_NODE_TYPE_KERNEL:
			/* no function or kernel can exist in the fake (fake-module.c) */
			r = !p->kernel.func && !p->kernel.kern ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
			break;
		default:
			if ((unsigned)p->type > CU_GRAPH_NODE_TYPE_CONDITIONAL)
				r = CUDA_ERROR_INVALID_VALUE;
			else
				r = CUDA_ERROR_NOT_SUPPORTED; /* not built by the fake (see the top) */
		}
	}
	if (!r)
		*phGraphNode = n;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				 size_t numDependencies, CUgraphNodeParams *nodeParams)
{
	COUNT(cuGraphAddNode);
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

FAKE_API CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
				    const CUgraphEdgeData *dependencyData, size_t numDependencies,
				    CUgraphNodeParams *nodeParams)
{
	COUNT(cuGraphAddNode_v2);
	(void)dependencyData; /* edges are not kept */
	return add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

FAKE_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	COUNT(cuGraphNodeGetType);
	REQUIRE_INIT();
	if (!type)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = node_valid(hNode) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		*type = hNode->type;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* cuGraphGetNodes / cuGraphGetRootNodes: NULL array -> the count; else
 * fill up to *num, NULL the rest, *num = how many were filled. */
static CUresult get_nodes(CUgraph g, CUgraphNode *out, size_t *num, bool roots)
{
	REQUIRE_INIT();
	if (!num)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = fake_graph_valid(g) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		size_t k = 0;
		for (struct CUgraphNode_st *n = g->head; n; n = n->next) {
			if (roots && !n->root)
				continue;
			if (out && k < *num)
				out[k] = n;
			k++;
		}
		if (out) {
			for (size_t i = k; i < *num; i++)
				out[i] = NULL;
			if (k < *num)
				*num = k;
		} else {
			*num = k;
		}
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	COUNT(cuGraphGetNodes);
	return get_nodes(hGraph, nodes, numNodes, false);
}

FAKE_API CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes, size_t *numRootNodes)
{
	COUNT(cuGraphGetRootNodes);
	return get_nodes(hGraph, rootNodes, numRootNodes, true);
}

FAKE_API CUresult cuGraphClone(CUgraph *phGraphClone, CUgraph originalGraph)
{
	COUNT(cuGraphClone);
	REQUIRE_INIT();
	if (!phGraphClone)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = fake_graph_valid(originalGraph) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r && originalGraph->has_mem)
		r = CUDA_ERROR_NOT_SUPPORTED; /* "Cloning is not supported for graphs which contain memory ... nodes" */
	struct CUgraph_st *g = NULL;
	if (!r && !(g = graph_clone(originalGraph)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r)
		*phGraphClone = g;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* ---- executable graphs ---------------------------------------------------------------- */

static bool exec_valid(struct CUgraphExec_st *e)
{
	for (struct CUgraphExec_st *p = execs; p; p = p->next)
		if (p == e)
			return true;
	return false;
}

/* Append g's nodes, through child graphs, to e->nodes (cap: capacity). */
static bool flatten(struct CUgraphExec_st *e, struct CUgraph_st *g, size_t *cap)
{
	for (struct CUgraphNode_st *n = g->head; n; n = n->next) {
		if (n->child) {
			if (!flatten(e, n->child, cap))
				return false;
			continue;
		}
		if (e->n == *cap) {
			size_t c = *cap ? *cap * 2 : 16;
			struct CUgraphNode_st **v = realloc(e->nodes, c * sizeof *v);
			if (!v)
				return false;
			e->nodes = v;
			*cap = c;
		}
		e->nodes[e->n++] = n;
		if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
			e->has_mem = true;
	}
	return true;
}

/* Executable graph e goes; unmapped[dev] += what went back to the unused
 * reserve (may be NULL). */
static void exec_free(struct CUgraphExec_st *e, uint64_t *unmapped)
{
	for (struct CUgraphExec_st **pp = &execs; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	for (size_t i = 0; i < e->n; i++) {
		struct fake_gmem *m = e->nodes[i]->mem;
		if (e->nodes[i]->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || m->owner != e)
			continue;
		if (m->live) {
			m->owner = NULL; /* stays used until freed */
		} else {
			if (unmapped)
				unmapped[m->dev] += m->span;
			gmem_unmap(m);
		}
	}
	if (e->graph->exec == e)
		e->graph->exec = NULL;
	graph_unref(e->graph);
	free(e->nodes);
	free(e);
}

/* Map e's allocation nodes that are not (lock held): from the unused
 * reserve first, the rest charged to the device; all or nothing. */
static CUresult exec_map(struct CUgraphExec_st *e)
{
	uint64_t need[FAKE_MAX_DEVICES] = {0}, grow[FAKE_MAX_DEVICES] = {0};
	for (size_t i = 0; i < e->n; i++) {
		struct fake_gmem *m = e->nodes[i]->mem;
		if (e->nodes[i]->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && !m->mapped)
			need[m->dev] += m->span;
	}
	for (int d = 0; d < fake_cfg.ndev; d++) {
		uint64_t unused = gpools[d].reserved - gpools[d].used;
		grow[d] = need[d] > unused ? need[d] - unused : 0;
		if (grow[d] && fake_dev_charge(d, grow[d])) {
			while (d-- > 0)
				fake_dev_uncharge(d, grow[d]);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	for (int d = 0; d < fake_cfg.ndev; d++) {
		struct graph_pool *p = &gpools[d];
		p->reserved += grow[d];
		if (p->reserved > p->reserved_high)
			p->reserved_high = p->reserved;
	}
	for (size_t i = 0; i < e->n; i++) {
		struct fake_gmem *m = e->nodes[i]->mem;
		if (e->nodes[i]->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || m->mapped)
			continue;
		m->mapped = true;
		m->owner = e;
		struct graph_pool *p = &gpools[m->dev];
		p->used += m->span;
		if (p->used > p->used_high)
			p->used_high = p->used;
	}
	return CUDA_SUCCESS;
}

/* The stream argument of an upload or launch (lock held): a capturing
 * stream cannot take it (its capture is invalidated). */
static CUresult exec_stream(CUstream h, bool pt, struct CUctx_st **ctx, struct CUstream_st **s)
{
	*ctx = NULL;
	CUresult r = fake_stream_lookup(h, pt, ctx, s);
	if (!r && *s && fake_stream_capture(*s)) {
		fake_capture_invalidate(fake_stream_capture(*s));
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	return r;
}

static CUresult upload(CUgraphExec e, CUstream h, bool pt)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	struct CUstream_st *s;
	CUresult r = exec_valid(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		r = exec_stream(h, pt, &ctx, &s);
	if (!r)
		r = exec_map(e);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	COUNT(cuGraphUpload);
	return upload(hGraphExec, hStream, false);
}

FAKE_API CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	COUNT(cuGraphUpload_ptsz);
	return upload(hGraphExec, hStream, true);
}

/* Memory nodes of e in order, after checking the launch may happen. */
static CUresult launch_memory(struct CUgraphExec_st *e)
{
	size_t nalloc = 0;
	for (size_t i = 0; i < e->n; i++) {
		struct fake_gmem *m = e->nodes[i]->mem;
		if (m)
			m->sim = m->live;
	}
	for (size_t i = 0; i < e->n; i++) {
		struct CUgraphNode_st *n = e->nodes[i];
		if (!n->mem)
			continue;
		if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
			if (n->mem->sim && !(e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
				return CUDA_ERROR_INVALID_VALUE; /* unfreed from a previous launch */
			n->mem->sim = true;
			nalloc++;
		} else {
			if (!n->mem->sim)
				return CUDA_ERROR_INVALID_VALUE; /* nothing allocated there to free */
			n->mem->sim = false;
		}
	}
	/* registry entries made ready first: past the mapping nothing fails */
	struct fake_alloc **each = nalloc ? calloc(nalloc, sizeof *each) : NULL;
	bool ok = !nalloc || each;
	for (size_t i = 0; ok && i < nalloc; i++)
		ok = (each[i] = malloc(sizeof **each)) != NULL;
	CUresult r = ok ? exec_map(e) : CUDA_ERROR_OUT_OF_MEMORY;
	if (r) {
		for (size_t i = 0; each && i < nalloc; i++)
			free(each[i]);
		free(each);
		return r;
	}
	size_t k = 0;
	for (size_t i = 0; i < e->n; i++) {
		struct CUgraphNode_st *n = e->nodes[i];
		struct fake_gmem *m = n->mem;
		if (!m)
			continue;
		if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
			if (m->live) { /* AUTO_FREE_ON_LAUNCH */
				if (!m->owner)
					m->owner = e; /* left by an earlier executable graph: now this one's */
				gmem_free_live(m);
			}
			gmem_make_live(m, each[k++], e->ctx);
		} else {
			gmem_free_live(m);
		}
	}
	free(each);
	return CUDA_SUCCESS;
}

static CUresult launch(CUgraphExec e, CUstream h, bool pt)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s = NULL;
	CUresult r = exec_valid(e) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		r = fake_stream_lookup(h, pt, &ctx, &s);
	bool captured = !r && s && fake_stream_capture(s);
	if (captured && e->has_mem) {
		/* it would be a child graph node with memory nodes, cloned */
		fake_capture_invalidate(fake_stream_capture(s));
		r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	if (!r && !captured)
		r = launch_memory(e);
	/* the operations: copies, so the graph may change or go meanwhile */
	struct fake_op *ops = NULL, **tail = &ops;
	for (size_t i = 0; !r && i < e->n; i++) {
		struct fake_op *op = e->nodes[i]->op;
		if (!op || op->kind == FAKE_OP_POOL_FREE)
			continue;
		if (!(*tail = fake_op_clone(op, !captured))) /* captured: a node, not a record now */
			r = CUDA_ERROR_OUT_OF_MEMORY; /* the memory nodes took effect: as a failed launch may */
		else
			tail = &(*tail)->next;
	}
	if (r) {
		while (ops) {
			struct fake_op *next = ops->next;
			fake_op_discard(ops);
			ops = next;
		}
	} else if (ops) {
		struct CUgraph_st *g = e->graph;
		g->refs++; /* its ranges stay while the operations run */
		while (ops) {
			struct fake_op *op = ops;
			ops = op->next;
			fake_stream_submit(ctx, s, op, !ops && !captured);
		}
		graph_unref(g);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	COUNT(cuGraphLaunch);
	return launch(hGraphExec, hStream, false);
}

FAKE_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	COUNT(cuGraphLaunch_ptsz);
	return launch(hGraphExec, hStream, true);
}

FAKE_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	COUNT(cuGraphExecDestroy);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = exec_valid(hGraphExec) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r)
		exec_free(hGraphExec, NULL);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* Instantiate (lock held). *err_node / *result as cuGraphInstantiateWithParams
 * reports them. */
static CUresult instantiate(struct CUgraphExec_st **out, struct CUgraph_st *g, unsigned long long flags,
			    struct CUgraphNode_st **err_node, CUgraphInstantiateResult *result)
{
	*err_node = NULL;
	*result = CUDA_GRAPH_INSTANTIATE_ERROR;
	struct CUctx_st *ctx;
	if (!out || !fake_graph_valid(g) || g->moved || (flags & ~(unsigned long long)KNOWN_INSTANTIATE_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH))
		return CUDA_ERROR_INVALID_VALUE; /* "cannot be used in conjunction" */
	if (g->has_mem && g->exec)
		return CUDA_ERROR_INVALID_VALUE; /* "at most one executable graph in existence" */
	CUresult r = fake_ctx_require(&ctx);
	if (r)
		return r;
	struct CUgraphExec_st *e = calloc(1, sizeof *e);
	size_t cap = 0;
	if (!e || !flatten(e, g, &cap)) {
		if (e)
			free(e->nodes);
		free(e);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) {
		/* "The graph can only contain kernel nodes, memcpy nodes, memset
		 * nodes, and child graph nodes" and "cannot be empty" */
		bool work = false;
		for (size_t i = 0; i < e->n && !*err_node; i++) {
			CUgraphNodeType t = e->nodes[i]->type;
			if (t == CU_GRAPH_NODE_TYPE_MEMCPY || t == CU_GRAPH_NODE_TYPE_MEMSET)
				work = true;
			else
				*err_node = e->nodes[i];
		}
		if (*err_node || !work) {
			*result = *err_node ? CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED
					    : CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
			free(e->nodes);
			free(e);
			return CUDA_ERROR_INVALID_VALUE;
		}
	}
	e->ctx = ctx;
	e->flags = flags;
	e->graph = g;
	g->refs++;
	if (g->has_mem)
		g->exec = e;
	e->next = execs;
	execs = e;
	*out = e;
	*result = CUDA_GRAPH_INSTANTIATE_SUCCESS;
	return CUDA_SUCCESS;
}

/* The CUDA 10/11 ABI (cuGraphInstantiate, cuGraphInstantiate_v2): flags 0,
 * an error node and a log buffer. */
static CUresult instantiate_log(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
				size_t bufferSize)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *err;
	CUgraphInstantiateResult res;
	CUresult r = instantiate(phGraphExec, hGraph, 0, &err, &res);
	pthread_mutex_unlock(&fake_lock);
	if (phErrorNode)
		*phErrorNode = err;
	if (logBuffer && bufferSize)
		snprintf(logBuffer, bufferSize, "%s", r ? "graph instantiation failed" : "");
	return r;
}

FAKE_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
				     char *logBuffer, size_t bufferSize)
{
	COUNT(cuGraphInstantiate);
	return instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

FAKE_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
					char *logBuffer, size_t bufferSize)
{
	COUNT(cuGraphInstantiate_v2);
	return instantiate_log(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

/* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD is "Only supported by
 * cuGraphInstantiateWithParams": CUDA_ERROR_INVALID_VALUE here. */
FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
	COUNT(cuGraphInstantiateWithFlags);
	REQUIRE_INIT();
	if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *err;
	CUgraphInstantiateResult res;
	CUresult r = instantiate(phGraphExec, hGraph, flags, &err, &res);
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* With CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD the new executable graph is
 * uploaded into hUploadStream; if that fails (out of memory), the
 * executable graph goes again and the upload's error is returned with
 * result_out CUDA_GRAPH_INSTANTIATE_ERROR. */
static CUresult instantiate_params(CUgraphExec *phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS *p, bool pt)
{
	REQUIRE_INIT();
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUgraphNode_st *err;
	CUgraphInstantiateResult res;
	struct CUgraphExec_st *e = NULL;
	CUresult r = instantiate(phGraphExec ? &e : NULL, hGraph, p->flags, &err, &res);
	if (!r && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD)) {
		struct CUctx_st *ctx;
		struct CUstream_st *s;
		r = exec_stream(p->hUploadStream, pt, &ctx, &s);
		if (!r)
			r = exec_map(e);
		if (r) {
			exec_free(e, NULL);
			res = CUDA_GRAPH_INSTANTIATE_ERROR;
		}
	}
	pthread_mutex_unlock(&fake_lock);
	p->hErrNode_out = err;
	p->result_out = res;
	if (!r)
		*phGraphExec = e;
	return r;
}

FAKE_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
					       CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	COUNT(cuGraphInstantiateWithParams);
	return instantiate_params(phGraphExec, hGraph, instantiateParams, false);
}

FAKE_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
						    CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
	COUNT(cuGraphInstantiateWithParams_ptsz);
	return instantiate_params(phGraphExec, hGraph, instantiateParams, true);
}

/* ---- the graph memory pool ------------------------------------------------------------ */

FAKE_API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
	COUNT(cuDeviceGraphMemTrim);
	REQUIRE_INIT();
	if (fake_check_dev(device))
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	for (struct fake_gmem *m = gmems; m; m = m->next)
		if (m->dev == device && m->mapped && !m->live)
			gmem_unmap(m); /* an idle executable graph's */
	pool_release(device, UINT64_MAX);
	pthread_mutex_unlock(&fake_lock);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
	COUNT(cuDeviceGetGraphMemAttribute);
	REQUIRE_INIT();
	if (fake_check_dev(device))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct graph_pool *p = &gpools[device];
	cuuint64_t v = 0;
	CUresult r = CUDA_SUCCESS;
	switch (attr) {
	case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: v = p->used; break;
	case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: v = p->used_high; break;
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: v = p->reserved; break;
	case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: v = p->reserved_high; break;
	default: r = CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&fake_lock);
	if (!r)
		memcpy(value, &v, sizeof v);
	return r;
}

FAKE_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
	COUNT(cuDeviceSetGraphMemAttribute);
	REQUIRE_INIT();
	if (fake_check_dev(device))
		return CUDA_ERROR_INVALID_DEVICE;
	if (!value)
		return CUDA_ERROR_INVALID_VALUE;
	cuuint64_t v;
	memcpy(&v, value, sizeof v);
	if (v != 0)
		return CUDA_ERROR_INVALID_VALUE; /* "can only be reset to zero" */
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_SUCCESS;
	if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
		gpools[device].used_high = 0;
	else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
		gpools[device].reserved_high = 0;
	else
		r = CUDA_ERROR_INVALID_VALUE; /* the _CURRENT ones are read-only */
	pthread_mutex_unlock(&fake_lock);
	return r;
}

void fake_graph_release_ctx(struct CUctx_st *ctx)
{
	uint64_t gone[FAKE_MAX_DEVICES] = {0};
	struct fake_gmem *m = gmems;
	while (m) {
		struct fake_gmem *next = m->next; /* m may go; no other range does */
		if (m->live && m->alloc->ctx == ctx) {
			if (!m->owner)
				gone[m->dev] += m->span;
			gmem_free_live(m);
		}
		m = next;
	}
	struct CUgraphExec_st *e = execs;
	while (e) {
		struct CUgraphExec_st *next = e->next;
		if (e->ctx == ctx)
			exec_free(e, gone);
		e = next;
	}
	for (int d = 0; d < fake_cfg.ndev; d++)
		if (gone[d])
			pool_release(d, gone[d]);
}
