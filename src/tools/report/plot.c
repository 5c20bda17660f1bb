/* plot: the plot behind cumemcap report --plot (see plot.h). Scales and
 * ticks, the thinning of long series, the panels grouped by GPU with their
 * shared axes, then one panel after another onto the canvas (canvas.h: SVG,
 * PNG or PDF). Single-threaded. */
#include "config.h"

#include "plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "canvas.h"
#include "scale.h"
#include "text.h"
#include "wrap.h"

/* Geometry, in SVG user units (pixels). */
#define WIDTH     960
#define PANEL_H   330 /* with a one-line title; each more line adds TITLE_LINE */
#define TITLE_LINE 18
#define TITLE_CHARS 100 /* a title line's most characters (15 px bold sans: ~8.6 px each) */
#define MARGIN_L  84
#define MARGIN_R  24
#define MARGIN_T  60
#define MARGIN_B  46
#define PLOT_W    (WIDTH - MARGIN_L - MARGIN_R)
#define PLOT_H    (PANEL_H - MARGIN_T - MARGIN_B)

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
#define BUDGET_COLOR  "#e6550d" /* a group's budget */
#define GROUP_USED_COLOR "#8c564b"

/* The members' footprints on a group's panel, in turn. */
static const char *const member_colors[] = { "#1f77b4", "#2ca02c", "#9467bd", "#17becf",
					     "#bcbd22", "#7f7f7f" };
#define REFUSAL_COLOR "#ff00ff"
#define OOM_COLOR     "#111111"

struct panel {
	double x0, y0; /* top left of the plot area */
	double t0;     /* the time at x0: the first record on this GPU */
	bool wall;
	struct report_xscale xs;
	struct report_yscale ys;
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

/* A step line: a figure holds until the next record, the last until the
 * process's last record (a live line can never rise above reserved). */
static void put_steps(struct report_canvas *cv, const struct panel *pn,
		      const struct report_series *s, const char *cls,
		      const struct report_attr *attrs, size_t nattrs, const char *color,
		      double width, double t_end)
{
	if (s->n == 0)
		return;
	struct report_point *pts = report_xmalloc(s->n * sizeof(*pts));
	size_t n = thin(pn, s, pts);
	double *xy = report_xmalloc((2 * n + 1) * 2 * sizeof(*xy));
	size_t m = 0;

	xy[m++] = px(pn, pts[0].t);
	xy[m++] = py(pn, pts[0].v);
	for (size_t i = 1; i < n; i++) {
		xy[m++] = px(pn, pts[i].t);
		xy[m++] = py(pn, pts[i - 1].v);
		xy[m++] = px(pn, pts[i].t);
		xy[m++] = py(pn, pts[i].v);
	}
	xy[m++] = px(pn, t_end);
	xy[m++] = py(pn, pts[n - 1].v);
	struct report_stroke st = { color, width, NULL, 0 };
	report_canvas_path(cv, cls, attrs, nattrs, xy, m / 2, &st);
	free(xy);
	free(pts);
}

static void put_series(struct report_canvas *cv, const struct panel *pn,
		       const struct report_series *s, int kind, double t_end)
{
	char cls[32];

	snprintf(cls, sizeof(cls), "series %s", series_style[kind].cls);
	put_steps(cv, pn, s, cls, NULL, 0, series_style[kind].color, 1.5, t_end);
}

/* ---- a panel ------------------------------------------------------------------------ */

/* A legend entry: a short line (dashed when `dash`), then its label. */
static double legend_line(struct report_canvas *cv, double x, double y, const char *color,
			  double width, const char *dash, const char *label)
{
	struct report_stroke st = { color, width, dash, 0 };
	struct report_text_style plain = { 0 };

	report_canvas_line(cv, NULL, x, y - 4, x + 22, y - 4, &st);
	report_canvas_text(cv, NULL, x + 27, y, &plain, label);
	return x + 40 + 7.0 * (double)strlen(label);
}

static void put_legend(struct report_canvas *cv, double x, double y)
{
	struct report_stroke halo = { "#ffffff", 1, NULL, 0 };
	struct report_text_style plain = { 0 };

	for (int k = 0; k < REPORT_SERIES; k++)
		x = legend_line(cv, x, y, series_style[k].color, 2, NULL, series_style[k].label);
	legend_line(cv, x, y, LIMIT_COLOR, 2, "8 4", "limit");
	x += 70;
	report_canvas_circle(cv, x + 6, y - 4, 5, REFUSAL_COLOR, &halo);
	report_canvas_text(cv, NULL, x + 15, y, &plain, "refusal");
	x += 70;
	report_canvas_rect(cv, NULL, x + 2, y - 8.5, 9, 9, OOM_COLOR, &halo);
	report_canvas_text(cv, NULL, x + 15, y, &plain, "driver OOM");
}

/* A panel's title: its text, then wrapped (wrap.h). */
struct title {
	struct report_buf text;
	struct report_wrapped w;
};

static void title_free(struct title *t)
{
	report_wrapped_free(&t->w);
	free(t->text.s);
}

/* "train.py, pid 4242 on node7, GPU 0 (GPU-8e6b..., nvidia-smi 2), limit
 * 4.00 GiB". Text from the log is made safe for one line first. */
static void title_of(struct title *t, const struct report_process *p, const struct report_gpu *g)
{
	char buf[32];

	if (p->program && p->program[0]) {
		report_buf_safe(&t->text, p->program);
		report_buf_puts(&t->text, ", ");
	}
	report_buf_printf(&t->text, "pid %lld", p->pid);
	if (p->host) {
		report_buf_puts(&t->text, " on ");
		report_buf_safe(&t->text, p->host);
	}
	report_buf_printf(&t->text, ", GPU %lld", g->ordinal);
	if ((g->uuid && g->uuid[0]) || g->index >= 0) {
		report_buf_puts(&t->text, " (");
		if (g->uuid && g->uuid[0])
			report_buf_safe(&t->text, g->uuid);
		if (g->index >= 0)
			report_buf_printf(&t->text, "%snvidia-smi %lld",
					  g->uuid && g->uuid[0] ? ", " : "", g->index);
		report_buf_puts(&t->text, ")");
	}
	if (g->group_limit_state == REPORT_LIMIT_SET) {
		report_buf_puts(&t->text, ", group ");
		report_buf_safe(&t->text, p->group ? p->group : "(name unknown)");
		report_buf_printf(&t->text, " budget %s",
				  report_fmt_size(g->group_limit, buf, sizeof(buf)));
		if (g->limit_state == REPORT_LIMIT_NONE)
			report_buf_puts(&t->text, ", no limit of its own");
	}
	if (g->limit_state == REPORT_LIMIT_SET)
		report_buf_printf(&t->text, ", limit %s",
				  report_fmt_size(g->limit, buf, sizeof(buf)));
	else if (g->limit_state == REPORT_LIMIT_NONE && g->group_limit_state != REPORT_LIMIT_SET)
		report_buf_puts(&t->text, ", no limit");
	report_wrap(&t->w, t->text.s, TITLE_CHARS);
}

static void put_title(struct report_canvas *cv, const struct title *t, double y)
{
	struct report_text_style st = { .size = 15, .bold = true };

	report_canvas_lines(cv, "title", 16, y, TITLE_LINE, &st, t->w.lines, t->w.n);
}

static void put_axes(struct report_canvas *cv, const struct panel *pn, size_t members)
{
	char label[48];
	struct report_stroke frame = { "#999", 1, NULL, 0 }, grid = { "#ddd", 1, NULL, 0 };
	struct report_text_style yst = { .anchor = REPORT_END }, xst = { .anchor = REPORT_MIDDLE };

	report_canvas_rect(cv, "plot-area", pn->x0, pn->y0, PLOT_W, PLOT_H, "#fafafa", &frame);
	for (unsigned i = 0; i <= pn->ys.ticks; i++) {
		double y = pn->y0 + PLOT_H - (double)i / pn->ys.ticks * PLOT_H;
		report_y_label(&pn->ys, i, label, sizeof(label));
		report_canvas_line(cv, "grid-y", pn->x0, y, pn->x0 + PLOT_W, y, &grid);
		report_canvas_text(cv, "ylabel", pn->x0 - 6, y + 4, &yst, label);
	}
	for (unsigned i = 0; i <= pn->xs.ticks; i++) {
		double x = pn->x0 + (double)i / pn->xs.ticks * PLOT_W;
		double t = i * pn->xs.step;
		if (pn->wall) {
			double at = pn->t0 + t;
			report_fmt_clock(at, label, sizeof(label));
			if (pn->xs.decimals > 0) {
				size_t n = strlen(label);
				snprintf(label + n, sizeof(label) - n, "%.*f", pn->xs.decimals,
					 at - floor(at));
				/* "12:00:05" + "0.5" -> "12:00:05.5" */
				memmove(label + n, label + n + 1, strlen(label + n + 1) + 1);
			}
		} else {
			snprintf(label, sizeof(label), "%.*f", pn->xs.decimals, t);
		}
		report_canvas_line(cv, "grid-x", x, pn->y0, x, pn->y0 + PLOT_H, &grid);
		report_canvas_text(cv, "xlabel", x, pn->y0 + PLOT_H + 16, &xst, label);
	}
	char when[48];
	struct report_buf caption = { 0 };
	report_fmt_time(pn->t0, when, sizeof(when));
	if (pn->wall)
		report_buf_printf(&caption, "UTC time of day (the first record on this GPU: %s)", when);
	else
		report_buf_printf(&caption, "seconds since %s (the first record on this GPU)", when);
	if (members > 1)
		report_buf_printf(&caption, "; %zu processes on this GPU share its axes", members);
	struct report_text_style cst = { .anchor = REPORT_MIDDLE, .fill = "#555" };
	report_canvas_text(cv, "xcaption", pn->x0 + PLOT_W / 2.0, pn->y0 + PLOT_H + 36, &cst,
			   caption.s);
	free(caption.s);
}

/* A refusal (a circle) or a driver OOM (a square) where the process stood
 * (its footprint, else reserved, in the record), over a faint line across
 * the plot at its time; the size asked for on hover. */
static void put_marks(struct report_canvas *cv, const struct panel *pn, const struct report_gpu *g)
{
	char buf[32], when[32], hover[96];
	struct report_stroke halo = { "#fff", 1.5, NULL, 0 };

	for (size_t i = 0; i < g->nmarks; i++) {
		const struct report_mark *m = &g->marks[i];
		const char *color = m->driver_oom ? OOM_COLOR : REFUSAL_COLOR;
		double x = px(pn, m->t);
		double y = m->at.known ? py(pn, m->at.v) : pn->y0 + 8;
		if (y < pn->y0 + 6)
			y = pn->y0 + 6;
		snprintf(when, sizeof(when), "%.3f", m->t - pn->t0);
		struct report_attr at = { "data-t", when };
		report_canvas_group(cv, m->driver_oom ? "driver-oom" : "refusal", &at, 1);
		snprintf(hover, sizeof(hover), "%s %s at %s s",
			 m->driver_oom ? "driver out of memory for" : "refused",
			 report_fmt_size(m->requested, buf, sizeof(buf)), when);
		report_canvas_hover(cv, hover);
		struct report_stroke across = { color, 1, "2 3", 0.5 };
		report_canvas_line(cv, NULL, x, pn->y0, x, pn->y0 + PLOT_H, &across);
		if (m->driver_oom)
			report_canvas_rect(cv, NULL, x - 6, y - 6, 12, 12, color, &halo);
		else
			report_canvas_circle(cv, x, y, 6.5, color, &halo);
		report_canvas_group_end(cv);
	}
}

/* The headline over the limit line: the limit, and the peak footprint (what
 * the limit counts) against it; a white halo keeps it readable over lines. */
static void put_limit_label(struct report_canvas *cv, const struct panel *pn,
			    const struct report_gpu *g, double y)
{
	char limit[32], peak[32];
	struct report_buf b = { 0 };
	struct report_text_style st = { .anchor = REPORT_END, .fill = LIMIT_COLOR, .bold = true,
					.halo = true };

	if (y < pn->y0 + 18)
		y = pn->y0 + 18; /* at the top: inside the plot area */
	report_buf_printf(&b, "limit %s", report_fmt_size(g->limit, limit, sizeof(limit)));
	if (g->peak_footprint.known) {
		report_buf_printf(&b, "; peak footprint %s",
				  report_fmt_size(g->peak_footprint.v, peak, sizeof(peak)));
		if (g->limit > 0)
			report_buf_printf(&b, " (%.0f%%)", 100.0 * (double)g->peak_footprint.v /
								(double)g->limit);
	}
	report_canvas_text(cv, "limit-label", pn->x0 + PLOT_W - 6, y - 5, &st, b.s);
	free(b.s);
}

/* A group's budget: a dashed line across the plot, labelled at its left
 * with the budget and the most the group's members held at once. */
static void put_budget(struct report_canvas *cv, const struct panel *pn, const char *group,
		       uint64_t budget, struct report_figure peak)
{
	char size[32], held[32];
	double y = py(pn, budget);
	double xy[4] = { pn->x0, y, pn->x0 + PLOT_W, y };
	struct report_stroke st = { BUDGET_COLOR, 2, "3 3", 0 };
	struct report_text_style tst = { .fill = BUDGET_COLOR, .bold = true, .halo = true };
	struct report_buf b = { 0 };

	report_canvas_path(cv, "group-budget", NULL, 0, xy, 2, &st);
	report_buf_puts(&b, "group ");
	report_buf_puts(&b, group ? group : "(name unknown)");
	report_buf_printf(&b, " budget %s", report_fmt_size(budget, size, sizeof(size)));
	if (peak.known) {
		report_buf_printf(&b, "; its members held at most %s",
				  report_fmt_size(peak.v, held, sizeof(held)));
		if (budget > 0)
			report_buf_printf(&b, " (%.0f%%)", 100.0 * (double)peak.v / (double)budget);
	}
	report_canvas_text(cv, "group-budget-label", pn->x0 + 6, (y < pn->y0 + 18 ? pn->y0 + 18 : y) - 5,
			   &tst, b.s);
	free(b.s);
}

/* ---- panels, grouped by GPU ------------------------------------------------------------ */

struct slot {
	const struct report_process *p;
	const struct report_gpu *g;
	size_t group;   /* the index of the first slot of its GPU */
	size_t members; /* in the first slot of a GPU: how many slots it has */
	struct panel axes; /* in the first slot of a GPU: its shared axes */
};

/* A shown GPU of a process, with the key its GPU is found by. */
struct keyed {
	const char *uuid; /* NULL or "": a GPU of its own */
	size_t at;        /* the order it was met in */
};

/* By UUID (any case), then as met; those without one last, as met. */
static int cmp_keyed(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	bool kx = x->uuid && x->uuid[0], ky = y->uuid && y->uuid[0];

	if (kx != ky)
		return kx ? -1 : 1;
	int c = kx ? strcasecmp(x->uuid, y->uuid) : 0;
	if (c)
		return c;
	return (x->at > y->at) - (x->at < y->at);
}

/* A GPU's run of slots in the sorted keys: where it starts, how long, and
 * when its first slot was met. */
struct run {
	size_t start, len, first;
};

static int cmp_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	return (x->first > y->first) - (x->first < y->first);
}

/* The axes of a GPU: from its first record to its last, up to its
 * highest figure (a limit, a marker's level included). */
static void gpu_axes(const struct slot *slots, size_t first, size_t end, struct panel *pn)
{
	double t0 = INFINITY, t1 = -INFINITY, max = 0;

	for (size_t i = first; i < end; i++) {
		const struct report_gpu *g = slots[i].g;
		t0 = fmin(t0, report_process_t0(slots[i].p));
		t1 = fmax(t1, slots[i].p->t_last);
		for (int k = 0; k < REPORT_SERIES; k++) {
			for (size_t j = 0; j < g->series[k].n; j++)
				max = fmax(max, (double)g->series[k].p[j].v);
		}
		for (size_t j = 0; j < g->nmarks; j++) {
			if (g->marks[j].at.known)
				max = fmax(max, (double)g->marks[j].at.v);
		}
		if (g->limit_state == REPORT_LIMIT_SET)
			max = fmax(max, (double)g->limit);
		if (g->group_limit_state == REPORT_LIMIT_SET)
			max = fmax(max, (double)g->group_limit);
		for (size_t j = 0; j < g->group_used.n; j++)
			max = fmax(max, (double)g->group_used.p[j].v);
	}
	pn->t0 = t0;
	pn->ys = report_y_scale(max * 1.04); /* room above a limit at a round number */
	pn->xs = report_x_scale(t1 - t0);
}

/* The panels in order: GPUs (one UUID, whatever ordinal each process saw)
 * as first met, within one its processes in order; each GPU's axes worked
 * out once. Sorting, not comparing every pair: n log n in panels. */
static struct slot *slots_of(const struct report_set *set, size_t *count)
{
	size_t n = 0;

	for (size_t i = 0; i < set->n; i++) {
		for (size_t k = 0; k < set->procs[i]->ngpus; k++)
			n += report_gpu_shown(set->procs[i], k);
	}
	struct slot *all = report_xmalloc((n ? n : 1) * sizeof(*all));
	struct slot *out = report_xmalloc((n ? n : 1) * sizeof(*out));
	struct keyed *keys = report_xmalloc((n ? n : 1) * sizeof(*keys));
	struct run *runs = report_xmalloc((n ? n : 1) * sizeof(*runs));
	size_t m = 0;
	for (size_t i = 0; i < set->n; i++) {
		for (size_t k = 0; k < set->procs[i]->ngpus; k++) {
			if (!report_gpu_shown(set->procs[i], k))
				continue;
			memset(&all[m], 0, sizeof(all[m]));
			all[m].p = set->procs[i];
			all[m].g = &set->procs[i]->gpus[k];
			keys[m] = (struct keyed){ all[m].g->uuid, m };
			m++;
		}
	}
	if (n > 1)
		qsort(keys, n, sizeof(*keys), cmp_keyed);
	size_t nruns = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && keys[i].uuid && keys[i].uuid[0] && keys[j].uuid && keys[j].uuid[0] &&
		       strcasecmp(keys[i].uuid, keys[j].uuid) == 0)
			j++;
		runs[nruns++] = (struct run){ i, j - i, keys[i].at };
		i = j;
	}
	if (nruns > 1)
		qsort(runs, nruns, sizeof(*runs), cmp_run);
	m = 0;
	for (size_t r = 0; r < nruns; r++) {
		size_t first = m;
		for (size_t k = 0; k < runs[r].len; k++) {
			out[m] = all[keys[runs[r].start + k].at];
			out[m++].group = first;
		}
		out[first].members = runs[r].len;
		gpu_axes(out, first, m, &out[first].axes);
	}
	free(all);
	free(keys);
	free(runs);
	*count = n;
	return out;
}

static double put_panel(struct report_canvas *cv, const struct slot *slots, size_t n, size_t i,
			double top, const struct report_plot *opt)
{
	const struct report_process *p = slots[i].p;
	const struct report_gpu *g = slots[i].g;
	size_t members = slots[slots[i].group].members;
	struct title t = { 0 };
	char pid[32], ordinal[32], group[32];

	title_of(&t, p, g);
	double extra = (double)(t.w.n - 1) * TITLE_LINE;
	struct panel pn = slots[slots[i].group].axes;
	pn.x0 = MARGIN_L;
	pn.y0 = top + MARGIN_T + extra;
	pn.wall = opt->wall;

	snprintf(pid, sizeof(pid), "%lld", p->pid);
	snprintf(ordinal, sizeof(ordinal), "%lld", g->ordinal);
	snprintf(group, sizeof(group), "%zu", slots[i].group);
	struct report_attr attrs[] = { { "data-pid", pid }, { "data-gpu", ordinal },
				       { "data-group", group }, { "data-uuid", g->uuid ? g->uuid : "" } };
	report_canvas_group(cv, "panel", attrs, 4);
	put_title(cv, &t, top + 24);
	title_free(&t);
	put_legend(cv, MARGIN_L, top + 46 + extra);
	put_axes(cv, &pn, members);
	for (int k = 0; k < REPORT_SERIES; k++)
		put_series(cv, &pn, &g->series[k], k, p->t_last);
	if (g->limit_state == REPORT_LIMIT_SET) {
		double y = py(&pn, g->limit);
		double xy[4] = { pn.x0, y, pn.x0 + PLOT_W, y };
		struct report_stroke st = { LIMIT_COLOR, 2.5, "8 4", 0 };
		report_canvas_path(cv, "limit", NULL, 0, xy, 2, &st);
		put_limit_label(cv, &pn, g, y);
	}
	if (g->group_limit_state == REPORT_LIMIT_SET)
		put_budget(cv, &pn, p->group, g->group_limit, g->peak_group_used);
	put_marks(cv, &pn, g);
	report_canvas_group_end(cv);
	return PANEL_H + extra;
}

/* ---- a group's panel ------------------------------------------------------------------- */

/* Whether slot k is a member of group `name` on the GPU whose slots start at
 * `first`. */
static bool member_of(const struct slot *slots, size_t k, size_t first, const char *name)
{
	return slots[k].group == first && slots[k].p->group && strcmp(slots[k].p->group, name) == 0;
}

/* Whether slot j opens a group's panel: the first member of its group on
 * its GPU. */
static bool opens_group(const struct slot *slots, size_t j)
{
	if (!slots[j].p->group)
		return false;
	for (size_t k = slots[j].group; k < j; k++) {
		if (member_of(slots, k, slots[j].group, slots[j].p->group))
			return false;
	}
	return true;
}

/* "group jobs on GPU 0 (GPU-9a0b..., nvidia-smi 2), 2 members (pids 3101,
 * 3102), budget 8.00 GiB". */
static void group_title_of(struct title *t, const struct slot *slots, size_t n, size_t j)
{
	const struct report_gpu *g = slots[j].g;
	const char *name = slots[j].p->group;
	size_t members = 0;
	char buf[32];

	for (size_t k = j; k < n; k++)
		members += member_of(slots, k, slots[j].group, name);
	report_buf_puts(&t->text, "group ");
	report_buf_safe(&t->text, name);
	report_buf_printf(&t->text, " on GPU %lld", g->ordinal);
	if (g->uuid && g->uuid[0]) {
		report_buf_puts(&t->text, " (");
		report_buf_safe(&t->text, g->uuid);
		report_buf_puts(&t->text, ")");
	}
	report_buf_printf(&t->text, ", %zu member%s (pid%s", members, members == 1 ? "" : "s",
			  members == 1 ? "" : "s");
	const char *sep = " ";
	for (size_t k = j; k < n; k++) {
		if (member_of(slots, k, slots[j].group, name)) {
			report_buf_printf(&t->text, "%s%lld", sep, slots[k].p->pid);
			sep = ", ";
		}
	}
	report_buf_puts(&t->text, ")");
	if (g->group_limit_state == REPORT_LIMIT_SET)
		report_buf_printf(&t->text, ", budget %s",
				  report_fmt_size(g->group_limit, buf, sizeof(buf)));
	report_wrap(&t->w, t->text.s, TITLE_CHARS);
}

static int cmp_point(const void *a, const void *b)
{
	const struct report_point *x = a, *y = b;
	return (x->t > y->t) - (x->t < y->t);
}

/* The panel of a group on one GPU: what all its members held at once (the
 * samples' group_used, from every member's log), each member's footprint,
 * the group's budget and the members' refusals, on the GPU's axes. */
static double put_group_panel(struct report_canvas *cv, const struct slot *slots, size_t n,
			      size_t j, double top, const struct report_plot *opt)
{
	size_t first = slots[j].group, on_gpu = 0;
	const char *name = slots[j].p->group;
	struct report_series used = { 0 };
	struct report_figure peak = { 0, false };
	const struct report_gpu *budget = NULL;
	double t_end = -INFINITY;
	struct title t = { 0 };
	size_t ncolors = sizeof(member_colors) / sizeof(member_colors[0]);

	for (size_t k = first; k < n && slots[k].group == first; k++) {
		on_gpu++;
		if (!member_of(slots, k, first, name))
			continue;
		const struct report_gpu *g = slots[k].g;
		used.p = report_xrealloc(used.p, (used.n + g->group_used.n + 1) * sizeof(*used.p));
		memcpy(used.p + used.n, g->group_used.p, g->group_used.n * sizeof(*used.p));
		used.n += g->group_used.n;
		if (g->group_limit_state == REPORT_LIMIT_SET)
			budget = g;
		if (g->peak_group_used.known && (!peak.known || g->peak_group_used.v > peak.v))
			peak = g->peak_group_used;
		t_end = fmax(t_end, slots[k].p->t_last);
	}
	if (used.n > 1)
		qsort(used.p, used.n, sizeof(*used.p), cmp_point);
	group_title_of(&t, slots, n, j);
	double extra = (double)(t.w.n - 1) * TITLE_LINE;
	struct panel pn = slots[first].axes;
	pn.x0 = MARGIN_L;
	pn.y0 = top + MARGIN_T + extra;
	pn.wall = opt->wall;

	char group[32];
	snprintf(group, sizeof(group), "%zu", first);
	struct report_attr attrs[] = { { "data-group-name", name }, { "data-group", group },
				       { "data-uuid", slots[j].g->uuid ? slots[j].g->uuid : "" } };
	report_canvas_group(cv, "group-panel", attrs, 3);
	put_title(cv, &t, top + 24);
	title_free(&t);

	/* The legend: the group's use, then each member's footprint. */
	double x = MARGIN_L, y = top + 46 + extra;
	legend_line(cv, x, y, GROUP_USED_COLOR, 3, NULL, "held by the group");
	x += 150;
	size_t m = 0;
	for (size_t k = first; k < n && slots[k].group == first; k++) {
		if (!member_of(slots, k, first, name) || x > WIDTH - 160)
			continue;
		char label[48];
		snprintf(label, sizeof(label), "pid %lld footprint", slots[k].p->pid);
		legend_line(cv, x, y, member_colors[m++ % ncolors], 2, NULL, label);
		x += 150;
	}

	put_axes(cv, &pn, on_gpu);
	m = 0;
	for (size_t k = first; k < n && slots[k].group == first; k++) {
		if (!member_of(slots, k, first, name))
			continue;
		char pid[32];
		snprintf(pid, sizeof(pid), "%lld", slots[k].p->pid);
		struct report_attr at = { "data-pid", pid };
		put_steps(cv, &pn, &slots[k].g->series[REPORT_FOOTPRINT], "series member", &at, 1,
			  member_colors[m++ % ncolors], 1.2, slots[k].p->t_last);
	}
	put_steps(cv, &pn, &used, "series group-used", NULL, 0, GROUP_USED_COLOR, 2.5, t_end);
	if (budget)
		put_budget(cv, &pn, name, budget->group_limit, peak);
	for (size_t k = first; k < n && slots[k].group == first; k++) {
		if (member_of(slots, k, first, name))
			put_marks(cv, &pn, slots[k].g);
	}
	report_canvas_group_end(cv);
	free(used.p);
	return PANEL_H + extra;
}

/* ---- the file -------------------------------------------------------------------------- */

bool report_plot_put(const struct report_set *set, const struct report_plot *opt,
		     enum report_canvas_kind kind, FILE *f, const char *path, size_t *panels,
		     size_t *group_panels)
{
	size_t n;
	struct slot *slots = slots_of(set, &n);
	double height = 0;

	/* The height first: each panel's title may take more lines. */
	*group_panels = 0;
	for (size_t i = 0; i < n; i++) {
		struct title t = { 0 };
		title_of(&t, slots[i].p, slots[i].g);
		height += PANEL_H + (double)(t.w.n - 1) * TITLE_LINE;
		title_free(&t);
		if (opens_group(slots, i)) {
			struct title gt = { 0 };
			group_title_of(&gt, slots, n, i);
			height += PANEL_H + (double)(gt.w.n - 1) * TITLE_LINE;
			title_free(&gt);
			++*group_panels;
		}
	}
	if (n == 0)
		height = 60;
	*panels = n;
	struct report_canvas cv;
	if (!report_canvas_begin(&cv, kind, f, path, WIDTH, height)) {
		free(slots);
		return false;
	}
	if (n == 0) {
		struct report_text_style plain = { 0 };
		report_canvas_text(&cv, NULL, 16, 36, &plain, "no GPU in these logs");
	}
	double top = 0;
	for (size_t i = 0; i < n; i++) {
		top += put_panel(&cv, slots, n, i, top, opt);
		/* After a GPU's last panel, a panel per group of processes on it. */
		if (i + 1 < n && slots[i + 1].group == slots[i].group)
			continue;
		for (size_t j = slots[i].group; j <= i; j++) {
			if (opens_group(slots, j))
				top += put_group_panel(&cv, slots, n, j, top, opt);
		}
	}
	free(slots);
	if (!report_canvas_end(&cv)) {
		fprintf(stderr, "cumemcap report: --plot %s: cannot write: %s\n", path,
			ferror(f) ? strerror(errno) : "cairo could not draw it");
		return false;
	}
	return true;
}

bool report_plot_write(const struct report_set *set, const struct report_plot *opt,
		       enum report_canvas_kind kind, const char *path, size_t *panels,
		       size_t *group_panels)
{
	FILE *f = fopen(path, kind == REPORT_CANVAS_SVG ? "w" : "wb");

	if (!f) {
		fprintf(stderr, "cumemcap report: --plot %s: cannot create: %s\n", path,
			strerror(errno));
		return false;
	}
	bool ok = report_plot_put(set, opt, kind, f, path, panels, group_panels);
	if (fclose(f) != 0 && ok) {
		fprintf(stderr, "cumemcap report: --plot %s: cannot write: %s\n", path,
			strerror(errno));
		ok = false;
	}
	return ok;
}
