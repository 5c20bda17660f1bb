/* start: what the library constructor runs and writes, kept together so
 * that a program which never uses CUDA pays few page faults for the
 * preload (issue 17: each costs about 15 us on a virtual machine).
 * Attributes and one pure helper, no state: thread safety is the
 * variables' own (written before main, by the constructor).
 *
 * CUMEMCAP_START_DATA puts a variable in the section cumemcap_start_data. As a
 * section no default linker script names, ld places it right after .data,
 * in the page that also holds the first bytes of .bss: ld.so writes that
 * page anyway when it clears .bss, so what fits there costs no fault of
 * its own (a variable left in .bss would cost a page of its own each).
 * Zero-initialized variables there take their bytes in the file; keep it
 * to the few the constructor writes.
 *
 * CUMEMCAP_START_CONST puts a constant among .data.rel.ro, whose pages
 * the loader writes anyway (relocations): what the constructor reads from
 * there costs no fault, where a string literal in .rodata costs one (a
 * string the constructor reads is such a named array, not a literal).
 *
 * CUMEMCAP_START_CODE puts a function among .text.startup, which ld
 * places at the head of .text next to the constructor and _init, in pages
 * loading the library already faults in. */
#pragma once

#include <stddef.h>

#define CUMEMCAP_START_DATA __attribute__((section("cumemcap_start_data")))
/* The same for a large one written only sometimes (a variable is set):
 * after every CUMEMCAP_START_DATA one, so as not to push those onto a
 * page of their own. */
#define CUMEMCAP_START_LARGE __attribute__((section("cumemcap_start_large")))
#define CUMEMCAP_START_CONST __attribute__((section(".data.rel.ro.cumemcap_start")))
#define CUMEMCAP_START_CODE __attribute__((section(".text.startup.cumemcap")))

/* s, which the compiler no longer knows: a CUMEMCAP_START_CONST string
 * whose bytes it would otherwise fold into constants of its own, in
 * .rodata (clang copies a known string with loads from there). */
static inline const char *cumemcap_start_str(const char *s)
{
	__asm__("" : "+r"(s));
	return s;
}

/* snprintf(dst, len, "%s", src) without stdio (whose pages a program
 * without CUDA may never touch): at most len - 1 bytes, always ended. */
static inline void cumemcap_copy_str(char *dst, size_t len, const char *src)
{
	if (len == 0)
		return;
	size_t n = 0;
	for (; n + 1 < len && src[n]; n++)
		dst[n] = src[n];
	dst[n] = '\0';
}
