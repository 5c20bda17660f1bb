/* report: cumemcap-report, what `cumemcap report` runs.
 *
 *   cumemcap-report [--plot FILE.svg] [--bytes] LOG...   (options anywhere)
 *
 * Reads the footprint logs that CUMEMCAP_LOG wrote (logs.c), prints a
 * table with a row per process and GPU (peaks, footprint included, limit,
 * context overhead and its source,
 * refusals, driver OOMs, driver calls avoided) and a line per process
 * (how it ended, how long it ran, its command line), and with --plot draws
 * the same processes as an SVG (svg.c).
 *
 * Exit status: 0 reported; 1 a LOG could not be read, no LOG held a
 * record, or the plot could not be written; 2 a usage error. Messages are
 * one line on stderr naming the file. Single-threaded. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "logs.h"
#include "svg.h"
#include "text.h"

#define USAGE "usage: cumemcap report [--plot FILE.svg] [--bytes] LOG..."

static void usage(FILE *f)
{
	fputs(USAGE "\n"
	      "\n"
	      "Read the JSON Lines footprint logs that CUMEMCAP_LOG writes (one per process)\n"
	      "and print a row per process and GPU: the limit; the peaks of live memory (what\n"
	      "the program holds), of memory reserved from the driver, of the footprint (what\n"
	      "the limit counts: reserved plus the driver's overhead for the process, its\n"
	      "context and modules) and of what the driver reports for the process; the\n"
	      "context overhead, with where the shim learned it (nvml, delta or estimate)\n"
	      "when the log says, else driver-reported minus reserved; requests refused at\n"
	      "the limit, CUDA_ERROR_OUT_OF_MEMORY answers from the driver, and driver calls\n"
	      "the pools avoided. Then a line per process: how it ended, how long it ran,\n"
	      "its command line. Sizes are in binary units (1.50 GiB); - is unknown (logs\n"
	      "from before the footprint cap have no footprint), a LIMIT of none is no\n"
	      "limit. A GPU the process never touched is left out. A process given twice\n"
	      "(the same log twice) is reported once.\n"
	      "\n"
	      "  --plot FILE.svg   also draw every process and GPU over time: live, pooled,\n"
	      "                    reserved, footprint and driver-reported bytes, the limit\n"
	      "                    (labelled with the peak footprint against it), refusals.\n"
	      "                    SVG only (open it in a browser).\n"
	      "  --bytes           sizes as exact byte counts.\n"
	      "  -h, --help        this text.\n"
	      "\n"
	      "Exit status: 0 reported; 1 a LOG could not be read, no LOG held a record, or\n"
	      "the plot could not be written; 2 usage error.\n",
	      f);
}

REPORT_PRINTF(1, 2)
_Noreturn static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("cumemcap report: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("; " USAGE "\n", stderr);
	exit(2);
}

/* --plot's name: an .svg, or no extension at all (/dev/stdout). */
static void check_plot_name(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');

	if (!*base) {
		fprintf(stderr, "cumemcap report: --plot \"%s\": not a file name; give a FILE "
				"ending in .svg\n", path);
		exit(2);
	}
	if (dot && dot != base && strcasecmp(dot, ".svg") != 0) {
		fprintf(stderr, "cumemcap report: --plot \"%s\": only SVG is supported (no %s); "
				"give a FILE ending in .svg\n", path, dot);
		exit(2);
	}
}

/* ---- the table ----------------------------------------------------------------- */

enum column {
	COL_PID,
	COL_PROGRAM,
	COL_GPU,
	COL_LIMIT,
	COL_LIVE,
	COL_RESERVED,
	COL_FOOTPRINT,
	COL_DRIVER,
	COL_CONTEXT,
	COL_REFUSALS,
	COL_OOMS,
	COL_AVOIDED,
	COLUMNS,
};

static const struct {
	const char *title;
	bool right;
} columns[COLUMNS] = {
	[COL_PID] = { "PID", true },
	[COL_PROGRAM] = { "PROGRAM", false },
	[COL_GPU] = { "GPU", false },
	[COL_LIMIT] = { "LIMIT", true },
	[COL_LIVE] = { "PEAK LIVE", true },
	[COL_RESERVED] = { "PEAK RESERVED", true },
	[COL_FOOTPRINT] = { "PEAK FOOTPRINT", true },
	[COL_DRIVER] = { "PEAK DRIVER", true },
	[COL_CONTEXT] = { "CONTEXT", true },
	[COL_REFUSALS] = { "REFUSALS", true },
	[COL_OOMS] = { "DRIVER OOMS", true },
	[COL_AVOIDED] = { "AVOIDED", true },
};

static bool exact_bytes;

static char *size_cell(struct report_figure f)
{
	char buf[32];

	if (!f.known)
		return report_xstrdup("-");
	if (exact_bytes)
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)f.v);
	else
		report_fmt_size(f.v, buf, sizeof(buf));
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

/* A count seen both as events and in the exit record: the larger. */
static struct report_figure count_of(uint64_t events, struct report_figure at_exit)
{
	struct report_figure f = { events, true };
	if (at_exit.known && at_exit.v > events)
		f.v = at_exit.v;
	return f;
}

/* "0 (8e6bd7c8)": the ordinal and the first block of the UUID. */
static char *gpu_cell(const struct report_gpu *g)
{
	struct report_buf b = { 0 };

	report_buf_printf(&b, "%lld", g->ordinal);
	if (g->uuid && g->uuid[0]) {
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

static char *program_cell(const struct report_process *p)
{
	struct report_buf b = { 0 };

	if (!p->program || !p->program[0])
		return report_xstrdup("-");
	report_buf_safe(&b, p->program);
	return report_buf_take(&b);
}

static void fill_row(char **row, const struct report_process *p, const struct report_gpu *g)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%lld", p->pid);
	row[COL_PID] = report_xstrdup(buf);
	row[COL_PROGRAM] = program_cell(p);
	if (!g) {
		for (int c = COL_GPU; c < COLUMNS; c++)
			row[c] = report_xstrdup("-");
		return;
	}
	row[COL_GPU] = gpu_cell(g);
	if (g->limit_state == REPORT_LIMIT_SET)
		row[COL_LIMIT] = size_cell((struct report_figure){ g->limit, true });
	else
		row[COL_LIMIT] = report_xstrdup(g->limit_state == REPORT_LIMIT_NONE ? "none" : "-");
	row[COL_LIVE] = size_cell(g->peak_live);
	row[COL_RESERVED] = size_cell(g->peak_reserved);
	row[COL_FOOTPRINT] = size_cell(g->peak_footprint);
	row[COL_DRIVER] = size_cell(g->peak_driver);
	const char *source;
	row[COL_CONTEXT] = size_cell(report_gpu_context(g, &source));
	if (source) {
		/* "300.00 MiB (nvml)": where the overhead the limit counts was learned. */
		struct report_buf b = { 0 };
		report_buf_puts(&b, row[COL_CONTEXT]);
		report_buf_puts(&b, " (");
		report_buf_safe(&b, source);
		report_buf_puts(&b, ")");
		free(row[COL_CONTEXT]);
		row[COL_CONTEXT] = report_buf_take(&b);
	}
	row[COL_REFUSALS] = count_cell(count_of(g->refusal_events, g->exit_refusals));
	row[COL_OOMS] = count_cell(count_of(g->oom_events, g->exit_ooms));
	row[COL_AVOIDED] = count_cell(g->avoided);
}

static void print_table(const struct report_set *set)
{
	size_t nrows = 1, width[COLUMNS];

	for (size_t i = 0; i < set->n; i++)
		nrows += set->procs[i]->ngpus ? set->procs[i]->ngpus : 1;
	char *(*rows)[COLUMNS] = report_xmalloc(nrows * sizeof(*rows));
	size_t n = 0;
	for (int c = 0; c < COLUMNS; c++)
		rows[n][c] = report_xstrdup(columns[c].title);
	n++;
	for (size_t i = 0; i < set->n; i++) {
		const struct report_process *p = set->procs[i];
		if (p->ngpus == 0)
			fill_row(rows[n++], p, NULL);
		for (size_t k = 0; k < p->ngpus; k++) {
			if (report_gpu_shown(p, k))
				fill_row(rows[n++], p, &p->gpus[k]);
		}
	}
	for (int c = 0; c < COLUMNS; c++) {
		width[c] = 0;
		for (size_t r = 0; r < n; r++) {
			size_t w = report_text_width(rows[r][c]);
			if (w > width[c])
				width[c] = w;
		}
	}
	for (size_t r = 0; r < n; r++) {
		struct report_buf line = { 0 };
		for (int c = 0; c < COLUMNS; c++) {
			size_t pad = width[c] - report_text_width(rows[r][c]);
			if (c > 0)
				report_buf_puts(&line, "  ");
			for (size_t s = 0; columns[c].right && s < pad; s++)
				report_buf_puts(&line, " ");
			report_buf_puts(&line, rows[r][c]);
			for (size_t s = 0; !columns[c].right && c + 1 < COLUMNS && s < pad; s++)
				report_buf_puts(&line, " ");
			free(rows[r][c]);
		}
		puts(line.s);
		free(line.s);
	}
	free(rows);
}

/* ---- a line per process ---------------------------------------------------------- */

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
	if (!p->has_exit) {
		report_buf_puts(&b, "no exit record (killed?); ran at least ");
	} else if (p->exit_reason && strcmp(p->exit_reason, "exit") == 0) {
		report_buf_puts(&b, "exited; ran ");
	} else if (p->exit_reason && strcmp(p->exit_reason, "signal") == 0) {
		const char *name = p->has_signal ? report_signal_name(p->exit_signal) : NULL;
		if (!p->has_signal)
			report_buf_puts(&b, "ended by a signal; ran ");
		else if (name)
			report_buf_printf(&b, "ended by signal %lld (%s); ran ", p->exit_signal,
					  name);
		else
			report_buf_printf(&b, "ended by signal %lld; ran ", p->exit_signal);
	} else {
		report_buf_puts(&b, "ended (");
		report_buf_safe(&b, p->exit_reason ? p->exit_reason : "no reason given");
		report_buf_puts(&b, "); ran ");
	}
	report_buf_puts(&b, report_fmt_duration(p->t_last - begin, buf, sizeof(buf)));
	if (p->has_start) {
		report_buf_printf(&b, "; started %s",
				  report_fmt_time(p->t_start, buf, sizeof(buf)));
		if (p->host) {
			report_buf_puts(&b, " on ");
			report_buf_safe(&b, p->host);
		}
	} else {
		report_buf_printf(&b, "; no start record (first record %s)",
				  report_fmt_time(p->t_first, buf, sizeof(buf)));
	}
	bool hidden = false;
	for (size_t k = 0; k < p->ngpus; k++) {
		if (report_gpu_shown(p, k))
			continue;
		report_buf_printf(&b, "%s%lld",
				  hidden ? ", " : "; unused GPUs: ", p->gpus[k].ordinal);
		hidden = true;
	}
	report_buf_puts(&b, "; command:");
	if (p->argc == 0)
		report_buf_puts(&b, " -");
	for (size_t i = 0; i < p->argc; i++) {
		report_buf_puts(&b, " ");
		report_buf_shell_arg(&b, p->argv[i]);
	}
	puts(b.s);
	free(b.s);
}

/* ---- main -------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	const char *plot = NULL;
	/* Options may come before or after the LOGs (cumemcap report LOG
	 * --plot FILE); after "--" every word is a LOG. */
	const char **logs = report_xmalloc((size_t)argc * sizeof(*logs));
	int nlogs = 0;
	bool options = true;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!options || a[0] != '-' || a[1] == '\0') {
			logs[nlogs++] = a;
		} else if (strcmp(a, "--") == 0) {
			options = false;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			free(logs);
			return 0;
		} else if (strcmp(a, "--bytes") == 0) {
			exact_bytes = true;
		} else if (strcmp(a, "--plot") == 0 || strncmp(a, "--plot=", 7) == 0) {
			if (plot)
				usage_error("--plot given twice");
			if (a[6] == '=')
				plot = a + 7;
			else if (i + 1 < argc)
				plot = argv[++i];
			else
				usage_error("--plot needs a FILE");
			check_plot_name(plot);
		} else {
			usage_error("unknown option \"%s\"", a);
		}
	}
	if (nlogs == 0)
		usage_error("no LOG given");

	struct report_set set = { 0 };
	struct report_buf empty = { 0 };
	size_t nempty = 0;
	int status = 0;
	for (int i = 0; i < nlogs; i++) {
		size_t records;
		if (!report_logs_read(&set, logs[i], &records)) {
			status = 1;
			continue;
		}
		if (records == 0) {
			report_buf_printf(&empty, "%s%s", nempty ? ", " : "", logs[i]);
			nempty++;
		}
	}
	if (nempty) {
		fprintf(stderr,
			"cumemcap report: no cumemcap record in %s; expected the JSON Lines "
			"log CUMEMCAP_LOG writes, one {\"v\":1,\"type\":...} object a line\n",
			empty.s);
	}
	free(empty.s);
	report_logs_finish(&set);
	if (set.n == 0) {
		report_logs_free(&set);
		free(logs);
		return 1;
	}

	print_table(&set);
	putchar('\n');
	for (size_t i = 0; i < set.n; i++)
		print_process(set.procs[i]);
	if (plot) {
		size_t panels;
		fflush(stdout);
		if (report_svg_write(&set, plot, &panels))
			printf("plot: %s (%zu panel%s)\n", plot, panels, panels == 1 ? "" : "s");
		else
			status = 1;
	}
	report_logs_free(&set);
	free(logs);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("cumemcap report: standard output");
		status = 1;
	}
	return status;
}
