/* graph: see graph.h. The executable graphs are few: one list. */
#include "account/graph.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "account/account.h"
#include "state/capture.h"
#include "state/device.h"
#include "driver/driver.h"
#include "state/ledger.h"
#include "platform/xmutex.h"

/* An executable graph the shim saw instantiated. */
struct exec_record {
	CUgraphExec exec;
	CUcontext ctx;
	bool mapped; /* uploaded or launched since instantiation or the last trim */
	int n;
	struct cumemcap_graph_need need[CUMEMCAP_GRAPH_DEVICES];
	struct exec_record *next;
};

static struct exec_record *execs;
/* What the ledger holds for each device's graph pool: its reserved bytes when last read. */
static uint64_t accounted[CUMEMCAP_MAX_DEVICES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cumemcap_xmutex query_lock = CUMEMCAP_XMUTEX_INIT(query_lock);

/* Lock held. */
static struct exec_record **find(CUgraphExec exec)
{
	struct exec_record **pp = &execs;
	while (*pp && (*pp)->exec != exec)
		pp = &(*pp)->next;
	return pp;
}

/* One allocation node the driver found (cumemcap_driver_graph_allocs). */
static void add_node(void *arg, int dev, uint64_t bytes)
{
	struct cumemcap_graph_op *op = arg;
	if (!cumemcap_ledger_valid(dev))
		return;
	bytes = cumemcap_account_pool_estimate(bytes);
	for (int i = 0; i < op->n; i++)
		if (op->need[i].dev == dev) {
			uint64_t sum = op->need[i].bytes + bytes;
			op->need[i].bytes = sum < bytes ? UINT64_MAX : sum;
			return;
		}
	if (op->n < CUMEMCAP_GRAPH_DEVICES)
		op->need[op->n++] = (struct cumemcap_graph_need){ .dev = dev, .bytes = bytes };
}

/* Give back the growth held for op's first n needs. */
static void unhold(struct cumemcap_graph_op *op, int n)
{
	for (int i = 0; i < n; i++)
		cumemcap_ledger_sub(op->need[i].dev, CUMEMCAP_KIND_graph, op->need[i].held);
}

/* Read dev's pool and make the ledger hold what it reserves, giving back
 * `held` (growth reserved for a call now over). When the driver cannot
 * say: keep the figure, or drop it when `gone` (its context died). */
static void settle(int dev, uint64_t held, bool gone)
{
	cumemcap_xmutex_lock(&query_lock);
	uint64_t reserved = 0;
	bool known =
	    cumemcap_driver_graph_mem(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &reserved);
	pthread_mutex_lock(&lock);
	uint64_t was = accounted[dev];
	uint64_t now = known ? reserved : gone ? 0 : was;
	/* Growth first, then the hold goes: the total never dips below what
	 * is held, so no other request slips into a moment's gap. */
	if (now > was)
		cumemcap_ledger_add(dev, CUMEMCAP_KIND_graph, now - was);
	cumemcap_ledger_sub(dev, CUMEMCAP_KIND_graph, held);
	if (now < was)
		cumemcap_ledger_sub(dev, CUMEMCAP_KIND_graph, was - now);
	accounted[dev] = now;
	pthread_mutex_unlock(&lock);
	cumemcap_xmutex_unlock(&query_lock);
}

/* Reserve the growth mapping op's needs may cause; on refusal nothing stays held. */
static CUresult hold(struct cumemcap_graph_op *op)
{
	for (int i = 0; i < op->n; i++) {
		struct cumemcap_graph_need *nd = &op->need[i];
		nd->held = 0;
		if (!cumemcap_device_ensure(nd->dev))
			continue;
		uint64_t reserved, used = 0;
		if (!cumemcap_driver_graph_mem(nd->dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
					       &reserved))
			reserved = 0;
		else if (!cumemcap_driver_graph_mem(nd->dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &used))
			used = reserved; /* nothing known to be unmapped */
		uint64_t spare = reserved > used ? reserved - used : 0;
		uint64_t growth = nd->bytes > spare ? nd->bytes - spare : 0;
		if (growth && !cumemcap_account_reserve(nd->dev, CUMEMCAP_KIND_graph, growth,
							op->entry_point)) {
			unhold(op, i);
			cumemcap_account_refused(nd->dev, op->entry_point, nd->bytes);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		nd->held = growth;
	}
	return CUDA_SUCCESS;
}

/* The call op reserved for returned r. */
static void settle_op(struct cumemcap_graph_op *op, CUresult r)
{
	for (int i = 0; i < op->n; i++) {
		struct cumemcap_graph_need *nd = &op->need[i];
		if (r == CUDA_ERROR_OUT_OF_MEMORY && cumemcap_ledger_valid(nd->dev))
			cumemcap_account_driver_oom(nd->dev, op->entry_point, nd->bytes);
		if (cumemcap_device_info(nd->dev))
			settle(nd->dev, nd->held, false);
	}
}

CUresult cumemcap_graph_instantiate_begin(struct cumemcap_graph_op *op, const char *entry_point,
					  CUgraph graph, bool upload)
{
	memset(op, 0, sizeof(*op));
	op->entry_point = entry_point;
	int dev;
	if (cumemcap_device_current(&op->ctx, &dev) != CUDA_SUCCESS)
		op->ctx = NULL;
	if (!graph || !cumemcap_driver_graph_allocs(graph, add_node, op)) {
		op->n = -1;
		return CUDA_SUCCESS; /* the driver will answer */
	}
	CUresult r = hold(op);
	if (r != CUDA_SUCCESS)
		return r;
	op->map = upload;
	if (!upload)
		unhold(op, op->n); /* only a check: instantiation maps nothing */
	return CUDA_SUCCESS;
}

CUresult cumemcap_graph_instantiate_end(struct cumemcap_graph_op *op, CUresult r,
					const CUgraphExec *exec)
{
	if (op->n < 0)
		return r;
	if (op->map)
		settle_op(op, r);
	if (r != CUDA_SUCCESS || !exec || !*exec)
		return r;
	struct exec_record *rec = malloc(sizeof(*rec));
	if (!rec)
		return r; /* unknown to the shim: its launches are read back after */
	*rec = (struct exec_record){ .exec = *exec, .ctx = op->ctx, .mapped = op->map, .n = op->n };
	memcpy(rec->need, op->need, sizeof(rec->need));
	pthread_mutex_lock(&lock);
	struct exec_record **pp = find(*exec);
	rec->next = *pp ? (*pp)->next : NULL;
	free(*pp); /* a handle the shim missed the destruction of */
	*pp = rec;
	pthread_mutex_unlock(&lock);
	return r;
}

CUresult cumemcap_graph_launch_begin(struct cumemcap_graph_op *op, const char *entry_point,
				     CUgraphExec exec, CUstream stream, bool ptsz)
{
	op->entry_point = entry_point;
	op->map = false;
	op->n = 0;
	pthread_mutex_lock(&lock);
	struct exec_record *rec = *find(exec);
	bool known = rec != NULL, mapped = rec && rec->mapped;
	if (rec) {
		op->n = rec->n;
		memcpy(op->need, rec->need, sizeof(op->need));
	}
	pthread_mutex_unlock(&lock);
	if (mapped || (known && op->n == 0) || cumemcap_capture_stream(stream, ptsz))
		return CUDA_SUCCESS; /* nothing to map */
	if (!known) {
		/* Instantiated unseen: read the current device's pool after. */
		CUcontext ctx;
		int dev;
		op->map = cumemcap_device_current(&ctx, &dev) == CUDA_SUCCESS;
		if (op->map)
			op->need[op->n++] = (struct cumemcap_graph_need){ .dev = dev };
		return CUDA_SUCCESS;
	}
	CUresult r = hold(op);
	op->map = r == CUDA_SUCCESS;
	return r;
}

CUresult cumemcap_graph_launch_end(struct cumemcap_graph_op *op, CUresult r, CUgraphExec exec)
{
	if (!op->map)
		return r;
	settle_op(op, r);
	if (r == CUDA_SUCCESS) {
		pthread_mutex_lock(&lock);
		struct exec_record *rec = *find(exec);
		if (rec)
			rec->mapped = true;
		pthread_mutex_unlock(&lock);
	}
	return r;
}

void cumemcap_graph_exec_destroyed(CUgraphExec exec)
{
	pthread_mutex_lock(&lock);
	struct exec_record **pp = find(exec), *rec = *pp;
	if (rec)
		*pp = rec->next;
	pthread_mutex_unlock(&lock);
	for (int i = 0; rec && i < rec->n; i++)
		if (cumemcap_device_info(rec->need[i].dev))
			settle(rec->need[i].dev, 0, false);
	free(rec);
}

void cumemcap_graph_trimmed(int dev)
{
	pthread_mutex_lock(&lock);
	for (struct exec_record *rec = execs; rec; rec = rec->next)
		for (int i = 0; i < rec->n; i++)
			if (rec->need[i].dev == dev)
				rec->mapped = false;
	pthread_mutex_unlock(&lock);
	if (cumemcap_device_info(dev))
		settle(dev, 0, false);
}

/* Drop the records of ctx's executable graphs, or all (lock held). */
static void drop_records(CUcontext ctx, bool all)
{
	for (struct exec_record **pp = &execs, *rec; (rec = *pp);) {
		if (all || rec->ctx == ctx) {
			*pp = rec->next;
			free(rec);
		} else {
			pp = &rec->next;
		}
	}
}

void cumemcap_graph_context_died(CUcontext ctx)
{
	bool held[CUMEMCAP_MAX_DEVICES];
	pthread_mutex_lock(&lock);
	drop_records(ctx, false);
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		held[dev] = accounted[dev] != 0;
	pthread_mutex_unlock(&lock);
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		if (held[dev])
			settle(dev, 0, true);
}

void cumemcap_graph_lock(void)
{
	pthread_mutex_lock(&lock);
}

void cumemcap_graph_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

void cumemcap_graph_fork_child(void)
{
	drop_records(NULL, true);
	memset(accounted, 0, sizeof(accounted));
	pthread_mutex_unlock(&lock);
	cumemcap_xmutex_fork_child(&query_lock);
}
