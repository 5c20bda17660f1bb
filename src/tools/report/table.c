/* table: the table, the process blocks and the JSON of cumemcap report
 * (see table.h). The cells are built as strings, measured, then padded;
 * the JSON writes every figure as an exact 64-bit integer. Single-threaded,
 * no global state. */
#include "config.h"

#include "table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"
#include "tools/json-out.h"

/* ---- cells ------------------------------------------------------------------------ */

/* A count seen both as events and in the exit record: the larger. */
static struct report_figure count_of(uint64_t events, struct report_figure at_exit)
{
	struct report_figure f = { events, true };
	if (at_exit.known && at_exit.v > events)
		f.v = at_exit.v;
	return f;
}

static struct report_figure limit_of(const struct report_gpu *g)
{
	return (struct report_figure){ g->limit, g->limit_state == REPORT_LIMIT_SET };
}

static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

/* How a size is written: exact bytes, each in its own unit (--wide), or
 * all in one unit (`unit`, 0..6) with two decimals, cut. */
struct sizes {
	bool bytes, own_unit;
	unsigned unit;
};

static char *size_cell(const struct sizes *sz, struct report_figure f)
{
	char buf[48];

	if (!f.known)
		return report_xstrdup("-");
	if (sz->bytes) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)f.v);
	} else if (sz->own_unit) {
		report_fmt_size(f.v, buf, sizeof(buf));
	} else if (sz->unit == 0) {
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)f.v);
	} else {
		unsigned shift = 10 * sz->unit;
		uint64_t whole = f.v >> shift;
		uint64_t rem = f.v & ((UINT64_C(1) << shift) - 1);
		unsigned hundredths = (unsigned)(((unsigned __int128)rem * 100) >> shift);
		if (whole == 0 && hundredths == 0 && f.v > 0)
			snprintf(buf, sizeof(buf), "<0.01");
		else
			snprintf(buf, sizeof(buf), "%llu.%02u", (unsigned long long)whole,
				 hundredths);
	}
	return report_xstrdup(buf);
}

static char *count_cell(struct report_figure f)
{
	char buf[32];

	if (!f.known)
		return report_xstrdup("-");
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)f.v);
	return report_xstrdup(buf);
}

/* "0 (8e6bd7c8)": the ordinal and the first block of the UUID. */
static char *gpu_cell(const struct report_gpu *g, bool with_uuid)
{
	struct report_buf b = { 0 };

	report_buf_printf(&b, "%lld", g->ordinal);
	if (with_uuid && g->uuid && g->uuid[0]) {
		const char *u = strncmp(g->uuid, "GPU-", 4) == 0 ? g->uuid + 4 : g->uuid;
		char shortid[9];
		size_t n = strcspn(u, "-");
		if (n > 8)
			n = 8;
		memcpy(shortid, u, n);
		shortid[n] = '\0';
		report_buf_puts(&b, " (");
		report_buf_safe(&b, shortid);
		report_buf_puts(&b, ")");
	}
	return report_buf_take(&b);
}

/* The compact table's program: at most PROGRAM_COLUMNS, the rest as "…"
 * (the process block has it whole). */
#define PROGRAM_COLUMNS 16

static char *program_cell(const struct report_process *p, bool whole)
{
	struct report_buf b = { 0 };

	if (!p->program || !p->program[0])
		return report_xstrdup("-");
	report_buf_safe(&b, p->program);
	char *s = report_buf_take(&b);
	if (whole || report_text_width(s) <= PROGRAM_COLUMNS)
		return s;
	size_t cols = 0, i = 0;
	for (; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80 && cols++ == PROGRAM_COLUMNS)
			break;
	}
	s[i] = '\0';
	report_buf_puts(&b, s);
	report_buf_puts(&b, "\xe2\x80\xa6");
	free(s);
	return report_buf_take(&b);
}

static char *context_cell(const struct sizes *sz, const struct report_gpu *g, bool with_source)
{
	const char *source;
	char *cell = size_cell(sz, report_gpu_context(g, &source));

	if (!source || !with_source)
		return cell;
	/* "300.00 MiB (nvml)": where the overhead the limit counts was learned. */
	struct report_buf b = { 0 };
	report_buf_puts(&b, cell);
	report_buf_puts(&b, " (");
	report_buf_safe(&b, source);
	report_buf_puts(&b, ")");
	free(cell);
	return report_buf_take(&b);
}

/* ---- the table ----------------------------------------------------------------------- */

#define MAX_COLUMNS 12

struct column {
	const char *title;
	bool right;
};

static const struct column wide_columns[] = {
	{ "PID", true },       { "PROGRAM", false },      { "GPU", false },
	{ "LIMIT", true },     { "PEAK LIVE", true },      { "PEAK RESERVED", true },
	{ "PEAK FOOTPRINT", true }, { "PEAK DRIVER", true }, { "CONTEXT", true },
	{ "REFUSALS", true },  { "DRIVER OOMS", true },    { "AVOIDED", true },
};

static const struct column compact_columns[] = {
	{ "PID", true },  { "PROGRAM", false },  { "GPU", false },     { "LIMIT", true },
	{ "LIVE", true }, { "RESERVED", true },  { "FOOTPRINT", true }, { "DRIVER", true },
	{ "CONTEXT", true }, { "REFUSED", true }, { "OOMS", true },
};

static void fill_row(char **row, const struct report_process *p, const struct report_gpu *g,
		     const struct sizes *sz, bool wide, size_t ncols)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", p->pid);
	row[0] = report_xstrdup(buf);
	row[1] = program_cell(p, wide);
	if (!g) {
		for (size_t c = 2; c < ncols; c++)
			row[c] = report_xstrdup("-");
		return;
	}
	row[2] = gpu_cell(g, wide);
	row[3] = g->limit_state == REPORT_LIMIT_NONE ? report_xstrdup("none")
						       : size_cell(sz, limit_of(g));
	row[4] = size_cell(sz, g->peak_live);
	row[5] = size_cell(sz, g->peak_reserved);
	row[6] = size_cell(sz, g->peak_footprint);
	row[7] = size_cell(sz, g->peak_driver);
	row[8] = context_cell(sz, g, wide);
	row[9] = count_cell(count_of(g->refusal_events, g->exit_refusals));
	row[10] = count_cell(count_of(g->oom_events, g->exit_ooms));
	if (wide)
		row[11] = count_cell(g->avoided);
}

/* The one unit of the compact table: that of its largest size. */
static unsigned table_unit(const struct report_set *set)
{
	uint64_t max = 0;

	for (size_t i = 0; i < set->n; i++) {
		const struct report_process *p = set->procs[i];
		for (size_t k = 0; k < p->ngpus; k++) {
			const struct report_gpu *g = &p->gpus[k];
			const char *source;
			struct report_figure f[] = { limit_of(g), g->peak_live, g->peak_reserved,
						     g->peak_footprint, g->peak_driver,
						     report_gpu_context(g, &source) };
			if (!report_gpu_shown(p, k))
				continue;
			for (size_t j = 0; j < sizeof(f) / sizeof(f[0]); j++) {
				if (f[j].known && f[j].v > max)
					max = f[j].v;
			}
		}
	}
	unsigned u = 0;
	while (u < 6 && max >> (10 * (u + 1)))
		u++;
	return u;
}

void report_print_table(const struct report_set *set, const struct report_view *view)
{
	const struct column *columns = view->wide ? wide_columns : compact_columns;
	size_t ncols = view->wide ? sizeof(wide_columns) / sizeof(wide_columns[0])
				  : sizeof(compact_columns) / sizeof(compact_columns[0]);
	struct sizes sz = { .bytes = view->bytes, .own_unit = view->wide };
	size_t nrows = 1, width[MAX_COLUMNS];

	if (!view->wide && !view->bytes)
		sz.unit = table_unit(set);
	for (size_t i = 0; i < set->n; i++)
		nrows += set->procs[i]->ngpus ? set->procs[i]->ngpus : 1;
	char *(*rows)[MAX_COLUMNS] = report_xmalloc(nrows * sizeof(*rows));
	size_t n = 0;
	for (size_t c = 0; c < ncols; c++)
		rows[n][c] = report_xstrdup(columns[c].title);
	n++;
	for (size_t i = 0; i < set->n; i++) {
		const struct report_process *p = set->procs[i];
		if (p->ngpus == 0)
			fill_row(rows[n++], p, NULL, &sz, view->wide, ncols);
		for (size_t k = 0; k < p->ngpus; k++) {
			if (report_gpu_shown(p, k))
				fill_row(rows[n++], p, &p->gpus[k], &sz, view->wide, ncols);
		}
	}
	for (size_t c = 0; c < ncols; c++) {
		width[c] = 0;
		for (size_t r = 0; r < n; r++) {
			size_t w = report_text_width(rows[r][c]);
			if (w > width[c])
				width[c] = w;
		}
	}
	if (!view->wide) {
		printf("sizes in %s; LIVE, RESERVED, FOOTPRINT, DRIVER are peaks (--wide: every "
		       "column)\n",
		       view->bytes ? "bytes" : units[sz.unit]);
	}
	for (size_t r = 0; r < n; r++) {
		struct report_buf line = { 0 };
		for (size_t c = 0; c < ncols; c++) {
			size_t pad = width[c] - report_text_width(rows[r][c]);
			if (c > 0)
				report_buf_puts(&line, "  ");
			for (size_t s = 0; columns[c].right && s < pad; s++)
				report_buf_puts(&line, " ");
			report_buf_puts(&line, rows[r][c]);
			for (size_t s = 0; !columns[c].right && c + 1 < ncols && s < pad; s++)
				report_buf_puts(&line, " ");
			free(rows[r][c]);
		}
		puts(line.s);
		free(line.s);
	}
	free(rows);
}

/* ---- a block per process --------------------------------------------------------------- */

static void put_ending(struct report_buf *b, const struct report_process *p)
{
	if (p->running) {
		report_buf_puts(b, "running (no exit record yet; the pid is alive on this host); "
				   "ran at least ");
	} else if (!p->has_exit && p->here) {
		report_buf_puts(b, "no exit record, and no longer running (killed?); ran at least ");
	} else if (!p->has_exit) {
		report_buf_puts(b, "no exit record (killed?); ran at least ");
	} else if (p->exit_reason && strcmp(p->exit_reason, "exit") == 0) {
		report_buf_puts(b, "exited; ran ");
	} else if (p->exit_reason && strcmp(p->exit_reason, "signal") == 0) {
		const char *name = p->has_signal ? report_signal_name(p->exit_signal) : NULL;
		if (!p->has_signal)
			report_buf_puts(b, "ended by a signal; ran ");
		else if (name)
			report_buf_printf(b, "ended by signal %lld (%s); ran ", p->exit_signal,
					  name);
		else
			report_buf_printf(b, "ended by signal %lld; ran ", p->exit_signal);
	} else {
		report_buf_puts(b, "ended (");
		report_buf_safe(b, p->exit_reason ? p->exit_reason : "no reason given");
		report_buf_puts(b, "); ran ");
	}
}

static void print_gpu_line(const struct report_gpu *g)
{
	struct report_buf b = { 0 };
	const char *source;
	struct report_figure ctx = report_gpu_context(g, &source);
	char buf[32];

	report_buf_printf(&b, "  GPU %lld: ", g->ordinal);
	report_buf_safe(&b, g->uuid && g->uuid[0] ? g->uuid : "UUID unknown");
	if (g->index >= 0)
		report_buf_printf(&b, ", nvidia-smi index %lld", g->index);
	if (ctx.known) {
		report_buf_printf(&b, "; context %s", report_fmt_size(ctx.v, buf, sizeof(buf)));
		if (source) {
			report_buf_puts(&b, " (");
			report_buf_safe(&b, source);
			report_buf_puts(&b, ")");
		}
	}
	if (g->avoided.known)
		report_buf_printf(&b, "; %llu driver calls avoided", (unsigned long long)g->avoided.v);
	puts(b.s);
	free(b.s);
}

static void print_process(const struct report_process *p)
{
	struct report_buf b = { 0 };
	char buf[64];
	double begin = p->has_start ? p->t_start : p->t_first;

	report_buf_printf(&b, "pid %lld", p->pid);
	if (p->program && p->program[0]) {
		report_buf_puts(&b, " (");
		report_buf_safe(&b, p->program);
		report_buf_puts(&b, ")");
	}
	report_buf_puts(&b, ": ");
	put_ending(&b, p);
	report_buf_puts(&b, report_fmt_duration(p->t_last - begin, buf, sizeof(buf)));
	if (p->has_start) {
		report_buf_printf(&b, "; started %s",
				  report_fmt_time(p->t_start, buf, sizeof(buf)));
	} else {
		report_buf_printf(&b, "; no start record (first record %s)",
				  report_fmt_time(p->t_first, buf, sizeof(buf)));
	}
	if (p->host) {
		report_buf_puts(&b, " on ");
		report_buf_safe(&b, p->host);
	}
	bool hidden = false;
	for (size_t k = 0; k < p->ngpus; k++) {
		if (report_gpu_shown(p, k) || p->gpus[k].excluded)
			continue;
		report_buf_printf(&b, "%s%lld",
				  hidden ? ", " : "; unused GPUs: ", p->gpus[k].ordinal);
		hidden = true;
	}
	report_buf_puts(&b, "\n  command:");
	if (p->argc == 0)
		report_buf_puts(&b, " -");
	for (size_t i = 0; i < p->argc; i++) {
		report_buf_puts(&b, " ");
		report_buf_shell_arg(&b, p->argv[i]);
	}
	puts(b.s);
	free(b.s);
	for (size_t k = 0; k < p->ngpus; k++) {
		if (report_gpu_shown(p, k))
			print_gpu_line(&p->gpus[k]);
	}
}

void report_print_processes(const struct report_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		print_process(set->procs[i]);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void json_figure(const char *key, struct report_figure f)
{
	printf(",\"%s\":", key);
	if (f.known)
		printf("%llu", (unsigned long long)f.v);
	else
		fputs("null", stdout);
}

static void json_time(const char *key, bool known, double t)
{
	char buf[48];

	printf(",\"%s\":", key);
	if (known)
		cumemcap_json_put_str(stdout, report_fmt_rfc3339(t, buf, sizeof(buf)));
	else
		fputs("null", stdout);
}

static const char *state_of(const struct report_process *p)
{
	if (p->running)
		return "running";
	if (!p->has_exit)
		return p->here ? "killed" : "no_exit";
	if (p->exit_reason && strcmp(p->exit_reason, "exit") == 0)
		return "exited";
	if (p->exit_reason && strcmp(p->exit_reason, "signal") == 0)
		return "signal";
	return "ended";
}

static void json_gpu(const struct report_process *p, size_t k)
{
	const struct report_gpu *g = &p->gpus[k];
	const char *source;
	static const char *const limit_states[] = {
		[REPORT_LIMIT_UNKNOWN] = "unknown",
		[REPORT_LIMIT_NONE] = "none",
		[REPORT_LIMIT_SET] = "set",
	};

	printf("{\"gpu\":%lld,\"index\":", g->ordinal);
	if (g->index >= 0)
		printf("%lld", g->index);
	else
		fputs("null", stdout);
	fputs(",\"uuid\":", stdout);
	cumemcap_json_put_str(stdout, g->uuid);
	fputs(",\"pci\":", stdout);
	cumemcap_json_put_str(stdout, g->pci);
	printf(",\"used\":%s,\"limit_state\":\"%s\"", g->used ? "true" : "false",
	       limit_states[g->limit_state]);
	json_figure("limit", limit_of(g));
	json_figure("capacity", g->capacity);
	json_figure("peak_live", g->peak_live);
	json_figure("peak_pooled", g->peak_pooled);
	json_figure("peak_reserved", g->peak_reserved);
	json_figure("peak_footprint", g->peak_footprint);
	json_figure("peak_driver_used", g->peak_driver);
	json_figure("context_overhead", report_gpu_context(g, &source));
	fputs(",\"context_source\":", stdout);
	cumemcap_json_put_str(stdout, source);
	json_figure("refusals", count_of(g->refusal_events, g->exit_refusals));
	json_figure("driver_oom", count_of(g->oom_events, g->exit_ooms));
	json_figure("avoided", g->avoided);
	json_figure("allocs", g->allocs);
	putchar('}');
}

void report_print_json(const struct report_set *set)
{
	fputs("{\"report\":1,\"processes\":[", stdout);
	for (size_t i = 0; i < set->n; i++) {
		const struct report_process *p = set->procs[i];
		double begin = p->has_start ? p->t_start : p->t_first;
		printf("%s\n{\"pid\":%lld,\"program\":", i ? "," : "", p->pid);
		cumemcap_json_put_str(stdout, p->program);
		fputs(",\"host\":", stdout);
		cumemcap_json_put_str(stdout, p->host);
		fputs(",\"log\":", stdout);
		cumemcap_json_put_str(stdout, p->file);
		printf(",\"state\":\"%s\",\"reason\":", state_of(p));
		cumemcap_json_put_str(stdout, p->exit_reason);
		fputs(",\"signal\":", stdout);
		if (p->has_exit && p->has_signal) {
			printf("%lld,\"signal_name\":", p->exit_signal);
			cumemcap_json_put_str(stdout, report_signal_name(p->exit_signal));
		} else {
			fputs("null,\"signal_name\":null", stdout);
		}
		json_time("start", p->has_start, p->t_start);
		json_time("first", true, p->t_first);
		json_time("last", true, p->t_last);
		printf(",\"seconds\":%.3f,\"argv\":", p->t_last - begin);
		if (!p->argv) {
			fputs("null", stdout);
		} else {
			putchar('[');
			for (size_t a = 0; a < p->argc; a++) {
				if (a)
					putchar(',');
				cumemcap_json_put_str(stdout, p->argv[a]);
			}
			putchar(']');
		}
		fputs(",\"gpus\":[", stdout);
		bool first = true;
		for (size_t k = 0; k < p->ngpus; k++) {
			if (p->gpus[k].excluded)
				continue;
			if (!first)
				putchar(',');
			first = false;
			json_gpu(p, k);
		}
		fputs("]}", stdout);
	}
	fputs("\n]}\n", stdout);
}
