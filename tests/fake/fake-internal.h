/* fake-internal: types and helpers shared by the fake driver's files.
 *
 * Locking model (all files): one global mutex, fake_lock, guards every piece
 * of fake state (devices' counters, contexts, streams, events, pools, the
 * allocation registry, VMM objects). One global condition variable,
 * fake_cond, is broadcast whenever stream work completes or an event/legacy
 * state changes; every wait in the fake is a loop on fake_cond. Stream
 * workers run their operations (memcpy, host functions) with the lock
 * released. Call counters are lock-free atomics. Nothing here ever calls an
 * exported cu* entry point (the library is also linked -Bsymbolic-functions).
 */
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fake-entries.h"
#include "fakecuda.h"

#define FAKE_API __attribute__((visibility("default")))

#define FAKE_MAX_DEVICES 16
#define FAKE_GRANULARITY ((size_t)2 << 20) /* VMM and pool chunk granularity */
#define FAKE_ALIGN 512                      /* alignment of every device pointer */

/* ---- call counters (fakecuda.c) ------------------------------------ */
enum fake_id {
#define FAKE_ID_ROW(base, ver, sfx, fn) FAKE_ID_##fn,
	FAKE_ENTRY_POINTS(FAKE_ID_ROW)
#undef FAKE_ID_ROW
	FAKE_N_IDS
};
/* Each thread counts its calls in a block of its own (a shared counter
 * would be a cache line every thread writes on every call: the fake, not
 * the shim, would then decide whether pooled pairs scale with threads);
 * fakecuda_calls() sums every block. A block outlives its thread and is
 * taken over by a later one, so no count is lost. */
struct fake_counts {
	_Atomic uint64_t n[FAKE_N_IDS];
	struct fake_counts *next; /* every block ever made */
	_Atomic bool taken;
};

/* What the fake keeps per thread: the block it counts in, its context
 * stack and its capture mode. Held by a pthread key, not in __thread
 * variables: the fake is dlopen()ed, and a dlopen()ed library's
 * thread-locals are blocks that ld.so allocates and frees outside
 * ThreadSanitizer's view, which then reports a thread's first use of a
 * recycled block as a race with the free of an exited thread. A key's value
 * lives in the thread's descriptor. The key's destructor gives the block
 * back and frees the rest; a call after it starts afresh (no current
 * context), and pthread runs the destructor again for that. */
#define FAKE_CTX_STACK_MAX 128
struct fake_thread {
	struct fake_counts *counts;
	int ctx_depth;
	struct CUctx_st *ctx_stack[FAKE_CTX_STACK_MAX];
	int capture_mode; /* CUstreamCaptureMode */
};
struct fake_thread *fake_thread(void); /* never NULL (aborts without memory) */

static inline void fake_count(int id)
{
	struct fake_counts *c = fake_thread()->counts;
	/* one writer per block: a load and a store, no locked add */
	atomic_store_explicit(&c->n[id], atomic_load_explicit(&c->n[id], memory_order_relaxed) + 1,
			      memory_order_relaxed);
}
#define COUNT(fn) fake_count(FAKE_ID_##fn)

/* ---- global lock ---------------------------------------------------- */
extern pthread_mutex_t fake_lock;
extern pthread_cond_t fake_cond;
void fake_wait(void); /* pthread_cond_wait(&fake_cond, &fake_lock) */
void fake_broadcast(void);

/* ---- configuration and devices (fakecuda.c) -------------------------- */
struct fake_dev {
	uint64_t total, other_used;
	unsigned char uuid[16];
	unsigned pci_domain, pci_bus, pci_device;
	/* counters, under fake_lock */
	uint64_t reserved, peak, live;
	int nctx; /* contexts alive on this device (each costs ctx_overhead) */
	/* Driver-side memory held for this process beyond its contexts
	 * (module images, library workspaces): fakecuda_driver_grow and
	 * FAKECUDA_DRIVER_GROW. It lives with the device's contexts: the last
	 * one's death releases it. ctx_since_ns: CLOCK_MONOTONIC when nctx
	 * last went from 0 to 1; timed_done: FAKECUDA_DRIVER_GROW applied. */
	uint64_t grown, ctx_since_ns;
	bool timed_done;
	struct CUctx_st *primary;
	struct CUmemPoolHandle_st *default_pool, *cur_pool;
};
struct fake_config {
	int ndev;
	struct fake_dev dev[FAKE_MAX_DEVICES];
	uint64_t ctx_overhead;
	uint64_t grow_bytes, grow_after_ns; /* FAKECUDA_DRIVER_GROW (0 bytes: off) */
	int driver_version;
	unsigned delay_us;
	unsigned free_delay_us; /* FAKECUDA_FREE_DELAY_US */
};
extern struct fake_config fake_cfg;
void fake_config_load(void); /* once; aborts on a malformed FAKECUDA_* value */

/* CUDA_SUCCESS once cuInit(0) succeeded in this process (not in a child
 * forked after init: the real driver is unusable there too). */
CUresult fake_initialized(void);
/* fake_initialized()'s error if any, else e. */
static inline CUresult fake_init_or(CUresult e)
{
	CUresult r = fake_initialized();
	return r ? r : e;
}
#define REQUIRE_INIT() do { CUresult r_ = fake_initialized(); if (r_) return r_; } while (0)
/* [domain:]bus:device.function in hex (function 0); fakecuda.c. */
bool fake_parse_pci(const char *s, size_t len, unsigned *dom, unsigned *bus, unsigned *devn);
/* Device ordinal check: CUDA_ERROR_INVALID_DEVICE when out of range. */
CUresult fake_check_dev(CUdevice dev);

/* Charge / uncharge device memory (lock held). Charge fails with
 * CUDA_ERROR_OUT_OF_MEMORY when bytes exceed what is free. Free is the
 * capacity less other tenants, allocations and fake_dev_driver_held. */
uint64_t fake_dev_free(int dev);
/* What the driver holds for this process on dev outside allocations: its
 * contexts (ctx_overhead each) and the grown bytes (lock held). Applies a
 * FAKECUDA_DRIVER_GROW that is due and fits first. */
uint64_t fake_dev_driver_held(int dev);
/* A context came to life on / left dev: nctx, and the driver-side memory
 * that lives with the device's contexts (lock held). */
void fake_dev_ctx_up(int dev);
void fake_dev_ctx_down(int dev);
CUresult fake_dev_charge(int dev, uint64_t bytes);
void fake_dev_uncharge(int dev, uint64_t bytes);

/* ---- contexts (fake-ctx.c) ------------------------------------------ */
#define FAKE_CTX_MAGIC 0xc0c7e47u
struct CUctx_st {
	uint32_t magic;
	int dev;
	bool primary;
	bool alive;      /* created and not destroyed; primary: retained (refcount > 0) */
	int refcount;    /* primary only */
	unsigned flags;
	int legacy_running; /* legacy-stream operations running right now */
	struct CUctx_st *next_all;
};
/* The current context of the calling thread (NULL if none). */
struct CUctx_st *fake_ctx_current(void);
/* Current context, alive, else CUDA_ERROR_INVALID_CONTEXT (lock held). */
CUresult fake_ctx_require(struct CUctx_st **out);
bool fake_ctx_valid(struct CUctx_st *c); /* lock held: a handle the fake made */
void fake_count_device_sync(void);

/* ---- streams and events (fake-stream.c), pools (fake-pool.c) --------------------------- */
enum fake_op_kind {
	FAKE_OP_COPY,
	FAKE_OP_SET8,
	FAKE_OP_SET32,
	FAKE_OP_HOSTFN,
	FAKE_OP_EVENT_RECORD,
	FAKE_OP_WAIT_EVENT,
	FAKE_OP_POOL_FREE,
};
struct fake_chunk;
struct fake_op {
	struct fake_op *next;
	enum fake_op_kind kind;
	void *dst;
	const void *src;
	size_t n;
	uint32_t value;
	CUhostFn fn;
	void *user;
	struct CUevent_st *event;
	uint64_t seq;
	struct fake_chunk *chunk;
	struct CUmemPoolHandle_st *chunk_pool;
	void *owned; /* freed when the operation finishes (staging buffer) */
};
/* Resolve a stream argument (lock held). *out = NULL means the legacy
 * default stream of ctx. per_thread: the _ptsz/_ptds variant (0 = the
 * thread's per-thread stream). */
CUresult fake_stream_resolve(CUstream h, bool per_thread, struct CUctx_st *ctx,
			     struct CUstream_st **out);
/* Run or enqueue op (heap allocated; ownership passes) on s (NULL: legacy
 * stream of ctx). wait: return only after it ran. Lock held on entry and
 * exit; may drop it while waiting or running. */
void fake_stream_submit(struct CUctx_st *ctx, struct CUstream_st *s, struct fake_op *op, bool wait);
/* A stream argument with the context it belongs to (lock held): the
 * current context for the default streams, the stream's own otherwise. */
CUresult fake_stream_lookup(CUstream h, bool per_thread, struct CUctx_st **ctx, struct CUstream_st **s);
/* A stream-ordered free reached its point in the stream (lock held). */
void fake_chunk_return(struct CUmemPoolHandle_st *p, struct fake_chunk *c);
/* Wait until every stream of ctx is drained (lock held). */
void fake_ctx_drain(struct CUctx_st *ctx);
/* Destroy every stream and event of ctx, return its pool allocations
 * (lock held; used by context destroy/reset after draining). */
void fake_ctx_release_streams(struct CUctx_st *ctx);
/* Trim every pool of a device down to its release threshold (lock held). */
void fake_pools_trim_at_sync(int dev);

/* ---- allocation registry (fake-mem.c) -------------------------------- */
enum fake_kind {
	FAKE_K_DEVICE,  /* cuMemAlloc, cuMemAllocPitch */
	FAKE_K_LEGACY,  /* legacy 32-bit cuMemAlloc / cuMemAllocPitch (mmap MAP_32BIT) */
	FAKE_K_MANAGED, /* cuMemAllocManaged */
	FAKE_K_HOST,    /* cuMemHostAlloc / cuMemAllocHost: not device memory */
	FAKE_K_POOL,    /* cuMemAllocAsync / cuMemAllocFromPoolAsync */
	FAKE_K_VMM,     /* a cuMemMap mapping */
	FAKE_K_GRAPH,   /* a live graph allocation (fake-graph.c): counted by the graph pool */
};
struct fake_alloc {
	uintptr_t base;
	size_t size;      /* what the program asked for (the range) */
	size_t counted;   /* bytes charged to the device for it (0: not counted) */
	size_t map_len;   /* bytes of host memory behind it (0: from posix_memalign) */
	enum fake_kind kind;
	int dev;
	struct CUctx_st *ctx;
	uint64_t buffer_id;
	int ipc_opens;
	unsigned access;      /* FAKE_K_VMM: CUmemAccess_flags */
	struct fake_chunk *chunk;          /* FAKE_K_POOL */
	struct CUmemPoolHandle_st *pool;   /* FAKE_K_POOL */
	struct fake_vmm_handle *handle;    /* FAKE_K_VMM */
	struct fake_gmem *gmem;            /* FAKE_K_GRAPH: the allocation node's range */
};
uint64_t fake_next_buffer_id(void);
void fake_reg_insert(struct fake_alloc *a);           /* lock held */
void fake_reg_remove(struct fake_alloc *a);           /* lock held */
struct fake_alloc *fake_reg_find(uintptr_t addr);     /* containing; lock held */
struct fake_alloc *fake_reg_find_range(uintptr_t addr, size_t size); /* any overlapping */
/* Free every registry entry of ctx that the context owns (lock held). */
void fake_mem_release_ctx(struct CUctx_st *ctx);
/* Pool chunk release for a FAKE_K_POOL entry freed by its context's death. */
void fake_pool_free_now(struct fake_alloc *a); /* lock held; frees a */
/* Arrays of a dying context (fake-vmm.c). */
void fake_arrays_release_ctx(struct CUctx_st *ctx);
/* The cuMemAddressReserve range holding addr (fake-vmm.c; lock held). */
bool fake_vmm_reservation(uintptr_t addr, uintptr_t *base, size_t *size);

/* ---- misc ------------------------------------------------------------ */
void *fake_map(size_t len, bool low32); /* mmap anonymous NORESERVE; NULL on failure */
static inline uint64_t fake_round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* ---- device attributes (fake-attr.c) ---------------------------------- */
/* The value of attribute a of device dev (no lock needed: the answers
 * depend only on the configuration). CUDA_ERROR_INVALID_VALUE for an
 * attribute outside 1 .. CU_DEVICE_ATTRIBUTE_MAX-1. dev must be valid. */
CUresult fake_device_attribute(int dev, CUdevice_attribute a, int *out);
