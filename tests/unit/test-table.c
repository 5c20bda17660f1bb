/* Unit tests for src/entry/table.c: the hook table every door answers from. */
#include "config.h"

#include <string.h>

#include "entry/table.h"
#include "driver/driver.h"
#include "test-common.h"

static unsigned flags_for(const struct cumemcap_hook *h)
{
	return h->variant == CUMEMCAP_VARIANT_LEGACY ? CU_GET_PROC_ADDRESS_DEFAULT
						    : CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
}

/* Every row is what cuGetProcAddress selects for its own base, version and
 * flags, and what dlsym finds by its exported name: each hook is reachable
 * through both run-time doors. */
START_TEST(table_every_entry_reachable)
{
	ck_assert_uint_gt(cumemcap_hook_count, 30);
	for (size_t i = 0; i < cumemcap_hook_count; i++) {
		const struct cumemcap_hook *h = &cumemcap_hooks[i];
		bool known = false;
		const struct cumemcap_hook *sel =
			cumemcap_table_select(h->base, h->version, flags_for(h), &known);
		ck_assert_msg(known, "%s: base %s unknown", h->symbol, h->base);
		ck_assert_msg(sel == h, "%s@%d: selected %s", h->base, h->version,
			      sel ? sel->symbol : "nothing");
		ck_assert_ptr_eq(cumemcap_table_by_symbol(h->symbol), h);
		ck_assert_ptr_nonnull(h->hook);
		ck_assert_ptr_nonnull(h->real);
		/* The exported name is the base plus a suffix, never another function. */
		ck_assert_msg(strncmp(h->symbol, h->base, strlen(h->base)) == 0, "%s vs %s",
			      h->symbol, h->base);
	}
}
END_TEST

struct select_case {
	const char *base;
	int version;
	unsigned flags;
	const char *expected; /* NULL: nothing selected */
	bool known;
};

static const struct select_case select_cases[] = {
	/* the legacy 32-bit ABI below 3020, the _v2 one from there on */
	{ "cuMemAlloc", 2000, 0, "cuMemAlloc", true },
	{ "cuMemAlloc", 3010, 0, "cuMemAlloc", true },
	{ "cuMemAlloc", 3020, 0, "cuMemAlloc_v2", true },
	{ "cuMemAlloc", 13000, 0, "cuMemAlloc_v2", true },
	{ "cuMemAlloc", 1000, 0, NULL, true },
	{ "cuMemGetInfo", 12000, 0, "cuMemGetInfo_v2", true },
	{ "cuDeviceTotalMem", 2000, 0, "cuDeviceTotalMem", true },
	{ "cuDeviceTotalMem", 11000, 0, "cuDeviceTotalMem_v2", true },
	/* per-thread default stream: the _ptsz variant where one exists */
	{ "cuMemAllocAsync", 11020, 0, "cuMemAllocAsync", true },
	{ "cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemAllocAsync", true },
	{ "cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocAsync_ptsz", true },
	{ "cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocAsync_ptsz", true },
	{ "cuMemAllocAsync", 11010, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL, true },
	{ "cuMemFreeAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemFreeAsync_ptsz", true },
	{ "cuMemAllocFromPoolAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAllocFromPoolAsync_ptsz", true },
	/* and the legacy one where none exists */
	{ "cuMemAlloc", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAlloc_v2", true },
	/* the door itself */
	{ "cuGetProcAddress", 11030, 0, "cuGetProcAddress", true },
	{ "cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", true },
	{ "cuGetProcAddress", 11020, 0, NULL, true },
	{ "cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2", true },
	{ "cuCtxDestroy", 3020, 0, "cuCtxDestroy", true },
	{ "cuMipmappedArrayCreate", 5000, 0, "cuMipmappedArrayCreate", true },
	{ "cuMemCreate", 10020, 0, "cuMemCreate", true },
	{ "cuMemCreate", 10010, 0, NULL, true },
	/* never ours */
	{ "cuLaunchKernel", 4000, 0, NULL, false },
	{ "cudnnCreate", 13000, 0, NULL, false },
	{ "cublasCreate_v2", 13000, 0, NULL, false },
	{ "cuMemAlloc_v2", 13000, 0, NULL, false }, /* versioned names are not base names */
	{ "", 13000, 0, NULL, false },
	{ NULL, 0, 0, NULL, false },
};

START_TEST(table_select_versions_and_flags)
{
	for (const struct select_case *c = select_cases; c->base; c++) {
		bool known = !c->known;
		const struct cumemcap_hook *h = cumemcap_table_select(c->base, c->version, c->flags, &known);
		ck_assert_msg(known == c->known, "%s@%d flags %u: known %d", c->base, c->version,
			      c->flags, known);
		if (!c->expected)
			ck_assert_msg(h == NULL, "%s@%d flags %u: selected %s", c->base, c->version,
				      c->flags, h->symbol);
		else
			ck_assert_msg(h && strcmp(h->symbol, c->expected) == 0,
				      "%s@%d flags %u: selected %s, expected %s", c->base, c->version,
				      c->flags, h ? h->symbol : "nothing", c->expected);
	}
}
END_TEST

START_TEST(table_by_symbol_only_hooked_names)
{
	static const char *const others[] = { "cudnnCreate", "cublasCreate_v2", "cuLaunchKernel",
					      "cuMemAlloc_v3", "cuMemAllocX", "cu", "", "dlsym",
					      "cumemcap_get_stats", NULL };
	for (const char *const *n = others; *n; n++)
		ck_assert_msg(cumemcap_table_by_symbol(*n) == NULL, "%s is not hooked", *n);
	ck_assert_ptr_null(cumemcap_table_by_symbol(NULL));
	static const char *const ours[] = { "cuMemAlloc_v2", "cuMemAlloc", "cuMemFree_v2",
					    "cuMemGetInfo_v2", "cuDeviceTotalMem_v2",
					    "cuMemAllocAsync_ptsz", "cuMemCreate", "cuMemRelease",
					    "cuArray3DCreate_v2", "cuGetProcAddress_v2",
					    "cuGetProcAddress", NULL };
	for (const char *const *n = ours; *n; n++)
		ck_assert_msg(cumemcap_table_by_symbol(*n) != NULL, "%s must be hooked", *n);
}
END_TEST

/* The real_ pointer of each row is the one the hook forwards to. */
START_TEST(table_real_pointers_are_per_symbol)
{
	for (size_t i = 0; i < cumemcap_hook_count; i++)
		for (size_t j = i + 1; j < cumemcap_hook_count; j++) {
			ck_assert_ptr_ne(cumemcap_hooks[i].real, cumemcap_hooks[j].real);
			ck_assert_ptr_ne(cumemcap_hooks[i].hook, cumemcap_hooks[j].hook);
		}
	ck_assert_ptr_eq(cumemcap_table_by_symbol("cuMemAlloc_v2")->real, (void **)&real_cuMemAlloc_v2);
}
END_TEST

/* by_real: the row whose driver function was handed out, so the door can
 * follow a driver that maps a name past the header's versions to another
 * function (cuGraphInstantiate@12000 is cuGraphInstantiateWithFlags). */
START_TEST(table_by_real_finds_the_row)
{
	static char a, b;
	ck_assert_ptr_null(cumemcap_table_by_real(NULL));
	ck_assert_ptr_null(cumemcap_table_by_real(&a));
	real_cuGraphInstantiateWithFlags = (cuGraphInstantiateWithFlags_fn)(void *)&a;
	real_cuGraphInstantiate_v2 = (cuGraphInstantiate_v2_fn)(void *)&b;
	const struct cumemcap_hook *h = cumemcap_table_by_real(&a);
	ck_assert_ptr_nonnull(h);
	ck_assert_str_eq(h->symbol, "cuGraphInstantiateWithFlags");
	ck_assert_str_eq(cumemcap_table_by_real(&b)->symbol, "cuGraphInstantiate_v2");
	real_cuGraphInstantiateWithFlags = NULL;
	real_cuGraphInstantiate_v2 = NULL;
	ck_assert_ptr_null(cumemcap_table_by_real(&a));
}
END_TEST

TEST_SUITE(table)
{
	Suite *s = suite_create("table");
	ADD_TEST(s, table_every_entry_reachable);
	ADD_TEST(s, table_select_versions_and_flags);
	ADD_TEST(s, table_by_symbol_only_hooked_names);
	ADD_TEST(s, table_real_pointers_are_per_symbol);
	ADD_TEST(s, table_by_real_finds_the_row);
	return s;
}
