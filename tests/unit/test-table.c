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
			cumemcap_table_select(cumemcap_hook_base(h), h->version, flags_for(h), &known);
		ck_assert_msg(known, "%s: base %s unknown", cumemcap_hook_symbol(h), cumemcap_hook_base(h));
		ck_assert_msg(sel == h, "%s@%d: selected %s", cumemcap_hook_base(h), h->version,
			      sel ? cumemcap_hook_symbol(sel) : "nothing");
		ck_assert_ptr_eq(cumemcap_table_by_symbol(cumemcap_hook_symbol(h)), h);
		ck_assert_ptr_nonnull(cumemcap_hook_fn(h));
		ck_assert_ptr_nonnull(cumemcap_hook_real(h));
		/* The exported name is the base plus a suffix, never another function. */
		ck_assert_msg(strncmp(cumemcap_hook_symbol(h), cumemcap_hook_base(h), strlen(cumemcap_hook_base(h))) == 0, "%s vs %s",
			      cumemcap_hook_symbol(h), cumemcap_hook_base(h));
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
				      c->flags, cumemcap_hook_symbol(h));
		else
			ck_assert_msg(h && strcmp(cumemcap_hook_symbol(h), c->expected) == 0,
				      "%s@%d flags %u: selected %s, expected %s", c->base, c->version,
				      c->flags, h ? cumemcap_hook_symbol(h) : "nothing", c->expected);
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
			ck_assert_ptr_ne(cumemcap_hook_real(&cumemcap_hooks[i]), cumemcap_hook_real(&cumemcap_hooks[j]));
			ck_assert_ptr_ne(cumemcap_hook_fn(&cumemcap_hooks[i]), cumemcap_hook_fn(&cumemcap_hooks[j]));
		}
	const struct cumemcap_hook *h = cumemcap_table_by_symbol("cuMemAlloc_v2");
	ck_assert_ptr_eq(cumemcap_hook_real(h), (void **)&real_cuMemAlloc_v2);
	ck_assert_ptr_eq(cumemcap_hook_fn(h), (void *)cuMemAlloc_v2);
	h = cumemcap_table_by_symbol("cuMemAllocAsync_ptsz");
	ck_assert_ptr_eq(cumemcap_hook_real(h), (void **)&real_cuMemAllocAsync_ptsz);
	ck_assert_ptr_eq(cumemcap_hook_fn(h), (void *)cuMemAllocAsync_ptsz);
	ck_assert_str_eq(cumemcap_hook_base(h), "cuMemAllocAsync");
	ck_assert_int_eq(h->version, 11020);
	/* The last row's names end the block. */
	h = &cumemcap_hooks[cumemcap_hook_count - 1];
	ck_assert_ptr_eq(cumemcap_hook_base(h) + strlen(cumemcap_hook_base(h)) + 1,
			 (const char *)&cumemcap_hook_names + sizeof(cumemcap_hook_names));
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
	ck_assert_str_eq(cumemcap_hook_symbol(h), "cuGraphInstantiateWithFlags");
	ck_assert_str_eq(cumemcap_hook_symbol(cumemcap_table_by_real(&b)), "cuGraphInstantiate_v2");
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
