/* sizing: the limit --suggest proposes for a peak (see sizing.h). */
#include "config.h"

#include "sizing.h"

#include <stdio.h>

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)

uint64_t report_suggest_margin(uint64_t peak)
{
	uint64_t margin = peak / 100 * REPORT_MARGIN_PERCENT + peak % 100 * REPORT_MARGIN_PERCENT / 100;
	return margin > REPORT_MARGIN_MIN ? margin : REPORT_MARGIN_MIN;
}

/* The step a limit of `bytes` is rounded up to. */
static uint64_t step_of(uint64_t bytes)
{
	if (bytes <= 4 * GIB)
		return 256 * MIB;
	if (bytes <= 16 * GIB)
		return 512 * MIB;
	if (bytes <= 64 * GIB)
		return GIB;
	return 4 * GIB;
}

uint64_t report_suggest_limit(uint64_t peak)
{
	uint64_t margin = report_suggest_margin(peak);
	uint64_t want = peak > UINT64_MAX - margin ? UINT64_MAX : peak + margin;
	uint64_t step = step_of(want);
	uint64_t rem = want % step;

	if (rem == 0)
		return want;
	/* Each range ends at a multiple of its step: rounding up stays in it. */
	return want > UINT64_MAX - (step - rem) ? want - rem : want + (step - rem);
}

const char *report_fmt_limit(uint64_t bytes, char *buf, size_t len)
{
	if (bytes % GIB == 0 && bytes > 0)
		snprintf(buf, len, "%lluGiB", (unsigned long long)(bytes / GIB));
	else if (bytes % (GIB / 2) == 0 && bytes > GIB)
		snprintf(buf, len, "%llu.5GiB", (unsigned long long)(bytes / GIB));
	else if (bytes % (GIB / 4) == 0 && bytes > GIB) /* .25, .75 */
		snprintf(buf, len, "%llu.%lluGiB", (unsigned long long)(bytes / GIB),
			 (unsigned long long)(bytes % GIB / (GIB / 100)));
	else if (bytes % MIB == 0 && bytes > 0)
		snprintf(buf, len, "%lluMiB", (unsigned long long)(bytes / MIB));
	else
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	return buf;
}
