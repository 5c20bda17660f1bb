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

static struct report_figure group_limit_of(const struct report_gpu *g)
{
	return (struct report_figure){ g->group_limit, g->group_limit_state == REPORT_LIMIT_SET };
}

/* Whether a process was in a group: its start record says so, or a record
 * gave a group budget on one of its GPUs. */
static bool in_group(const struct report_process *p)
{
	if (p->group)
		return true;
	for (size_t k = 0; k < p->ngpus; k++) {
		if (p->gpus[k].group_limit_state == REPORT_LIMIT_SET)
			return true;
	}
	return false;
}

/* The table has the group columns when a process shown was in a group. */
static bool any_group(const struct report_set *set)
{
	for (size_t i = 0; i < set->n; i++) {
		if (in_group(set->procs[i]))
			return true;
	}
	return false;
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

#define MAX_COLUMNS 14

struct column {
	const char *title;
	bool right;
};

/* The columns of a table; with groups, GROUP and BUDGET come after LIMIT. */
enum column_id {
	COL_PID, COL_PROGRAM, COL_GPU, COL_LIMIT, COL_GROUP, COL_BUDGET, COL_LIVE, COL_RESERVED,
	COL_FOOTPRINT, COL_DRIVER, COL_CONTEXT, COL_REFUSED, COL_OOMS, COL_AVOIDED, COL_COUNT,
};

static const struct column wide_titles[COL_COUNT] = {
	[COL_PID] = { "PID", true },           [COL_PROGRAM] = { "PROGRAM", false },
	[COL_GPU] = { "GPU", false },          [COL_LIMIT] = { "LIMIT", true },
	[COL_GROUP] = { "GROUP", false },      [COL_BUDGET] = { "GROUP BUDGET", true },
	[COL_LIVE] = { "PEAK LIVE", true },    [COL_RESERVED] = { "PEAK RESERVED", true },
	[COL_FOOTPRINT] = { "PEAK FOOTPRINT", true }, [COL_DRIVER] = { "PEAK DRIVER", true },
	[COL_CONTEXT] = { "CONTEXT", true },   [COL_REFUSED] = { "REFUSALS", true },
	[COL_OOMS] = { "DRIVER OOMS", true },  [COL_AVOIDED] = { "AVOIDED", true },
};

static const struct column compact_titles[COL_COUNT] = {
	[COL_PID] = { "PID", true },        [COL_PROGRAM] = { "PROGRAM", false },
	[COL_GPU] = { "GPU", false },       [COL_LIMIT] = { "LIMIT", true },
	[COL_GROUP] = { "GROUP", false },   [COL_BUDGET] = { "BUDGET", true },
	[COL_LIVE] = { "LIVE", true },      [COL_RESERVED] = { "RESERVED", true },
	[COL_FOOTPRINT] = { "FOOTPRINT", true }, [COL_DRIVER] = { "DRIVER", true },
	[COL_CONTEXT] = { "CONTEXT", true }, [COL_REFUSED] = { "REFUSED", true },
	[COL_OOMS] = { "OOMS", true },
};

/* The columns this table has, in order: `ids` gets them, the count is
 * returned. */
static size_t table_columns(bool wide, bool groups, enum column_id *ids)
{
	size_t n = 0;

	for (int c = 0; c < COL_COUNT; c++) {
		if ((c == COL_GROUP || c == COL_BUDGET) && !groups)
			continue;
		if (c == COL_AVOIDED && !wide)
			continue;
		ids[n++] = (enum column_id)c;
	}
	return n;
}

/* A limit cell: the size, "none" when the log says there was none. */
static char *limit_cell(const struct sizes *sz, enum report_limit state, struct report_figure f)
{
	return state == REPORT_LIMIT_NONE ? report_xstrdup("none") : size_cell(sz, f);
}

static char *cell(enum column_id c, const struct report_process *p, const struct report_gpu *g,
		  const struct sizes *sz, bool wide)
{
	char buf[32];

	switch (c) {
	case COL_PID:
		snprintf(buf, sizeof(buf), "%lld", p->pid);
		return report_xstrdup(buf);
	case COL_PROGRAM:
		return program_cell(p, wide);
	default:
		break;
	}
	if (!g)
		return report_xstrdup("-");
	switch (c) {
	case COL_GPU: return gpu_cell(g, wide);
	case COL_LIMIT: return limit_cell(sz, g->limit_state, limit_of(g));
	case COL_GROUP: {
		struct report_buf b = { 0 };
		report_buf_safe(&b, p->group ? p->group : "-");
		return report_buf_take(&b);
	}
	case COL_BUDGET:
		if (!in_group(p))
			return report_xstrdup("-");
		return limit_cell(sz, g->group_limit_state, group_limit_of(g));
	case COL_LIVE: return size_cell(sz, g->peak_live);
	case COL_RESERVED: return size_cell(sz, g->peak_reserved);
	case COL_FOOTPRINT: return size_cell(sz, g->peak_footprint);
	case COL_DRIVER: return size_cell(sz, g->peak_driver);
	case COL_CONTEXT: return context_cell(sz, g, wide);
	case COL_REFUSED: return count_cell(count_of(g->refusal_events, g->exit_refusals));
	case COL_OOMS: return count_cell(count_of(g->oom_events, g->exit_ooms));
	case COL_AVOIDED: return count_cell(g->avoided);
	default: return report_xstrdup("-");
	}
}

static void fill_row(char **row, const struct report_process *p, const struct report_gpu *g,
		     const struct sizes *sz, bool wide, const enum column_id *ids, size_t ncols)
{
	for (size_t c = 0; c < ncols; c++)
		row[c] = cell(ids[c], p, g, sz, wide);
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
						     report_gpu_context(g, &source),
						     group_limit_of(g) };
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
	const struct column *titles = view->wide ? wide_titles : compact_titles;
	enum column_id ids[COL_COUNT];
	size_t ncols = table_columns(view->wide, any_group(set), ids);
	struct column columns[MAX_COLUMNS];
	for (size_t c = 0; c < ncols; c++)
		columns[c] = titles[ids[c]];
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
			fill_row(rows[n++], p, NULL, &sz, view->wide, ids, ncols);
		for (size_t k = 0; k < p->ngpus; k++) {
			if (report_gpu_shown(p, k))
				fill_row(rows[n++], p, &p->gpus[k], &sz, view->wide, ids, ncols);
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

static void print_gpu_line(const struct report_process *p, const struct report_gpu *g)
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
	if (in_group(p) && g->group_limit_state != REPORT_LIMIT_UNKNOWN) {
		report_buf_puts(&b, "; group ");
		report_buf_safe(&b, p->group ? p->group : "(name unknown)");
		if (g->group_limit_state == REPORT_LIMIT_SET)
			report_buf_printf(&b, " budget %s",
					  report_fmt_size(g->group_limit, buf, sizeof(buf)));
		else
			report_buf_puts(&b, " without a budget here");
		if (g->peak_group_used.known)
			report_buf_printf(&b, ", its members held at most %s",
					  report_fmt_size(g->peak_group_used.v, buf, sizeof(buf)));
	}
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
	if (p->group) {
		report_buf_puts(&b, "; member of group ");
		report_buf_safe(&b, p->group);
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
			print_gpu_line(p, &p->gpus[k]);
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
	printf(",\"group_limit_state\":\"%s\"", limit_states[g->group_limit_state]);
	json_figure("group_limit", group_limit_of(g));
	json_figure("peak_group_used", g->peak_group_used);
	json_figure("peak_group_held", g->peak_group_held);
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
		fputs(",\"group\":", stdout);
		cumemcap_json_put_str(stdout, p->group);
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
