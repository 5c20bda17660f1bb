/* scale: the plot's byte and time axes (see scale.h). */
#include "config.h"

#include "scale.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The smallest power-of-two step that covers `max` in at most REPORT_MAX_TICKS. */
struct report_yscale report_y_scale(double max)
{
	struct report_yscale s = { 0, 0, 1 };

	if (!(max > 0))
		max = 1024.0 * 1024.0;
	for (s.exp = 0; s.exp < 64; s.exp++) {
		double step = ldexp(1.0, (int)s.exp);
		double n = ceil(max / step);
		if (n <= REPORT_MAX_TICKS) {
			s.ticks = n < 1 ? 1 : (unsigned)n;
			s.top = s.ticks * step;
			break;
		}
	}
	return s;
}

/* The label of tick i, in the binary unit of the top of the axis: "0",
 * "0.5 GiB", "1 GiB", "1.5 GiB". The step is a power of two of at least
 * an eighth of the top: two decimals say it exactly, or the unit below
 * does ("128 MiB"). */
void report_y_label(const struct report_yscale *s, unsigned i, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	unsigned u = 0;

	while (u < 6 && s->top >= ldexp(1.0, 10 * (int)(u + 1)))
		u++;
	if (u > 0 && 10 * (int)u - (int)s->exp > 2)
		u--; /* "128 MiB" rather than "0.125 GiB" */
	int decimals = 10 * (int)u > (int)s->exp ? 10 * (int)u - (int)s->exp : 0;
	if (i == 0) {
		snprintf(buf, len, "0");
		return;
	}
	int n = snprintf(buf, len, "%.*f", decimals, ldexp((double)i, (int)s->exp - 10 * (int)u));
	if (n > 0 && (size_t)n < len && decimals > 0) {
		while (n > 0 && buf[n - 1] == '0')
			buf[--n] = '\0';
		if (n > 0 && buf[n - 1] == '.')
			buf[--n] = '\0';
	}
	snprintf(buf + strlen(buf), len - strlen(buf), " %s", units[u]);
}


/* A 1-2-5 step that covers `seconds` in at most 10 ticks. */
struct report_xscale report_x_scale(double seconds)
{
	static const double mant[] = { 1, 2, 5 };
	struct report_xscale s = { 1, 1, 0, 1 };

	if (!(seconds > 0))
		seconds = 1;
	for (int e = -3; e <= 12; e++) {
		for (int m = 0; m < 3; m++) {
			double step = mant[m] * pow(10, e);
			double n = ceil(seconds / step - 1e-9);
			if (n <= 10) {
				s.step = step;
				s.ticks = n < 1 ? 1 : (unsigned)n;
				s.span = s.ticks * step;
				s.decimals = e < 0 ? -e : 0;
				return s;
			}
		}
	}
	s.span = seconds;
	s.step = seconds;
	return s;
}
