/* svg: the plot of cumemcap report --plot.
 *
 * Owns the drawing: one self-contained SVG (no scripts, no external fonts or
 * links) with a panel per process and GPU the table shows, stacked. Each
 * panel has time on x (seconds since the process's first record), bytes on
 * y (ticks in binary units), a path per series (live, pooled, reserved,
 * driver-reported; reserved drawn as steps), the limit as a dashed line,
 * short red ticks at refusals and dark ones at driver OOMs, a legend and a
 * title (program, pid, GPU). Long series are thinned to the first, lowest,
 * highest and last point of each pixel column, so peaks survive.
 *
 * The markup is part of the contract the tests read: <g class="panel"
 * data-pid data-gpu>, <rect class="plot-area">, <path class="series NAME">
 * with absolute "M x,y L x,y ..." data (NAME one of live, pooled, reserved,
 * driver), <path class="limit">, <line class="grid-x|grid-y"> paired in
 * order with <text class="xlabel|ylabel">, <line class="refusal|driver-oom">.
 *
 * Single-threaded. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "logs.h"

/* Write the plot of `set` to `path`. False after one line on stderr when
 * the file cannot be written. `panels` gets how many panels it holds. */
bool report_svg_write(const struct report_set *set, const char *path, size_t *panels);
