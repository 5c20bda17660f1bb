/* png: cumemcap report --plot FILE.png, where the build has cairo and
 * librsvg (REPORT_HAVE_PNG): the SVG of svg.c, made in memory, rendered by
 * librsvg onto a cairo image and written as PNG.
 *
 * Single-threaded (librsvg and cairo are used from the one thread). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "svg.h"

#ifndef REPORT_HAVE_PNG
#define REPORT_HAVE_PNG 0
#endif

/* The plot of `set` as a PNG file at `path`. False after one line on
 * stderr when it cannot be made or written. In a build without PNG
 * (png.c is not compiled) it is defined here and only says so: --plot
 * refuses a .png name before, and no build relies on the optimiser to drop
 * the call. */
#if REPORT_HAVE_PNG
bool report_png_write(const struct report_set *set, const struct report_plot *opt,
		      const char *path, size_t *panels, size_t *group_panels);
#else
static inline bool report_png_write(const struct report_set *set, const struct report_plot *opt,
				    const char *path, size_t *panels, size_t *group_panels)
{
	fprintf(stderr, "cumemcap report: --plot \"%s\": this build has no PNG\n", path);
	return false;
}
#endif
