/* spin: the shim's spinlock, for sections of a few dozen instructions.
 *
 * Test-and-set on an atomic_flag, yielding after 64 failed tries so that
 * a preempted holder gets the CPU back. Acquire/release; not recursive. */
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
