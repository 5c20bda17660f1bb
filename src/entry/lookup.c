/* lookup: the two run-time lookups of a driver function, dlsym/dlvsym and
 * cuGetProcAddress, answered from the hook table.
 *
 * dlsym and dlvsym enter through dltramp.S, which asks a route below where
 * to jump. Only hooked names (the table's and the NVML hooks) take the C
 * path: looked up for real, RTLD_NEXT relative to the caller (a wrapper
 * never gets itself as its next function), and swapped for the shim's own
 * function when the answer lies in the CUDA driver or libnvidia-ml. A
 * versioned lookup of libc's dlsym/dlvsym answers the shim's, so a program
 * that defines dlsym still reaches the shim. cuGetProcAddress asks the
 * driver first (its versions, flags, errors and symbolStatus stand), then
 * hands out the hook the table selects for (name, version, flags).
 *
 * Thread safety: the table is immutable; driver state is set up once. */
#include "config.h"

#include <dlfcn.h>

#include "driver/driver.h"
#include "driver/nvml.h"
#include "platform/export.h"
#include "platform/msg.h"
#include "config/policy.h"
#include "entry/table.h"

/* Called from dltramp.S; hidden so the assembly can call them directly. */
__attribute__((visibility("hidden"))) void *cumemcap_dlsym_route(void *handle, const char *name);
__attribute__((visibility("hidden"))) void *cumemcap_dlvsym_route(void *handle, const char *name,
								 const char *version);

/* dltramp.S's entry points (weak: the unit tests link no trampoline). */
__attribute__((weak, visibility("hidden"))) extern char cumemcap_dlsym_entry[];
__attribute__((weak, visibility("hidden"))) extern char cumemcap_dlvsym_entry[];

/* The shim's own function for a table entry. */
static void *hook_of(const struct cumemcap_hook *h)
{
	void *own = cumemcap_driver_own(cumemcap_hook_symbol(h));
	return own ? own : cumemcap_hook_fn(h);
}

/* What a lookup of a hooked name answers: the shim's own function when what
 * was found lies in the CUDA driver or libnvidia-ml. A global lookup that
 * found the shim's export answers what comes after the shim: for a CUDA
 * name nothing without a driver, for an NVML name the hook if NVML's. */
static void *hooked(const char *entry_point, void *handle, const char *name, void *found)
{
	bool global = handle == RTLD_DEFAULT || handle == RTLD_NEXT;
	void *nvml = cumemcap_nvml_hook(name);
	void *own = nvml ? cumemcap_driver_own(name) : hook_of(cumemcap_table_by_symbol(name));
	if (nvml && !own)
		own = nvml;
	bool (*owns)(const void *) = nvml ? cumemcap_nvml_owns : cumemcap_driver_owns;
	void *answer = found;
	if (found && found != own && owns(found)) {
		answer = own;
	} else if (found && global && cumemcap_driver_self(found)) {
		void *next = cumemcap_driver_next(own, name);
		if (nvml)
			answer = next && owns(next) ? own : next;
		else if (!next && !cumemcap_driver_ready())
			answer = NULL; /* no driver: nothing the program could call */
	}
	if (cumemcap_policy()->debug_doors)
		cumemcap_msg("door=%s symbol=%s answer=%s ptr=%p", entry_point, name,
			     answer == NULL ? "null" : answer == own ? "hook" : nvml ? "nvml" : "driver",
			     answer);
	return answer;
}

static void *hooked_dlsym(void *handle, const char *name, const void *caller)
{
	return hooked("dlsym", handle, name,
		      handle == RTLD_NEXT ? cumemcap_driver_next(caller, name) : cumemcap_real_dlsym(handle, name));
}

static void *hooked_dlvsym(void *handle, const char *name, const char *version, const void *caller)
{
	return hooked("dlvsym", handle, name,
		      handle == RTLD_NEXT ? cumemcap_driver_next(caller, name)
					  : cumemcap_real_dlvsym(handle, name, version));
}

/* Without libc's own lookups (never on glibc), dlsym and dlvsym answer NULL. */
CUMEMCAP_DLSYM_SAFE static void *no_lookup(void)
{
	return NULL;
}

CUMEMCAP_DLSYM_SAFE void *cumemcap_dlsym_route(void *handle, const char *name)
{
	if (!cumemcap_driver_libc_ready())
		return (void *)no_lookup;
	if (cumemcap_table_by_symbol(name) || cumemcap_nvml_hook(name))
		return (void *)hooked_dlsym;
	return (void *)cumemcap_real_dlsym;
}

/* dlvsym(handle, "dlsym" or "dlvsym", "GLIBC_..."): the shim's own. */
CUMEMCAP_DLSYM_SAFE static void *self_dlvsym(void *handle, const char *name, const char *version)
{
	return name[2] == 's' ? (void *)cumemcap_dlsym_entry : (void *)cumemcap_dlvsym_entry;
}

CUMEMCAP_DLSYM_SAFE static bool is_glibc_version(const char *v)
{
	static const char glibc[] = "GLIBC_";
	for (size_t i = 0; i < sizeof(glibc) - 1; i++)
		if (!v || v[i] != glibc[i])
			return false;
	return true;
}

CUMEMCAP_DLSYM_SAFE void *cumemcap_dlvsym_route(void *handle, const char *name,
						 const char *version)
{
	if (!cumemcap_driver_libc_ready())
		return (void *)no_lookup;
	if (name && (cumemcap_str_eq(name, "dlsym") || cumemcap_str_eq(name, "dlvsym")) &&
	    is_glibc_version(version))
		return (void *)self_dlvsym;
	if (cumemcap_table_by_symbol(name) || cumemcap_nvml_hook(name))
		return (void *)hooked_dlvsym;
	return (void *)cumemcap_real_dlvsym;
}

/* The driver found `symbol`; hand out the hook the table selects. */
static void answer_lookup(const char *entry_point, const char *symbol, void **pfn, int version,
			  cuuint64_t flags)
{
	const struct cumemcap_hook *h = cumemcap_table_select(symbol, version, flags, NULL);
	/* The driver may map a name to another function (CUDA 12 makes
	 * cuGraphInstantiate mean cuGraphInstantiateWithFlags): when it handed
	 * out another hooked entry's real function, that entry's hook fits. */
	void *real = h ? *cumemcap_hook_real(h) : NULL;
	const struct cumemcap_hook *same =
		real && *pfn != real ? cumemcap_table_by_real(*pfn) : NULL;
	if (same)
		h = same;
	if (h)
		*pfn = hook_of(h);
	if (cumemcap_policy()->debug_doors)
		cumemcap_msg("door=%s symbol=%s version=%d flags=%llu answer=%s%s ptr=%p", entry_point,
			     symbol, version, (unsigned long long)flags, h ? "hook:" : "driver",
			     h ? cumemcap_hook_symbol(h) : "", *pfn);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
						    cuuint64_t flags,
						    CUdriverProcAddressQueryResult *symbolStatus)
{
	if (!cumemcap_driver_ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r;
	if (real_cuGetProcAddress_v2) {
		r = real_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
	} else {
		/* A driver older than 12.0 has only the four-argument call. */
		r = real_cuGetProcAddress(symbol, pfn, cudaVersion, flags);
		if (symbolStatus && r == CUDA_SUCCESS)
			*symbolStatus = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS
					     : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	}
	if (r == CUDA_SUCCESS && pfn && *pfn && symbol)
		answer_lookup("cuGetProcAddress_v2", symbol, pfn, cudaVersion, flags);
	else if (cumemcap_policy()->debug_doors)
		cumemcap_msg("door=cuGetProcAddress_v2 symbol=%s version=%d flags=%llu answer=%s ptr=%p",
			     symbol ? symbol : "(null)", cudaVersion, (unsigned long long)flags,
			     r == CUDA_SUCCESS ? "null" : "error", pfn ? *pfn : NULL);
	return r;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
						 cuuint64_t flags)
{
	if (!cumemcap_driver_ready())
		return CUDA_ERROR_NOT_INITIALIZED;
	CUresult r = real_cuGetProcAddress
			     ? real_cuGetProcAddress(symbol, pfn, cudaVersion, flags)
			     : real_cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
	if (r == CUDA_SUCCESS && pfn && *pfn && symbol)
		answer_lookup("cuGetProcAddress", symbol, pfn, cudaVersion, flags);
	return r;
}
