/* spin: the shim's spinlock (the arenas, the track map, the streams).
 *
 * A test-and-set lock on an atomic_flag that yields the thread
 * (sched_yield) after 64 failed tries: the sections it guards are a few
 * dozen instructions, and a holder that was preempted gets the CPU back.
 * Acquire on lock, release on unlock; no owner, not recursive. */
#pragma once

#include <sched.h>
#include <stdatomic.h>

static inline void cumemcap_spin_lock(atomic_flag *f)
{
	for (unsigned spins = 0; atomic_flag_test_and_set_explicit(f, memory_order_acquire); spins++)
		if (spins >= 64)
			sched_yield();
}

static inline void cumemcap_spin_unlock(atomic_flag *f)
{
	atomic_flag_clear_explicit(f, memory_order_release);
}
