/* ledger: see ledger.h. Lock-free: every field is an atomic (a dying
 * thread's slot is folded in under fold_lock, which nothing else on a hot
 * path takes; readers retry around a fold instead). Also owns
 * the figure list's columns as data (cumemcap_figure_info, figures.h),
 * which are constant. */
#include "state/ledger.h"

#include <pthread.h>
#include <stddef.h>

#include "platform/spin.h"
#include "group/group.h"

const struct cumemcap_figure_text cumemcap_figure_text = {
#define X(name, src, kind_, unit_, null_, stats_, event_, sample_, exit_, summary_, pre_, post_, key_, prom_, \
	  help_)                                                                                              \
	key_, prom_, help_, pre_, post_,
	CUMEMCAP_FIGURES(X)
#undef X
};
_Static_assert(sizeof(cumemcap_figure_text) <= UINT16_MAX, "a text column's offset fits its uint16_t");

#define TEXT(col, name) offsetof(struct cumemcap_figure_text, col##_##name)
const struct cumemcap_figure_info cumemcap_figure_info[CUMEMCAP_FIG_COUNT] = {
#define X(name, src, kind_, unit_, null_, stats_, event_, sample_, exit_, summary_, pre_, post_, key_, \
	  prom_, help_)                                                                              \
	[CUMEMCAP_FIG_##name] = { .key = TEXT(k, name),                                            \
				  .prom = TEXT(p, name),                                           \
				  .help = TEXT(h, name),                                           \
				  .pre = TEXT(b, name),                                            \
				  .post = TEXT(a, name),                                           \
				  .kind = CUMEMCAP_FK_##kind_,                                     \
				  .unit = CUMEMCAP_FU_##unit_,                                     \
				  .null = null_,                                                   \
				  .stats = stats_,                                                 \
				  .event = event_,                                                 \
				  .sample = sample_,                                               \
				  .exit = exit_,                                                   \
				  .summary = summary_ },
	CUMEMCAP_FIGURES(X)
#undef X
};
#undef TEXT

struct cumemcap_ledger_device cumemcap_ledger[CUMEMCAP_MAX_DEVICES];
struct cumemcap_ledger_shard cumemcap_ledger_shards[CUMEMCAP_LEDGER_SHARDS];

/* The limit, the overhead and the cap are written together under this
 * lock (never on an allocation's path: they change when a GPU becomes
 * known and when the overhead is learned again); readers load each alone. */
static atomic_flag settings_lock = ATOMIC_FLAG_INIT;
static _Atomic bool count_footprint = true;

void cumemcap_ledger_count_footprint(bool footprint)
{
	atomic_store(&count_footprint, footprint);
}

static inline __attribute__((always_inline)) void raise_to(_Atomic uint64_t *peak_field, uint64_t now)
{
	uint64_t peak = atomic_load_explicit(peak_field, memory_order_relaxed);
	while (now > peak &&
	       !atomic_compare_exchange_weak_explicit(peak_field, &peak, now, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/* Caller holds settings_lock. */
static void set_cap(struct cumemcap_ledger_device *d)
{
	uint64_t limit = atomic_load(&d->limit), over = atomic_load(&d->overhead);
	uint64_t cap = limit;
	if (limit != CUMEMCAP_NO_LIMIT && atomic_load(&count_footprint))
		cap = over >= limit ? 0 : limit - over;
	atomic_store(&d->cap, cap);
}

void cumemcap_ledger_set_limit(int dev, uint64_t limit)
{
	if (!cumemcap_ledger_valid(dev))
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	cumemcap_spin_lock(&settings_lock);
	atomic_store(&d->limit, limit);
	set_cap(d);
	cumemcap_spin_unlock(&settings_lock);
}

void cumemcap_ledger_set_overhead(int dev, uint64_t bytes, enum cumemcap_overhead_source source)
{
	if (!cumemcap_ledger_valid(dev))
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	cumemcap_spin_lock(&settings_lock);
	uint64_t old = atomic_exchange(&d->overhead, bytes);
	atomic_store(&d->source, (int)source);
	set_cap(d);
	cumemcap_spin_unlock(&settings_lock);
	/* A group counts what the limit counts: the overhead too. */
	if (atomic_load(&count_footprint) && bytes > old)
		cumemcap_group_force(dev, bytes - old);
	else if (atomic_load(&count_footprint) && bytes < old)
		cumemcap_group_give(dev, old - bytes);
	raise_to(&d->peak_footprint, cumemcap_ledger_sum_footprint(dev, d));
}

enum cumemcap_overhead_source cumemcap_ledger_source(int dev)
{
	return cumemcap_ledger_valid(dev) ? (enum cumemcap_overhead_source)atomic_load(&cumemcap_ledger[dev].source)
					  : CUMEMCAP_OVERHEAD_none;
}

const char *cumemcap_overhead_source_name(enum cumemcap_overhead_source source)
{
	static const char *const names[] = {
#define X(name) #name,
		CUMEMCAP_OVERHEAD_SOURCES(X)
#undef X
	};
	return (unsigned)source < sizeof(names) / sizeof(names[0]) ? names[source] : "none";
}

uint64_t cumemcap_ledger_limit(int dev)
{
	return cumemcap_ledger_valid(dev) ? atomic_load(&cumemcap_ledger[dev].limit) : CUMEMCAP_NO_LIMIT;
}

void cumemcap_ledger_note_request(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev))
		raise_to(&cumemcap_ledger[dev].largest_request, bytes);
}

/* `reserved` rose to `now` (on a device with a limit: the atomic is the
 * figure): its peak and the footprint's follow. */
static inline __attribute__((always_inline)) void raise_peak(struct cumemcap_ledger_device *d, uint64_t now)
{
	raise_to(&d->peak_reserved, now);
	raise_to(&d->peak_footprint, now + atomic_load_explicit(&d->overhead, memory_order_relaxed));
}

/* ---- per-thread deltas of live and pooled (ledger.h) -------------------------------- */

CUMEMCAP_TLS struct cumemcap_ledger_local *cumemcap_ledger_mine;
CUMEMCAP_TLS struct cumemcap_ledger_local *cumemcap_ledger_own;
_Atomic bool cumemcap_ledger_pooled_slots;
static CUMEMCAP_TLS bool slotless; /* found every slot taken: use the atomics */
struct cumemcap_ledger_local cumemcap_ledger_locals[CUMEMCAP_LEDGER_LOCALS];
_Atomic int cumemcap_ledger_locals_used; /* slots ever taken: 0 .. this-1 (-1: none can be) */
static pthread_once_t locals_once = PTHREAD_ONCE_INIT;
static pthread_key_t locals_key;
/* A dying thread's deltas are folded into the device's atomics under
 * fold_lock; readers retry a sum that a fold ran through
 * (cumemcap_ledger_fold_seq odd while one runs, bumped twice per fold). */
static atomic_flag fold_lock = ATOMIC_FLAG_INIT;
_Atomic uint32_t cumemcap_ledger_fold_seq;

static _Atomic uint64_t *shared_of(struct cumemcap_ledger_device *d, int which)
{
	return which == CUMEMCAP_LOCAL_live ? &d->live : which == CUMEMCAP_LOCAL_pooled ? &d->pooled : &d->reserved;
}

static _Atomic uint64_t *peak_of(struct cumemcap_ledger_device *d, int which)
{
	return which == CUMEMCAP_LOCAL_live	? &d->peak_live
	       : which == CUMEMCAP_LOCAL_pooled ? &d->peak_pooled
						: &d->peak_reserved;
}

/* Figure `which` of dev may have reached `bound`: its peak follows (and
 * for `reserved` the footprint's, with the overhead). */
static void raise_peaks(int dev, int which, uint64_t bound)
{
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	raise_to(peak_of(d, which), bound);
	if (which == CUMEMCAP_LOCAL_reserved)
		raise_to(&d->peak_footprint, bound + atomic_load_explicit(&d->overhead, memory_order_relaxed));
}

/* `own` (the device's atomic, or nothing) plus the 64-bit field at `off`
 * in dev's moves of every slot ever taken, loaded with `order`, retried
 * around a fold, which moves a delta from a slot to the atomic: read
 * across it, the delta would count twice or not at all. The retry is
 * bounded: a reader in a signal handler that interrupted a fold on its own
 * thread takes the sum as it is. dev is in range. */
static inline __attribute__((always_inline)) uint64_t sum_slots(int dev, _Atomic uint64_t *own, size_t off,
								 memory_order order)
{
	for (int tries = 0;; tries++) {
		uint32_t seq = atomic_load(&cumemcap_ledger_fold_seq);
		uint64_t n = own ? atomic_load(own) : 0;
		int used = atomic_load(&cumemcap_ledger_locals_used);
		for (int i = 0; i < used; i++)
			n += (uint64_t)atomic_load_explicit((_Atomic int64_t *)((char *)&cumemcap_ledger_locals[i].dev[dev] + off),
							    order);
		if (tries >= 64 || (!(seq & 1) && atomic_load(&cumemcap_ledger_fold_seq) == seq))
			return n;
	}
}

/* The device's atomic of figure `which` on dev plus every slot's bound
 * (sequentially consistent loads: see the rule in ledger.h). */
static uint64_t bound_sum(int dev, int which)
{
	return sum_slots(dev, shared_of(&cumemcap_ledger[dev], which),
			 offsetof(struct cumemcap_ledger_moves, high) + (size_t)which * sizeof(int64_t),
			 memory_order_seq_cst);
}

/* Raises of each figure of each GPU since the start: a raise bumps its
 * figure's before it stores anything, and so does a rise of the device's
 * atomic before the atomic rises (a top update checks it after loading the
 * atomic: a rise it did not see the bump of, it did not see at all). */
static _Atomic uint32_t raise_epoch[CUMEMCAP_MAX_DEVICES][CUMEMCAP_LOCAL_COUNT];

static inline uint64_t epoch_now(int dev, int which)
{
	return (uint64_t)atomic_load(&raise_epoch[dev][which]) << 32 | atomic_load(&cumemcap_ledger_fold_seq);
}

/* The sum of every slot's bound of `which` on dev but m's own (m's bound
 * stored before, sequentially consistent; see the rule in ledger.h). */
static int64_t others_sum(int dev, struct cumemcap_ledger_moves *m, int which)
{
	uint64_t all = sum_slots(dev, NULL, offsetof(struct cumemcap_ledger_moves, high) + (size_t)which * sizeof(int64_t),
				 memory_order_seq_cst);
	return (int64_t)(all - (uint64_t)atomic_load_explicit(&m->high[which], memory_order_relaxed));
}

static void raise_slot(int dev, struct cumemcap_ledger_moves *m, int which, int64_t v, int64_t step);

/* m's mark of `which` becomes its delta v (counted), and its top (and, for
 * reserved, its footprint's top, the device's overhead added) rises to
 * `top` if that is higher. Plain stores to the thread's own slot. */
static inline __attribute__((always_inline)) void store_top(struct cumemcap_ledger_device *d,
							     struct cumemcap_ledger_moves *m, int which, int64_t v,
							     uint64_t top)
{
	atomic_store_explicit(&m->mark[which], v, memory_order_relaxed);
	if (top > atomic_load_explicit(&m->top[which], memory_order_relaxed))
		atomic_store_explicit(&m->top[which], top, memory_order_relaxed);
	if (which == CUMEMCAP_LOCAL_reserved) {
		uint64_t fp = top + atomic_load_explicit(&d->overhead, memory_order_relaxed);
		if (fp > atomic_load_explicit(&m->top[CUMEMCAP_LOCAL_footprint], memory_order_relaxed))
			atomic_store_explicit(&m->top[CUMEMCAP_LOCAL_footprint], fp, memory_order_relaxed);
	}
}

/* m's top of `which` on dev now that its delta is v (counted: the mark):
 * the device's atomic (fresh) plus the others' bounds as last summed plus
 * v. Plain stores to the thread's own slot. */
static inline __attribute__((always_inline)) void update_top(int dev, struct cumemcap_ledger_moves *m, int which,
							      int64_t v)
{
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	uint64_t top = atomic_load(shared_of(d, which)) +
		       (uint64_t)atomic_load_explicit(&m->others[which], memory_order_relaxed) + (uint64_t)v;
	if (__builtin_expect(epoch_now(dev, which) != atomic_load_explicit(&m->epoch[which], memory_order_relaxed), 0)) {
		raise_slot(dev, m, which, v, CUMEMCAP_LEDGER_STEP);
		return;
	}
	store_top(d, m, which, v, top);
}

/* A raise (ledger.h): m's bound of `which` becomes v + step, the others'
 * bounds are summed, the top follows from v. */
static void raise_slot(int dev, struct cumemcap_ledger_moves *m, int which, int64_t v, int64_t step)
{
	uint32_t mine = atomic_fetch_add(&raise_epoch[dev][which], 1) + 1;
	atomic_store(&m->high[which], cumemcap_ledger_sat_add(v, step));
	uint32_t seq = atomic_load(&cumemcap_ledger_fold_seq);
	int64_t others = others_sum(dev, m, which);
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	uint64_t top = atomic_load(shared_of(d, which)) + (uint64_t)others + (uint64_t)v;
	atomic_store_explicit(&m->others[which], others, memory_order_relaxed);
	/* The raise this is (another raise or a fold that ran through the
	 * sum: the next update raises again). */
	uint64_t epoch = (uint64_t)mine << 32 | seq;
	atomic_store_explicit(&m->epoch[which], epoch, memory_order_relaxed);
	store_top(d, m, which, v, top);
}

void cumemcap_ledger_raise_local(int dev, struct cumemcap_ledger_moves *m, int which, int64_t v)
{
	if (v < atomic_load_explicit(&m->mark[which], memory_order_relaxed)) {
		/* Fell more than LOW below the mark: the bound comes down to
		 * LOW above the delta, the mark to it (v is counted: the
		 * mark stays at or below the bound). */
		atomic_store_explicit(&m->high[which], cumemcap_ledger_sat_add(v, CUMEMCAP_LEDGER_LOW),
				      memory_order_relaxed);
		atomic_store_explicit(&m->mark[which], v, memory_order_relaxed);
		return;
	}
	if (v > atomic_load_explicit(&m->high[which], memory_order_relaxed))
		raise_slot(dev, m, which, v, CUMEMCAP_LEDGER_STEP);
	else
		update_top(dev, m, which, v);
}

uint32_t cumemcap_ledger_raises(int dev, int which)
{
	return cumemcap_ledger_valid(dev) && which >= 0 && which < CUMEMCAP_LOCAL_COUNT
		       ? atomic_load(&raise_epoch[dev][which])
		       : 0;
}

/* The device's atomic of `which` rose (this thread's change, made
 * before): the peak follows, counting this thread's delta rather than its
 * bound. */
static void raise_shared(int dev, int which)
{
	struct cumemcap_ledger_local *l = cumemcap_ledger_own;
	if (l) {
		struct cumemcap_ledger_moves *m = &l->dev[dev];
		raise_slot(dev, m, which, atomic_load_explicit(&m->delta[which], memory_order_relaxed), 0);
		return;
	}
	raise_peaks(dev, which, bound_sum(dev, which));
}

/* The peak of `which` on dev (in range) a slot's top holds. */
static _Atomic uint64_t *peak_top_of(struct cumemcap_ledger_device *d, int which)
{
	return which == CUMEMCAP_LOCAL_footprint ? &d->peak_footprint : peak_of(d, which);
}

uint64_t cumemcap_ledger_peak(int dev, _Atomic uint64_t *own, int which)
{
	if (!cumemcap_ledger_valid(dev) || atomic_load_explicit(&cumemcap_ledger_locals_used, memory_order_relaxed) <= 0)
		return atomic_load(own);
	for (int tries = 0;; tries++) {
		uint32_t seq = atomic_load(&cumemcap_ledger_fold_seq);
		uint64_t n = atomic_load(own);
		int used = atomic_load(&cumemcap_ledger_locals_used);
		for (int i = 0; i < used; i++) {
			uint64_t t = atomic_load_explicit(&cumemcap_ledger_locals[i].dev[dev].top[which], memory_order_relaxed);
			n = t > n ? t : n;
		}
		if (tries >= 64 || (!(seq & 1) && atomic_load(&cumemcap_ledger_fold_seq) == seq))
			return n;
	}
}

/* A thread exits: its deltas go to the device's atomics, its slot back. */
static void fold_slot(void *arg)
{
	struct cumemcap_ledger_local *l = arg;
	cumemcap_spin_lock(&fold_lock);
	atomic_fetch_add(&cumemcap_ledger_fold_seq, 1);
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		struct cumemcap_ledger_moves *m = &l->dev[dev];
		for (int w = 0; w < CUMEMCAP_LOCAL_COUNT; w++) {
			int64_t v = atomic_exchange(&m->delta[w], 0);
			if (v)
				atomic_fetch_add(shared_of(&cumemcap_ledger[dev], w), (uint64_t)v);
			atomic_store(&m->high[w], 0);
			atomic_store(&m->mark[w], 0);
			atomic_store(&m->others[w], 0);
			atomic_store(&m->epoch[w], 0);
		}
		struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
		/* The tops go to the peaks' atomics (a reader retries around
		 * the fold: it sees the top or the raised atomic). */
		for (int w = 0; w <= CUMEMCAP_LOCAL_footprint; w++)
			raise_to(peak_top_of(d, w), atomic_exchange(&m->top[w], 0));
		for (int k = 0; k < CUMEMCAP_KIND_COUNT; k++) {
			int64_t v = atomic_exchange(&m->kind[k], 0);
			if (v)
				atomic_fetch_add(&d->kind[k], (uint64_t)v);
		}
		uint64_t n = atomic_exchange(&m->allocs, 0);
		if (n)
			atomic_fetch_add(&d->allocs, n);
		if ((n = atomic_exchange(&m->frees, 0)))
			atomic_fetch_add(&d->frees, n);
	}
	atomic_fetch_add(&cumemcap_ledger_fold_seq, 1);
	cumemcap_spin_unlock(&fold_lock);
	if (cumemcap_ledger_mine == l)
		cumemcap_ledger_mine = NULL;
	if (cumemcap_ledger_own == l)
		cumemcap_ledger_own = NULL;
	atomic_store(&l->used, false);
}

static void make_key(void)
{
	if (pthread_key_create(&locals_key, fold_slot) != 0)
		atomic_store(&cumemcap_ledger_locals_used, -1); /* no destructor: no slots */
}

/* Take a free slot for this thread; false when there is none. */
static bool take_slot(void)
{
	pthread_once(&locals_once, make_key);
	int used = atomic_load(&cumemcap_ledger_locals_used);
	if (used < 0)
		return false;
	for (int i = 0; i < CUMEMCAP_LEDGER_LOCALS; i++) {
		bool expected = false;
		if (atomic_load_explicit(&cumemcap_ledger_locals[i].used, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&cumemcap_ledger_locals[i].used, &expected, true))
			continue;
		if (pthread_setspecific(locals_key, &cumemcap_ledger_locals[i]) != 0) {
			atomic_store(&cumemcap_ledger_locals[i].used, false);
			return false;
		}
		while (i + 1 > used && !atomic_compare_exchange_weak(&cumemcap_ledger_locals_used, &used, i + 1))
			;
		cumemcap_ledger_own = &cumemcap_ledger_locals[i];
		return true;
	}
	return false;
}

/* The device's atomic of `which` rises by `bytes`, its peak with it. */
static inline __attribute__((always_inline)) void shared_add(int dev, int which, uint64_t bytes)
{
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	if (atomic_load_explicit(&cumemcap_ledger_locals_used, memory_order_relaxed) > 0)
		atomic_fetch_add(&raise_epoch[dev][which], 1); /* the slots' tops: see raise_epoch */
	uint64_t now = atomic_fetch_add(shared_of(d, which), bytes) + bytes;
	if (__builtin_expect(atomic_load_explicit(&cumemcap_ledger_locals_used, memory_order_relaxed) <= 0, 1))
		raise_peaks(dev, which, now); /* no slot: the atomic is the figure */
	else
		raise_shared(dev, which);
}

static void shared_move(int dev, int which, int64_t by)
{
	_Atomic uint64_t *f = shared_of(&cumemcap_ledger[dev], which);
	if (by > 0)
		shared_add(dev, which, (uint64_t)by);
	else if (by < 0)
		atomic_fetch_sub(f, (uint64_t)-by);
}

struct cumemcap_ledger_local *cumemcap_ledger_own_slow(void)
{
	if (!cumemcap_ledger_own && !slotless && !take_slot())
		slotless = true;
	return cumemcap_ledger_own;
}

void cumemcap_ledger_move_slow(int dev, int64_t live, int64_t pooled)
{
	if (!cumemcap_ledger_valid(dev))
		return;
	if (!cumemcap_ledger_mine && cumemcap_ledger_own_slow()) {
		/* From now on `pooled` is read from the slots too: the flag
		 * is stored before this thread's first pooled move. */
		if (!atomic_load_explicit(&cumemcap_ledger_pooled_slots, memory_order_relaxed))
			atomic_store(&cumemcap_ledger_pooled_slots, true);
		cumemcap_ledger_mine = cumemcap_ledger_own;
	}
	if (cumemcap_ledger_mine) {
		cumemcap_ledger_move(dev, live, pooled);
		return;
	}
	shared_move(dev, CUMEMCAP_LOCAL_live, live);
	shared_move(dev, CUMEMCAP_LOCAL_pooled, pooled);
}

uint64_t cumemcap_ledger_local_sum_slots(int dev, _Atomic uint64_t *own, int which)
{
	if (!cumemcap_ledger_valid(dev))
		return atomic_load(own);
	return sum_slots(dev, own, offsetof(struct cumemcap_ledger_moves, delta) + (size_t)which * sizeof(int64_t),
			 memory_order_relaxed);
}

uint64_t cumemcap_ledger_slot_sum(int dev, _Atomic uint64_t *own, size_t off)
{
	if (!cumemcap_ledger_valid(dev))
		return own ? atomic_load(own) : 0;
	return sum_slots(dev, own, off, memory_order_relaxed);
}

/* ---- live: the thread's slot (ledger.h), the shared atomic without one -------------- */

/* Figure `which` (live or reserved) of dev (in range) changes by `by`: in
 * the thread's slot (ledger.h), on the shared atomic when it has none. */
static inline __attribute__((always_inline)) void slot_move(int dev, int which, int64_t by)
{
	struct cumemcap_ledger_moves *m = cumemcap_ledger_own_moves(dev);
	if (m)
		cumemcap_ledger_move_one(dev, m, which, by);
	else
		shared_move(dev, which, by);
}

void cumemcap_ledger_live_add(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev) && bytes)
		slot_move(dev, CUMEMCAP_LOCAL_live, (int64_t)bytes);
}

void cumemcap_ledger_live_sub(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev) && bytes)
		slot_move(dev, CUMEMCAP_LOCAL_live, -(int64_t)bytes);
}

/* ---- the shared atomics ------------------------------------------------------------ */

/* The bytes of `kind` on dev (in range) change by `by`: in the thread's
 * slot for a slotted kind (ledger.h), else on the device's atomic. */
static inline __attribute__((always_inline)) void kind_move(int dev, enum cumemcap_kind kind, int64_t by)
{
	struct cumemcap_ledger_moves *m;
	if (cumemcap_ledger_slotted(kind) && (m = cumemcap_ledger_own_moves(dev))) {
		atomic_store_explicit(&m->kind[kind], atomic_load_explicit(&m->kind[kind], memory_order_relaxed) + by,
				      memory_order_relaxed);
		return;
	}
	if (by >= 0)
		atomic_fetch_add_explicit(&cumemcap_ledger[dev].kind[kind], (uint64_t)by, memory_order_relaxed);
	else
		atomic_fetch_sub_explicit(&cumemcap_ledger[dev].kind[kind], (uint64_t)-by, memory_order_relaxed);
}

void cumemcap_ledger_pooled_add(int dev, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	shared_add(dev, CUMEMCAP_LOCAL_pooled, bytes);
}

void cumemcap_ledger_pooled_sub(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev) && bytes)
		atomic_fetch_sub_explicit(&cumemcap_ledger[dev].pooled, bytes, memory_order_relaxed);
}

/* The reservation against the process's cap alone. */
static inline __attribute__((always_inline)) bool reserve_local(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	uint64_t cap = atomic_load_explicit(&d->cap, memory_order_relaxed);
	if (cap == CUMEMCAP_NO_LIMIT) {
		slot_move(dev, CUMEMCAP_LOCAL_reserved, (int64_t)bytes);
		kind_move(dev, kind, (int64_t)bytes);
		return true;
	}
	uint64_t cur = atomic_load_explicit(&d->reserved, memory_order_relaxed);
	for (;;) {
		if (bytes > cap || cur > cap - bytes)
			return false;
		if (atomic_compare_exchange_weak_explicit(&d->reserved, &cur, cur + bytes,
							  memory_order_acq_rel, memory_order_relaxed))
			break;
	}
	kind_move(dev, kind, (int64_t)bytes);
	raise_peak(d, cur + bytes);
	return true;
}

/* In a group: the group's budget first, then the process's cap (the
 * group's share goes back when the cap says no). Out of line, so that a
 * process in no group pays one load for it. */
__attribute__((noinline)) static bool reserve_in_group(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	/* Pool growth left unread from before the group was joined counts first. */
	cumemcap_ledger_read_growth(dev);
	if (!cumemcap_group_take_member(dev, bytes))
		return false;
	if (reserve_local(dev, kind, bytes))
		return true;
	cumemcap_group_give_member(dev, bytes);
	return false;
}

bool cumemcap_ledger_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev))
		return true;
	if (__builtin_expect(atomic_load_explicit(&cumemcap_group_hot, memory_order_relaxed) & 1, 0))
		return reserve_in_group(dev, kind, bytes);
	return reserve_local(dev, kind, bytes);
}

void cumemcap_ledger_add(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	kind_move(dev, kind, (int64_t)bytes);
	if (atomic_load_explicit(&d->cap, memory_order_relaxed) == CUMEMCAP_NO_LIMIT) {
		slot_move(dev, CUMEMCAP_LOCAL_reserved, (int64_t)bytes);
		cumemcap_group_force(dev, bytes);
		return;
	}
	uint64_t now = atomic_fetch_add_explicit(&d->reserved, bytes, memory_order_acq_rel) + bytes;
	cumemcap_group_force(dev, bytes);
	raise_peak(d, now);
}

void cumemcap_ledger_sub(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	if (atomic_load_explicit(&d->cap, memory_order_relaxed) == CUMEMCAP_NO_LIMIT)
		slot_move(dev, CUMEMCAP_LOCAL_reserved, -(int64_t)bytes);
	else
		atomic_fetch_sub_explicit(&d->reserved, bytes, memory_order_acq_rel);
	kind_move(dev, kind, -(int64_t)bytes);
	cumemcap_group_give(dev, bytes);
}

uint64_t cumemcap_ledger_headroom(int dev)
{
	if (!cumemcap_ledger_valid(dev))
		return UINT64_MAX;
	uint64_t cap = atomic_load(&cumemcap_ledger[dev].cap);
	if (cap == CUMEMCAP_NO_LIMIT)
		return UINT64_MAX;
	uint64_t cur = atomic_load(&cumemcap_ledger[dev].reserved);
	return cur >= cap ? 0 : cap - cur;
}

/* A fork's child starts from zero; the limit (src `setting`) stays. */
#define RESET_field(d, name) atomic_store(&(d)->name, 0);
#define RESET_sharded(d, name) atomic_store(&(d)->name, 0);
#define RESET_setting(d, name)
#define RESET_kind(d, name) atomic_store(&(d)->kind[CUMEMCAP_KIND_##name], 0);
#define RESET_device(d, name)
#define RESET_log(d, name)
#define RESET_sum(d, name)
#define RESET_group(d, name)
#define RESET_local(d, name) atomic_store(&(d)->name, 0);
#define SHARD_RESET_field(s, name)
#define SHARD_RESET_sharded(s, name) atomic_store(&(s)->name, 0);
#define SHARD_RESET_setting(s, name)
#define SHARD_RESET_kind(s, name)
#define SHARD_RESET_device(s, name)
#define SHARD_RESET_log(s, name)
#define SHARD_RESET_sum(s, name)
#define SHARD_RESET_group(s, name)
#define SHARD_RESET_local(s, name)

void cumemcap_ledger_reset(void)
{
	for (int i = 0; i < CUMEMCAP_MAX_DEVICES; i++) {
		struct cumemcap_ledger_device *d = &cumemcap_ledger[i];
#define X(name, src, ...) RESET_##src(d, name)
		CUMEMCAP_FIGURES(X)
#undef X
		/* No context survives a fork: nothing is learned, the cap is
		 * the limit. */
		atomic_store(&d->source, CUMEMCAP_OVERHEAD_none);
		atomic_store(&d->cap, atomic_load(&d->limit));
	}
	/* Slots: zeroed; only the calling thread's stays taken (a forked
	 * child has no other thread). */
	for (int i = 0, used = atomic_load(&cumemcap_ledger_locals_used); i < used; i++) {
		struct cumemcap_ledger_local *l = &cumemcap_ledger_locals[i];
		for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		{
			struct cumemcap_ledger_moves *m = &l->dev[dev];
			for (int w = 0; w < CUMEMCAP_LOCAL_COUNT; w++) {
				atomic_store(&m->delta[w], 0);
				atomic_store(&m->high[w], 0);
				atomic_store(&m->mark[w], 0);
				atomic_store(&m->others[w], 0);
				atomic_store(&m->epoch[w], 0);
			}
			for (int w = 0; w <= CUMEMCAP_LOCAL_footprint; w++)
				atomic_store(&m->top[w], 0);
			for (int k = 0; k < CUMEMCAP_KIND_COUNT; k++)
				atomic_store(&m->kind[k], 0);
			atomic_store(&m->allocs, 0);
			atomic_store(&m->frees, 0);
		}
		if (l != cumemcap_ledger_own)
			atomic_store(&l->used, false);
	}
	atomic_store(&cumemcap_ledger_pooled_slots, cumemcap_ledger_mine != NULL);
	cumemcap_spin_unlock(&fold_lock);
	atomic_store(&cumemcap_ledger_fold_seq, 0);
	for (int i = 0; i < CUMEMCAP_MAX_DEVICES; i++)
		for (int w = 0; w < CUMEMCAP_LOCAL_COUNT; w++)
			atomic_store(&raise_epoch[i][w], 0);
	for (int i = 0; i < CUMEMCAP_LEDGER_SHARDS; i++) {
		struct cumemcap_ledger_shard *s = &cumemcap_ledger_shards[i];
#define X(name, src, ...) SHARD_RESET_##src(s, name)
		CUMEMCAP_FIGURES(X)
#undef X
	}
}

static _Atomic int shards_used; /* shards ever opened: 0 .. shards_used-1 */

void cumemcap_ledger_shard_open(struct cumemcap_ledger_shard *s, int dev)
{
#define X(name, src, ...) SHARD_RESET_##src(s, name)
	CUMEMCAP_FIGURES(X)
#undef X
	atomic_store(&s->dev, cumemcap_ledger_valid(dev) ? dev : -1);
	int idx = (int)(s - cumemcap_ledger_shards), used = atomic_load(&shards_used);
	while (idx + 1 > used && !atomic_compare_exchange_weak(&shards_used, &used, idx + 1))
		;
}

void cumemcap_ledger_shard_close(struct cumemcap_ledger_shard *s)
{
	int dev = atomic_exchange(&s->dev, -1);
	if (!cumemcap_ledger_valid(dev))
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
#define SHARD_FOLD_field(name)
#define SHARD_FOLD_sharded(name) atomic_fetch_add(&d->name, atomic_exchange(&s->name, 0));
#define SHARD_FOLD_setting(name)
#define SHARD_FOLD_kind(name)
#define SHARD_FOLD_device(name)
#define SHARD_FOLD_log(name)
#define SHARD_FOLD_sum(name)
#define SHARD_FOLD_group(name)
#define SHARD_FOLD_local(name)
#define X(name, src, ...) SHARD_FOLD_##src(name)
	CUMEMCAP_FIGURES(X)
#undef X
}

uint64_t cumemcap_ledger_sharded_sum(int dev, _Atomic uint64_t *own, size_t off)
{
	uint64_t n = atomic_load(own);
	if (!cumemcap_ledger_valid(dev))
		return n;
	int used = atomic_load_explicit(&shards_used, memory_order_acquire);
	for (int i = 0; i < used; i++) {
		const struct cumemcap_ledger_shard *s = &cumemcap_ledger_shards[i];
		if (atomic_load_explicit(&s->dev, memory_order_relaxed) == dev)
			n += atomic_load_explicit((_Atomic uint64_t *)((char *)s + off), memory_order_relaxed);
	}
	return n;
}

struct cumemcap_ledger_device cumemcap_ledger_nowhere = { .limit = CUMEMCAP_NO_LIMIT, .cap = CUMEMCAP_NO_LIMIT };

_Atomic bool cumemcap_ledger_growth_unread[CUMEMCAP_MAX_DEVICES];
void (*_Atomic cumemcap_ledger_growth_reader)(int dev);

void cumemcap_ledger_read(int dev, struct cumemcap_figures *out)
{
	for (int i = 0; i < CUMEMCAP_FIG_COUNT; i++)
		out->v[i] = cumemcap_ledger_get(dev, (enum cumemcap_figure)i);
}
