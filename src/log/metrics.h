/* log/metrics: the Prometheus text file (CUMEMCAP_METRICS), a family per
 * figure with a Prometheus name, a series per GPU; dead writers swept.
 *
 * Thread safety: the name is claimed once under log_metrics_lock (held
 * across fork); only the worker writes the file. The exit path, maybe a
 * signal handler, turns log_metrics_state off and removes the file
 * (log_metrics_unlink is async-signal-safe). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "log/records.h"

extern _Atomic int log_metrics_state; /* CLOSED, OPEN, OFF (file.h) */
extern pthread_mutex_t log_metrics_lock;
/* The Downward API's variables, read once (the constructor). */
void log_metrics_init(void);
/* Take the name (its companion locked; suffixed while a live writer has
 * it) if nobody has yet; no lock of the log's held. */
void log_metrics_claim(void);
/* The path taken (after log_metrics_claim; "" when none). */
const char *log_metrics_path(void);
/* Write the file anew with these figures. */
void log_write_metrics(const struct gpu_figures *all, int n);
/* The file and its companion go away, quietly. */
void log_metrics_unlink(void);
/* After fork, in the child: a name of its own to come. */
void log_metrics_fork_child(void);
