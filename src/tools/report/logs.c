/* logs: footprint logs (schema v1 and v2) read into the report's model (see
 * logs.h). A bounded line reader, the envelope every record shares and one
 * function per record type; what is done once every file is in lives in
 * model.c. Single-threaded. */
#include "config.h"

#include "logs.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonline.h"
#include "procmap.h"
#include "text.h"

/* ---- lines ------------------------------------------------------------------- */

enum line_result { LINE_OK, LINE_EOF, LINE_TOO_LONG, LINE_ERROR };

struct line_reader {
	FILE *f;
	char *buf;
	size_t len, cap;
};

/* The next line, without its newline, into lr->buf[0..len). A line over
 * REPORT_MAX_LINE bytes is read to its end and dropped, never stored. */
static enum line_result read_line(struct line_reader *lr)
{
	bool any = false, too_long = false;
	int c;

	lr->len = 0;
	while ((c = getc_unlocked(lr->f)) != EOF) {
		any = true;
		if (c == '\n')
			break;
		if (too_long)
			continue;
		if (lr->len == REPORT_MAX_LINE) {
			too_long = true;
			continue;
		}
		if (lr->len + 1 >= lr->cap) {
			size_t cap = lr->cap ? lr->cap * 2 : 4096;
			if (cap > REPORT_MAX_LINE + 1)
				cap = REPORT_MAX_LINE + 1;
			lr->buf = report_xrealloc(lr->buf, cap);
			lr->cap = cap;
		}
		lr->buf[lr->len++] = (char)c;
	}
	if (ferror(lr->f))
		return LINE_ERROR;
	if (!any)
		return LINE_EOF;
	return too_long ? LINE_TOO_LONG : LINE_OK;
}

/* ---- one file's reading state -------------------------------------------------- */

struct reader {
	struct report_set *set;
	const char *path;
	unsigned long line;
	unsigned warnings;
	unsigned long suppressed;
	size_t records;

	const char *type; /* the record being read, for messages */
	bool bad;         /* it has a field of the wrong type */

	/* The process each pid's records belong to in this file (key: the
	 * pid): the last one whose start record was read. */
	struct report_procmap cur;
};

REPORT_PRINTF(2, 3)
static void warn(struct reader *r, const char *fmt, ...)
{
	va_list ap;

	if (r->warnings >= REPORT_MAX_WARNINGS) {
		r->suppressed++;
		return;
	}
	r->warnings++;
	struct report_buf b = { 0 };
	report_buf_printf(&b, "%s:%lu: ", r->path, r->line);
	char msg[512];
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	report_buf_puts(&b, msg);
	report_buf_puts(&b, "\n");
	fputs(b.s, stderr);
	free(b.s);
}

#define WANT_BYTES "a byte count (an integer from 0 to 18446744073709551615, or null)"
#define WANT_ORDINAL "a GPU ordinal (an integer from 0)"
#define WANT_STRING "a string"
#define WANT_COUNT "a count (an integer from 0 to 18446744073709551615, or null)"

static void bad_field(struct reader *r, const char *field, const char *want)
{
	if (!r->bad)
		warn(r, "\"%s\" record: \"%s\" is not %s; skipped", r->type, field, want);
	r->bad = true;
}

/* A byte count or counter: absent or null is unknown. `where` prefixes the
 * field name in a message ("gpus[1]."). */
static struct report_figure get_figure(struct reader *r, struct json_object *obj,
				       const char *where, const char *key, const char *want)
{
	struct report_figure f = { 0, false };
	struct json_object *v = report_json_member(obj, key);

	if (report_json_is_null(v))
		return f;
	if (!report_json_is_u64(v, &f.v)) {
		char field[96];
		snprintf(field, sizeof(field), "%s%s", where, key);
		bad_field(r, field, want);
		f.v = 0;
		return f;
	}
	f.known = true;
	return f;
}

static struct report_figure get_bytes(struct reader *r, struct json_object *obj,
				      const char *where, const char *key)
{
	return get_figure(r, obj, where, key, WANT_BYTES);
}

/* A string, or NULL when absent or null. Lives as long as the record. */
static const char *get_string(struct reader *r, struct json_object *obj, const char *where,
			      const char *key)
{
	struct json_object *v = report_json_member(obj, key);

	if (report_json_is_null(v))
		return NULL;
	if (!report_json_is_string(v)) {
		char field[96];
		snprintf(field, sizeof(field), "%s%s", where, key);
		bad_field(r, field, WANT_STRING);
		return NULL;
	}
	return json_object_get_string(v);
}

/* The "gpu" ordinal every per-GPU record and entry must have. */
static long long get_ordinal(struct reader *r, struct json_object *obj, const char *where)
{
	uint64_t n;

	if (!report_json_is_u64(report_json_member(obj, "gpu"), &n) || n > INT32_MAX) {
		char field[96];
		snprintf(field, sizeof(field), "%sgpu", where);
		bad_field(r, field, WANT_ORDINAL);
		return -1;
	}
	return (long long)n;
}

/* The "gpus" array; each element must be an object. NULL when absent. */
static struct json_object *get_gpu_list(struct reader *r, struct json_object *rec)
{
	struct json_object *v = report_json_member(rec, "gpus");

	if (report_json_is_null(v))
		return NULL;
	if (!json_object_is_type(v, json_type_array)) {
		bad_field(r, "gpus", "an array of objects");
		return NULL;
	}
	for (size_t i = 0; i < report_json_length(v); i++) {
		if (!json_object_is_type(report_json_element(v, i), json_type_object)) {
			bad_field(r, "gpus", "an array of objects");
			return NULL;
		}
	}
	return v;
}

/* A string of the log kept past its record: invalid UTF-8 as U+FFFD. */
static char *dup_or_null(const char *s)
{
	return s ? report_xstrdup_utf8(s) : NULL;
}

/* ---- the model ---------------------------------------------------------------- */

static void figure_max(struct report_figure *f, struct report_figure v)
{
	if (v.known && (!f->known || v.v > f->v)) {
		f->v = v.v;
		f->known = true;
	}
}

static void series_add(struct report_series *s, double t, struct report_figure v)
{
	if (!v.known)
		return;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 16;
		s->p = report_xrealloc(s->p, s->cap * sizeof(*s->p));
	}
	s->p[s->n].t = t;
	s->p[s->n].v = v.v;
	s->n++;
}

static void mark_add(struct report_gpu *g, double t, struct report_figure requested, bool oom,
		     struct report_figure at)
{
	if (g->nmarks == g->cap_marks) {
		g->cap_marks = g->cap_marks ? g->cap_marks * 2 : 8;
		g->marks = report_xrealloc(g->marks, g->cap_marks * sizeof(*g->marks));
	}
	g->marks[g->nmarks].t = t;
	g->marks[g->nmarks].requested = requested.known ? requested.v : 0;
	g->marks[g->nmarks].driver_oom = oom;
	g->marks[g->nmarks].at = at;
	g->nmarks++;
}

static struct report_gpu *gpu_of(struct report_process *p, long long ordinal)
{
	for (size_t i = 0; i < p->ngpus; i++) {
		if (p->gpus[i].ordinal == ordinal)
			return &p->gpus[i];
	}
	if (p->ngpus == p->cap_gpus) {
		p->cap_gpus = p->cap_gpus ? p->cap_gpus * 2 : 4;
		p->gpus = report_xrealloc(p->gpus, p->cap_gpus * sizeof(*p->gpus));
	}
	struct report_gpu *g = &p->gpus[p->ngpus++];
	memset(g, 0, sizeof(*g));
	g->ordinal = ordinal;
	g->index = -1;
	g->limit_state = REPORT_LIMIT_UNKNOWN;
	return g;
}

/* Schema v2's names of a GPU on a per-GPU object: "uuid" (a string) and
 * "index" (nvidia-smi's, an integer); either may be absent. check_ids
 * before anything is taken, take_ids after. */
static void check_ids(struct reader *r, struct json_object *obj, const char *where)
{
	struct json_object *v = report_json_member(obj, "index");
	uint64_t n;

	get_string(r, obj, where, "uuid");
	if (!report_json_is_null(v) && (!report_json_is_u64(v, &n) || n > INT32_MAX)) {
		char field[96];
		snprintf(field, sizeof(field), "%sindex", where);
		bad_field(r, field, "a GPU index (an integer from 0)");
	}
}

static void take_ids(struct reader *r, struct report_gpu *g, struct json_object *obj)
{
	const char *uuid = get_string(r, obj, "", "uuid");
	uint64_t n;

	if (uuid && uuid[0] && !g->uuid)
		g->uuid = report_xstrdup_utf8(uuid);
	if (report_json_is_u64(report_json_member(obj, "index"), &n))
		g->index = (long long)n;
}

/* The overhead's source from a record: the last one other than "none". */
static void set_source(struct report_gpu *g, const char *source)
{
	if (!source || !source[0] || strcmp(source, "none") == 0)
		return;
	free(g->overhead_source);
	g->overhead_source = report_xstrdup_utf8(source);
}

/* A limit from a record: null means none, absent means the record did not
 * say. The start record's word is final; the others fill a gap. */
static void set_limit(struct report_gpu *g, struct json_object *rec, struct report_figure f,
		      bool authoritative)
{
	if (!authoritative && g->limit_state != REPORT_LIMIT_UNKNOWN)
		return;
	if (f.known) {
		g->limit_state = REPORT_LIMIT_SET;
		g->limit = f.v;
	} else if (report_json_has_member(rec, "limit")) {
		g->limit_state = REPORT_LIMIT_NONE;
	}
}

/* The group's budget from a record's "group_limit" (absent: not said). */
static void set_group_limit(struct report_gpu *g, struct json_object *obj, struct report_figure f)
{
	if (f.known) {
		g->group_limit_state = REPORT_LIMIT_SET;
		g->group_limit = f.v;
	} else if (report_json_has_member(obj, "group_limit")) {
		g->group_limit_state = REPORT_LIMIT_NONE;
	}
}

static struct report_process *new_process(struct reader *r, long long pid, double t)
{
	struct report_set *set = r->set;
	struct report_process *p = report_xmalloc(sizeof(*p));

	memset(p, 0, sizeof(*p));
	p->file = r->path;
	p->seq = set->seq++;
	p->pid = pid;
	p->t_first = p->t_last = t;
	if (set->n == set->cap) {
		set->cap = set->cap ? set->cap * 2 : 8;
		set->procs = report_xrealloc(set->procs, set->cap * sizeof(*set->procs));
	}
	set->procs[set->n++] = p;
	report_procmap_set(&r->cur, (uint64_t)pid, set->n - 1);
	return p;
}

static struct report_process *process_of(struct reader *r, long long pid, double t)
{
	size_t pos = 0, place;

	if (report_procmap_next(&r->cur, (uint64_t)pid, &pos, &place))
		return r->set->procs[place];
	return new_process(r, pid, t);
}

/* ---- records ---------------------------------------------------------------- */

static bool read_start(struct reader *r, struct json_object *rec, long long pid, double t)
{
	const char *program = get_string(r, rec, "", "program");
	const char *host = get_string(r, rec, "", "host");
	const char *version = get_string(r, rec, "", "cumemcap");
	struct report_figure uid = get_figure(r, rec, "", "uid", "a user id (an integer)");
	struct json_object *argv = report_json_member(rec, "argv");
	struct json_object *gpus = get_gpu_list(r, rec);

	if (!report_json_is_null(argv)) {
		bool ok = json_object_is_type(argv, json_type_array);
		for (size_t a = 0; ok && a < report_json_length(argv); a++)
			ok = report_json_is_string(report_json_element(argv, a));
		if (!ok)
			bad_field(r, "argv", "an array of strings");
	}
	size_t i = 0;
	for (; i < report_json_length(gpus); i++) {
		struct json_object *e = report_json_element(gpus, i);
		char where[32];
		snprintf(where, sizeof(where), "gpus[%zu].", i);
		get_ordinal(r, e, where);
		check_ids(r, e, where);
		get_string(r, e, where, "pci");
		get_bytes(r, e, where, "capacity");
		get_bytes(r, e, where, "limit");
	}
	if (uid.known && uid.v > UINT32_MAX)
		bad_field(r, "uid", "a user id (an integer)");
	struct json_object *group = report_json_member(rec, "group");
	const char *group_name = NULL;
	if (!report_json_is_null(group) && !json_object_is_type(group, json_type_object))
		bad_field(r, "group", "an object ({\"name\": ...}) or null");
	else if (group)
		group_name = get_string(r, group, "group.", "name");
	if (r->bad)
		return false;

	struct report_process *p = new_process(r, pid, t);
	p->has_start = true;
	p->t_start = t;
	p->program = dup_or_null(program);
	p->host = dup_or_null(host);
	p->version = dup_or_null(version);
	p->group = dup_or_null(group_name);
	if (uid.known) {
		p->has_uid = true;
		p->uid = (long long)uid.v;
	}
	if (!report_json_is_null(argv)) {
		size_t n = report_json_length(argv);
		p->argv = report_xmalloc((n ? n : 1) * sizeof(*p->argv));
		for (size_t a = 0; a < n; a++)
			p->argv[p->argc++] = report_xstrdup_utf8(json_object_get_string(report_json_element(argv, a)));
	}
	for (size_t k = 0; k < report_json_length(gpus); k++) {
		struct json_object *e = report_json_element(gpus, k);
		struct report_gpu *g = gpu_of(p, get_ordinal(r, e, ""));
		const char *pci = get_string(r, e, "", "pci");
		take_ids(r, g, e);
		if (pci && !g->pci)
			g->pci = report_xstrdup_utf8(pci);
		g->capacity = get_bytes(r, e, "", "capacity");
		set_limit(g, e, get_bytes(r, e, "", "limit"), true);
	}
	p->records++;
	return true;
}

/* segment, refusal, driver_oom, context, overhead: an event on one GPU,
 * with the figures after it (schema v1 promises "reserved"; "live",
 * "pooled", "footprint" and "limit" are taken wherever a writer adds
 * them). Only refusals and driver OOMs are marks; context and overhead
 * records leave "used" to the figures. */
enum event { EVENT_SEGMENT, EVENT_REFUSAL, EVENT_DRIVER_OOM, EVENT_CONTEXT, EVENT_OVERHEAD };

static bool read_event(struct reader *r, struct json_object *rec, long long pid, double t,
		       enum event kind)
{
	long long ordinal = get_ordinal(r, rec, "");
	check_ids(r, rec, "");
	struct report_figure live = get_bytes(r, rec, "", "live");
	struct report_figure pooled = get_bytes(r, rec, "", "pooled");
	struct report_figure reserved = get_bytes(r, rec, "", "reserved");
	struct report_figure footprint = get_bytes(r, rec, "", "footprint");
	struct report_figure limit = get_bytes(r, rec, "", "limit");
	struct report_figure held = get_bytes(r, rec, "", "group_held");
	struct report_figure requested = { 0, false };
	const char *source = NULL;
	if (kind == EVENT_SEGMENT) {
		get_bytes(r, rec, "", "bytes");
		get_string(r, rec, "", "op");
	} else if (kind == EVENT_OVERHEAD) {
		source = get_string(r, rec, "", "source");
	} else if (kind != EVENT_CONTEXT) {
		requested = get_bytes(r, rec, "", "requested");
		get_string(r, rec, "", "door");
	}
	if (r->bad)
		return false;

	struct report_gpu *g = gpu_of(process_of(r, pid, t), ordinal);
	take_ids(r, g, rec);
	series_add(&g->series[REPORT_LIVE], t, live);
	series_add(&g->series[REPORT_POOLED], t, pooled);
	series_add(&g->series[REPORT_RESERVED], t, reserved);
	series_add(&g->series[REPORT_FOOTPRINT], t, footprint);
	figure_max(&g->peak_live, live);
	figure_max(&g->peak_pooled, pooled);
	figure_max(&g->peak_reserved, reserved);
	figure_max(&g->peak_footprint, footprint);
	set_limit(g, rec, limit, false);
	figure_max(&g->peak_group_held, held);
	set_source(g, source);
	if (kind == EVENT_CONTEXT || kind == EVENT_OVERHEAD)
		return true;
	if (kind != EVENT_SEGMENT)
		mark_add(g, t, requested, kind == EVENT_DRIVER_OOM,
			 footprint.known ? footprint : reserved);
	g->refusal_events += kind == EVENT_REFUSAL;
	g->oom_events += kind == EVENT_DRIVER_OOM;
	g->used = true;
	return true;
}

static bool read_segment(struct reader *r, struct json_object *rec, long long pid,
			 double t)
{
	return read_event(r, rec, pid, t, EVENT_SEGMENT);
}

static bool read_refusal(struct reader *r, struct json_object *rec, long long pid,
			 double t)
{
	return read_event(r, rec, pid, t, EVENT_REFUSAL);
}

static bool read_driver_oom(struct reader *r, struct json_object *rec, long long pid,
			    double t)
{
	return read_event(r, rec, pid, t, EVENT_DRIVER_OOM);
}

static bool read_context(struct reader *r, struct json_object *rec, long long pid,
			 double t)
{
	return read_event(r, rec, pid, t, EVENT_CONTEXT);
}

static bool read_overhead(struct reader *r, struct json_object *rec, long long pid,
			  double t)
{
	return read_event(r, rec, pid, t, EVENT_OVERHEAD);
}

static const char *const sample_fields[REPORT_SERIES] = {
	[REPORT_LIVE] = "live",
	[REPORT_POOLED] = "pooled",
	[REPORT_RESERVED] = "reserved",
	[REPORT_FOOTPRINT] = "footprint",
	[REPORT_DRIVER] = "driver_used",
};

static const char *const group_fields[] = { "group_limit", "group_used", "group_held" };

static bool read_sample(struct reader *r, struct json_object *rec, long long pid,
			 double t)
{
	struct json_object *gpus = get_gpu_list(r, rec);
	size_t i = 0;

	/* Check every entry before taking any. */
	for (; i < report_json_length(gpus); i++) {
		struct json_object *e = report_json_element(gpus, i);
		char where[32];
		snprintf(where, sizeof(where), "gpus[%zu].", i);
		get_ordinal(r, e, where);
		check_ids(r, e, where);
		for (int k = 0; k < REPORT_SERIES; k++)
			get_bytes(r, e, where, sample_fields[k]);
		get_bytes(r, e, where, "context_overhead");
		get_bytes(r, e, where, "overhead");
		get_string(r, e, where, "overhead_source");
		for (size_t f = 0; f < sizeof(group_fields) / sizeof(group_fields[0]); f++)
			get_bytes(r, e, where, group_fields[f]);
	}
	if (r->bad)
		return false;
	struct report_process *p = process_of(r, pid, t);
	for (size_t k = 0; k < report_json_length(gpus); k++) {
		struct json_object *e = report_json_element(gpus, k);
		struct report_gpu *g = gpu_of(p, get_ordinal(r, e, ""));
		take_ids(r, g, e);
		struct report_figure *peaks[REPORT_SERIES] = {
			[REPORT_LIVE] = &g->peak_live,
			[REPORT_POOLED] = &g->peak_pooled,
			[REPORT_RESERVED] = &g->peak_reserved,
			[REPORT_FOOTPRINT] = &g->peak_footprint,
			[REPORT_DRIVER] = &g->peak_driver,
		};
		for (int f = 0; f < REPORT_SERIES; f++) {
			struct report_figure v = get_bytes(r, e, "", sample_fields[f]);
			series_add(&g->series[f], t, v);
			figure_max(peaks[f], v);
		}
		struct report_figure used = get_bytes(r, e, "", "group_used");
		set_group_limit(g, e, get_bytes(r, e, "", "group_limit"));
		series_add(&g->group_used, t, used);
		figure_max(&g->peak_group_used, used);
		figure_max(&g->peak_group_held, get_bytes(r, e, "", "group_held"));
		figure_max(&g->context_max, get_bytes(r, e, "", "context_overhead"));
		figure_max(&g->overhead, get_bytes(r, e, "", "overhead"));
		set_source(g, get_string(r, e, "", "overhead_source"));
	}
	return true;
}

static bool read_exit(struct reader *r, struct json_object *rec, long long pid, double t)
{
	const char *reason = get_string(r, rec, "", "reason");
	struct report_figure signo =
	    get_figure(r, rec, "", "signal", "a signal number (an integer)");
	struct json_object *gpus = get_gpu_list(r, rec);
	static const char *const counts[] = { "allocs", "frees", "refusals", "driver_oom",
					      "avoided", "segments_taken", "segments_released" };
	static const char *const bytes[] = { "limit",           "peak_live",
					     "peak_pooled",     "peak_reserved",
					     "peak_footprint",  "peak_driver_used",
					     "largest_request", "overhead",
					     "group_limit",     "group_held" };
	size_t i = 0;

	if (signo.known && signo.v > INT32_MAX)
		bad_field(r, "signal", "a signal number (an integer)");
	for (; i < report_json_length(gpus); i++) {
		struct json_object *e = report_json_element(gpus, i);
		char where[32];
		snprintf(where, sizeof(where), "gpus[%zu].", i);
		get_ordinal(r, e, where);
		check_ids(r, e, where);
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
			get_figure(r, e, where, counts[k], WANT_COUNT);
		for (size_t k = 0; k < sizeof(bytes) / sizeof(bytes[0]); k++)
			get_bytes(r, e, where, bytes[k]);
		get_string(r, e, where, "overhead_source");
	}
	if (r->bad)
		return false;

	struct report_process *p = process_of(r, pid, t);
	p->has_exit = true;
	p->t_exit = t;
	free(p->exit_reason);
	p->exit_reason = dup_or_null(reason);
	p->has_signal = signo.known;
	p->exit_signal = (long long)signo.v;
	for (size_t k = 0; k < report_json_length(gpus); k++) {
		struct json_object *e = report_json_element(gpus, k);
		struct report_gpu *g = gpu_of(p, get_ordinal(r, e, ""));
		take_ids(r, g, e);
		struct report_figure reserved = get_bytes(r, e, "", "peak_reserved");
		struct report_figure driver = get_bytes(r, e, "", "peak_driver_used");
		set_limit(g, e, get_bytes(r, e, "", "limit"), false);
		figure_max(&g->peak_live, get_bytes(r, e, "", "peak_live"));
		figure_max(&g->peak_pooled, get_bytes(r, e, "", "peak_pooled"));
		figure_max(&g->peak_reserved, reserved);
		figure_max(&g->peak_footprint, get_bytes(r, e, "", "peak_footprint"));
		figure_max(&g->peak_driver, driver);
		figure_max(&g->overhead, get_bytes(r, e, "", "overhead"));
		set_source(g, get_string(r, e, "", "overhead_source"));
		set_group_limit(g, e, get_bytes(r, e, "", "group_limit"));
		figure_max(&g->peak_group_held, get_bytes(r, e, "", "group_held"));
		figure_max(&g->exit_reserved, reserved);
		figure_max(&g->exit_driver, driver);
		figure_max(&g->exit_refusals, get_figure(r, e, "", "refusals", WANT_COUNT));
		figure_max(&g->exit_ooms, get_figure(r, e, "", "driver_oom", WANT_COUNT));
		figure_max(&g->avoided, get_figure(r, e, "", "avoided", WANT_COUNT));
		figure_max(&g->allocs, get_figure(r, e, "", "allocs", WANT_COUNT));
	}
	return true;
}

/* The group's budget on a GPU changed: "new_limit" (null: none) on "gpu",
 * this process's ordinal of it (null when it does not use that GPU). */
static bool read_group_change(struct reader *r, struct json_object *rec, long long pid, double t)
{
	struct json_object *gpu = report_json_member(rec, "gpu");
	struct report_figure limit = get_bytes(r, rec, "", "new_limit");
	const char *group = get_string(r, rec, "", "group");
	long long ordinal = -1;

	get_bytes(r, rec, "", "old_limit");
	if (!report_json_is_null(gpu))
		ordinal = get_ordinal(r, rec, "");
	if (r->bad)
		return false;
	struct report_process *p = process_of(r, pid, t);
	if (group && !p->group)
		p->group = report_xstrdup_utf8(group);
	if (ordinal < 0)
		return true;
	struct report_gpu *g = gpu_of(p, ordinal);
	take_ids(r, g, rec);
	g->group_limit_state = limit.known ? REPORT_LIMIT_SET : REPORT_LIMIT_NONE;
	g->group_limit = limit.v;
	return true;
}

/* The record's time: "t" (Unix seconds), else v2's "time" (RFC 3339). */
static bool record_time(struct json_object *rec, double *t)
{
	struct json_object *v = report_json_member(rec, "t");

	if (report_json_is_number(v) && isfinite(json_object_get_double(v))) {
		*t = json_object_get_double(v);
		return true;
	}
	v = report_json_member(rec, "time");
	return report_json_is_string(v) && report_parse_rfc3339(json_object_get_string(v), t);
}

/* v2 puts "program" and "host" on every record: they name a process whose
 * start record is missing (a log cut at its head, or read from a pipe). */
static void take_names(struct report_process *p, struct json_object *rec)
{
	struct json_object *program = report_json_member(rec, "program");
	struct json_object *host = report_json_member(rec, "host");

	if (!p->program && report_json_is_string(program))
		p->program = report_xstrdup_utf8(json_object_get_string(program));
	if (!p->host && report_json_is_string(host))
		p->host = report_xstrdup_utf8(json_object_get_string(host));
}

/* One line: the envelope, then the record's own fields. */
static void read_record(struct reader *r, struct json_object *rec)
{
	double t;
	uint64_t version, id;

	if (!json_object_is_type(rec, json_type_object)) {
		warn(r, "not a JSON object; skipped");
		return;
	}
	struct json_object *v = report_json_member(rec, "v");
	struct json_object *type = report_json_member(rec, "type");
	if (!report_json_is_number(v) || !report_json_is_string(type) || !record_time(rec, &t) || !report_json_is_u64(report_json_member(rec, "pid"), &id) ||
	    id > INT32_MAX) {
		warn(r, "not a cumemcap record (one needs \"v\", \"type\", \"t\" or \"time\", "
			"and \"pid\"); skipped");
		return;
	}
	if (!report_json_is_u64(v, &version) || version < 1 || version > 2) {
		warn(r, "schema version %g (this reader knows \"v\":1 and \"v\":2); skipped",
		     json_object_get_double(v));
		return;
	}

	static const struct {
		const char *name;
		bool (*read)(struct reader *, struct json_object *, long long, double);
	} types[] = {
		{ "start", read_start }, { "segment", read_segment }, { "refusal", read_refusal },
		{ "driver_oom", read_driver_oom }, { "context", read_context },
		{ "overhead", read_overhead }, { "sample", read_sample },
		{ "exit", read_exit }, { "group_change", read_group_change },
	};
	r->type = json_object_get_string(type);
	r->bad = false;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (strcmp(r->type, types[i].name) != 0)
			continue;
		if (types[i].read(r, rec, (long long)id, t)) {
			struct report_process *p = process_of(r, (long long)id, t);
			if (t < p->t_first)
				p->t_first = t;
			if (t > p->t_last)
				p->t_last = t;
			if (i > 0) /* read_start counts its own */
				p->records++;
			take_names(p, rec);
			r->records++;
		}
		return;
	}
	/* An unknown type: a later writer's; ignored. */
}

/* ---- files ---------------------------------------------------------------------- */

enum report_read report_logs_read(struct report_set *set, const char *path,
				  enum report_source source, size_t *records_out)
{
	struct reader r = { .set = set, .path = path };
	struct line_reader lr = { 0 };
	struct json_tokener *tok = json_tokener_new();
	enum report_read result = REPORT_READ_DONE;

	*records_out = 0;
	if (!tok)
		report_oom();
	if (strcmp(path, "-") == 0 && source == REPORT_TYPED)
		lr.f = stdin;
	else
		lr.f = report_log_open(path, source, &result);
	if (!lr.f) {
		json_tokener_free(tok);
		return result;
	}
	result = REPORT_READ_DONE;
	for (;;) {
		enum line_result got = read_line(&lr);
		if (got == LINE_EOF)
			break;
		if (got == LINE_ERROR) {
			fprintf(stderr, "cumemcap report: %s: read error after line %lu: %s\n",
				path, r.line, strerror(errno));
			result = REPORT_READ_FAILED;
			break;
		}
		r.line++;
		if (got == LINE_TOO_LONG) {
			warn(&r,
			     "longer than %d bytes (1 MiB, the most a record may take); skipped",
			     REPORT_MAX_LINE);
			continue;
		}
		size_t blank = 0;
		while (blank < lr.len && (lr.buf[blank] == ' ' || lr.buf[blank] == '\t' ||
					  lr.buf[blank] == '\r'))
			blank++;
		if (blank < lr.len) {
			struct json_object *rec = report_json_line(tok, lr.buf, lr.len);
			if (rec)
				read_record(&r, rec);
			else
				warn(&r, "not a JSON object; skipped");
			json_object_put(rec);
		}
	}
	if (r.suppressed)
		fprintf(stderr, "%s: %lu more line%s skipped (warnings stop at %d per file)\n",
			path, r.suppressed, r.suppressed == 1 ? "" : "s", REPORT_MAX_WARNINGS);
	if (lr.f != stdin)
		fclose(lr.f);
	free(lr.buf);
	report_procmap_free(&r.cur);
	json_tokener_free(tok);
	*records_out = r.records;
	return result;
}
