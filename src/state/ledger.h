/* ledger: per-device counters and the limit check.
 *
 * Owns, for each GPU ordinal, the figures of figures.h: the bytes this
 * process holds from the driver (in total and per memory kind), their
 * peaks, the limit and event counts. Each is an atomic of the device; the
 * figures the arenas move at every pooled block (src `arenas`) also have a
 * part in each arena's record, written under the arena's own lock.
 *
 * The limit check is one compare-and-swap loop on `reserved`, so concurrent
 * reservations can never overshoot the limit together. A reservation is
 * made *before* the driver is asked and given back if the driver fails.
 * Never calls the driver but through the growth reader (below).
 *
 * Peaks: the peaks of `reserved` and the footprint are exact (for growth
 * read late, as far as it has been read); a peak of `live` or `pooled` is
 * the sum of each part's own peak, so it is never below the figure's true
 * peak and exceeds it only when parts peaked at different moments.
 *
 * Thread safety: no lock of its own but a spinlock around the limit's
 * settings; any thread may reserve, give back or read at any time (a
 * reading is per figure, not a snapshot of all of them together). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"
#include "state/figures.h"

#define CUMEMCAP_NO_LIMIT UINT64_MAX

/* Memory kinds, each reserved from the driver on a device: each is the
 * figure of its bytes (an array's are estimated). */
enum cumemcap_kind {
	CUMEMCAP_KIND_linear = CUMEMCAP_FIG_linear,   /* cuMemAlloc, cuMemAllocPitch */
	CUMEMCAP_KIND_managed = CUMEMCAP_FIG_managed, /* cuMemAllocManaged */
	CUMEMCAP_KIND_pool = CUMEMCAP_FIG_pool,       /* stream-ordered pools (RESERVED_MEM_CURRENT) */
	CUMEMCAP_KIND_vmm = CUMEMCAP_FIG_vmm,         /* cuMemCreate physical handles */
	CUMEMCAP_KIND_array = CUMEMCAP_FIG_array,     /* cuArray*Create, cuMipmappedArrayCreate */
	CUMEMCAP_KIND_graph = CUMEMCAP_FIG_graph,     /* graph memory pools (RESERVED_MEM_CURRENT) */
};

/* Where a device's overhead (driver-side memory outside the counted
 * calls) was learned, best first (see account/footprint.h). */
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
	/* What a reservation may bring `reserved` up to: the limit, less the
	 * overhead when the footprint is counted (never below 0), so that the
	 * check is one load. */
	_Atomic uint64_t cap;
	_Atomic int source; /* enum cumemcap_overhead_source of `overhead` */
};

extern struct cumemcap_ledger_device cumemcap_ledger[CUMEMCAP_MAX_DEVICES];

void cumemcap_ledger_set_limit(int dev, uint64_t limit);
uint64_t cumemcap_ledger_limit(int dev);

/* Whether the limit counts the footprint (reserved + overhead, the
 * default) or only what the calls reserve. Process-wide; set once from the
 * policy before any limit. */
void cumemcap_ledger_count_footprint(bool footprint);

/* The overhead of `dev` as learned now (and from where): the cap follows,
 * and the peak footprint. Lowering it never frees anything; raising it past
 * the room left only refuses what comes next. */
void cumemcap_ledger_set_overhead(int dev, uint64_t bytes, enum cumemcap_overhead_source source);
enum cumemcap_overhead_source cumemcap_ledger_source(int dev);
const char *cumemcap_overhead_source_name(enum cumemcap_overhead_source source);

/* The source a GPU's overhead is expected to come from, before any context
 * (the start record, --print-config): NVML's figure needs NVML and this
 * process's pid among the host's; without the pid, the GPU's used memory;
 * without NVML, the estimate. */
static inline enum cumemcap_overhead_source cumemcap_overhead_expected(bool nvml_loads, bool host_pids)
{
	return !nvml_loads ? CUMEMCAP_OVERHEAD_estimate : host_pids ? CUMEMCAP_OVERHEAD_nvml : CUMEMCAP_OVERHEAD_delta;
}

/* Reserve `bytes` of `kind` on `dev` if `reserved` stays within the cap.
 * False (and nothing changed) when it would not; the caller that gives up
 * counts the refusal. */
bool cumemcap_ledger_reserve(int dev, enum cumemcap_kind kind, uint64_t bytes);

/* A program's request of `bytes` (granted or not): the largest is kept.
 * What is reserved for it may be more (an arena's segment, a pool's
 * granularity). */
void cumemcap_ledger_note_request(int dev, uint64_t bytes);

/* Add or remove bytes without a limit check (give back a reservation,
 * record what a pool really took). */
void cumemcap_ledger_add(int dev, enum cumemcap_kind kind, uint64_t bytes);
void cumemcap_ledger_sub(int dev, enum cumemcap_kind kind, uint64_t bytes);

/* The program's live bytes outside the arenas (their peak follows):
 * stream-ordered allocations by their requested size, everything else by
 * the bytes charged. */
void cumemcap_ledger_live_add(int dev, uint64_t bytes);
void cumemcap_ledger_live_sub(int dev, uint64_t bytes);

/* Whether `dev` is a GPU the ledger keeps counters for. */
static inline bool cumemcap_ledger_valid(int dev)
{
	return dev >= 0 && dev < CUMEMCAP_MAX_DEVICES;
}

/* Whether `dev` (in range) has bytes of `kind` charged: one relaxed load,
 * for a hot path that skips work when there are none. */
static inline bool cumemcap_ledger_holds(int dev, enum cumemcap_kind kind)
{
	return atomic_load_explicit(&cumemcap_ledger[dev].v[kind], memory_order_relaxed) != 0;
}

/* Count an event of figure `name` (src `atomic`) on dev (in range); drop:
 * the other way, for a gauge counted up and down (`waiting`). */
#define cumemcap_ledger_bump(dev, name)                                                            \
	atomic_fetch_add_explicit(&cumemcap_ledger[(dev)].v[CUMEMCAP_FIG_##name], 1,               \
				  memory_order_relaxed)
#define cumemcap_ledger_drop(dev, name)                                                            \
	atomic_fetch_sub_explicit(&cumemcap_ledger[(dev)].v[CUMEMCAP_FIG_##name], 1,               \
				  memory_order_relaxed)

/* ---- each arena's record ---------------------------------------------------
 *
 * An arena's part of the `arenas` figures, written under the arena's lock
 * with plain stores, so that a pooled pair writes no line another arena
 * writes: `live` (the bytes it handed out, rounded to 512), `pooled` (its
 * segment bytes not handed out), their peaks, its allocs, frees and avoided
 * driver calls. Opened when its arena is set up, closed (its counts and
 * peaks added to the device's) when the arena is emptied. */
#define CUMEMCAP_LEDGER_ARENAS 64
struct cumemcap_ledger_arena {
	_Alignas(64) _Atomic int dev; /* -1: closed */
	_Atomic uint64_t v[CUMEMCAP_FIG_COUNT]; /* src `arenas` only */
};
extern struct cumemcap_ledger_arena cumemcap_ledger_arenas[CUMEMCAP_LEDGER_ARENAS];

void cumemcap_ledger_arena_open(struct cumemcap_ledger_arena *r, int dev);
void cumemcap_ledger_arena_close(struct cumemcap_ledger_arena *r);

/* Figure `name` of a record grows by n (its writer holds the arena's lock). */
#define cumemcap_ledger_arena_add(r, name, n)                                                      \
	atomic_store_explicit(                                                                     \
	    &(r)->v[CUMEMCAP_FIG_##name],                                                          \
	    atomic_load_explicit(&(r)->v[CUMEMCAP_FIG_##name], memory_order_relaxed) + (n),        \
	    memory_order_relaxed)
#define cumemcap_ledger_arena_bump(r, name) cumemcap_ledger_arena_add(r, name, 1)

/* The arena's live and pooled bytes are now `live` and `pooled`; their
 * peaks follow. */
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

/* ---- reading ---------------------------------------------------------------- */

/* Bytes the limit still allows (0 when at or past it; UINT64_MAX without
 * a limit): the cap less what is reserved. */
uint64_t cumemcap_ledger_headroom(int dev);

/* An `arenas` figure of dev (in range): the device's atomic plus every open
 * record of dev. */
uint64_t cumemcap_ledger_arenas_sum(int dev, enum cumemcap_figure fig);

/* One figure of `dev` now, as figures.h's `src` says; a dev out of range
 * holds nothing and has no limit. */
uint64_t cumemcap_ledger_get(int dev, enum cumemcap_figure fig);

/* Every figure of `dev` now, each read atomically (the set is not one
 * instant). Lock-free and async-signal-safe: the exit record is made from
 * it in a signal handler. */
void cumemcap_ledger_read(int dev, struct cumemcap_figures *out);

/* ---- figures read late ----------------------------------------------------
 *
 * Stream-ordered pools on a GPU without a limit leave their growth unread
 * (account.h sets growth_unread[dev], sticky; entry/setup.c registers the
 * reader that reads it from the driver). A reader that may take locks and
 * call the driver calls cumemcap_ledger_read_growth first: the stats, the
 * log but what a fatal signal writes, the footprint, a group's budget
 * check. cuMemGetInfo does not: nothing is left unread under a limit, and
 * without one its answer does not depend on the pools. */
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

/* Fork child: zero everything but the limits. */
void cumemcap_ledger_reset(void);

/* What a capacity answer (cuMemGetInfo) needs of `dev` (in range): the
 * limit (CUMEMCAP_NO_LIMIT: none), the headroom under it and `pooled`, the
 * arenas' cached bytes. The set is not one instant. */
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
