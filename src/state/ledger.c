/* ledger: see ledger.h. Also owns cumemcap_figure_info (figures.h). */
#include "state/ledger.h"

#include "platform/spin.h"
#include "config/policy.h"
#include "group/group.h"

#define FIG(d, name) (d)->v[CUMEMCAP_FIG_##name]

const struct cumemcap_figure_info cumemcap_figure_info[CUMEMCAP_FIG_COUNT] = {
#define X(name, src, stats_, ...) [CUMEMCAP_FIG_##name] = { .stats = stats_, __VA_ARGS__ },
	CUMEMCAP_FIGURES(X)
#undef X
};

enum src { SRC_atomic, SRC_arenas, SRC_other };
static const unsigned char src_of[CUMEMCAP_FIG_COUNT] = {
#define X(name, src, ...) [CUMEMCAP_FIG_##name] = SRC_##src,
	CUMEMCAP_FIGURES(X)
#undef X
};

struct cumemcap_ledger_device cumemcap_ledger[CUMEMCAP_MAX_DEVICES];
struct cumemcap_ledger_arena cumemcap_ledger_arenas[CUMEMCAP_LEDGER_ARENAS];

/* The limit, the overhead and the cap are written together under this
 * lock (never on an allocation's path); readers load each alone. */
static atomic_flag settings_lock = ATOMIC_FLAG_INIT;

/* Whether the limit counts the footprint (the default) or only the calls. */
static bool count_footprint(void)
{
	return cumemcap_policy()->count == CUMEMCAP_COUNT_FOOTPRINT;
}

static inline __attribute__((always_inline)) void raise_to(_Atomic uint64_t *peak_field, uint64_t now)
{
	uint64_t peak = atomic_load_explicit(peak_field, memory_order_relaxed);
	while (now > peak &&
	       !atomic_compare_exchange_weak_explicit(peak_field, &peak, now, memory_order_relaxed,
						      memory_order_relaxed))
		;
}

/* `reserved` of d is `now`: its peak and the footprint's follow. */
static inline __attribute__((always_inline)) void raise_peak(struct cumemcap_ledger_device *d, uint64_t now)
{
	raise_to(&FIG(d, peak_reserved), now);
	raise_to(&FIG(d, peak_footprint),
		 now + atomic_load_explicit(&FIG(d, overhead), memory_order_relaxed));
}

/* Caller holds settings_lock. */
static void set_cap(struct cumemcap_ledger_device *d)
{
	uint64_t limit = atomic_load(&FIG(d, limit)), over = atomic_load(&FIG(d, overhead));
	uint64_t cap = limit;
	if (limit != CUMEMCAP_NO_LIMIT && count_footprint())
		cap = over >= limit ? 0 : limit - over;
	atomic_store(&d->cap, cap);
}

void cumemcap_ledger_set_limit(int dev, uint64_t limit)
{
	if (!cumemcap_ledger_valid(dev))
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	cumemcap_spin_lock(&settings_lock);
	atomic_store(&FIG(d, limit), limit);
	set_cap(d);
	cumemcap_spin_unlock(&settings_lock);
}

void cumemcap_ledger_set_overhead(int dev, uint64_t bytes, enum cumemcap_overhead_source source)
{
	if (!cumemcap_ledger_valid(dev))
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	cumemcap_spin_lock(&settings_lock);
	uint64_t old = atomic_exchange(&FIG(d, overhead), bytes);
	atomic_store(&d->source, (int)source);
	set_cap(d);
	cumemcap_spin_unlock(&settings_lock);
	/* A group counts what the limit counts: the overhead too. */
	if (count_footprint() && bytes > old)
		cumemcap_group_force(dev, bytes - old);
	else if (count_footprint() && bytes < old)
		cumemcap_group_give(dev, old - bytes);
	raise_peak(d, atomic_load(&FIG(d, reserved)));
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

void cumemcap_ledger_record_request(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev))
		raise_to(&FIG(&cumemcap_ledger[dev], largest_request), bytes);
}

void cumemcap_ledger_live_add(int dev, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || !bytes)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	raise_to(&FIG(d, peak_live),
		 atomic_fetch_add_explicit(&FIG(d, live), bytes, memory_order_relaxed) + bytes);
}

void cumemcap_ledger_live_sub(int dev, uint64_t bytes)
{
	if (cumemcap_ledger_valid(dev) && bytes)
		atomic_fetch_sub_explicit(&FIG(&cumemcap_ledger[dev], live), bytes,
					  memory_order_relaxed);
}

/* In a group, the group's budget first, then the process's cap. */
bool cumemcap_ledger_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev))
		return true;
	bool in_group = atomic_load_explicit(&cumemcap_group_hot, memory_order_relaxed) & 1;
	if (in_group) {
		/* Pool growth left unread from before the group was joined counts first. */
		cumemcap_ledger_read_growth(dev);
		if (!cumemcap_group_take_member(dev, bytes))
			return false;
	}
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	uint64_t cap = atomic_load_explicit(&d->cap, memory_order_relaxed);
	uint64_t cur = atomic_load_explicit(&FIG(d, reserved), memory_order_relaxed);
	do {
		if (bytes > cap || cur > cap - bytes) {
			if (in_group)
				cumemcap_group_give_member(dev, bytes);
			return false;
		}
	} while (!atomic_compare_exchange_weak_explicit(&FIG(d, reserved), &cur, cur + bytes,
							memory_order_acq_rel, memory_order_relaxed));
	atomic_fetch_add_explicit(&d->v[kind], bytes, memory_order_relaxed);
	raise_peak(d, cur + bytes);
	return true;
}

void cumemcap_ledger_add(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	atomic_fetch_add_explicit(&d->v[kind], bytes, memory_order_relaxed);
	uint64_t now =
	    atomic_fetch_add_explicit(&FIG(d, reserved), bytes, memory_order_acq_rel) + bytes;
	cumemcap_group_force(dev, bytes);
	raise_peak(d, now);
}

void cumemcap_ledger_sub(int dev, enum cumemcap_kind kind, uint64_t bytes)
{
	if (!cumemcap_ledger_valid(dev) || bytes == 0)
		return;
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	atomic_fetch_sub_explicit(&FIG(d, reserved), bytes, memory_order_acq_rel);
	atomic_fetch_sub_explicit(&d->v[kind], bytes, memory_order_relaxed);
	cumemcap_group_give(dev, bytes);
}

uint64_t cumemcap_ledger_headroom(int dev)
{
	if (!cumemcap_ledger_valid(dev))
		return UINT64_MAX;
	uint64_t cap = atomic_load(&cumemcap_ledger[dev].cap);
	if (cap == CUMEMCAP_NO_LIMIT)
		return UINT64_MAX;
	uint64_t cur = atomic_load(&FIG(&cumemcap_ledger[dev], reserved));
	return cur >= cap ? 0 : cap - cur;
}

static _Atomic int arenas_used; /* records ever opened: 0 .. arenas_used-1 */

void cumemcap_ledger_arena_open(struct cumemcap_ledger_arena *r, int dev)
{
	for (int i = 0; i < CUMEMCAP_FIG_COUNT; i++)
		atomic_store(&r->v[i], 0);
	atomic_store(&r->dev, cumemcap_ledger_valid(dev) ? dev : -1);
	int idx = (int)(r - cumemcap_ledger_arenas), used = atomic_load(&arenas_used);
	while (idx + 1 > used && !atomic_compare_exchange_weak(&arenas_used, &used, idx + 1))
		;
}

void cumemcap_ledger_arena_close(struct cumemcap_ledger_arena *r)
{
	int dev = atomic_exchange(&r->dev, -1);
	if (!cumemcap_ledger_valid(dev))
		return;
	for (int i = 0; i < CUMEMCAP_FIG_COUNT; i++)
		if (src_of[i] == SRC_arenas)
			atomic_fetch_add(&cumemcap_ledger[dev].v[i], atomic_exchange(&r->v[i], 0));
}

uint64_t cumemcap_ledger_arenas_sum(int dev, enum cumemcap_figure fig)
{
	uint64_t n = atomic_load(&cumemcap_ledger[dev].v[fig]);
	int used = atomic_load_explicit(&arenas_used, memory_order_acquire);
	for (int i = 0; i < used; i++) {
		const struct cumemcap_ledger_arena *r = &cumemcap_ledger_arenas[i];
		if (atomic_load_explicit(&r->dev, memory_order_relaxed) == dev)
			n += atomic_load_explicit(&r->v[fig], memory_order_relaxed);
	}
	return n;
}

void cumemcap_ledger_reset(void)
{
	for (int i = 0; i < CUMEMCAP_MAX_DEVICES; i++) {
		uint64_t limit = atomic_load(&FIG(&cumemcap_ledger[i], limit));
		cumemcap_ledger[i] =
		    (struct cumemcap_ledger_device){ .v[CUMEMCAP_FIG_limit] = limit, .cap = limit };
	}
	for (int i = 0; i < CUMEMCAP_LEDGER_ARENAS; i++) {
		int dev = atomic_load(&cumemcap_ledger_arenas[i].dev);
		cumemcap_ledger_arenas[i] = (struct cumemcap_ledger_arena){ .dev = dev };
	}
}

_Atomic bool cumemcap_ledger_growth_unread[CUMEMCAP_MAX_DEVICES];
void (*_Atomic cumemcap_ledger_growth_reader)(int dev);

uint64_t cumemcap_ledger_get(int dev, enum cumemcap_figure fig)
{
	/* A device out of range: nothing held, no limit. */
	static const struct cumemcap_ledger_device nowhere = {
		.v[CUMEMCAP_FIG_limit] = CUMEMCAP_NO_LIMIT,
	};
	const struct cumemcap_ledger_device *d =
	    cumemcap_ledger_valid(dev) ? &cumemcap_ledger[dev] : &nowhere;
	if (src_of[fig] == SRC_arenas && d != &nowhere)
		return cumemcap_ledger_arenas_sum(dev, fig);
	if (src_of[fig] != SRC_other)
		return atomic_load(&d->v[fig]);
	switch (fig) {
	case CUMEMCAP_FIG_footprint:
		return atomic_load(&FIG(d, reserved)) +
		       atomic_load_explicit(&FIG(d, overhead), memory_order_relaxed);
	case CUMEMCAP_FIG_group_limit:
		return cumemcap_group_limit(dev);
	case CUMEMCAP_FIG_group_used:
		return cumemcap_group_used(dev);
	case CUMEMCAP_FIG_group_held:
		return cumemcap_group_held(dev);
	default:
		return CUMEMCAP_FIGURE_NONE;
	}
}

void cumemcap_ledger_read(int dev, struct cumemcap_figures *out)
{
	for (int i = 0; i < CUMEMCAP_FIG_COUNT; i++)
		out->v[i] = cumemcap_ledger_get(dev, (enum cumemcap_figure)i);
}
