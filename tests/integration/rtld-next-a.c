/* rtld-next-a: an interposer that forwards with dlsym(RTLD_NEXT), as
 * profilers and allocators do. RTLD_NEXT is relative to the caller: from
 * here the next next_probe is the one in rtld-next-b. */
#include <dlfcn.h>

int next_probe(void);
int call_next(void);

int next_probe(void)
{
	return 1;
}

int call_next(void)
{
	int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "next_probe");
	return next ? next() : -1;
}
