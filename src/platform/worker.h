/* worker: the shim's one background thread.
 *
 * Started lazily the first time a GPU is used (a process that never uses
 * CUDA gets no thread), with every signal blocked so the program's signals
 * never land on it. It wakes when the arenas (idle release) or the log
 * (samples) next need it, at most every second, and calls their tick
 * functions. A forked child starts its own on its first GPU use. */
#pragma once

#include <stdint.h>

/* Make sure the thread runs (cheap after the first call). */
void cumemcap_worker_start(void);

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t cumemcap_now_ms(void);

/* The process is exiting: the thread stops calling the driver. */
void cumemcap_worker_stop(void);

/* Fork handlers. */
void cumemcap_worker_lock(void);
void cumemcap_worker_unlock(void);
void cumemcap_worker_fork_child(void);
