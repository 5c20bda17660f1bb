/* cudart: NVIDIA's own libcudart.so.13, loaded over the fake driver under
 * the shim, must be handed the shim's hooks for every memory entry point it
 * asks for through cuGetProcAddress.
 *
 * The runtime stops early without a real GPU (cuGetExportTable), but by
 * then it has made all its lookups. With CUMEMCAP_DEBUG=doors the shim
 * writes one line per answer to stderr; this program captures its own
 * stderr while the runtime initialises, then checks each answer against
 * the shim's exported function of that name, in this process.
 *
 * Usage: cudart PATH/libcudart.so.13   (exit 77, a skip, when it is absent) */
#include "common.h"

#include <unistd.h>

struct expect {
	const char *base;
	int version;
	unsigned flags;
	const char *hook; /* the shim's exported function it must get */
	bool seen;
};

/* What NVIDIA's libcudart 13 asks for (shared/CUDA-FACTS.md, observed). */
static struct expect expected[] = {
	{ "cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", false },
	{ "cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2", false },
	{ "cuDeviceTotalMem", 3020, 0, "cuDeviceTotalMem_v2", false },
	{ "cuMemAlloc", 3020, 0, "cuMemAlloc_v2", false },
	{ "cuMemAllocPitch", 3020, 0, "cuMemAllocPitch_v2", false },
	{ "cuMemFree", 3020, 0, "cuMemFree_v2", false },
	{ "cuMemAllocManaged", 6000, 0, "cuMemAllocManaged", false },
	{ "cuMemAllocAsync", 11020, 0, "cuMemAllocAsync", false },
	{ "cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz", false },
	{ "cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync", false },
	{ "cuMemAllocFromPoolAsync", 11020, 2, "cuMemAllocFromPoolAsync_ptsz", false },
	{ "cuMemFreeAsync", 11020, 0, "cuMemFreeAsync", false },
	{ "cuMemFreeAsync", 11020, 2, "cuMemFreeAsync_ptsz", false },
	{ "cuMemPoolCreate", 11020, 0, "cuMemPoolCreate", false },
	{ "cuMemPoolDestroy", 11020, 0, "cuMemPoolDestroy", false },
	{ "cuMemPoolTrimTo", 11020, 0, "cuMemPoolTrimTo", false },
	{ "cuArrayCreate", 3020, 0, "cuArrayCreate_v2", false },
	{ "cuArray3DCreate", 3020, 0, "cuArray3DCreate_v2", false },
	{ "cuArrayDestroy", 2000, 0, "cuArrayDestroy", false },
	{ "cuMipmappedArrayCreate", 5000, 0, "cuMipmappedArrayCreate", false },
	{ "cuMipmappedArrayDestroy", 5000, 0, "cuMipmappedArrayDestroy", false },
	{ "cuGraphInstantiate", 10000, 0, "cuGraphInstantiate", false },
	{ "cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2", false },
	{ "cuGraphInstantiateWithFlags", 11040, 0, "cuGraphInstantiateWithFlags", false },
	{ "cuGraphInstantiateWithParams", 12000, 0, "cuGraphInstantiateWithParams", false },
	{ "cuGraphInstantiateWithParams", 12000, 2, "cuGraphInstantiateWithParams_ptsz", false },
	{ "cuGraphUpload", 11010, 0, "cuGraphUpload", false },
	{ "cuGraphUpload", 11010, 2, "cuGraphUpload_ptsz", false },
	{ "cuGraphLaunch", 10000, 0, "cuGraphLaunch", false },
	{ "cuGraphLaunch", 10000, 2, "cuGraphLaunch_ptsz", false },
	{ "cuGraphExecDestroy", 10000, 0, "cuGraphExecDestroy", false },
	{ "cuDeviceGraphMemTrim", 11040, 0, "cuDeviceGraphMemTrim", false },
	{ NULL, 0, 0, NULL, false },
};

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	void *rt = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!rt) {
		const char *require = getenv("CUMEMCAP_TEST_REQUIRE_PROGRAMS");
		bool required = require && strcmp(require, "1") == 0;
		printf("cudart: %s not loadable (%s); %s\n", argv[1], dlerror(),
		       required ? "required (CUMEMCAP_TEST_REQUIRE_PROGRAMS=1)" : "skipped");
		return required ? 1 : 77;
	}
	int (*device_count)(int *) = (int (*)(int *))dlsym(rt, "cudaGetDeviceCount");
	CHECK(device_count != NULL);

	/* Capture this process's stderr while the runtime initialises. */
	FILE *trace = tmpfile();
	CHECK(trace != NULL);
	fflush(stderr);
	int saved = dup(2);
	CHECK(saved >= 0 && dup2(fileno(trace), 2) == 2);
	int n = -1;
	int rc = device_count(&n);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	printf("cudart: cudaGetDeviceCount returned %d (no real GPU: an error is expected)\n", rc);

	rewind(trace);
	char line[1024], sym[128], answer[128];
	int version, lookups = 0, hooked = 0, to_driver = 0;
	unsigned long long flags;
	void *ptr;
	while (fgets(line, sizeof(line), trace)) {
		if (sscanf(line, "cumemcap: door=cuGetProcAddress_v2 symbol=%127s version=%d flags=%llu answer=%127s ptr=%p",
			   sym, &version, &flags, answer, &ptr) != 5)
			continue;
		lookups++;
		bool is_hook = strncmp(answer, "hook:", 5) == 0;
		if (is_hook) {
			/* The pointer handed out is the shim's function of that name. */
			void *mine = shim_symbol(answer + 5);
			if (ptr != mine) {
				fprintf(stderr, "cudart: %s@%d flags %llu was handed %p, the shim's %s is %p\n",
					sym, version, flags, ptr, answer + 5, mine);
				return 1;
			}
			hooked++;
		} else if (strcmp(answer, "driver") == 0) {
			to_driver++;
		}
		for (struct expect *e = expected; e->base; e++) {
			if (strcmp(e->base, sym) || e->version != version || e->flags != flags)
				continue;
			if (!is_hook || strcmp(answer + 5, e->hook) != 0) {
				fprintf(stderr, "cudart: %s@%d flags %u got %s, expected hook:%s\n", sym,
					version, e->flags, answer, e->hook);
				return 1;
			}
			e->seen = true;
		}
	}
	fclose(trace);
	printf("cudart: %d lookups, %d handed hooks, %d handed the driver's function\n", lookups,
	       hooked, to_driver);
	int missing = 0;
	for (struct expect *e = expected; e->base; e++) {
		if (!e->seen) {
			fprintf(stderr, "cudart: the runtime never asked for %s@%d flags %u\n", e->base,
				e->version, e->flags);
			missing++;
		}
	}
	CHECK(missing == 0);
	CHECK(lookups > 300);   /* it really went through the door */
	CHECK(to_driver > 50);  /* and the rest it found stayed the driver's */
	return 0;
}
