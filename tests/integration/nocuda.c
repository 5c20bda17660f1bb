/* nocuda: a program that never uses CUDA. Under the shim, with a driver on
 * the library path and a valid limit, the driver must never be loaded:
 * the shim touches it lazily, on the first CUDA call. */
#include <stdio.h>
#include <string.h>

int main(void)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[4096];
	int shim = 0;
	if (!maps)
		return 2;
	while (fgets(line, sizeof(line), maps)) {
		if (strstr(line, "libcuda.so")) {
			fprintf(stderr, "nocuda: the driver was loaded: %s", line);
			return 1;
		}
		if (strstr(line, "libcumemcap.so"))
			shim = 1;
	}
	fclose(maps);
	if (!shim) {
		fprintf(stderr, "nocuda: the shim is not loaded; the test is not testing anything\n");
		return 1;
	}
	printf("nocuda: main ran, no driver loaded\n");
	return 0;
}
