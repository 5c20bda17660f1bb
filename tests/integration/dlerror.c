/* dlerror: a program's successful dlsym leaves no error behind, even when
 * that lookup is the one that makes the shim load the driver and resolve
 * what it calls itself, some of which an older driver lacks. GLib's
 * g_module_symbol reads dlerror() after every dlsym and fails on any
 * message: before the fix, GStreamer's CUDA plugin did not load under the
 * shim over such a driver ("undefined symbol: cuDeviceGetGraphMemAttribute"
 * for its lookup of cuCtxDestroy_v2).
 *
 * Usage: dlerror   (libcuda.so.1 on the library path: olddriver) */
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlerror: libcuda.so.1 not found: %s\n", dlerror());
		return 1;
	}
	(void)dlerror();
	int failed = 0;
	/* A hooked name (the shim loads the driver here), then an unhooked one. */
	const char *names[] = { "cuMemAlloc_v2", "cuInit" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *fn = dlsym(h, names[i]);
		const char *err = dlerror();
		if (!fn || err) {
			fprintf(stderr, "dlerror: dlsym(%s) = %p, then dlerror() = \"%s\"\n", names[i], fn,
				err ? err : "(null)");
			failed = 1;
		}
	}
	/* A name the driver lacks still reports its own error. */
	if (dlsym(h, "cuMemAllocAsync") || !dlerror()) {
		fprintf(stderr, "dlerror: a missing name must fail with an error\n");
		failed = 1;
	}
	printf("dlerror: %s\n", failed ? "FAILED" : "clean");
	return failed;
}
