/* track: what the shim handed out, by key.
 *
 * Owns the map from a device pointer / array / VMM handle to its record, so
 * a free knows what to give back: one hash table under one spinlock, never
 * held across a driver call. A record is removed before the driver frees
 * (it may hand the address to another thread at once), put back on error. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "platform/cuda-api.h"
#include "state/ledger.h"

enum cumemcap_handle_kind {
	CUMEMCAP_HANDLE_PTR = 1, /* CUdeviceptr from cuMemAlloc*, cuMemAllocManaged */
	CUMEMCAP_HANDLE_ASYNC,   /* CUdeviceptr from cuMemAlloc*Async (bytes live in the pool) */
	CUMEMCAP_HANDLE_ARRAY,   /* CUarray */
	CUMEMCAP_HANDLE_MIPMAP,  /* CUmipmappedArray */
	CUMEMCAP_HANDLE_VMM,     /* CUmemGenericAllocationHandle */
};

struct cumemcap_block {
	uint64_t key;
	uint64_t bytes;   /* what the program holds (live) */
	CUcontext ctx;    /* where it was made; NULL for VMM handles */
	int16_t dev;
	uint8_t handle;   /* enum cumemcap_handle_kind */
	uint8_t kind;     /* enum cumemcap_kind */
	uint8_t charged;  /* `bytes` are in the ledger under `kind` (not a pool's block) */
};

/* Record b. One already under the same (handle kind, key) is stale (the
 * driver reused the key): it is replaced and returned in *displaced (true). */
bool cumemcap_track_insert(const struct cumemcap_block *b, struct cumemcap_block *displaced);

/* Remove and return the record for (handle kind, key). PTR and ASYNC are
 * one namespace: either finds both; the record's `handle` says which. */
bool cumemcap_track_remove(enum cumemcap_handle_kind handle, uint64_t key,
			   struct cumemcap_block *out);

/* Remove every record of context `ctx`, calling fn for each. */
void cumemcap_track_purge_ctx(CUcontext ctx, void (*fn)(const struct cumemcap_block *b));

uint64_t cumemcap_track_count(void);

/* Fork: hold the map across fork(); the child empties it. */
void cumemcap_track_lock(void);
void cumemcap_track_unlock(void);
void cumemcap_track_reset_locked(void);
