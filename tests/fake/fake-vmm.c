/* fake-vmm: virtual memory management (cuMemCreate/cuMemMap...) and arrays.
 *
 * VMM: a physical handle (cuMemCreate) is a memfd of its size, charged to
 * its device at create; it is freed and uncharged once it is both released
 * (every cuMemRelease matched, including cuMemRetainAllocationHandle's
 * extra references) and unmapped, as CUDA's cuMemRelease and cuMemUnmap
 * document. A released handle can no longer be mapped, retained or
 * released again; its live mappings keep the memory. cuMemUnmap takes
 * whole mappings only (one call may cover several adjacent ones); a part
 * of a mapping is CUDA_ERROR_INVALID_VALUE.
 * Sharing: cuMemExportToShareableHandle gives a POSIX file descriptor (a
 * dup of the memfd) for a handle created with that type requested; other
 * types are CUDA_ERROR_NOT_SUPPORTED. cuMemImportFromShareableHandle
 * always returns a new handle, as CUDA allows ("no guarantee that the
 * contents of handle will be the same CUDA memory handle for the same
 * given OS shareable handle"). For a descriptor of this process's own
 * allocation it is one more handle to that memory, which then lives until
 * every handle to it is released and unmapped; any other memfd stands for
 * another process's export: memory the exporter holds, never charged here.
 * cuMemAddressReserve reserves address space
 * only (mmap PROT_NONE, never counted). cuMemMap maps the memfd MAP_FIXED
 * over the reserved range with no access; cuMemSetAccess makes it readable /
 * writable through the host-backed address. Granularity is 2 MiB. A handle
 * with a host location is host memory: never charged; the fake does not
 * map it (CUDA_ERROR_NOT_SUPPORTED).
 *
 * Arrays: not backed by memory, only counted. The bytes an array costs are
 *     round_up(Width * max(Height,1) * max(Depth,1) * NumChannels
 *              * bytes_per_channel(Format), 512)
 * and a mipmapped array costs the sum of that over its levels, level l
 * having each dimension halved l times (w = max(Width >> l, 1), and the same
 * for Height and Depth when they are non-zero), each level rounded up to
 * 512 on its own. bytes_per_channel is 1 for (UN)SIGNED_INT8, 2 for
 * (UN)SIGNED_INT16 and HALF, 4 for (UN)SIGNED_INT32 and FLOAT, and 1/2 for
 * the [US]NORM_INT8Xn / INT16Xn formats (whose NumChannels must be n). Other
 * formats are CUDA_ERROR_NOT_SUPPORTED in the fake. The shim estimates array
 * sizes with the same formula.
 *
 * Thread safety: all lists and counters under fake_lock.
 */
#include "fake-internal.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct fake_vmm_handle {
	int fd;
	size_t size;
	CUmemAllocationProp prop;
	bool host; /* a host location: host memory, not charged to a device */
	bool imported; /* another process's export: its memory, not charged here */
	struct fake_vmm_handle *of; /* an import of this process's own export: the handle that made the memory */
	int imports; /* live handles whose `of` is this one */
	int refs; /* create (or import) + retains - releases */
	int maps; /* live cuMemMap mappings made through this handle */
	struct fake_vmm_handle *next;
};

struct reservation {
	uintptr_t base;
	size_t size;
	struct reservation *next;
};

static struct fake_vmm_handle *handles;
static struct reservation *reservations;

/* ---- VMM --------------------------------------------------------------------------- */

static struct fake_vmm_handle *handle_find(CUmemGenericAllocationHandle h)
{
	for (struct fake_vmm_handle *p = handles; p; p = p->next)
		if ((CUmemGenericAllocationHandle)(uintptr_t)p == h)
			return p->refs > 0 ? p : NULL;
	return NULL;
}

/* A handle goes once it is released and unmapped; the memory goes with
 * the handle that made it, once every import of it has gone too. */
static void handle_maybe_free(struct fake_vmm_handle *h)
{
	if (h->refs > 0 || h->maps > 0 || h->imports > 0)
		return;
	for (struct fake_vmm_handle **pp = &handles; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	struct fake_vmm_handle *of = h->of;
	if (!of && !h->host && !h->imported) {
		fake_dev_uncharge(h->prop.location.id, h->size);
		fake_cfg.dev[h->prop.location.id].live--;
	}
	close(h->fd);
	free(h);
	if (of) {
		of->imports--;
		handle_maybe_free(of);
	}
}

bool fake_vmm_reservation(uintptr_t addr, uintptr_t *base, size_t *size)
{
	for (struct reservation *r = reservations; r; r = r->next)
		if (addr >= r->base && addr - r->base < r->size) {
			*base = r->base;
			*size = r->size;
			return true;
		}
	return false;
}

/* Host locations (CUDA 12.2+: CU_MEM_LOCATION_TYPE_HOST, _HOST_NUMA with a
 * node id, _HOST_NUMA_CURRENT) make host memory: NCCL and ggml use them,
 * and no device is charged. The fake has one NUMA node, 0. */
static bool host_location(const CUmemLocation *loc)
{
	return loc->type == CU_MEM_LOCATION_TYPE_HOST || loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
	       loc->type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult check_prop(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	if (host_location(&prop->location))
		return prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && prop->location.id != 0
			       ? CUDA_ERROR_INVALID_VALUE
			       : CUDA_SUCCESS;
	if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	return fake_check_dev(prop->location.id) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
						CUmemAllocationGranularity_flags option)
{
	COUNT(cuMemGetAllocationGranularity);
	REQUIRE_INIT();
	if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
			     option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = check_prop(prop);
	if (!r)
		*granularity = FAKE_GRANULARITY;
	return r;
}

FAKE_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			      unsigned long long flags)
{
	COUNT(cuMemCreate);
	REQUIRE_INIT();
	if (!handle || flags != 0 || size == 0 || size % FAKE_GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = check_prop(prop);
	if (r)
		return r;
	struct fake_vmm_handle *h = calloc(1, sizeof *h);
	if (!h)
		return CUDA_ERROR_OUT_OF_MEMORY;
	h->fd = memfd_create("fakecuda-vmm", MFD_CLOEXEC);
	if (h->fd < 0 || ftruncate(h->fd, (off_t)size) != 0) {
		if (h->fd >= 0)
			close(h->fd);
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	h->size = size;
	h->prop = *prop;
	h->refs = 1;
	h->host = host_location(&prop->location);
	int dev = prop->location.id;
	pthread_mutex_lock(&fake_lock);
	r = h->host ? CUDA_SUCCESS : fake_dev_charge(dev, size);
	if (!r) {
		if (!h->host)
			fake_cfg.dev[dev].live++;
		h->next = handles;
		handles = h;
	}
	pthread_mutex_unlock(&fake_lock);
	if (r) {
		close(h->fd);
		free(h);
		return r;
	}
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	COUNT(cuMemRelease);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	struct fake_vmm_handle *h = handle_find(handle);
	if (h) {
		h->refs--;
		handle_maybe_free(h);
	}
	pthread_mutex_unlock(&fake_lock);
	return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				      unsigned long long flags)
{
	COUNT(cuMemAddressReserve);
	REQUIRE_INIT();
	(void)addr; /* a hint only; the fake does not honour it */
	if (!ptr || size == 0 || size % FAKE_GRANULARITY || (alignment & (alignment - 1)) || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (alignment < FAKE_GRANULARITY)
		alignment = FAKE_GRANULARITY;
	if (size > SIZE_MAX - alignment)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t len = size + alignment;
	void *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uintptr_t start = (uintptr_t)m, base = (uintptr_t)fake_round_up(start, alignment);
	if (base > start)
		munmap(m, base - start);
	if (start + len > base + size)
		munmap((void *)(base + size), start + len - (base + size));
	struct reservation *r = malloc(sizeof *r);
	if (!r) {
		munmap((void *)base, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	r->base = base;
	r->size = size;
	pthread_mutex_lock(&fake_lock);
	r->next = reservations;
	reservations = r;
	pthread_mutex_unlock(&fake_lock);
	*ptr = base;
	return CUDA_SUCCESS;
}

/* Does any mapping overlap [p, p+size)? (lock held) */
static bool range_mapped(uintptr_t p, size_t size)
{
	return fake_reg_find_range(p, size) != NULL;
}

FAKE_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	COUNT(cuMemAddressFree);
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_ERROR_INVALID_VALUE;
	for (struct reservation **pp = &reservations; *pp; pp = &(*pp)->next) {
		struct reservation *res = *pp;
		if (res->base != ptr || res->size != size)
			continue;
		if (range_mapped(ptr, size))
			break; /* still mapped: unmap first */
		*pp = res->next;
		munmap((void *)res->base, res->size);
		free(res);
		r = CUDA_SUCCESS;
		break;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
			   unsigned long long flags)
{
	COUNT(cuMemMap);
	REQUIRE_INIT();
	if (flags != 0 || size == 0 || size % FAKE_GRANULARITY || offset % FAKE_GRANULARITY ||
	    ptr % FAKE_GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct fake_vmm_handle *h = handle_find(handle);
	uintptr_t rb;
	size_t rs;
	CUresult r = CUDA_SUCCESS;
	struct fake_alloc *a = NULL;
	if (!h || offset > h->size || size > h->size - offset)
		r = CUDA_ERROR_INVALID_VALUE;
	else if (h->host)
		r = CUDA_ERROR_NOT_SUPPORTED; /* the fake maps device memory only */
	else if (!fake_vmm_reservation(ptr, &rb, &rs) || size > rs - (ptr - rb))
		r = CUDA_ERROR_INVALID_VALUE; /* not inside one reserved range */
	else if (range_mapped(ptr, size))
		r = CUDA_ERROR_INVALID_VALUE; /* already mapped */
	else if (!(a = calloc(1, sizeof *a)))
		r = CUDA_ERROR_OUT_OF_MEMORY;
	else if (mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, (off_t)offset) == MAP_FAILED)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!r) {
		a->base = ptr;
		a->size = size;
		a->kind = FAKE_K_VMM;
		a->dev = h->prop.location.id;
		a->buffer_id = fake_next_buffer_id();
		a->handle = h;
		fake_reg_insert(a);
		h->maps++;
	} else {
		free(a);
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

/* The mappings exactly covering [ptr, ptr+size), in order; 0 if the range
 * is not a union of whole mappings (lock held). */
static size_t covering(uintptr_t ptr, size_t size, struct fake_alloc **v, size_t max)
{
	size_t n = 0;
	uintptr_t p = ptr;
	while (p < ptr + size) {
		struct fake_alloc *a = fake_reg_find(p);
		if (!a || a->kind != FAKE_K_VMM || a->base != p || a->size > ptr + size - p || n == max)
			return 0;
		v[n++] = a;
		p += a->size;
	}
	return n;
}

#define MAX_COVER 4096

FAKE_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	COUNT(cuMemUnmap);
	REQUIRE_INIT();
	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct fake_alloc **v = malloc(MAX_COVER * sizeof *v);
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&fake_lock);
	size_t n = covering(ptr, size, v, MAX_COVER);
	for (size_t i = 0; i < n; i++) {
		struct fake_alloc *a = v[i];
		mmap((void *)a->base, a->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		     -1, 0);
		fake_reg_remove(a);
		a->handle->maps--;
		handle_maybe_free(a->handle);
		free(a);
	}
	pthread_mutex_unlock(&fake_lock);
	free(v);
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	COUNT(cuMemSetAccess);
	REQUIRE_INIT();
	if (!desc || count == 0 || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	unsigned flags = 0;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
			return CUDA_ERROR_INVALID_VALUE;
		if (fake_check_dev(desc[i].location.id))
			return CUDA_ERROR_INVALID_DEVICE;
		if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
		    desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
			return CUDA_ERROR_INVALID_VALUE;
		flags |= desc[i].flags;
	}
	struct fake_alloc **v = malloc(MAX_COVER * sizeof *v);
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	int prot = flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
		   : flags == CU_MEM_ACCESS_FLAGS_PROT_READ   ? PROT_READ
							      : PROT_NONE;
	pthread_mutex_lock(&fake_lock);
	size_t n = covering(ptr, size, v, MAX_COVER);
	for (size_t i = 0; i < n; i++) {
		mprotect((void *)v[i]->base, v[i]->size, prot);
		v[i]->access = flags;
	}
	pthread_mutex_unlock(&fake_lock);
	free(v);
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
							 CUmemGenericAllocationHandle handle)
{
	COUNT(cuMemGetAllocationPropertiesFromHandle);
	REQUIRE_INIT();
	if (!prop)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct fake_vmm_handle *h = handle_find(handle);
	if (h)
		*prop = h->prop;
	pthread_mutex_unlock(&fake_lock);
	return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Returns the handle mapped at addr with one more reference (to be
 * released with cuMemRelease). */
FAKE_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	COUNT(cuMemRetainAllocationHandle);
	REQUIRE_INIT();
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	struct fake_alloc *a = fake_reg_find((uintptr_t)addr);
	CUresult r = a && a->kind == FAKE_K_VMM ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	if (!r) {
		a->handle->refs++;
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)a->handle;
	}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
					      CUmemAllocationHandleType handleType, unsigned long long flags)
{
	COUNT(cuMemExportToShareableHandle);
	REQUIRE_INIT();
	if (!shareableHandle || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&fake_lock);
	struct fake_vmm_handle *h = handle_find(handle);
	CUresult r = CUDA_SUCCESS;
	int fd = -1;
	if (!h || !(h->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
		r = CUDA_ERROR_INVALID_VALUE; /* the type was not requested at cuMemCreate */
	else if ((fd = fcntl(h->fd, F_DUPFD_CLOEXEC, 0)) < 0)
		r = CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_unlock(&fake_lock);
	if (!r)
		*(int *)shareableHandle = fd;
	return r;
}

/* The live handle whose memfd is the file behind fd (lock held). */
static struct fake_vmm_handle *handle_of_file(const struct stat *st)
{
	struct stat mine;
	for (struct fake_vmm_handle *p = handles; p; p = p->next)
		if (fstat(p->fd, &mine) == 0 && mine.st_dev == st->st_dev && mine.st_ino == st->st_ino)
			return p;
	return NULL;
}

FAKE_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
						CUmemAllocationHandleType shHandleType)
{
	COUNT(cuMemImportFromShareableHandle);
	REQUIRE_INIT();
	if (!handle)
		return CUDA_ERROR_INVALID_VALUE;
	if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_NOT_SUPPORTED;
	int fd = (int)(intptr_t)osHandle;
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size % FAKE_GRANULARITY)
		return CUDA_ERROR_INVALID_VALUE;
	struct fake_vmm_handle *h = calloc(1, sizeof *h);
	if (!h || (h->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	h->refs = 1;
	pthread_mutex_lock(&fake_lock);
	struct fake_vmm_handle *same = handle_of_file(&st);
	if (same) {
		h->of = same->of ? same->of : same;
		h->of->imports++;
		h->size = h->of->size;
		h->prop = h->of->prop;
		h->host = h->of->host;
		h->imported = h->of->imported;
	} else {
		h->size = (size_t)st.st_size;
		h->prop = (CUmemAllocationProp){ .type = CU_MEM_ALLOCATION_TYPE_PINNED,
						 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
						 .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR };
		h->imported = true;
	}
	h->next = handles;
	handles = h;
	pthread_mutex_unlock(&fake_lock);
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
	return CUDA_SUCCESS;
}

/* ---- arrays -------------------------------------------------------------------------- */

struct CUarray_st {
	struct CUctx_st *ctx;
	int dev;
	uint64_t bytes;
	bool mipmapped;
	struct CUarray_st *next;
};
struct CUmipmappedArray_st {
	struct CUarray_st a;
};

static struct CUarray_st *arrays;

/* Bytes per channel of a format, 0 if the fake does not support it;
 * *channels_fixed is the channel count the format implies (0: any of 1,2,4). */
static unsigned format_bytes(CUarray_format f, unsigned *channels_fixed)
{
	*channels_fixed = 0;
	switch (f) {
	case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
	case CU_AD_FORMAT_UNORM_INT8X1: case CU_AD_FORMAT_SNORM_INT8X1: *channels_fixed = 1; return 1;
	case CU_AD_FORMAT_UNORM_INT8X2: case CU_AD_FORMAT_SNORM_INT8X2: *channels_fixed = 2; return 1;
	case CU_AD_FORMAT_UNORM_INT8X4: case CU_AD_FORMAT_SNORM_INT8X4: *channels_fixed = 4; return 1;
	case CU_AD_FORMAT_UNORM_INT16X1: case CU_AD_FORMAT_SNORM_INT16X1: *channels_fixed = 1; return 2;
	case CU_AD_FORMAT_UNORM_INT16X2: case CU_AD_FORMAT_SNORM_INT16X2: *channels_fixed = 2; return 2;
	case CU_AD_FORMAT_UNORM_INT16X4: case CU_AD_FORMAT_SNORM_INT16X4: *channels_fixed = 4; return 2;
	default: return 0;
	}
}

/* The formula in the header comment; levels >= 1. */
static CUresult array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned levels,
			    uint64_t *out)
{
	unsigned fixed;
	unsigned bpc = format_bytes(f, &fixed);
	if (w == 0 || levels == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!bpc)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (fixed ? ch != fixed : (ch != 1 && ch != 2 && ch != 4))
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t total = 0;
	for (unsigned l = 0; l < levels; l++) {
		uint64_t lw = l < 64 ? w >> l : 0, lh = h && l < 64 ? h >> l : 0, ld = d && l < 64 ? d >> l : 0, b;
		lw = lw ? lw : 1;
		lh = lh ? lh : 1;
		ld = ld ? ld : 1;
		if (__builtin_mul_overflow(lw, lh, &b) || __builtin_mul_overflow(b, ld, &b) ||
		    __builtin_mul_overflow(b, (uint64_t)ch * bpc, &b) || b > UINT64_MAX - FAKE_ALIGN ||
		    __builtin_add_overflow(total, fake_round_up(b, FAKE_ALIGN), &total))
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = total;
	return CUDA_SUCCESS;
}

static CUresult array_new(uint64_t bytes, bool mip, struct CUarray_st **out)
{
	struct CUarray_st *a = calloc(1, mip ? sizeof(struct CUmipmappedArray_st) : sizeof *a);
	if (!a)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&fake_lock);
	struct CUctx_st *ctx;
	CUresult r = fake_ctx_require(&ctx);
	if (!r)
		r = fake_dev_charge(ctx->dev, bytes);
	if (!r) {
		a->ctx = ctx;
		a->dev = ctx->dev;
		a->bytes = bytes;
		a->mipmapped = mip;
		a->next = arrays;
		arrays = a;
		fake_cfg.dev[ctx->dev].live++;
	}
	pthread_mutex_unlock(&fake_lock);
	if (r)
		free(a);
	else
		*out = a;
	return r;
}

static CUresult array_create(CUarray *ph, size_t w, size_t h, size_t d, CUarray_format f, unsigned ch)
{
	REQUIRE_INIT();
	uint64_t bytes;
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = array_bytes(w, h, d, f, ch, 1, &bytes);
	struct CUarray_st *a;
	if (!r)
		r = array_new(bytes, false, &a);
	if (!r)
		*ph = a;
	return r;
}

FAKE_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
	COUNT(cuArrayCreate_v2);
	if (!d)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return array_create(pHandle, d->Width, d->Height, 0, d->Format, d->NumChannels);
}

FAKE_API CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
	COUNT(cuArrayCreate);
	if (!d)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return array_create(pHandle, d->Width, d->Height, 0, d->Format, d->NumChannels);
}

FAKE_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
	COUNT(cuArray3DCreate_v2);
	if (!d)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return array_create(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

FAKE_API CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
	COUNT(cuArray3DCreate);
	if (!d)
		return fake_init_or(CUDA_ERROR_INVALID_VALUE);
	return array_create(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

FAKE_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d,
					 unsigned int numMipmapLevels)
{
	COUNT(cuMipmappedArrayCreate);
	REQUIRE_INIT();
	uint64_t bytes;
	if (!pHandle || !d)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, numMipmapLevels, &bytes);
	struct CUarray_st *a;
	if (!r)
		r = array_new(bytes, true, &a);
	if (!r)
		*pHandle = (struct CUmipmappedArray_st *)a;
	return r;
}

static void array_free(struct CUarray_st **pp)
{
	struct CUarray_st *a = *pp;
	*pp = a->next;
	fake_dev_uncharge(a->dev, a->bytes);
	fake_cfg.dev[a->dev].live--;
	free(a);
}

static CUresult array_destroy(struct CUarray_st *a, bool mip)
{
	REQUIRE_INIT();
	pthread_mutex_lock(&fake_lock);
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	for (struct CUarray_st **pp = &arrays; *pp; pp = &(*pp)->next)
		if (*pp == a && a->mipmapped == mip) {
			array_free(pp);
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&fake_lock);
	return r;
}

FAKE_API CUresult cuArrayDestroy(CUarray hArray)
{
	COUNT(cuArrayDestroy);
	return array_destroy(hArray, false);
}

FAKE_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	COUNT(cuMipmappedArrayDestroy);
	return array_destroy((struct CUarray_st *)hMipmappedArray, true);
}

void fake_arrays_release_ctx(struct CUctx_st *ctx)
{
	struct CUarray_st **pp = &arrays;
	while (*pp) {
		if ((*pp)->ctx == ctx)
			array_free(pp);
		else
			pp = &(*pp)->next;
	}
}
