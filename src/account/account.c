/* account: the records of every allocating and freeing hook, the charge
 * of an allocation from a stream-ordered pool, context deaths, the group's
 * tick (account.h). Thread safety: see account.h. */
#include "account/account.h"

#include <stdatomic.h>
#include <string.h>

#include "state/device.h"
#include "log/log.h"
#include "group/group.h"

static void forget_block(const struct cumemcap_block *b)
{
	if (b->charged)
		cumemcap_ledger_sub(b->dev, (enum cumemcap_kind)b->kind, b->bytes);
	cumemcap_ledger_live_sub(b->dev, b->bytes);
	cumemcap_ledger_bump(b->dev, frees);
}

uint32_t cumemcap_account_group_tick(uint64_t now_ms)
{
	(void)now_ms;
	cumemcap_group_tick();
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++) {
		if (!cumemcap_group_publishes(d))
			continue;
		struct cumemcap_figures f;
		cumemcap_ledger_read(d, &f);
		struct cumemcap_group_figures g = {
			.live = f.v[CUMEMCAP_FIG_live],
			.pooled = f.v[CUMEMCAP_FIG_pooled],
			.reserved = f.v[CUMEMCAP_FIG_reserved],
			.footprint = f.v[CUMEMCAP_FIG_footprint],
			.refusals = f.v[CUMEMCAP_FIG_refusals],
			.waits = f.v[CUMEMCAP_FIG_waits],
		};
		cumemcap_group_publish(d, &g);
	}
	cumemcap_account_group_changes();
	/* A budget shrunk below what the members hold: cached memory goes. */
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++) {
		uint64_t limit = cumemcap_group_limit(d);
		if (limit != UINT64_MAX && cumemcap_group_used(d) > limit)
			cumemcap_account_release_cached(d);
	}
	return 1000;
}

void cumemcap_account_group_changes(void)
{
	struct cumemcap_book_change c;
	unsigned char uuid[16];
	while (cumemcap_group_next_change(&c, uuid)) {
		int dev = -1;
		for (int d = 0; d < CUMEMCAP_MAX_DEVICES && dev < 0; d++) {
			const struct cumemcap_device_info *info = cumemcap_device_info(d);
			if (info && memcmp(info->uuid, uuid, 16) == 0)
				dev = d;
		}
		cumemcap_log_group_change(dev, uuid, c.time_ns, c.uid, c.old_limit, c.new_limit);
	}
}

CUresult cumemcap_account_charge_begin(struct cumemcap_charge *c, const char *entry_point, int dev,
				       enum cumemcap_kind kind, uint64_t bytes)
{
	c->dev = -1;
	c->ctx = NULL;
	c->kind = kind;
	c->bytes = bytes;
	c->live = bytes;
	c->entry_point = entry_point;
	if (dev < 0) {
		if (cumemcap_device_current(&c->ctx, &dev) != CUDA_SUCCESS)
			return CUDA_SUCCESS; /* the driver will answer */
	} else if (!cumemcap_device_ensure(dev)) {
		return CUDA_SUCCESS;
	}
	/* A pool's charge is an estimate: the caller notes the request. */
	if (kind != CUMEMCAP_KIND_pool)
		cumemcap_ledger_record_request(dev, bytes);
	if (!cumemcap_account_reserve(dev, kind, bytes, entry_point)) {
		cumemcap_account_refused(dev, entry_point, bytes);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	c->dev = dev;
	return CUDA_SUCCESS;
}

CUresult cumemcap_account_charge_finish(struct cumemcap_charge *c, CUresult r,
				enum cumemcap_handle_kind handle, uint64_t key)
{
	if (c->dev < 0)
		return r;
	if (r != CUDA_SUCCESS) {
		cumemcap_ledger_sub(c->dev, c->kind, c->bytes);
		if (r == CUDA_ERROR_OUT_OF_MEMORY)
			cumemcap_account_driver_oom(c->dev, c->entry_point, c->live);
		return r;
	}
	/* A pool's block is charged in the pool's figure; the record keeps the program's bytes. */
	struct cumemcap_block b = {
		.key = key,
		.bytes = c->bytes ? c->bytes : c->live,
		.charged = c->bytes != 0,
		.ctx = handle == CUMEMCAP_HANDLE_VMM ? NULL : c->ctx,
		.dev = (int16_t)c->dev,
		.handle = (uint8_t)handle,
		.kind = (uint8_t)c->kind,
	};
	struct cumemcap_block stale;
	if (cumemcap_track_insert(&b, &stale))
		forget_block(&stale);
	cumemcap_ledger_live_add(c->dev, b.bytes);
	cumemcap_ledger_bump(c->dev, allocs);
	return r;
}

bool cumemcap_account_charge_adjust(struct cumemcap_charge *c, uint64_t actual)
{
	if (c->dev < 0 || actual == c->bytes)
		return true;
	c->live = actual;
	if (actual < c->bytes) {
		cumemcap_ledger_sub(c->dev, c->kind, c->bytes - actual);
	} else if (!cumemcap_ledger_reserve(c->dev, c->kind, actual - c->bytes)) {
		cumemcap_account_refused(c->dev, c->entry_point, actual);
		return false;
	}
	c->bytes = actual;
	return true;
}

bool cumemcap_account_release_take(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *b)
{
	return key != 0 && cumemcap_track_remove(handle, key, b);
}

CUresult cumemcap_account_release_settle(bool found, const struct cumemcap_block *b, CUresult r)
{
	if (!found)
		return r;
	struct cumemcap_block stale;
	if (r == CUDA_SUCCESS)
		forget_block(b);
	else if (cumemcap_track_insert(b, &stale))
		forget_block(&stale);
	return r;
}

/* What a death took, per device (the death lock's writer is alone: no lock). */
static struct {
	uint64_t live, records;
} tally[CUMEMCAP_MAX_DEVICES];

static void forget_dead_block(const struct cumemcap_block *b)
{
	forget_block(b);
	if (b->dev >= 0 && b->dev < CUMEMCAP_MAX_DEVICES) {
		tally[b->dev].live += b->bytes;
		tally[b->dev].records++;
	}
}

void cumemcap_account_context_died(CUcontext ctx, int dev, enum cumemcap_death why)
{
	static const char *const names[] = { "destroyed", "reset", "released" };
	/* Caches by context handle: it may come back; a reset may give the device other pools. */
	cumemcap_device_forget_contexts();
	cumemcap_account_pools_changed();
	memset(tally, 0, sizeof(tally));
	struct cumemcap_arena_gone gone = { .dev = -1 };
	if (ctx) {
		cumemcap_track_purge_ctx(ctx, forget_dead_block);
		cumemcap_arena_forget_ctx(ctx, &gone);
	}
	if (gone.dev >= 0) {
		cumemcap_ledger_sub(gone.dev, CUMEMCAP_KIND_linear, gone.held);
		tally[gone.dev].live += gone.live;
	}
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++)
		if (tally[d].records || d == gone.dev || d == dev)
			cumemcap_log_context(d, names[why], tally[d].live, d == gone.dev ? gone.held : 0,
					     tally[d].records + (d == gone.dev ? gone.blocks : 0));
}

CUresult cumemcap_account_pool_alloc_begin(struct cumemcap_pool_alloc *a, const char *entry_point,
					   CUcontext ctx, int stream_dev, bool current,
					   CUmemoryPool pool, uint64_t bytes)
{
	int dev = current ? stream_dev : cumemcap_account_pool_device(pool, stream_dev);
	if (current)
		pool = cumemcap_account_current_pool(dev);
	a->pool = NULL;
	cumemcap_ledger_record_request(dev, bytes);
	a->growth_unread = cumemcap_account_pool_unread(pool, dev, current);
	if (a->growth_unread) {
		a->c = (struct cumemcap_charge){ .dev = dev, .ctx = ctx, .kind = CUMEMCAP_KIND_pool,
						 .bytes = 0, .live = bytes, .entry_point = entry_point };
		return CUDA_SUCCESS;
	}
	uint64_t estimate = cumemcap_account_pool_estimate(bytes);
	CUresult r =
	    cumemcap_account_charge_begin(&a->c, entry_point, dev, CUMEMCAP_KIND_pool, estimate);
	if (r != CUDA_SUCCESS)
		return r;
	a->c.ctx = ctx;
	a->c.live = bytes;
	if (pool && a->c.dev >= 0) {
		a->pool = pool;
		cumemcap_account_pool_hold(pool, dev, estimate);
	}
	return CUDA_SUCCESS;
}

CUresult cumemcap_account_pool_alloc_finish(struct cumemcap_pool_alloc *a, CUresult r, uint64_t ptr)
{
	if (a->growth_unread) {
		if (r == CUDA_SUCCESS)
			cumemcap_account_pool_grew(a->c.dev);
	} else if (a->pool && !cumemcap_account_pool_charge(&a->c, a->pool) && r == CUDA_SUCCESS) {
		cumemcap_account_refused(a->c.dev, a->c.entry_point, a->c.live);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	return cumemcap_account_charge_finish(&a->c, r, CUMEMCAP_HANDLE_ASYNC, r == CUDA_SUCCESS ? ptr : 0);
}
