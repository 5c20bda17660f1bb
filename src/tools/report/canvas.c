/* canvas: SVG markup, or cairo onto PNG and PDF (see canvas.h). Every call
 * is one switch: SVG writes an element, cairo draws. */
#include "config.h"

#include "canvas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if REPORT_HAVE_CAIRO
#include <cairo-pdf.h>
#include <cairo.h>
#endif

#include "text.h"

bool report_canvas_has_cairo(void)
{
	return REPORT_HAVE_CAIRO;
}

/* ---- SVG ---------------------------------------------------------------------------- */

/* Text as XML character data or an attribute value: the five markup
 * characters escaped; what XML 1.0 cannot hold (control characters,
 * U+FFFE, U+FFFF) as U+FFFD. The reader hands over valid UTF-8. */
static void put_xml(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				fputs("\xef\xbf\xbd", f);
			} else if (p[0] == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf)) {
				fputs("\xef\xbf\xbd", f);
				p += 2;
			} else {
				putc(*p, f);
			}
		}
	}
}

static void svg_attrs(FILE *f, const char *cls, const struct report_attr *attrs, size_t n)
{
	if (cls)
		fprintf(f, " class=\"%s\"", cls);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, " %s=\"", attrs[i].name);
		put_xml(f, attrs[i].value);
		putc('"', f);
	}
}

static void svg_stroke(FILE *f, const struct report_stroke *s)
{
	if (!s)
		return;
	fprintf(f, " stroke=\"%s\" stroke-width=\"%g\"", s->color, s->width);
	if (s->dash)
		fprintf(f, " stroke-dasharray=\"%s\"", s->dash);
	if (s->opacity > 0)
		fprintf(f, " stroke-opacity=\"%g\"", s->opacity);
}

static void svg_text_open(FILE *f, const char *cls, double x, double y,
			  const struct report_text_style *st)
{
	static const char *const anchors[] = { [REPORT_MIDDLE] = "middle", [REPORT_END] = "end" };

	fputs("<text", f);
	svg_attrs(f, cls, NULL, 0);
	fprintf(f, " x=\"%.2f\" y=\"%.2f\"", x, y);
	if (st->anchor != REPORT_START)
		fprintf(f, " text-anchor=\"%s\"", anchors[st->anchor]);
	if (st->size > 0)
		fprintf(f, " font-size=\"%g\"", st->size);
	if (st->bold)
		fputs(" font-weight=\"bold\"", f);
	if (st->fill)
		fprintf(f, " fill=\"%s\"", st->fill);
	if (st->halo)
		fputs(" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"", f);
	putc('>', f);
}

/* ---- cairo --------------------------------------------------------------------------- */

#if REPORT_HAVE_CAIRO
static void set_color(cairo_t *cr, const char *color, double opacity)
{
	unsigned r = 0, g = 0, b = 0;

	if (color && strlen(color) == 4 && sscanf(color, "#%1x%1x%1x", &r, &g, &b) == 3) {
		r *= 17;
		g *= 17;
		b *= 17;
	} else if (color) {
		sscanf(color, "#%2x%2x%2x", &r, &g, &b);
	}
	if (opacity > 0)
		cairo_set_source_rgba(cr, r / 255.0, g / 255.0, b / 255.0, opacity);
	else
		cairo_set_source_rgb(cr, r / 255.0, g / 255.0, b / 255.0);
}

static void stroke_with(cairo_t *cr, const struct report_stroke *s)
{
	double dash[8];
	int n = 0;

	set_color(cr, s->color, s->opacity);
	cairo_set_line_width(cr, s->width);
	for (const char *d = s->dash; d && *d && n < 8;) {
		char *end;
		dash[n] = strtod(d, &end);
		if (end == d)
			break;
		n++;
		d = end;
	}
	cairo_set_dash(cr, dash, n, 0);
	cairo_stroke(cr);
}

static cairo_status_t put_bytes(void *closure, const unsigned char *data, unsigned int len)
{
	return fwrite(data, 1, len, closure) == len ? CAIRO_STATUS_SUCCESS
						     : CAIRO_STATUS_WRITE_ERROR;
}

static void cairo_text_at(cairo_t *cr, double x, double y, const struct report_text_style *st,
			  const char *text)
{
	cairo_text_extents_t ext;

	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
			       st->bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
	cairo_set_font_size(cr, st->size > 0 ? st->size : 12);
	cairo_text_extents(cr, text, &ext);
	if (st->anchor == REPORT_MIDDLE)
		x -= ext.x_advance / 2;
	else if (st->anchor == REPORT_END)
		x -= ext.x_advance;
	cairo_move_to(cr, x, y);
	if (st->halo) {
		cairo_text_path(cr, text);
		cairo_set_source_rgb(cr, 1, 1, 1);
		cairo_set_line_width(cr, 3);
		cairo_set_dash(cr, NULL, 0, 0);
		cairo_stroke(cr);
		cairo_move_to(cr, x, y);
	}
	set_color(cr, st->fill ? st->fill : "#000000", 0);
	cairo_show_text(cr, text);
}
#endif

#if REPORT_HAVE_CAIRO
/* Text from a log as cairo shows it: control characters as U+FFFD. */
static char *shown_text(const char *s)
{
	struct report_buf b = { 0 };

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			report_buf_puts(&b, "\xef\xbf\xbd");
		else
			report_buf_add(&b, (const char *)p, 1);
	}
	return report_buf_take(&b);
}
#endif

/* ---- the calls ------------------------------------------------------------------------ */

bool report_canvas_begin(struct report_canvas *cv, enum report_canvas_kind kind, FILE *f,
			 const char *path, double width, double height)
{
	memset(cv, 0, sizeof(*cv));
	cv->kind = kind;
	cv->f = f;
	if (kind == REPORT_CANVAS_SVG) {
		fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
			   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
			   "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
			   "<title>cumemcap report</title>\n"
			   "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
			width, height, width, height);
		return true;
	}
#if REPORT_HAVE_CAIRO
	if (kind == REPORT_CANVAS_PNG && height > REPORT_PNG_MAX) {
		fprintf(stderr, "cumemcap report: --plot %s: a PNG %.0f pixels tall is more than "
				"cairo draws (%d at most); pick fewer processes (--gpu, --program, "
				"--since), or write .svg or .pdf\n",
			path, height, REPORT_PNG_MAX);
		return false;
	}
	cairo_surface_t *s = kind == REPORT_CANVAS_PNG
				     ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)width,
								  (int)height)
				     : cairo_pdf_surface_create_for_stream(put_bytes, f, width, height);
	if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
		fprintf(stderr, "cumemcap report: --plot %s: cairo cannot make a %.0f x %.0f "
				"picture: %s\n",
			path, width, height, cairo_status_to_string(cairo_surface_status(s)));
		cairo_surface_destroy(s);
		return false;
	}
	cairo_t *cr = cairo_create(s);
	cairo_set_source_rgb(cr, 1, 1, 1);
	cairo_paint(cr);
	cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
	cv->cr = cr;
	cv->surface = s;
	return true;
#else
	(void)path;
	return false;
#endif
}

bool report_canvas_end(struct report_canvas *cv)
{
	if (cv->kind == REPORT_CANVAS_SVG) {
		fputs("</svg>\n", cv->f);
		return fflush(cv->f) == 0 && !ferror(cv->f);
	}
#if REPORT_HAVE_CAIRO
	cairo_t *cr = cv->cr;
	cairo_surface_t *s = cv->surface;
	bool ok = cairo_status(cr) == CAIRO_STATUS_SUCCESS;
	cairo_destroy(cr);
	if (ok && cv->kind == REPORT_CANVAS_PNG)
		ok = cairo_surface_write_to_png_stream(s, put_bytes, cv->f) == CAIRO_STATUS_SUCCESS;
	cairo_surface_finish(s); /* a PDF is written out here */
	ok = ok && cairo_surface_status(s) == CAIRO_STATUS_SUCCESS;
	cairo_surface_destroy(s);
	return ok && fflush(cv->f) == 0 && !ferror(cv->f);
#else
	return false;
#endif
}

void report_canvas_group(struct report_canvas *cv, const char *cls,
			 const struct report_attr *attrs, size_t nattrs)
{
	if (cv->kind != REPORT_CANVAS_SVG)
		return;
	fputs("<g", cv->f);
	svg_attrs(cv->f, cls, attrs, nattrs);
	fputs(">", cv->f);
}

void report_canvas_group_end(struct report_canvas *cv)
{
	if (cv->kind == REPORT_CANVAS_SVG)
		fputs("</g>\n", cv->f);
}

void report_canvas_hover(struct report_canvas *cv, const char *text)
{
	if (cv->kind != REPORT_CANVAS_SVG)
		return;
	fputs("<title>", cv->f);
	put_xml(cv->f, text);
	fputs("</title>", cv->f);
}

void report_canvas_line(struct report_canvas *cv, const char *cls, double x1, double y1,
			double x2, double y2, const struct report_stroke *s)
{
	if (cv->kind == REPORT_CANVAS_SVG) {
		fputs("<line", cv->f);
		svg_attrs(cv->f, cls, NULL, 0);
		fprintf(cv->f, " x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"", x1, y1, x2, y2);
		svg_stroke(cv->f, s);
		fputs("/>", cv->f);
		return;
	}
#if REPORT_HAVE_CAIRO
	cairo_move_to(cv->cr, x1, y1);
	cairo_line_to(cv->cr, x2, y2);
	stroke_with(cv->cr, s);
#endif
}

void report_canvas_path(struct report_canvas *cv, const char *cls,
			const struct report_attr *attrs, size_t nattrs, const double *xy, size_t n,
			const struct report_stroke *s)
{
	if (n == 0)
		return;
	if (cv->kind == REPORT_CANVAS_SVG) {
		fputs("<path", cv->f);
		svg_attrs(cv->f, cls, attrs, nattrs);
		fputs(" fill=\"none\"", cv->f);
		svg_stroke(cv->f, s);
		if (!s->dash)
			fputs(" stroke-linejoin=\"round\" stroke-linecap=\"round\"", cv->f);
		fprintf(cv->f, " d=\"M%.2f,%.2f", xy[0], xy[1]);
		for (size_t i = 1; i < n; i++)
			fprintf(cv->f, " L%.2f,%.2f", xy[2 * i], xy[2 * i + 1]);
		fputs("\"/>\n", cv->f);
		return;
	}
#if REPORT_HAVE_CAIRO
	cairo_set_line_cap(cv->cr, s->dash ? CAIRO_LINE_CAP_BUTT : CAIRO_LINE_CAP_ROUND);
	cairo_move_to(cv->cr, xy[0], xy[1]);
	for (size_t i = 1; i < n; i++)
		cairo_line_to(cv->cr, xy[2 * i], xy[2 * i + 1]);
	stroke_with(cv->cr, s);
	cairo_set_line_cap(cv->cr, CAIRO_LINE_CAP_BUTT);
#endif
}

#if REPORT_HAVE_CAIRO
/* Fill the current path (NULL: not), then stroke it (NULL: not). */
static void fill_and_stroke(cairo_t *cr, const char *fill, const struct report_stroke *s)
{
	if (fill) {
		set_color(cr, fill, 0);
		cairo_fill_preserve(cr);
	}
	if (s)
		stroke_with(cr, s);
	else
		cairo_new_path(cr);
}
#endif

void report_canvas_rect(struct report_canvas *cv, const char *cls, double x, double y, double w,
			double h, const char *fill, const struct report_stroke *s)
{
	if (cv->kind == REPORT_CANVAS_SVG) {
		fputs("<rect", cv->f);
		svg_attrs(cv->f, cls, NULL, 0);
		fprintf(cv->f, " x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"", x,
			y, w, h, fill ? fill : "none");
		svg_stroke(cv->f, s);
		fputs("/>", cv->f);
		return;
	}
#if REPORT_HAVE_CAIRO
	cairo_rectangle(cv->cr, x, y, w, h);
	fill_and_stroke(cv->cr, fill, s);
#endif
}

void report_canvas_circle(struct report_canvas *cv, double cx, double cy, double r,
			  const char *fill, const struct report_stroke *s)
{
	if (cv->kind == REPORT_CANVAS_SVG) {
		fprintf(cv->f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%g\" fill=\"%s\"", cx, cy, r,
			fill ? fill : "none");
		svg_stroke(cv->f, s);
		fputs("/>", cv->f);
		return;
	}
#if REPORT_HAVE_CAIRO
	cairo_new_sub_path(cv->cr);
	cairo_arc(cv->cr, cx, cy, r, 0, 6.283185307179586);
	fill_and_stroke(cv->cr, fill, s);
#endif
}

void report_canvas_text(struct report_canvas *cv, const char *cls, double x, double y,
			const struct report_text_style *st, const char *text)
{
	if (cv->kind == REPORT_CANVAS_SVG) {
		svg_text_open(cv->f, cls, x, y, st);
		put_xml(cv->f, text);
		fputs("</text>\n", cv->f);
		return;
	}
#if REPORT_HAVE_CAIRO
	char *shown = shown_text(text);
	cairo_text_at(cv->cr, x, y, st, shown);
	free(shown);
#endif
}

void report_canvas_lines(struct report_canvas *cv, const char *cls, double x, double y,
			 double line_h, const struct report_text_style *st, char *const *lines,
			 size_t n)
{
	if (cv->kind == REPORT_CANVAS_SVG) {
		svg_text_open(cv->f, cls, x, y, st);
		for (size_t i = 0; i < n; i++) {
			fprintf(cv->f, "<tspan x=\"%.2f\" y=\"%.2f\">", x, y + (double)i * line_h);
			put_xml(cv->f, lines[i]);
			fputs("</tspan>", cv->f);
		}
		fputs("</text>\n", cv->f);
		return;
	}
	for (size_t i = 0; i < n; i++)
		report_canvas_text(cv, cls, x, y + (double)i * line_h, st, lines[i]);
}
