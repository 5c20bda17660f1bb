/* figures: the one declaration of a device's figures.
 *
 * Each figure is one X(name, src, stats, field = value, ...) line, in output
 * order; the ledger's storage, cumemcap_get_stats and every log output
 * (records, samples, exit record, stderr summary, Prometheus) are made from
 * it. No state, nothing to lock.
 *
 *   name    CUMEMCAP_FIG_<name>; a field of struct cumemcap_stats when `stats` is 1.
 *   src     `atomic` (an atomic of the device), `arenas` (that plus each open
 *           arena's part) or `other` (not stored: the footprint, the group's
 *           figures, and those their owner fills, CUMEMCAP_FIGURE_NONE here).
 * The named fields are struct cumemcap_figure_info's (below). */
#pragma once

#include <stdint.h>

/* clang-format off */
#define CUMEMCAP_FIGURES(X) \
	X(live, arenas, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .event = 1, .sample = 1, .exit = 2, \
	  .key = "live", .prom = "cumemcap_live_bytes", \
	  .help = "Device memory the program holds (its allocations).") \
	X(pooled, arenas, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .event = 1, .sample = 1, .key = "pooled", \
	  .prom = "cumemcap_pooled_bytes", .help = "Arena segment bytes cached for reuse, not handed out.") \
	X(reserved, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .event = 1, .sample = 1, .exit = 2, \
	  .summary = 2, .key = "reserved", .pre = ", held at exit ", .prom = "cumemcap_reserved_bytes", \
	  .help = "Device memory this process holds from the driver through the calls it counts.") \
	X(footprint, other, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .event = 1, .sample = 1, .exit = 2, \
	  .key = "footprint", .prom = "cumemcap_footprint_bytes", \
	  .help = "What the driver holds for this process: reserved + overhead; what the limit counts by default.") \
	X(overhead, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .sample = 1, .exit = 2, .key = "overhead", \
	  .prom = "cumemcap_overhead_bytes", \
	  .help = "Driver-side memory outside the counted calls (contexts, modules), as last learned.") \
	X(pool, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .sample = 1, .key = "async_reserved", \
	  .prom = "cumemcap_async_reserved_bytes", .help = "Of which stream-ordered pools reserve.") \
	X(graph, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .sample = 1, .exit = 2, \
	  .key = "graph_reserved", .prom = "cumemcap_graph_reserved_bytes", \
	  .help = "Of which graph memory pools reserve (CUDA graphs' memory nodes).") \
	X(driver_used, other, 0, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .null = 1, .sample = 1, .key = "driver_used", \
	  .prom = "cumemcap_driver_used_bytes", \
	  .help = "What NVML (nvidia-smi) says the process uses, contexts included.") \
	X(context_overhead, other, 0, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .null = 1, .sample = 1, \
	  .key = "context_overhead", .prom = "cumemcap_context_overhead_bytes", \
	  .help = "driver_used - reserved: contexts and driver memory outside the calls counted.") \
	X(limit, atomic, 1, \
	  .kind = CUMEMCAP_FK_setting, .unit = CUMEMCAP_FU_bytes, .null = 1, .exit = 1, .summary = 1, \
	  .key = "limit", .pre = "limit ", .prom = "cumemcap_limit_bytes", \
	  .help = "The limit on this GPU (absent when none).") \
	X(peak_live, arenas, 1, \
	  .kind = CUMEMCAP_FK_peak, .unit = CUMEMCAP_FU_bytes, .exit = 1, .key = "peak_live") \
	X(peak_pooled, arenas, 0, \
	  .kind = CUMEMCAP_FK_peak, .unit = CUMEMCAP_FU_bytes, .exit = 1, .key = "peak_pooled") \
	X(total, other, 1, \
	  .kind = CUMEMCAP_FK_setting, .unit = CUMEMCAP_FU_bytes, .summary = 1, .key = "capacity", \
	  .pre = " of ", .prom = "cumemcap_capacity_bytes", .help = "The GPU's memory.") \
	X(peak_reserved, atomic, 1, \
	  .kind = CUMEMCAP_FK_peak, .unit = CUMEMCAP_FU_bytes, .exit = 1, .summary = 1, \
	  .key = "peak_reserved", .pre = "; peak held ", .prom = "cumemcap_peak_reserved_bytes", \
	  .help = "Highest reserved so far.") \
	X(peak_footprint, atomic, 1, \
	  .kind = CUMEMCAP_FK_peak, .unit = CUMEMCAP_FU_bytes, .exit = 1, .summary = 1, \
	  .key = "peak_footprint", .pre = "; peak footprint ", .prom = "cumemcap_peak_footprint_bytes", \
	  .help = "Highest footprint so far.") \
	X(peak_driver_used, other, 0, \
	  .kind = CUMEMCAP_FK_peak, .unit = CUMEMCAP_FU_bytes, .null = 1, .exit = 1, \
	  .key = "peak_driver_used") \
	X(allocs, arenas, 1, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .summary = 2, .key = "allocs", \
	  .pre = "; ", .post = " allocations", .prom = "cumemcap_allocations_total", \
	  .help = "Successful allocations.") \
	X(frees, arenas, 1, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .summary = 2, .key = "frees", \
	  .pre = ", ", .post = " frees", .prom = "cumemcap_frees_total", .help = "Successful frees.") \
	X(refusals, atomic, 1, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .summary = 2, .key = "refusals", \
	  .pre = ", ", .post = " refused at the limit", .prom = "cumemcap_refusals_total", \
	  .help = "Requests refused at the limit.") \
	X(waits, atomic, 0, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .sample = 1, .exit = 1, .key = "waits", \
	  .prom = "cumemcap_waits_total", \
	  .help = "Requests that waited for room at a limit (CUMEMCAP_ON_LIMIT=wait).") \
	X(wait_timeouts, atomic, 0, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .key = "wait_timeouts", \
	  .prom = "cumemcap_wait_timeouts_total", .help = "Waits that ended at their deadline, refused.") \
	X(waiting, atomic, 0, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_count, .sample = 1, .key = "waiting", \
	  .prom = "cumemcap_waiting_threads", .help = "Threads waiting for room now.") \
	X(group_limit, other, 0, \
	  .kind = CUMEMCAP_FK_setting, .unit = CUMEMCAP_FU_bytes, .null = 1, .sample = 1, .exit = 1, \
	  .key = "group_limit", .prom = "cumemcap_group_limit_bytes", \
	  .help = "The budget of this process's group on this GPU (absent when none).") \
	X(group_used, other, 0, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .null = 1, .sample = 1, .key = "group_used", \
	  .prom = "cumemcap_group_used_bytes", \
	  .help = "What all members of the group hold of its budget on this GPU.") \
	X(group_held, other, 0, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .null = 1, .event = 1, .sample = 1, .exit = 2, \
	  .key = "group_held", .prom = "cumemcap_group_held_bytes", \
	  .help = "What this process holds of its group's budget here: what it counts, and spare.") \
	X(driver_oom, atomic, 1, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .key = "driver_oom", \
	  .prom = "cumemcap_driver_oom_total", \
	  .help = "CUDA_ERROR_OUT_OF_MEMORY answered by the driver itself.") \
	X(avoided, arenas, 1, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .key = "avoided") \
	X(segments_taken, atomic, 1, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .key = "segments_taken") \
	X(segments_released, atomic, 1, \
	  .kind = CUMEMCAP_FK_counter, .unit = CUMEMCAP_FU_count, .exit = 1, .key = "segments_released") \
	X(largest_request, atomic, 1, \
	  .kind = CUMEMCAP_FK_peak, .unit = CUMEMCAP_FU_bytes, .exit = 1, .key = "largest_request") \
	X(linear, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .key = "linear") \
	X(managed, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .key = "managed") \
	X(vmm, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .key = "vmm") \
	X(array, atomic, 1, \
	  .kind = CUMEMCAP_FK_gauge, .unit = CUMEMCAP_FU_bytes, .key = "array")
/* clang-format on */

enum cumemcap_figure {
#define X(name, ...) CUMEMCAP_FIG_##name,
	CUMEMCAP_FIGURES(X)
#undef X
	CUMEMCAP_FIG_COUNT
};

/* CUMEMCAP_FIG_IF(stats)(code): code only where the column is 1. */
#define CUMEMCAP_FIG_IF(flag) CUMEMCAP_FIG_IF_##flag
#define CUMEMCAP_FIG_IF_0(...)
#define CUMEMCAP_FIG_IF_1(...) __VA_ARGS__

/* A figure that is not known, or (`null` 1) not there: no limit, no NVML. */
#define CUMEMCAP_FIGURE_NONE UINT64_MAX

/* Every figure of one device at one moment, indexed by CUMEMCAP_FIG_*. */
struct cumemcap_figures {
	uint64_t v[CUMEMCAP_FIG_COUNT];
};

/* The list's named fields as data (one left out is 0 or ""). Strings are
 * arrays, not pointers, so the table needs no relocation at load. */
enum cumemcap_figure_kind { CUMEMCAP_FK_gauge, CUMEMCAP_FK_peak, CUMEMCAP_FK_counter, CUMEMCAP_FK_setting };
enum cumemcap_figure_unit { CUMEMCAP_FU_bytes, CUMEMCAP_FU_count };

struct cumemcap_figure_info {
	unsigned char kind; /* Prometheus types counters as counter, the rest as gauge */
	unsigned char unit; /* the stderr summary writes bytes as sizes */
	unsigned char null; /* 1: CUMEMCAP_FIGURE_NONE is none: JSON null, no series, "none" */
	unsigned char stats; /* the `stats` column */
	unsigned char event; /* 1: in the segment, refusal, driver_oom and context records */
	unsigned char sample; /* 1: in a sample's per-GPU object */
	unsigned char exit; /* in the exit record: 1 with limit, peaks, counts; 2 after, held at exit */
	unsigned char summary; /* stderr summary, pre value post: 1 limit, peaks; 2 held, counts */
	char key[24];  /* the JSON key in the records */
	char pre[24], post[24];
	char prom[40]; /* the Prometheus family ("": none) */
	char help[104]; /* its help text */
};

/* Indexed by CUMEMCAP_FIG_* (defined in ledger.c). */
extern const struct cumemcap_figure_info cumemcap_figure_info[CUMEMCAP_FIG_COUNT];
