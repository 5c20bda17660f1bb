/* arena: per-GPU, per-context pools serving cuMemAlloc from segments that
 * the account layer takes and gives back (account/reserve.c). The arenas
 * keep the ledger's `live` and `pooled` figures and call the driver only
 * to prove freed blocks idle (fence.h).
 *
 * Thread safety: each arena has one lock, never held across a driver call. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"
#include "state/ledger.h"

struct arena;

/* Wholly free segments the arenas gave up, the driver's and in the ledger
 * until the account layer gives them back; a function taking one empties it. */
struct cumemcap_give_back {
	unsigned n, cap;
	bool quiet; /* in a quiet section (capture.h) until given back */
	struct cumemcap_segment_back {
		CUcontext ctx;
		int dev;
		CUdeviceptr base;
		uint64_t bytes;
	} *seg; /* malloc'ed */
};

/* A cuMemAlloc request the arenas could not serve from what they hold. */
struct cumemcap_arena_request {
	int dev;
	CUcontext ctx;
	struct arena *arena;
	uint64_t bytes;          /* what the program asked */
	uint64_t segment_bytes;  /* the segment to take from the driver */
	bool prealloc;           /* that segment is the GPU's preallocation (CUMEMCAP_GROWTH) */
	bool packed;
	uint32_t units;
	struct cumemcap_give_back back; /* to give back first, whatever the answer */
};

enum cumemcap_arena_answer {
	CUMEMCAP_ARENA_NOT_POOLED,    /* pooling does not apply: the caller goes to the driver */
	CUMEMCAP_ARENA_SERVED,        /* *dptr is the program's block */
	CUMEMCAP_ARENA_NEEDS_SEGMENT, /* take q->segment_bytes, then cumemcap_arena_add_segment */
	CUMEMCAP_ARENA_REFUSED,       /* the context's preallocation failed: refuse */
};

/* Serve cuMemAlloc(bytes) in the current context from a ready block.
 * When nothing ready fits, q->back names the cached segments the release
 * rule does not keep, and q the segment needed. */
enum cumemcap_arena_answer cumemcap_arena_serve(struct cumemcap_arena_request *q, uint64_t bytes,
						CUdeviceptr *dptr);

/* After NEEDS_SEGMENT for a packed request, when the limit leaves no room
 * for the segment: true with *dptr, a ready block of another shard. */
bool cumemcap_arena_serve_sibling(struct cumemcap_arena_request *q, CUdeviceptr *dptr);

/* Whether the arenas can pool a segment at base (below 2^49). */
static inline bool cumemcap_arena_poolable(CUdeviceptr base)
{
	return base != 0 && base < (1ull << 49);
}

/* The segment q needed, taken at a poolable base: true with *dptr the
 * program's block (0 for a preallocation: serve again). False: no host
 * memory for the records; the caller frees the segment. */
bool cumemcap_arena_add_segment(const struct cumemcap_arena_request *q, CUdeviceptr base, CUdeviceptr *dptr);

/* The preallocation q named could not be taken (CUDA error r): the
 * context's arena refuses every request from now on (said once). */
void cumemcap_arena_prealloc_failed(const struct cumemcap_arena_request *q, CUresult r);

/* Arena slots ever used: with none, no pointer is pooled. */
extern _Atomic uint32_t cumemcap_arena_count;

/* cuMemFree(ptr), ptr not 0: false when ptr is in no arena segment, else
 * *r is CUDA_SUCCESS for a live block's base, CUDA_ERROR_INVALID_VALUE for a
 * double free or an interior pointer; g: what RELEASE=immediate gives back. */
bool cumemcap_arena_free(CUdeviceptr ptr, CUresult *r, struct cumemcap_give_back *g);

enum cumemcap_arena_where {
	CUMEMCAP_ARENA_NOT_OURS = 0, /* not in a segment: ask the driver */
	CUMEMCAP_ARENA_WHOLE,        /* a live block that is its segment's base */
	CUMEMCAP_ARENA_PACKED,       /* a live block sharing its segment */
	CUMEMCAP_ARENA_NOT_LIVE,     /* in a segment, but in no live block */
};

/* Which live block holds ptr: its base and the size the program asked for. */
enum cumemcap_arena_where cumemcap_arena_lookup(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size);

/* True the first time it is called (one line about IPC on packed blocks). */
bool cumemcap_arena_warn_ipc(void);

/* What an arena held when its context died. */
struct cumemcap_arena_gone {
	int dev;        /* -1: the context had no arena */
	uint64_t live;  /* bytes the program held in blocks */
	uint64_t held;  /* bytes of segments the driver freed with the context */
	uint64_t blocks; /* live blocks */
};

/* ctx died (the death lock held as writer): empty its arenas; the caller
 * takes gone->held off the ledger. */
void cumemcap_arena_forget_ctx(CUcontext ctx, struct cumemcap_arena_gone *gone);

/* Arena slot i < cumemcap_arena_count, if it serves a context on `dev`:
 * wait for its pending frees, then name in g every wholly free segment. */
void cumemcap_arena_release_device(unsigned i, int dev, struct cumemcap_give_back *g);

/* CUMEMCAP_RELEASE=idle for slot i at now_ms: prove pending frees idle
 * after half the idle time quiet, name in g the segments free that long,
 * lower *next_ms to when the next is due. */
void cumemcap_arena_idle(unsigned i, uint64_t now_ms, struct cumemcap_give_back *g, uint64_t *next_ms);

/* Fork: hold every arena across fork(); the child empties them. */
void cumemcap_arena_lock_all(void);
void cumemcap_arena_unlock_all(void);
void cumemcap_arena_fork_child(void);
