/* log-internal: what the log's files share; nothing outside src/log/
 * includes it.
 *
 * The log is split by concern (log.c says which file owns what). Each
 * declaration below says who writes it; how each file is thread-safe and
 * async-signal-safe is in its own opening comment. In short: the
 * formatter (struct out) has no state; the file is opened once under
 * log_open_lock and written with one write(2) per record, no lock; samples
 * and the metrics file are the worker's, under tick_lock (log.c); the exit
 * path runs at most once and may run in a fatal-signal handler, so all it
 * calls is async-signal-safe. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "state/figures.h"

/* ---- format.c: the async-signal-safe writer --------------------------------------------- */

/* An event record's buffer: its head carries the program and host names,
 * JSON-escaped (up to six bytes each of theirs). */
#define LOG_EVENT_BUF 4096

struct out {
	char *p;
	size_t cap, len;
	int flush_fd; /* >= 0: write out when full instead of cutting */
	bool lost;    /* something did not fit or could not be written */
};

#define OUT(buf) { .p = (buf), .cap = sizeof(buf), .len = 0, .flush_fd = -1, .lost = false }

bool out_write_all(int fd, const char *b, size_t n);
void out_put(struct out *o, const char *s, size_t n);
void out_str(struct out *o, const char *s);
/* The text so far as a C string (its last byte gives way when full). */
const char *out_cstr(struct out *o);
void out_u(struct out *o, uint64_t v);
/* Milliseconds as seconds with three decimals: 5000 -> 5.000. */
void out_ms(struct out *o, uint64_t ms);
void out_u_or_null(struct out *o, bool known, uint64_t v);
/* What cumemcap_fmt_size writes: "512 MiB", "1.50 GiB", "4096 B"... */
void out_size(struct out *o, uint64_t bytes);
/* A JSON string; bytes that are not UTF-8 become U+FFFD. */
void out_json_n(struct out *o, const char *str, size_t n);
void out_json(struct out *o, const char *s);
/* A Prometheus label value, quoted and escaped, of at most `max` bytes of s. */
void out_label_value(struct out *o, const char *s, size_t n, size_t max);
/* "2026-11-23T10:15:02.123Z", quoted (RFC 3339, UTC). */
void out_time(struct out *o, uint64_t unix_ms);
/* ,"key": */
void out_key(struct out *o, const char *k);
void out_errno(struct out *o, int e);
/* "cumemcap: <o>\n" on stderr, one write. */
void out_say(struct out *o);

/* ---- log.c: the policy's answers and the process's counts ------------------------------ */

enum { CLOSED = 0, OPEN, OFF };

/* Copied once from the policy (log.c; a signal handler reads these). */
extern uint32_t log_interval_ms;
extern bool log_metrics_wanted;

extern _Atomic bool log_exit_claimed;       /* the exit summary is being written */
extern _Atomic uint64_t log_samples_written;
extern _Atomic uint64_t log_events_dropped; /* event records over the rate */
/* Highest NVML figure seen per GPU, plus one (0: never known). */
extern _Atomic uint64_t log_peak_driver[];

/* ---- file.c: paths, directories, the file ---------------------------------------------- */

extern pthread_mutex_t log_open_lock;
extern _Atomic int log_file_state; /* CLOSED, OPEN, OFF */
extern char log_file_path[];

/* "/tmp/cumemcap-%u/%n.%h.%p.jsonl" -> a path; false if too long. */
bool log_expand(const char *tmpl, char *dst, size_t len);

/* Why log_resolve_dir failed: a sentence about `dir` and an errno (0: none). */
struct dir_failure {
	const char *what; /* "cannot create", "is a symbolic link", ... */
	int err;
	uid_t owner;      /* "is owned by uid" */
};

/* The directory `dir`, walked from the root and checked (file.c says
 * how); an O_DIRECTORY descriptor or -1. Async-signal-safe. */
int log_resolve_dir(const char *dir, bool create, char *at, size_t atcap, struct dir_failure *fail);
/* Put why log_resolve_dir failed on `dir`. */
void log_put_failure(struct out *o, const char *dir, const char *at, const struct dir_failure *f);
/* One stderr line: "SUBJECT PATH: WHAT[: errno text]; OFF", where the
 * errno text is left out for `err` 0 (and ": " for an empty `what`). */
void log_say_off(const char *subject, const char *path, const char *what, int err, const char *off);

/* TMPDIR, read once (the constructor): the default template's directory
 * is under it instead of /tmp when it is set (not in secure execution). */
void log_file_init(void);
/* log_file_init's for a policy of defaults, without asking for it (the
 * policy is then built at first use; cumemcap_log_start_env). */
void log_file_capture(void);
/* The environment's part of the snapshot was taken at start
 * (cumemcap_log_start_env, cumemcap_log_policy_env): written before
 * main, read after. */
extern bool log_env_taken;

/* Open the file (and write the start record) if nobody has yet. */
void log_ensure_open(void);
/* Write a whole record if the file is open; a failure turns logging off.
 * Async-signal-safe. */
void log_emit(struct out *o);
/* After fork, in the child: close the parent's file, state CLOSED. */
void log_file_fork_child(void);

/* ---- records.c: the records --------------------------------------------------------------- */

/* A GPU's figures for a sample and the metrics. */
struct gpu_figures {
	int dev;
	struct cumemcap_figures f;
	char uuid[48];
};

/* {"v":2,"type":...,"t":...,"time":...,"pid":...,"program":...,"host":...
 * and the closing }\n (log_identity formats the last three once: at the
 * first record, and again in a fork child). */
void log_identity(void);
extern char log_host[256];
void log_begin(struct out *o, const char *type);
/* "gpu":N,"uuid":...,"index":... of a GPU (a comma first unless `first`),
 * and nvidia-smi's index of it as NVML said (log_learn_indexes asks NVML,
 * with no lock held; the worker's gather asks for the GPUs it samples). */
void log_put_gpu(struct out *o, int dev, bool first);
bool log_gpu_index(int dev, unsigned *index);
void log_learn_indexes(void);
void log_end(struct out *o);
void log_start_record(struct out *o);
/* Whether NVML loads, for the start record: asked by log_probe_nvml with
 * no lock held (NVML may call into the driver, whose lock fork() takes
 * before the log's); -1 until then (the record then says null). */
extern _Atomic int log_nvml_loads;
void log_probe_nvml(void);
/* An event record's figures (`event` in figures.h). */
void log_put_figures(struct out *o, int dev);
/* Every known GPU's figures, NVML's included (the worker); the count. */
int log_gather(struct gpu_figures *all);
void log_sample_record(const struct gpu_figures *all, int n);
/* Whether any GPU saw an allocation, free, refusal or driver OOM. */
bool log_used_gpu(void);
void log_stderr_summary(void);
void log_exit_record(int signo);

/* ---- metrics.c: the Prometheus file ---------------------------------------------------- */

extern _Atomic int log_metrics_state; /* CLOSED, OPEN, OFF */
/* Take the metrics file's name (its companion locked, a suffix when a
 * live writer has it) if nobody has yet; any thread, no lock of the log's
 * held (takes metrics.c's). */
void log_metrics_claim(void);
/* The path taken (after log_metrics_claim; "" when none). */
const char *log_metrics_path(void);
void log_write_metrics(const struct gpu_figures *all, int n);
/* The file and its companion go away (async-signal-safe). */
void log_metrics_unlink(void);
/* The Downward API's variables, read once (the constructor). */
void log_metrics_init(void);
void log_metrics_fork_prepare(void);
void log_metrics_fork_parent(void);
void log_metrics_fork_child(void);

/* ---- sweep.c: the metrics files of dead writers ---------------------------------------- */

#define SWEEP_SUFFIX ".cumemcap-lock"
/* ".NAME.cumemcap-lock" into out; false when it does not fit. */
bool log_sweep_companion(const char *name, char *out, size_t cap);
/* Create and lock the companion `companion` in dfd (a dead writer's is
 * swept first): its descriptor (held for life; *held its identity), or
 * -EEXIST when a live writer has it, or -errno. */
int log_sweep_claim(int dfd, const char *companion, struct stat *held);
/* Remove the files of a dead writer whose companion is `companion`;
 * whether it did. */
bool log_sweep_one(int dfd, const char *companion);
/* Sweep every companion in dfd but `mine`. */
void log_sweep_dir(int dfd, const char *mine);
/* Whether `name` in dfd is there and another user's (of any file type):
 * not one a writer may replace. */
bool log_sweep_others(int dfd, const char *name);
/* Remove `name` in dfd if it is a regular file of the effective uid's
 * (never what a link points at, never another user's file).
 * Async-signal-safe. */
void log_sweep_unlink_mine(int dfd, const char *name);

/* NAME with ".N" before its extension (N > 0): "x.jsonl" -> "x.1.jsonl",
 * "x" -> "x.1" (file.c). False when it does not fit. */
bool log_suffixed(const char *name, unsigned n, char *out, size_t cap);

/* ---- signals.c: fatal signals ----------------------------------------------------------- */

/* Install the fatal-signal handlers (once) and this thread's stack. */
void log_arm_signals(void);
/* "SIGSEGV" for a fatal signal the handlers know; NULL otherwise. */
const char *log_signal_name(int signo);
