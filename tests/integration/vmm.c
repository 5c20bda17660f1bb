/* vmm: how long VMM memory (cuMemCreate) counts against the limit, through
 * every door.
 *
 * CUDA frees a physical allocation once every reference to its handle is
 * released and every mapping of it unmapped, in either order. Each case
 * checks what the program saw, the shim's figures and the fake driver's
 * own record:
 *   release-after-map  the documented idiom (create, reserve, map, release,
 *                      set access) under a 1 GiB limit: four 256 MiB
 *                      allocations fit, the fifth is refused; unmapping
 *                      one makes room again
 *   unmap-then-release PyTorch's expandable segments: unmap, then release;
 *                      one cuMemUnmap over two mappings
 *   retain             NCCL's free (retain, release, unmap, release) and a
 *                      retained reference outliving the mappings
 *   partial-unmap      part of a mapping: the driver refuses, the charge stays
 *   import             an import of this process's own export is one more
 *                      reference, though the driver gives a new handle
 *                      value (through the exported descriptor and a dup
 *                      of it); another process's memory is not charged
 *   unknown            handles and addresses the shim never saw: the
 *                      driver's own errors
 *   threads            several threads at once, in both orders: the books
 *                      end empty and the limit held
 *   footprint          the idiom under the default footprint count, a
 *                      300 MiB context and NVML: two allocations fit; the
 *                      overhead NVML shows stays the context's, never the
 *                      mapped memory's
 * Run as: vmm DOOR CASE, with CUMEMCAP_LIMIT=1GiB and (but for footprint)
 * CUMEMCAP_COUNT=allocations. */
#include "common.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

static struct api A;
static struct fake F;
static CUcontext primary;

static const CUmemAllocationProp device_prop = {
	.type = CU_MEM_ALLOCATION_TYPE_PINNED,
	.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
};

static void books(uint64_t vmm)
{
	struct cumemcap_stats s = shim_stats(0);
	if (s.vmm != vmm || s.reserved != F.reserved(0) || F.reserved(0) != vmm) {
		fprintf(stderr, "vmm: shim vmm %" PRIu64 " MiB, shim reserved %" PRIu64 " MiB, driver %" PRIu64
			" MiB, expected %" PRIu64 " MiB\n", (uint64_t)(s.vmm / MiB), (uint64_t)(s.reserved / MiB), (uint64_t)(F.reserved(0) / MiB),
			(uint64_t)(vmm / MiB));
		exit(1);
	}
}

static void grant_access(CUdeviceptr p, size_t size)
{
	CUmemAccessDesc acc = { .location = device_prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	OK(A.cuMemSetAccess(p, size, &acc, 1));
}

/* The doors hand out the hooks. */
static void hooked(void)
{
	if (strcmp(door, "linked") == 0)
		return; /* bound by the dynamic linker: the behaviour below is the check */
	CHECK((void *)A.cuMemMap == shim_symbol("cuMemMap"));
	CHECK((void *)A.cuMemUnmap == shim_symbol("cuMemUnmap"));
	CHECK((void *)A.cuMemRelease == shim_symbol("cuMemRelease"));
	CHECK((void *)A.cuMemRetainAllocationHandle == shim_symbol("cuMemRetainAllocationHandle"));
	CHECK((void *)A.cuMemImportFromShareableHandle == shim_symbol("cuMemImportFromShareableHandle"));
	CHECK((void *)A.cuMemExportToShareableHandle == shim_symbol("cuMemExportToShareableHandle"));
}

/* Asks for n handles of 256 MiB: the first `fit` are made, each mapped
 * at va[i] and released at once (the mapping keeps it), readable and
 * writable, and with fill filled with the byte i; the rest are refused
 * for memory. */
static void map_256mib(int n, int fit, bool fill, CUdeviceptr *va)
{
	for (int i = 0; i < n; i++) {
		CUmemGenericAllocationHandle h;
		CUresult r = A.cuMemCreate(&h, 256 * MiB, &device_prop, 0);
		if (i >= fit) {
			CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, r);
			continue;
		}
		OK(r);
		OK(A.cuMemAddressReserve(&va[i], 256 * MiB, 0, 0, 0));
		OK(A.cuMemMap(va[i], 256 * MiB, 0, h, 0));
		OK(A.cuMemRelease(h));
		grant_access(va[i], 256 * MiB);
		if (fill)
			OK(A.cuMemsetD8(va[i], (unsigned char)i, 256 * MiB));
	}
}

static void release_after_map(void)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr va[4];
	map_256mib(8, 4, true, va);
	books(1 * GiB);
	size_t fr, tot;
	OK(A.cuMemGetInfo(&fr, &tot));
	CHECK(tot == 1 * GiB && fr == 0);
	CHECK(shim_stats(0).refusals == 4);
	/* The last mapping gone: the memory is free, and so is the room. */
	OK(A.cuMemUnmap(va[0], 256 * MiB));
	books(768 * MiB);
	OK(A.cuMemCreate(&h, 256 * MiB, &device_prop, 0));
	books(1 * GiB);
	OK(A.cuMemRelease(h)); /* never mapped: freed at once */
	books(768 * MiB);
	for (int i = 1; i < 4; i++) {
		unsigned char c = 0;
		OK(A.cuMemcpyDtoH(&c, va[i] + 256 * MiB - 1, 1));
		CHECK(c == (unsigned char)i);
		OK(A.cuMemUnmap(va[i], 256 * MiB));
	}
	books(0);
	for (int i = 0; i < 4; i++)
		OK(A.cuMemAddressFree(va[i], 256 * MiB));
}

static void unmap_then_release(void)
{
	CUmemGenericAllocationHandle h[4];
	CUdeviceptr va;
	OK(A.cuMemAddressReserve(&va, 8 * 256 * MiB, 0, 0, 0));
	for (int i = 0; i < 4; i++) {
		OK(A.cuMemCreate(&h[i], 256 * MiB, &device_prop, 0));
		OK(A.cuMemMap(va + (CUdeviceptr)i * 256 * MiB, 256 * MiB, 0, h[i], 0));
	}
	grant_access(va, 1 * GiB);
	books(1 * GiB);
	OK(A.cuMemUnmap(va, 256 * MiB));
	books(1 * GiB); /* the handle lives */
	OK(A.cuMemRelease(h[0]));
	books(768 * MiB);
	OK(A.cuMemUnmap(va + 256 * MiB, 512 * MiB)); /* two mappings in one call */
	books(768 * MiB);
	OK(A.cuMemRelease(h[1]));
	OK(A.cuMemRelease(h[2]));
	books(256 * MiB);
	/* grown again over the same addresses, as an expandable segment does */
	for (int i = 0; i < 3; i++) {
		OK(A.cuMemCreate(&h[i], 256 * MiB, &device_prop, 0));
		OK(A.cuMemMap(va + (CUdeviceptr)i * 256 * MiB, 256 * MiB, 0, h[i], 0));
	}
	books(1 * GiB);
	CUmemGenericAllocationHandle extra;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemCreate(&extra, 256 * MiB, &device_prop, 0));
	for (int i = 0; i < 4; i++) {
		OK(A.cuMemUnmap(va + (CUdeviceptr)i * 256 * MiB, 256 * MiB));
		OK(A.cuMemRelease(h[i]));
	}
	books(0);
	OK(A.cuMemAddressFree(va, 8 * 256 * MiB));
}

static void retain(void)
{
	CUmemGenericAllocationHandle h, r1;
	CUdeviceptr va;
	OK(A.cuMemAddressReserve(&va, 512 * MiB, 0, 0, 0));
	/* NCCL: the creation handle kept; freed with retain, release,
	 * unmap, release. */
	OK(A.cuMemCreate(&h, 512 * MiB, &device_prop, 0));
	OK(A.cuMemMap(va, 512 * MiB, 0, h, 0));
	OK(A.cuMemRetainAllocationHandle(&r1, (void *)(va + 3 * MiB)));
	OK(A.cuMemRelease(r1));
	books(512 * MiB);
	OK(A.cuMemUnmap(va, 512 * MiB));
	books(512 * MiB);
	OK(A.cuMemRelease(h));
	books(0);
	/* A reference retained through a mapping outlives it. */
	OK(A.cuMemCreate(&h, 512 * MiB, &device_prop, 0));
	OK(A.cuMemMap(va, 512 * MiB, 0, h, 0));
	OK(A.cuMemRelease(h));
	OK(A.cuMemRetainAllocationHandle(&r1, (void *)va));
	OK(A.cuMemUnmap(va, 512 * MiB));
	books(512 * MiB);
	CUmemGenericAllocationHandle more;
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemCreate(&more, 768 * MiB, &device_prop, 0));
	OK(A.cuMemRelease(r1));
	books(0);
	OK(A.cuMemAddressFree(va, 512 * MiB));
}

static void partial_unmap(void)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	OK(A.cuMemAddressReserve(&va, 512 * MiB, 0, 0, 0));
	OK(A.cuMemCreate(&h, 512 * MiB, &device_prop, 0));
	OK(A.cuMemMap(va, 512 * MiB, 0, h, 0));
	OK(A.cuMemRelease(h));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemUnmap(va, 256 * MiB));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemUnmap(va + 256 * MiB, 256 * MiB));
	books(512 * MiB);
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemUnmap(va, 1 * GiB)); /* past the mapping */
	books(512 * MiB);
	OK(A.cuMemUnmap(va, 512 * MiB));
	books(0);
	OK(A.cuMemAddressFree(va, 512 * MiB));
}

static void import(void)
{
	CUmemGenericAllocationHandle h, imp;
	CUdeviceptr va;
	OK(A.cuMemAddressReserve(&va, 4 * GiB, 0, 0, 0));
	/* This process's own export, imported: one more reference. */
	OK(A.cuMemCreate(&h, 512 * MiB, &device_prop, 0));
	int fd = -1;
	OK(A.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	OK(A.cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	CHECK(imp != h); /* the fake, like CUDA, promises no same handle */
	OK(A.cuMemRelease(h));
	books(512 * MiB);
	OK(A.cuMemMap(va, 512 * MiB, 0, imp, 0));
	OK(A.cuMemRelease(imp));
	books(512 * MiB);
	OK(A.cuMemUnmap(va, 512 * MiB));
	books(0);
	close(fd);
	/* Imported through another descriptor of the same open file (as one
	 * passed through a socket arrives), while the exported one is open:
	 * the same. */
	OK(A.cuMemCreate(&h, 512 * MiB, &device_prop, 0));
	OK(A.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	int copy = dup(fd);
	CHECK(copy >= 0);
	OK(A.cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)copy, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	close(fd);
	OK(A.cuMemRelease(h));
	books(512 * MiB);
	CUmemGenericAllocationHandle spare;
	OK(A.cuMemCreate(&spare, 512 * MiB, &device_prop, 0));
	CHECK_CU(CUDA_ERROR_OUT_OF_MEMORY, A.cuMemCreate(&h, 512 * MiB, &device_prop, 0)); /* 1 GiB held */
	OK(A.cuMemRelease(spare));
	OK(A.cuMemRelease(imp));
	books(0);
	close(copy);
	/* Another process's export (a file the fake never made): its memory,
	 * mapped here past this process's limit without a charge. */
	int other = memfd_create("another-process", MFD_CLOEXEC);
	CHECK(other >= 0 && ftruncate(other, 2 * GiB) == 0);
	OK(A.cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)other, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	OK(A.cuMemMap(va, 2 * GiB, 0, imp, 0));
	OK(A.cuMemRelease(imp));
	books(0);
	OK(A.cuMemCreate(&h, 1 * GiB, &device_prop, 0)); /* the whole limit is still there */
	OK(A.cuMemMap(va + 2 * GiB, 1 * GiB, 0, h, 0));
	books(1 * GiB);
	OK(A.cuMemUnmap(va, 3 * GiB)); /* the foreign and the own mapping at once */
	books(1 * GiB);
	OK(A.cuMemRelease(h));
	books(0);
	close(other);
	OK(A.cuMemAddressFree(va, 4 * GiB));
}

static void unknown(void)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;
	OK(A.cuMemAddressReserve(&va, 64 * MiB, 0, 0, 0));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemRelease((CUmemGenericAllocationHandle)0x1234));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemMap(va, 64 * MiB, 0, (CUmemGenericAllocationHandle)0x1234, 0));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemUnmap(va, 64 * MiB));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemRetainAllocationHandle(&h, (void *)va));
	OK(A.cuMemCreate(&h, 64 * MiB, &device_prop, 0));
	OK(A.cuMemRelease(h));
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemRelease(h)); /* twice */
	CHECK_CU(CUDA_ERROR_INVALID_VALUE, A.cuMemMap(va, 64 * MiB, 0, h, 0)); /* released */
	books(0);
	CHECK(shim_stats(0).frees == 1);
	OK(A.cuMemAddressFree(va, 64 * MiB));
}

enum { THREADS = 4, ROUNDS = 200 };

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	OK(A.cuCtxSetCurrent(primary));
	CUdeviceptr va;
	OK(A.cuMemAddressReserve(&va, 128 * MiB, 0, 0, 0));
	for (int i = 0; i < ROUNDS; i++) {
		CUmemGenericAllocationHandle h;
		size_t size = (size_t)(1 + rand_r(&seed) % 64) * 2 * MiB;
		CUresult r = A.cuMemCreate(&h, size, &device_prop, 0);
		if (r == CUDA_ERROR_OUT_OF_MEMORY)
			continue;
		OK(r);
		OK(A.cuMemMap(va, size, 0, h, 0));
		if (rand_r(&seed) % 2) {
			OK(A.cuMemRelease(h));
			OK(A.cuMemUnmap(va, size));
		} else {
			OK(A.cuMemUnmap(va, size));
			OK(A.cuMemRelease(h));
		}
	}
	OK(A.cuMemAddressFree(va, 128 * MiB));
	return NULL;
}

static void threads(void)
{
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	books(0);
	CHECK(F.peak_reserved(0) <= 1 * GiB);
	CHECK(shim_stats(0).live == 0);
}

static void footprint(void)
{
	CUdeviceptr va[2];
	map_256mib(4, 2, false, va);
	usleep(400 * 1000); /* samples read NVML again */
	struct cumemcap_stats s = shim_stats(0);
	CHECK(s.overhead == 300 * MiB);
	CHECK(s.footprint == 812 * MiB && s.peak_footprint <= 1 * GiB);
	for (int i = 0; i < 2; i++) {
		OK(A.cuMemUnmap(va[i], 256 * MiB));
		OK(A.cuMemAddressFree(va[i], 256 * MiB));
	}
	books(0);
	usleep(400 * 1000);
	s = shim_stats(0);
	CHECK(s.overhead == 300 * MiB && s.footprint == 300 * MiB);
}

int main(int argc, char **argv)
{
	load_api(argc, argv, &A, &F);
	const char *c = argc > 2 ? argv[2] : "";
	primary = use_primary(&A, 0);
	size_t fr, tot;
	OK(A.cuMemGetInfo(&fr, &tot)); /* the shim knows the GPU from here on */
	hooked();
	if (strcmp(c, "release-after-map") == 0)
		release_after_map();
	else if (strcmp(c, "unmap-then-release") == 0)
		unmap_then_release();
	else if (strcmp(c, "retain") == 0)
		retain();
	else if (strcmp(c, "partial-unmap") == 0)
		partial_unmap();
	else if (strcmp(c, "import") == 0)
		import();
	else if (strcmp(c, "unknown") == 0)
		unknown();
	else if (strcmp(c, "threads") == 0)
		threads();
	else if (strcmp(c, "footprint") == 0)
		footprint();
	else {
		fprintf(stderr, "vmm: unknown case %s\n", c);
		return 2;
	}
	printf("vmm %s (%s door): all checks passed\n", c, door);
	return 0;
}
