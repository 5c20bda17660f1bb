/* model: the processes once every log is read (see logs.h): a process
 * given twice merged, processes, GPUs, series and marks put in order, and
 * the questions the table and the plot both ask of it (which GPUs are
 * shown, the context overhead). Single-threaded. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logs.h"
#include "text.h"

/* ---- after the last file ---------------------------------------------------------- */

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

static void drop_duplicates(struct report_set *set)
{
	size_t kept = 0;

	for (size_t i = 0; i < set->n; i++) {
		struct report_process *p = set->procs[i];
		size_t j = 0;
		while (j < kept && !same_process(set->procs[j], p))
			j++;
		if (j == kept) {
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
	set->n = kept;
}

void report_logs_finish(struct report_set *set)
{
	drop_duplicates(set);
	if (set->n > 1) /* qsort's base must not be NULL, even for no element */
		qsort(set->procs, set->n, sizeof(*set->procs), cmp_process);
	for (size_t i = 0; i < set->n; i++) {
		struct report_process *p = set->procs[i];
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
	if (p->gpus[i].used)
		return true;
	for (size_t k = 0; k < p->ngpus; k++) {
		if (p->gpus[k].used)
			return false;
	}
	return true;
}
