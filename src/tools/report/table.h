/* table: what cumemcap report prints: the table (compact, or --wide), a
 * block per process (how it ended, its command, a line per GPU), and the
 * same as JSON (--json).
 *
 * Single-threaded; writes to stdout. */
#pragma once

#include <stdbool.h>

#include "logs.h"

struct report_view {
	bool wide;  /* every column, sizes each in its own unit */
	bool bytes; /* sizes as exact byte counts */
};

void report_print_table(const struct report_set *set, const struct report_view *view);
void report_print_processes(const struct report_set *set);
void report_print_json(const struct report_set *set);
