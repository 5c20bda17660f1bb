/* table: one row per hooks.def entry; see table.h. */
#include "entry/table.h"

#include <string.h>

#include "driver/driver.h"

/* Each hook must have exactly its PFN type, and its version fit a row. */
#define HOOK(symbol, base, version, variant)                                          \
	static const symbol##_fn typecheck_##symbol __attribute__((unused)) = symbol; \
	_Static_assert(version > 0 && version <= UINT16_MAX, #symbol ": the version fits a row");
#include "driver/hooks.def"

const struct cumemcap_hook_names cumemcap_hook_names = {
#define HOOK(symbol, base, version, variant) #symbol, #base,
#include "driver/hooks.def"
};
_Static_assert(sizeof(cumemcap_hook_names) <= UINT16_MAX, "a name's offset fits a row's uint16_t");

const struct cumemcap_hook cumemcap_hooks[] = {
#define HOOK(symbol, base, version, variant)                                                        \
	{ offsetof(struct cumemcap_hook_names, symbol), offsetof(struct cumemcap_hook_names, base_of_##symbol), version, \
	  CUMEMCAP_VARIANT_##variant },
#include "driver/hooks.def"
};

const size_t cumemcap_hook_count = sizeof(cumemcap_hooks) / sizeof(cumemcap_hooks[0]);

/* Row numbers, for the switches. */
enum {
#define HOOK(symbol, base, version, variant) ROW_##symbol,
#include "driver/hooks.def"
};

void *cumemcap_hook_fn(const struct cumemcap_hook *h)
{
	switch (h - cumemcap_hooks) {
#define HOOK(symbol, base, version, variant) \
	case ROW_##symbol:                   \
		return (void *)symbol;
#include "driver/hooks.def"
	}
	return NULL;
}

void **cumemcap_hook_real(const struct cumemcap_hook *h)
{
	switch (h - cumemcap_hooks) {
#define HOOK(symbol, base, version, variant) \
	case ROW_##symbol:                   \
		return (void **)&real_##symbol;
#include "driver/hooks.def"
	}
	return NULL;
}

CUMEMCAP_DLSYM_SAFE const struct cumemcap_hook *cumemcap_table_by_symbol(const char *symbol)
{
	/* Most dlsym calls are for names not starting with "cu". */
	if (!symbol || symbol[0] != 'c' || symbol[1] != 'u')
		return NULL;
	for (size_t i = 0; i < cumemcap_hook_count; i++)
		if (cumemcap_str_eq(cumemcap_hook_symbol(&cumemcap_hooks[i]), symbol))
			return &cumemcap_hooks[i];
	return NULL;
}

const struct cumemcap_hook *cumemcap_table_select(const char *base, int cuda_version,
						  uint64_t flags, bool *base_known)
{
	bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
	const struct cumemcap_hook *best = NULL;
	bool known = false;

	if (base && base[0] == 'c' && base[1] == 'u') {
		for (size_t i = 0; i < cumemcap_hook_count; i++) {
			const struct cumemcap_hook *h = &cumemcap_hooks[i];
			if (strcmp(cumemcap_hook_base(h), base) != 0)
				continue;
			known = true;
			bool threaded = h->variant != CUMEMCAP_VARIANT_LEGACY;
			if (h->version > cuda_version || (threaded && !per_thread))
				continue;
			if (!best || h->version > best->version ||
			    (h->version == best->version && threaded))
				best = h;
		}
	}
	if (base_known)
		*base_known = known;
	return best;
}

const struct cumemcap_hook *cumemcap_table_by_real(const void *fn)
{
	for (size_t i = 0; fn && i < cumemcap_hook_count; i++)
		if (*cumemcap_hook_real(&cumemcap_hooks[i]) == fn)
			return &cumemcap_hooks[i];
	return NULL;
}
