/* model: the processes once every log is read (see logs.h): a process
 * given twice merged, processes, GPUs, series and marks put in order, and
 * the questions the table and the plot both ask of it (which GPUs are
 * shown, the context overhead), and whether a process without an exit
 * record still runs (/proc). Single-threaded. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <fnmatch.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "logs.h"
#include "procmap.h"
#include "text.h"

double report_process_t0(const struct report_process *p)
{
	return p->t_first;
}

struct report_figure report_gpu_context(const struct report_gpu *g, const char **source)
{
	struct report_figure f = { 0, false };

	*source = NULL;
	if (g->overhead_source && g->overhead.known) {
		*source = g->overhead_source;
		return g->overhead;
	}
	if (g->context_max.known)
		return g->context_max;
	if (g->exit_driver.known && g->exit_reserved.known) {
		f.known = true;
		f.v = g->exit_driver.v > g->exit_reserved.v ? g->exit_driver.v - g->exit_reserved.v
							    : 0;
	}
	return f;
}

/* ---- is it still running? --------------------------------------------------------- */

/* The first line of `path` that starts with `key`: the number after it. */
static bool proc_number(const char *path, const char *key, unsigned long long *out)
{
	FILE *f = fopen(path, "r");
	char line[512];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, strlen(key)) == 0)
			found = sscanf(line + strlen(key), "%llu", out) == 1;
	}
	fclose(f);
	return found;
}

/* When process `pid` started, in Unix seconds: the boot time plus field 22
 * of /proc/PID/stat (clock ticks since boot). False when there is none. */
static bool proc_started(long long pid, double *out)
{
	char path[64], buf[1024];
	unsigned long long btime, ticks;
	long hz = sysconf(_SC_CLK_TCK);

	snprintf(path, sizeof(path), "/proc/%lld/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: fields count from
	 * the last ')'. Field 22 is the 20th after it. */
	char *p = strrchr(buf, ')');
	if (!p || hz <= 0 || !proc_number("/proc/stat", "btime ", &btime))
		return false;
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return false;
	}
	if (sscanf(p, " %llu", &ticks) != 1)
		return false;
	*out = (double)btime + (double)ticks / (double)hz;
	return true;
}

/* Seconds of slack between the two clocks: the boot time is whole seconds. */
#define STARTED_SLACK 2.0

bool report_process_here(const struct report_process *p)
{
	char host[256];

	if (!p->host || gethostname(host, sizeof(host)) != 0)
		return false;
	host[sizeof(host) - 1] = '\0';
	return strcmp(host, p->host) == 0;
}

bool report_process_alive(const struct report_process *p)
{
	double started;

	if (p->has_exit || !p->has_start || p->pid <= 0 || !report_process_here(p))
		return false;
	if (!proc_started(p->pid, &started))
		return false;
	return started <= p->t_start + STARTED_SLACK;
}

/* ---- after the last file ---------------------------------------------------------- */

/* A stable merge sort of points by time: records from different threads
 * may be written slightly out of order, and equal times keep file order. */
static void sort_points(struct report_point *p, size_t n, struct report_point *tmp)
{
	if (n < 2)
		return;
	size_t half = n / 2;
	sort_points(p, half, tmp);
	sort_points(p + half, n - half, tmp);
	if (p[half - 1].t <= p[half].t)
		return;
	size_t i = 0, j = half, k = 0;
	while (i < half && j < n)
		tmp[k++] = p[j].t < p[i].t ? p[j++] : p[i++];
	while (i < half)
		tmp[k++] = p[i++];
	while (j < n)
		tmp[k++] = p[j++];
	memcpy(p, tmp, n * sizeof(*p));
}

static int cmp_mark(const void *a, const void *b)
{
	const struct report_mark *x = a, *y = b;
	return (x->t > y->t) - (x->t < y->t);
}

static int cmp_gpu(const void *a, const void *b)
{
	const struct report_gpu *x = a, *y = b;
	return (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

/* Processes by start, then pid, then the order they were read. */
static int cmp_process(const void *a, const void *b)
{
	const struct report_process *x = *(struct report_process *const *)a;
	const struct report_process *y = *(struct report_process *const *)b;
	if (x->t_first != y->t_first)
		return x->t_first < y->t_first ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static void free_process(struct report_process *p)
{
	for (size_t i = 0; i < p->ngpus; i++) {
		for (int k = 0; k < REPORT_SERIES; k++)
			free(p->gpus[i].series[k].p);
		free(p->gpus[i].marks);
		free(p->gpus[i].group_used.p);
		free(p->gpus[i].uuid);
		free(p->gpus[i].pci);
		free(p->gpus[i].overhead_source);
	}
	for (size_t i = 0; i < p->argc; i++)
		free(p->argv[i]);
	free(p->argv);
	free(p->gpus);
	free(p->program);
	free(p->host);
	free(p->version);
	free(p->group);
	free(p->exit_reason);
	free(p);
}

/* The same process: one pid with the same start record (or, without one,
 * the same first record). */
static bool same_process(const struct report_process *a, const struct report_process *b)
{
	if (a->pid != b->pid || a->has_start != b->has_start)
		return false;
	return a->has_start ? a->t_start == b->t_start : a->t_first == b->t_first;
}

/* The key of same_process: the pid and its start (or first) record's time. */
static uint64_t process_key(const struct report_process *p)
{
	double t = p->has_start ? p->t_start : p->t_first;
	uint64_t bits;

	memcpy(&bits, &t, sizeof(bits));
	return report_procmap_mix((uint64_t)p->pid, bits);
}

static void drop_duplicates(struct report_set *set)
{
	struct report_procmap kept_at = { 0 }; /* the processes kept, by process_key */
	size_t kept = 0;

	for (size_t i = 0; i < set->n; i++) {
		struct report_process *p = set->procs[i];
		uint64_t key = process_key(p);
		size_t pos = 0, j;
		bool found;
		while ((found = report_procmap_next(&kept_at, key, &pos, &j)) &&
		       !same_process(set->procs[j], p))
			;
		if (!found) {
			report_procmap_add(&kept_at, key, kept);
			set->procs[kept++] = p;
			continue;
		}
		struct report_process *first = set->procs[j];
		char when[64];
		report_fmt_time(p->has_start ? p->t_start : p->t_first, when, sizeof(when));
		fprintf(stderr, "cumemcap report: %s: pid %lld (started %s) is also in %s; "
				"reported once, from the copy with more records\n",
			p->file, p->pid, when, first->file);
		if (p->records > first->records) {
			set->procs[j] = p;
			free_process(first);
		} else {
			free_process(p);
		}
	}
	report_procmap_free(&kept_at);
	set->n = kept;
}

void report_logs_finish(struct report_set *set)
{
	drop_duplicates(set);
	if (set->n > 1) /* qsort's base must not be NULL, even for no element */
		qsort(set->procs, set->n, sizeof(*set->procs), cmp_process);
	for (size_t i = 0; i < set->n; i++) {
		struct report_process *p = set->procs[i];
		p->here = report_process_here(p);
		p->running = report_process_alive(p);
		if (p->ngpus > 1)
			qsort(p->gpus, p->ngpus, sizeof(*p->gpus), cmp_gpu);
		for (size_t k = 0; k < p->ngpus; k++) {
			struct report_gpu *g = &p->gpus[k];
			for (int s = 0; s < REPORT_SERIES; s++) {
				struct report_series *sr = &g->series[s];
				struct report_point *tmp = report_xmalloc(sr->n * sizeof(*tmp));
				sort_points(sr->p, sr->n, tmp);
				free(tmp);
			}
			struct report_point *tmp = report_xmalloc(g->group_used.n * sizeof(*tmp));
			sort_points(g->group_used.p, g->group_used.n, tmp);
			free(tmp);
			if (g->nmarks > 1)
				qsort(g->marks, g->nmarks, sizeof(*g->marks), cmp_mark);
			const struct report_figure *seen[] = {
				&g->peak_live, &g->peak_pooled, &g->peak_reserved, &g->peak_footprint,
				&g->peak_driver, &g->allocs, &g->exit_refusals, &g->exit_ooms,
			};
			for (size_t f = 0; f < sizeof(seen) / sizeof(seen[0]); f++)
				g->used = g->used || (seen[f]->known && seen[f]->v > 0);
		}
	}
}

void report_logs_free(struct report_set *set)
{
	for (size_t i = 0; i < set->n; i++)
		free_process(set->procs[i]);
	free(set->procs);
	set->procs = NULL;
	set->n = set->cap = 0;
}

bool report_gpu_shown(const struct report_process *p, size_t i)
{
	if (p->gpus[i].excluded)
		return false;
	if (p->gpus[i].used)
		return true;
	for (size_t k = 0; k < p->ngpus; k++) {
		if (p->gpus[k].used && !p->gpus[k].excluded)
			return false;
	}
	return true;
}

/* ---- filters --------------------------------------------------------------------- */

/* "GPU-8E6B..." and "8e6b" name the same GPU: case aside, without the
 * prefix, `want` a prefix of the UUID. */
static bool uuid_matches(const char *uuid, const char *want)
{
	if (!uuid)
		return false;
	if (strncasecmp(uuid, "GPU-", 4) == 0)
		uuid += 4;
	if (strncasecmp(want, "GPU-", 4) == 0)
		want += 4;
	return *want && strncasecmp(uuid, want, strlen(want)) == 0;
}

static bool gpu_matches(const struct report_gpu *g, const struct report_filter *f)
{
	if (f->gpu_number >= 0)
		return (g->index >= 0 ? g->index : g->ordinal) == f->gpu_number;
	return uuid_matches(g->uuid, f->gpu_uuid);
}

void report_filter(struct report_set *set, const struct report_filter *f)
{
	size_t kept = 0;

	for (size_t i = 0; i < set->n; i++) {
		struct report_process *p = set->procs[i];
		bool keep = true;
		if (f->program)
			keep = p->program && fnmatch(f->program, p->program, 0) == 0;
		if (f->has_since)
			keep = keep && (p->running || p->t_last >= f->since);
		if (keep && (f->gpu_number >= 0 || f->gpu_uuid)) {
			/* Kept when it used a GPU named, or used none and has one. */
			bool any = false, used = false;
			for (size_t k = 0; k < p->ngpus; k++)
				used = used || p->gpus[k].used;
			for (size_t k = 0; k < p->ngpus; k++) {
				p->gpus[k].excluded = !gpu_matches(&p->gpus[k], f);
				any = any || (!p->gpus[k].excluded && (p->gpus[k].used || !used));
			}
			keep = any;
		}
		if (keep)
			set->procs[kept++] = p;
		else
			free_process(p);
	}
	set->n = kept;
}
