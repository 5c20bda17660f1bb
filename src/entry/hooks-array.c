/* hooks-array: the array entry points — cuArrayCreate, cuArray3DCreate
 * (legacy and _v2 descriptors), cuMipmappedArrayCreate and their destroys.
 * Arrays are opaque to the shim: each is charged an estimate of its size,
 * the way hooks.c charges linear memory (account.h), and released by its
 * handle. Every exported function has the driver's exact name and
 * prototype and is thin: past NEED and SECTION (hooks.h), one line that
 * calls its family's static helper with the twin's real entry point, so a
 * legacy twin makes every check its _v2 sibling makes (the deferred-
 * mapping one included). The driver's return code reaches the program
 * unchanged, except a refusal at the limit, CUDA_ERROR_OUT_OF_MEMORY.
 *
 * Thread safety: no state here; see account.h. */
#include "account/account.h"
#include "driver/driver.h"
#include "platform/export.h"
#include "entry/hooks.h"

/* Arrays are opaque: estimate Width x Height x Depth x channels x element
 * size, rounded up to 512 bytes (the fake driver counts the same way). */
static uint64_t format_bytes(CUarray_format f)
{
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 16; /* packed, compressed or new formats: stay on the safe side */
	}
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, uint64_t channels, CUarray_format f)
{
	unsigned __int128 n = (unsigned __int128)w * (h ? h : 1) * (d ? d : 1) * channels * format_bytes(f);
	n = (n + 511) / 512 * 512;
	return n > UINT64_MAX ? UINT64_MAX : (uint64_t)n;
}

/* Charge an array of `bytes` (kind: array or mipmapped array), call
 * `create` with its arguments, settle on its handle. A deferred-mapping
 * array holds no memory until it is mapped: `deferred` skips the charge. */
#define ARRAY_CREATE(entry_point, handle_kind, bytes, deferred, phandle, create)                   \
	do {                                                                                       \
		if (deferred)                                                                      \
			return (create);                                                           \
		struct cumemcap_charge c_;                                                         \
		CUresult r_ = cumemcap_account_charge_begin(&c_, entry_point, -1,                  \
							    CUMEMCAP_KIND_array, bytes);           \
		if (r_ != CUDA_SUCCESS)                                                            \
			return r_;                                                                 \
		r_ = (create);                                                                     \
		uint64_t key_ = r_ == CUDA_SUCCESS ? (uint64_t)(uintptr_t)*(phandle) : 0;          \
		return cumemcap_account_charge_finish(&c_, r_, handle_kind, key_);                 \
	} while (0)

/* The legacy descriptors in the _v2 layouts, and the legacy entry points
 * in the _v2 prototypes (every legacy field fits back). A NULL descriptor
 * stays NULL. */
static const CUDA_ARRAY_DESCRIPTOR *widen_2d(const CUDA_ARRAY_DESCRIPTOR_v1 *d, CUDA_ARRAY_DESCRIPTOR *w)
{
	if (!d)
		return NULL;
	*w = (CUDA_ARRAY_DESCRIPTOR){ .Width = d->Width, .Height = d->Height, .Format = d->Format,
				      .NumChannels = d->NumChannels };
	return w;
}

static const CUDA_ARRAY3D_DESCRIPTOR *widen_3d(const CUDA_ARRAY3D_DESCRIPTOR_v1 *d,
					       CUDA_ARRAY3D_DESCRIPTOR *w)
{
	if (!d)
		return NULL;
	*w = (CUDA_ARRAY3D_DESCRIPTOR){ .Width = d->Width, .Height = d->Height, .Depth = d->Depth,
					.Format = d->Format, .NumChannels = d->NumChannels,
					.Flags = d->Flags };
	return w;
}

static CUresult CUDAAPI array_create_v1(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
	CUDA_ARRAY_DESCRIPTOR_v1 n;
	if (d)
		n = (CUDA_ARRAY_DESCRIPTOR_v1){ .Width = (unsigned int)d->Width,
						.Height = (unsigned int)d->Height, .Format = d->Format,
						.NumChannels = d->NumChannels };
	return real_cuArrayCreate(pHandle, d ? &n : NULL);
}

static CUresult CUDAAPI array3d_create_v1(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	CUDA_ARRAY3D_DESCRIPTOR_v1 n;
	if (d)
		n = (CUDA_ARRAY3D_DESCRIPTOR_v1){ .Width = (unsigned int)d->Width,
						  .Height = (unsigned int)d->Height,
						  .Depth = (unsigned int)d->Depth, .Format = d->Format,
						  .NumChannels = d->NumChannels, .Flags = d->Flags };
	return real_cuArray3DCreate(pHandle, d ? &n : NULL);
}

/* cuArrayCreate, either descriptor. */
static CUresult array_2d(const char *entry_point, PFN_cuArrayCreate_v3020 fn, CUarray *pHandle,
			 const CUDA_ARRAY_DESCRIPTOR *d)
{
	ARRAY_CREATE(entry_point, CUMEMCAP_HANDLE_ARRAY,
		     array_bytes(d->Width, d->Height, 1, d->NumChannels, d->Format), !pHandle || !d,
		     pHandle, fn(pHandle, d));
}

/* cuArray3DCreate, either descriptor. */
static CUresult array_3d(const char *entry_point, PFN_cuArray3DCreate_v3020 fn, CUarray *pHandle,
			 const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	ARRAY_CREATE(entry_point, CUMEMCAP_HANDLE_ARRAY,
		     array_bytes(d->Width, d->Height, d->Depth, d->NumChannels, d->Format),
		     !pHandle || !d || (d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING), pHandle,
		     fn(pHandle, d));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle,
						 const CUDA_ARRAY_DESCRIPTOR *d)
{
	NEED(cuArrayCreate_v2);
	HOLD_DEATH_LOCK();
	return array_2d(__func__, real_cuArrayCreate_v2, pHandle, d);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	NEED(cuArrayCreate);
	HOLD_DEATH_LOCK();
	return array_2d(__func__, array_create_v1, pHandle, widen_2d(d, &(CUDA_ARRAY_DESCRIPTOR){ 0 }));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle,
						   const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	NEED(cuArray3DCreate_v2);
	HOLD_DEATH_LOCK();
	return array_3d(__func__, real_cuArray3DCreate_v2, pHandle, d);
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray *pHandle,
						const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	NEED(cuArray3DCreate);
	HOLD_DEATH_LOCK();
	return array_3d(__func__, array3d_create_v1, pHandle,
			widen_3d(d, &(CUDA_ARRAY3D_DESCRIPTOR){ 0 }));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
	NEED(cuArrayDestroy);
	HOLD_DEATH_LOCK();
	struct cumemcap_block b;
	bool found = cumemcap_account_release_take(CUMEMCAP_HANDLE_ARRAY, (uint64_t)(uintptr_t)hArray, &b);
	return cumemcap_account_release_settle(found, &b, real_cuArrayDestroy(hArray));
}

/* Every level of a mipmapped array, each halved from the one above. */
static uint64_t mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels)
{
	uint64_t bytes = 0, w = d->Width, h = d->Height, dep = d->Depth;
	for (unsigned int l = 0; l < levels && bytes != UINT64_MAX; l++) {
		uint64_t level = array_bytes(w, h, dep, d->NumChannels, d->Format);
		bytes = level > UINT64_MAX - bytes ? UINT64_MAX : bytes + level;
		w = w > 1 ? w / 2 : 1;
		h = h > 1 ? h / 2 : h;
		dep = dep > 1 ? dep / 2 : dep;
	}
	return bytes;
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
						       const CUDA_ARRAY3D_DESCRIPTOR *d,
						       unsigned int numMipmapLevels)
{
	NEED(cuMipmappedArrayCreate);
	HOLD_DEATH_LOCK();
	ARRAY_CREATE(__func__, CUMEMCAP_HANDLE_MIPMAP, mipmap_bytes(d, numMipmapLevels),
		     !pHandle || !d || (d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING), pHandle,
		     real_cuMipmappedArrayCreate(pHandle, d, numMipmapLevels));
}

CUMEMCAP_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	NEED(cuMipmappedArrayDestroy);
	HOLD_DEATH_LOCK();
	struct cumemcap_block b;
	bool found = cumemcap_account_release_take(CUMEMCAP_HANDLE_MIPMAP,
					   (uint64_t)(uintptr_t)hMipmappedArray, &b);
	return cumemcap_account_release_settle(found, &b, real_cuMipmappedArrayDestroy(hMipmappedArray));
}

