/* report: cumemcap-report, what `cumemcap report` runs.
 *
 *   cumemcap-report [OPTIONS] LOG|DIR|-...   (options anywhere)
 *
 * Reads the footprint logs that CUMEMCAP_LOG wrote (logs.c; a directory
 * gives its *.jsonl files, of its links only the caller's, - standard
 * input; logs.h says how a shared directory is read), keeps what --gpu, --program
 * and --since select (model.c), prints a table with a row per process and
 * GPU and a block per process (table.c), or all of it as JSON, and with
 * --plot draws the same processes as SVG, or PNG and PDF where this build
 * has cairo (plot.c, canvas.c); --suggest prints the limits the logs call
 * for instead of the table (suggest.c).
 *
 * Exit status: 0 reported; 1 a LOG could not be read, no LOG held a
 * record, or the plot could not be written; 2 a usage error. Messages are
 * one line on stderr naming the file or option. Single-threaded. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "logs.h"
#include "plot.h"
#include "suggest.h"
#include "table.h"
#include "text.h"

#define USAGE "usage: cumemcap report [OPTIONS] LOG|DIR|-..."

#if REPORT_HAVE_CAIRO
#define PLOT_FORMATS "SVG, PNG or PDF"
#define PLOT_NAMES ".svg, .png or .pdf"
#define PLOT_HELP "                      The file's name says the format: .svg, .png or .pdf\n" \
		  "                      (this build has cairo);\n"
#else
#define PLOT_FORMATS "SVG"
#define PLOT_NAMES ".svg"
#define PLOT_HELP "                      The file's name says the format: .svg only\n" \
		  "                      (this build has no PNG or PDF: it was built without\n" \
		  "                      cairo);\n"
#endif

static void usage(FILE *f)
{
	fputs("Usage: cumemcap report [OPTIONS] LOG|DIR|-...\n"
	      "\n"
	      "Read the JSON Lines footprint logs that CUMEMCAP_LOG writes (one per process;\n"
	      "schema v1 and v2) and print a row per process and GPU: the limit (and for a\n"
	      "member of a group, the group and its budget); the peaks\n"
	      "of live memory (what the program holds), of memory reserved from the driver,\n"
	      "of the footprint (what the limit counts: reserved plus the driver's overhead\n"
	      "for the process) and of what the driver reports for the process; the context\n"
	      "overhead; requests refused at the limit and CUDA_ERROR_OUT_OF_MEMORY answers\n"
	      "from the driver. Then a block per process: how it ended (or that it is still\n"
	      "running), how long it ran, its command line, and per GPU its UUID, nvidia-smi\n"
	      "index, where the overhead was learned and the driver calls the pools avoided.\n"
	      "Sizes are in one binary unit, cut to two decimals; - is unknown, a LIMIT of\n"
	      "none is no limit. A GPU the process never touched is left out, a process given\n"
	      "twice is reported once. docs/report.md has the details.\n"
	      "\n"
	      "Inputs:\n"
	      "  LOG                 a footprint log (JSON Lines): a regular file, a link to one\n"
	      "                      is followed.\n"
	      "  DIR                 every *.jsonl file in the directory (not its\n"
	      "                      subdirectories); of its links only your own are followed.\n"
	      "  -                   standard input.\n"
	      "\n"
	      "Options:\n"
	      "  --plot FILE         also draw every process and GPU over time: live, pooled,\n"
	      "                      reserved, footprint and driver-reported bytes as steps,\n"
	      "                      the limit (and a group's budget) on top, refusals and\n"
	      "                      driver OOMs as markers; processes on one GPU share its\n"
	      "                      time axis and scale, and a group gets a panel of its own.\n"
	      PLOT_HELP
	      "                      - writes the SVG to standard output (and nothing else).\n"
	      "  --time KIND         the plot's time axis: elapsed (seconds since the first\n"
	      "                      record, the default) or wall (UTC time of day).\n"
	      "  --gpu N|UUID        only this GPU: N is nvidia-smi's index where the log has\n"
	      "                      it (schema v2), else the CUDA ordinal the process saw;\n"
	      "                      UUID is the GPU's UUID or its start (GPU- optional).\n"
	      "  --program NAME      only processes whose program name matches NAME, a shell\n"
	      "                      glob ('train*.py').\n"
	      "  --since TIME        only processes with a record at or after TIME: a duration\n"
	      "                      back from now (90s, 30m, 1h, 2d) or a time, UTC unless it\n"
	      "                      says (2024-05-01T12:00:00Z, '2024-05-01 12:00', 2024-05-01).\n"
	      "                      A running process is always kept.\n"
	      "  --suggest           instead of the table: for each program and GPU the\n"
	      "                      smallest limit that would have let every logged run\n"
	      "                      finish without a refusal (the highest peak footprint,\n"
	      "                      plus a tenth, at least 256 MiB, rounded up), what that\n"
	      "                      peak was made of (live, cached, the driver's overhead),\n"
	      "                      for each group the budget it needed, and the same as\n"
	      "                      configuration; a run that was refused makes its\n"
	      "                      suggestion a lower bound, and says so.\n"
	      "  --json              the table and the process blocks (or the suggestions)\n"
	      "                      as one JSON object (every size an exact integer of\n"
	      "                      bytes; null: unknown).\n"
	      "  --wide              every column, each size in its own unit.\n"
	      "  --bytes             sizes as exact byte counts.\n"
	      "  --version           the version of cumemcap.\n"
	      "  -h, --help          this text.\n"
	      "\n"
	      "Exit status:\n"
	      "  0                   reported.\n"
	      "  1                   a LOG could not be read, no LOG held a record, or the plot\n"
	      "                      could not be written.\n"
	      "  2                   a usage error.\n",
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

/* --plot's name: .svg, .png or .pdf (where built), no extension
 * (/dev/stdout), or -. */
static enum report_canvas_kind plot_format(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *dot = strrchr(base, '.');

	if (!*base) {
		fprintf(stderr, "cumemcap report: --plot \"%s\": not a file name; give a FILE "
				"ending in " PLOT_NAMES ", or - for standard output\n",
			path);
		exit(2);
	}
	if (!dot || dot == base || strcasecmp(dot, ".svg") == 0)
		return REPORT_CANVAS_SVG;
	bool png = strcasecmp(dot, ".png") == 0, pdf = strcasecmp(dot, ".pdf") == 0;
	if ((png || pdf) && REPORT_HAVE_CAIRO)
		return png ? REPORT_CANVAS_PNG : REPORT_CANVAS_PDF;
	if (png || pdf) {
		fprintf(stderr, "cumemcap report: --plot \"%s\": this build has no %s (it was "
				"built without cairo); give a FILE ending in .svg\n",
			path, png ? "PNG" : "PDF");
		exit(2);
	}
	fprintf(stderr, "cumemcap report: --plot \"%s\": only %s is supported (no %s); give a "
			"FILE ending in " PLOT_NAMES "\n",
		path, PLOT_FORMATS, dot);
	exit(2);
}

/* --since: a duration back from now, or a time. */
static double parse_since(const char *s)
{
	char *end;
	double t;

	errno = 0;
	double n = strtod(s, &end);
	if (end != s && s[0] >= '0' && s[0] <= '9' && errno == 0 && isfinite(n) && end[0] &&
	    !end[1] && strchr("smhd", end[0])) {
		static const double scale[] = { ['s'] = 1, ['m'] = 60, ['h'] = 3600, ['d'] = 86400 };
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		return (double)now.tv_sec + now.tv_nsec / 1e9 - n * scale[(unsigned char)end[0]];
	}
	if (report_parse_rfc3339(s, &t))
		return t;
	usage_error("--since \"%s\": not a time; give a duration back from now (90s, 30m, 1h, "
		    "2d) or a time, UTC unless it says (2024-05-01T12:00:00Z, "
		    "\"2024-05-01 12:00\", 2024-05-01)", s);
}

/* --gpu: digits are an index (or ordinal), else the start of a UUID. */
static void parse_gpu(const char *s, struct report_filter *f)
{
	size_t digits = strspn(s, "0123456789");
	const char *u = strncasecmp(s, "GPU-", 4) == 0 ? s + 4 : s;

	if (s[0] && !s[digits] && digits <= 9) {
		f->gpu_number = strtoll(s, NULL, 10);
		return;
	}
	if (u[0] && strspn(u, "0123456789abcdefABCDEF-") == strlen(u)) {
		f->gpu_uuid = s;
		return;
	}
	usage_error("--gpu \"%s\": not a GPU; give nvidia-smi's index (0, 1, ...) or a UUID "
		    "or its start (GPU-8e6bd7c8, 8e6bd7c8)", s);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct inputs {
	char **paths;
	bool *listed; /* found in a directory (the path malloc()ed): read as REPORT_LISTED */
	size_t n, cap;
};

static void add_input(struct inputs *in, char *path, bool listed)
{
	if (in->n == in->cap) {
		in->cap = in->cap ? in->cap * 2 : 16;
		in->paths = report_xrealloc(in->paths, in->cap * sizeof(*in->paths));
		in->listed = report_xrealloc(in->listed, in->cap * sizeof(*in->listed));
	}
	in->paths[in->n] = path;
	in->listed[in->n++] = listed;
}

/* A directory's *.jsonl entries, sorted by name; whether each is a log
 * the caller should read (a regular file, or a link of the caller's to
 * one) is decided when it is opened (logs.h, REPORT_LISTED), not here.
 * False, after one line, when it cannot be read or holds none. */
static bool add_directory(struct inputs *in, const char *dir)
{
	DIR *d = opendir(dir);
	size_t before = in->n;

	if (!d) {
		fprintf(stderr, "cumemcap report: %s: cannot open: %s\n", dir, strerror(errno));
		return false;
	}
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (e->d_name[0] == '.' || len < 7 || strcmp(e->d_name + len - 6, ".jsonl") != 0)
			continue;
		struct report_buf b = { 0 };
		report_buf_printf(&b, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
				  e->d_name);
		add_input(in, report_buf_take(&b), true);
	}
	closedir(d);
	if (in->n == before) {
		fprintf(stderr, "cumemcap report: %s: no *.jsonl file in this directory; expected "
				"the footprint logs CUMEMCAP_LOG writes\n", dir);
		return false;
	}
	qsort(in->paths + before, in->n - before, sizeof(*in->paths), cmp_name);
	return true;
}

/* ---- main -------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	const char *plot = NULL, *time_kind = NULL;
	struct report_view view = { 0 };
	struct report_filter filter = { .gpu_number = -1 };
	bool json = false, suggest = false, options = true, stdin_given = false;
	struct inputs in = { 0 };

	/* Options may come before or after the LOGs (cumemcap report LOG
	 * --plot FILE); after "--" every word is a LOG. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *value = NULL;
		static const char *const valued[] = { "--plot", "--time", "--gpu", "--program",
						      "--since" };
		if (!options || a[0] != '-' || a[1] == '\0') {
			if (strcmp(a, "-") == 0 && options) {
				if (stdin_given)
					usage_error("- (standard input) given twice");
				stdin_given = true;
			}
			add_input(&in, (char *)a, false);
			continue;
		}
		if (strcmp(a, "--") == 0) {
			options = false;
			continue;
		}
		size_t k = 0, nv = sizeof(valued) / sizeof(valued[0]);
		for (; k < nv; k++) {
			size_t len = strlen(valued[k]);
			if (strncmp(a, valued[k], len) != 0 || (a[len] != '\0' && a[len] != '='))
				continue;
			if (a[len] == '=')
				value = a + len + 1;
			else if (i + 1 < argc)
				value = argv[++i];
			else
				usage_error("%s needs a value", valued[k]);
			break;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--version") == 0) {
			printf("cumemcap report %s\n", CUMEMCAP_VERSION_STRING);
			return 0;
		} else if (strcmp(a, "--bytes") == 0) {
			view.bytes = true;
		} else if (strcmp(a, "--wide") == 0) {
			view.wide = true;
		} else if (strcmp(a, "--json") == 0) {
			json = true;
		} else if (strcmp(a, "--suggest") == 0) {
			suggest = true;
		} else if (k == 0) {
			if (plot)
				usage_error("--plot given twice");
			plot = value;
		} else if (k == 1) {
			if (strcmp(value, "wall") != 0 && strcmp(value, "elapsed") != 0)
				usage_error("--time \"%s\": give elapsed or wall", value);
			time_kind = value;
		} else if (k == 2) {
			if (filter.gpu_number >= 0 || filter.gpu_uuid)
				usage_error("--gpu given twice");
			parse_gpu(value, &filter);
		} else if (k == 3) {
			if (filter.program)
				usage_error("--program given twice");
			if (!value[0])
				usage_error("--program \"\": give a program name or a glob");
			filter.program = value;
		} else if (k == 4) {
			filter.has_since = true;
			filter.since = parse_since(value);
		} else {
			usage_error("unknown option \"%s\"", a);
		}
	}
	if (in.n == 0)
		usage_error("no LOG given");
	enum report_canvas_kind format = REPORT_CANVAS_SVG;
	bool plot_stdout = plot && strcmp(plot, "-") == 0;
	if (plot && !plot_stdout)
		format = plot_format(plot);
	if (plot_stdout && json)
		usage_error("--plot - and --json both write to standard output; give --plot FILE");
	if (suggest && view.wide)
		usage_error("--wide is about the table, which --suggest replaces; give one of them");
	if (time_kind && !plot)
		usage_error("--time is about the plot; give --plot FILE too");

	/* Directories into their files. */
	struct inputs files = { 0 };
	struct report_set set = { 0 };
	int status = 0;
	for (size_t i = 0; i < in.n; i++) {
		struct stat st;
		if (strcmp(in.paths[i], "-") != 0 && stat(in.paths[i], &st) == 0 &&
		    S_ISDIR(st.st_mode)) {
			if (!add_directory(&files, in.paths[i]))
				status = 1;
		} else {
			add_input(&files, in.paths[i], false);
		}
	}

	struct report_buf empty = { 0 };
	size_t nempty = 0;
	for (size_t i = 0; i < files.n; i++) {
		size_t records;
		enum report_source source = files.listed[i] ? REPORT_LISTED : REPORT_TYPED;
		enum report_read got = report_logs_read(&set, files.paths[i], source, &records);
		if (got == REPORT_READ_FAILED)
			status = 1;
		if (got != REPORT_READ_DONE)
			continue;
		if (records == 0) {
			report_buf_printf(&empty, "%s%s", nempty ? ", " : "", files.paths[i]);
			nempty++;
		}
	}
	if (nempty) {
		fprintf(stderr,
			"cumemcap report: no cumemcap record in %s; expected the JSON Lines "
			"log CUMEMCAP_LOG writes, one {\"v\":2,\"type\":...} object a line\n",
			empty.s);
	}
	free(empty.s);
	report_logs_finish(&set);
	size_t read = set.n;
	report_filter(&set, &filter);
	if (set.n == 0) {
		if (read > 0)
			fputs("cumemcap report: no process matches --gpu, --program and --since\n",
			      stderr);
		status = 1;
		goto out;
	}

	if (suggest) {
		if (!plot_stdout)
			report_print_suggest(&set, json, view.bytes);
	} else if (json) {
		report_print_json(&set);
	} else if (!plot_stdout) {
		report_print_table(&set, &view);
		putchar('\n');
		report_print_processes(&set);
	}
	if (plot) {
		struct report_plot opt = { .wall = time_kind && strcmp(time_kind, "wall") == 0 };
		size_t panels, group_panels;
		fflush(stdout);
		bool ok = plot_stdout ? report_plot_put(&set, &opt, REPORT_CANVAS_SVG, stdout, plot,
							&panels, &group_panels)
				      : report_plot_write(&set, &opt, format, plot, &panels,
							  &group_panels);
		if (!ok) {
			status = 1;
		} else if (!plot_stdout && !json) {
			printf("plot: %s (%zu panel%s", plot, panels, panels == 1 ? "" : "s");
			if (group_panels)
				printf(" and %zu of a group", group_panels);
			puts(")");
		}
	}
out:
	report_logs_free(&set);
	for (size_t i = 0; i < files.n; i++) {
		if (files.listed[i])
			free(files.paths[i]);
	}
	free(files.paths);
	free(files.listed);
	free(in.paths);
	free(in.listed);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		perror("cumemcap report: standard output");
		status = 1;
	}
	return status;
}
