/* cuwrap: a classic LD_PRELOAD wrapper of the CUDA driver, as profilers and
 * other limiters are written: it defines cuMemAlloc_v2 & co, finds the
 * next definition with dlsym(RTLD_NEXT, ...) in its constructor, counts
 * the calls and forwards them. Preloaded before or after the shim, it must
 * keep working: RTLD_NEXT must never answer with the wrapper's own function
 * (it would recurse forever) nor with nothing while a driver is there.
 *
 * The next functions are looked up in the constructor, and again at the
 * first call if nothing was found then (a program that dlopens the driver
 * itself has none loaded yet).
 *
 * CUWRAP_EXPECT_CALLS=1: fail at exit unless the program's calls went
 * through the wrapper (it is first in the preload list). */
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*info_fn)(size_t *, size_t *);

static alloc_fn next_alloc;
static free_fn next_free;
static info_fn next_info;
static unsigned long calls;

/* The next definition of `name`; never one in this library (a call would
 * recurse forever). `required`: at a call, where nothing is fatal. */
static void *next_of(const char *name, bool required)
{
	void *next = dlsym(RTLD_NEXT, name);
	Dl_info mine, found;
	if (next && dladdr((void *)next_of, &mine) && dladdr(next, &found) &&
	    mine.dli_fbase == found.dli_fbase) {
		fprintf(stderr, "cuwrap: dlsym(RTLD_NEXT, \"%s\") answered the wrapper itself\n", name);
		abort();
	}
	if (!next && required) {
		fprintf(stderr, "cuwrap: dlsym(RTLD_NEXT, \"%s\") found nothing\n", name);
		abort();
	}
	return next;
}

#define NEXT(var, type, name)                           \
	do {                                            \
		if (!var)                               \
			var = (type)next_of(name, true); \
	} while (0)

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
	NEXT(next_alloc, alloc_fn, "cuMemAlloc_v2");
	calls++;
	return next_alloc(p, n);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p)
{
	NEXT(next_free, free_fn, "cuMemFree_v2");
	calls++;
	return next_free(p);
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
	NEXT(next_info, info_fn, "cuMemGetInfo_v2");
	calls++;
	return next_info(free_bytes, total);
}

__attribute__((constructor)) static void cuwrap_start(void)
{
	next_alloc = (alloc_fn)next_of("cuMemAlloc_v2", false);
	next_free = (free_fn)next_of("cuMemFree_v2", false);
	next_info = (info_fn)next_of("cuMemGetInfo_v2", false);
}

__attribute__((destructor)) static void cuwrap_stop(void)
{
	const char *expect = getenv("CUWRAP_EXPECT_CALLS");
	if (expect && strcmp(expect, "1") == 0 && calls == 0) {
		fprintf(stderr, "cuwrap: the program's calls did not go through the wrapper\n");
		_exit(1);
	}
}
