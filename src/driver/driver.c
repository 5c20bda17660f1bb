/* driver: resolve the real CUDA driver and libc's dlsym/dlvsym (driver.h).
 *
 * Thread safety: libc's functions are resolved once under an atomic flag,
 * the driver once under load_lock; then the pointers are only read. The
 * ELF walk reads symbol tables in place and allocates nothing, so it is
 * safe anywhere, even in a dlsym call before the shim's constructor. */
#include "driver/driver.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>

#define HOOK(symbol, base, version, variant) symbol##_fn real_##symbol;
#define DRIVER(symbol, pfn) symbol##_fn real_##symbol;
#include "driver/hooks.def"

cumemcap_dlsym_fn cumemcap_real_dlsym;
cumemcap_dlvsym_fn cumemcap_real_dlvsym;

/* ---- libc's own dlsym, found through ld.so's _r_debug list ------------- */

CUMEMCAP_DLSYM_SAFE static uint32_t gnu_hash(const char *name)
{
	uint32_t h = 5381;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = h * 33 + *p;
	return h;
}

CUMEMCAP_DLSYM_SAFE static uint32_t sysv_hash(const char *name)
{
	uint32_t h = 0;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h = (h << 4) + *p;
		uint32_t g = h & 0xf0000000u;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

/* ld.so relocates dynamic-section pointers on most targets, not on all. */
CUMEMCAP_DLSYM_SAFE static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) value)
{
	return value < base ? base + value : value;
}

CUMEMCAP_DLSYM_SAFE static bool sym_ok(const ElfW(Sym) *s, const char *strtab, const char *name)
{
	return s->st_shndx != SHN_UNDEF && s->st_value != 0 &&
	       ELF64_ST_TYPE(s->st_info) == STT_FUNC && ELF64_ST_BIND(s->st_info) != STB_LOCAL &&
	       ELF64_ST_VISIBILITY(s->st_other) != STV_HIDDEN && cumemcap_str_eq(strtab + s->st_name, name);
}

/* The function `name` exported by the loaded object `lm` itself. */
CUMEMCAP_DLSYM_SAFE static void *elf_lookup(const struct link_map *lm, const char *name)
{
	if (!lm || !lm->l_ld)
		return NULL;

	uintptr_t base = lm->l_addr;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const uint32_t *gnu = NULL, *sysv = NULL;
	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(base, d->d_un.d_ptr); break;
		case DT_STRTAB: strtab = (const char *)dyn_ptr(base, d->d_un.d_ptr); break;
		case DT_GNU_HASH: gnu = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr); break;
		case DT_HASH: sysv = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr); break;
		default: break;
		}
	}
	if (!symtab || !strtab)
		return NULL;

	if (gnu) {
		uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
		const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gnu + 4);
		const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
		const uint32_t *chain = buckets + nbuckets;
		uint32_t h = gnu_hash(name);
		if (nbuckets == 0)
			return NULL;
		uint32_t i = buckets[h % nbuckets];
		if (i < symoffset)
			return NULL;
		for (;; i++) {
			uint32_t ch = chain[i - symoffset];
			if ((ch | 1) == (h | 1) && sym_ok(&symtab[i], strtab, name))
				return (void *)(base + symtab[i].st_value);
			if (ch & 1)
				return NULL;
		}
	}
	if (sysv) {
		uint32_t nbucket = sysv[0];
		const uint32_t *bucket = sysv + 2, *chain = bucket + nbucket;
		for (uint32_t i = bucket[sysv_hash(name) % nbucket]; i != STN_UNDEF; i = chain[i])
			if (sym_ok(&symtab[i], strtab, name))
				return (void *)(base + symtab[i].st_value);
	}
	return NULL;
}

/* The function `name` in the loaded object whose file name is `soname`. */
CUMEMCAP_DLSYM_SAFE static void *elf_find(const char *soname, const char *name)
{
	for (struct link_map *lm = _r_debug.r_map; lm; lm = lm->l_next) {
		const char *file = lm->l_name;
		for (const char *p = file; p && *p; p++)
			if (*p == '/')
				file = p + 1;
		if (file && cumemcap_str_eq(file, soname))
			return elf_lookup(lm, name);
	}
	return NULL;
}

/* Once, on atomics, not pthread_once: TSan's interceptor touches shadow
 * memory that does not exist yet when its start-up calls dlsym. */
static unsigned char libc_busy; /* __atomic_test_and_set flag */
static int libc_done;		/* set (release) after both pointers are written */

CUMEMCAP_DLSYM_SAFE bool cumemcap_driver_libc_ready(void)
{
	/* glibc >= 2.34 has them in libc.so.6; older ones in libdl.so.2. */
	static const char *const libs[] = { "libc.so.6", "libdl.so.2" };
	if (!__atomic_load_n(&libc_done, __ATOMIC_ACQUIRE)) {
		while (__atomic_test_and_set(&libc_busy, __ATOMIC_ACQUIRE))
			;
		for (size_t i = 0; !libc_done && i < sizeof(libs) / sizeof(libs[0]); i++) {
			if (!cumemcap_real_dlsym)
				cumemcap_real_dlsym = (cumemcap_dlsym_fn)elf_find(libs[i], "dlsym");
			if (!cumemcap_real_dlvsym)
				cumemcap_real_dlvsym = (cumemcap_dlvsym_fn)elf_find(libs[i], "dlvsym");
		}
		__atomic_store_n(&libc_done, 1, __ATOMIC_RELEASE);
		__atomic_clear(&libc_busy, __ATOMIC_RELEASE);
	}
	return cumemcap_real_dlsym != NULL && cumemcap_real_dlvsym != NULL;
}

/* ---- the real driver ---------------------------------------------------- */

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int loaded; /* 0 not tried, 1 loaded, -1 absent */
static const void *driver_base;

/* Load the driver from `path` unless loaded; caller holds load_lock. */
static void load_locked(const char *path, int extra_flags)
{
	if (atomic_load(&loaded) == 1 || !cumemcap_driver_libc_ready())
		return;
	void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | extra_flags);
	void *probe = handle ? cumemcap_real_dlsym(handle, "cuInit") : NULL;
	Dl_info info;
	if (probe && dladdr(probe, &info)) {
#define HOOK(symbol, base, version, variant) \
	real_##symbol = (symbol##_fn)cumemcap_real_dlsym(handle, #symbol);
#define DRIVER(symbol, pfn) real_##symbol = (symbol##_fn)cumemcap_real_dlsym(handle, #symbol);
#include "driver/hooks.def"
		/* Not a driver we can serve (pre-11.3): stay out of the way. */
		if ((real_cuGetProcAddress_v2 || real_cuGetProcAddress) && real_cuCtxGetCurrent &&
		    real_cuCtxGetDevice) {
			driver_base = info.dli_fbase;
			atomic_store(&loaded, 1);
		}
	}
	if (handle && atomic_load(&loaded) != 1)
		dlclose(handle);
	/* Leave no error of a symbol an older driver lacks for the program to
	 * read in dlerror() as its own (GLib's g_module_symbol does). */
	(void)dlerror();
}

bool cumemcap_driver_ready(void)
{
	int state = atomic_load_explicit(&loaded, memory_order_acquire);
	if (state != 0)
		return state == 1;
	pthread_mutex_lock(&load_lock);
	if (atomic_load(&loaded) == 0) {
		load_locked("libcuda.so.1", 0);
		if (atomic_load(&loaded) != 1)
			atomic_store(&loaded, -1);
	}
	pthread_mutex_unlock(&load_lock);
	return atomic_load(&loaded) == 1;
}

bool cumemcap_driver_owns(const void *sym)
{
	Dl_info info;
	if (!sym || !dladdr(sym, &info) || !info.dli_fname)
		return false;
	if (atomic_load_explicit(&loaded, memory_order_acquire) != 1) {
		pthread_mutex_lock(&load_lock);
		load_locked(info.dli_fname, RTLD_NOLOAD);
		pthread_mutex_unlock(&load_lock);
		if (atomic_load(&loaded) != 1)
			return false;
	}
	return info.dli_fbase == driver_base;
}

/* ---- the shim's own functions, and what comes after an object ----------- */

bool cumemcap_driver_self(const void *addr)
{
	Dl_info mine, theirs;
	return addr && dladdr((const void *)cumemcap_driver_self, &mine) && dladdr(addr, &theirs) &&
	       mine.dli_fbase == theirs.dli_fbase;
}

void *cumemcap_driver_own(const char *name)
{
	static _Atomic(struct link_map *) self;
	struct link_map *lm = atomic_load_explicit(&self, memory_order_acquire);
	if (!lm) {
		Dl_info info;
		if (!dladdr1((const void *)cumemcap_driver_own, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
			return NULL;
		atomic_store_explicit(&self, lm, memory_order_release);
	}
	return elf_lookup(lm, name);
}

void *cumemcap_driver_next(const void *caller, const char *name)
{
	Dl_info info;
	struct link_map *lm = NULL;
	if (!caller || !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return NULL;
	for (lm = lm->l_next; lm; lm = lm->l_next) {
		void *f = elf_lookup(lm, name);
		if (f)
			return f;
	}
	return NULL;
}
