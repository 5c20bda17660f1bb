/* hooks: what the exported entry points share: the readiness check, the
 * macros that shape every hook, the start deferred to the first (setup.c).
 *
 * Thread safety: cumemcap_set_up is written once, with release order,
 * after setup.c's pthread_once, and read with one acquire load per hook. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "account/account.h"
#include "driver/driver.h"
#include "platform/export.h"
#include "state/death-lock.h"
#include "log/log.h"

/* The driver is loaded and the upcalls are registered (setup.c). */
extern _Atomic bool cumemcap_set_up;
bool cumemcap_ready_slow(void);
static inline bool cumemcap_ready(void)
{
	return __builtin_expect(atomic_load_explicit(&cumemcap_set_up, memory_order_acquire), 1) ||
	       cumemcap_ready_slow();
}

/* Every hook starts here; the log sees each thread that uses CUDA. */
#define NEED(sym)                                               \
	do {                                                    \
		cumemcap_log_thread();                          \
		if (!cumemcap_ready() || !real_##sym)           \
			return CUDA_ERROR_NOT_INITIALIZED;      \
	} while (0)

static inline void cumemcap_death_lock_cleanup(int *unused)
{
	cumemcap_death_unlock_read();
}

/* Hold the death lock as a reader to the end of the block, across the
 * driver call too: no context dies while the hook uses the records. */
#define HOLD_DEATH_LOCK()                                                          \
	int cumemcap_death_lock_held_                                              \
		__attribute__((cleanup(cumemcap_death_lock_cleanup), unused)) = \
			(cumemcap_death_lock_read(), 0)

/* The entry point `name` (parameters `params`, in parentheses) that, past
 * NEED, returns `call`. LOCKED_ENTRY holds the death lock across it. */
#define ENTRY(name, params, call)                                                                  \
	CUMEMCAP_EXPORT CUresult CUDAAPI name params                                               \
	{                                                                                          \
		NEED(name);                                                                        \
		return call;                                                                       \
	}
#define LOCKED_ENTRY(name, params, call)                                                           \
	CUMEMCAP_EXPORT CUresult CUDAAPI name params                                               \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		return call;                                                                       \
	}

/* A locked entry point: `before`, the real call with `args`, then `after`
 * when that succeeded (a pool or a graph gone, memory trimmed). */
#define LOCKED_ENTRY_AROUND(name, params, args, before, after)                                     \
	CUMEMCAP_EXPORT CUresult CUDAAPI name params                                               \
	{                                                                                          \
		NEED(name);                                                                        \
		HOLD_DEATH_LOCK();                                                                 \
		before;                                                                            \
		CUresult r = real_##name args;                                                     \
		if (r == CUDA_SUCCESS)                                                             \
			after;                                                                     \
		return r;                                                                          \
	}

/* Declare the charge `c` of `bytes` of `kind` on `dev` (-1: the current
 * context's device) and begin it, returning a refusal. */
#define CHARGE(c, dev, kind, bytes)                                                                \
	struct cumemcap_charge c;                                                                  \
	do {                                                                                       \
		CUresult r_ = cumemcap_account_charge_begin(&c, __func__, dev, kind, bytes);       \
		if (r_ != CUDA_SUCCESS)                                                            \
			return r_;                                                                 \
	} while (0)

/* The first hook runs `start` once, before it opens the driver. False when
 * a hook came first: the constructor (shim.c) then runs `start` itself. */
bool cumemcap_setup_defer_start(void (*start)(void));

/* Fork child: a fresh primary-context mutex for hooks-ctx.c. */
void cumemcap_hooks_ctx_fork_child(void);
