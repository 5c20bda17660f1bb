/* vmm: the lifetime of cuMemCreate allocations (see vmm.h); `lock` guards every list here. */
#include "account/vmm.h"

#include <linux/kcmp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "platform/mix.h"
#include "state/track.h"

struct cumemcap_vmm_alloc {
	uint64_t key;      /* its record in the track map */
	int refs;          /* references not released */
	int maps;          /* live mappings */
	int in_flight;     /* driver calls that may still change refs or maps */
	struct cumemcap_vmm_alloc *next; /* a list of ended ones, in a caller's frame */
};

/* A handle value that references an allocation, n times. */
struct cumemcap_vmm_ref {
	uint64_t handle;
	int n;
	struct cumemcap_vmm_alloc *alloc;
	struct cumemcap_vmm_ref *next;
};

struct cumemcap_vmm_map {
	uint64_t ptr, size;
	struct cumemcap_vmm_alloc *alloc;
	struct cumemcap_vmm_map *next;
};

/* A descriptor cuMemExportToShareableHandle gave, with its file. */
struct cumemcap_vmm_export {
	int fd;
	dev_t dev;
	ino_t ino;
	struct cumemcap_vmm_alloc *alloc;
	struct cumemcap_vmm_export *next;
};

#define REF_BUCKETS 256
#define MAP_BUCKETS 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cumemcap_vmm_ref *refs[REF_BUCKETS];
static struct cumemcap_vmm_map *maps[MAP_BUCKETS];
static struct cumemcap_vmm_export *exports;
/* Keys of the allocations' records: never 0, never a reused handle value. */
static _Atomic uint64_t next_key = 1;

/* The link to handle's entry, or the end of its bucket. */
static struct cumemcap_vmm_ref **ref_find(uint64_t handle)
{
	struct cumemcap_vmm_ref **pp = &refs[cumemcap_mix(handle) % REF_BUCKETS];
	while (*pp && (*pp)->handle != handle)
		pp = &(*pp)->next;
	return pp;
}

static void map_link(struct cumemcap_vmm_map *m)
{
	struct cumemcap_vmm_map **b = &maps[cumemcap_mix(m->ptr) % MAP_BUCKETS];
	m->next = *b;
	*b = m;
}

/* Unlink and return the mapping at ptr if it lies in [ptr, end). */
static struct cumemcap_vmm_map *map_take_at(uint64_t ptr, uint64_t end)
{
	struct cumemcap_vmm_map **pp = &maps[cumemcap_mix(ptr) % MAP_BUCKETS];
	for (struct cumemcap_vmm_map *m; (m = *pp); pp = &m->next)
		if (m->ptr == ptr && m->size <= end - ptr) {
			*pp = m->next;
			return m;
		}
	return NULL;
}

/* Whether a is the caller's to end: nothing references or maps it, no call is in flight. */
static bool ends(struct cumemcap_vmm_alloc *a)
{
	return a->refs <= 0 && a->maps <= 0 && a->in_flight <= 0;
}

/* Drop the exports of a, or of descriptor fd (lock held). */
static void exports_drop(const struct cumemcap_vmm_alloc *a, int fd)
{
	for (struct cumemcap_vmm_export **pp = &exports, *e; (e = *pp);) {
		if (e->alloc == a || e->fd == fd) {
			*pp = e->next;
			free(e);
		} else {
			pp = &e->next;
		}
	}
}

/* The driver freed a's memory: give its charge back (lock not held). */
static void end_alloc(struct cumemcap_vmm_alloc *a)
{
	pthread_mutex_lock(&lock);
	exports_drop(a, -1);
	pthread_mutex_unlock(&lock);
	struct cumemcap_block b;
	bool found = cumemcap_account_release_take(CUMEMCAP_HANDLE_VMM, a->key, &b);
	cumemcap_account_release_settle(found, &b, CUDA_SUCCESS);
	free(a);
}

/* One more reference of handle to a, a new entry taken from *spare (then
 * NULL). Returns an allocation a stale entry's drop ended (lock held). */
static struct cumemcap_vmm_alloc *ref_add(uint64_t handle, struct cumemcap_vmm_alloc *a,
					  struct cumemcap_vmm_ref **spare)
{
	struct cumemcap_vmm_alloc *ended = NULL;
	struct cumemcap_vmm_ref **pp = ref_find(handle), *ref = *pp;
	if (ref && ref->alloc != a) {
		/* The driver handed the value out again: what it named lost those references. */
		*pp = ref->next;
		ref->alloc->refs -= ref->n;
		ended = ends(ref->alloc) ? ref->alloc : NULL;
		free(ref);
		ref = NULL;
	}
	if (!ref) {
		if (!*spare)
			return ended; /* no memory for the entry: the reference goes unseen */
		ref = *spare;
		*spare = NULL;
		*ref = (struct cumemcap_vmm_ref){ .handle = handle, .alloc = a, .next = *pp };
		*pp = ref;
	}
	ref->n++;
	a->refs++;
	return ended;
}

CUresult cumemcap_vmm_created(struct cumemcap_charge *c, CUresult r, CUmemGenericAllocationHandle handle)
{
	if (c->dev < 0 || r != CUDA_SUCCESS)
		return cumemcap_account_charge_finish(c, r, CUMEMCAP_HANDLE_VMM, 0);
	struct cumemcap_vmm_alloc *a = calloc(1, sizeof *a);
	struct cumemcap_vmm_ref *spare = malloc(sizeof *spare);
	if (!a || !spare) {
		/* Without records the charge could not end: none is kept. */
		free(a);
		free(spare);
		cumemcap_account_charge_finish(c, CUDA_ERROR_UNKNOWN, 0, 0);
		return r;
	}
	a->key = atomic_fetch_add_explicit(&next_key, 1, memory_order_relaxed);
	cumemcap_account_charge_finish(c, r, CUMEMCAP_HANDLE_VMM, a->key);
	pthread_mutex_lock(&lock);
	struct cumemcap_vmm_alloc *ended = ref_add(handle, a, &spare);
	pthread_mutex_unlock(&lock);
	free(spare);
	if (ended)
		end_alloc(ended);
	return r;
}

void cumemcap_vmm_release_take(struct cumemcap_vmm_call *v, CUmemGenericAllocationHandle handle)
{
	*v = (struct cumemcap_vmm_call){ .handle = handle };
	pthread_mutex_lock(&lock);
	struct cumemcap_vmm_ref **pp = ref_find(handle), *ref = *pp;
	if (ref) {
		v->alloc = ref->alloc;
		v->alloc->refs--;
		v->alloc->in_flight++;
		/* The value may name a new allocation as soon as the driver
		 * released it: the entry goes with its last reference. */
		if (--ref->n == 0) {
			*pp = ref->next;
			v->ref = ref;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* The end of a call on v->alloc: with `add`, the mapping v->maps is
 * linked, or else handle names it once more (v->ref: the spare entry);
 * then what is left with nothing is ended. */
static void settle_call(struct cumemcap_vmm_call *v, bool add, CUmemGenericAllocationHandle handle)
{
	struct cumemcap_vmm_alloc *a = v->alloc, *ended = NULL;
	pthread_mutex_lock(&lock);
	if (add && v->maps) {
		map_link(v->maps);
		a->maps++;
		v->maps = NULL;
	} else if (add) {
		ended = ref_add(handle, a, &v->ref);
	}
	a->in_flight--;
	bool last = ends(a);
	pthread_mutex_unlock(&lock);
	free(v->ref);
	free(v->maps);
	if (ended)
		end_alloc(ended);
	if (last)
		end_alloc(a);
}

CUresult cumemcap_vmm_release_settle(struct cumemcap_vmm_call *v, CUresult r)
{
	if (v->alloc)
		settle_call(v, r != CUDA_SUCCESS, v->handle);
	return r;
}

void cumemcap_vmm_map_take(struct cumemcap_vmm_call *v, CUmemGenericAllocationHandle handle)
{
	*v = (struct cumemcap_vmm_call){ 0 };
	struct cumemcap_vmm_map *m = malloc(sizeof *m);
	pthread_mutex_lock(&lock);
	struct cumemcap_vmm_ref *ref = m ? *ref_find(handle) : NULL;
	if (ref) {
		v->alloc = ref->alloc;
		v->alloc->in_flight++;
		v->maps = m;
		m = NULL;
	}
	pthread_mutex_unlock(&lock);
	free(m); /* not ours; or no memory: the mapping goes unseen */
}

CUresult cumemcap_vmm_map_settle(struct cumemcap_vmm_call *v, CUresult r, CUdeviceptr ptr, size_t size)
{
	if (v->alloc) {
		*v->maps = (struct cumemcap_vmm_map){ .ptr = ptr, .size = size, .alloc = v->alloc };
		settle_call(v, r == CUDA_SUCCESS, 0);
	}
	return r;
}

void cumemcap_vmm_unmap_take(struct cumemcap_vmm_call *v, CUdeviceptr ptr, size_t size)
{
	*v = (struct cumemcap_vmm_call){ 0 };
	uint64_t end = ptr + size < ptr ? UINT64_MAX : ptr + size;
	pthread_mutex_lock(&lock);
	/* The mappings wholly in the range: stepped through while they follow
	 * one another; after a gap, searched across every mapping. */
	uint64_t p = ptr;
	struct cumemcap_vmm_map *m;
	while (p < end && (m = map_take_at(p, end))) {
		p += m->size;
		m->next = v->maps;
		v->maps = m;
	}
	for (size_t i = 0; p < end && i < MAP_BUCKETS; i++)
		for (struct cumemcap_vmm_map **pp = &maps[i]; *pp;) {
			m = *pp;
			if (m->ptr >= p && m->ptr < end && m->size <= end - m->ptr) {
				*pp = m->next;
				m->next = v->maps;
				v->maps = m;
			} else {
				pp = &m->next;
			}
		}
	for (m = v->maps; m; m = m->next) {
		m->alloc->maps--;
		m->alloc->in_flight++;
	}
	pthread_mutex_unlock(&lock);
}

CUresult cumemcap_vmm_unmap_settle(struct cumemcap_vmm_call *v, CUresult r)
{
	if (!v->maps)
		return r;
	struct cumemcap_vmm_alloc *ended = NULL;
	struct cumemcap_vmm_map *next;
	pthread_mutex_lock(&lock);
	for (struct cumemcap_vmm_map *m = v->maps; m; m = next) {
		next = m->next;
		struct cumemcap_vmm_alloc *a = m->alloc;
		a->in_flight--;
		if (r != CUDA_SUCCESS) {
			a->maps++;
			map_link(m);
		} else {
			free(m);
		}
		if (ends(a)) {
			a->next = ended;
			ended = a;
		}
	}
	pthread_mutex_unlock(&lock);
	for (struct cumemcap_vmm_alloc *a; (a = ended);) {
		ended = a->next;
		end_alloc(a);
	}
	return r;
}

void cumemcap_vmm_retain_take(struct cumemcap_vmm_call *v, const void *addr)
{
	*v = (struct cumemcap_vmm_call){ 0 };
	v->ref = malloc(sizeof *v->ref);
	uint64_t p = (uint64_t)(uintptr_t)addr;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < MAP_BUCKETS && !v->alloc; i++)
		for (struct cumemcap_vmm_map *m = maps[i]; m && !v->alloc; m = m->next)
			if (p >= m->ptr && p - m->ptr < m->size)
				v->alloc = m->alloc;
	if (v->alloc)
		v->alloc->in_flight++;
	pthread_mutex_unlock(&lock);
}

CUresult cumemcap_vmm_new_ref_settle(struct cumemcap_vmm_call *v, CUresult r, CUmemGenericAllocationHandle handle)
{
	if (v->alloc) {
		settle_call(v, r == CUDA_SUCCESS, handle);
		return r;
	}
	/* The handle value the driver gave may still name one of ours. */
	if (r == CUDA_SUCCESS) {
		pthread_mutex_lock(&lock);
		struct cumemcap_vmm_ref *ref = *ref_find(handle);
		if (ref) {
			ref->n++;
			ref->alloc->refs++;
		}
		pthread_mutex_unlock(&lock);
	}
	free(v->ref);
	return r;
}

void cumemcap_vmm_exported(CUmemGenericAllocationHandle handle, int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return;
	struct cumemcap_vmm_export *e = malloc(sizeof *e);
	if (!e)
		return; /* an import of it will be taken for another process's */
	*e = (struct cumemcap_vmm_export){ .fd = fd, .dev = st.st_dev, .ino = st.st_ino };
	pthread_mutex_lock(&lock);
	struct cumemcap_vmm_ref *ref = *ref_find(handle);
	if (ref) {
		/* A descriptor number given again was closed: what it was goes. */
		exports_drop(NULL, fd);
		e->alloc = ref->alloc;
		e->next = exports;
		exports = e;
		e = NULL;
	}
	pthread_mutex_unlock(&lock);
	free(e);
}

void cumemcap_vmm_import_take(struct cumemcap_vmm_call *v, int fd)
{
	*v = (struct cumemcap_vmm_call){ 0 };
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return;
	v->ref = malloc(sizeof *v->ref);
	pid_t me = getpid();
	pthread_mutex_lock(&lock);
	/* The same open file: one descriptor, or kcmp(2) where allowed. */
	for (struct cumemcap_vmm_export *e = exports; e; e = e->next)
		if (e->dev == st.st_dev && e->ino == st.st_ino &&
		    (e->fd == fd || syscall(SYS_kcmp, me, me, KCMP_FILE, e->fd, fd) == 0)) {
			v->alloc = e->alloc;
			v->alloc->in_flight++;
			break;
		}
	pthread_mutex_unlock(&lock);
}

void cumemcap_vmm_lock(void)
{
	pthread_mutex_lock(&lock);
}

void cumemcap_vmm_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

/* The child reaches no context: the records go (lock held), not the
 * allocations: a call in flight in a lost thread may still count one. */
void cumemcap_vmm_fork_child(void)
{
	for (size_t i = 0; i < MAP_BUCKETS; i++)
		for (struct cumemcap_vmm_map *m; (m = maps[i]);) {
			maps[i] = m->next;
			free(m);
		}
	for (size_t i = 0; i < REF_BUCKETS; i++)
		for (struct cumemcap_vmm_ref *r; (r = refs[i]);) {
			refs[i] = r->next;
			free(r);
		}
	for (struct cumemcap_vmm_export *e; (e = exports);) {
		exports = e->next;
		free(e);
	}
	pthread_mutex_unlock(&lock); /* taken by fork_prepare, in this thread */
}
