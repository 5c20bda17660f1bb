/* suggest: cumemcap report --suggest, the limits the logs call for.
 *
 * For each program and GPU (the CUDA ordinal each process saw, as
 * CUMEMCAP_DEVICE_LIMITS selects), the smallest limit that would have let
 * every logged run finish without a refusal: the highest peak footprint of
 * its runs plus a margin, rounded up to a size people type (sizing.h); what
 * that peak was made of (live, cached by the pools, the driver's overhead);
 * and for each group and GPU, the budget its members needed at once. A run
 * refused at a limit wanted more than it got: its peak, and so the
 * suggestion, is only a lower bound, and the output says so.
 *
 * Single-threaded; writes to stdout. */
#pragma once

#include <stdbool.h>

#include "logs.h"

/* The suggestions as text (sizes exact with `bytes`), or as JSON. */
void report_print_suggest(const struct report_set *set, bool json, bool bytes);
