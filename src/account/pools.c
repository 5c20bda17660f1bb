/* pools: the stream-ordered pools the process allocates from, their GPU
 * and what each holds in the ledger, read back from the driver (charged
 * what they reserve, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT). Calls nothing
 * else in account/, so that reserve.c may read the pools back before it
 * refuses. Thread safety: account.h. */
#include <stdatomic.h>
#include <stdlib.h>

#include "account/account.h"
#include "driver/driver.h"
#include "group/group.h"
#include "platform/export.h"
#include "platform/spin.h"
#include "state/device.h"

#define POOL_GRANULARITY (2ull << 20)

struct pool_record {
	CUmemoryPool pool;
	int dev;
	uint64_t accounted; /* bytes of the pool in the ledger */
	/* Estimates allocations under way hold: the growth is theirs first, not counted twice. */
	uint64_t in_flight;
	uint64_t high;      /* its RESERVED_MEM_HIGH when last read (unread growth) */
};
/* Searched in order: a process has a few. */
static struct pool_record *pools;
static size_t pool_count, pool_cap;
/* pool_lock guards the table, never across a driver call; query_lock is
 * held across an attribute query and its update, so updates apply in the
 * order the driver answered. */
static atomic_flag pool_lock = ATOMIC_FLAG_INIT;
static atomic_flag query_lock = ATOMIC_FLAG_INIT;

uint64_t cumemcap_account_pool_estimate(uint64_t bytes)
{
	if (bytes > UINT64_MAX - POOL_GRANULARITY)
		return UINT64_MAX;
	return (bytes + POOL_GRANULARITY - 1) / POOL_GRANULARITY * POOL_GRANULARITY;
}

/* Lock held. */
static struct pool_record *find_pool(CUmemoryPool pool)
{
	for (size_t i = 0; pool && i < pool_count; i++)
		if (pools[i].pool == pool)
			return &pools[i];
	return NULL;
}

/* Lock held. NULL only when out of host memory. */
static struct pool_record *add_pool(CUmemoryPool pool, int dev)
{
	struct pool_record *p = find_pool(pool);
	if (p)
		return p;
	if (pool_count == pool_cap) {
		size_t cap = pool_cap ? pool_cap * 2 : 64;
		p = realloc(pools, cap * sizeof(*p));
		if (!p)
			return NULL;
		pools = p;
		pool_cap = cap;
	}
	p = &pools[pool_count++];
	*p = (struct pool_record){ .pool = pool, .dev = dev };
	return p;
}

/* The device a pool allocates on (recorded, or found among the devices' pools), else `fallback`. */
int cumemcap_account_pool_device(CUmemoryPool pool, int fallback)
{
	cumemcap_spin_lock(&pool_lock);
	struct pool_record *p = find_pool(pool);
	int dev = p ? p->dev : -1;
	cumemcap_spin_unlock(&pool_lock);
	if (dev >= 0 || !pool)
		return dev >= 0 ? dev : fallback;
	int count = cumemcap_driver_device_count();
	for (int d = 0; d < count && d < CUMEMCAP_MAX_DEVICES && dev < 0; d++)
		if (cumemcap_driver_pool(d, false) == pool || cumemcap_driver_pool(d, true) == pool)
			dev = d;
	if (dev < 0 || !cumemcap_device_ensure(dev))
		return fallback;
	cumemcap_spin_lock(&pool_lock);
	p = add_pool(pool, dev);
	dev = p ? p->dev : dev;
	cumemcap_spin_unlock(&pool_lock);
	return dev;
}

/* A shrink to `reserved` leaves the ledger at once (pool_lock held). */
static void shrink_locked(struct pool_record *p, uint64_t reserved)
{
	if (reserved < p->accounted) {
		cumemcap_ledger_sub(p->dev, CUMEMCAP_KIND_pool, p->accounted - reserved);
		p->accounted = reserved;
	}
}

/* Follow what the pool reserves now (pool_lock held); growth is left to
 * the allocations under way. When the high watermark (0: not read) moved
 * above `reserved`, the figures pass through it so the peaks count it. */
static void settle_locked(struct pool_record *p, uint64_t reserved, uint64_t high)
{
	shrink_locked(p, reserved);
	if (p->in_flight == 0) {
		uint64_t to = high != p->high && high > reserved ? high : reserved;
		if (to > p->accounted) {
			cumemcap_ledger_add(p->dev, CUMEMCAP_KIND_pool, to - p->accounted);
			p->accounted = to;
		}
		shrink_locked(p, reserved);
	}
	if (high)
		p->high = high;
}

/* Devices whose pools may have passed their high watermark unread. */
static _Atomic bool grown[CUMEMCAP_MAX_DEVICES];

/* Read `pool` back (query_lock held); `grew`: it may have grown unread, ask its high watermark. */
static void settle(CUmemoryPool pool, bool grew)
{
	uint64_t reserved, high = 0;
	if (!cumemcap_driver_pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved))
		return;
	if (grew && !cumemcap_driver_pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high))
		high = 0;
	cumemcap_spin_lock(&pool_lock);
	struct pool_record *p = find_pool(pool);
	if (p)
		settle_locked(p, reserved, high);
	cumemcap_spin_unlock(&pool_lock);
}

/* The allocation charged in c came back from `pool` with its estimate
 * (c->bytes) held: charge the pool's growth instead, up to the estimate,
 * plus growth beyond every estimate under way. False past the limit. */
bool cumemcap_account_pool_charge(struct cumemcap_charge *c, CUmemoryPool pool)
{
	uint64_t estimate = c->bytes, claim = 0, excess = 0, reserved;
	cumemcap_spin_lock(&query_lock);
	bool known = cumemcap_driver_pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
	cumemcap_spin_lock(&pool_lock);
	struct pool_record *p = find_pool(pool);
	if (p) {
		p->in_flight -= p->in_flight < estimate ? p->in_flight : estimate;
		if (known) {
			shrink_locked(p, reserved);
			uint64_t grew = reserved - p->accounted;
			claim = grew < estimate ? grew : estimate;
			if (p->in_flight == 0)
				excess = grew - claim;
			p->accounted += claim + excess;
		}
	}
	cumemcap_spin_unlock(&pool_lock);
	cumemcap_spin_unlock(&query_lock);
	cumemcap_ledger_sub(c->dev, CUMEMCAP_KIND_pool, estimate - claim);
	c->bytes = 0; /* the bytes live in the pool's figure */
	if (excess && !cumemcap_ledger_reserve(c->dev, CUMEMCAP_KIND_pool, excess)) {
		cumemcap_ledger_add(c->dev, CUMEMCAP_KIND_pool, excess); /* the pool holds them */
		return false;
	}
	return true;
}

/* The current pool of the device a thread last asked about, until the
 * epoch moves (read before the driver is asked: no stale answer kept). */
static _Atomic uint64_t pool_epoch = 1;
static CUMEMCAP_TLS struct {
	uint64_t epoch; /* 0: nothing cached */
	int dev;
	CUmemoryPool pool;
	bool listed; /* in the pool table since (unread growth) */
} current_cache;

void cumemcap_account_pools_changed(void)
{
	atomic_fetch_add_explicit(&pool_epoch, 1, memory_order_release);
}

CUmemoryPool cumemcap_account_current_pool(int dev)
{
	uint64_t epoch = atomic_load_explicit(&pool_epoch, memory_order_acquire);
	if (current_cache.epoch == epoch && current_cache.dev == dev)
		return current_cache.pool;
	CUmemoryPool pool = cumemcap_driver_pool(dev, true);
	if (pool) {
		current_cache.epoch = epoch;
		current_cache.dev = dev;
		current_cache.pool = pool;
		current_cache.listed = false;
	}
	return pool;
}

/* Whether an allocation from `pool` leaves its growth unread: no limit on
 * the GPU (which never changes once resolved) and no group. The pool is
 * then listed and its device marked unread (ledger.h). */
bool cumemcap_account_pool_unread(CUmemoryPool pool, int dev, bool current)
{
	if (!pool || !cumemcap_device_ensure(dev) ||
	    cumemcap_ledger_get(dev, CUMEMCAP_FIG_limit) != CUMEMCAP_NO_LIMIT ||
	    (atomic_load_explicit(&cumemcap_group_hot, memory_order_relaxed) & 1))
		return false;
	if (current && current_cache.listed && current_cache.pool == pool)
		return true;
	if (!atomic_load_explicit(&cumemcap_ledger_growth_unread[dev], memory_order_relaxed))
		atomic_store(&cumemcap_ledger_growth_unread[dev], true);
	cumemcap_spin_lock(&pool_lock);
	struct pool_record *p = add_pool(pool, dev);
	bool listed = p && p->dev == dev;
	cumemcap_spin_unlock(&pool_lock);
	if (listed && current && current_cache.pool == pool)
		current_cache.listed = true;
	return listed;
}

void cumemcap_account_pool_grew(int dev)
{
	if (!atomic_load(&grown[dev]))
		atomic_store(&grown[dev], true);
}

void cumemcap_account_pool_hold(CUmemoryPool pool, int dev, uint64_t estimate)
{
	cumemcap_spin_lock(&pool_lock);
	struct pool_record *p = add_pool(pool, dev);
	if (p)
		p->in_flight += estimate;
	cumemcap_spin_unlock(&pool_lock);
}

void cumemcap_account_pool_destroyed(CUmemoryPool pool)
{
	/* The device's current pool, if it was this one, is its default. */
	cumemcap_account_pools_changed();
	cumemcap_spin_lock(&pool_lock);
	struct pool_record *p = find_pool(pool);
	if (p) {
		cumemcap_ledger_sub(p->dev, CUMEMCAP_KIND_pool, p->accounted);
		*p = pools[--pool_count];
	}
	cumemcap_spin_unlock(&pool_lock);
}

void cumemcap_account_pool_read(CUmemoryPool pool, bool trimmed)
{
	if (!trimmed) {
		cumemcap_spin_lock(&pool_lock);
		struct pool_record *p = find_pool(pool);
		bool unread = p && cumemcap_ledger_valid(p->dev) &&
			      atomic_load_explicit(&cumemcap_ledger_growth_unread[p->dev],
						   memory_order_relaxed);
		cumemcap_spin_unlock(&pool_lock);
		if (!unread)
			return;
	}
	cumemcap_spin_lock(&query_lock);
	settle(pool, !trimmed);
	cumemcap_spin_unlock(&query_lock);
}

void cumemcap_account_pool_refresh_now(int dev)
{
	if (!cumemcap_ledger_holds(dev, CUMEMCAP_KIND_pool) &&
	    !atomic_load_explicit(&cumemcap_ledger_growth_unread[dev], memory_order_relaxed))
		return;
	cumemcap_spin_lock(&query_lock);
	bool grew = atomic_load(&grown[dev]) && atomic_exchange(&grown[dev], false);
	/* Listed under the table's lock, asked about without it. */
	cumemcap_spin_lock(&pool_lock);
	size_t n = 0;
	CUmemoryPool *list = pool_count ? malloc(pool_count * sizeof(*list)) : NULL;
	for (size_t i = 0; list && i < pool_count; i++)
		if (pools[i].dev == dev)
			list[n++] = pools[i].pool;
	cumemcap_spin_unlock(&pool_lock);
	for (size_t i = 0; i < n; i++)
		settle(list[i], grew);
	free(list);
	cumemcap_spin_unlock(&query_lock);
}

void cumemcap_account_pool_reset(void)
{
	cumemcap_account_pools_changed();
	/* A thread that did not come along may have held it. */
	atomic_flag_clear(&query_lock);
	free(pools);
	pools = NULL;
	pool_count = pool_cap = 0;
}

void cumemcap_account_lock(void)
{
	cumemcap_spin_lock(&pool_lock);
}

void cumemcap_account_unlock(void)
{
	cumemcap_spin_unlock(&pool_lock);
}
