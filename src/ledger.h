/* ledger: per-device counters and the limit check.
 *
 * Owns, for each GPU ordinal, the bytes this process holds from the driver
 * (in total and per memory kind), their peak, the limit, and event counts.
 * Every figure is an atomic; the limit check is one compare-and-swap loop on
 * the device total, so concurrent reservations can never overshoot the
 * limit together. A reservation is made *before* the driver is asked and
 * given back if the driver fails. Never calls the driver. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define CUMEMCAP_MAX_DEVICES 64
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

/* Event counters, {total} only. */
#define CUMEMCAP_COUNTERS(X) \
	X(allocs)    /* successful allocations of any kind */ \
	X(frees)     /* successful frees of tracked allocations */ \
	X(refusals)  /* requests refused at the limit */ \
	X(driver_oom) /* CUDA_ERROR_OUT_OF_MEMORY from the driver itself */ \
	X(segments_taken)    /* arena segments obtained from the driver */ \
	X(segments_released) /* arena segments given back to the driver */ \
	X(avoided)   /* driver alloc/free calls the arenas answered themselves */

struct cumemcap_ledger_device {
	_Atomic uint64_t limit; /* CUMEMCAP_NO_LIMIT until set */
	_Atomic uint64_t reserved;
	_Atomic uint64_t peak;
	_Atomic uint64_t largest_request;
	/* What the program holds: pooled blocks (their 512-byte-rounded size),
	 * stream-ordered allocations (their requested size) and everything
	 * else by the bytes charged. */
	_Atomic uint64_t live;
	_Atomic uint64_t peak_live;
	/* Bytes of arena segments not handed out (free, or freed and waiting
	 * until the streams are past them). */
	_Atomic uint64_t pooled;
	_Atomic uint64_t peak_pooled;
	_Atomic uint64_t kind[CUMEMCAP_KIND_COUNT];
#define X(name) _Atomic uint64_t name;
	CUMEMCAP_COUNTERS(X)
#undef X
};

extern struct cumemcap_ledger_device cumemcap_ledger[CUMEMCAP_MAX_DEVICES];

void cumemcap_ledger_set_limit(int dev, uint64_t limit);
uint64_t cumemcap_ledger_limit(int dev);

/* Reserve `bytes` of `kind` on `dev` if the total stays within the limit.
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

/* The program's live bytes and the arenas' free bytes (peaks follow). */
void cumemcap_ledger_live_add(int dev, uint64_t bytes);
void cumemcap_ledger_live_sub(int dev, uint64_t bytes);
void cumemcap_ledger_pooled_add(int dev, uint64_t bytes);
void cumemcap_ledger_pooled_sub(int dev, uint64_t bytes);

/* Bytes the limit still allows (0 when at or past it; UINT64_MAX without
 * a limit). */
uint64_t cumemcap_ledger_headroom(int dev);

#define cumemcap_ledger_bump(dev, field) \
	atomic_fetch_add_explicit(&cumemcap_ledger[(dev)].field, 1, memory_order_relaxed)

/* Shards of the allocs, frees and avoided counters for writers that hold
 * a lock of their own (each arena owns one): a count is a plain add, not
 * an atomic read-modify-write on the device's shared line (about 5 ns of
 * a pooled 8 MiB alloc+free pair). Readers add every open shard of the
 * device. A shard is opened for a device and closed (its counts folded
 * into the device's) by its one writer. (Sharding live and pooled the
 * same way made the pair slower: the peaks then need the device's total
 * summed on every change.) */
#define CUMEMCAP_LEDGER_SHARDS 64
#define CUMEMCAP_SHARDED(X) X(allocs) X(frees) X(avoided)
struct cumemcap_ledger_shard {
	_Atomic int dev; /* -1: closed */
#define X(name) _Atomic uint64_t name;
	CUMEMCAP_SHARDED(X)
#undef X
};

extern struct cumemcap_ledger_shard cumemcap_ledger_shards[CUMEMCAP_LEDGER_SHARDS];

#define cumemcap_shard_add(shard, field, n)                                                        \
	atomic_store_explicit(&(shard)->field,                                                     \
			      atomic_load_explicit(&(shard)->field, memory_order_relaxed) + (n),   \
			      memory_order_relaxed)
#define cumemcap_shard_bump(shard, field) cumemcap_shard_add(shard, field, 1)

void cumemcap_ledger_shard_open(struct cumemcap_ledger_shard *s, int dev);
void cumemcap_ledger_shard_close(struct cumemcap_ledger_shard *s);

/* The sharded figures of a device: its own plus its open shards'. */
#define X(name) uint64_t cumemcap_ledger_##name(int dev);
CUMEMCAP_SHARDED(X)
#undef X

/* Zero everything (a forked child holds none of its parent's memory). */
void cumemcap_ledger_reset(void);
