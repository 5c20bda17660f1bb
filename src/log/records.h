/* log/records: the text of the log's records (docs/footprint-log.md) in
 * a caller's struct out: the start record, the shared head, a GPU's
 * identity and figures, the samples, the exit record, the stderr summary.
 *
 * Thread and signal safety: no locks. The start record is built under
 * log.c's open lock, samples by the worker, the exit record and summary
 * by the exit's one claimant, maybe in a fatal-signal handler:
 * log_exit_record, log_stderr_summary, log_used_gpu, log_begin and
 * log_put_gpu are async-signal-safe. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "log/format.h"
#include "state/figures.h"

/* The host name ("" when unknown). */
extern char log_host[256];

/* Format the process's identity in every record (pid, program, host)
 * and start the NVML peaks over: before the first record, in a fork child. */
void log_identity(void);

/* {"v":2,"type":...,"t":...,"time":...,"pid":...,"program":...,"host":... */
void log_begin(struct out *o, const char *type);
/* "gpu":N,"uuid":...,"index":... of a GPU (a comma first unless `first`). */
void log_put_gpu(struct out *o, int dev, bool first);
/* nvidia-smi's index of GPU dev, as NVML said; -1 when not known. */
int log_gpu_index(int dev);
/* Whether NVML loads, and each known GPU's index: asked with no lock held
 * (NVML may call into the driver, whose lock fork() takes before ours). */
void log_probe_nvml(void);
/* An event record's figures (`event` in figures.h). */
void log_put_figures(struct out *o, int dev);
/* The start record of the file at `path` (metrics: NULL for none). */
void log_start_record(struct out *o, const char *path, const char *metrics, uint32_t interval_ms);

/* A GPU's figures for a sample and the metrics. */
struct gpu_figures {
	int dev;
	struct cumemcap_figures f;
	char uuid[48];
};
/* Every known GPU's figures, NVML's included (the worker); the count. */
int log_gather(struct gpu_figures *all);
/* `dropped`: the event records over the rate so far. */
void log_sample_record(struct out *o, const struct gpu_figures *all, int n, uint64_t dropped);

/* Whether any GPU saw an allocation, free, refusal or driver OOM. */
bool log_used_gpu(void);
/* One stderr line per GPU that saw an allocation or refusal. */
void log_stderr_summary(void);
/* The exit record; `signal_name` is signo's (NULL: none known). */
void log_exit_record(struct out *o, int signo, const char *signal_name, uint64_t samples, uint64_t dropped);
