/* hooks-vmm: the virtual memory management entry points that make,
 * reference, map and free physical memory. cuMemCreate charges until every
 * reference is released and every mapping unmapped (account/vmm.h); a
 * handle or address the shim does not know is the driver's to answer.
 *
 * Thread safety: see vmm.h. */
#include "account/vmm.h"
#include "entry/hooks.h"

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
					    const CUmemAllocationProp *prop, unsigned long long flags)
{
	NEED(cuMemCreate);
	HOLD_DEATH_LOCK();
	if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return real_cuMemCreate(handle, size, prop, flags);
	CHARGE(c, prop->location.id, CUMEMCAP_KIND_vmm, size);
	CUresult r = real_cuMemCreate(handle, size, prop, flags);
	return cumemcap_vmm_created(&c, r, r == CUDA_SUCCESS ? *handle : 0);
}

/* An entry point over vmm.h's take -> driver -> settle; `take`, `call` and
 * `settle` share the call's state `v`, and `settle` sees the answer `r`. */
#define TAKE_SETTLE(name, params, take, call, settle)                                              \
	CUMEMCAP_EXPORT CUresult CUDAAPI name params                                               \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		struct cumemcap_vmm_call v;                                                        \
		take;                                                                              \
		CUresult r = call;                                                                 \
		return settle;                                                                     \
	}
TAKE_SETTLE(cuMemRelease, (CUmemGenericAllocationHandle handle),
	    cumemcap_vmm_release_take(&v, handle), real_cuMemRelease(handle),
	    cumemcap_vmm_release_settle(&v, r))
TAKE_SETTLE(cuMemMap,
	    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
	     unsigned long long flags),
	    cumemcap_vmm_map_take(&v, handle), real_cuMemMap(ptr, size, offset, handle, flags),
	    cumemcap_vmm_map_settle(&v, r, ptr, size))
TAKE_SETTLE(cuMemUnmap, (CUdeviceptr ptr, size_t size), cumemcap_vmm_unmap_take(&v, ptr, size),
	    real_cuMemUnmap(ptr, size), cumemcap_vmm_unmap_settle(&v, r))
TAKE_SETTLE(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *handle, void *addr),
	    cumemcap_vmm_retain_take(&v, addr), real_cuMemRetainAllocationHandle(handle, addr),
	    cumemcap_vmm_new_ref_settle(&v, r, r == CUDA_SUCCESS && handle ? *handle : 0))
TAKE_SETTLE(cuMemImportFromShareableHandle,
	    (CUmemGenericAllocationHandle *handle, void *osHandle,
	     CUmemAllocationHandleType shHandleType),
	    cumemcap_vmm_import_take(&v, shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
						 ? (int)(intptr_t)osHandle : -1),
	    real_cuMemImportFromShareableHandle(handle, osHandle, shHandleType),
	    cumemcap_vmm_new_ref_settle(&v, r, r == CUDA_SUCCESS && handle ? *handle : 0))

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle,
							     CUmemGenericAllocationHandle handle,
							     CUmemAllocationHandleType handleType,
							     unsigned long long flags)
{
	NEED(cuMemExportToShareableHandle);
	HOLD_DEATH_LOCK();
	CUresult r = real_cuMemExportToShareableHandle(shareableHandle, handle, handleType, flags);
	if (r == CUDA_SUCCESS && handleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		cumemcap_vmm_exported(handle, *(int *)shareableHandle);
	return r;
}
