/* worker: the shim's one background thread, started at the first GPU use
 * (a forked child's too) with every signal blocked. It calls the registered
 * ticks in order, when the earliest needs it and at least every second.
 * Thread safety: registration takes the worker's mutex; ticks are
 * published with release stores and read with acquire loads. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* A tick: do what is due at `now_ms` (cumemcap_now_ms) and return the ms
 * until it next needs a call. Runs on the worker thread; takes its locks. */
typedef uint32_t (*cumemcap_tick_fn)(uint64_t now_ms);

/* Add a tick (one already there: a no-op); false when there is no room. */
#define CUMEMCAP_WORKER_TICKS 8
bool cumemcap_worker_register(cumemcap_tick_fn tick);

void cumemcap_worker_start(void);

/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t cumemcap_now_ms(void);

/* At exit: the thread stops calling the driver. */
void cumemcap_worker_stop(void);

/* Fork handlers. */
void cumemcap_worker_lock(void);
void cumemcap_worker_unlock(void);
void cumemcap_worker_fork_child(void);
