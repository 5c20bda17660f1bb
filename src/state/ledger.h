/* ledger: per-device counters and the limit check.
 *
 * Owns, per GPU ordinal, the figures of figures.h, each an atomic of the
 * device; the `arenas` figures also have a part in each arena's record.
 * The limit check is one compare-and-swap loop on `reserved`, so racing
 * reservations never overshoot together; a reservation is made before the
 * driver is asked and given back if it fails. Calls the driver only through
 * the growth reader (below). A peak of `live` or `pooled` is the sum of its
 * parts' peaks: never below the true peak, above it only when they peaked
 * at different moments; the other peaks are exact.
 *
 * Thread safety: lock-free but for a spinlock around the limit's settings;
 * a reading is per figure, not a snapshot. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"
#include "state/figures.h"

#define CUMEMCAP_NO_LIMIT UINT64_MAX

/* Memory kinds reserved from the driver, each the figure of its bytes. */
enum cumemcap_kind {
	CUMEMCAP_KIND_linear = CUMEMCAP_FIG_linear,   /* cuMemAlloc, cuMemAllocPitch */
	CUMEMCAP_KIND_managed = CUMEMCAP_FIG_managed, /* cuMemAllocManaged */
	CUMEMCAP_KIND_pool = CUMEMCAP_FIG_pool,       /* stream-ordered pools (RESERVED_MEM_CURRENT) */
	CUMEMCAP_KIND_vmm = CUMEMCAP_FIG_vmm,         /* cuMemCreate physical handles */
	CUMEMCAP_KIND_array = CUMEMCAP_FIG_array,     /* cuArray*Create, cuMipmappedArrayCreate */
	CUMEMCAP_KIND_graph = CUMEMCAP_FIG_graph,     /* graph memory pools (RESERVED_MEM_CURRENT) */
};

/* Where a device's overhead was learned, best first (account/footprint.h). */
#define CUMEMCAP_OVERHEAD_SOURCES(X) \
	X(none)     /* nothing learned: no context of the process on the GPU yet */ \
	X(nvml)     /* NVML's per-process figure, less what the calls reserved */ \
	X(delta)    /* the device's used memory before and after the first context */ \
	X(estimate) /* the configured estimate per context */ \
	X(meminfo)  /* no NVML: the card's used memory beyond the allocations, below the estimate */

enum cumemcap_overhead_source {
#define X(name) CUMEMCAP_OVERHEAD_##name,
	CUMEMCAP_OVERHEAD_SOURCES(X)
#undef X
};

/* The device's figures, indexed by CUMEMCAP_FIG_* (src `other` unused). */
struct cumemcap_ledger_device {
	_Atomic uint64_t v[CUMEMCAP_FIG_COUNT];
	_Atomic uint64_t cap; /* `reserved` may reach this: the limit less any counted overhead */
	_Atomic int source; /* enum cumemcap_overhead_source of `overhead` */
};

extern struct cumemcap_ledger_device cumemcap_ledger[CUMEMCAP_MAX_DEVICES];

void cumemcap_ledger_set_limit(int dev, uint64_t limit);

/* The overhead of `dev` as learned now; the cap and the peak footprint follow. */
void cumemcap_ledger_set_overhead(int dev, uint64_t bytes, enum cumemcap_overhead_source source);
enum cumemcap_overhead_source cumemcap_ledger_source(int dev);
const char *cumemcap_overhead_source_name(enum cumemcap_overhead_source source);

/* The source a GPU's overhead is expected from before any context: NVML
 * if it sees this pid, else the used memory's delta; no NVML: the estimate. */
static inline enum cumemcap_overhead_source cumemcap_overhead_expected(bool nvml_loads, bool host_pids)
{
	return !nvml_loads ? CUMEMCAP_OVERHEAD_estimate : host_pids ? CUMEMCAP_OVERHEAD_nvml : CUMEMCAP_OVERHEAD_delta;
}

/* Reserve `bytes` of `kind` on `dev` if `reserved` stays within the cap;
 * false, nothing changed, if not (the caller counts a refusal). */
bool cumemcap_ledger_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes);

/* A program's request of `bytes`, granted or not: the largest is kept. */
void cumemcap_ledger_record_request(int dev, uint64_t bytes);

/* Add or remove bytes without a limit check. */
void cumemcap_ledger_add(int dev, enum cumemcap_kind kind, uint64_t bytes);
void cumemcap_ledger_sub(int dev, enum cumemcap_kind kind, uint64_t bytes);

/* The program's live bytes outside the arenas (their peak follows). */
void cumemcap_ledger_live_add(int dev, uint64_t bytes);
void cumemcap_ledger_live_sub(int dev, uint64_t bytes);

static inline bool cumemcap_ledger_valid(int dev)
{
	return dev >= 0 && dev < CUMEMCAP_MAX_DEVICES;
}

/* Whether `dev` (in range) has bytes of `kind` charged: one relaxed load. */
static inline bool cumemcap_ledger_holds(int dev, enum cumemcap_kind kind)
{
	return atomic_load_explicit(&cumemcap_ledger[dev].v[kind], memory_order_relaxed) != 0;
}

/* Count an event of figure `name` (src `atomic`) on dev (in range), or take one back. */
#define cumemcap_ledger_bump(dev, name)                                                            \
	atomic_fetch_add_explicit(&cumemcap_ledger[(dev)].v[CUMEMCAP_FIG_##name], 1,               \
				  memory_order_relaxed)
#define cumemcap_ledger_drop(dev, name)                                                            \
	atomic_fetch_sub_explicit(&cumemcap_ledger[(dev)].v[CUMEMCAP_FIG_##name], 1,               \
				  memory_order_relaxed)

/* ---- each arena's record ---------------------------------------------------
 *
 * An arena's part of the `arenas` figures, written with plain stores under
 * its lock, so that a pooled pair writes no line another arena writes.
 * Closed (added to the device's figures) when the arena is emptied. */
#define CUMEMCAP_LEDGER_ARENAS 64
struct cumemcap_ledger_arena {
	_Alignas(64) _Atomic int dev; /* -1: closed */
	_Atomic uint64_t v[CUMEMCAP_FIG_COUNT]; /* src `arenas` only */
};
extern struct cumemcap_ledger_arena cumemcap_ledger_arenas[CUMEMCAP_LEDGER_ARENAS];

void cumemcap_ledger_arena_open(struct cumemcap_ledger_arena *r, int dev);
void cumemcap_ledger_arena_close(struct cumemcap_ledger_arena *r);

/* Figure `name` of a record grows by n (arena lock held). */
#define cumemcap_ledger_arena_add(r, name, n)                                                      \
	atomic_store_explicit(                                                                     \
	    &(r)->v[CUMEMCAP_FIG_##name],                                                          \
	    atomic_load_explicit(&(r)->v[CUMEMCAP_FIG_##name], memory_order_relaxed) + (n),        \
	    memory_order_relaxed)
#define cumemcap_ledger_arena_bump(r, name) cumemcap_ledger_arena_add(r, name, 1)

/* The arena's live and pooled bytes now; their peaks follow. */
static inline void cumemcap_ledger_arena_bytes(struct cumemcap_ledger_arena *r, uint64_t live, uint64_t pooled)
{
	_Atomic uint64_t *v = r->v;
	atomic_store_explicit(&v[CUMEMCAP_FIG_live], live, memory_order_relaxed);
	atomic_store_explicit(&v[CUMEMCAP_FIG_pooled], pooled, memory_order_relaxed);
	if (live > atomic_load_explicit(&v[CUMEMCAP_FIG_peak_live], memory_order_relaxed))
		atomic_store_explicit(&v[CUMEMCAP_FIG_peak_live], live, memory_order_relaxed);
	if (pooled > atomic_load_explicit(&v[CUMEMCAP_FIG_peak_pooled], memory_order_relaxed))
		atomic_store_explicit(&v[CUMEMCAP_FIG_peak_pooled], pooled, memory_order_relaxed);
}

/* The cap less what is reserved (0 at or past it; UINT64_MAX: no limit). */
uint64_t cumemcap_ledger_headroom(int dev);

/* An `arenas` figure of dev (in range): the device's plus its open records'. */
uint64_t cumemcap_ledger_arenas_sum(int dev, enum cumemcap_figure fig);

/* One figure of `dev` now; a dev out of range holds nothing, no limit. */
uint64_t cumemcap_ledger_get(int dev, enum cumemcap_figure fig);

/* Every figure of `dev` now. Async-signal-safe (the exit record's). */
void cumemcap_ledger_read(int dev, struct cumemcap_figures *out);

/* ---- figures read late ----------------------------------------------------
 *
 * Pools on a GPU without a limit leave their growth unread (growth_unread,
 * sticky). A reader that may take locks and call the driver calls
 * cumemcap_ledger_read_growth first (cuMemGetInfo need not: nothing is
 * unread under a limit, and without one its answer ignores the pools). */
extern _Atomic bool cumemcap_ledger_growth_unread[CUMEMCAP_MAX_DEVICES];
extern void (*_Atomic cumemcap_ledger_growth_reader)(int dev);
static inline void cumemcap_ledger_read_growth(int dev)
{
	if (cumemcap_ledger_valid(dev) &&
	    atomic_load_explicit(&cumemcap_ledger_growth_unread[dev], memory_order_acquire)) {
		void (*fn)(int) = atomic_load_explicit(&cumemcap_ledger_growth_reader, memory_order_acquire);
		if (fn)
			fn(dev);
	}
}

/* Fork child: zero everything but the limits (the cap is the limit: no
 * context survives); the records stay open, emptied. */
void cumemcap_ledger_reset(void);

/* What cuMemGetInfo needs of `dev` (in range), not at one instant. */
struct cumemcap_ledger_capacity {
	uint64_t limit, headroom, pooled;
};
static inline __attribute__((always_inline)) void
cumemcap_ledger_capacity(int dev, struct cumemcap_ledger_capacity *out)
{
	out->limit = atomic_load(&cumemcap_ledger[dev].v[CUMEMCAP_FIG_limit]);
	out->headroom =
	    out->limit == CUMEMCAP_NO_LIMIT ? UINT64_MAX : cumemcap_ledger_headroom(dev);
	out->pooled = cumemcap_ledger_arenas_sum(dev, CUMEMCAP_FIG_pooled);
}
