/* hooks: what the files of exported entry points share: the readiness
 * check, NEED and SECTION that open every hook, and FORWARD_NOTING.
 *
 * Thread safety: cumemcap_set_up is written once, with release order, after
 * setup.c's pthread_once, and read with one acquire load per hook; SECTION
 * makes the rest of a hook a reader section of the life lock (life.h). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "driver/driver.h"
#include "state/life.h"
#include "log/log.h"

/* The driver is loaded and the upcalls are registered (entry/setup.c). */
extern _Atomic bool cumemcap_set_up;
bool cumemcap_ready_slow(void);
static inline bool cumemcap_ready(void)
{
	return __builtin_expect(atomic_load_explicit(&cumemcap_set_up, memory_order_acquire), 1) ||
	       cumemcap_ready_slow();
}

/* Without a driver there is nothing to forward to. Every hook starts
 * here: the place where the log sees each thread that uses CUDA through
 * the shim (cumemcap_log_thread: an alternate signal stack). */
#define NEED(sym)                                               \
	do {                                                    \
		cumemcap_log_thread();                          \
		if (!cumemcap_ready() || !real_##sym)           \
			return CUDA_ERROR_NOT_INITIALIZED;      \
	} while (0)

static inline void cumemcap_section_end(int *unused)
{
	(void)unused;
	cumemcap_life_exit();
}

/* The rest of the enclosing block is a reader section of the life lock
 * (life.h): no context dies while the hook reads or changes the books,
 * including across its driver call. It ends when the block is left, by
 * any return. */
#define SECTION()                                                                 \
	int cumemcap_section_ __attribute__((cleanup(cumemcap_section_end), unused)) = \
		(cumemcap_life_enter(), 0)

/* Return what `call` (a real entry point) answers; when that is success,
 * run `note` first: the shim learns what the driver did (a pool or a
 * graph that is gone, memory trimmed). */
#define FORWARD_NOTING(call, note)                      \
	do {                                            \
		CUresult r_ = (call);                   \
		if (r_ == CUDA_SUCCESS)                 \
			note;                           \
		return r_;                              \
	} while (0)

/* Fork child: a fresh primary-context mutex for hooks-ctx.c. */
void cumemcap_hooks_ctx_fork_child(void);
