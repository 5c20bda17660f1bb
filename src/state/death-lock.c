/* death-lock: see death-lock.h.
 *
 * A big-reader lock. Each thread in a section has a slot (one cache line,
 * from a list that only grows, taken back at thread exit). A reader
 * publishes `depth` then reads `writing`; the writer sets `writing` then
 * reads every depth: either the reader sees the writer and waits on its
 * mutex, or the writer sees the reader and waits for its depth to drop.
 *
 * Each side needs a full barrier between its store and its load. With
 * membarrier(PRIVATE_EXPEDITED) registered, a reader publishes with a plain
 * store and the rare writer has the kernel run the barrier on every CPU
 * running a thread of the process; elsewhere (old kernels, sandboxes,
 * valgrind, ThreadSanitizer, which cannot see that barrier) with an
 * exchange. `plain` says which a slot's reader uses. */
#include "state/death-lock.h"
#include "platform/export.h"
#include "platform/xmutex.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define ASYMMETRIC 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ASYMMETRIC 0
#endif
#endif
#ifndef ASYMMETRIC
#define ASYMMETRIC 1
#endif

struct slot {
	_Alignas(64) _Atomic unsigned depth;
	_Atomic bool plain; /* the reader publishes depth with a plain store */
	_Atomic bool taken;
	struct slot *next; /* written once before the slot is published */
};

static _Atomic(struct slot *) slots;
static _Atomic int writing;
static struct cumemcap_xmutex writer = CUMEMCAP_XMUTEX_INIT(writer);
static CUMEMCAP_TLS struct slot *mine;
/* A thread without a slot (out of memory) takes the writer's role instead. */
static CUMEMCAP_TLS unsigned alone;

/* Registered for private expedited membarriers, before any slot is plain. */
static _Atomic bool asymmetric;
static bool membarrier_off; /* cumemcap_death_lock_no_membarrier() */

static bool membarrier_register(void)
{
	if (!ASYMMETRIC || membarrier_off)
		return false;
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	       syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

/* The writer's half, the global command backing up the expedited one. Should
 * both fail, every reader goes back to exchanges for good, and the writer
 * waits a millisecond, far longer than a store stays in a store buffer. */
static _Atomic unsigned long barriers; /* issued by writers (tests) */

static void barrier_everywhere(void)
{
	atomic_fetch_add_explicit(&barriers, 1, memory_order_relaxed);
	if (!membarrier_off && (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 ||
				syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0))
		return;
	atomic_store(&asymmetric, false);
	for (struct slot *s = atomic_load(&slots); s; s = s->next)
		atomic_store(&s->plain, false);
	struct timespec ms = { .tv_nsec = 1000 * 1000 };
	nanosleep(&ms, NULL);
}

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static pthread_key_t key; /* returns a thread's slot when it exits */
static bool key_ok;

/* Thread exit (runs in the exiting thread). */
static void slot_return(void *p)
{
	struct slot *s = p;
	mine = NULL;
	atomic_store_explicit(&s->depth, 0, memory_order_release);
	atomic_store_explicit(&s->taken, false, memory_order_release);
}

static void setup(void)
{
	atomic_store(&asymmetric, membarrier_register());
	key_ok = pthread_key_create(&key, slot_return) == 0;
}


/* A writer is at work: step back, wait for it, and come in again. */
static __attribute__((noinline)) void wait_writer(struct slot *s)
{
	do {
		atomic_store_explicit(&s->depth, 0, memory_order_release);
		cumemcap_xmutex_lock(&writer);
		cumemcap_xmutex_unlock(&writer);
		atomic_exchange(&s->depth, 1);
	} while (atomic_load(&writing));
}

/* The thread's first section: a free slot, or a new one. */
static __attribute__((noinline)) struct slot *enter_slow(void)
{
	if (alone) {
		alone++;
		return NULL;
	}
	struct slot *s;
	for (s = atomic_load_explicit(&slots, memory_order_acquire); s; s = s->next) {
		bool expected = false;
		if (!atomic_load_explicit(&s->taken, memory_order_relaxed) &&
		    atomic_compare_exchange_strong(&s->taken, &expected, true))
			break;
	}
	if (!s) {
		s = aligned_alloc(64, sizeof(*s));
		if (!s) {
			cumemcap_death_lock_write();
			alone = 1;
			return NULL;
		}
		atomic_init(&s->depth, 0);
		atomic_init(&s->taken, true);
		s->next = atomic_load_explicit(&slots, memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(&slots, &s->next, s, memory_order_release,
							      memory_order_relaxed))
			;
	}
	pthread_once(&setup_once, setup);
	atomic_store_explicit(&s->plain, atomic_load(&asymmetric), memory_order_relaxed);
	if (key_ok)
		pthread_setspecific(key, s);
	mine = s;
	return s;
}

void cumemcap_death_lock_read(void)
{
	struct slot *s = mine;
	if (__builtin_expect(!s, 0) && !(s = enter_slow()))
		return;
	unsigned d = atomic_load_explicit(&s->depth, memory_order_relaxed);
	if (d) {
		atomic_store_explicit(&s->depth, d + 1, memory_order_relaxed);
		return;
	}
	if (atomic_load_explicit(&s->plain, memory_order_relaxed)) {
		atomic_store_explicit(&s->depth, 1, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst); /* the writer's membarrier does the rest */
	} else {
		atomic_exchange(&s->depth, 1);
	}
	if (__builtin_expect(atomic_load(&writing), 0))
		wait_writer(s);
}

void cumemcap_death_unlock_read(void)
{
	struct slot *s = mine;
	if (__builtin_expect(!s, 0)) {
		if (alone && --alone == 0)
			cumemcap_death_unlock_write();
		return;
	}
	unsigned d = atomic_load_explicit(&s->depth, memory_order_relaxed);
	atomic_store_explicit(&s->depth, d ? d - 1 : 0, memory_order_release);
}

void cumemcap_death_lock_write(void)
{
	cumemcap_xmutex_lock(&writer);
	atomic_exchange(&writing, 1);
	if (atomic_load(&asymmetric))
		barrier_everywhere();
	for (struct slot *s = atomic_load(&slots); s; s = s->next)
		for (unsigned spins = 0; s != mine && atomic_load(&s->depth); spins++)
			if (spins >= 64)
				sched_yield();
}

void cumemcap_death_unlock_write(void)
{
	atomic_store_explicit(&writing, 0, memory_order_release);
	cumemcap_xmutex_unlock(&writer);
}

void cumemcap_death_lock_fork_child(void)
{
	/* Only this thread came along: no other section is open, and no
	 * other thread's death is the child's (its records are emptied). */
	for (struct slot *s = atomic_load(&slots); s; s = s->next) {
		if (s == mine)
			continue;
		atomic_store(&s->depth, 0);
		atomic_store(&s->taken, false);
	}
	atomic_store(&writing, 0);
	alone = 0;
	cumemcap_xmutex_fork_child(&writer);
	/* The child registers on its own, or goes back to exchanges. */
	if (atomic_load(&asymmetric) && !membarrier_register()) {
		atomic_store(&asymmetric, false);
		if (mine)
			atomic_store(&mine->plain, false);
	}
}

void cumemcap_death_lock_no_membarrier(void)
{
	membarrier_off = true;
}

bool cumemcap_death_lock_asymmetric(void)
{
	return atomic_load(&asymmetric);
}

unsigned long cumemcap_death_lock_barriers(void)
{
	return atomic_load_explicit(&barriers, memory_order_relaxed);
}
