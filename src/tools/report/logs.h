/* logs: reading footprint logs (schema v1 and v2) into what cumemcap report shows
 * (logs.c), and the model they are read into (model.c).
 *
 * Owns the files: reading them a line at a time (a line is at most
 * REPORT_MAX_LINE bytes, so memory per line is bounded), the one-line
 * warnings for lines that are skipped ("FILE:LINE: ..."), the meaning of
 * each record type, and the model below: processes, each with the GPUs it
 * used, their peaks and counters and the time series a plot draws.
 *
 * Schema v1, one JSON object per line, each with "v":1, "type", "t" (unix
 * seconds) and "pid"; types start, segment, refusal, driver_oom, context,
 * overhead, sample, exit (see docs/footprint-log.md). Schema v2 ("v":2)
 * keeps all of v1 and adds "time" (RFC 3339), "program" and "host" to
 * every record and "uuid" and "index" (nvidia-smi's) to every per-GPU
 * object: they fill in what a log without its start record lacks. A member
 * of a group (docs/groups.md) names it in its start record ("group":
 * {"name", ...}) and gives the group's budget and use on each GPU in its
 * samples ("group_limit", "group_used", "group_held") and exit record;
 * a "group_change" record says the budget changed. Logs written before
 * the footprint cap have no footprint or overhead figures, which are then
 * unknown. Unknown fields and unknown types are
 * ignored; a known field of the wrong type skips its record with a warning;
 * a missing or null figure is unknown. Byte counts are read exactly
 * (uint64), never through a double.
 *
 * Single-threaded. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "logfile.h"

#define REPORT_MAX_LINE (1024 * 1024)

/* Warnings about skipped lines stop after this many per file (a count of
 * the rest follows). */
#define REPORT_MAX_WARNINGS 10

enum report_series_kind {
	REPORT_LIVE,     /* bytes the program holds */
	REPORT_POOLED,   /* freed by the program, kept in the shim's pools */
	REPORT_RESERVED, /* reserved from the driver */
	REPORT_FOOTPRINT, /* reserved + overhead: what the limit counts */
	REPORT_DRIVER,   /* what the driver (NVML) says the process uses */
	REPORT_SERIES,
};

struct report_point {
	double t; /* unix seconds */
	uint64_t v;
};

struct report_series {
	struct report_point *p;
	size_t n, cap;
};

/* A figure that may be unknown. */
struct report_figure {
	uint64_t v;
	bool known;
};

/* A refusal at the limit, or a CUDA_ERROR_OUT_OF_MEMORY from the driver. */
struct report_mark {
	double t;
	uint64_t requested;
	bool driver_oom;
	struct report_figure at; /* the footprint (else reserved) the record gives */
};

enum report_limit {
	REPORT_LIMIT_UNKNOWN, /* no record said */
	REPORT_LIMIT_NONE,    /* the log says null: no limit on this GPU */
	REPORT_LIMIT_SET,
};

struct report_gpu {
	long long ordinal;
	long long index;         /* nvidia-smi's index (schema v2); -1 unknown */
	char *uuid, *pci;        /* NULL when unknown */
	struct report_figure capacity;
	enum report_limit limit_state;
	uint64_t limit;

	/* The max of the exit record's peaks and what samples and events show. */
	struct report_figure peak_live, peak_pooled, peak_reserved, peak_footprint, peak_driver;
	struct report_figure overhead;     /* max of the samples' and exit's overhead */
	char *overhead_source;             /* the last source other than "none"; NULL */
	struct report_figure context_max;  /* max of the samples' context_overhead */
	struct report_figure exit_reserved; /* the exit record's own peaks */
	struct report_figure exit_driver;

	/* The group's budget on this GPU: the last one a record gave (SET), or
	 * null in a record that has the field (NONE). */
	enum report_limit group_limit_state;
	uint64_t group_limit;
	struct report_figure peak_group_used; /* what all members held at once */
	struct report_figure peak_group_held; /* this process's share of it */
	struct report_series group_used;      /* the samples' group_used */

	uint64_t refusal_events, oom_events;
	struct report_figure exit_refusals, exit_ooms, avoided, allocs;
	bool used; /* the process touched this GPU (anything above zero) */
	bool excluded; /* left out by --gpu */

	struct report_series series[REPORT_SERIES];
	struct report_mark *marks;
	size_t nmarks, cap_marks;
};

struct report_process {
	const char *file; /* the log it was read from (the caller's string) */
	size_t seq;       /* the order processes were met in */
	long long pid;
	bool has_start;
	double t_start;          /* the start record's t */
	double t_first, t_last;  /* over all its records */
	size_t records;

	char *program, *host, *version; /* NULL when unknown */
	char *group;             /* the group it was a member of; NULL: none or unknown */
	bool has_uid;
	long long uid;           /* the start record's */
	char **argv;
	size_t argc;

	bool has_exit;
	double t_exit;
	char *exit_reason;
	bool has_signal;
	long long exit_signal;

	/* No exit record, and the process is still alive on this host (the
	 * same pid, started no later than its start record: not a reuse). */
	bool running;
	bool here; /* its start record names this host */

	struct report_gpu *gpus;
	size_t ngpus, cap_gpus;
};

struct report_set {
	struct report_process **procs;
	size_t n, cap;
	size_t seq;
};

/* Read every record of the log at `path` ("-": standard input) into `set`. Lines that are not
 * records get a warning on stderr. `records_out` gets how many records
 * this file gave. */
enum report_read report_logs_read(struct report_set *set, const char *path,
				  enum report_source source, size_t *records_out);

/* After the last file: merge a process given twice (same pid and start
 * time; the copy with more records wins, a note on stderr), order the
 * processes by start and their GPUs by ordinal, sort each series by time
 * and work out which GPUs each process used. */
void report_logs_finish(struct report_set *set);

void report_logs_free(struct report_set *set);

/* What --gpu, --program and --since keep. */
struct report_filter {
	long long gpu_number;  /* nvidia-smi's index (else the ordinal); -1: any */
	const char *gpu_uuid;  /* a UUID or its start ("GPU-" optional); NULL: any */
	const char *program;   /* a glob (fnmatch) on the program name; NULL: any */
	bool has_since;
	double since;          /* Unix seconds: a process whose last record is earlier goes */
};

/* Drop the processes the filter leaves out, and mark the GPUs --gpu does
 * not name as excluded (no row, no panel). */
void report_filter(struct report_set *set, const struct report_filter *f);

/* Whether the process that wrote `p` still runs: no exit record, a start
 * record from this host, and /proc/PID a process that started no later
 * than that record (a pid reused since started after the logging process
 * ended, so after its start record). */
bool report_process_alive(const struct report_process *p);
/* Whether the log's host is this one (gethostname). */
bool report_process_here(const struct report_process *p);

/* The time a process's plot starts at and the time its last record has. */
double report_process_t0(const struct report_process *p);

/* Context overhead: the overhead the limit counted when the log says where
 * it was learned (`*source` gets that source, else NULL), else the samples'
 * context_overhead maximum, else the exit record's peak_driver_used -
 * peak_reserved (0 when below), else unknown. */
struct report_figure report_gpu_context(const struct report_gpu *g, const char **source);

/* Whether the table and the plot show GPU i of p: one the process used,
 * or every GPU it has when it used none. */
bool report_gpu_shown(const struct report_process *p, size_t i);
