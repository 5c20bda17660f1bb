/* fake-nvcuvid: a stand-in libnvcuvid.so.1 (NVIDIA's video decoder library)
 * for the fake driver's directory.
 *
 * GStreamer's nvcodec plugin registers its CUDA elements (cudaupload,
 * cudadownload, ...) only when the decoder or encoder library loads with all
 * of its entry points. This stand-in exports them and decodes nothing: the
 * fake GPU has no video engine, so every decoder query and decoder or parser
 * creation is CUDA_ERROR_NOT_SUPPORTED, and no decoder element is offered.
 * The context lock (cuvidCtxLock*) works, as a push/pop of the context it
 * was made for, since it needs no video engine.
 *
 * Parameter types are opaque here (the Video Codec SDK headers are not
 * installed); only pointers and handles cross this boundary.
 *
 * Thread safety: no state beyond the lock objects the caller owns.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdlib.h>

#define NVCUVID_API __attribute__((visibility("default")))

typedef void *CUvideodecoder;
typedef void *CUvideoparser;
typedef struct fake_ctxlock { CUcontext ctx; } *CUvideoctxlock;

/* Declarations for -Wmissing-prototypes; the callers have their own. */
NVCUVID_API CUresult cuvidGetDecoderCaps(void *pdc);
NVCUVID_API CUresult cuvidCreateDecoder(CUvideodecoder *phDecoder, void *pdci);
NVCUVID_API CUresult cuvidDestroyDecoder(CUvideodecoder hDecoder);
NVCUVID_API CUresult cuvidDecodePicture(CUvideodecoder hDecoder, void *pPicParams);
NVCUVID_API CUresult cuvidMapVideoFrame64(CUvideodecoder hDecoder, int nPicIdx, unsigned long long *pDevPtr,
					  unsigned int *pPitch, void *pVPP);
NVCUVID_API CUresult cuvidUnmapVideoFrame64(CUvideodecoder hDecoder, unsigned long long DevPtr);
NVCUVID_API CUresult cuvidCreateVideoParser(CUvideoparser *pObj, void *pParams);
NVCUVID_API CUresult cuvidParseVideoData(CUvideoparser obj, void *pPacket);
NVCUVID_API CUresult cuvidDestroyVideoParser(CUvideoparser obj);
NVCUVID_API CUresult cuvidCtxLockCreate(CUvideoctxlock *pLock, CUcontext ctx);
NVCUVID_API CUresult cuvidCtxLockDestroy(CUvideoctxlock lck);
NVCUVID_API CUresult cuvidCtxLock(CUvideoctxlock lck, unsigned int reserved_flags);
NVCUVID_API CUresult cuvidCtxUnlock(CUvideoctxlock lck, unsigned int reserved_flags);

CUresult cuvidGetDecoderCaps(void *pdc)
{
	return pdc ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuvidCreateDecoder(CUvideodecoder *phDecoder, void *pdci)
{
	return phDecoder && pdci ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

/* No decoder or parser can exist, so every handle is invalid. */
CUresult cuvidDestroyDecoder(CUvideodecoder hDecoder) { (void)hDecoder; return CUDA_ERROR_INVALID_HANDLE; }
CUresult cuvidDecodePicture(CUvideodecoder hDecoder, void *p) { (void)hDecoder, (void)p; return CUDA_ERROR_INVALID_HANDLE; }

CUresult cuvidMapVideoFrame64(CUvideodecoder hDecoder, int nPicIdx, unsigned long long *pDevPtr,
			      unsigned int *pPitch, void *pVPP)
{
	(void)hDecoder, (void)nPicIdx, (void)pDevPtr, (void)pPitch, (void)pVPP;
	return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuvidUnmapVideoFrame64(CUvideodecoder hDecoder, unsigned long long DevPtr)
{
	(void)hDecoder, (void)DevPtr;
	return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuvidCreateVideoParser(CUvideoparser *pObj, void *pParams)
{
	return pObj && pParams ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuvidParseVideoData(CUvideoparser obj, void *pPacket) { (void)obj, (void)pPacket; return CUDA_ERROR_INVALID_HANDLE; }
CUresult cuvidDestroyVideoParser(CUvideoparser obj) { (void)obj; return CUDA_ERROR_INVALID_HANDLE; }

CUresult cuvidCtxLockCreate(CUvideoctxlock *pLock, CUcontext ctx)
{
	if (!pLock || !ctx)
		return CUDA_ERROR_INVALID_VALUE;
	CUvideoctxlock l = malloc(sizeof *l);
	if (!l)
		return CUDA_ERROR_OUT_OF_MEMORY;
	l->ctx = ctx;
	*pLock = l;
	return CUDA_SUCCESS;
}

CUresult cuvidCtxLockDestroy(CUvideoctxlock lck)
{
	if (!lck)
		return CUDA_ERROR_INVALID_VALUE;
	free(lck);
	return CUDA_SUCCESS;
}

CUresult cuvidCtxLock(CUvideoctxlock lck, unsigned int reserved_flags)
{
	(void)reserved_flags;
	return lck ? cuCtxPushCurrent_v2(lck->ctx) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuvidCtxUnlock(CUvideoctxlock lck, unsigned int reserved_flags)
{
	(void)reserved_flags;
	CUcontext popped;
	return lck ? cuCtxPopCurrent_v2(&popped) : CUDA_ERROR_INVALID_VALUE;
}
