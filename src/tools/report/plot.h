/* plot: the plot of cumemcap report --plot.
 *
 * Owns the drawing, done once through the canvas (canvas.h) onto a
 * self-contained SVG (no scripts, no external fonts or links), a PNG image
 * or a PDF page, chosen by the file's name: a panel per process and GPU the
 * table shows, stacked, the
 * panels of one GPU (the same UUID) next to each other and sharing one time
 * axis and one scale, so processes on one GPU can be compared. Each panel
 * has time on x (seconds since the first record on its GPU, or with
 * `wall` the UTC time of day), bytes on y (ticks in binary units), a step
 * path per series (a figure holds until the next record: live, pooled,
 * reserved, footprint, driver-reported), then on top of them the limit as
 * a dashed line with its label, then a marker at each refusal (a red
 * circle) and driver OOM (a dark square) with a faint line across the
 * plot at its time; a legend, and a title (program, pid, host, GPU, limit)
 * wrapped onto more lines rather than clipped. Long series are thinned to
 * the first, lowest, highest and last point of each pixel column, so
 * peaks survive.
 *
 * The SVG's markup is part of the contract the tests read: <g class="panel"
 * data-pid data-gpu data-uuid data-group>, <text class="title"> with a
 * <tspan> per line, <rect class="plot-area">, <path class="series NAME">
 * with absolute "M x,y L x,y ..." data (NAME one of live, pooled,
 * reserved, footprint, driver), <path class="limit">, <text
 * class="limit-label">, <line class="grid-x|grid-y"> paired in order with
 * <text class="xlabel|ylabel">, <g class="refusal|driver-oom" data-t> each
 * holding a <line> and the marker. A member of a group with a budget on the
 * GPU has <path class="group-budget"> and <text class="group-budget-label">;
 * after a GPU's panels, <g class="group-panel" data-group-name data-group
 * data-uuid> per group of processes on it holds <path class="series
 * group-used"> (what the members held at once), a <path class="series
 * member" data-pid> per member (its footprint), the budget line and the
 * members' marks, on the GPU's axes.
 *
 * Single-threaded. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "canvas.h"
#include "logs.h"

struct report_plot {
	bool wall; /* x labels as UTC time of day, not seconds since the start */
};

/* The plot of `set` onto `f` as `kind` (`path` names it in messages).
 * `panels` gets how many panels of a process it holds, `group_panels` how
 * many of a group (one per group and GPU, after that GPU's processes).
 * False after one line on stderr when it could not be drawn or written. */
bool report_plot_put(const struct report_set *set, const struct report_plot *opt,
		     enum report_canvas_kind kind, FILE *f, const char *path, size_t *panels,
		     size_t *group_panels);

/* The same into the file `path`, created (or truncated). */
bool report_plot_write(const struct report_set *set, const struct report_plot *opt,
		       enum report_canvas_kind kind, const char *path, size_t *panels,
		       size_t *group_panels);
