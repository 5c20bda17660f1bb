/* vmm: how long the memory of a cuMemCreate allocation is charged: as
 * CUDA frees it, until every reference to it is released (its handle,
 * each retained handle, each import in this process) *and* every mapping
 * of it unmapped, in either order. The records: each allocation (in the
 * track map under a key of its own, never a handle value), the handle
 * values that reference it with their counts, and its mappings. A handle
 * the shim did not see made is not charged.
 *
 * Each call follows take -> driver -> settle: what the call would change
 * is taken before the driver runs and put back if it refuses; an
 * allocation with a call in flight is never ended, the last settle ends it.
 *
 * Thread safety: one mutex over the records, never held across a driver
 * call; the charge is given back outside it. Fork: held across fork(),
 * and the child starts with empty records. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "account/account.h"
#include "platform/cuda-api.h"

struct cumemcap_vmm_alloc;
struct cumemcap_vmm_ref;
struct cumemcap_vmm_map;

/* One VMM call in flight, in the caller's frame. */
struct cumemcap_vmm_call {
	struct cumemcap_vmm_alloc *alloc; /* NULL: nothing of ours */
	struct cumemcap_vmm_ref *ref;     /* a reference taken, or one to add */
	struct cumemcap_vmm_map *maps;    /* mappings taken, or the one to add */
	uint64_t handle;
};

/* cuMemCreate returned r after cumemcap_account_charge_begin(c): on
 * success record the allocation with its first reference. Returns r. */
CUresult cumemcap_vmm_created(struct cumemcap_charge *c, CUresult r, CUmemGenericAllocationHandle handle);

/* cuMemRelease(handle). */
void cumemcap_vmm_release_take(struct cumemcap_vmm_call *v, CUmemGenericAllocationHandle handle);
CUresult cumemcap_vmm_release_settle(struct cumemcap_vmm_call *v, CUresult r);

/* cuMemMap(ptr, size, ..., handle, ...). */
void cumemcap_vmm_map_take(struct cumemcap_vmm_call *v, CUmemGenericAllocationHandle handle);
CUresult cumemcap_vmm_map_settle(struct cumemcap_vmm_call *v, CUresult r, CUdeviceptr ptr, size_t size);

/* cuMemUnmap(ptr, size): takes the mappings wholly inside the range. */
void cumemcap_vmm_unmap_take(struct cumemcap_vmm_call *v, CUdeviceptr ptr, size_t size);
CUresult cumemcap_vmm_unmap_settle(struct cumemcap_vmm_call *v, CUresult r);

/* cuMemRetainAllocationHandle(&handle, addr): one more reference to the one mapped at addr. */
void cumemcap_vmm_retain_take(struct cumemcap_vmm_call *v, const void *addr);

/* cuMemExportToShareableHandle gave fd for handle: an import of it is one more reference. */
void cumemcap_vmm_exported(CUmemGenericAllocationHandle handle, int fd);

/* cuMemImportFromShareableHandle(&handle, fd) (fd -1: another handle
 * type). The handle references our own allocation when fd is the same open
 * file as one of its exported descriptors still open, or the driver returns
 * a handle value that already references it; else it stays unknown. */
void cumemcap_vmm_import_take(struct cumemcap_vmm_call *v, int fd);

/* After cuMemRetainAllocationHandle or cuMemImportFromShareableHandle
 * returned r and handle: one more reference to the allocation the take
 * found, or to the one handle already names. Returns r. */
CUresult cumemcap_vmm_new_ref_settle(struct cumemcap_vmm_call *v, CUresult r, CUmemGenericAllocationHandle handle);

/* Fork: hold the records across fork(); the child's are empty. */
void cumemcap_vmm_lock(void);
void cumemcap_vmm_unlock(void);
void cumemcap_vmm_fork_child(void);
