/* table: the hook table every way into the driver (a linked call, dlsym,
 * cuGetProcAddress) answers from, generated from hooks.def, and the NVML
 * hooks dlsym answers from.
 *
 * Immutable after compilation; lookups are read-only and thread-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "driver/driver.h"

enum cumemcap_variant {
	CUMEMCAP_VARIANT_LEGACY = 0,
	CUMEMCAP_VARIANT_PTSZ,
	CUMEMCAP_VARIANT_PTDS,
};

/* A row holds no pointer (names are offsets into one block of characters,
 * the two addresses come from switches), so the table needs no load-time
 * relocation and no page of it is copied into a process that never uses
 * CUDA. */
struct cumemcap_hook {
	uint16_t symbol_at; /* exported name, e.g. "cuMemAlloc_v2" (cumemcap_hook_symbol) */
	uint16_t base_at;   /* cuGetProcAddress name, e.g. "cuMemAlloc" (cumemcap_hook_base) */
	uint16_t version;   /* CUDA version it appears at, e.g. 3020 */
	uint8_t variant;    /* enum cumemcap_variant */
};

extern const struct cumemcap_hook cumemcap_hooks[];
extern const size_t cumemcap_hook_count;

/* The names, end to end: a member per name, so that each one's offset is
 * a constant (offsetof). The members are char arrays: no padding. */
struct cumemcap_hook_names {
#define HOOK(symbol, base, version, variant) \
	char symbol[sizeof(#symbol)];        \
	char base_of_##symbol[sizeof(#base)];
#include "driver/hooks.def"
};
extern const struct cumemcap_hook_names cumemcap_hook_names;

static inline const char *cumemcap_hook_symbol(const struct cumemcap_hook *h)
{
	return (const char *)&cumemcap_hook_names + h->symbol_at;
}

static inline const char *cumemcap_hook_base(const struct cumemcap_hook *h)
{
	return (const char *)&cumemcap_hook_names + h->base_at;
}

/* The shim's function of a row. */
void *cumemcap_hook_fn(const struct cumemcap_hook *h);
/* &real_<symbol> of a row. */
void **cumemcap_hook_real(const struct cumemcap_hook *h);

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

/* The shim's hook for the NVML function `name` (hooks-nvml.c), or NULL.
 * No libc call: lookup.c asks it on every dlsym of a name starting with
 * "nvml". */
CUMEMCAP_DLSYM_SAFE void *cumemcap_nvml_hook(const char *name);
