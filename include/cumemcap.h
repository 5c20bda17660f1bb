/* cumemcap: the public API of libcumemcap.so.
 *
 * A program running under the shim (LD_PRELOAD=libcumemcap.so) can ask it
 * what it holds. The functions are looked up at run time, so a program
 * works with or without the shim:
 *
 *     int (*get)(int, struct cumemcap_stats *, size_t) =
 *             (void *)dlsym(RTLD_DEFAULT, "cumemcap_get_stats");
 *     struct cumemcap_stats st;
 *     if (get && get(0, &st, sizeof(st)) == 0) printf("%llu\n", st.reserved);
 *
 * All sizes are bytes. Figures are what this process holds from the CUDA
 * driver through the hooked allocation calls; context overhead and other
 * processes are not included. */
#ifndef CUMEMCAP_H
#define CUMEMCAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUMEMCAP_NO_LIMIT_VALUE UINT64_MAX

struct cumemcap_stats {
	uint64_t limit;           /* the limit on this GPU; CUMEMCAP_NO_LIMIT_VALUE if none */
	uint64_t total;           /* the GPU's memory as the driver reports it */
	uint64_t reserved;        /* held from the driver now, all kinds */
	uint64_t peak_reserved;   /* highest `reserved` so far */
	uint64_t linear;          /* of `reserved`: cuMemAlloc, cuMemAllocPitch */
	uint64_t managed;         /*                cuMemAllocManaged */
	uint64_t pool;            /*                stream-ordered pools (reserved by the pools) */
	uint64_t vmm;             /*                cuMemCreate */
	uint64_t array;           /*                CUDA arrays (estimated from their descriptors) */
	uint64_t allocs;          /* successful allocations */
	uint64_t frees;           /* successful frees */
	uint64_t refusals;        /* requests refused at the limit */
	uint64_t driver_oom;      /* CUDA_ERROR_OUT_OF_MEMORY returned by the driver itself */
	uint64_t largest_request; /* the largest single request, in bytes */
	/* Since 0.2: */
	uint64_t live;              /* held by the program (pooled blocks, allocations) */
	uint64_t peak_live;
	uint64_t pooled;            /* arena segment bytes not handed out (reusable) */
	uint64_t segments_taken;    /* arena segments taken from the driver */
	uint64_t segments_released; /* ... and given back */
	uint64_t avoided;           /* alloc/free calls the arenas answered without the driver */
	/* Since 0.3: */
	uint64_t graph;             /* of `reserved`: graph memory pools (CUDA graphs' memory nodes) */
	/* Since 0.4: */
	uint64_t footprint;      /* what the driver holds for the process: reserved + overhead */
	uint64_t overhead;       /* driver-side memory outside the counted calls (contexts, modules) */
	uint64_t peak_footprint; /* highest `footprint` so far */
};

/* Fill *out (of `size` bytes: pass sizeof(struct cumemcap_stats); a
 * smaller struct from an older header gets its prefix) for the GPU with
 * this ordinal. Returns 0, or -1 when the process has not used that GPU. */
int cumemcap_get_stats(int device, struct cumemcap_stats *out, size_t size);

/* The library's version, e.g. "0.1.0". */
const char *cumemcap_version(void);

#ifdef __cplusplus
}
#endif

#endif
