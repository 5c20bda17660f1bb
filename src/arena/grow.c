/* arena/grow: serving cuMemAlloc: finding or making a context's arena,
 * picking a ready block, the growth budget, naming the segment needed.
 *
 * Thread safety: a request holds its arena's spinlock while it picks a
 * block and drops it around every driver call; a new arena is set up
 * under arena_create_lock. */
#include "arena/arena-internal.h"

#include "config/policy.h"
#include "platform/msg.h"
#include "state/device.h"

#define SMALL_MAX (1ull << 20)
#define SMALL_SEGMENT (2ull << 20)
#define BIG_SLACK_UNITS ((2ull << 20) >> UNIT_SHIFT)
#define MAX_UNITS UINT32_MAX
#define SCAN_LIMIT 32
/* A context's packed requests are spread over up to SHARDS arenas, dealt to
 * threads in turn so that they share no lock; whole segments stay with the
 * primary (shard 0, the first thread's), so a freed one serves every thread. */
#define SHARDS 4
/* Pending bytes always worth a fence, however large the arena (a steady
 * run of pairs then stays within the CPU's cache). */
#define PENDING_ENOUGH (4ull << 20)

/* The most the arena ever had live: its record's peak. */
static uint64_t peak_live(const struct arena *a)
{
	return atomic_load_explicit(&figures_of(a)->v[CUMEMCAP_FIG_peak_live], memory_order_relaxed);
}

/* The first non-empty bin at or after c, or BINS. */
static unsigned bits_next(const struct bins *l, unsigned c)
{
	for (unsigned w = c >> 6; w < 2; w++, c = w * 64) {
		uint64_t m = l->bits[w] & ~0ull << (c & 63);
		if (m)
			return w * 64 + (unsigned)__builtin_ctzll(m);
	}
	return BINS;
}

/* Hand out chunk ci (free, or the head of the quick list of `units`) for
 * `bytes`, splitting a packed free chunk (`ready`: the driver did not see
 * it). The address, or 0 without host memory (the chunk stays free). */
static CUdeviceptr hand_out(struct arena *a, uint32_t ci, uint64_t bytes, uint32_t units, bool ready)
{
	struct chunk *c = &a->chunks[ci];
	struct segment *s = &a->segs[c->seg];
	if (!hash_insert(a, chunk_addr(a, c), ci))
		return 0;
	if (c->state == C_QUICK) {
		quick_take_head(a, ci); /* of exactly `units`: nothing to split */
	} else {
		bin_remove(a, ci);
		/* The rest of a packed chunk to its bin (whole without a record for it). */
		uint32_t ri = s->packed && c->units > units ? chunk_new(a) : NONE;
		c = &a->chunks[ci]; /* the array may have moved */
		if (ri != NONE) {
			a->chunks[ri] = (struct chunk){ .seg = c->seg, .off = c->off + units,
							.units = c->units - units, .prev = ci, .next = c->next };
			if (c->next != NONE)
				a->chunks[c->next].prev = ri;
			c->next = ri;
			c->units = units;
			bin_insert(a, ri);
		}
	}
	c->state = C_LIVE;
	c->pad = s->packed ? (uint16_t)(((uint64_t)c->units << UNIT_SHIFT) - bytes) : 0;
	if (!s->packed)
		s->requested = bytes;
	if (s->free_since) {
		s->free_since = 0;
		if (!s->prealloc)
			a->whole_free -= s->bytes;
	}
	s->live++;
	/* A whole segment's block is live for its request (rounded): the rest
	 * is waste, neither live nor cached. */
	uint64_t part = (uint64_t)c->units << UNIT_SHIFT;
	uint64_t got = s->packed ? part : (uint64_t)units << UNIT_SHIFT;
	a->waste += part - got;
	a->live_bytes += got;
	bytes_to_ledger(a);
	cumemcap_ledger_arena_bump(figures_of(a), allocs);
	if (ready)
		cumemcap_ledger_arena_bump(figures_of(a), avoided);
	return chunk_addr(a, c);
}

/* A ready block for the request, or NONE. */
static uint32_t find_ready(struct arena *a, uint32_t units, bool packed, bool wide)
{
	if (packed && units <= QUICK_UNITS && a->quick[units] != NONE)
		return a->quick[units];
	if (packed || a->bins.bits[0] | a->bins.bits[1]) {
		/* Packed bins (for a whole request, only a preallocated segment):
		 * best of a few in its class, else the next class's head (any fits). */
		unsigned c = class_of(units);
		uint32_t best = NONE;
		unsigned looked = 0;
		for (uint32_t ci = a->bins.head[c]; ci != NONE && looked < SCAN_LIMIT; ci = a->chunks[ci].lnext, looked++) {
			uint32_t u = a->chunks[ci].units;
			if (u >= units && (best == NONE || u < a->chunks[best].units)) {
				best = ci;
				if (u == units)
					break;
			}
		}
		if (best == NONE) {
			unsigned n = bits_next(&a->bins, c + 1);
			if (n < BINS)
				best = a->bins.head[n];
		}
		if (best != NONE && (packed || a->segs[a->chunks[best].seg].prealloc))
			return best;
		if (packed)
			return NONE;
	}
	/* Whole segments: the smallest cached one within the slack (wide: 100%). */
	uint64_t slack = units / 4 > BIG_SLACK_UNITS ? units / 4 : BIG_SLACK_UNITS;
	uint64_t most = units + (wide ? units : slack);
	uint32_t best = NONE;
	for (unsigned c = bits_next(&a->big, class_of(units)); c < BINS; c = bits_next(&a->big, c + 1)) {
		unsigned looked = 0;
		for (uint32_t ci = a->big.head[c]; ci != NONE && looked < SCAN_LIMIT; ci = a->chunks[ci].lnext, looked++) {
			uint64_t u = a->chunks[ci].units;
			if (u >= units && u <= most && (best == NONE || u < a->chunks[best].units))
				best = ci;
		}
		if (best != NONE || ((uint64_t)1 << (c / 4)) > most)
			break;
	}
	return best;
}

/* find_ready, then again with the quick lists coalesced: a request waits,
 * grows or is refused only for memory no list holds. */
static uint32_t find_any(struct arena *a, uint32_t units, bool packed)
{
	uint32_t ci = find_ready(a, units, packed, false);
	if (ci == NONE && a->quick_count) {
		arena_quick_flush(a);
		ci = find_ready(a, units, packed, false);
	}
	return ci;
}

/* The segment of a request that needs one of its own (rounded < 2^40). */
static uint64_t whole_size(uint64_t rounded)
{
	unsigned lg = 63u - (unsigned)__builtin_clzll(rounded);
	uint64_t step = (1ull << lg) / 16;
	if (step < (64u << 10))
		step = 64u << 10;
	if (step > (2u << 20))
		step = 2u << 20;
	return (rounded + step - 1) / step * step;
}

/* ---- arenas ------------------------------------------------------------------------------ */

/* The GPU's preallocation (CUMEMCAP_GROWTH=preallocate), in whole small
 * segments; 0 on a GPU without a limit and no size given (said). */
static uint64_t prealloc_size(const struct arena *a)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	uint64_t size;
	if (p->prealloc.kind == CUMEMCAP_AMOUNT_BYTES)
		size = p->prealloc.bytes;
	else if (p->prealloc.kind == CUMEMCAP_AMOUNT_PERCENT)
		size = (uint64_t)((unsigned __int128)cumemcap_device_info(a->dev)->total * p->prealloc.permille /
				  100000u);
	else if (cumemcap_ledger_get(a->dev, CUMEMCAP_FIG_limit) != CUMEMCAP_NO_LIMIT)
		size = cumemcap_ledger_headroom(a->dev); /* the limit, less the footprint so far */
	else {
		cumemcap_msg("GPU %d has no limit: CUMEMCAP_GROWTH=preallocate takes nothing there "
			     "(give it a limit, or preallocate:SIZE)", a->dev);
		return 0;
	}
	size = size < SMALL_SEGMENT ? SMALL_SEGMENT : size / SMALL_SEGMENT * SMALL_SEGMENT;
	if (size > (uint64_t)MAX_UNITS << UNIT_SHIFT)
		size = (uint64_t)MAX_UNITS << UNIT_SHIFT & ~(SMALL_SEGMENT - 1);
	return size;
}

void cumemcap_arena_prealloc_failed(const struct cumemcap_arena_request *q, CUresult r)
{
	struct arena *a = q->arena;
	char want[32];
	pthread_mutex_lock(&arena_create_lock);
	cumemcap_spin_lock(&a->lock);
	a->failed = true;
	a->prealloc_held = false;
	cumemcap_spin_unlock(&a->lock);
	pthread_mutex_unlock(&arena_create_lock);
	cumemcap_msg("GPU %d: could not preallocate %s (CUMEMCAP_GROWTH=preallocate, CUDA error %d); "
		     "every allocation in this context on the GPU is refused", a->dev,
		     cumemcap_fmt_size(q->segment_bytes, want, sizeof(want)), (int)r);
}

/* The arena of (ctx, dev, shard), made on first use; NULL: the table is full. */
static struct arena *arena_find(CUcontext ctx, int dev, unsigned shard)
{
	static _Atomic bool said;
	struct arena *found = NULL;
	/* A slot's ctx, dev and shard change only under this lock. */
	pthread_mutex_lock(&arena_create_lock);
	uint32_t n = atomic_load(&cumemcap_arena_count);
	for (uint32_t i = 0; i < n && !found; i++)
		if (arenas[i].ctx == ctx && arenas[i].dev == dev && arenas[i].shard == shard)
			found = &arenas[i];
	for (uint32_t i = 0; i < n && !found; i++)
		if (!arenas[i].ctx)
			found = &arenas[i];
	if (!found && n < MAX_ARENAS) {
		found = &arenas[n];
		arena_clear(found);
		atomic_store_explicit(&cumemcap_arena_count, n + 1, memory_order_release);
	}
	if (found && !found->ctx) {
		const struct cumemcap_policy *p = cumemcap_policy();
		cumemcap_spin_lock(&found->lock);
		arena_clear(found);
		found->dev = dev;
		found->ctx = ctx;
		found->shard = shard;
		cumemcap_ledger_arena_open(figures_of(found), dev);
		/* One preallocation per GPU, the first context's until it dies,
		 * taken by its first request; another context there allocates on
		 * demand (said once). */
		bool prealloc = p->growth == CUMEMCAP_GROWTH_PREALLOCATE;
		for (uint32_t i = 0; i < n && prealloc; i++)
			prealloc = !arenas[i].prealloc_held || arenas[i].dev != dev;
		if (p->growth == CUMEMCAP_GROWTH_PREALLOCATE && !prealloc && !atomic_exchange(&said, true))
			cumemcap_msg("GPU %d: its preallocation (CUMEMCAP_GROWTH=preallocate) belongs to the "
				     "first context on it; another context there allocates on demand, "
				     "within what the limit leaves", dev);
		found->prealloc_held = found->prealloc_due = prealloc;
		cumemcap_spin_unlock(&found->lock);
	}
	pthread_mutex_unlock(&arena_create_lock);
	return found;
}

/* 1 + the calling thread's shard, dealt in turn at its first request. */
static CUMEMCAP_TLS unsigned my_shard;
static _Atomic unsigned shards_dealt;

/* The arena of this thread's packed requests in (ctx, dev), unless the
 * device layer `cached` it; a full table leaves a shard on the primary, and
 * CUMEMCAP_GROWTH=preallocate keeps one arena per context. */
static struct arena *arena_of(CUcontext ctx, int dev, struct arena *cached,
			      const struct cumemcap_policy *p)
{
	if (cached)
		return cached;
	if (!my_shard)
		my_shard = 1 + atomic_fetch_add_explicit(&shards_dealt, 1, memory_order_relaxed) % SHARDS;
	struct arena *found = NULL;
	if (my_shard > 1 && p->growth != CUMEMCAP_GROWTH_PREALLOCATE)
		found = arena_find(ctx, dev, my_shard - 1);
	if (!found)
		found = arena_find(ctx, dev, 0);
	if (found) {
		cumemcap_device_cache_arena(ctx, found);
		arena_last = found;
	}
	return found;
}

/* The primary arena of a's context, for a whole segment's request. */
static struct arena *primary_of(struct arena *a, CUcontext ctx, int dev)
{
	struct arena *p = a->shard ? atomic_load_explicit(&a->primary, memory_order_acquire) : a;
	if (!p && (p = arena_find(ctx, dev, 0)))
		atomic_store_explicit(&a->primary, p, memory_order_release);
	return p;
}

bool cumemcap_arena_serve_sibling(struct cumemcap_arena_request *q, CUdeviceptr *dptr)
{
	q->back = (struct cumemcap_give_back){ 0 };
	if (!q->packed || cumemcap_ledger_headroom(q->dev) >= q->segment_bytes)
		return false;
	uint32_t n = atomic_load_explicit(&cumemcap_arena_count, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		struct arena *b = &arenas[i];
		if (b == q->arena)
			continue;
		cumemcap_spin_lock(&b->lock);
		CUdeviceptr got = 0;
		if (b->ctx == q->ctx && b->dev == q->dev && !b->failed) {
			uint32_t ci = find_any(b, q->units, true);
			if (ci == NONE && b->pending_bytes >= (uint64_t)q->units << UNIT_SHIFT) {
				arena_reclaim(b, &q->back);
				ci = b->ctx == q->ctx ? find_any(b, q->units, true) : NONE;
			}
			got = ci != NONE ? hand_out(b, ci, q->bytes, q->units, true) : 0;
		}
		cumemcap_spin_unlock(&b->lock);
		if (got) {
			*dptr = got;
			return true;
		}
	}
	return false;
}

/* What the arena may hold after growing by `grow`: 9/8 of its peak live
 * bytes, this request counted (so swinging live bytes keep their segments). */
static uint64_t budget_of(const struct arena *a, uint64_t grow)
{
	uint64_t live = a->live_bytes + grow, peak = peak_live(a);
	if (peak < live)
		peak = live;
	return peak + peak / 8;
}

/* Only the default rule (idle) has a budget. */
static bool over_budget(const struct arena *a, uint64_t grow, enum cumemcap_release rule)
{
	return rule == CUMEMCAP_RELEASE_IDLE && a->held + grow > budget_of(a, grow);
}

/* The bytes of wholly free segments that may stay cached when the arena
 * grows by `grow`: none (immediate), all (never), within budget (idle). */
static uint64_t cache_keep(const struct arena *a, uint64_t grow, enum cumemcap_release rule)
{
	if (rule != CUMEMCAP_RELEASE_IDLE)
		return rule == CUMEMCAP_RELEASE_NEVER ? UINT64_MAX : 0;
	uint64_t budget = budget_of(a, grow);
	uint64_t in_use = a->held - a->whole_free + grow;
	return budget > in_use ? budget - in_use : 0;
}

/* Whether a request that found nothing ready waits for the pending
 * frees: they could serve it and are worth a fence (1/16 of the arena,
 * PENDING_ENOUGH, or no room to grow), or growing would pass the budget
 * (giving segments back synchronizes anyway). */
static bool should_wait(const struct arena *a, uint64_t need, uint64_t grow, enum cumemcap_release rule)
{
	if (a->pend_head == NONE)
		return false;
	if (a->pending_bytes >= need &&
	    (a->pending_bytes * 16 >= a->held || a->pending_bytes >= PENDING_ENOUGH ||
	     cumemcap_ledger_headroom(a->dev) < grow))
		return true;
	return over_budget(a, grow, rule);
}

enum cumemcap_arena_answer cumemcap_arena_serve(struct cumemcap_arena_request *q, uint64_t bytes, CUdeviceptr *dptr)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	q->back = (struct cumemcap_give_back){ 0 };
	if (p->pool == CUMEMCAP_POOL_OFF || bytes == 0 || bytes > ((uint64_t)MAX_UNITS << UNIT_SHIFT) / 2)
		return CUMEMCAP_ARENA_NOT_POOLED;
	CUcontext ctx;
	int dev;
	void *cached;
	/* pool=auto pools only GPUs under a limit or a group (all under preallocate). */
	if (cumemcap_device_current_arena(&ctx, &dev, &cached) != CUDA_SUCCESS ||
	    (p->pool == CUMEMCAP_POOL_AUTO && p->growth != CUMEMCAP_GROWTH_PREALLOCATE && !p->group[0] &&
	     cumemcap_ledger_get(dev, CUMEMCAP_FIG_limit) == CUMEMCAP_NO_LIMIT))
		return CUMEMCAP_ARENA_NOT_POOLED;
	struct arena *a = arena_of(ctx, dev, cached, p);
	if (!a)
		return CUMEMCAP_ARENA_NOT_POOLED;
	uint64_t rounded = unit_round(bytes);
	uint32_t units = (uint32_t)(rounded >> UNIT_SHIFT);
	bool packed = p->pool != CUMEMCAP_POOL_NOPACK && rounded <= SMALL_MAX;
	uint64_t seg_bytes = packed ? SMALL_SEGMENT : whole_size(rounded);
	if (!packed && !(a = primary_of(a, ctx, dev)))
		return CUMEMCAP_ARENA_NOT_POOLED;
	*q = (struct cumemcap_arena_request){ .dev = dev, .ctx = ctx, .arena = a, .bytes = bytes,
					      .segment_bytes = seg_bytes, .packed = packed, .units = units };
	cumemcap_spin_lock(&a->lock);
	if (a->prealloc_due) {
		a->prealloc_due = false;
		cumemcap_spin_unlock(&a->lock);
		uint64_t whole = prealloc_size(a); /* 0: nothing to take, serve as usual */
		if (whole) {
			q->segment_bytes = whole;
			q->prealloc = true;
			return CUMEMCAP_ARENA_NEEDS_SEGMENT;
		}
		cumemcap_spin_lock(&a->lock);
	}
	if (a->failed) {
		cumemcap_spin_unlock(&a->lock);
		return CUMEMCAP_ARENA_REFUSED;
	}
	uint32_t ci = find_any(a, units, packed);
	if (ci == NONE && should_wait(a, rounded, seg_bytes, p->release)) {
		arena_reclaim(a, &q->back);
		ci = find_any(a, units, packed);
	}
	/* Past the budget, a cached whole segment of up to twice the request
	 * serves it, while such blocks leave at most 1/16 of the peak unused. */
	if (ci == NONE && !packed && over_budget(a, seg_bytes, p->release)) {
		ci = find_ready(a, units, false, true);
		if (ci != NONE && a->waste + a->segs[a->chunks[ci].seg].bytes - rounded > peak_live(a) / 16)
			ci = NONE;
	}
	if (ci != NONE) {
		CUdeviceptr got = hand_out(a, ci, bytes, units, true);
		cumemcap_spin_unlock(&a->lock);
		if (got)
			*dptr = got;
		return got ? CUMEMCAP_ARENA_SERVED : CUMEMCAP_ARENA_NOT_POOLED;
	}
	/* Grow: first name the cached segments the release rule does not keep. */
	arena_collect(a, &q->back, cache_keep(a, seg_bytes, p->release), 0);
	cumemcap_spin_unlock(&a->lock);
	return CUMEMCAP_ARENA_NEEDS_SEGMENT;
}

bool cumemcap_arena_add_segment(const struct cumemcap_arena_request *q, CUdeviceptr base, CUdeviceptr *dptr)
{
	struct arena *a = q->arena;
	cumemcap_spin_lock(&a->lock);
	uint32_t ci = arena_seg_add(a, base, q->segment_bytes, q->packed || q->prealloc, q->prealloc);
	CUdeviceptr got = ci != NONE && !q->prealloc ? hand_out(a, ci, q->bytes, q->units, false) : 0;
	if (ci != NONE && !q->prealloc && !got)
		arena_seg_detach(a, a->chunks[ci].seg);
	cumemcap_spin_unlock(&a->lock);
	*dptr = got;
	return ci != NONE && (q->prealloc || got);
}
