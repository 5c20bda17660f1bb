/* log: the per-process footprint log (CUMEMCAP_LOG, CUMEMCAP_METRICS):
 * JSON Lines records (docs/footprint-log.md) or stderr lines, samples,
 * the Prometheus file, the exit summary and the fatal-signal handlers
 * that write it. Every function is thread-safe, never calls CUDA, never
 * blocks a hook longer than a copy and never lets an I/O error reach the
 * program (a failed write turns logging off, said once on stderr).
 * `door`: the entry point a request came through ("cuMemAlloc_v2"). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "platform/export.h"

/* The library constructor: policy is built, nothing else is done yet. */
void cumemcap_log_init(void);

/* Instead of cumemcap_log_init, in a constructor that defers the rest:
 * read only the environment (TMPDIR, the Downward API's variables) now;
 * `policy_built`: the policy says whether the template is the default. */
void cumemcap_log_take_env(bool policy_built);

/* A GPU became known; the first call writes the start record. */
void cumemcap_log_device(int dev);

/* The arenas took (taken=true) or gave back a segment of `bytes`. */
void cumemcap_log_segment(int dev, bool taken, uint64_t bytes);

/* A request refused at the limit (after releasing cached segments). */
void cumemcap_log_refusal(int dev, const char *door, uint64_t requested);

/* A request waited `waited_ms` for room at a limit (CUMEMCAP_ON_LIMIT=wait),
 * then was granted or, at its deadline, refused. */
void cumemcap_log_wait(int dev, const char *door, uint64_t requested, uint64_t waited_ms, bool granted);

/* uid changed the group's limit on the GPU `uuid` (dev: our ordinal, or
 * -1) at time_ns from old to new (CUMEMCAP_BOOK_NONE: none). */
void cumemcap_log_group_change(int dev, const unsigned char uuid[16], uint64_t time_ns, unsigned uid,
			       uint64_t old_limit, uint64_t new_limit);

/* The driver itself answered CUDA_ERROR_OUT_OF_MEMORY. */
void cumemcap_log_driver_oom(int dev, const char *door, uint64_t requested);

/* Where dev's overhead is learned from (footprint.h), and one context's
 * (delta, estimate; nvml: null). */
void cumemcap_log_overhead(int dev, const char *source, uint64_t per_context);

/* A context on `dev` died (`event`: "destroyed", "reset", "released"),
 * freeing `live` bytes in `blocks` allocations and `held` segment bytes. */
void cumemcap_log_context(int dev, const char *event, uint64_t live, uint64_t held, uint64_t blocks);

/* From the worker thread: write a sample if one is due. Returns the
 * milliseconds until the next is due (UINT32_MAX: none). */
uint32_t cumemcap_log_tick(uint64_t now_ms);

/* exit() from any thread: the exit summary, unless a signal handler wrote it. */
void cumemcap_log_exit(void);

/* At a normal exit of the process the launcher exec'd (CUMEMCAP_LAUNCHED:
 * its pid), one stderr line says where its log went or that it used no
 * GPU; nothing for a stderr or no log, or under secure execution. */
void cumemcap_log_say_where(void);

/* The log's locks are held across fork(); the child starts a log of its own. */
void cumemcap_log_fork_prepare(void);
void cumemcap_log_fork_parent(void);
void cumemcap_log_fork_child(void);

/* The SIGBUS handler alone, before a group's book is mapped, so that a book
 * cut under the mapping never kills the program (the others: at first use). */
void cumemcap_log_arm_sigbus(void);

/* Every hook calls this: once armed, give the thread an alternate signal
 * stack (for a stack overflow's exit record). Inline: one thread-local load
 * when done, since it is on every hook's path. */
extern _Atomic bool cumemcap_log_signals_armed;
extern CUMEMCAP_TLS bool cumemcap_log_thread_seen;
void cumemcap_log_thread_slow(void);
static inline void cumemcap_log_thread(void)
{
	if (__builtin_expect(!cumemcap_log_thread_seen, 0) &&
	    atomic_load_explicit(&cumemcap_log_signals_armed, memory_order_acquire))
		cumemcap_log_thread_slow();
}
