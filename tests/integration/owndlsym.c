/* owndlsym: an executable that defines dlsym itself (a static wrapper, as
 * some programs and test harnesses do), forwarding to the next one found
 * with dlvsym(RTLD_NEXT, "dlsym", ...). Linked into the limit body: every
 * lookup the program makes goes through this dlsym first, and the limit
 * must still hold through the dlsym and cuGetProcAddress doors. */
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

typedef void *(*dlsym_fn)(void *, const char *);

static unsigned long lookups;

void *dlsym(void *handle, const char *name)
{
	static dlsym_fn next;
	if (!next)
		next = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!next)
		next = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (!next)
		return NULL;
	lookups++;
	return next(handle, name);
}

__attribute__((destructor)) static void owndlsym_stop(void)
{
	if (lookups == 0) {
		fprintf(stderr, "owndlsym: the program's own dlsym was never used\n");
		_exit(1);
	}
}
