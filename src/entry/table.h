/* table: the hooks dlsym and cuGetProcAddress answer from (hooks.def's, and
 * NVML's for dlsym). Immutable: lookups are thread-safe. */
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
 * the two addresses come from switches): the table needs no relocation. */
struct cumemcap_hook {
	uint16_t symbol_at; /* exported name, e.g. "cuMemAlloc_v2" (cumemcap_hook_symbol) */
	uint16_t base_at;   /* cuGetProcAddress name, e.g. "cuMemAlloc" (cumemcap_hook_base) */
	uint16_t version;   /* CUDA version it appears at, e.g. 3020 */
	uint8_t variant;    /* enum cumemcap_variant */
};

extern const struct cumemcap_hook cumemcap_hooks[];
extern const size_t cumemcap_hook_count;

/* The names end to end, a char array per name: each offset is a constant. */
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

/* A row's hook, and its &real_<symbol>. */
void *cumemcap_hook_fn(const struct cumemcap_hook *h);
void **cumemcap_hook_real(const struct cumemcap_hook *h);

/* The entry whose exported name is `symbol`, or NULL. */
const struct cumemcap_hook *cumemcap_table_by_symbol(const char *symbol);

/* The entry whose real driver function is `fn`, or NULL. */
const struct cumemcap_hook *cumemcap_table_by_real(const void *fn);

/* What cuGetProcAddress(base, cudaVersion, flags) selects among the hooked
 * entries, by the driver's rules: the highest version <= cudaVersion; a
 * per-thread variant only with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
 * and then preferred at equal version. NULL when none qualifies;
 * *base_known (may be NULL) says whether `base` is hooked at all. */
const struct cumemcap_hook *cumemcap_table_select(const char *base, int cuda_version,
						  uint64_t flags, bool *base_known);

/* The shim's hook for the NVML function `name` (hooks-nvml.c), or NULL.
 * No libc call: every dlsym of a name starting with "nvml" asks it. */
CUMEMCAP_DLSYM_SAFE void *cumemcap_nvml_hook(const char *name);
