/* figures: the one declaration of a device's figures.
 *
 * Owns the list below and nothing else: no state, no code, so nothing to
 * lock. Every figure the shim reports is one X() line; from it are made
 * the ledger's storage and its snapshot (ledger.h), cumemcap_get_stats
 * (shim.c), and in the log (log/records.c, log/metrics.c) the event
 * records' figures, the samples, the exit record, the stderr summary and
 * the Prometheus families. An output lists no figure itself: add a line
 * here and every output that is marked for it has it.
 *
 * X(name, src, kind, unit, null, stats, event, sample, exit, summary,
 *   pre, post, key, prom, help)
 *
 *   name    the figure's C name: CUMEMCAP_FIG_<name>, the snapshot's index,
 *           and the field of struct cumemcap_stats when `stats` is 1.
 *   src     where the value lives. In the ledger (ledger.h): `atomic` (an
 *           atomic of the device), `arenas` (an atomic of the device plus
 *           each open arena's own count, summed on read), `kind` (the
 *           bytes of memory kind <name>), `sum` (reserved + overhead, on
 *           read), `group` (the group's books, read from the shared book:
 *           group.h). Elsewhere: `device` (the device layer's facts) and
 *           `log` (NVML, asked by the log); the ledger's snapshot leaves
 *           these CUMEMCAP_FIGURE_NONE for their owner to fill.
 *   kind    gauge (a value now), peak (the highest so far), counter (a
 *           count of events) or setting; Prometheus types counters as
 *           counter and the rest as gauge.
 *   unit    bytes or count: the stderr summary writes bytes as sizes.
 *   null    1: CUMEMCAP_FIGURE_NONE means "none" (JSON null, no
 *           Prometheus series, "none" in the summary); 0: always a number.
 *
 * Where it is written (0: not there). The records write the figures of a
 * part in this list's order, part 1 before part 2; the Prometheus families
 * come in this list's order.
 *
 *   stats   1: a field of struct cumemcap_stats (include/cumemcap.h).
 *   event   1: in the segment, refusal, driver_oom and context records.
 *   sample  1: in a sample's per-GPU object.
 *   exit    1: in the exit record's per-GPU object among the run's limit,
 *           peaks and counts; 2: after them, among what was held at exit.
 *   summary 1: in the stderr summary's first clause (limit, capacity,
 *           peak); 2: in its second (held at exit, counts). Written as
 *           `pre` value `post`.
 *   key     the JSON key in the records.
 *   prom    the Prometheus family (NULL: none) and its `help` text. */
#pragma once

#include <stdint.h>

/* clang-format off */
#define CUMEMCAP_FIGURES(X) \
	/* name               src      kind     unit  null stats event sample exit summary pre  post  key */ \
	X(live,              arenas,   gauge,   bytes, 0, 1, 1, 1, 2, 0, "", "", "live", \
	  "cumemcap_live_bytes", "Device memory the program holds (its allocations).") \
	X(pooled,            arenas,   gauge,   bytes, 0, 1, 1, 1, 0, 0, "", "", "pooled", \
	  "cumemcap_pooled_bytes", "Arena segment bytes cached for reuse, not handed out.") \
	X(reserved,          atomic,   gauge,   bytes, 0, 1, 1, 1, 2, 2, ", held at exit ", "", "reserved", \
	  "cumemcap_reserved_bytes", "Device memory this process holds from the driver through the calls it counts.") \
	X(footprint,         sum,     gauge,   bytes, 0, 1, 1, 1, 2, 0, "", "", "footprint", \
	  "cumemcap_footprint_bytes", "What the driver holds for this process: reserved + overhead; what the limit counts by default.") \
	X(overhead,          atomic,   gauge,   bytes, 0, 1, 0, 1, 2, 0, "", "", "overhead", \
	  "cumemcap_overhead_bytes", "Driver-side memory outside the counted calls (contexts, modules), as last learned.") \
	X(pool,              kind,    gauge,   bytes, 0, 1, 0, 1, 0, 0, "", "", "async_reserved", \
	  "cumemcap_async_reserved_bytes", "Of which stream-ordered pools reserve.") \
	X(graph,             kind,    gauge,   bytes, 0, 1, 0, 1, 2, 0, "", "", "graph_reserved", \
	  "cumemcap_graph_reserved_bytes", "Of which graph memory pools reserve (CUDA graphs' memory nodes).") \
	X(driver_used,       log,     gauge,   bytes, 1, 0, 0, 1, 0, 0, "", "", "driver_used", \
	  "cumemcap_driver_used_bytes", "What NVML (nvidia-smi) says the process uses, contexts included.") \
	X(context_overhead,  log,     gauge,   bytes, 1, 0, 0, 1, 0, 0, "", "", "context_overhead", \
	  "cumemcap_context_overhead_bytes", "driver_used - reserved: contexts and driver memory outside the calls counted.") \
	X(limit,             atomic,  setting, bytes, 1, 1, 0, 0, 1, 1, "limit ", "", "limit", \
	  "cumemcap_limit_bytes", "The limit on this GPU (absent when none).") \
	X(peak_live,         arenas,   peak,    bytes, 0, 1, 0, 0, 1, 0, "", "", "peak_live", "", "") \
	X(peak_pooled,       arenas,   peak,    bytes, 0, 0, 0, 0, 1, 0, "", "", "peak_pooled", "", "") \
	X(total,             device,  setting, bytes, 0, 1, 0, 0, 0, 1, " of ", "", "capacity", \
	  "cumemcap_capacity_bytes", "The GPU's memory.") \
	X(peak_reserved,     atomic,   peak,    bytes, 0, 1, 0, 0, 1, 1, "; peak held ", "", "peak_reserved", \
	  "cumemcap_peak_reserved_bytes", "Highest reserved so far.") \
	X(peak_footprint,    atomic,   peak,    bytes, 0, 1, 0, 0, 1, 1, "; peak footprint ", "", "peak_footprint", \
	  "cumemcap_peak_footprint_bytes", "Highest footprint so far.") \
	X(peak_driver_used,  log,     peak,    bytes, 1, 0, 0, 0, 1, 0, "", "", "peak_driver_used", "", "") \
	X(allocs,            arenas,  counter, count, 0, 1, 0, 0, 1, 2, "; ", " allocations", "allocs", \
	  "cumemcap_allocations_total", "Successful allocations.") \
	X(frees,             arenas,  counter, count, 0, 1, 0, 0, 1, 2, ", ", " frees", "frees", \
	  "cumemcap_frees_total", "Successful frees.") \
	X(refusals,          atomic,   counter, count, 0, 1, 0, 0, 1, 2, ", ", " refused at the limit", "refusals", \
	  "cumemcap_refusals_total", "Requests refused at the limit.") \
	X(waits,             atomic,   counter, count, 0, 0, 0, 1, 1, 0, "", "", "waits", \
	  "cumemcap_waits_total", "Requests that waited for room at a limit (CUMEMCAP_ON_LIMIT=wait).") \
	X(wait_timeouts,     atomic,   counter, count, 0, 0, 0, 0, 1, 0, "", "", "wait_timeouts", \
	  "cumemcap_wait_timeouts_total", "Waits that ended at their deadline, refused.") \
	X(waiting,           atomic,   gauge,   count, 0, 0, 0, 1, 0, 0, "", "", "waiting", \
	  "cumemcap_waiting_threads", "Threads waiting for room now.") \
	X(group_limit,       group,   setting, bytes, 1, 0, 0, 1, 1, 0, "", "", "group_limit", \
	  "cumemcap_group_limit_bytes", "The budget of this process's group on this GPU (absent when none).") \
	X(group_used,        group,   gauge,   bytes, 1, 0, 0, 1, 0, 0, "", "", "group_used", \
	  "cumemcap_group_used_bytes", "What all members of the group hold of its budget on this GPU.") \
	X(group_held,        group,   gauge,   bytes, 1, 0, 1, 1, 2, 0, "", "", "group_held", \
	  "cumemcap_group_held_bytes", "What this process holds of its group's budget here: what it counts, and spare.") \
	X(driver_oom,        atomic,   counter, count, 0, 1, 0, 0, 1, 0, "", "", "driver_oom", \
	  "cumemcap_driver_oom_total", "CUDA_ERROR_OUT_OF_MEMORY answered by the driver itself.") \
	X(avoided,           arenas,  counter, count, 0, 1, 0, 0, 1, 0, "", "", "avoided", "", "") \
	X(segments_taken,    atomic,   counter, count, 0, 1, 0, 0, 1, 0, "", "", "segments_taken", "", "") \
	X(segments_released, atomic,   counter, count, 0, 1, 0, 0, 1, 0, "", "", "segments_released", "", "") \
	X(largest_request,   atomic,   peak,    bytes, 0, 1, 0, 0, 1, 0, "", "", "largest_request", "", "") \
	X(linear,            kind,    gauge,   bytes, 0, 1, 0, 0, 0, 0, "", "", "linear", "", "") \
	X(managed,           kind,    gauge,   bytes, 0, 1, 0, 0, 0, 0, "", "", "managed", "", "") \
	X(vmm,               kind,    gauge,   bytes, 0, 1, 0, 0, 0, 0, "", "", "vmm", "", "") \
	X(array,             kind,    gauge,   bytes, 0, 1, 0, 0, 0, 0, "", "", "array", "", "")
/* clang-format on */

enum cumemcap_figure {
#define X(name, ...) CUMEMCAP_FIG_##name,
	CUMEMCAP_FIGURES(X)
#undef X
	CUMEMCAP_FIG_COUNT
};

/* For X() bodies that write something only for a column that is 1:
 * CUMEMCAP_FIG_IF(stats)(code). */
#define CUMEMCAP_FIG_IF(flag) CUMEMCAP_FIG_IF_##flag
#define CUMEMCAP_FIG_IF_0(...)
#define CUMEMCAP_FIG_IF_1(...) __VA_ARGS__

/* A figure that is not known, or (`null` 1) not there: no limit, no NVML. */
#define CUMEMCAP_FIGURE_NONE UINT64_MAX

/* Every figure of one device at one moment, indexed by CUMEMCAP_FIG_*. */
struct cumemcap_figures {
	uint64_t v[CUMEMCAP_FIG_COUNT];
};

/* The list's columns as data, for writers that walk it (log/records.c, log/metrics.c). */
enum cumemcap_figure_kind { CUMEMCAP_FK_gauge, CUMEMCAP_FK_peak, CUMEMCAP_FK_counter, CUMEMCAP_FK_setting };
enum cumemcap_figure_unit { CUMEMCAP_FU_bytes, CUMEMCAP_FU_count };

/* The text columns are offsets into one block of characters
 * (cumemcap_figure_str): the list holds no pointer, so the dynamic linker
 * relocates none of it at the library's start. A figure without a family
 * has "" for prom and help. */
struct cumemcap_figure_info {
	uint16_t key, prom, help, pre, post;
	unsigned char kind, unit, null, stats, event, sample, exit, summary;
};

/* The columns, indexed by CUMEMCAP_FIG_* (defined in ledger.c). */
extern const struct cumemcap_figure_info cumemcap_figure_info[CUMEMCAP_FIG_COUNT];

/* The text block: a member per string, so that each offset is a constant. */
struct cumemcap_figure_text {
#define X(name, src, kind_, unit_, null_, stats_, event_, sample_, exit_, summary_, pre_, post_, key_, prom_, \
	  help_)                                                                                              \
	char k_##name[sizeof(key_)], p_##name[sizeof(prom_)], h_##name[sizeof(help_)], b_##name[sizeof(pre_)], \
		a_##name[sizeof(post_)];
	CUMEMCAP_FIGURES(X)
#undef X
};
extern const struct cumemcap_figure_text cumemcap_figure_text;

/* A text column's string. */
static inline const char *cumemcap_figure_str(uint16_t at)
{
	return (const char *)&cumemcap_figure_text + at;
}
