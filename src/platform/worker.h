/* worker: the shim's one background thread.
 *
 * Started the first time a GPU is used, with every signal blocked so the
 * program's signals never land on it. It calls the ticks the layers above
 * registered (entry/setup.c) in that order, waking when the earliest says
 * it next needs to, and at least every second. A forked child starts its
 * own on its first GPU use.
 *
 * Thread safety: registration takes the worker's mutex; ticks are
 * published with release stores and read with acquire loads. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A tick: do what is due at `now_ms` (CLOCK_MONOTONIC milliseconds, as
 * cumemcap_now_ms) and return the milliseconds until it next needs a call
 * (UINT32_MAX: none). Runs on the worker thread; takes its own locks. */
typedef uint32_t (*cumemcap_tick_fn)(uint64_t now_ms);

/* Add a tick (at most CUMEMCAP_WORKER_TICKS; registering one twice is a
 * no-op). Returns false when there is no room. */
#define CUMEMCAP_WORKER_TICKS 8
bool cumemcap_worker_register(cumemcap_tick_fn tick);

/* Make sure the thread runs. */
void cumemcap_worker_start(void);

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t cumemcap_now_ms(void);

/* The process is exiting: the thread stops calling the driver. */
void cumemcap_worker_stop(void);

/* Fork handlers. */
void cumemcap_worker_lock(void);
void cumemcap_worker_unlock(void);
void cumemcap_worker_fork_child(void);
