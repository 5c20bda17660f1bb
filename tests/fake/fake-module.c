/* fake-module: modules, the JIT linker, kernel launches, texture objects and
 * graphics interop, answered as by a driver that has no code for this GPU
 * and no graphics API to share with.
 *
 * The fake runs no device code, so no module, function or graphics resource
 * can ever exist. Loading an image says why, with the codes the driver API
 * documents for cuModuleLoad*: a cubin, fatbin or ELF object is
 * CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image for the device), PTX is
 * CUDA_ERROR_JIT_COMPILER_NOT_FOUND (no PTX JIT compiler), anything else
 * CUDA_ERROR_INVALID_IMAGE; a missing file is CUDA_ERROR_FILE_NOT_FOUND.
 * A link state can be created and destroyed; inputs fail like module images,
 * and completing a link with nothing linked is CUDA_ERROR_INVALID_IMAGE.
 * Handles the fake never made are CUDA_ERROR_INVALID_HANDLE (NULL:
 * CUDA_ERROR_INVALID_VALUE). OpenGL calls find no GL context:
 * CUDA_ERROR_INVALID_GRAPHICS_CONTEXT. Texture objects are plain handles
 * (created for a described resource, destroyed once), as nothing samples them.
 *
 * Thread safety: link states and texture objects in lists under fake_lock.
 */
#include "fake-extra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- images ------------------------------------------------------------------------ */

static CUresult classify_image(const void *image)
{
	const unsigned char *p = image;
	static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
	static const unsigned char fatbin[4] = {0x50, 0xed, 0x55, 0xba};  /* 0xba55ed50 */
	static const unsigned char wrapper[4] = {0xb1, 0x43, 0x62, 0x46}; /* 0x466243b1 */
	if (!memcmp(p, elf, 4) || !memcmp(p, fatbin, 4) || !memcmp(p, wrapper, 4))
		return CUDA_ERROR_NO_BINARY_FOR_GPU;
	/* PTX is NUL-terminated text with a .version directive near the top. */
	char head[4097];
	size_t n = 0;
	while (n < sizeof head - 1 && p[n])
		n++;
	memcpy(head, p, n);
	head[n] = 0;
	return strstr(head, ".version") || strstr(head, ".target") ? CUDA_ERROR_JIT_COMPILER_NOT_FOUND
								   : CUDA_ERROR_INVALID_IMAGE;
}

/* Load from memory: validation order as the driver: init, arguments, context. */
static CUresult load_image(CUmodule *module, const void *image)
{
	REQUIRE_INIT();
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	pthread_mutex_unlock(&fake_lock);
	return r ? r : classify_image(image);
}

static CUresult load_file_head(const char *path, unsigned char *buf, size_t len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return CUDA_ERROR_FILE_NOT_FOUND;
	size_t n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	if (n < 4)
		memset(buf + n, 0, len - n);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	COUNT(cuModuleLoad);
	REQUIRE_INIT();
	if (!module || !fname)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	pthread_mutex_unlock(&fake_lock);
	unsigned char head[4097];
	if (!r)
		r = load_file_head(fname, head, sizeof head);
	return r ? r : classify_image(head);
}

FAKE_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	COUNT(cuModuleLoadData);
	return load_image(module, image);
}

FAKE_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				     CUjit_option *options, void **optionValues)
{
	COUNT(cuModuleLoadDataEx);
	if (numOptions && (!options || !optionValues))
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return load_image(module, image);
}

FAKE_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	COUNT(cuModuleLoadFatBinary);
	return load_image(module, fatCubin);
}

/* No module exists: every handle is one the fake never made. */
static CUresult no_module(CUmodule hmod)
{
	REQUIRE_INIT();
	return hmod ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuModuleUnload(CUmodule hmod)
{
	COUNT(cuModuleUnload);
	return no_module(hmod);
}

FAKE_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	COUNT(cuModuleGetFunction);
	if (!hfunc || !name)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return no_module(hmod);
}

FAKE_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	COUNT(cuModuleGetGlobal_v2);
	(void)dptr;
	(void)bytes;
	if (!name)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return no_module(hmod);
}

FAKE_API CUresult cuModuleGetGlobal(CUdeviceptr_v1 *dptr, unsigned int *bytes, CUmodule hmod, const char *name)
{
	COUNT(cuModuleGetGlobal);
	(void)dptr;
	(void)bytes;
	if (!name)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return no_module(hmod);
}

/* No function exists either (there is no module to get one from). */
static CUresult no_function(CUfunction f)
{
	REQUIRE_INIT();
	return f ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
	COUNT(cuFuncGetAttribute);
	(void)attrib;
	if (!pi)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return no_function(hfunc);
}

FAKE_API CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
	COUNT(cuFuncSetAttribute);
	(void)attrib, (void)value;
	return no_function(hfunc);
}

FAKE_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
	COUNT(cuFuncSetCacheConfig);
	(void)config;
	return no_function(hfunc);
}

FAKE_API CUresult cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
	COUNT(cuFuncSetSharedMemConfig);
	(void)config;
	return no_function(hfunc);
}

static CUresult launch(CUfunction f, CUstream h, bool pt)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx = NULL;
	struct CUstream_st *s;
	CUresult r = fake_stream_lookup(h, pt, &ctx, &s);
	pthread_mutex_unlock(&fake_lock);
	if (r)
		return r;
	return f ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
				 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
				 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
	COUNT(cuLaunchKernel);
	(void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, (void)blockDimZ;
	(void)sharedMemBytes, (void)kernelParams, (void)extra;
	return launch(f, hStream, false);
}

FAKE_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				      unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
				      unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
				      void **kernelParams, void **extra)
{
	COUNT(cuLaunchKernel_ptsz);
	(void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, (void)blockDimZ;
	(void)sharedMemBytes, (void)kernelParams, (void)extra;
	return launch(f, hStream, true);
}

/* ---- the JIT linker ------------------------------------------------------------------- */

struct CUlinkState_st {
	struct CUctx_st *ctx;
	struct CUlinkState_st *next;
};
static struct CUlinkState_st *links;

static bool link_valid(struct CUlinkState_st *l)
{
	for (struct CUlinkState_st *p = links; p; p = p->next)
		if (p == l)
			return true;
	return false;
}

static CUresult link_create(unsigned n, CUjit_option *options, void **values, CUlinkState *out)
{
	REQUIRE_INIT();
	if (!out || (n && (!options || !values)))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	struct CUlinkState_st *l = NULL;
	if (!r && !(l = calloc(1, sizeof *l)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		l->ctx = ctx;
		l->next = links;
		links = l;
		*out = l;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuLinkCreate(unsigned int numOptions, CUjit_option *options, void **optionValues,
			       CUlinkState *stateOut)
{
	COUNT(cuLinkCreate);
	return link_create(numOptions, options, optionValues, stateOut);
}

FAKE_API CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
				  CUlinkState *stateOut)
{
	COUNT(cuLinkCreate_v2);
	return link_create(numOptions, options, optionValues, stateOut);
}

/* What adding an input of type would say (the state is valid). */
static CUresult link_input(CUjitInputType type)
{
	switch (type) {
	case CU_JIT_INPUT_PTX:
	case CU_JIT_INPUT_NVVM:
		return CUDA_ERROR_JIT_COMPILER_NOT_FOUND;
	case CU_JIT_INPUT_CUBIN:
	case CU_JIT_INPUT_FATBINARY:
	case CU_JIT_INPUT_OBJECT:
	case CU_JIT_INPUT_LIBRARY:
		return CUDA_ERROR_NO_BINARY_FOR_GPU;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
}

static CUresult link_check(CUlinkState state)
{
	REQUIRE_INIT();
	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = link_valid(state) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_unlock(&fake_lock);
	return r;
}

static CUresult link_add_data(CUlinkState state, CUjitInputType type, void *data, size_t size, unsigned n,
			      CUjit_option *options, void **values)
{
	CUresult r = link_check(state);
	if (r)
		return r;
	if (!data || !size || (n && (!options || !values)))
		return CUDA_ERROR_INVALID_VALUE;
	return link_input(type);
}

FAKE_API CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,
				unsigned int numOptions, CUjit_option *options, void **optionValues)
{
	COUNT(cuLinkAddData);
	(void)name;
	return link_add_data(state, type, data, size, numOptions, options, optionValues);
}

FAKE_API CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
				   const char *name, unsigned int numOptions, CUjit_option *options,
				   void **optionValues)
{
	COUNT(cuLinkAddData_v2);
	(void)name;
	return link_add_data(state, type, data, size, numOptions, options, optionValues);
}

static CUresult link_add_file(CUlinkState state, CUjitInputType type, const char *path, unsigned n,
			      CUjit_option *options, void **values)
{
	CUresult r = link_check(state);
	if (r)
		return r;
	if (!path || (n && (!options || !values)))
		return CUDA_ERROR_INVALID_VALUE;
	FILE *f = fopen(path, "rb");
	if (!f)
		return CUDA_ERROR_FILE_NOT_FOUND;
	fclose(f);
	return link_input(type);
}

FAKE_API CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,
				CUjit_option *options, void **optionValues)
{
	COUNT(cuLinkAddFile);
	return link_add_file(state, type, path, numOptions, options, optionValues);
}

FAKE_API CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
				   unsigned int numOptions, CUjit_option *options, void **optionValues)
{
	COUNT(cuLinkAddFile_v2);
	return link_add_file(state, type, path, numOptions, options, optionValues);
}

FAKE_API CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
	COUNT(cuLinkComplete);
	CUresult r = link_check(state);
	if (r)
		return r;
	if (!cubinOut || !sizeOut)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_INVALID_IMAGE; /* no input was ever added */
}

FAKE_API CUresult cuLinkDestroy(CUlinkState state)
{
	COUNT(cuLinkDestroy);
	REQUIRE_INIT();
	if (!state)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	for (struct CUlinkState_st **pp = &links; *pp; pp = &(*pp)->next)
		if (*pp == state) {
			*pp = state->next;
			free(state);
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* ---- texture objects --------------------------------------------------------------------- */

struct texobj { CUtexObject id; struct texobj *next; };
static struct texobj *texobjs;
static CUtexObject next_texobj;

FAKE_API CUresult cuTexObjectCreate(CUtexObject *pTexObject, const CUDA_RESOURCE_DESC *pResDesc,
				    const CUDA_TEXTURE_DESC *pTexDesc, const CUDA_RESOURCE_VIEW_DESC *pResViewDesc)
{
	COUNT(cuTexObjectCreate);
	(void)pResViewDesc;
	REQUIRE_INIT();
	if (!pTexObject || !pResDesc || !pTexDesc)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	struct texobj *t = NULL;
	if (!r && !(t = malloc(sizeof *t)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		*t = (struct texobj){++next_texobj, texobjs};
		texobjs = t;
		*pTexObject = t->id;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuTexObjectDestroy(CUtexObject texObject)
{
	COUNT(cuTexObjectDestroy);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	for (struct texobj **pp = &texobjs; *pp; pp = &(*pp)->next)
		if ((*pp)->id == texObject) {
			struct texobj *t = *pp;
			*pp = t->next;
			free(t);
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* ---- graphics interop ---------------------------------------------------------------------- */

/* No graphics resource can be registered, so any handle is unknown. */
static CUresult no_resource(CUgraphicsResource res)
{
	REQUIRE_INIT();
	return res ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
}

static CUresult no_resources(unsigned count, CUgraphicsResource *res)
{
	REQUIRE_INIT();
	if (!count || !res)
		return CUDA_ERROR_INVALID_VALUE;
	return no_resource(res[0]);
}

FAKE_API CUresult cuGraphicsUnregisterResource(CUgraphicsResource resource)
{
	COUNT(cuGraphicsUnregisterResource);
	return no_resource(resource);
}

FAKE_API CUresult cuGraphicsSubResourceGetMappedArray(CUarray *pArray, CUgraphicsResource resource,
						      unsigned int arrayIndex, unsigned int mipLevel)
{
	COUNT(cuGraphicsSubResourceGetMappedArray);
	(void)arrayIndex, (void)mipLevel;
	if (!pArray)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return no_resource(resource);
}

FAKE_API CUresult cuGraphicsResourceGetMappedPointer_v2(CUdeviceptr *pDevPtr, size_t *pSize,
							CUgraphicsResource resource)
{
	COUNT(cuGraphicsResourceGetMappedPointer_v2);
	(void)pDevPtr, (void)pSize;
	return no_resource(resource);
}

FAKE_API CUresult cuGraphicsResourceGetMappedPointer(CUdeviceptr_v1 *pDevPtr, unsigned int *pSize,
						     CUgraphicsResource resource)
{
	COUNT(cuGraphicsResourceGetMappedPointer);
	(void)pDevPtr, (void)pSize;
	return no_resource(resource);
}

FAKE_API CUresult cuGraphicsResourceSetMapFlags(CUgraphicsResource resource, unsigned int flags)
{
	COUNT(cuGraphicsResourceSetMapFlags);
	(void)flags;
	return no_resource(resource);
}

FAKE_API CUresult cuGraphicsResourceSetMapFlags_v2(CUgraphicsResource resource, unsigned int flags)
{
	COUNT(cuGraphicsResourceSetMapFlags_v2);
	(void)flags;
	return no_resource(resource);
}

FAKE_API CUresult cuGraphicsMapResources(unsigned int count, CUgraphicsResource *resources, CUstream hStream)
{
	COUNT(cuGraphicsMapResources);
	(void)hStream;
	return no_resources(count, resources);
}

FAKE_API CUresult cuGraphicsMapResources_ptsz(unsigned int count, CUgraphicsResource *resources, CUstream hStream)
{
	COUNT(cuGraphicsMapResources_ptsz);
	(void)hStream;
	return no_resources(count, resources);
}

FAKE_API CUresult cuGraphicsUnmapResources(unsigned int count, CUgraphicsResource *resources, CUstream hStream)
{
	COUNT(cuGraphicsUnmapResources);
	(void)hStream;
	return no_resources(count, resources);
}

FAKE_API CUresult cuGraphicsUnmapResources_ptsz(unsigned int count, CUgraphicsResource *resources,
						CUstream hStream)
{
	COUNT(cuGraphicsUnmapResources_ptsz);
	(void)hStream;
	return no_resources(count, resources);
}

static CUresult no_gl(const void *out)
{
	REQUIRE_INIT();
	return out ? CUDA_ERROR_INVALID_GRAPHICS_CONTEXT : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGraphicsGLRegisterBuffer(CUgraphicsResource *pCudaResource, GLuint buffer, unsigned int Flags)
{
	COUNT(cuGraphicsGLRegisterBuffer);
	(void)buffer, (void)Flags;
	return no_gl(pCudaResource);
}

FAKE_API CUresult cuGraphicsGLRegisterImage(CUgraphicsResource *pCudaResource, GLuint image, GLenum target,
					    unsigned int Flags)
{
	COUNT(cuGraphicsGLRegisterImage);
	(void)image, (void)target, (void)Flags;
	return no_gl(pCudaResource);
}

FAKE_API CUresult cuGLGetDevices(unsigned int *pCudaDeviceCount, CUdevice *pCudaDevices, unsigned int cudaDeviceCount,
				 CUGLDeviceList deviceList)
{
	COUNT(cuGLGetDevices);
	(void)pCudaDevices, (void)cudaDeviceCount, (void)deviceList;
	return no_gl(pCudaDeviceCount);
}

FAKE_API CUresult cuGLGetDevices_v2(unsigned int *pCudaDeviceCount, CUdevice *pCudaDevices,
				    unsigned int cudaDeviceCount, CUGLDeviceList deviceList)
{
	COUNT(cuGLGetDevices_v2);
	(void)pCudaDevices, (void)cudaDeviceCount, (void)deviceList;
	return no_gl(pCudaDeviceCount);
}
