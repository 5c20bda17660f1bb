/* account: see account.h. */
#include "account.h"

#include <pthread.h>
#include <string.h>

#include "arena.h"
#include "device.h"
#include "log.h"
#include "driver.h"

void cumemcap_note_refusal(int dev, const char *door, uint64_t bytes)
{
	cumemcap_ledger_bump(dev, refusals);
	cumemcap_log_refusal(dev, door, bytes);
}

CUresult cumemcap_charge_begin(struct cumemcap_charge *c, const char *door, int dev,
			       enum cumemcap_kind kind, uint64_t bytes)
{
	c->dev = -1;
	c->ctx = NULL;
	c->kind = kind;
	c->bytes = bytes;
	c->live = bytes;
	c->door = door;
	if (dev < 0) {
		if (cumemcap_device_current(&c->ctx, &dev) != CUDA_SUCCESS)
			return CUDA_SUCCESS; /* the driver will answer */
	} else if (!cumemcap_device_ensure(dev)) {
		return CUDA_SUCCESS;
	}
	if (!cumemcap_ledger_reserve(dev, kind, bytes)) {
		/* Pools may have shrunk at a synchronization we did not see. */
		cumemcap_pool_refresh(dev);
		if (!cumemcap_ledger_reserve(dev, kind, bytes)) {
			cumemcap_note_refusal(dev, door, bytes);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	c->dev = dev;
	return CUDA_SUCCESS;
}

CUresult cumemcap_charge_finish(struct cumemcap_charge *c, CUresult r,
				enum cumemcap_handle_kind handle, uint64_t key)
{
	if (c->dev < 0)
		return r;
	if (r != CUDA_SUCCESS) {
		cumemcap_ledger_sub(c->dev, c->kind, c->bytes);
		if (r == CUDA_ERROR_OUT_OF_MEMORY) {
			cumemcap_ledger_bump(c->dev, driver_oom);
			cumemcap_log_driver_oom(c->dev, c->door, c->live);
		}
		return r;
	}
	/* A block served from a pool is charged through the pool's figure
	 * (bytes 0); the record keeps what the program holds. */
	struct cumemcap_block b = {
		.key = key,
		.bytes = c->bytes ? c->bytes : c->live,
		.charged = c->bytes != 0,
		.ctx = handle == CUMEMCAP_HANDLE_VMM ? NULL : c->ctx,
		.dev = (int16_t)c->dev,
		.handle = (uint8_t)handle,
		.kind = (uint8_t)c->kind,
	};
	cumemcap_track_insert(&b);
	cumemcap_ledger_live_add(c->dev, b.bytes);
	cumemcap_ledger_bump(c->dev, allocs);
	return r;
}

bool cumemcap_charge_adjust(struct cumemcap_charge *c, uint64_t actual)
{
	if (c->dev < 0 || actual == c->bytes)
		return true;
	c->live = actual;
	if (actual < c->bytes) {
		cumemcap_ledger_sub(c->dev, c->kind, c->bytes - actual);
	} else if (!cumemcap_ledger_reserve(c->dev, c->kind, actual - c->bytes)) {
		cumemcap_note_refusal(c->dev, c->door, actual);
		return false;
	}
	c->bytes = actual;
	return true;
}

static void forget_block(const struct cumemcap_block *b)
{
	if (b->charged)
		cumemcap_ledger_sub(b->dev, (enum cumemcap_kind)b->kind, b->bytes);
	cumemcap_ledger_live_sub(b->dev, b->bytes);
	cumemcap_ledger_bump(b->dev, frees);
}

bool cumemcap_release_take(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *b)
{
	return key != 0 && cumemcap_track_remove(handle, key, b);
}

CUresult cumemcap_release_settle(bool found, const struct cumemcap_block *b, CUresult r)
{
	if (!found)
		return r;
	if (r != CUDA_SUCCESS) {
		cumemcap_track_insert(b);
		return r;
	}
	forget_block(b);
	return r;
}

void cumemcap_forget_ctx(CUcontext ctx)
{
	cumemcap_device_forget_contexts();
	if (ctx) {
		cumemcap_track_purge_ctx(ctx, forget_block);
		cumemcap_arena_forget_ctx(ctx);
	}
}

/* ---- stream-ordered pools ------------------------------------------------ */

#define MAX_POOLS 256
#define POOL_GRANULARITY (2ull << 20)

static struct pool_record {
	CUmemoryPool pool;
	int dev;
	uint64_t accounted; /* bytes of the pool in the ledger */
} pools[MAX_POOLS];
static size_t pool_count;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t cumemcap_pool_estimate(uint64_t bytes)
{
	if (bytes > UINT64_MAX - POOL_GRANULARITY)
		return UINT64_MAX;
	return (bytes + POOL_GRANULARITY - 1) / POOL_GRANULARITY * POOL_GRANULARITY;
}

/* Lock held. */
static struct pool_record *find_pool(CUmemoryPool pool, int dev_if_new)
{
	for (size_t i = 0; i < pool_count; i++)
		if (pools[i].pool == pool)
			return &pools[i];
	if (dev_if_new < 0 || pool_count == MAX_POOLS)
		return NULL;
	pools[pool_count] = (struct pool_record){ .pool = pool, .dev = dev_if_new };
	return &pools[pool_count++];
}

int cumemcap_pool_device(CUmemoryPool pool, int fallback)
{
	pthread_mutex_lock(&pool_lock);
	struct pool_record *p = find_pool(pool, -1);
	int dev = p ? p->dev : fallback;
	pthread_mutex_unlock(&pool_lock);
	return dev;
}

void cumemcap_pool_created(CUmemoryPool pool, int dev)
{
	pthread_mutex_lock(&pool_lock);
	find_pool(pool, dev);
	pthread_mutex_unlock(&pool_lock);
}

/* Lock held. */
static uint64_t settle_locked(struct pool_record *p)
{
	cuuint64_t reserved = 0;
	if (!real_cuMemPoolGetAttribute ||
	    real_cuMemPoolGetAttribute(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) !=
		    CUDA_SUCCESS)
		return 0;
	uint64_t grew = 0;
	if (reserved > p->accounted) {
		grew = reserved - p->accounted;
		cumemcap_ledger_add(p->dev, CUMEMCAP_KIND_pool, grew);
	} else {
		cumemcap_ledger_sub(p->dev, CUMEMCAP_KIND_pool, p->accounted - reserved);
	}
	p->accounted = reserved;
	return grew;
}

uint64_t cumemcap_pool_settle(CUmemoryPool pool, int dev)
{
	uint64_t grew = 0;
	pthread_mutex_lock(&pool_lock);
	struct pool_record *p = find_pool(pool, dev);
	if (p)
		grew = settle_locked(p);
	pthread_mutex_unlock(&pool_lock);
	return grew;
}

void cumemcap_pool_destroyed(CUmemoryPool pool)
{
	pthread_mutex_lock(&pool_lock);
	struct pool_record *p = find_pool(pool, -1);
	if (p) {
		cumemcap_ledger_sub(p->dev, CUMEMCAP_KIND_pool, p->accounted);
		*p = pools[--pool_count];
	}
	pthread_mutex_unlock(&pool_lock);
}

void cumemcap_pool_refresh(int dev)
{
	pthread_mutex_lock(&pool_lock);
	for (size_t i = 0; i < pool_count; i++)
		if (pools[i].dev == dev)
			settle_locked(&pools[i]);
	pthread_mutex_unlock(&pool_lock);
}

void cumemcap_pool_reset(void)
{
	pool_count = 0;
	memset(pools, 0, sizeof(pools));
}

void cumemcap_account_lock(void)
{
	pthread_mutex_lock(&pool_lock);
}

void cumemcap_account_unlock(void)
{
	pthread_mutex_unlock(&pool_lock);
}
