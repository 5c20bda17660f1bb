/* canvas: what the plot of cumemcap report draws with, and onto what.
 *
 * One drawing code (plot.c) draws through these calls; the canvas turns
 * them into SVG markup (the contract the tests and users' scripts read:
 * classes, data- attributes, a hover title per mark; plot.h lists it), or
 * through cairo onto a PNG image or a PDF page. Coordinates are pixels
 * (PDF points), y down. Colours are "#rrggbb". A group, a hover text and a
 * class exist only in SVG; cairo draws the same shapes and text.
 *
 * Single-threaded; one canvas per plot. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum report_canvas_kind { REPORT_CANVAS_SVG, REPORT_CANVAS_PNG, REPORT_CANVAS_PDF };

/* The tallest PNG cairo's image surfaces make, in pixels. */
#define REPORT_PNG_MAX 32767

struct report_canvas {
	enum report_canvas_kind kind;
	FILE *f;  /* the file written to */
	void *cr; /* PNG, PDF: the cairo_t */
	void *surface;
	bool failed; /* cairo could not draw (out of memory) */
};

/* An attribute of an SVG element: name="value" (the value escaped). */
struct report_attr {
	const char *name, *value;
};

struct report_stroke {
	const char *color;
	double width;
	const char *dash; /* "8 4": on and off lengths; NULL: solid */
	double opacity;   /* 0: opaque */
};

enum report_anchor { REPORT_START, REPORT_MIDDLE, REPORT_END };

struct report_text_style {
	double size;      /* 0: 12 */
	bool bold;
	enum report_anchor anchor;
	const char *fill; /* NULL: black */
	bool halo;        /* a white outline, readable over lines */
};

/* Whether this build draws PNG and PDF (cairo). */
bool report_canvas_has_cairo(void);

/* Start a picture of width x height on f: SVG markup, or a cairo surface.
 * False (after one line on stderr naming `path`) when cairo cannot make it. */
bool report_canvas_begin(struct report_canvas *cv, enum report_canvas_kind kind, FILE *f,
			 const char *path, double width, double height);
/* Finish it: the SVG's end, cairo's PNG or PDF written to f. False when
 * drawing or writing failed. */
bool report_canvas_end(struct report_canvas *cv);

void report_canvas_group(struct report_canvas *cv, const char *cls,
			 const struct report_attr *attrs, size_t nattrs);
void report_canvas_group_end(struct report_canvas *cv);
/* SVG: a <title> (shown on hover) for the group it is in. */
void report_canvas_hover(struct report_canvas *cv, const char *text);

void report_canvas_line(struct report_canvas *cv, const char *cls, double x1, double y1,
			double x2, double y2, const struct report_stroke *s);
/* A polyline through xy[0..2n): x0, y0, x1, y1, ... `attrs` after its class. */
void report_canvas_path(struct report_canvas *cv, const char *cls,
			const struct report_attr *attrs, size_t nattrs, const double *xy, size_t n,
			const struct report_stroke *s);
/* fill NULL: none; s NULL: no outline. */
void report_canvas_rect(struct report_canvas *cv, const char *cls, double x, double y, double w,
			double h, const char *fill, const struct report_stroke *s);
void report_canvas_circle(struct report_canvas *cv, double cx, double cy, double r,
			  const char *fill, const struct report_stroke *s);
/* Text from anywhere (a log included): escaped for SVG, control characters
 * as U+FFFD. */
void report_canvas_text(struct report_canvas *cv, const char *cls, double x, double y,
			const struct report_text_style *st, const char *text);
/* Lines of text, each line_h below the last (SVG: one <text>, a <tspan>
 * per line). */
void report_canvas_lines(struct report_canvas *cv, const char *cls, double x, double y,
			 double line_h, const struct report_text_style *st, char *const *lines,
			 size_t n);
