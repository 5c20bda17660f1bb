/* fake-procaddr: cuGetProcAddress / cuGetProcAddress_v2 and cuGetExportTable.
 *
 * The lookup table is FAKE_ENTRY_POINTS (fake-entries.h): every exported
 * entry point with the base name and CUDA version of its PFN typedef in
 * cudaTypedefs.h. Rules (cuda.h): among the rows of the base name with
 * version <= cudaVersion, take the highest version; with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM prefer a _ptds/_ptsz row
 * (highest version <= cudaVersion), else fall back to the default one.
 * cuGetProcAddress_v2: not found -> CUDA_SUCCESS, NULL,
 * CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND; only newer versions ->
 * CUDA_SUCCESS, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT; cudaVersion
 * above the driver's, NULL symbol/pfn, unknown flags -> CUDA_ERROR_INVALID_VALUE.
 * The 4-argument cuGetProcAddress (the CUDA 11.3-11.8 ABI) reports both
 * misses as CUDA_ERROR_NOT_FOUND with *pfn = NULL, as documented for it.
 * Both work before cuInit.
 *
 * Thread safety: the table is constant; only the call counters change.
 */
#include "fake-internal.h"
#include "fake-extra.h" /* declarations of the GL and profiler entry points */

#include <string.h>

struct proc_row {
	const char *base;
	int version;
	bool per_thread;
	void *fn;
};

#define FAKE_PROC_ROW(b, ver, sfx, f) {#b, ver, sizeof(#sfx) > 1, (void *)f},
static const struct proc_row table[] = {FAKE_ENTRY_POINTS(FAKE_PROC_ROW)};
#undef FAKE_PROC_ROW

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
		       CUdriverProcAddressQueryResult *status)
{
	fake_config_load();
	if (!symbol || !pfn || cudaVersion < 0 || cudaVersion > fake_cfg.driver_version ||
	    flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
		return CUDA_ERROR_INVALID_VALUE;
	const struct proc_row *best = NULL, *best_pt = NULL;
	bool found = false;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		const struct proc_row *r = &table[i];
		if (strcmp(r->base, symbol) != 0)
			continue;
		found = true;
		if (r->version > cudaVersion)
			continue;
		const struct proc_row **slot = r->per_thread ? &best_pt : &best;
		if (!*slot || r->version > (*slot)->version)
			*slot = r;
	}
	if (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && best_pt)
		best = best_pt;
	*pfn = best ? best->fn : NULL;
	*status = best ? CU_GET_PROC_ADDRESS_SUCCESS
		  : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
			  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
				      CUdriverProcAddressQueryResult *symbolStatus)
{
	COUNT(cuGetProcAddress_v2);
	CUdriverProcAddressQueryResult st;
	CUresult r = lookup(symbol, pfn, cudaVersion, flags, &st);
	if (!r && symbolStatus)
		*symbolStatus = st;
	return r;
}

FAKE_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	COUNT(cuGetProcAddress);
	CUdriverProcAddressQueryResult st;
	CUresult r = lookup(symbol, pfn, cudaVersion, flags, &st);
	if (!r && st != CU_GET_PROC_ADDRESS_SUCCESS)
		r = CUDA_ERROR_NOT_FOUND;
	return r;
}

/* NVIDIA's private tables: the fake has none (libcudart stops here). */
FAKE_API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	COUNT(cuGetExportTable);
	if (ppExportTable)
		*ppExportTable = NULL;
	(void)pExportTableId;
	return CUDA_ERROR_NOT_SUPPORTED;
}
