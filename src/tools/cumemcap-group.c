/* tool: cumemcap-group, what the launcher's `cumemcap group ...` and
 * `cumemcap top` run: the command-line side of groups.
 *
 *   cumemcap-group group list [--dir DIR] [--json]
 *   cumemcap-group group show NAME [--dir DIR] [--json]
 *   cumemcap-group group set NAME [--gpu SEL] --limit SIZE|none [--dir DIR]
 *   cumemcap-group top [--dir DIR] [--once] [--json] [--interval SECONDS] [--debug]
 *
 * It reads the books (group/book.h) that processes under the shim keep in
 * DIR (--dir, else CUMEMCAP_GROUP_DIR, else /dev/shm), never their logs;
 * list, show and top copy them as group/reader.h says, so that nothing
 * another user plants in DIR can block, crash or hide from them.
 * Exit status: 0, 1 on a runtime failure, 2 on a wrong argument; every
 * error is one line "cumemcap group: ..." (or "cumemcap top: ...").
 *
 * This file: the arguments and `group list`, `show` and `set`; group/top.c:
 * `top`; group/gtool.c: what they share.
 *
 * Thread safety: single-threaded; it starts no thread, and its state is
 * main's locals (gtool.h says what a signal handler touches). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/parse.h"
#include "group/book.h"
#include "tools/group/gtool.h"
#include "tools/group/reader.h"

struct args {
	const char *dir;
	const char *name;
	const char *gpu;
	const char *limit;
	bool json;
};

static const char usage_line[] =
	"usage: cumemcap group list [--dir DIR] [--json] | show NAME [--dir DIR] [--json] | "
	"set NAME [--gpu SEL] --limit SIZE|none [--dir DIR]";

static const char help_text[] =
	"Usage: cumemcap group list [--dir DIR] [--json]\n"
	"       cumemcap group show NAME [--dir DIR] [--json]\n"
	"       cumemcap group set NAME [--gpu UUID|PCI] --limit SIZE|none [--dir DIR]\n"
	"\n"
	"Show and resize the groups of processes that share one GPU memory budget\n"
	"(CUMEMCAP_GROUP). Each group's state is a file in DIR, cumemcap-group.NAME;\n"
	"these commands read it (set changes it) and never read footprint logs.\n"
	"\n"
	"Commands:\n"
	"  list                    every group in DIR: its live and dead members and,\n"
	"                          per GPU, the group's limit and what its members\n"
	"                          hold. A file under a group's name that is not a\n"
	"                          valid group file is listed with the reason.\n"
	"  show NAME               the group's GPUs, its members (pid, program, uid,\n"
	"                          alive or dead, and what each holds per GPU) and the\n"
	"                          last limit changes.\n"
	"  set NAME                change the group's limit on every GPU, or on the one\n"
	"                          --gpu names, and print each change. Members waiting\n"
	"                          for memory are woken; a lower limit takes nothing\n"
	"                          from the members, but grants no more until they are\n"
	"                          under it.\n"
	"\n"
	"Options:\n"
	"  --dir DIR               the directory of the group files; default\n"
	"                          CUMEMCAP_GROUP_DIR, else /dev/shm.\n"
	"  --json                  list, show: one JSON object, sizes in bytes, a\n"
	"                          missing limit as null.\n"
	"  --gpu UUID|PCI          set: the one GPU to change, by its UUID (GPU-...) or\n"
	"                          PCI bus id (0000:3b:00.0) as show lists them; an\n"
	"                          ordinal is refused (members may number GPUs\n"
	"                          differently).\n"
	"  --limit SIZE|none       set: the new limit, in the forms of CUMEMCAP_LIMIT\n"
	"                          (8GiB, 1.5G, bytes, or 75% of each GPU); none\n"
	"                          removes it.\n"
	"  -h, --help              this text.\n"
	"  --version               the version.\n"
	"\n"
	"Exit status: 0 on success, 1 for a failure (no such group, a group file that\n"
	"cannot be opened or is not valid, permission denied), 2 for a wrong argument.\n"
	"An error is one line on stderr naming the file or value and what is accepted.\n";

/* The value of option `opt` at argv[*i] ("--opt VALUE" or "--opt=VALUE"),
 * or NULL when argv[*i] is not that option. */
static const char *opt_value(int argc, char **argv, int *i, const char *opt)
{
	size_t n = strlen(opt);
	const char *a = argv[*i];
	if (strncmp(a, opt, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != '\0')
		return NULL;
	if (*i + 1 >= argc)
		gtool_die(GTOOL_USAGE, "%s needs a value; %s", opt, usage_line);
	return argv[++*i];
}

/* Parse a group command's arguments: which options it takes, and whether
 * it takes a NAME. */
static void parse(int argc, char **argv, const char *cmd, bool takes_name, bool set, struct args *a)
{
	memset(a, 0, sizeof(*a));
	a->dir = gtool_default_dir();
	for (int i = 0; i < argc; i++) {
		const char *v;
		if ((v = opt_value(argc, argv, &i, "--dir")))
			a->dir = v;
		else if (set && (v = opt_value(argc, argv, &i, "--gpu")))
			a->gpu = v;
		else if (set && (v = opt_value(argc, argv, &i, "--limit")))
			a->limit = v;
		else if (!set && strcmp(argv[i], "--json") == 0)
			a->json = true;
		else if (argv[i][0] == '-' && argv[i][1])
			gtool_die(GTOOL_USAGE, "%s: unknown option \"%s\"; %s", cmd, argv[i], usage_line);
		else if (takes_name && !a->name)
			a->name = argv[i];
		else
			gtool_die(GTOOL_USAGE, "%s: unexpected argument \"%s\"; %s", cmd, argv[i], usage_line);
	}
	if (!a->dir[0])
		gtool_die(GTOOL_USAGE, "--dir: empty; give the directory of the books (default /dev/shm)");
	if (takes_name && !a->name)
		gtool_die(GTOOL_USAGE, "%s needs a group NAME; %s", cmd, usage_line);
	if (a->name && !cumemcap_book_name_ok(a->name))
		gtool_die(GTOOL_USAGE, "\"%s\" is not a group name; accepted: 1-64 of A-Z a-z 0-9 . _ -, "
			  "not starting with . or -", a->name);
}

static void book_path(const struct args *a, char *path, size_t len)
{
	if (!cumemcap_book_path(path, len, a->dir, CUMEMCAP_BOOK_GROUP, a->name))
		gtool_die(GTOOL_USAGE, "--dir %s: the path of group %s's book is too long", a->dir, a->name);
}

/* Copy group a->name's book to read it (show) or die naming the file. */
static void open_read(const struct args *a, struct gtool_copy *c)
{
	char path[1024], why[256];
	book_path(a, path, sizeof(path));
	struct stat st;
	if (lstat(path, &st) != 0 && errno == ENOENT)
		gtool_die(GTOOL_FAILED, "no group \"%s\" in %s: %s does not exist (a group's book is made by "
			  "its first member)", a->name, a->dir, path);
	if (!gtool_copy_read(c, a->dir, CUMEMCAP_BOOK_GROUP, a->name, false, why, sizeof(why)))
		gtool_die(GTOOL_FAILED, "%s: %s", path, why);
}

/* ---- list ----------------------------------------------------------------------------------- */

static int cmd_list(int argc, char **argv)
{
	struct args a;
	parse(argc, argv, "list", false, false, &a);
	char **names;
	int n = gtool_scan(a.dir, CUMEMCAP_BOOK_GROUP, &names);
	if (n < 0)
		gtool_die(GTOOL_FAILED, "--dir %s: cannot read it: %s", a.dir, strerror(errno));
	struct gtool_table t;
	static const char *const spec[] = { "GROUP", ">MEMBERS", ">DEAD", "GPU", "PCI", ">LIMIT", ">USED" };
	gtool_table_init(&t, 7, spec);
	static const char *const bad_spec[] = { "UNREADABLE" };
	struct gtool_table bad;
	gtool_table_init(&bad, 1, bad_spec);
	if (a.json)
		printf("{\"dir\":"), cumemcap_json_put_str(stdout, a.dir), printf(",\"groups\":[");
	for (int i = 0; i < n; i++) {
		char why[256];
		struct gtool_copy b;
		struct gtool_book s;
		bool ok = gtool_copy_read(&b, a.dir, CUMEMCAP_BOOK_GROUP, names[i], false, why, sizeof(why));
		const char *path = b.book.path;
		if (ok)
			gtool_snapshot(&b.book, CUMEMCAP_BOOK_GROUP, &s);
		gtool_copy_close(&b); /* its path stays */
		if (a.json) {
			printf("%s{\"name\":", i ? "," : "");
			cumemcap_json_put_str(stdout, names[i]);
			printf(",\"path\":");
			cumemcap_json_put_str(stdout, path);
			if (!ok) {
				printf(",\"error\":");
				cumemcap_json_put_str(stdout, why);
				printf("}");
				continue;
			}
			printf(",\"members\":%u,\"dead\":%u,\"gpus\":[", s.live, s.dead);
			unsigned k = 0;
			for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
				if (!s.gpu[g].ready)
					continue;
				printf("%s{\"uuid\":\"%s\",\"pci\":", k++ ? "," : "", s.gpu[g].uuid);
				cumemcap_json_put_str(stdout, s.gpu[g].pci);
				printf(",\"total\":%llu,\"limit\":", (unsigned long long)s.gpu[g].total);
				gtool_json_limit(stdout, s.gpu[g].limit);
				printf(",\"used\":%llu}", (unsigned long long)s.gpu[g].used);
			}
			printf("]}");
		} else if (!ok) {
			/* After the table, so that a long reason does not widen it. */
			char line[1400];
			snprintf(line, sizeof(line), "%s: cannot read %s: %s", names[i], path, why);
			const char *row[] = { line };
			gtool_table_row(&bad, row);
		} else {
			char live[16], dead[16], lim[32], used[32], pci[16];
			snprintf(live, sizeof(live), "%u", s.live);
			snprintf(dead, sizeof(dead), "%u", s.dead);
			if (!s.gpus_ready) {
				const char *row[] = { names[i], live, dead, "(no GPU yet)", "", "", "" };
				gtool_table_row(&t, row);
			}
			for (unsigned g = 0, k = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
				if (!s.gpu[g].ready)
					continue;
				const char *row[] = { k ? "" : names[i], k ? "" : live, k ? "" : dead, s.gpu[g].uuid,
						      gtool_safe(s.gpu[g].pci, pci, sizeof(pci)),
						      gtool_size(s.gpu[g].limit, lim, sizeof(lim)),
						      gtool_size(s.gpu[g].used, used, sizeof(used)) };
				gtool_table_row(&t, row);
				k++;
			}
		}
		if (ok)
			gtool_snapshot_free(&s);
	}
	gtool_scan_free(names, n);
	if (a.json)
		printf("]}\n");
	else if (n == 0)
		printf("no groups in %s\n", a.dir);
	else if (t.rows)
		gtool_table_print(&t, stdout);
	if (!a.json && bad.rows) {
		printf("%s", t.rows ? "\n" : "");
		gtool_table_print(&bad, stdout);
	}
	gtool_table_free(&t);
	gtool_table_free(&bad);
	return 0;
}

/* ---- show ----------------------------------------------------------------------------------- */

static void show_json(const struct gtool_book *s, const struct cumemcap_book *b, const char *path)
{
	printf("{\"name\":");
	cumemcap_json_put_str(stdout, s->name);
	printf(",\"path\":");
	cumemcap_json_put_str(stdout, path);
	printf(",\"members_live\":%u,\"members_dead\":%u,\"gpus\":[", s->live, s->dead);
	for (unsigned g = 0, k = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
		const struct gtool_gpu *e = &s->gpu[g];
		if (!e->ready)
			continue;
		printf("%s{\"index\":%u,\"uuid\":\"%s\",\"pci\":", k++ ? "," : "", g, e->uuid);
		cumemcap_json_put_str(stdout, e->pci);
		printf(",\"total\":%llu,\"limit\":", (unsigned long long)e->total);
		gtool_json_limit(stdout, e->limit);
		printf(",\"used\":%llu}", (unsigned long long)e->used);
	}
	printf("],\"members\":[");
	for (unsigned i = 0; i < s->nmembers; i++) {
		const struct gtool_member *m = &s->members[i];
		printf("%s{\"slot\":%u,\"pid\":%u,\"program\":", i ? "," : "", m->slot, m->pid);
		cumemcap_json_put_str(stdout, m->program);
		printf(",\"uid\":%u,\"state\":\"%s\",\"joined_ns\":%llu,\"published_ns\":%llu,\"gpus\":[", m->uid,
		       m->alive ? "alive" : "dead", (unsigned long long)m->joined_ns,
		       (unsigned long long)m->published_ns);
		for (unsigned g = 0, k = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
			const struct gtool_figs *f = &m->gpu[g];
			if (!m->uses[g])
				continue;
			printf("%s{\"uuid\":\"%s\",\"ordinal\":%d,\"held\":%llu,\"limit\":", k++ ? "," : "",
			       s->gpu[g].uuid, (int)f->ordinal, (unsigned long long)f->held);
			gtool_json_limit(stdout, f->limit);
			printf(",\"live\":%llu,\"pooled\":%llu,\"reserved\":%llu,\"footprint\":%llu,\"refusals\":%llu,"
			       "\"waits\":%llu,\"waiting\":%u}",
			       (unsigned long long)f->live, (unsigned long long)f->pooled, (unsigned long long)f->reserved,
			       (unsigned long long)f->footprint, (unsigned long long)f->refusals,
			       (unsigned long long)f->waits, f->waiting);
		}
		printf("]}");
	}
	printf("],\"changes\":[");
	uint64_t last = atomic_load(&cumemcap_book_header(b)->change_seq);
	uint64_t first = last > CUMEMCAP_BOOK_CHANGES ? last - CUMEMCAP_BOOK_CHANGES + 1 : 1;
	for (uint64_t seq = first, k = 0; seq <= last; seq++) {
		struct cumemcap_book_change *c = cumemcap_book_change(b, seq);
		struct cumemcap_book_change v = { .time_ns = c->time_ns, .uid = c->uid, .gpu = c->gpu,
						  .old_limit = c->old_limit, .new_limit = c->new_limit };
		if (atomic_load(&c->seq) != seq)
			continue;
		printf("%s{\"seq\":%llu,\"time_ns\":%llu,\"uid\":%u,\"gpu\":", k++ ? "," : "", (unsigned long long)seq,
		       (unsigned long long)v.time_ns, v.uid);
		if (v.gpu >= 0 && v.gpu < CUMEMCAP_BOOK_GPUS && s->gpu[v.gpu].ready)
			printf("\"%s\"", s->gpu[v.gpu].uuid);
		else
			printf("null");
		printf(",\"old\":");
		gtool_json_limit(stdout, v.old_limit);
		printf(",\"new\":");
		gtool_json_limit(stdout, v.new_limit);
		printf("}");
	}
	printf("]}\n");
}

static void show_text(const struct gtool_book *s, const struct cumemcap_book *b, const char *path)
{
	char t1[32], t2[32], t3[32], t4[32], t5[32], t6[32], t7[32], t8[32], buf[64];
	printf("group %s (%s): %u live member%s, %u dead\n\n", s->name, path, s->live, s->live == 1 ? "" : "s",
	       s->dead);
	if (!s->gpus_ready) {
		printf("no GPU known yet\n");
	} else {
		struct gtool_table t;
		static const char *const spec[] = { "GPU", "PCI", ">TOTAL", ">LIMIT", ">USED" };
		gtool_table_init(&t, 5, spec);
		for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
			const struct gtool_gpu *e = &s->gpu[g];
			if (!e->ready)
				continue;
			const char *row[] = { e->uuid, gtool_safe(e->pci, buf, sizeof(buf)), gtool_size(e->total, t1, 32),
					      gtool_size(e->limit, t2, 32), gtool_size(e->used, t3, 32) };
			gtool_table_row(&t, row);
		}
		gtool_table_print(&t, stdout);
		gtool_table_free(&t);
	}
	printf("\n");
	if (!s->nmembers) {
		printf("no members\n");
	} else {
		struct gtool_table t;
		static const char *const spec[] = { ">SLOT", ">PID", "PROGRAM", ">UID", "STATE", "GPU", ">HELD", ">LIVE",
						    ">RESERVED", ">FOOTPRINT", ">REFUSALS", ">WAITING" };
		gtool_table_init(&t, 12, spec);
		for (unsigned i = 0; i < s->nmembers; i++) {
			const struct gtool_member *m = &s->members[i];
			char slot[16], pid[16], uid[16], prog[CUMEMCAP_BOOK_PROGRAM_MAX], gpu[32], sh[16];
			snprintf(slot, sizeof(slot), "%u", m->slot);
			snprintf(pid, sizeof(pid), "%u", m->pid);
			snprintf(uid, sizeof(uid), "%u", m->uid);
			gtool_safe(m->program, prog, sizeof(prog));
			unsigned k = 0;
			for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
				const struct gtool_figs *f = &m->gpu[g];
				if (!m->uses[g])
					continue;
				snprintf(gpu, sizeof(gpu), "%d (%s)", (int)f->ordinal,
					 gtool_uuid_short(s->gpu[g].uuid, sh, sizeof(sh)));
				snprintf(t5, 32, "%llu", (unsigned long long)f->refusals);
				snprintf(t6, 32, "%u", f->waiting);
				const char *row[] = { slot, pid, prog, uid, m->alive ? "alive" : "dead", gpu,
						      gtool_size(f->held, t1, 32), gtool_size(f->live, t2, 32),
						      gtool_size(f->reserved, t3, 32), gtool_size(f->footprint, t4, 32),
						      t5, t6 };
				gtool_table_row(&t, row);
				k++;
			}
			if (!k) {
				const char *row[] = { slot, pid, prog, uid, m->alive ? "alive" : "dead", "-",
						      "", "", "", "", "", "" };
				gtool_table_row(&t, row);
			}
		}
		gtool_table_print(&t, stdout);
		gtool_table_free(&t);
	}
	uint64_t last = atomic_load(&cumemcap_book_header(b)->change_seq);
	if (!last)
		return;
	printf("\nlimit changes:\n");
	uint64_t first = last > CUMEMCAP_BOOK_CHANGES ? last - CUMEMCAP_BOOK_CHANGES + 1 : 1;
	for (uint64_t seq = first; seq <= last; seq++) {
		struct cumemcap_book_change *c = cumemcap_book_change(b, seq);
		struct cumemcap_book_change v = { .time_ns = c->time_ns, .uid = c->uid, .gpu = c->gpu,
						  .old_limit = c->old_limit, .new_limit = c->new_limit };
		if (atomic_load(&c->seq) != seq)
			continue;
		bool known = v.gpu >= 0 && v.gpu < CUMEMCAP_BOOK_GPUS && s->gpu[v.gpu].ready;
		printf("  %s  uid %u  %s  %s -> %s\n", gtool_time(v.time_ns, t7, 32), v.uid,
		       known ? s->gpu[v.gpu].uuid : "every GPU", gtool_size(v.old_limit, t1, 32),
		       gtool_size(v.new_limit, t8, 32));
	}
}

static int cmd_show(int argc, char **argv)
{
	struct args a;
	parse(argc, argv, "show", true, false, &a);
	struct gtool_copy b;
	struct gtool_book s;
	open_read(&a, &b);
	gtool_snapshot(&b.book, CUMEMCAP_BOOK_GROUP, &s);
	if (a.json)
		show_json(&s, &b.book, b.book.path);
	else
		show_text(&s, &b.book, b.book.path);
	gtool_snapshot_free(&s);
	gtool_copy_close(&b);
	return 0;
}

/* ---- set ------------------------------------------------------------------------------------ */

/* Open the book for writing with the checks a member makes (the shim's
 * cumemcap_book_open): owned by the caller and 0600, or shared 0660 with
 * one of the caller's groups. A book no member of the caller's could open
 * is not changed. */
static void open_write(const struct args *a, struct cumemcap_book *b)
{
	char path[1024], why[256], why_gid[256];
	book_path(a, path, sizeof(path));
	struct stat st;
	if (lstat(path, &st) != 0) {
		if (errno == ENOENT)
			gtool_die(GTOOL_FAILED, "no group \"%s\" in %s: %s does not exist (a group's book is made "
				  "by its first member)", a->name, a->dir, path);
		gtool_die(GTOOL_FAILED, "%s: cannot stat it: %s", path, strerror(errno));
	}
	if (cumemcap_book_open(b, path, CUMEMCAP_BOOK_GROUP, a->name, CUMEMCAP_BOOK_USER, (gid_t)-1,
			       false, why, sizeof(why)))
		return;
	/* A book shared by group (CUMEMCAP_GROUP_ACCESS=gid) */
	if ((st.st_mode & 0060) == 0060 &&
	    cumemcap_book_open(b, path, CUMEMCAP_BOOK_GROUP, a->name, CUMEMCAP_BOOK_GID, (gid_t)-1,
			       false, why_gid, sizeof(why_gid)))
		return;
	if ((st.st_mode & 0060) == 0060)
		snprintf(why, sizeof(why), "%s", why_gid);
	gtool_die(GTOOL_FAILED, "%s: %s; not changed", path, why);
}

/* The limit `amount` comes to on a GPU of `total` bytes. */
static uint64_t resolve(const struct cumemcap_amount *amount, bool none, uint64_t total)
{
	if (none)
		return CUMEMCAP_BOOK_NONE;
	if (amount->kind == CUMEMCAP_AMOUNT_BYTES)
		return amount->bytes;
	/* floor(total * permille / 100000), as the shim's policy does */
	return total / 100000u * amount->permille + total % 100000u * amount->permille / 100000u;
}

static int cmd_set(int argc, char **argv)
{
	struct args a;
	parse(argc, argv, "set", true, true, &a);
	if (!a.limit)
		gtool_die(GTOOL_USAGE, "set needs --limit SIZE (or --limit none); %s", usage_line);
	struct cumemcap_amount amount;
	bool none = strcmp(a.limit, "none") == 0;
	if (!none && !cumemcap_parse_amount(a.limit, &amount))
		gtool_die(GTOOL_USAGE, "--limit \"%s\" is not a limit; accepted: none, or %s", a.limit,
			  cumemcap_amount_forms);
	struct cumemcap_selector sel;
	if (a.gpu) {
		if (!cumemcap_parse_selector(a.gpu, strlen(a.gpu), &sel))
			gtool_die(GTOOL_USAGE, "--gpu \"%s\" is not a GPU; accepted: a GPU UUID such as "
				  "GPU-8e6bd7c8-95e4-2e0f-c1d9-6e2a0b1c4d5f or a PCI bus id such as 0000:3b:00.0", a.gpu);
		if (sel.kind == CUMEMCAP_SEL_ORDINAL)
			gtool_die(GTOOL_USAGE, "--gpu %s: an ordinal is ambiguous (each member may number the GPUs "
				  "differently); name the GPU by its UUID or PCI bus id, as `cumemcap group show %s` "
				  "lists them", a.gpu, a.name);
	}
	struct cumemcap_book b;
	struct gtool_book s;
	open_write(&a, &b);
	gtool_snapshot(&b, CUMEMCAP_BOOK_GROUP, &s);
	if (!s.gpus_ready)
		gtool_die(GTOOL_FAILED, "group %s: no GPU known yet (a GPU enters the book when a member first "
			  "uses it; members can bring a limit with CUMEMCAP_GROUP_LIMIT)", a.name);
	int matched = 0;
	for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++)
		if (s.gpu[g].ready && a.gpu) {
			unsigned char raw[16];
			memcpy(raw, cumemcap_book_gpu(&b, g)->uuid, 16);
			if (cumemcap_selector_matches(&sel, -1, raw, s.gpu[g].pci))
				matched++;
		}
	if (a.gpu && !matched) {
		char known[1024] = "";
		size_t n = 0;
		for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS && n < sizeof(known); g++)
			if (s.gpu[g].ready)
				n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s (%s)", n ? ", " : "",
						      s.gpu[g].uuid, s.gpu[g].pci);
		gtool_die(GTOOL_FAILED, "--gpu %s: group %s has no such GPU; it has %s", a.gpu, a.name, known);
	}
	char t1[32], t2[32], t3[32];
	for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
		if (!s.gpu[g].ready)
			continue;
		if (a.gpu && !cumemcap_selector_matches(&sel, -1, cumemcap_book_gpu(&b, g)->uuid, s.gpu[g].pci))
			continue;
		uint64_t limit = resolve(&amount, none, s.gpu[g].total);
		if (!none && limit == 0)
			gtool_die(GTOOL_USAGE, "--limit %s is 0 bytes of %s's %llu", a.limit, s.gpu[g].uuid,
				  (unsigned long long)s.gpu[g].total);
		uint64_t old = atomic_load(&cumemcap_book_gpu(&b, g)->limit);
		cumemcap_book_set_limit(&b, (int)g, limit, geteuid());
		uint64_t used = cumemcap_book_used(&b, g);
		printf("%s: %s (%s): %s -> %s", a.name, s.gpu[g].uuid, s.gpu[g].pci, gtool_size(old, t1, 32),
		       gtool_size(limit, t2, 32));
		if (limit != CUMEMCAP_BOOK_NONE && used > limit)
			printf(" (the members hold %s: nothing more is granted until they are under it)",
			       gtool_size(used, t3, 32));
		printf("\n");
	}
	gtool_snapshot_free(&s);
	cumemcap_book_close(&b);
	return 0;
}

int main(int argc, char **argv)
{
	/* cumemcap-group --version, cumemcap group --version, cumemcap top --version */
	if ((argc == 2 && strcmp(argv[1], "--version") == 0) ||
	    (argc == 3 && strcmp(argv[2], "--version") == 0 &&
	     (strcmp(argv[1], "group") == 0 || strcmp(argv[1], "top") == 0))) {
		printf("cumemcap-group %s\n", CUMEMCAP_VERSION_STRING);
		return 0;
	}
	if (argc >= 2 && strcmp(argv[1], "top") == 0) {
		gtool_prog = "cumemcap top";
		return gtool_top(argc - 2, argv + 2);
	}
	if (argc < 3 || strcmp(argv[1], "group") != 0)
		gtool_die(GTOOL_USAGE, "%s", argc >= 2 && strcmp(argv[1], "group") != 0
						     ? "the first word must be group or top"
						     : usage_line);
	const char *cmd = argv[2];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0) {
		fputs(help_text, stdout);
		return 0;
	}
	if (strcmp(cmd, "list") == 0)
		return cmd_list(argc - 3, argv + 3);
	if (strcmp(cmd, "show") == 0)
		return cmd_show(argc - 3, argv + 3);
	if (strcmp(cmd, "set") == 0)
		return cmd_set(argc - 3, argv + 3);
	gtool_die(GTOOL_USAGE, "unknown command \"%s\"; %s", cmd, usage_line);
}
