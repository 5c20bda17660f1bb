/* gtool: see gtool.h (errors, the directory of books, snapshots, tables,
 * JSON). Thread safety: single-threaded, as gtool.h says. */
#include "tools/group/gtool.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/nvml.h"
#include "platform/msg.h"

const char *gtool_prog = "cumemcap group";
volatile sig_atomic_t gtool_stop;

void gtool_die(int status, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fflush(stdout);
	fprintf(stderr, "%s: %s\n", gtool_prog, line);
	exit(status);
}

const char *gtool_default_dir(void)
{
	const char *d = getenv("CUMEMCAP_GROUP_DIR");
	return d && d[0] ? d : "/dev/shm";
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool uid_name(const char *s)
{
	if (!*s || strlen(s) > 10)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

int gtool_scan(const char *dir, enum cumemcap_book_kind kind, char ***out)
{
	const char *prefix = kind == CUMEMCAP_BOOK_GROUP ? "cumemcap-group." : "cumemcap-node.";
	size_t plen = strlen(prefix);
	*out = NULL;
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	/* Every entry, however many: which files are books is known only once
	 * each is opened, so no bound may be applied here (files planted
	 * first in readdir's order would hide the books after them). */
	while ((e = readdir(d)) != NULL && n < INT_MAX) {
		if (strncmp(e->d_name, prefix, plen) != 0)
			continue;
		const char *name = e->d_name + plen;
		if (kind == CUMEMCAP_BOOK_GROUP ? !cumemcap_book_name_ok(name) : !uid_name(name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **grown = realloc(names, cap * sizeof(*names));
			if (!grown)
				gtool_die(GTOOL_FAILED, "out of memory listing %s", dir);
			names = grown;
		}
		if (!(names[n] = strdup(name)))
			gtool_die(GTOOL_FAILED, "out of memory listing %s", dir);
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), by_name);
	*out = names;
	return (int)n;
}

void gtool_scan_free(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* ---- snapshots ------------------------------------------------------------------------------ */

static void load_figs(const struct cumemcap_book_figs *f, struct gtool_figs *o)
{
	o->held = atomic_load(&f->held);
	o->limit = atomic_load(&f->limit);
	o->live = atomic_load(&f->live);
	o->pooled = atomic_load(&f->pooled);
	o->reserved = atomic_load(&f->reserved);
	o->footprint = atomic_load(&f->footprint);
	o->refusals = atomic_load(&f->refusals);
	o->waits = atomic_load(&f->waits);
	o->waiting = atomic_load(&f->waiting);
	o->ordinal = atomic_load(&f->ordinal);
}

void gtool_snapshot(const struct cumemcap_book *b, enum cumemcap_book_kind kind, struct gtool_book *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = kind;
	const struct cumemcap_book_header *h = cumemcap_book_header(b);
	memcpy(out->name, h->name, sizeof(out->name));
	out->name[sizeof(out->name) - 1] = '\0';
	for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
		const struct cumemcap_book_gpu *e = cumemcap_book_gpu(b, g);
		struct gtool_gpu *o = &out->gpu[g];
		if (atomic_load(&((struct cumemcap_book_gpu *)e)->state) != 2)
			continue;
		o->ready = true;
		out->gpus_ready++;
		cumemcap_nvml_format_uuid(e->uuid, "GPU-", o->uuid);
		memcpy(o->pci, e->pci, sizeof(o->pci));
		o->pci[sizeof(o->pci) - 1] = '\0';
		o->total = e->total;
		o->limit = atomic_load(&((struct cumemcap_book_gpu *)e)->limit);
		o->used = cumemcap_book_used(b, g);
	}
	uint32_t used = atomic_load(&((struct cumemcap_book_header *)h)->slots_used);
	if (used > CUMEMCAP_BOOK_SLOTS)
		used = CUMEMCAP_BOOK_SLOTS;
	out->members = calloc(used ? used : 1, sizeof(*out->members));
	if (!out->members)
		gtool_die(GTOOL_FAILED, "out of memory");
	for (unsigned i = 0; i < used; i++) {
		struct cumemcap_book_slot *s = cumemcap_book_slot(b, i);
		if (atomic_load(&s->state) != 1)
			continue;
		struct gtool_member *m = &out->members[out->nmembers++];
		m->slot = i;
		m->alive = cumemcap_book_alive(b, i);
		m->pid = s->pid;
		m->uid = s->uid;
		m->joined_ns = s->joined_ns;
		m->published_ns = atomic_load(&s->published_ns);
		memcpy(m->program, s->program, sizeof(m->program));
		m->program[sizeof(m->program) - 1] = '\0';
		for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
			load_figs(&s->gpu[g], &m->gpu[g]);
			m->uses[g] = out->gpu[g].ready && (m->gpu[g].ordinal >= 0 || m->gpu[g].held > 0);
		}
		if (m->alive)
			out->live++;
		else
			out->dead++;
	}
}

void gtool_snapshot_free(struct gtool_book *s)
{
	free(s->members);
	s->members = NULL;
}

/* ---- text ----------------------------------------------------------------------------------- */

const char *gtool_uuid_short(const char *uuid, char *buf, size_t len)
{
	snprintf(buf, len, "%.8s", strncmp(uuid, "GPU-", 4) == 0 ? uuid + 4 : uuid);
	return buf;
}

const char *gtool_size(uint64_t bytes, char *buf, size_t len)
{
	if (bytes == CUMEMCAP_BOOK_NONE) {
		snprintf(buf, len, "none");
		return buf;
	}
	return cumemcap_fmt_size(bytes, buf, len);
}

const char *gtool_time(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;
	if (!gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, len, "?");
	return buf;
}

const char *gtool_safe(const char *s, char *buf, size_t len)
{
	size_t i = 0;
	for (; s[i] && i + 1 < len; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	buf[i] = '\0';
	return buf;
}

void gtool_table_init(struct gtool_table *t, unsigned cols, const char *const *spec)
{
	memset(t, 0, sizeof(*t));
	t->cols = cols;
	for (unsigned c = 0; c < cols; c++) {
		t->right[c] = spec[c][0] == '>';
		t->head[c] = spec[c] + t->right[c];
	}
}

void gtool_table_row(struct gtool_table *t, const char *const *cells)
{
	if (t->rows == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 16;
		t->cell = realloc(t->cell, (size_t)t->cap * t->cols * sizeof(*t->cell));
		if (!t->cell)
			gtool_die(GTOOL_FAILED, "out of memory");
	}
	for (unsigned c = 0; c < t->cols; c++) {
		char *s = strdup(cells[c] ? cells[c] : "");
		if (!s)
			gtool_die(GTOOL_FAILED, "out of memory");
		t->cell[(size_t)t->rows * t->cols + c] = s;
	}
	t->rows++;
}

void gtool_table_print(const struct gtool_table *t, FILE *out)
{
	size_t w[GTOOL_COLS];
	for (unsigned c = 0; c < t->cols; c++) {
		w[c] = strlen(t->head[c]);
		for (unsigned r = 0; r < t->rows; r++) {
			size_t n = strlen(t->cell[(size_t)r * t->cols + c]);
			if (n > w[c])
				w[c] = n;
		}
	}
	for (unsigned r = 0; r <= t->rows; r++) {
		for (unsigned c = 0; c < t->cols; c++) {
			const char *s = r == 0 ? t->head[c] : t->cell[(size_t)(r - 1) * t->cols + c];
			bool last = c + 1 == t->cols;
			if (t->right[c])
				fprintf(out, "%*s%s", (int)w[c], s, last ? "" : "  ");
			else
				fprintf(out, "%-*s%s", last ? 0 : (int)w[c], s, last ? "" : "  ");
		}
		fputc('\n', out);
	}
}

void gtool_table_free(struct gtool_table *t)
{
	for (size_t i = 0; i < (size_t)t->rows * t->cols; i++)
		free(t->cell[i]);
	free(t->cell);
	t->cell = NULL;
	t->rows = t->cap = 0;
}

/* ---- JSON ----------------------------------------------------------------------------------- */


void gtool_json_limit(FILE *out, uint64_t v)
{
	if (v == CUMEMCAP_BOOK_NONE)
		fputs("null", out);
	else
		fprintf(out, "%llu", (unsigned long long)v);
}
