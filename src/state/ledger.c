/* ledger: see ledger.h. Lock-free: every field is an atomic. Also owns
 * the figure list's columns as data (cumemcap_figure_info, figures.h),
 * which are constant. */
#include "state/ledger.h"

#include <stddef.h>

#include "platform/spin.h"
#include "state/group.h"

const struct cumemcap_figure_info cumemcap_figure_info[CUMEMCAP_FIG_COUNT] = {
#define X(name, src, kind_, unit_, null_, stats_, event_, sample_, exit_, summary_, pre_, post_, key_, \
	  prom_, help_)                                                                              \
	[CUMEMCAP_FIG_##name] = { .key = key_,                                                     \
				  .prom = prom_,                                                   \
				  .help = help_,                                                   \
				  .pre = pre_,                                                     \
				  .post = post_,                                                   \
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

static void raise_to(_Atomic uint64_t *peak_field, uint64_t now)
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
	raise_to(&d->peak_footprint, cumemcap_ledger_sum_footprint(d));
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

/* `reserved` rose to `now`: its peak and the footprint's follow. */
static void raise_peak(struct cumemcap_ledger_device *d, uint64_t now)
{
	raise_to(&d->peak_reserved, now);
	raise_to(&d->peak_footprint, now + atomic_load_explicit(&d->overhead, memory_order_relaxed));
}

void cumemcap_ledger_live_add(int dev, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	raise_to(&d->peak_live, atomic_fetch_add_explicit(&d->live, bytes, memory_order_relaxed) + bytes);
}

void cumemcap_ledger_live_sub(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev) && bytes)
		atomic_fetch_sub_explicit(&cumemcap_ledger[dev].live, bytes, memory_order_relaxed);
}

void cumemcap_ledger_pooled_add(int dev, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	raise_to(&d->peak_pooled,
		 atomic_fetch_add_explicit(&d->pooled, bytes, memory_order_relaxed) + bytes);
}

void cumemcap_ledger_pooled_sub(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev) && bytes)
		atomic_fetch_sub_explicit(&cumemcap_ledger[dev].pooled, bytes, memory_order_relaxed);
}

/* The reservation against the process's cap alone. */
static inline __attribute__((always_inline)) bool reserve_local(struct cumemcap_ledger_device *d,
								enum cumemcap_kind kind, uint64_t bytes)
{
	uint64_t cap = atomic_load_explicit(&d->cap, memory_order_relaxed);
	uint64_t cur = atomic_load_explicit(&d->reserved, memory_order_relaxed);
	for (;;) {
		if (bytes > cap || cur > cap - bytes)
			return false;
		if (atomic_compare_exchange_weak_explicit(&d->reserved, &cur, cur + bytes,
							  memory_order_acq_rel, memory_order_relaxed))
			break;
	}
	atomic_fetch_add_explicit(&d->kind[kind], bytes, memory_order_relaxed);
	raise_peak(d, cur + bytes);
	return true;
}

/* In a group: the group's budget first, then the process's cap (the
 * group's share goes back when the cap says no). Out of line, so that a
 * process in no group pays one load for it. */
__attribute__((noinline)) static bool reserve_in_group(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_group_take_member(dev, bytes))
		return false;
	if (reserve_local(&cumemcap_ledger[dev], kind, bytes))
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
	return reserve_local(&cumemcap_ledger[dev], kind, bytes);
}

void cumemcap_ledger_add(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	uint64_t now = atomic_fetch_add_explicit(&d->reserved, bytes, memory_order_acq_rel) + bytes;
	atomic_fetch_add_explicit(&d->kind[kind], bytes, memory_order_relaxed);
	cumemcap_group_force(dev, bytes);
	raise_peak(d, now);
}

void cumemcap_ledger_sub(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	atomic_fetch_sub_explicit(&d->reserved, bytes, memory_order_acq_rel);
	atomic_fetch_sub_explicit(&d->kind[kind], bytes, memory_order_relaxed);
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
#define SHARD_RESET_field(s, name)
#define SHARD_RESET_sharded(s, name) atomic_store(&(s)->name, 0);
#define SHARD_RESET_setting(s, name)
#define SHARD_RESET_kind(s, name)
#define SHARD_RESET_device(s, name)
#define SHARD_RESET_log(s, name)
#define SHARD_RESET_sum(s, name)
#define SHARD_RESET_group(s, name)

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

void cumemcap_ledger_read(int dev, struct cumemcap_figures *out)
{
	for (int i = 0; i < CUMEMCAP_FIG_COUNT; i++)
		out->v[i] = cumemcap_ledger_get(dev, (enum cumemcap_figure)i);
}
