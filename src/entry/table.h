/* table: the hook table every door answers from, generated from hooks.def.
 *
 * Immutable after compilation; lookups are read-only and thread-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cumemcap_variant {
	CUMEMCAP_VARIANT_LEGACY = 0,
	CUMEMCAP_VARIANT_PTSZ,
	CUMEMCAP_VARIANT_PTDS,
};

struct cumemcap_hook {
	const char *symbol; /* exported name, e.g. "cuMemAlloc_v2" */
	const char *base;   /* cuGetProcAddress name, e.g. "cuMemAlloc" */
	int version;        /* CUDA version it appears at, e.g. 3020 */
	enum cumemcap_variant variant;
	void *hook;         /* the shim's function */
	void **real;        /* &real_<symbol> */
};

extern const struct cumemcap_hook cumemcap_hooks[];
extern const size_t cumemcap_hook_count;

/* The entry whose exported name is `symbol`, or NULL. */
const struct cumemcap_hook *cumemcap_table_by_symbol(const char *symbol);

/* The entry whose real driver function is `fn`, or NULL. */
const struct cumemcap_hook *cumemcap_table_by_real(const void *fn);

/* What cuGetProcAddress(base, cudaVersion, flags) selects among the hooked
 * entries, by the driver's rules: the highest version <= cudaVersion; with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM a per-thread variant is
 * preferred at equal version and eligible at all, otherwise only legacy
 * entries are. NULL when `base` is not hooked or no version qualifies;
 * *base_known (may be NULL) says whether `base` is hooked at all. */
const struct cumemcap_hook *cumemcap_table_select(const char *base, int cuda_version,
						  uint64_t flags, bool *base_known);
