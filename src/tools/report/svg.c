/* svg: the plot behind cumemcap report --plot (see svg.h). Scales and
 * ticks, the thinning of long series, XML-safe text, then one panel after
 * another straight to the file. Single-threaded. */
#include "config.h"

#include "svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* Geometry, in SVG user units (pixels). */
#define WIDTH     960
#define PANEL_H   330
#define MARGIN_L  84
#define MARGIN_R  24
#define MARGIN_T  60
#define MARGIN_B  46
#define PLOT_W    (WIDTH - MARGIN_L - MARGIN_R)
#define PLOT_H    (PANEL_H - MARGIN_T - MARGIN_B)
#define MAX_TICKS 8

/* Series longer than this are thinned per pixel column. */
#define THIN_ABOVE (4 * PLOT_W)

static const struct {
	const char *cls, *label, *color;
} series_style[REPORT_SERIES] = {
	[REPORT_LIVE] = { "live", "live", "#1f77b4" },
	[REPORT_POOLED] = { "pooled", "pooled", "#2ca02c" },
	[REPORT_RESERVED] = { "reserved", "reserved", "#ff7f0e" },
	[REPORT_FOOTPRINT] = { "footprint", "footprint", "#8c564b" },
	[REPORT_DRIVER] = { "driver", "driver-reported", "#9467bd" },
};

#define LIMIT_COLOR   "#d62728"
#define REFUSAL_COLOR "#d62728"
#define OOM_COLOR     "#3b0a0a"

/* ---- text ------------------------------------------------------------------------ */

/* Text from a log as XML character data or an attribute value: the five
 * markup characters escaped; what XML 1.0 cannot hold (control characters,
 * U+FFFE, U+FFFF) as U+FFFD. The JSON reader hands over valid UTF-8. */
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

/* ---- scales ----------------------------------------------------------------------- */

struct yscale {
	double top;   /* bytes at the top of the plot area */
	unsigned exp; /* the tick step is 2^exp bytes */
	unsigned ticks;
};

/* The smallest power-of-two step that covers `max` in at most MAX_TICKS. */
static struct yscale y_scale(double max)
{
	struct yscale s = { 0, 0, 1 };

	if (!(max > 0))
		max = 1024.0 * 1024.0;
	for (s.exp = 0; s.exp < 64; s.exp++) {
		double step = ldexp(1.0, (int)s.exp);
		double n = ceil(max / step);
		if (n <= MAX_TICKS) {
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
static void y_label(const struct yscale *s, unsigned i, char *buf, size_t len)
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

struct xscale {
	double span; /* seconds at the right edge */
	double step;
	int decimals;
	unsigned ticks;
};

/* A 1-2-5 step that covers `seconds` in at most 10 ticks. */
static struct xscale x_scale(double seconds)
{
	static const double mant[] = { 1, 2, 5 };
	struct xscale s = { 1, 1, 0, 1 };

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

struct panel {
	double x0, y0; /* top left of the plot area */
	double t0;
	struct xscale xs;
	struct yscale ys;
};

static double px(const struct panel *pn, double t)
{
	return pn->x0 + (t - pn->t0) / pn->xs.span * PLOT_W;
}

static double py(const struct panel *pn, uint64_t v)
{
	return pn->y0 + PLOT_H - (double)v / pn->ys.top * PLOT_H;
}

/* ---- series ------------------------------------------------------------------------ */

/* The points to draw: all of them, or for a long series the first, lowest,
 * highest and last of each pixel column, in time order. */
static size_t thin(const struct panel *pn, const struct report_series *s, struct report_point *out)
{
	size_t n = 0;

	if (s->n <= THIN_ABOVE) {
		memcpy(out, s->p, s->n * sizeof(*out));
		return s->n;
	}
	for (size_t i = 0; i < s->n;) {
		long col = lround(floor(px(pn, s->p[i].t)));
		size_t j = i, lo = i, hi = i;
		while (j < s->n && lround(floor(px(pn, s->p[j].t))) == col) {
			if (s->p[j].v < s->p[lo].v)
				lo = j;
			if (s->p[j].v > s->p[hi].v)
				hi = j;
			j++;
		}
		size_t keep[4] = { i, lo < hi ? lo : hi, lo < hi ? hi : lo, j - 1 };
		for (int k = 0; k < 4; k++) {
			if (k == 0 || keep[k] != keep[k - 1])
				out[n++] = s->p[keep[k]];
		}
		i = j;
	}
	return n;
}

static void put_series(FILE *f, const struct panel *pn, const struct report_series *s, int kind,
		       double t_end)
{
	if (s->n == 0)
		return;
	struct report_point *pts = report_xmalloc(s->n * sizeof(*pts));
	size_t n = thin(pn, s, pts);
	bool step = kind == REPORT_RESERVED || kind == REPORT_FOOTPRINT;

	fprintf(f, "<path class=\"series %s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
		   "stroke-linejoin=\"round\" stroke-linecap=\"round\" d=\"M%.2f,%.2f",
		series_style[kind].cls, series_style[kind].color, px(pn, pts[0].t),
		py(pn, pts[0].v));
	for (size_t i = 1; i < n; i++) {
		if (step)
			fprintf(f, " L%.2f,%.2f", px(pn, pts[i].t), py(pn, pts[i - 1].v));
		fprintf(f, " L%.2f,%.2f", px(pn, pts[i].t), py(pn, pts[i].v));
	}
	/* What was reserved (and the footprint) stays until the next event; a lone point
	 * of another series is drawn as a dot (a round cap on no length). */
	if (step || n == 1)
		fprintf(f, " L%.2f,%.2f", px(pn, step ? t_end : pts[0].t), py(pn, pts[n - 1].v));
	fputs("\"/>\n", f);
	free(pts);
}

/* ---- a panel ------------------------------------------------------------------------ */

static void put_legend(FILE *f, double x, double y)
{
	for (int k = 0; k < REPORT_SERIES; k++) {
		fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
			   "stroke-width=\"2\"/>"
			   "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
			x, y - 4, x + 22, y - 4, series_style[k].color, x + 27, y,
			series_style[k].label);
		x += 40 + 7.0 * (double)strlen(series_style[k].label);
	}
	fprintf(f,
		"<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
		"stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/><text x=\"%.0f\" "
		"y=\"%.0f\">limit</text>\n",
		x, y - 4, x + 22, y - 4, LIMIT_COLOR, x + 27, y);
	x += 75;
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
		   "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.0f\">refusal</text>\n",
		x + 4, y - 10, x + 4, y + 1, REFUSAL_COLOR, x + 12, y);
	x += 75;
	fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
		   "stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.0f\">driver OOM</text>\n",
		x + 4, y - 10, x + 4, y + 1, OOM_COLOR, x + 12, y);
}

static void put_title(FILE *f, const struct report_process *p, const struct report_gpu *g,
		      double y)
{
	char buf[32];

	fprintf(f,
		"<text class=\"title\" x=\"16\" y=\"%.0f\" font-size=\"15\" font-weight=\"bold\">",
		y);
	if (p->program && p->program[0]) {
		put_xml(f, p->program);
		fputs(", ", f);
	}
	fprintf(f, "pid %lld, GPU %lld", p->pid, g->ordinal);
	if (g->uuid && g->uuid[0]) {
		fputs(" (", f);
		put_xml(f, g->uuid);
		fputs(")", f);
	}
	if (g->limit_state == REPORT_LIMIT_SET)
		fprintf(f, ", limit %s", report_fmt_size(g->limit, buf, sizeof(buf)));
	else if (g->limit_state == REPORT_LIMIT_NONE)
		fputs(", no limit", f);
	fputs("</text>\n", f);
}

static void put_axes(FILE *f, const struct panel *pn)
{
	char label[48];

	fprintf(f, "<rect class=\"plot-area\" x=\"%.2f\" y=\"%.2f\" width=\"%d\" height=\"%d\" "
		   "fill=\"#fafafa\" stroke=\"#999\"/>\n",
		pn->x0, pn->y0, PLOT_W, PLOT_H);
	for (unsigned i = 0; i <= pn->ys.ticks; i++) {
		double y = pn->y0 + PLOT_H - (double)i / pn->ys.ticks * PLOT_H;
		y_label(&pn->ys, i, label, sizeof(label));
		fprintf(f, "<line class=\"grid-y\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
			   "stroke=\"#ddd\"/><text class=\"ylabel\" x=\"%.2f\" y=\"%.2f\" "
			   "text-anchor=\"end\">%s</text>\n",
			pn->x0, y, pn->x0 + PLOT_W, y, pn->x0 - 6, y + 4, label);
	}
	for (unsigned i = 0; i <= pn->xs.ticks; i++) {
		double x = pn->x0 + (double)i / pn->xs.ticks * PLOT_W;
		fprintf(f, "<line class=\"grid-x\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
			   "stroke=\"#ddd\"/><text class=\"xlabel\" x=\"%.2f\" y=\"%.2f\" "
			   "text-anchor=\"middle\">%.*f</text>\n",
			x, pn->y0, x, pn->y0 + PLOT_H, x, pn->y0 + PLOT_H + 16, pn->xs.decimals,
			i * pn->xs.step);
	}
	fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\" fill=\"#555\">seconds since "
		   "start</text>\n",
		pn->x0 + PLOT_W / 2.0, pn->y0 + PLOT_H + 36);
}

static void put_marks(FILE *f, const struct panel *pn, const struct report_gpu *g)
{
	char buf[32];

	for (size_t i = 0; i < g->nmarks; i++) {
		const struct report_mark *m = &g->marks[i];
		double x = px(pn, m->t);
		fprintf(f,
			"<line class=\"%s\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" "
			"stroke=\"%s\" stroke-width=\"2\"><title>%s %s at %.3f s</title></line>\n",
			m->driver_oom ? "driver-oom" : "refusal", x, pn->y0, x,
			pn->y0 + (m->driver_oom ? 16 : 12),
			m->driver_oom ? OOM_COLOR : REFUSAL_COLOR,
			m->driver_oom ? "driver out of memory for" : "refused",
			report_fmt_size(m->requested, buf, sizeof(buf)), m->t - pn->t0);
	}
}

/* The headline over the limit line: the limit, and the peak footprint (what
 * the limit counts) against it. */
static void put_limit_label(FILE *f, const struct panel *pn, const struct report_gpu *g,
			    double y)
{
	char limit[32], peak[32];

	fprintf(f, "<text class=\"limit-label\" x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\" "
		   "fill=\"%s\">limit %s",
		pn->x0 + PLOT_W - 6, y - 5, LIMIT_COLOR,
		report_fmt_size(g->limit, limit, sizeof(limit)));
	if (g->peak_footprint.known) {
		fprintf(f, "; peak footprint %s",
			report_fmt_size(g->peak_footprint.v, peak, sizeof(peak)));
		if (g->limit > 0)
			fprintf(f, " (%.0f%%)", 100.0 * (double)g->peak_footprint.v /
							(double)g->limit);
	}
	fputs("</text>\n", f);
}

static void put_panel(FILE *f, const struct report_process *p, const struct report_gpu *g,
		      double top)
{
	struct panel pn = {
		.x0 = MARGIN_L,
		.y0 = top + MARGIN_T,
		.t0 = report_process_t0(p),
	};
	double max = 0;

	for (int k = 0; k < REPORT_SERIES; k++) {
		for (size_t i = 0; i < g->series[k].n; i++)
			max = fmax(max, (double)g->series[k].p[i].v);
	}
	if (g->limit_state == REPORT_LIMIT_SET)
		max = fmax(max, (double)g->limit);
	pn.ys = y_scale(max * 1.04); /* room above a limit at a round number */
	pn.xs = x_scale(p->t_last - pn.t0);

	fprintf(f, "<g class=\"panel\" data-pid=\"%lld\" data-gpu=\"%lld\">\n", p->pid, g->ordinal);
	put_title(f, p, g, top + 24);
	put_legend(f, MARGIN_L, top + 46);
	put_axes(f, &pn);
	if (g->limit_state == REPORT_LIMIT_SET) {
		double y = py(&pn, g->limit);
		fprintf(f, "<path class=\"limit\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
			   "stroke-dasharray=\"6 4\" d=\"M%.2f,%.2f L%.2f,%.2f\"/>\n",
			LIMIT_COLOR, pn.x0, y, pn.x0 + PLOT_W, y);
		put_limit_label(f, &pn, g, y);
	}
	for (int k = 0; k < REPORT_SERIES; k++)
		put_series(f, &pn, &g->series[k], k, p->t_last);
	put_marks(f, &pn, g);
	fputs("</g>\n", f);
}

/* ---- the file -------------------------------------------------------------------------- */

bool report_svg_write(const struct report_set *set, const char *path, size_t *panels)
{
	size_t n = 0;

	for (size_t i = 0; i < set->n; i++) {
		for (size_t k = 0; k < set->procs[i]->ngpus; k++)
			n += report_gpu_shown(set->procs[i], k);
	}
	*panels = n;

	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "cumemcap report: --plot %s: cannot create: %s\n", path,
			strerror(errno));
		return false;
	}
	double height = n ? (double)n * PANEL_H : 60;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" "
		   "viewBox=\"0 0 %d %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
		   "<title>cumemcap report</title>\n"
		   "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n",
		WIDTH, height, WIDTH, height);
	if (n == 0)
		fputs("<text x=\"16\" y=\"36\">no GPU in these logs</text>\n", f);
	double top = 0;
	for (size_t i = 0; i < set->n; i++) {
		for (size_t k = 0; k < set->procs[i]->ngpus; k++) {
			if (!report_gpu_shown(set->procs[i], k))
				continue;
			put_panel(f, set->procs[i], &set->procs[i]->gpus[k], top);
			top += PANEL_H;
		}
	}
	fputs("</svg>\n", f);
	bool failed = ferror(f) != 0;
	int saved = errno;
	if (fclose(f) != 0 && !failed) {
		failed = true;
		saved = errno;
	}
	if (failed) {
		fprintf(stderr, "cumemcap report: --plot %s: cannot write: %s\n", path,
			strerror(saved));
		return false;
	}
	return true;
}
