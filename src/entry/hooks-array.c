/* hooks-array: cuArrayCreate, cuArray3DCreate (legacy and _v2
 * descriptors), cuMipmappedArrayCreate and their destroys. Each array is
 * charged an estimate of its size and released by its handle.
 *
 * Thread safety: no state here; see account.h. */
#include "entry/hooks.h"

/* Arrays are opaque: Width x Height x Depth x channels x element size,
 * rounded up to 512 bytes (as the fake driver counts). */
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

/* cuArrayCreate and cuArray3DCreate, either descriptor. A deferred-mapping
 * array holds no memory until it is mapped: it is not charged. */
#define ARRAY(name, descriptor, depth, deferred)                                                   \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(CUarray *pHandle, const descriptor *d)               \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		if (!pHandle || !d || (deferred))                                                  \
			return real_##name(pHandle, d);                                            \
		CHARGE(c, -1, CUMEMCAP_KIND_array,                                                 \
		       array_bytes(d->Width, d->Height, depth, d->NumChannels, d->Format));        \
		CUresult r = real_##name(pHandle, d);                                              \
		uint64_t key = r == CUDA_SUCCESS ? (uintptr_t)*pHandle : 0;                        \
		return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_ARRAY, key);          \
	}
ARRAY(cuArrayCreate_v2, CUDA_ARRAY_DESCRIPTOR, 1, false)
ARRAY(cuArrayCreate, CUDA_ARRAY_DESCRIPTOR_v1, 1, false)
ARRAY(cuArray3DCreate_v2, CUDA_ARRAY3D_DESCRIPTOR, d->Depth, d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING)
ARRAY(cuArray3DCreate, CUDA_ARRAY3D_DESCRIPTOR_v1, d->Depth, d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING)

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
	if (!pHandle || !d || (d->Flags & CUDA_ARRAY3D_DEFERRED_MAPPING))
		return real_cuMipmappedArrayCreate(pHandle, d, numMipmapLevels);
	CHARGE(c, -1, CUMEMCAP_KIND_array, mipmap_bytes(d, numMipmapLevels));
	CUresult r = real_cuMipmappedArrayCreate(pHandle, d, numMipmapLevels);
	return cumemcap_account_charge_finish(&c, r, CUMEMCAP_HANDLE_MIPMAP,
					      r == CUDA_SUCCESS ? (uintptr_t)*pHandle : 0);
}

#define DESTROY(name, T, handle_kind)                                                              \
	CUMEMCAP_EXPORT CUresult CUDAAPI name(T handle)                                            \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		struct cumemcap_block b;                                                           \
		bool found = cumemcap_account_release_take(handle_kind, (uintptr_t)handle, &b);    \
		return cumemcap_account_release_settle(found, &b, real_##name(handle));            \
	}
DESTROY(cuArrayDestroy, CUarray, CUMEMCAP_HANDLE_ARRAY)
DESTROY(cuMipmappedArrayDestroy, CUmipmappedArray, CUMEMCAP_HANDLE_MIPMAP)
