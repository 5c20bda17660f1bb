/* sizing: the limit cumemcap report --suggest proposes for a peak, and how
 * it is written so it can be typed back (CUMEMCAP_LIMIT, a configuration
 * file's limit).
 *
 * The margin: a tenth of the peak, and at least 256 MiB. Two runs of one
 * program differ by the allocator's timing (what its cache holds at the
 * peak) and, across machines, by the driver's overhead for a context (a few
 * hundred MiB, more on a newer driver or a larger GPU: docs/footprint.md),
 * so a limit at the peak itself would refuse the next run that peaks a
 * little higher. The sum is rounded up to a step people type: 256 MiB up
 * to 4 GiB, 512 MiB up to 16 GiB, 1 GiB up to 64 GiB, then 4 GiB.
 *
 * Pure functions; thread-safe. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define REPORT_MARGIN_MIN (UINT64_C(256) << 20)
#define REPORT_MARGIN_PERCENT 10

/* The margin added to `peak`. */
uint64_t report_suggest_margin(uint64_t peak);

/* The suggested limit for `peak`: peak plus its margin, rounded up to a
 * step people type (at most UINT64_MAX rounded down to its step). */
uint64_t report_suggest_limit(uint64_t peak);

/* A size as the configuration is written: "5GiB", "4.5GiB", "4.25GiB",
 * "768MiB", else exact bytes. buf >= 32 bytes. */
const char *report_fmt_limit(uint64_t bytes, char *buf, size_t len);
