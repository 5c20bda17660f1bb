/* scale: the plot's axes (cumemcap report): a byte scale in power-of-two
 * steps labelled in binary units, and a time scale in 1-2-5 steps.
 *
 * Pure functions; thread-safe. */
#pragma once

#include <stddef.h>

/* At most this many steps on the byte axis. */
#define REPORT_MAX_TICKS 8

struct report_yscale {
	double top;   /* bytes at the top of the plot area */
	unsigned exp; /* the tick step is 2^exp bytes */
	unsigned ticks;
};

struct report_xscale {
	double span; /* seconds at the right edge */
	double step;
	int decimals;
	unsigned ticks;
};

/* The smallest power-of-two step that covers `max` bytes in at most
 * REPORT_MAX_TICKS. */
struct report_yscale report_y_scale(double max);

/* The label of tick i ("0", "0.5 GiB", "128 MiB"). */
void report_y_label(const struct report_yscale *s, unsigned i, char *buf, size_t len);

/* A 1-2-5 step that covers `seconds` in at most 10 ticks. */
struct report_xscale report_x_scale(double seconds);
