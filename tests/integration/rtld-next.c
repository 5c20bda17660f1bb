/* rtld-next: the shim's dlsym must resolve RTLD_NEXT relative to the
 * program's caller, not to the shim. A wrapper that called glibc's dlsym
 * from the shim would answer with rtld-next-a's own next_probe (1), the
 * next one after the shim in search order, instead of rtld-next-b's (2). */
#include <stdio.h>

int call_next(void);
int rtld_next_b_loaded(void);

int main(void)
{
	int got = rtld_next_b_loaded() ? call_next() : -1;
	if (got != 2) {
		fprintf(stderr, "rtld-next: dlsym(RTLD_NEXT) from a library found definition %d, expected 2\n", got);
		return 1;
	}
	printf("rtld-next: RTLD_NEXT resolved relative to the caller\n");
	return 0;
}
