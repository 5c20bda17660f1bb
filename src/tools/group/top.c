/* top: `cumemcap top`, every capped process on the node that the caller
 * may see, from the books in DIR: the groups' (cumemcap-group.NAME) and
 * the users' registries of processes in no group (cumemcap-node.UID).
 * One row per member and GPU, then totals per GPU and per group; --once
 * for one view, else a view every --interval seconds until SIGINT or
 * SIGTERM. A dead member (its slot live, its lock free) is shown once as
 * dead and reaped (its share of the budget returned) as soon as its book's
 * snapshot is taken, when the caller may write its book. Books are read as
 * reader.h says: a file another user plants under a book's name is skipped
 * (--debug says why), never waited on, and never hides the books after it.
 *
 * Thread safety: single-threaded; the SIGINT and SIGTERM handler only
 * sets gtool_stop (see gtool.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/parse.h"
#include "tools/group/gtool.h"
#include "tools/group/reader.h"

static const char usage_line[] = "usage: cumemcap top [--dir DIR] [--once] [--json] [--interval SECONDS] [--debug]";

static const char help_text[] =
	"Usage: cumemcap top [--dir DIR] [--once] [--json] [--interval SECONDS] [--debug]\n"
	"\n"
	"Show every capped process on this node that the caller may see: the members\n"
	"of every group in DIR and the processes in no group, which register in DIR\n"
	"too. One row per process and GPU: pid, program, group, GPU, the process's own\n"
	"limit, live, pooled, reserved and footprint memory, refusals, threads waiting\n"
	"for memory, and state; then totals per GPU and per group. The figures are the\n"
	"ones the processes publish once a second. A member that died without leaving\n"
	"is shown once as dead, and what it held is returned to its group when the\n"
	"caller may write the group's file.\n"
	"\n"
	"Options:\n"
	"  --dir DIR               the directory of the group and node files; default\n"
	"                          CUMEMCAP_GROUP_DIR, else /dev/shm.\n"
	"  --once                  print the view once and exit; without it, the view\n"
	"                          is refreshed until SIGINT or SIGTERM.\n"
	"  --interval SECONDS      seconds between refreshes, 0.1 to 86400; default 2.\n"
	"  --json                  one JSON object per view, one line each:\n"
	"                          processes, gpus, groups; sizes in bytes.\n"
	"  --debug                 name on stderr each file in DIR that was skipped,\n"
	"                          and why.\n"
	"  -h, --help              this text.\n"
	"  --version               the version.\n"
	"\n"
	"Exit status: 0 on success, 1 for a failure (DIR cannot be read), 2 for a\n"
	"wrong argument.\n";

struct opts {
	const char *dir;
	bool once, json, debug;
	uint32_t interval_ms;
};

/* A GPU of the node, by UUID, over every book. */
struct node_gpu {
	char uuid[48], pci[16];
	uint64_t total;
	unsigned processes;
	uint64_t live, pooled, reserved, footprint;
};

/* One book of the view: its snapshot (the book itself is closed once
 * the snapshot is taken). */
struct seen {
	struct gtool_book snap;
};

/* The view's books and GPUs, grown as needed: nothing a user plants can
 * fill a table and hide what comes after it. */
struct view_state {
	struct seen *books;
	size_t n, cap;
	struct node_gpu *gpus;
	size_t ngpus, gpus_cap;
};

static void on_sigint(int sig)
{
	(void)sig;
	gtool_stop = 1;
}

static void parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->dir = gtool_default_dir();
	o->interval_ms = 2000;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(help_text, stdout);
			exit(0);
		} else if (strcmp(a, "--once") == 0)
			o->once = true;
		else if (strcmp(a, "--json") == 0)
			o->json = true;
		else if (strcmp(a, "--debug") == 0)
			o->debug = true;
		else if (strcmp(a, "--dir") == 0 || strcmp(a, "--interval") == 0) {
			if (i + 1 >= argc)
				gtool_die(GTOOL_USAGE, "%s needs a value; %s", a, usage_line);
			v = argv[++i];
		} else if (strncmp(a, "--dir=", 6) == 0 || strncmp(a, "--interval=", 11) == 0) {
			v = strchr(a, '=') + 1;
		} else {
			gtool_die(GTOOL_USAGE, "%s \"%s\"; %s", a[0] == '-' ? "unknown option" : "unexpected argument",
				  a, usage_line);
		}
		if (v && a[2] == 'd')
			o->dir = v;
		else if (v && !cumemcap_parse_seconds(v, 100, 86400000, &o->interval_ms))
			gtool_die(GTOOL_USAGE, "--interval \"%s\" is not a number of seconds; accepted: 0.1 to 86400, "
				  "such as 2 or 0.5", v);
	}
	if (!o->dir[0])
		gtool_die(GTOOL_USAGE, "--dir: empty; give the directory of the books (default /dev/shm)");
}

static void *grow(void *p, size_t *cap, size_t size)
{
	*cap = *cap ? *cap * 2 : 64;
	p = realloc(p, *cap * size);
	if (!p)
		gtool_die(GTOOL_FAILED, "out of memory");
	return p;
}

/* Copy and snapshot every book of one kind in dir that passes the
 * reader's checks, appending to the view; the others are skipped (with
 * --debug, one line each). The whole directory is read first. */
static void open_kind(const struct opts *o, enum cumemcap_book_kind kind, struct view_state *v)
{
	char **names;
	int k = gtool_scan(o->dir, kind, &names);
	if (k < 0)
		gtool_die(GTOOL_FAILED, "--dir %s: cannot read it: %s", o->dir, strerror(errno));
	for (int i = 0; i < k && !gtool_stop; i++) {
		char why[256];
		struct gtool_copy c;
		if (v->n == v->cap)
			v->books = grow(v->books, &v->cap, sizeof(*v->books));
		struct seen *s = &v->books[v->n];
		/* Writable when the caller may write it: then it can reap. */
		if (!gtool_copy_read(&c, o->dir, kind, names[i], true, why, sizeof(why))) {
			if (o->debug)
				fprintf(stderr, "cumemcap top: skipped %s: %s\n", c.book.path, why);
			continue;
		}
		gtool_snapshot(&c.book, kind, &s->snap);
		/* The view shows the dead as the snapshot has them; their share
		 * is returned now, so that no book stays open (however many a
		 * user plants, the view holds one descriptor at a time). */
		if (c.writable && s->snap.dead)
			gtool_copy_reap(&c);
		gtool_copy_close(&c);
		v->n++;
	}
	gtool_scan_free(names, k);
}

static struct node_gpu *node_gpu(struct view_state *v, const struct gtool_gpu *g)
{
	for (size_t i = 0; i < v->ngpus; i++)
		if (strcmp(v->gpus[i].uuid, g->uuid) == 0)
			return &v->gpus[i];
	if (v->ngpus == v->gpus_cap)
		v->gpus = grow(v->gpus, &v->gpus_cap, sizeof(*v->gpus));
	struct node_gpu *e = &v->gpus[v->ngpus++];
	memset(e, 0, sizeof(*e));
	snprintf(e->uuid, sizeof(e->uuid), "%s", g->uuid);
	snprintf(e->pci, sizeof(e->pci), "%s", g->pci);
	e->total = g->total;
	return e;
}

static const char *group_of(const struct seen *s)
{
	return s->snap.kind == CUMEMCAP_BOOK_GROUP ? s->snap.name : NULL;
}

static void json_proc(const struct seen *s, const struct gtool_member *m, int g, bool *first)
{
	printf("%s{\"pid\":%u,\"program\":", *first ? "" : ",", m->pid);
	*first = false;
	cumemcap_json_put_str(stdout, m->program);
	printf(",\"uid\":%u,\"group\":", m->uid);
	if (group_of(s))
		cumemcap_json_put_str(stdout, group_of(s));
	else
		printf("null");
	printf(",\"state\":\"%s\",\"published_ns\":%llu,\"gpu\":", m->alive ? "alive" : "dead",
	       (unsigned long long)m->published_ns);
	if (g < 0) {
		printf("null}");
		return;
	}
	const struct gtool_figs *f = &m->gpu[g];
	printf("{\"uuid\":\"%s\",\"ordinal\":%d},\"limit\":", s->snap.gpu[g].uuid, (int)f->ordinal);
	gtool_json_limit(stdout, f->limit);
	printf(",\"held\":%llu,\"live\":%llu,\"pooled\":%llu,\"reserved\":%llu,\"footprint\":%llu,\"refusals\":%llu,"
	       "\"waits\":%llu,\"waiting\":%u}",
	       (unsigned long long)f->held, (unsigned long long)f->live, (unsigned long long)f->pooled,
	       (unsigned long long)f->reserved, (unsigned long long)f->footprint, (unsigned long long)f->refusals,
	       (unsigned long long)f->waits, f->waiting);
}

static void text_proc(struct gtool_table *t, const struct seen *s, const struct gtool_member *m, int g)
{
	char pid[16], prog[CUMEMCAP_BOOK_PROGRAM_MAX], gpu[32], sh[16], c[7][32];
	snprintf(pid, sizeof(pid), "%u", m->pid);
	gtool_safe(m->program, prog, sizeof(prog));
	const char *group = group_of(s) ? group_of(s) : "-";
	const char *state = m->alive ? "alive" : "dead";
	if (g < 0) {
		const char *row[] = { pid, prog, group, "-", "", "", "", "", "", "", "", state };
		gtool_table_row(t, row);
		return;
	}
	const struct gtool_figs *f = &m->gpu[g];
	snprintf(gpu, sizeof(gpu), "%d (%s)", (int)f->ordinal, gtool_uuid_short(s->snap.gpu[g].uuid, sh, sizeof(sh)));
	snprintf(c[5], 32, "%llu", (unsigned long long)f->refusals);
	snprintf(c[6], 32, "%u", f->waiting);
	const char *row[] = { pid, prog, group, gpu, gtool_size(f->limit, c[0], 32), gtool_size(f->live, c[1], 32),
			      gtool_size(f->pooled, c[2], 32), gtool_size(f->reserved, c[3], 32),
			      gtool_size(f->footprint, c[4], 32), c[5], c[6], state };
	gtool_table_row(t, row);
}

/* One view: open, print, reap, close. */
static void view(const struct opts *o)
{
	struct view_state v = { 0 };
	open_kind(o, CUMEMCAP_BOOK_GROUP, &v);
	open_kind(o, CUMEMCAP_BOOK_REGISTRY, &v);
	struct seen *books = v.books;
	size_t n = v.n;

	struct gtool_table procs;
	static const char *const spec[] = { ">PID", "PROGRAM", "GROUP", "GPU", ">LIMIT", ">LIVE", ">POOLED", ">RESERVED",
					    ">FOOTPRINT", ">REFUSALS", ">WAITING", "STATE" };
	gtool_table_init(&procs, 12, spec);
	bool first = true;
	if (o->json)
		printf("{\"processes\":[");
	for (size_t b = 0; b < n; b++) {
		const struct seen *s = &books[b];
		for (unsigned i = 0; i < s->snap.nmembers; i++) {
			const struct gtool_member *m = &s->snap.members[i];
			bool any = false;
			for (int g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
				if (!m->uses[g])
					continue;
				any = true;
				if (o->json)
					json_proc(s, m, g, &first);
				else
					text_proc(&procs, s, m, g);
				struct node_gpu *e = node_gpu(&v, &s->snap.gpu[g]);
				if (m->alive) {
					e->processes++;
					e->live += m->gpu[g].live;
					e->pooled += m->gpu[g].pooled;
					e->reserved += m->gpu[g].reserved;
					e->footprint += m->gpu[g].footprint;
				}
			}
			if (!any) {
				if (o->json)
					json_proc(s, m, -1, &first);
				else
					text_proc(&procs, s, m, -1);
			}
		}
	}
	if (o->json) {
		printf("],\"gpus\":[");
		for (size_t i = 0; i < v.ngpus; i++) {
			const struct node_gpu *e = &v.gpus[i];
			printf("%s{\"uuid\":\"%s\",\"pci\":", i ? "," : "", e->uuid);
			cumemcap_json_put_str(stdout, e->pci);
			printf(",\"total\":%llu,\"processes\":%u,\"live\":%llu,\"pooled\":%llu,\"reserved\":%llu,"
			       "\"footprint\":%llu}",
			       (unsigned long long)e->total, e->processes, (unsigned long long)e->live,
			       (unsigned long long)e->pooled, (unsigned long long)e->reserved,
			       (unsigned long long)e->footprint);
		}
		printf("],\"groups\":[");
		for (size_t b = 0, k = 0; b < n; b++) {
			const struct gtool_book *s = &books[b].snap;
			if (s->kind != CUMEMCAP_BOOK_GROUP)
				continue;
			printf("%s{\"name\":", k++ ? "," : "");
			cumemcap_json_put_str(stdout, s->name);
			printf(",\"members\":%u,\"dead\":%u,\"gpus\":[", s->live, s->dead);
			for (unsigned g = 0, j = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
				if (!s->gpu[g].ready)
					continue;
				printf("%s{\"uuid\":\"%s\",\"limit\":", j++ ? "," : "", s->gpu[g].uuid);
				gtool_json_limit(stdout, s->gpu[g].limit);
				printf(",\"used\":%llu}", (unsigned long long)s->gpu[g].used);
			}
			printf("]}");
		}
		printf("]}\n");
	} else {
		char when[40];
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		printf("cumemcap top  %s  %s\n\n", o->dir,
		       gtool_time((uint64_t)now.tv_sec * 1000000000u, when, sizeof(when)));
		if (procs.rows)
			gtool_table_print(&procs, stdout);
		else
			printf("no capped processes\n");
		if (v.ngpus) {
			struct gtool_table t;
			static const char *const gspec[] = { "GPU", "PCI", ">TOTAL", ">PROCESSES", ">LIVE", ">POOLED",
							     ">RESERVED", ">FOOTPRINT" };
			gtool_table_init(&t, 8, gspec);
			for (size_t i = 0; i < v.ngpus; i++) {
				const struct node_gpu *e = &v.gpus[i];
				char c[6][32], pci[16];
				snprintf(c[5], 32, "%u", e->processes);
				const char *row[] = { e->uuid, gtool_safe(e->pci, pci, sizeof(pci)),
						      gtool_size(e->total, c[0], 32), c[5], gtool_size(e->live, c[1], 32),
						      gtool_size(e->pooled, c[2], 32), gtool_size(e->reserved, c[3], 32),
						      gtool_size(e->footprint, c[4], 32) };
				gtool_table_row(&t, row);
			}
			printf("\n");
			gtool_table_print(&t, stdout);
			gtool_table_free(&t);
		}
		struct gtool_table t;
		static const char *const rspec[] = { "GROUP", ">MEMBERS", "GPU", ">LIMIT", ">USED" };
		gtool_table_init(&t, 5, rspec);
		for (size_t b = 0; b < n; b++) {
			const struct gtool_book *s = &books[b].snap;
			if (s->kind != CUMEMCAP_BOOK_GROUP)
				continue;
			char members[16], c[2][32], sh[16];
			snprintf(members, sizeof(members), "%u", s->live);
			unsigned j = 0;
			for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
				if (!s->gpu[g].ready)
					continue;
				const char *row[] = { j ? "" : s->name, j ? "" : members,
						      gtool_uuid_short(s->gpu[g].uuid, sh, sizeof(sh)),
						      gtool_size(s->gpu[g].limit, c[0], 32), gtool_size(s->gpu[g].used, c[1], 32) };
				gtool_table_row(&t, row);
				j++;
			}
			if (!j) {
				const char *row[] = { s->name, members, "-", "", "" };
				gtool_table_row(&t, row);
			}
		}
		if (t.rows) {
			printf("\n");
			gtool_table_print(&t, stdout);
		}
		gtool_table_free(&t);
	}
	gtool_table_free(&procs);
	fflush(stdout);
	for (size_t b = 0; b < n; b++)
		gtool_snapshot_free(&books[b].snap);
	free(v.books);
	free(v.gpus);
}

int gtool_top(int argc, char **argv)
{
	struct opts o;
	parse(argc, argv, &o);
	struct sigaction sa = { .sa_handler = on_sigint };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	bool tty = isatty(STDOUT_FILENO);
	while (!gtool_stop) {
		if (!o.once && !o.json && tty)
			fputs("\033[H\033[2J", stdout);
		view(&o);
		if (o.once)
			break;
		struct timespec ts = { .tv_sec = o.interval_ms / 1000, .tv_nsec = (long)(o.interval_ms % 1000) * 1000000L };
		while (!gtool_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return 0;
}
