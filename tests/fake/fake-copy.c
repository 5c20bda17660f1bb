/* fake-copy: 2D and 3D copies (cuMemcpy2D*, cuMemcpy3D*) between host and
 * host-backed device memory, row by row, as the stream operations of
 * fake-stream.c.
 *
 * Each side is host, device or unified memory (the registry decides, as
 * unified addressing does); a device side must lie inside one allocation the
 * fake made, from its first byte to the last byte of its last row, else
 * CUDA_ERROR_INVALID_VALUE. Arrays are not backed by memory in the fake
 * (fake-vmm.c), so a copy to or from an array is CUDA_ERROR_NOT_SUPPORTED.
 * A pitch below X + WidthInBytes (with more than one row) or above
 * CU_DEVICE_ATTRIBUTE_MAX_PITCH is CUDA_ERROR_INVALID_VALUE.
 *
 * Synchronous forms run on the legacy (or per-thread) stream and return when
 * done. Async forms enqueue; a pageable host source is staged at the call, a
 * pageable host destination makes the call wait, as in fake-mem.c.
 *
 * Thread safety: checks under fake_lock; the copy runs on the stream's
 * worker (or in the caller for the legacy stream) without it.
 */
#include "fake-extra.h"

#include <stdlib.h>
#include <string.h>

#define MAX_PITCH ((size_t)2147483647)

struct plan {
	unsigned char *dst;
	const unsigned char *src;
	size_t dpitch, dslice, spitch, sslice;
	size_t w, h, d;
	unsigned char staged[]; /* staged pageable source, when any */
};

static void run_plan(void *arg)
{
	const struct plan *p = arg;
	for (size_t z = 0; z < p->d; z++)
		for (size_t y = 0; y < p->h; y++)
			memmove(p->dst + z * p->dslice + y * p->dpitch, p->src + z * p->sslice + y * p->spitch, p->w);
}

struct side {
	uintptr_t start; /* first byte copied */
	size_t pitch, slice;
	bool host, pinned;
};

enum mode { SYNC, SYNC_PT, ASYNC, ASYNC_PT };

/* Resolve one side of a copy (lock held). */
static CUresult resolve_side(struct side *s, CUmemorytype type, const void *host, CUdeviceptr dev, CUarray array,
			     size_t x, size_t y, size_t z, size_t pitch, size_t height, size_t w, size_t h, size_t d,
			     bool write)
{
	uintptr_t base;
	switch (type) {
	case CU_MEMORYTYPE_HOST:
		base = (uintptr_t)host;
		s->host = true;
		break;
	case CU_MEMORYTYPE_DEVICE:
		base = dev;
		s->host = false;
		break;
	case CU_MEMORYTYPE_UNIFIED:
		base = dev;
		s->host = !fake_reg_find(dev);
		break;
	case CU_MEMORYTYPE_ARRAY:
		return array ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	if (!base || pitch > MAX_PITCH || (h > 1 && pitch < x + w) || (d > 1 && height < y + h))
		return CUDA_ERROR_INVALID_VALUE;
	size_t slice, off, span, t;
	if (__builtin_mul_overflow(pitch, height, &slice) ||
	    __builtin_mul_overflow(z, slice, &off) || __builtin_mul_overflow(y, pitch, &t) ||
	    __builtin_add_overflow(off, t, &off) || __builtin_add_overflow(off, x, &off) ||
	    __builtin_mul_overflow(d - 1, slice, &span) || __builtin_mul_overflow(h - 1, pitch, &t) ||
	    __builtin_add_overflow(span, t, &span) || __builtin_add_overflow(span, w, &span) ||
	    base > UINTPTR_MAX - off || base + off > UINTPTR_MAX - span)
		return CUDA_ERROR_INVALID_VALUE;
	s->start = base + off;
	s->pitch = pitch;
	s->slice = slice;
	if (s->host) {
		struct fake_alloc *a = fake_reg_find(s->start);
		s->pinned = (a && a->kind == FAKE_K_HOST) || fake_host_registered(s->start, span);
		return CUDA_SUCCESS;
	}
	struct fake_alloc *a = fake_reg_find(s->start);
	if (!a || s->start + span > a->base + a->size || a->kind == FAKE_K_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	if (a->kind == FAKE_K_VMM) {
		unsigned need = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
		if ((a->access & need) != need)
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult copy3d(const CUDA_MEMCPY3D *c, CUstream h, enum mode m)
{
	REQUIRE_INIT();
	if (!c || c->reserved0 || c->reserved1 || c->srcLOD || c->dstLOD)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s = NULL;
	CUresult r;
	if (m == ASYNC || m == ASYNC_PT) {
		r = fake_stream_lookup(h, m == ASYNC_PT, &ctx, &s);
	} else {
		r = fake_ctx_require(&ctx);
		if (!r && m == SYNC_PT)
			r = fake_stream_resolve(NULL, true, ctx, &s);
	}
	size_t w = c->WidthInBytes, hh = c->Height, d = c->Depth;
	if (r || !w || !hh || !d)
		goto out;
	struct side src, dst;
	r = resolve_side(&src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes, c->srcY,
			 c->srcZ, c->srcPitch, c->srcHeight, w, hh, d, false);
	if (!r)
		r = resolve_side(&dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
				 c->dstY, c->dstZ, c->dstPitch, c->dstHeight, w, hh, d, true);
	if (r)
		goto out;
	bool async = m == ASYNC || m == ASYNC_PT;
	bool stage = async && s && src.host && !src.pinned;
	size_t staged = 0;
	if (stage && (__builtin_mul_overflow(w, hh, &staged) || __builtin_mul_overflow(staged, d, &staged))) {
		r = CUDA_ERROR_INVALID_VALUE;
		goto out;
	}
	struct plan *p = malloc(sizeof *p + staged);
	struct fake_op *op = p ? calloc(1, sizeof *op) : NULL;
	if (!op) {
		free(p);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	*p = (struct plan){
		.dst = (unsigned char *)dst.start, .src = (const unsigned char *)src.start,
		.dpitch = dst.pitch, .dslice = dst.slice, .spitch = src.pitch, .sslice = src.slice,
		.w = w, .h = hh, .d = d,
	};
	if (stage) {
		struct plan packed = {.dst = p->staged, .src = p->src, .dpitch = w, .dslice = w * hh,
				      .spitch = src.pitch, .sslice = src.slice, .w = w, .h = hh, .d = d};
		run_plan(&packed);
		p->src = p->staged;
		p->spitch = w;
		p->sslice = w * hh;
	}
	op->kind = FAKE_OP_HOSTFN;
	op->fn = run_plan;
	op->user = p;
	op->owned = p;
	bool wait = !async || (dst.host && !dst.pinned);
	fake_stream_submit(ctx, s, op, wait);
out:
	pthread_mutex_unlock(&fake_lock);
	return r;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, CUstream h, enum mode m)
{
	if (!c)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	CUDA_MEMCPY3D t = {
		.srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcMemoryType = c->srcMemoryType,
		.srcHost = c->srcHost, .srcDevice = c->srcDevice, .srcArray = c->srcArray,
		.srcPitch = c->srcPitch, .srcHeight = c->srcY + c->Height,
		.dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstMemoryType = c->dstMemoryType,
		.dstHost = c->dstHost, .dstDevice = c->dstDevice, .dstArray = c->dstArray,
		.dstPitch = c->dstPitch, .dstHeight = c->dstY + c->Height,
		.WidthInBytes = c->WidthInBytes, .Height = c->Height, .Depth = 1,
	};
	return copy3d(&t, h, m);
}

FAKE_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
	COUNT(cuMemcpy2D_v2);
	return copy2d(pCopy, NULL, SYNC);
}

FAKE_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
	COUNT(cuMemcpy2D_v2_ptds);
	return copy2d(pCopy, NULL, SYNC_PT);
}

FAKE_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
	COUNT(cuMemcpy2DUnaligned_v2);
	return copy2d(pCopy, NULL, SYNC);
}

FAKE_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
	COUNT(cuMemcpy2DUnaligned_v2_ptds);
	return copy2d(pCopy, NULL, SYNC_PT);
}

FAKE_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
	COUNT(cuMemcpy2DAsync_v2);
	return copy2d(pCopy, hStream, ASYNC);
}

FAKE_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
	COUNT(cuMemcpy2DAsync_v2_ptsz);
	return copy2d(pCopy, hStream, ASYNC_PT);
}

FAKE_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
	COUNT(cuMemcpy3D_v2);
	return copy3d(pCopy, NULL, SYNC);
}

FAKE_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
	COUNT(cuMemcpy3D_v2_ptds);
	return copy3d(pCopy, NULL, SYNC_PT);
}

FAKE_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
	COUNT(cuMemcpy3DAsync_v2);
	return copy3d(pCopy, hStream, ASYNC);
}

FAKE_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
	COUNT(cuMemcpy3DAsync_v2_ptsz);
	return copy3d(pCopy, hStream, ASYNC_PT);
}
