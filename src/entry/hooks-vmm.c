/* hooks-vmm: the virtual memory management entry points that make,
 * reference, map and free physical memory. cuMemCreate charges the
 * allocation until every reference is released and every mapping unmapped
 * (account/vmm.h); a handle or address the shim does not know is the
 * driver's to answer.
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
	struct cumemcap_charge c;
	CUresult r = cumemcap_account_charge_begin(&c, __func__, prop->location.id, CUMEMCAP_KIND_vmm, size);
	if (r != CUDA_SUCCESS)
		return r;
	r = real_cuMemCreate(handle, size, prop, flags);
	return cumemcap_vmm_created(&c, r, r == CUDA_SUCCESS ? *handle : 0);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	NEED(cuMemRelease);
	HOLD_DEATH_LOCK();
	struct cumemcap_vmm_call v;
	cumemcap_vmm_release_take(&v, handle);
	return cumemcap_vmm_release_settle(&v, real_cuMemRelease(handle));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
					 CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	NEED(cuMemMap);
	HOLD_DEATH_LOCK();
	struct cumemcap_vmm_call v;
	cumemcap_vmm_map_take(&v, handle);
	return cumemcap_vmm_map_settle(&v, real_cuMemMap(ptr, size, offset, handle, flags), ptr, size);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	NEED(cuMemUnmap);
	HOLD_DEATH_LOCK();
	struct cumemcap_vmm_call v;
	cumemcap_vmm_unmap_take(&v, ptr, size);
	return cumemcap_vmm_unmap_settle(&v, real_cuMemUnmap(ptr, size));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	NEED(cuMemRetainAllocationHandle);
	HOLD_DEATH_LOCK();
	struct cumemcap_vmm_call v;
	cumemcap_vmm_retain_take(&v, addr);
	CUresult r = real_cuMemRetainAllocationHandle(handle, addr);
	return cumemcap_vmm_new_ref_settle(&v, r, r == CUDA_SUCCESS && handle ? *handle : 0);
}

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

CUMEMCAP_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
							       void *osHandle,
							       CUmemAllocationHandleType shHandleType)
{
	NEED(cuMemImportFromShareableHandle);
	HOLD_DEATH_LOCK();
	struct cumemcap_vmm_call v;
	cumemcap_vmm_import_take(&v, shHandleType == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
				     ? (int)(intptr_t)osHandle : -1);
	CUresult r = real_cuMemImportFromShareableHandle(handle, osHandle, shHandleType);
	return cumemcap_vmm_new_ref_settle(&v, r, r == CUDA_SUCCESS && handle ? *handle : 0);
}
