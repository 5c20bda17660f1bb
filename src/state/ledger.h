/* ledger: per-device counters and the limit check.
 *
 * Owns, for each GPU ordinal, the bytes this process holds from the driver
 * (in total and per memory kind), their peak, the limit, and event counts.
 * Every figure is an atomic; the limit check is one compare-and-swap loop on
 * the device total, so concurrent reservations can never overshoot the
 * limit together. A reservation is made *before* the driver is asked and
 * given back if the driver fails. Never calls the driver, but through
 * the reader of figures read late (below).
 *
 * Thread safety: no lock; every figure is an atomic, so any thread may
 * reserve, give back or read at any time (a reading is per figure, not a
 * snapshot of all of them together). `live` and `pooled` also have a
 * delta in each thread's own slot for the pooled blocks it moves (see
 * "pooled blocks" below), and so have the passthrough's figures (`live`,
 * the bytes of each kind but pool and graph, allocs and frees: "the
 * thread's own counts"): written by that thread alone, read by anyone
 * (every slot summed); a dying thread's slot is folded into the atomics
 * under a spinlock that no hot path takes.
 *
 * Which figures there are is declared once, in figures.h; the ledger
 * stores them as that list says and hands them out whole
 * (cumemcap_ledger_read) or one by one (cumemcap_ledger_get). Nothing
 * outside ledger.c reads the storage. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/cuda-api.h"
#include "platform/export.h"
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

/* The storage of a device's figures, made from their declaration
 * (figures.h): an atomic for each `field`, `sharded` and `setting` figure,
 * the `kind` figures in kind[]. Only ledger.c reads these (account.h's
 * one read of kind[pool] is to become cumemcap_ledger_get); writers
 * outside it use the functions and cumemcap_ledger_bump below. */
#define CUMEMCAP_LEDGER_STORE_field(name) _Atomic uint64_t name;
#define CUMEMCAP_LEDGER_STORE_sharded(name) _Atomic uint64_t name;
#define CUMEMCAP_LEDGER_STORE_setting(name) _Atomic uint64_t name;
#define CUMEMCAP_LEDGER_STORE_kind(name)
#define CUMEMCAP_LEDGER_STORE_device(name)
#define CUMEMCAP_LEDGER_STORE_log(name)
#define CUMEMCAP_LEDGER_STORE_sum(name)
#define CUMEMCAP_LEDGER_STORE_group(name)
#define CUMEMCAP_LEDGER_STORE_local(name) _Atomic uint64_t name;

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
#define X(name, src, ...) CUMEMCAP_LEDGER_STORE_##src(name)
	CUMEMCAP_FIGURES(X)
#undef X
	_Atomic uint64_t kind[CUMEMCAP_KIND_COUNT];
	/* What a reservation may bring `reserved` up to: the limit, less the
	 * overhead when the footprint is counted (never below 0). Kept
	 * apart so that the check stays one load; rewritten with the limit
	 * and the overhead. */
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

/* The program's live bytes and the arenas' free bytes (peaks follow).
 * Live: pooled blocks by their 512-byte-rounded size, stream-ordered
 * allocations by their requested size, everything else by the bytes
 * charged. Pooled: arena segment bytes not handed out (free, or freed and
 * waiting until the streams are past them). */
void cumemcap_ledger_live_add(int dev, uint64_t bytes);
void cumemcap_ledger_live_sub(int dev, uint64_t bytes);
void cumemcap_ledger_pooled_add(int dev, uint64_t bytes);
void cumemcap_ledger_pooled_sub(int dev, uint64_t bytes);

/* Whether `dev` is a GPU the ledger keeps books for. */
static inline bool cumemcap_ledger_valid(int dev)
{
	return dev >= 0 && dev < CUMEMCAP_MAX_DEVICES;
}

/* ---- pooled blocks: per-thread deltas of live and pooled ----------------
 *
 * A pooled block handed out or given back (the arenas, at every
 * cuMemAlloc/cuMemFree they serve) moves bytes between `pooled` and
 * `live`. Each thread keeps these moves in a slot of its own (a delta per
 * GPU, written with plain stores to its own cache lines), so that a pooled
 * pair writes no line another thread writes; a figure read adds the
 * device's atomic and every slot's delta (exact: nothing is lost or
 * counted twice, also while a dying thread's slot is folded into the
 * device's atomic). Every other change of live and pooled (segments
 * joining or leaving, the account layer's charges, a context's death)
 * goes to the device's atomic, as before.
 *
 * The peaks. Each slot also publishes, per GPU and figure, a bound
 * `high` >= its delta, and keeps a `top` of its own: the highest value it
 * saw the figure reach. peak_live and peak_pooled (peak_reserved and
 * peak_footprint without a limit) are read as the device's peak atomic or
 * the highest `top` of any slot, whichever is higher (folded on read, as
 * the figures are; a dying thread's top goes to the atomic).
 *
 * A delta that rises above its bound makes a raise: the bound becomes the
 * delta plus CUMEMCAP_LEDGER_STEP (stored sequentially consistent), the
 * other slots' bounds are summed (`others`, kept in the slot) and the top
 * becomes the device's atomic plus `others` plus the thread's own delta.
 * A delta that rises above the highest delta its top counts (`mark`) but
 * not above its bound only updates the top, with plain stores to the
 * thread's own line: the device's atomic (loaded fresh) plus `others` (as
 * the last raise summed them) plus the delta. The device's atomic rising
 * (segments joining, a thread without a slot) makes a raise too, with the
 * raising thread's bound at its delta. A delta that falls more than
 * CUMEMCAP_LEDGER_LOW below its mark lowers the bound to delta + LOW and
 * the mark to the delta (so the mark is never above the bound). So the
 * inline move checks one field, the mark: a pair that moves a block out
 * and back writes nothing but its own slot and sums nothing once its mark
 * covers it, and a thread whose figure climbs (a program filling the GPU,
 * a run of stream-ordered allocations) pays a locked instruction and a sum
 * over the slots once per STEP bytes, not at every allocation.
 * The rule, tested in tests/unit/test-ledger.c:
 *   - a peak is never below the figure: after any change has returned,
 *     the peak is at least the figure's value then, whatever threads run
 *     at the same time (the bound is stored before the sums are read,
 *     sequentially consistent, so of two racing raises the later sees
 *     both; after the latest raise no atomic has risen and no bound
 *     either, so the raising thread's top, made from its own delta, covers
 *     the figure);
 *   - it is exact (the highest value the figure had) while only one
 *     thread has moved blocks in or out since its slot was taken (a
 *     single-threaded program: the shim's worker only releases segments,
 *     through the atomic, which every top update loads afresh), and the
 *     thread that changes the atomic counts its own delta, not its bound;
 *   - otherwise it exceeds the true peak by at most SLACK for each other
 *     thread that holds a slot: another slot's bound is at most
 *     max(STEP, LOW) + LOW over its delta, and a top counts its own
 *     thread's climb of at most STEP since the raise whose `others` it
 *     uses (STEP = LOW = SLACK / 3: 2/3 SLACK per other thread plus 1/3
 *     for the climb, and 2 threads at least). A top update that finds a
 *     raise of the figure by anyone, a rise of its atomic or a fold since
 *     its `others` were summed (a count per GPU and figure, and the
 *     folds') makes a raise instead: `others` never counts a bound that a
 *     later raise or a fold made stale.
 * A thread takes a slot at its first block move and gives it back when it
 * exits (its deltas folded into the device's atomics); a thread that finds
 * every slot taken uses the atomics, exactly as the shared path. */
#define CUMEMCAP_LEDGER_SLACK ((int64_t)64 << 10)
#define CUMEMCAP_LEDGER_STEP (CUMEMCAP_LEDGER_SLACK / 3)
#define CUMEMCAP_LEDGER_LOW (CUMEMCAP_LEDGER_SLACK / 3)
#define CUMEMCAP_LEDGER_LOCALS 256

enum { CUMEMCAP_LOCAL_live, CUMEMCAP_LOCAL_pooled, CUMEMCAP_LOCAL_reserved, CUMEMCAP_LOCAL_COUNT };
/* The footprint's top: `reserved`'s top plus the overhead then. */
#define CUMEMCAP_LOCAL_footprint CUMEMCAP_LOCAL_COUNT

struct cumemcap_ledger_moves {
	_Atomic int64_t delta[CUMEMCAP_LOCAL_COUNT];
	_Atomic int64_t high[CUMEMCAP_LOCAL_COUNT];
	/* Written by the slot's thread alone: the highest delta its top
	 * counts, the other slots' bounds as its last raise summed them, and
	 * the tops (read by anyone; the footprint's last). */
	_Atomic int64_t mark[CUMEMCAP_LOCAL_COUNT];
	_Atomic int64_t others[CUMEMCAP_LOCAL_COUNT];
	_Atomic uint64_t epoch[CUMEMCAP_LOCAL_COUNT]; /* the raises and folds `others` is from */
	_Atomic uint64_t top[CUMEMCAP_LOCAL_COUNT + 1];
	/* The passthrough's figures (see "the thread's own counts" below):
	 * bytes of each slotted kind, successful allocations and frees. */
	_Atomic int64_t kind[CUMEMCAP_KIND_COUNT];
	_Atomic uint64_t allocs, frees;
};

struct cumemcap_ledger_local {
	_Alignas(64) struct cumemcap_ledger_moves dev[CUMEMCAP_MAX_DEVICES];
	_Atomic bool used;
};

/* The calling thread's slot for pooled moves (NULL: none yet, or none
 * free); set by cumemcap_ledger_move_slow, which also sets
 * cumemcap_ledger_pooled_slots: until then `pooled` is read with one load. */
extern CUMEMCAP_TLS struct cumemcap_ledger_local *cumemcap_ledger_mine;
extern _Atomic bool cumemcap_ledger_pooled_slots;
/* The calling thread's slot for anything (the same slot as
 * cumemcap_ledger_mine once that is set). */
extern CUMEMCAP_TLS struct cumemcap_ledger_local *cumemcap_ledger_own;

/* Out of line: the thread has no slot (takes one, or uses the atomics). */
void cumemcap_ledger_move_slow(int dev, int64_t live, int64_t pooled);
/* Out of line: delta `which` of m moved to v, above its mark (a raise when
 * above its bound too, else the top's update) or more than LOW below it
 * (the bound comes down). */
void cumemcap_ledger_raise_local(int dev, struct cumemcap_ledger_moves *m, int which, int64_t v);
/* How many raises of figure `which` (CUMEMCAP_LOCAL_*) dev has seen since
 * the start or the last reset (rises of its atomic while slots are taken
 * included): for the tests of the step. */
uint32_t cumemcap_ledger_raises(int dev, int which);
/* A figure of kind `local`: the device's atomic plus every slot's delta;
 * one load when no thread ever took a slot (CUMEMCAP_POOL=off). */
extern _Atomic int cumemcap_ledger_locals_used;
extern struct cumemcap_ledger_local cumemcap_ledger_locals[CUMEMCAP_LEDGER_LOCALS];
/* Odd while a dying thread's slot is folded into the atomics; bumped
 * twice per fold (ledger.c): a sum a fold ran through is taken again. */
extern _Atomic uint32_t cumemcap_ledger_fold_seq;
uint64_t cumemcap_ledger_local_sum_slots(int dev, _Atomic uint64_t *own, int which);
static inline uint64_t cumemcap_ledger_local_sum(int dev, _Atomic uint64_t *own, int which)
{
	int used = atomic_load_explicit(&cumemcap_ledger_locals_used, memory_order_relaxed);
	if (used <= 0 ||
	    (which == CUMEMCAP_LOCAL_pooled && !atomic_load_explicit(&cumemcap_ledger_pooled_slots, memory_order_relaxed)))
		return atomic_load(own);
	/* One slot ever taken (a program with one thread that allocates: the
	 * common case of cuMemGetInfo with pooling on): the loop of
	 * local_sum_slots inline, unrolled. Retried there if a fold ran or a
	 * second slot was taken meanwhile. */
	if (used == 1 && cumemcap_ledger_valid(dev)) {
		uint32_t seq = atomic_load(&cumemcap_ledger_fold_seq);
		uint64_t n = atomic_load(own) +
			     (uint64_t)atomic_load_explicit(&cumemcap_ledger_locals[0].dev[dev].delta[which],
							    memory_order_relaxed);
		if (!(seq & 1) && atomic_load(&cumemcap_ledger_fold_seq) == seq &&
		    atomic_load_explicit(&cumemcap_ledger_locals_used, memory_order_relaxed) == 1)
			return n;
	}
	return cumemcap_ledger_local_sum_slots(dev, own, which);
}

/* a + b, held at the ends of int64_t: a delta near either end (a reservation
 * of half the address space with no limit) keeps its bound and mark in
 * range instead of wrapping. */
static inline int64_t cumemcap_ledger_sat_add(int64_t a, int64_t b)
{
	int64_t r;
	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static inline __attribute__((always_inline)) void cumemcap_ledger_move_one(int dev, struct cumemcap_ledger_moves *m,
									   int which, int64_t by)
{
	int64_t v = atomic_load_explicit(&m->delta[which], memory_order_relaxed) + by;
	atomic_store_explicit(&m->delta[which], v, memory_order_relaxed);
	int64_t mark = atomic_load_explicit(&m->mark[which], memory_order_relaxed);
	if (v > mark || v < cumemcap_ledger_sat_add(mark, -CUMEMCAP_LEDGER_LOW))
		cumemcap_ledger_raise_local(dev, m, which, v);
}

/* `live` bytes of a pooled block changed hands by `live` and the arena's
 * cached bytes by `pooled` (handed out: +got, -part; given back: -got,
 * +part). */
static inline void cumemcap_ledger_move(int dev, int64_t live, int64_t pooled)
{
	struct cumemcap_ledger_local *l = cumemcap_ledger_mine;
	if (__builtin_expect(!l || !cumemcap_ledger_valid(dev), 0)) {
		cumemcap_ledger_move_slow(dev, live, pooled);
		return;
	}
	struct cumemcap_ledger_moves *m = &l->dev[dev];
	if (live)
		cumemcap_ledger_move_one(dev, m, CUMEMCAP_LOCAL_live, live);
	if (pooled)
		cumemcap_ledger_move_one(dev, m, CUMEMCAP_LOCAL_pooled, pooled);
}

/* ---- the thread's own counts: the passthrough's figures ------------------
 *
 * A passthrough pair (cuMemAlloc and cuMemFree served by the driver)
 * changes, besides `reserved`, the bytes of its kind, `live` and the
 * allocs and frees counters. These go to the calling thread's slot too
 * (plain stores to its own lines, no locked instruction), folded on read
 * exactly as the pooled moves: a kind's bytes, allocs and frees are the
 * device's atomic plus every slot's count; `live` (and peak_live) follows
 * the rule above for every change the account layer makes through
 * cumemcap_ledger_live_add/sub.
 *
 * `reserved` is a shared atomic on a device with a limit (the limit's
 * compare-and-swap needs it whole; its peaks stay exact). On a device
 * without one (cap CUMEMCAP_NO_LIMIT: set once when the GPU becomes
 * known, before anything is reserved on it) every change of `reserved`
 * goes to the thread's slot as well, and peak_reserved and peak_footprint
 * (the bound sum plus the overhead) follow the peaks' rule above. A group
 * keeps its own books (group.h), whichever way `reserved` is kept.
 *
 * The slotted kinds are those only the calls' charges move; `pool` and
 * `graph` (a pool's real figure, read back and forced by the account
 * layer) stay on the device's atomic, so cumemcap_ledger_holds is one
 * load.
 *
 * Stream-ordered pools on a device without a limit (and outside a group)
 * leave their growth unread until the figures are read ("figures read late"
 * below): `pool`, `reserved` and the footprint are exact whenever a reader
 * that settles reads them, and peak_reserved and peak_footprint count a
 * pool's growth when it is read, with the other figures as they are then;
 * a pool that released part of it at a synchronization before the read
 * passes through its high watermark (RESERVED_MEM_HIGH) on the way down, so
 * its own peak is never missed (the account layer's settle_locked). Under
 * a limit each allocation's growth is charged as it returns, as before. */
static inline bool cumemcap_ledger_slotted(enum cumemcap_kind kind)
{
	return kind != CUMEMCAP_KIND_pool && kind != CUMEMCAP_KIND_graph;
}

/* Out of line: the thread has no slot yet (takes one; NULL when none is
 * free: the caller uses the device's atomics). */
struct cumemcap_ledger_local *cumemcap_ledger_own_slow(void);
static inline __attribute__((always_inline)) struct cumemcap_ledger_moves *cumemcap_ledger_own_moves(int dev)
{
	struct cumemcap_ledger_local *l = cumemcap_ledger_own;
	if (__builtin_expect(!l, 0) && !(l = cumemcap_ledger_own_slow()))
		return NULL;
	return &l->dev[dev];
}

/* A kind's bytes or a counter (allocs, frees) of dev: the device's atomic
 * plus every slot's count (retried around a fold). */
uint64_t cumemcap_ledger_slot_sum(int dev, _Atomic uint64_t *own, size_t off);

/* Bytes the limit still allows (0 when at or past it; UINT64_MAX without
 * a limit): the cap less what is reserved. */
uint64_t cumemcap_ledger_headroom(int dev);

/* Every figure of `dev` now: sharded counts summed, the figures the
 * ledger does not own (src `device`, `log`) CUMEMCAP_FIGURE_NONE for
 * their owners to fill; a dev out of range holds nothing, has no limit. Each
 * figure is read atomically (the set is not one instant). Lock-free and
 * async-signal-safe: the exit record is made from it in a signal handler. */
void cumemcap_ledger_read(int dev, struct cumemcap_figures *out);

/* ---- figures read late ----------------------------------------------------
 *
 * A layer above may leave a change of `dev`'s figures unread until the
 * figures are read: the account layer's stream-ordered pools on a GPU
 * without a limit, whose growth is read back from the driver when the
 * figures are read rather than after every allocation (account.h says when,
 * and how the peaks follow). It sets growth_unread[dev] (sticky); the
 * growth reader that reads it back is registered by entry/setup.c. A
 * reader that may take locks and call the driver reads the growth first:
 * the stats, the log's records and metrics but the ones a fatal signal
 * writes (those read what was read before), the footprint, and a check
 * against a group's budget (reserve_in_group: the one place the ledger
 * itself may reach the driver, through the growth reader; a group joined
 * after the growth was left unread). cuMemGetInfo does not: nothing is
 * left unread under a limit, and without one its answer does not depend
 * on the pools. */
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
 * for a hot path that skips work when there are none. Only for the kinds
 * kept on the device's atomic (pool, graph: !cumemcap_ledger_slotted). */
static inline bool cumemcap_ledger_holds(int dev, enum cumemcap_kind kind)
{
	return atomic_load_explicit(&cumemcap_ledger[dev].kind[kind], memory_order_relaxed) != 0;
}

/* Count an event of `field` (an atomic of struct cumemcap_ledger_device)
 * on dev (in range). allocs and frees go to the thread's own slot. */
#define cumemcap_ledger_bump(dev, field) \
	cumemcap_ledger_bump_at((dev), offsetof(struct cumemcap_ledger_device, field))
static inline __attribute__((always_inline)) void cumemcap_ledger_bump_at(int dev, size_t off)
{
	_Atomic uint64_t *slot = NULL;
	if (off == offsetof(struct cumemcap_ledger_device, allocs) ||
	    off == offsetof(struct cumemcap_ledger_device, frees)) {
		struct cumemcap_ledger_moves *m = cumemcap_ledger_own_moves(dev);
		if (m)
			slot = off == offsetof(struct cumemcap_ledger_device, allocs) ? &m->allocs : &m->frees;
	}
	if (slot)
		atomic_store_explicit(slot, atomic_load_explicit(slot, memory_order_relaxed) + 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit((_Atomic uint64_t *)((char *)&cumemcap_ledger[dev] + off), 1,
					  memory_order_relaxed);
}
/* The other way, for a gauge counted up and down (`waiting`). */
#define cumemcap_ledger_drop(dev, field) \
	atomic_fetch_sub_explicit(&cumemcap_ledger[(dev)].field, 1, memory_order_relaxed)

/* Shards of the allocs, frees and avoided counters for writers that hold
 * a lock of their own (each arena owns one): a count is a plain add, not
 * an atomic read-modify-write on the device's shared line (about 5 ns of
 * a pooled 8 MiB alloc+free pair). Readers add every open shard of the
 * device. A shard is opened for a device and closed (its counts folded
 * into the device's) by its one writer. (Sharding live and pooled the
 * same way made the pair slower: the peaks then need the device's total
 * summed on every change.) */
#define CUMEMCAP_LEDGER_SHARDS 64
#define CUMEMCAP_LEDGER_SHARD_field(name)
#define CUMEMCAP_LEDGER_SHARD_sharded(name) _Atomic uint64_t name;
#define CUMEMCAP_LEDGER_SHARD_setting(name)
#define CUMEMCAP_LEDGER_SHARD_kind(name)
#define CUMEMCAP_LEDGER_SHARD_device(name)
#define CUMEMCAP_LEDGER_SHARD_log(name)
#define CUMEMCAP_LEDGER_SHARD_sum(name)
#define CUMEMCAP_LEDGER_SHARD_group(name)
#define CUMEMCAP_LEDGER_SHARD_local(name)
struct cumemcap_ledger_shard {
	_Alignas(64) _Atomic int dev; /* -1: closed; a line of its own: arenas on */
				      /* other threads write the next shard */
#define X(name, src, ...) CUMEMCAP_LEDGER_SHARD_##src(name)
	CUMEMCAP_FIGURES(X)
#undef X
};

extern struct cumemcap_ledger_shard cumemcap_ledger_shards[CUMEMCAP_LEDGER_SHARDS];

/* Shard `i` (0 <= i < CUMEMCAP_LEDGER_SHARDS): a writer keeps one by its
 * own index (the arenas: their slot in the arena table). */
static inline struct cumemcap_ledger_shard *cumemcap_ledger_shard(unsigned i)
{
	return &cumemcap_ledger_shards[i];
}

/* A sharded figure of dev (`own` in the device, at `off` in a shard): the
 * device's own count plus its open shards'. For cumemcap_ledger_get. */
uint64_t cumemcap_ledger_sharded_sum(int dev, _Atomic uint64_t *own, size_t off);
/* A peak kept with the slots' tops (ledger.h, "the peaks"): the device's
 * atomic `own` or the highest top of `which` in dev's slots. Out of line:
 * the peaks are read seldom, and cumemcap_ledger_get stays small. */
uint64_t cumemcap_ledger_peak(int dev, _Atomic uint64_t *own, int which);
/* A `field` figure at `off` in the device: the peaks of the slotted
 * figures fold the slots' tops in, the others are their atomic. */
#define CUMEMCAP_LEDGER_PEAK_WHICH(off)                                                        \
	((off) == offsetof(struct cumemcap_ledger_device, peak_live)	    ? CUMEMCAP_LOCAL_live     \
	 : (off) == offsetof(struct cumemcap_ledger_device, peak_pooled)   ? CUMEMCAP_LOCAL_pooled   \
	 : (off) == offsetof(struct cumemcap_ledger_device, peak_reserved) ? CUMEMCAP_LOCAL_reserved \
	 : (off) == offsetof(struct cumemcap_ledger_device, peak_footprint) ? CUMEMCAP_LOCAL_footprint \
									    : -1)
/* What a device out of range reads as: nothing held, no limit. */
extern struct cumemcap_ledger_device cumemcap_ledger_nowhere;

#define CUMEMCAP_LEDGER_GET_field(dev, d, name)                                                       \
	(CUMEMCAP_LEDGER_PEAK_WHICH(offsetof(struct cumemcap_ledger_device, name)) < 0                 \
		 ? atomic_load(&(d)->name)                                                              \
		 : cumemcap_ledger_peak(dev, &(d)->name,                                                \
					CUMEMCAP_LEDGER_PEAK_WHICH(offsetof(struct cumemcap_ledger_device, name))))
#define CUMEMCAP_LEDGER_GET_sharded(dev, d, name)                                                    \
	(cumemcap_ledger_sharded_sum(dev, &(d)->name, offsetof(struct cumemcap_ledger_shard, name)) + \
	 CUMEMCAP_LEDGER_SLOTTED_##name(dev))
/* Which sharded figures also have a count in the threads' slots. */
#define CUMEMCAP_LEDGER_SLOTTED_allocs(dev) cumemcap_ledger_slot_sum(dev, NULL, offsetof(struct cumemcap_ledger_moves, allocs))
#define CUMEMCAP_LEDGER_SLOTTED_frees(dev) cumemcap_ledger_slot_sum(dev, NULL, offsetof(struct cumemcap_ledger_moves, frees))
#define CUMEMCAP_LEDGER_SLOTTED_avoided(dev) 0
#define CUMEMCAP_LEDGER_GET_setting(dev, d, name) atomic_load(&(d)->name)
#define CUMEMCAP_LEDGER_GET_kind(dev, d, name)                                               \
	(cumemcap_ledger_slotted(CUMEMCAP_KIND_##name)                                        \
		 ? cumemcap_ledger_slot_sum(dev, &(d)->kind[CUMEMCAP_KIND_##name],             \
					    offsetof(struct cumemcap_ledger_moves, kind) +         \
						    CUMEMCAP_KIND_##name * sizeof(int64_t)) \
		 : atomic_load(&(d)->kind[CUMEMCAP_KIND_##name]))
#define CUMEMCAP_LEDGER_GET_device(dev, d, name) CUMEMCAP_FIGURE_NONE
#define CUMEMCAP_LEDGER_GET_log(dev, d, name) CUMEMCAP_FIGURE_NONE
#define CUMEMCAP_LEDGER_GET_sum(dev, d, name) cumemcap_ledger_sum_##name(dev, d)
#define CUMEMCAP_LEDGER_GET_group(dev, d, name) cumemcap_##name(dev)
#define CUMEMCAP_LEDGER_GET_local(dev, d, name) cumemcap_ledger_local_sum(dev, &(d)->name, CUMEMCAP_LOCAL_##name)

/* The `sum` figures. The footprint: what the driver holds for the
 * process, as far as the shim knows it. */
static inline uint64_t cumemcap_ledger_sum_footprint(int dev, struct cumemcap_ledger_device *d)
{
	return cumemcap_ledger_local_sum(dev, &d->reserved, CUMEMCAP_LOCAL_reserved) +
	       atomic_load_explicit(&d->overhead, memory_order_relaxed);
}

/* One figure of `dev` (as cumemcap_ledger_read has it). Inline, so that a
 * call with a constant figure (a hook's cuMemGetInfo reads `pooled`) is
 * the figure's own load, not a switch. */
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

#define cumemcap_shard_add(shard, field, n)                                                        \
	atomic_store_explicit(&(shard)->field,                                                     \
			      atomic_load_explicit(&(shard)->field, memory_order_relaxed) + (n),   \
			      memory_order_relaxed)
#define cumemcap_shard_bump(shard, field) cumemcap_shard_add(shard, field, 1)

void cumemcap_ledger_shard_open(struct cumemcap_ledger_shard *s, int dev);
void cumemcap_ledger_shard_close(struct cumemcap_ledger_shard *s);

/* Zero everything (a forked child holds none of its parent's memory). */
void cumemcap_ledger_reset(void);

/* What a capacity answer (cuMemGetInfo) needs of `dev` (in range), read in
 * one inline pass over its books: the limit (CUMEMCAP_NO_LIMIT: none),
 * the headroom under it (cumemcap_ledger_headroom; UINT64_MAX without a
 * limit) and `pooled`, the arenas' cached bytes (cumemcap_ledger_get's
 * figure, which cumemcap_arena_cached returns). Each is read atomically,
 * as by those functions; the set is not one instant. */
struct cumemcap_ledger_capacity {
	uint64_t limit, headroom, pooled;
};
static inline __attribute__((always_inline)) void cumemcap_ledger_capacity(int dev, struct cumemcap_ledger_capacity *out)
{
	struct cumemcap_ledger_device *d = &cumemcap_ledger[dev];
	out->limit = atomic_load(&d->limit);
	out->headroom = UINT64_MAX;
	if (out->limit != CUMEMCAP_NO_LIMIT) {
		uint64_t cap = atomic_load(&d->cap);
		if (cap != CUMEMCAP_NO_LIMIT) {
			uint64_t cur = atomic_load(&d->reserved);
			out->headroom = cur >= cap ? 0 : cap - cur;
		}
	}
	out->pooled = cumemcap_ledger_local_sum(dev, &d->pooled, CUMEMCAP_LOCAL_pooled);
}
