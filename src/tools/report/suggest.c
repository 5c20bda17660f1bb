/* suggest: cumemcap report --suggest (see suggest.h). The runs are sorted
 * by program and GPU (or group and GPU) and each run of equal keys becomes
 * one row, so the work stays n log n in processes. */
#include "config.h"

#include "suggest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sizing.h"
#include "text.h"
#include "tools/json-out.h"

/* ---- one run on one GPU ------------------------------------------------------------- */

/* A run's peak footprint and what it was made of: reserved at the peak is
 * live plus cached (pooled blocks and what the arenas keep), and the
 * overhead the limit counts comes on top. */
struct peak {
	uint64_t footprint, live, cached, overhead;
	bool estimated;     /* no footprint in the log: reserved + context overhead */
	bool overhead_known; /* the log gave the overhead (else it is 0 here) */
};

/* The value of a series at time t: its last point at or before t. */
static bool value_at(const struct report_series *s, double t, uint64_t *out)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) { /* the first point after t */
		size_t mid = lo + (hi - lo) / 2;
		if (s->p[mid].t <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return false;
	*out = s->p[lo - 1].v;
	return true;
}

static bool peak_of(const struct report_gpu *g, struct peak *pk)
{
	const char *source;
	struct report_figure ctx = report_gpu_context(g, &source);
	const struct report_series *fp = &g->series[REPORT_FOOTPRINT];

	memset(pk, 0, sizeof(*pk));
	if (g->peak_footprint.known) {
		pk->footprint = g->peak_footprint.v;
	} else if (g->peak_reserved.known) {
		pk->footprint = g->peak_reserved.v + (ctx.known ? ctx.v : 0);
		pk->estimated = true;
	} else {
		return false;
	}
	pk->overhead_known = ctx.known;
	pk->overhead = ctx.known && ctx.v <= pk->footprint ? ctx.v : 0;
	uint64_t reserved = pk->footprint - pk->overhead;

	/* Live at the moment the footprint peaked, where the series show it;
	 * of several such moments the one where the program held the most
	 * (what the pools cache could have been given back, live could not). */
	uint64_t live = g->peak_live.known ? g->peak_live.v : 0;
	bool found = false;
	uint64_t top = 0, v;
	for (size_t i = 0; i < fp->n; i++) {
		if (fp->p[i].v < top || !value_at(&g->series[REPORT_LIVE], fp->p[i].t, &v))
			continue;
		if (!found || fp->p[i].v > top || v > live)
			live = v;
		found = true;
		top = fp->p[i].v;
	}
	pk->live = live < reserved ? live : reserved;
	pk->cached = reserved - pk->live;
	return true;
}

static uint64_t refusals_of(const struct report_gpu *g)
{
	uint64_t n = g->refusal_events;
	return g->exit_refusals.known && g->exit_refusals.v > n ? g->exit_refusals.v : n;
}

struct run {
	const struct report_process *p;
	const struct report_gpu *g;
	const char *key;   /* program, or group name */
	long long gpu;     /* the ordinal it saw */
	const char *uuid;  /* groups: the GPU's UUID, when known */
	struct peak peak;
};

static const char *or_dash(const char *s)
{
	return s ? s : "-";
}

static int cmp_program_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	if (c)
		return c;
	return (x->gpu > y->gpu) - (x->gpu < y->gpu);
}

/* A group's GPU: its UUID where known (members may see it under other
 * ordinals), else the ordinal. */
static int cmp_group_run(const void *a, const void *b)
{
	const struct run *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	if (c)
		return c;
	if (x->uuid && y->uuid)
		return strcasecmp(x->uuid, y->uuid);
	if (x->uuid || y->uuid)
		return x->uuid ? -1 : 1;
	return (x->gpu > y->gpu) - (x->gpu < y->gpu);
}

/* Every shown GPU of every process with a peak (groups: of a member). */
static struct run *runs_of(const struct report_set *set, bool groups, size_t *count)
{
	size_t n = 0, cap = 16;
	struct run *runs = report_xmalloc(cap * sizeof(*runs));

	for (size_t i = 0; i < set->n; i++) {
		const struct report_process *p = set->procs[i];
		if (groups && !p->group)
			continue;
		for (size_t k = 0; k < p->ngpus; k++) {
			const struct report_gpu *g = &p->gpus[k];
			struct run r = { .p = p, .g = g, .gpu = g->ordinal };
			if (!report_gpu_shown(p, k) || !g->used || !peak_of(g, &r.peak))
				continue;
			r.key = groups ? p->group : or_dash(p->program);
			r.uuid = g->uuid && g->uuid[0] ? g->uuid : NULL;
			if (n == cap) {
				cap *= 2;
				runs = report_xrealloc(runs, cap * sizeof(*runs));
			}
			runs[n++] = r;
		}
	}
	if (n > 1)
		qsort(runs, n, sizeof(*runs), groups ? cmp_group_run : cmp_program_run);
	*count = n;
	return runs;
}

/* ---- rows ----------------------------------------------------------------------------- */

/* One program on one GPU (or one group on one GPU): runs [first, end). */
struct row {
	size_t first, end;
	size_t top;      /* the run with the highest peak */
	size_t refused;  /* runs refused at a limit */
	uint64_t need;   /* programs: the top peak; groups: the most held at once */
	bool need_known;
	uint64_t limit;  /* the suggestion */
};

static struct row *rows_of(const struct run *runs, size_t n, bool groups, size_t *count)
{
	struct row *rows = report_xmalloc((n ? n : 1) * sizeof(*rows));
	size_t m = 0;

	for (size_t i = 0; i < n;) {
		struct row r = { .first = i, .top = i };
		size_t j = i;
		while (j < n && (groups ? cmp_group_run : cmp_program_run)(&runs[i], &runs[j]) == 0) {
			if (runs[j].peak.footprint > runs[r.top].peak.footprint)
				r.top = j;
			r.refused += refusals_of(runs[j].g) > 0;
			if (groups) {
				struct report_figure used = runs[j].g->peak_group_used;
				if (used.known && (!r.need_known || used.v > r.need)) {
					r.need = used.v;
					r.need_known = true;
				}
			}
			j++;
		}
		r.end = j;
		if (!groups) {
			r.need = runs[r.top].peak.footprint;
			r.need_known = true;
		}
		if (r.need_known) {
			r.limit = report_suggest_limit(r.need);
			rows[m++] = r;
		}
		i = j;
	}
	*count = m;
	return rows;
}

/* ---- text ----------------------------------------------------------------------------- */

static const char *size_text(uint64_t v, bool bytes, char *buf, size_t len)
{
	if (bytes) {
		snprintf(buf, len, "%llu", (unsigned long long)v);
		return buf;
	}
	return report_fmt_size(v, buf, len);
}

/* Cells are built, measured, then padded (a program name may be wide). */
static void print_cells(char **cells, size_t rows, size_t cols, const bool *right)
{
	size_t width[16] = { 0 };

	for (size_t r = 0; r < rows; r++) {
		for (size_t c = 0; c < cols; c++) {
			size_t w = report_text_width(cells[r * cols + c]);
			if (w > width[c])
				width[c] = w;
		}
	}
	for (size_t r = 0; r < rows; r++) {
		struct report_buf line = { 0 };
		for (size_t c = 0; c < cols; c++) {
			const char *s = cells[r * cols + c];
			size_t pad = width[c] - report_text_width(s);
			if (c)
				report_buf_puts(&line, "  ");
			for (size_t k = 0; right[c] && k < pad; k++)
				report_buf_puts(&line, " ");
			report_buf_puts(&line, s);
			for (size_t k = 0; !right[c] && c + 1 < cols && k < pad; k++)
				report_buf_puts(&line, " ");
			free(cells[r * cols + c]);
		}
		puts(line.s);
		free(line.s);
	}
}

static char *dup_safe(const char *s)
{
	struct report_buf b = { 0 };
	report_buf_safe(&b, s);
	return report_buf_take(&b);
}

static char *dup_size(uint64_t v, bool bytes)
{
	char buf[48];
	return report_xstrdup(size_text(v, bytes, buf, sizeof(buf)));
}

static char *dup_count(size_t n)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%zu", n);
	return report_xstrdup(buf);
}

static char *dup_limit(const struct row *r)
{
	char buf[48];
	struct report_buf b = { 0 };
	report_buf_puts(&b, report_fmt_limit(r->limit, buf, sizeof(buf)));
	if (r->refused)
		report_buf_puts(&b, " (at least)");
	return report_buf_take(&b);
}

/* A program row shows what its peak footprint was made of; a group row
 * shows only what the group held at its peak. */
static void print_table(const struct run *runs, const struct row *rows, size_t n, bool bytes,
			bool groups)
{
	static const char *const program_titles[] = { "PROGRAM",  "GPU",     "RUNS",
						      "PEAK FOOTPRINT", "LIVE", "CACHED",
						      "OVERHEAD", "REFUSED", "SUGGESTED LIMIT" };
	static const char *const group_titles[] = { "GROUP",   "GPU",     "MEMBERS",
						    "PEAK HELD", "REFUSED", "SUGGESTED BUDGET" };
	const char *const *titles = groups ? group_titles : program_titles;
	size_t cols = groups ? 6 : 9;
	bool right[9];
	char **cells = report_xmalloc((n + 1) * cols * sizeof(*cells));

	for (size_t c = 0; c < cols; c++) {
		cells[c] = report_xstrdup(titles[c]);
		right[c] = c >= 2 && c + 1 < cols; /* figures right, names and the limit left */
	}
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		const struct peak *pk = &runs[r->top].peak;
		char **row = cells + (i + 1) * cols;
		size_t c = 0;
		char buf[32];
		row[c++] = dup_safe(runs[r->first].key);
		snprintf(buf, sizeof(buf), "%lld", runs[r->first].gpu);
		row[c++] = report_xstrdup(buf);
		row[c++] = dup_count(r->end - r->first);
		if (groups) {
			row[c++] = dup_size(r->need, bytes);
		} else {
			row[c++] = dup_size(pk->footprint, bytes);
			row[c++] = dup_size(pk->live, bytes);
			row[c++] = dup_size(pk->cached, bytes);
			row[c++] = dup_size(pk->overhead, bytes);
		}
		row[c++] = dup_count(r->refused);
		row[c++] = dup_limit(r);
	}
	print_cells(cells, n + 1, cols, right);
	free(cells);
}

/* "pid 4242 on node7, pid 4243 on node8": the refused runs. */
static void put_refused(struct report_buf *b, const struct run *runs, const struct row *r)
{
	const char *sep = "";

	for (size_t j = r->first; j < r->end; j++) {
		if (!refusals_of(runs[j].g))
			continue;
		report_buf_printf(b, "%spid %lld", sep, runs[j].p->pid);
		if (runs[j].p->host) {
			report_buf_puts(b, " on ");
			report_buf_safe(b, runs[j].p->host);
		}
		sep = ", ";
	}
}

static void print_notes(const struct run *runs, const struct row *rows, size_t n, bool groups)
{
	char limit[48], peak[32];

	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		const struct run *top = &runs[r->top];
		struct report_buf b = { 0 };
		report_buf_puts(&b, groups ? "group " : "");
		report_buf_safe(&b, groups || top->p->program ? top->key : "(no program name)");
		report_buf_printf(&b, " on GPU %lld: ", top->gpu);
		report_fmt_limit(r->limit, limit, sizeof(limit));
		if (groups) {
			report_buf_printf(&b, "its members held at most %s at once",
					  report_fmt_size(r->need, peak, sizeof(peak)));
		} else {
			report_buf_printf(&b, "the highest peak, %s, was pid %lld",
					  report_fmt_size(r->need, peak, sizeof(peak)), top->p->pid);
			if (top->p->host) {
				report_buf_puts(&b, " on ");
				report_buf_safe(&b, top->p->host);
			}
			if (top->peak.estimated && top->peak.overhead_known)
				report_buf_puts(&b, " (its log has no footprint: reserved plus the "
						   "context's overhead)");
			else if (top->peak.estimated)
				report_buf_puts(&b, " (its log has neither footprint nor overhead: "
						   "reserved alone; the driver's overhead, a few hundred "
						   "MiB, comes on top)");
		}
		if (r->refused) {
			size_t all = r->end - r->first;
			report_buf_printf(&b, "; %zu of %zu %s %s refused at a limit (", r->refused, all,
					  groups ? (all == 1 ? "member" : "members")
						 : (all == 1 ? "run" : "runs"),
					  r->refused == 1 ? "was" : "were");
			put_refused(&b, runs, r);
			report_buf_printf(&b, "): %s wanted more than %s got, so the peak is only a "
					      "lower bound, and so is %s; %s with %s%s (or none) to "
					      "learn the rest",
					  r->refused == 1 ? "it" : "they", r->refused == 1 ? "it" : "they",
					  limit, groups ? "run the group again" : "run it again",
					  groups ? "a budget of " : "", limit);
		}
		puts(b.s);
		free(b.s);
	}
}

/* Whether a program name can be written in a [program NAME] line as it is:
 * known, printable, no ']'. */
static bool typeable(const char *name)
{
	if (!name || !name[0])
		return false;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
		if (*c < 0x20 || *c == 0x7f || *c == ']')
			return false;
	}
	return true;
}

/* The rows of one program (or group) from row i: the end. */
static size_t same_key_end(const struct run *runs, const struct row *rows, size_t n, size_t i)
{
	size_t j = i;

	while (j < n && strcmp(runs[rows[j].first].key, runs[rows[i].first].key) == 0)
		j++;
	return j;
}

/* Rows [i, j) of one key as a setting's value: one amount when they agree,
 * else SEL=AMOUNT per GPU (the ordinal). Whether they agreed. */
static bool put_amounts(struct report_buf *b, const struct run *runs, const struct row *rows,
			size_t i, size_t j)
{
	char buf[48];
	bool same = true;

	for (size_t k = i; k < j; k++)
		same = same && rows[k].limit == rows[i].limit;
	if (same) {
		report_buf_puts(b, report_fmt_limit(rows[i].limit, buf, sizeof(buf)));
		return true;
	}
	for (size_t k = i; k < j; k++)
		report_buf_printf(b, "%s%lld=%s", k > i ? "," : "", runs[rows[k].first].gpu,
				  report_fmt_limit(rows[k].limit, buf, sizeof(buf)));
	return false;
}

/* The configuration that sets the suggestions: a [program] section per
 * program (device_limits where its GPUs differ), and the environment of a
 * group's members. */
static void print_config(const struct run *pruns, const struct row *prows, size_t np,
			 const struct run *gruns, const struct row *grows, size_t ng)
{
	bool header = false;
	for (size_t i = 0; i < np;) {
		size_t j = same_key_end(pruns, prows, np, i);
		if (!typeable(pruns[prows[i].first].p->program)) {
			i = j;
			continue;
		}
		if (!header)
			puts("In a configuration file (cumemcap.conf):");
		header = true;
		struct report_buf b = { 0 }, v = { 0 };
		report_buf_puts(&b, "  [program ");
		report_buf_safe(&b, pruns[prows[i].first].key);
		bool one = put_amounts(&v, pruns, prows, i, j);
		report_buf_printf(&b, "]\n  %s = %s", one ? "limit" : "device_limits", v.s);
		puts(b.s);
		free(b.s);
		free(v.s);
		i = j;
	}
	if (ng)
		puts("For a group, in the environment of its members:");
	for (size_t i = 0; i < ng;) {
		size_t j = same_key_end(gruns, grows, ng, i);
		struct report_buf b = { 0 };
		report_buf_puts(&b, "  CUMEMCAP_GROUP=");
		report_buf_safe(&b, gruns[grows[i].first].key);
		report_buf_puts(&b, " CUMEMCAP_GROUP_LIMIT=");
		put_amounts(&b, gruns, grows, i, j);
		puts(b.s);
		free(b.s);
		i = j;
	}
}

/* ---- JSON ----------------------------------------------------------------------------- */

static void json_refused(const struct run *runs, const struct row *r)
{
	fputs(",\"refused_pids\":[", stdout);
	const char *sep = "";
	for (size_t j = r->first; j < r->end; j++) {
		if (refusals_of(runs[j].g)) {
			printf("%s%lld", sep, runs[j].p->pid);
			sep = ",";
		}
	}
	putchar(']');
}

static void print_json(const struct run *pruns, const struct row *prows, size_t np,
		       const struct run *gruns, const struct row *grows, size_t ng)
{
	char buf[48];

	printf("{\"suggest\":1,\"margin\":{\"percent\":%d,\"min\":%llu},\"programs\":[",
	       REPORT_MARGIN_PERCENT, (unsigned long long)REPORT_MARGIN_MIN);
	for (size_t i = 0; i < np; i++) {
		const struct row *r = &prows[i];
		const struct run *top = &pruns[r->top];
		printf("%s\n{\"program\":", i ? "," : "");
		cumemcap_json_put_str(stdout, top->p->program);
		printf(",\"gpu\":%lld,\"runs\":%zu,\"refused_runs\":%zu,\"lower_bound\":%s",
		       top->gpu, r->end - r->first, r->refused, r->refused ? "true" : "false");
		printf(",\"peak_footprint\":%llu,\"live\":%llu,\"cached\":%llu,\"overhead\":%llu,"
		       "\"estimated\":%s",
		       (unsigned long long)top->peak.footprint, (unsigned long long)top->peak.live,
		       (unsigned long long)top->peak.cached, (unsigned long long)top->peak.overhead,
		       top->peak.estimated ? "true" : "false");
		printf(",\"peak_pid\":%lld,\"peak_host\":", top->p->pid);
		cumemcap_json_put_str(stdout, top->p->host);
		json_refused(pruns, r);
		printf(",\"limit\":%llu,\"limit_text\":", (unsigned long long)r->limit);
		cumemcap_json_put_str(stdout, report_fmt_limit(r->limit, buf, sizeof(buf)));
		putchar('}');
	}
	fputs("\n],\"groups\":[", stdout);
	for (size_t i = 0; i < ng; i++) {
		const struct row *r = &grows[i];
		const struct run *top = &gruns[r->first];
		printf("%s\n{\"group\":", i ? "," : "");
		cumemcap_json_put_str(stdout, top->key);
		printf(",\"gpu\":%lld,\"uuid\":", top->gpu);
		cumemcap_json_put_str(stdout, top->uuid);
		printf(",\"members\":%zu,\"refused_members\":%zu,\"lower_bound\":%s,"
		       "\"peak_used\":%llu",
		       r->end - r->first, r->refused, r->refused ? "true" : "false",
		       (unsigned long long)r->need);
		json_refused(gruns, r);
		printf(",\"budget\":%llu,\"budget_text\":", (unsigned long long)r->limit);
		cumemcap_json_put_str(stdout, report_fmt_limit(r->limit, buf, sizeof(buf)));
		putchar('}');
	}
	fputs("\n]}\n", stdout);
}

/* ---- all of it ------------------------------------------------------------------------ */

void report_print_suggest(const struct report_set *set, bool json, bool bytes)
{
	size_t npr, ngr, np, ng;
	struct run *pruns = runs_of(set, false, &npr);
	struct run *gruns = runs_of(set, true, &ngr);
	struct row *prows = rows_of(pruns, npr, false, &np);
	struct row *grows = rows_of(gruns, ngr, true, &ng);

	if (json) {
		print_json(pruns, prows, np, gruns, grows, ng);
	} else if (np == 0 && ng == 0) {
		puts("no process in these logs has a peak footprint or reserved figure to size a "
		     "limit from");
	} else {
		printf("The smallest limit that would have let every logged run finish without a "
		       "refusal:\nthe highest peak footprint, plus a tenth (at least 256 MiB), "
		       "rounded up.\n\n");
		if (np) {
			print_table(pruns, prows, np, bytes, false);
			putchar('\n');
		}
		if (ng) {
			print_table(gruns, grows, ng, bytes, true);
			putchar('\n');
		}
		print_notes(pruns, prows, np, false);
		print_notes(gruns, grows, ng, true);
		putchar('\n');
		print_config(pruns, prows, np, gruns, grows, ng);
	}
	free(pruns);
	free(gruns);
	free(prows);
	free(grows);
}
