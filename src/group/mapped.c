/* mapped: see mapped.h. Thread and signal safety: each slot's address
 * and flag are atomics; cumemcap_mapped_fault takes no lock and makes one
 * system call. */
#include "group/mapped.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#define MAPPED_MAX 64
static struct {
	_Atomic(uintptr_t) base;
	_Atomic size_t size;
	_Atomic bool cut;
} mapped[MAPPED_MAX];

void cumemcap_mapped_add(void *map, size_t size)
{
	for (size_t i = 0; i < MAPPED_MAX; i++) {
		uintptr_t none = 0;
		if (atomic_compare_exchange_strong(&mapped[i].base, &none, (uintptr_t)map)) {
			atomic_store(&mapped[i].size, size);
			return;
		}
	}
}

void cumemcap_mapped_remove(void *map)
{
	for (size_t i = 0; i < MAPPED_MAX; i++) {
		uintptr_t was = (uintptr_t)map;
		if (atomic_compare_exchange_strong(&mapped[i].base, &was, 0)) {
			atomic_store(&mapped[i].cut, false); /* a free slot is not cut */
			return;
		}
	}
}

bool cumemcap_mapped_cut(const void *map)
{
	for (size_t i = 0; i < MAPPED_MAX; i++)
		if (atomic_load(&mapped[i].base) == (uintptr_t)map)
			return atomic_load(&mapped[i].cut);
	return false;
}

bool cumemcap_mapped_fault(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	for (size_t i = 0; i < MAPPED_MAX; i++) {
		uintptr_t base = atomic_load(&mapped[i].base);
		size_t size = atomic_load(&mapped[i].size);
		if (!base || a < base || a - base >= size)
			continue;
		atomic_store(&mapped[i].cut, true);
		/* mmap is a plain system call: safe in a signal handler. */
		return mmap((void *)base, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
			    0) != MAP_FAILED;
	}
	return false;
}
