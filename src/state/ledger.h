/* ledger: per-device counters and the limit check.
 *
 * Owns, for each GPU ordinal, the bytes this process holds from the driver
 * (in total and per memory kind), their peaks, the limit, and event counts,
 * as figures.h declares them. Everything a limit check reads (`reserved`,
 * the kinds' bytes, the limit, the overhead) is an atomic of the device.
 * The figures the arenas move at every pooled block (`live`, `pooled`,
 * allocs, frees, avoided, the peaks of live and pooled) are also kept in a
 * record per arena, written under the arena's own lock; a read adds the
 * device's atomic and the open records of the device.
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
#include <stddef.h>
#include <stdint.h>

#include "platform/cuda-api.h"
#include "state/figures.h"
#include "group/group.h" /* the `group` figures: the group's books of a GPU */

#define CUMEMCAP_NO_LIMIT UINT64_MAX

/* Memory kinds, each reserved from the driver on a device. */
#define CUMEMCAP_KINDS(X) \
	X(linear)   /* cuMemAlloc, cuMemAllocPitch */ \
	X(managed)  /* cuMemAllocManaged */ \
	X(pool)     /* stream-ordered pools: their RESERVED_MEM_CURRENT */ \
	X(vmm)      /* cuMemCreate physical handles */ \
	X(array)    /* cuArray*Create, cuMipmappedArrayCreate (estimated) */ \
	X(graph)    /* graph memory pools: their RESERVED_MEM_CURRENT (graph.h) */

enum cumemcap_kind {
#define X(name) CUMEMCAP_KIND_##name,
	CUMEMCAP_KINDS(X)
#undef X
	CUMEMCAP_KIND_COUNT
};

/* Where the ledger stores a figure, by its `src` in figures.h (1: there):
 * an atomic in the device for `atomic` and `arenas`, and a count in each
 * arena's record for `arenas`. The `kind` figures are the device's kind[]. */
#define CUMEMCAP_IN_DEVICE_atomic 1
#define CUMEMCAP_IN_DEVICE_arenas 1
#define CUMEMCAP_IN_DEVICE_kind 0
#define CUMEMCAP_IN_DEVICE_sum 0
#define CUMEMCAP_IN_DEVICE_group 0
#define CUMEMCAP_IN_DEVICE_device 0
#define CUMEMCAP_IN_DEVICE_log 0
#define CUMEMCAP_IN_ARENA_atomic 0
#define CUMEMCAP_IN_ARENA_arenas 1
#define CUMEMCAP_IN_ARENA_kind 0
#define CUMEMCAP_IN_ARENA_sum 0
#define CUMEMCAP_IN_ARENA_group 0
#define CUMEMCAP_IN_ARENA_device 0
#define CUMEMCAP_IN_ARENA_log 0

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

struct cumemcap_ledger_device {
#define X(name, src, ...) CUMEMCAP_FIG_IF(CUMEMCAP_IN_DEVICE_##src)(_Atomic uint64_t name;)
	CUMEMCAP_FIGURES(X)
#undef X
	_Atomic uint64_t kind[CUMEMCAP_KIND_COUNT];
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

/* Reserve `bytes` of `kind` on `dev` if `reserved` stays within the cap
 * (the limit, less the overhead when the footprint is counted). False
 * (and nothing changed) when it would not; the caller that gives up
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
 * the bytes charged. The arenas' live and pooled bytes are in their
 * records (below). */
void cumemcap_ledger_live_add(int dev, uint64_t bytes);
void cumemcap_ledger_live_sub(int dev, uint64_t bytes);

/* Whether `dev` is a GPU the ledger keeps counters for. */
static inline bool cumemcap_ledger_valid(int dev)
{
	return dev >= 0 && dev < CUMEMCAP_MAX_DEVICES;
}

/* ---- each arena's record ---------------------------------------------------
 *
 * An arena's part of the `arenas` figures, written under the arena's lock
 * with plain stores, so that a pooled pair writes no line another arena
 * writes: `live` (the bytes it handed out, by their 512-byte-rounded size),
 * `pooled` (its segment bytes not handed out: free, or freed and waiting
 * until the streams are past them), their peaks, and its allocs, frees and
 * avoided driver calls. Opened when its arena is set up, closed when the
 * arena is emptied: its counts and peaks then go to the device's atomics. */
#define CUMEMCAP_LEDGER_ARENAS 64
struct cumemcap_ledger_arena {
	_Alignas(64) _Atomic int dev; /* -1: closed */
#define X(name, src, ...) CUMEMCAP_FIG_IF(CUMEMCAP_IN_ARENA_##src)(_Atomic uint64_t name;)
	CUMEMCAP_FIGURES(X)
#undef X
};
extern struct cumemcap_ledger_arena cumemcap_ledger_arenas[CUMEMCAP_LEDGER_ARENAS];

void cumemcap_ledger_arena_open(struct cumemcap_ledger_arena *r, int dev);
void cumemcap_ledger_arena_close(struct cumemcap_ledger_arena *r);

/* A field of a record grows by n (its writer holds the arena's lock). */
#define cumemcap_ledger_arena_add(r, field, n)                                             \
	atomic_store_explicit(&(r)->field, atomic_load_explicit(&(r)->field, memory_order_relaxed) + (n), \
			      memory_order_relaxed)
#define cumemcap_ledger_arena_bump(r, field) cumemcap_ledger_arena_add(r, field, 1)

/* The arena's live and pooled bytes are now `live` and `pooled`; their
 * peaks follow. */
static inline void cumemcap_ledger_arena_bytes(struct cumemcap_ledger_arena *r, uint64_t live, uint64_t pooled)
{
	atomic_store_explicit(&r->live, live, memory_order_relaxed);
	atomic_store_explicit(&r->pooled, pooled, memory_order_relaxed);
	if (live > atomic_load_explicit(&r->peak_live, memory_order_relaxed))
		atomic_store_explicit(&r->peak_live, live, memory_order_relaxed);
	if (pooled > atomic_load_explicit(&r->peak_pooled, memory_order_relaxed))
		atomic_store_explicit(&r->peak_pooled, pooled, memory_order_relaxed);
}

/* ---- reading ---------------------------------------------------------------- */

/* Bytes the limit still allows (0 when at or past it; UINT64_MAX without
 * a limit): the cap less what is reserved. */
uint64_t cumemcap_ledger_headroom(int dev);

/* Every figure of `dev` now: the records' parts added, the figures the
 * ledger does not own (src `device`, `log`) CUMEMCAP_FIGURE_NONE for
 * their owners to fill; a dev out of range holds nothing, has no limit. Each
 * figure is read atomically (the set is not one instant). Lock-free and
 * async-signal-safe: the exit record is made from it in a signal handler. */
void cumemcap_ledger_read(int dev, struct cumemcap_figures *out);

/* ---- figures read late ----------------------------------------------------
 *
 * The account layer's stream-ordered pools on a GPU without a limit leave
 * their growth unread until the figures are read (account.h): it sets
 * growth_unread[dev] (sticky), and entry/setup.c registers the reader that
 * reads it back from the driver. A reader that may take locks and call the
 * driver calls cumemcap_ledger_read_growth first: the stats, the log's
 * records and metrics but those a fatal signal writes, the footprint, and
 * a check against a group's budget (a group joined after the growth was
 * left unread). cuMemGetInfo does not: nothing is left unread under a
 * limit, and without one its answer does not depend on the pools. */
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

/* Whether `dev` (in range) has bytes of `kind` charged: one relaxed load,
 * for a hot path that skips work when there are none. */
static inline bool cumemcap_ledger_holds(int dev, enum cumemcap_kind kind)
{
	return atomic_load_explicit(&cumemcap_ledger[dev].kind[kind], memory_order_relaxed) != 0;
}

/* Count an event of `field` (an atomic of struct cumemcap_ledger_device)
 * on dev (in range); drop: the other way, for a gauge counted up and down
 * (`waiting`). */
#define cumemcap_ledger_bump(dev, field) \
	atomic_fetch_add_explicit(&cumemcap_ledger[(dev)].field, 1, memory_order_relaxed)
#define cumemcap_ledger_drop(dev, field) \
	atomic_fetch_sub_explicit(&cumemcap_ledger[(dev)].field, 1, memory_order_relaxed)

/* An `arenas` figure of dev (in range): the device's atomic (at `off` in
 * struct cumemcap_ledger_device) plus the field at `arena_off` of every
 * open record of dev. */
uint64_t cumemcap_ledger_arenas_sum(int dev, size_t off, size_t arena_off);
#define CUMEMCAP_LEDGER_ARENAS_SUM(dev, name)                                              \
	cumemcap_ledger_arenas_sum(dev, offsetof(struct cumemcap_ledger_device, name), \
				   offsetof(struct cumemcap_ledger_arena, name))

/* What a device out of range reads as: nothing held, no limit. */
extern struct cumemcap_ledger_device cumemcap_ledger_nowhere;

#define CUMEMCAP_LEDGER_GET_atomic(dev, d, name) atomic_load(&(d)->name)
#define CUMEMCAP_LEDGER_GET_arenas(dev, d, name) \
	(cumemcap_ledger_valid(dev) ? CUMEMCAP_LEDGER_ARENAS_SUM(dev, name) : atomic_load(&(d)->name))
#define CUMEMCAP_LEDGER_GET_kind(dev, d, name) atomic_load(&(d)->kind[CUMEMCAP_KIND_##name])
#define CUMEMCAP_LEDGER_GET_sum(dev, d, name) \
	(atomic_load(&(d)->reserved) + atomic_load_explicit(&(d)->overhead, memory_order_relaxed))
#define CUMEMCAP_LEDGER_GET_group(dev, d, name) cumemcap_##name(dev)
#define CUMEMCAP_LEDGER_GET_device(dev, d, name) CUMEMCAP_FIGURE_NONE
#define CUMEMCAP_LEDGER_GET_log(dev, d, name) CUMEMCAP_FIGURE_NONE

/* One figure of `dev` (as cumemcap_ledger_read has it). Inline, so that a
 * call with a constant figure is the figure's own load, not a switch. */
static inline uint64_t cumemcap_ledger_get(int dev, enum cumemcap_figure fig)
{
	struct cumemcap_ledger_device *d = cumemcap_ledger_valid(dev) ? &cumemcap_ledger[dev] : &cumemcap_ledger_nowhere;
	switch (fig) {
#define X(name, src, ...)         \
	case CUMEMCAP_FIG_##name: \
		return CUMEMCAP_LEDGER_GET_##src(dev, d, name);
		CUMEMCAP_FIGURES(X)
#undef X
	case CUMEMCAP_FIG_COUNT:
		break;
	}
	return CUMEMCAP_FIGURE_NONE;
}

/* The footprint of `dev` now (reserved + overhead). */
static inline uint64_t cumemcap_ledger_footprint(int dev)
{
	return cumemcap_ledger_get(dev, CUMEMCAP_FIG_footprint);
}

/* Zero everything but the limits (a forked child holds none of its
 * parent's memory). */
void cumemcap_ledger_reset(void);

/* What a capacity answer (cuMemGetInfo) needs of `dev` (in range): the
 * limit (CUMEMCAP_NO_LIMIT: none), the headroom under it
 * (cumemcap_ledger_headroom; UINT64_MAX without a limit) and `pooled`, the
 * arenas' cached bytes. Each is read atomically; the set is not one
 * instant. */
struct cumemcap_ledger_capacity {
	uint64_t limit, headroom, pooled;
};
static inline __attribute__((always_inline)) void cumemcap_ledger_capacity(int dev, struct cumemcap_ledger_capacity *out)
{
	out->limit = atomic_load(&cumemcap_ledger[dev].limit);
	out->headroom = out->limit == CUMEMCAP_NO_LIMIT ? UINT64_MAX : cumemcap_ledger_headroom(dev);
	out->pooled = CUMEMCAP_LEDGER_ARENAS_SUM(dev, pooled);
}
