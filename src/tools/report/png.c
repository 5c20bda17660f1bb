/* png: the PNG plot, through librsvg and cairo (see png.h). The SVG is
 * built in memory (open_memstream), parsed by librsvg, drawn at its own
 * size onto a white cairo image surface and written with cairo's PNG
 * writer. Single-threaded. */
#include "config.h"

#include "png.h"

#include <cairo.h>
#include <librsvg/rsvg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cairo_status_t put_bytes(void *closure, const unsigned char *data, unsigned int len)
{
	return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS
						     : CAIRO_STATUS_WRITE_ERROR;
}

bool report_png_write(const struct report_set *set, const struct report_plot *opt,
		      const char *path, size_t *panels, size_t *group_panels)
{
	char *svg = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&svg, &len);

	if (!mem || !report_svg_put(set, opt, mem, panels, group_panels) || fclose(mem) != 0) {
		fprintf(stderr, "cumemcap report: --plot %s: out of memory drawing the plot\n",
			path);
		free(svg);
		return false;
	}
	GError *error = NULL;
	RsvgHandle *handle = rsvg_handle_new_from_data((const guint8 *)svg, len, &error);
	free(svg);
	if (!handle) {
		fprintf(stderr, "cumemcap report: --plot %s: librsvg cannot read the plot: %s\n",
			path, error ? error->message : "no reason given");
		g_clear_error(&error);
		return false;
	}
	gdouble w = 0, h = 0;
	if (!rsvg_handle_get_intrinsic_size_in_pixels(handle, &w, &h) || w < 1 || h < 1) {
		fprintf(stderr, "cumemcap report: --plot %s: the plot has no size\n", path);
		g_object_unref(handle);
		return false;
	}
	cairo_surface_t *surface =
	    cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)(w + 0.5), (int)(h + 0.5));
	cairo_t *cr = cairo_create(surface);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	RsvgRectangle viewport = { 0, 0, w, h };
	bool ok = rsvg_handle_render_document(handle, cr, &viewport, &error);
	cairo_destroy(cr);
	g_object_unref(handle);
	if (!ok) {
		fprintf(stderr, "cumemcap report: --plot %s: librsvg cannot draw the plot: %s\n",
			path, error ? error->message : "no reason given");
		g_clear_error(&error);
		cairo_surface_destroy(surface);
		return false;
	}
	FILE *f = report_plot_open(path, "wb");
	if (!f) {
		cairo_surface_destroy(surface);
		return false;
	}
	cairo_status_t st = cairo_surface_write_to_png_stream(surface, put_bytes, f);
	cairo_surface_destroy(surface);
	return report_plot_close(f, path, st != CAIRO_STATUS_SUCCESS || ferror(f));
}
