/* log/signals: the end of the process. The exit summary is written once,
 * by whoever claims it first: the library destructor (cumemcap_log_exit)
 * or the handler of a fatal signal. The handlers are installed at the
 * first GPU use; every thread the shim sees after that gets an alternate
 * signal stack, so that a stack overflow still writes the exit record.
 *
 * Thread and signal safety: the claim is one atomic exchange; the exit
 * path is async-signal-safe (no malloc, no stdio, no locks). The handlers
 * are installed once (an atomic flag); alternate stacks are per thread. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

#include "platform/export.h"

/* The exit summary is being written (or was). */
extern _Atomic bool log_exit_claimed;
/* Claim the exit and write its summary: the stderr lines or the exit
 * record (`signo` != 0: the fatal signal), and remove the metrics file. */
void log_exit_once(int signo);
/* Install the fatal-signal handlers (once) and this thread's stack. */
void log_arm_signals(void);

/* Install the SIGBUS handler alone, before a group's book is mapped (see
 * signals.c); the rest come at the first GPU use. */
void cumemcap_log_arm_sigbus(void);

/* The calling thread entered the shim (every hook calls this): once the
 * fatal-signal handlers are armed, give it an alternate signal stack if it
 * has none, so a stack overflow still writes the exit record. One
 * thread-local load when done. */
extern _Atomic bool cumemcap_log_signals_armed;
extern CUMEMCAP_TLS bool cumemcap_log_thread_seen;
void cumemcap_log_thread_slow(void);
static inline void cumemcap_log_thread(void)
{
	if (__builtin_expect(!cumemcap_log_thread_seen, 0) &&
	    atomic_load_explicit(&cumemcap_log_signals_armed, memory_order_relaxed))
		cumemcap_log_thread_slow();
}
