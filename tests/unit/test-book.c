/* Unit tests for src/group/book.c: the shared book of a group. Creating
 * and opening it (owner, mode, size, header, no symbolic link), the loader
 * (cumemcap_book_check, one refusal per field it checks), slots owned by
 * OFD locks (distinct per open file, freed by the kernel when the owner
 * dies, reaped whatever the recorded pid), the GPU table (one entry per
 * UUID, also with concurrent adders), limit changes in their ring, and the
 * sum of what members hold.
 *
 * Creation reserves the file's bytes and sweeps only this user's stale
 * temporaries.
 *
 * Everything happens in a mkdtemp directory made (and removed) by the
 * parent around each forked test. Children of a test open the book again
 * themselves: a fork shares its parent's open file, and with it the
 * parent's OFD locks. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "driver/nvml.h"
#include "group/book.h"
#include "test-common.h"

static char dir[256], path[512];
static char why[512];

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/cumemcap-book.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert(cumemcap_book_path(path, sizeof(path), dir, CUMEMCAP_BOOK_GROUP, "team"));
}

static void teardown(void)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void open_book(struct cumemcap_book *b, bool create)
{
	why[0] = '\0';
	ck_assert_msg(cumemcap_book_open(b, path, CUMEMCAP_BOOK_GROUP, "team", CUMEMCAP_BOOK_USER,
					 (gid_t)-1, create, why, sizeof(why)), "%s", why);
}

/* Opening the existing book fails with a reason containing `want`. */
static void refused(const char *want)
{
	struct cumemcap_book b;
	why[0] = '\0';
	ck_assert(!cumemcap_book_open(&b, path, CUMEMCAP_BOOK_GROUP, "team", CUMEMCAP_BOOK_USER,
				      (gid_t)-1, true, why, sizeof(why)));
	ck_assert_ptr_null(b.map);
	ck_assert_msg(strstr(why, want) != NULL, "\"%s\" does not say \"%s\"", why, want);
}

/* A made book, closed, to be spoiled on disk. */
static void make_book(void)
{
	struct cumemcap_book b;
	open_book(&b, true);
	cumemcap_book_close(&b);
}

static void poke(off_t at, const void *bytes, size_t n)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, bytes, n, at), (ssize_t)n);
	close(fd);
}

static const unsigned char uuid_a[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1 };
static const unsigned char uuid_b[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 2 };

static void fail_child(int code)
{
	_exit(code);
}

/* fork(), the child dying with the test if the test fails first. */
static pid_t fork_child(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		prctl(PR_SET_PDEATHSIG, SIGKILL);
	return pid;
}

/* ---- creating and opening ---- */

START_TEST(book_create_then_open_shares_the_mapping)
{
	struct cumemcap_book a, b;
	open_book(&a, true);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_uint_eq(st.st_uid, geteuid());
	ck_assert_uint_eq((uint64_t)st.st_size, CUMEMCAP_BOOK_SIZE);
	const struct cumemcap_book_header *h = cumemcap_book_header(&a);
	ck_assert_uint_eq(h->magic, CUMEMCAP_BOOK_MAGIC);
	ck_assert_uint_eq(h->version, CUMEMCAP_BOOK_VERSION);
	ck_assert_uint_eq(h->kind, CUMEMCAP_BOOK_GROUP);
	ck_assert_str_eq(h->name, "team");
	ck_assert_uint_eq(h->creator_uid, geteuid());
	ck_assert_uint_eq(atomic_load(&h->slots_used), 0);
	/* No temporary file is left beside it. */
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
	ck_assert_int_eq(system(cmd), 0);

	open_book(&b, true);
	ck_assert_ptr_ne(a.map, b.map);
	ck_assert_int_ne(a.fd, b.fd);
	atomic_store(&cumemcap_book_header(&a)->squeeze, 77);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_header(&b)->squeeze), 77);
	ck_assert_int_eq(cumemcap_book_gpu_find(&b, uuid_a, "0000:3b:00.0", 100, 50), 0);
	ck_assert_int_eq(cumemcap_book_gpu_lookup(&a, uuid_a), 0);
	ck_assert_str_eq(cumemcap_book_gpu(&a, 0)->pci, "0000:3b:00.0");
	cumemcap_book_close(&b);
	cumemcap_book_close(&a);
	ck_assert_ptr_null(a.map);
	ck_assert_int_eq(a.fd, -1);

	/* Without `create`, no book is made. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert(!cumemcap_book_open(&a, path, CUMEMCAP_BOOK_GROUP, "team", CUMEMCAP_BOOK_USER,
				      (gid_t)-1, false, why, sizeof(why)));
	ck_assert_int_eq(access(path, F_OK), -1);
}
END_TEST

START_TEST(book_create_reserves_its_bytes)
{
	/* A sparse book is a SIGBUS at the first touch of a page a full
	 * file system cannot back: every block is allocated at creation. */
	struct cumemcap_book b;
	open_book(&b, true);
	struct stat st;
	ck_assert_int_eq(fstat(b.fd, &st), 0);
	ck_assert_msg((uint64_t)st.st_blocks * 512 >= CUMEMCAP_BOOK_SIZE, "%llu blocks of 512 for %zu bytes",
		      (unsigned long long)st.st_blocks, (size_t)CUMEMCAP_BOOK_SIZE);
	cumemcap_book_close(&b);
}
END_TEST

static void touch_at(const char *name, time_t mtime)
{
	char p[700];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	struct timespec t[2] = { { .tv_sec = mtime }, { .tv_sec = mtime } };
	ck_assert_int_eq(utimensat(AT_FDCWD, p, t, 0), 0);
}

static bool exists(const char *name)
{
	char p[700];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

START_TEST(book_create_sweeps_own_stale_temporaries_only)
{
	time_t now = time(NULL);
	touch_at(".cumemcap-new.4242.0", now - 3600);   /* a crash's: gone */
	touch_at(".cumemcap-new.4243.0", now);          /* being made now: kept */
	touch_at(".cumemcap-other", now - 3600);        /* not cumemcap's name: kept */
	char target[700], link[700];
	snprintf(target, sizeof(target), "%s/.cumemcap-other", dir);
	snprintf(link, sizeof(link), "%s/.cumemcap-new.link", dir);
	ck_assert_int_eq(symlink(target, link), 0);    /* not a file it made: kept */
	make_book();
	ck_assert(!exists(".cumemcap-new.4242.0"));
	ck_assert(exists(".cumemcap-new.4243.0"));
	ck_assert(exists(".cumemcap-other"));
	ck_assert(exists(".cumemcap-new.link"));
}
END_TEST

START_TEST(book_fate_sees_a_cut_and_a_removed_book)
{
	struct cumemcap_book b;
	uint64_t size = 1;
	open_book(&b, true);
	ck_assert_int_eq(cumemcap_book_fate(&b, &size), CUMEMCAP_BOOK_SOUND);
	ck_assert_uint_eq(size, CUMEMCAP_BOOK_SIZE);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(cumemcap_book_fate(&b, &size), CUMEMCAP_BOOK_REMOVED);
	/* Cut is said first: a removed and cut book must not be touched. */
	ck_assert_int_eq(ftruncate(b.fd, 4096), 0);
	ck_assert_int_eq(cumemcap_book_fate(&b, &size), CUMEMCAP_BOOK_CUT);
	ck_assert_uint_eq(size, 4096);
	close(b.fd);
	b.fd = -1;
	munmap(b.map, CUMEMCAP_BOOK_SIZE);
	b.map = NULL;
}
END_TEST

START_TEST(book_carry_copies_a_members_figures)
{
	struct cumemcap_book a, b;
	open_book(&a, true);
	char other[600];
	snprintf(other, sizeof(other), "%s/cumemcap-group.other", dir);
	ck_assert(cumemcap_book_open(&b, other, CUMEMCAP_BOOK_GROUP, "other", CUMEMCAP_BOOK_USER,
				     (gid_t)-1, true, why, sizeof(why)));
	int from = cumemcap_book_claim(&a, "p"), to = cumemcap_book_claim(&b, "p");
	ck_assert_int_ge(from, 0);
	ck_assert_int_ge(to, 0);
	struct cumemcap_book_figs *f = &cumemcap_book_slot(&a, (unsigned)from)->gpu[3];
	atomic_store(&f->held, 123);
	atomic_store(&f->limit, 456);
	atomic_store(&f->ordinal, 1);
	atomic_store(&f->waiting, 2);
	cumemcap_book_carry(&a, (unsigned)from, 3, &b, (unsigned)to, 5);
	struct cumemcap_book_figs *t = &cumemcap_book_slot(&b, (unsigned)to)->gpu[5];
	ck_assert_uint_eq(atomic_load(&t->held), 123);
	ck_assert_uint_eq(atomic_load(&t->limit), 456);
	ck_assert_int_eq(atomic_load(&t->ordinal), 1);
	ck_assert_uint_eq(atomic_load(&t->waiting), 2);
	ck_assert_uint_eq(cumemcap_book_used(&b, 5), 123);
	cumemcap_book_close(&b);
	cumemcap_book_close(&a);
}
END_TEST

START_TEST(book_open_refuses_mode_0644)
{
	make_book();
	ck_assert_int_eq(chmod(path, 0644), 0);
	refused("mode 0644");
}
END_TEST

START_TEST(book_open_refuses_another_owner)
{
	if (geteuid() != 0)
		return; /* only root can give a file away */
	make_book();
	int fd = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchown(fd, 65534, 65534), 0);
	close(fd);
	refused("owned by uid 65534");
}
END_TEST

START_TEST(book_open_refuses_wrong_size)
{
	make_book();
	ck_assert_int_eq(truncate(path, (off_t)CUMEMCAP_BOOK_SIZE - 4096), 0);
	refused("bytes, a book has");
	ck_assert_int_eq(truncate(path, (off_t)CUMEMCAP_BOOK_SIZE + 1), 0);
	refused("bytes, a book has");
}
END_TEST

START_TEST(book_open_refuses_wrong_magic)
{
	make_book();
	poke(0, "X", 1);
	refused("not a cumemcap book");
}
END_TEST

START_TEST(book_open_refuses_other_version)
{
	make_book();
	uint32_t v = CUMEMCAP_BOOK_VERSION + 1;
	poke(offsetof(struct cumemcap_book_header, version), &v, sizeof(v));
	refused("book version 2");
}
END_TEST

START_TEST(book_open_refuses_symlink)
{
	make_book();
	char real[600];
	snprintf(real, sizeof(real), "%s/real", dir);
	ck_assert_int_eq(rename(path, real), 0);
	ck_assert_int_eq(symlink(real, path), 0);
	refused("symbolic link");
	/* ... and does not replace it either. */
	struct stat st;
	ck_assert_int_eq(lstat(path, &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
}
END_TEST

/* ---- the loader ---- */

struct spoil {
	size_t at;
	const char *bytes; /* NULL: patch `value` (of `n` bytes) */
	uint64_t value;
	size_t n;
	const char *name;  /* passed to the check */
	int kind;          /* 0: group */
	size_t len;        /* 0: the whole book */
	const char *want;
};

#define HDR(f) offsetof(struct cumemcap_book_header, f)
#define GPU(i, f) (CUMEMCAP_BOOK_GPU_OFF + (i) * sizeof(struct cumemcap_book_gpu) + offsetof(struct cumemcap_book_gpu, f))
#define CHG(i, f) (CUMEMCAP_BOOK_CHANGE_OFF + (i) * sizeof(struct cumemcap_book_change) + offsetof(struct cumemcap_book_change, f))
#define SLOT(i, f) (CUMEMCAP_BOOK_SLOT_OFF + (size_t)(i) * sizeof(struct cumemcap_book_slot) + offsetof(struct cumemcap_book_slot, f))

START_TEST(book_check_refuses_each_field)
{
	static const struct spoil cases[] = {
		{ 0, NULL, 0, 0, "team", 0, 100, "too short" },
		{ HDR(magic), "Y", 0, 0, NULL, 0, 0, "not a cumemcap book" },
		{ HDR(version), NULL, 7, 4, NULL, 0, 0, "book version 7" },
		{ HDR(header_size), NULL, 2048, 4, NULL, 0, 0, "layout" },
		{ HDR(gpu_size), NULL, 81, 4, NULL, 0, 0, "layout" },
		{ HDR(change_size), NULL, 48, 4, NULL, 0, 0, "layout" },
		{ HDR(slot_size), NULL, 2401, 4, NULL, 0, 0, "layout" },
		{ HDR(gpus), NULL, 64, 4, NULL, 0, 0, "layout" },
		{ HDR(changes), NULL, 16, 4, NULL, 0, 0, "layout" },
		{ HDR(slots), NULL, 2048, 4, NULL, 0, 0, "layout" },
		{ HDR(size), NULL, 4096, 8, NULL, 0, 0, "the header says 4096" },
		{ 0, NULL, 0, 0, NULL, 0, CUMEMCAP_BOOK_SIZE - 1, "bytes, the header says" },
		{ 0, NULL, 0, 0, NULL, CUMEMCAP_BOOK_REGISTRY, 0, "a group book, not a registry" },
		{ HDR(kind), NULL, 9, 4, NULL, 0, 0, "a corrupt book, not a group" },
		{ HDR(name), ".team", 0, 0, NULL, 0, 0, "not a group name" },
		{ HDR(name), "te am", 0, 0, NULL, 0, 0, "not a group name" },
		{ 0, NULL, 0, 0, "other", 0, 0, "book of \"team\", not \"other\"" },
		{ HDR(slots_used), NULL, CUMEMCAP_BOOK_SLOTS + 1, 4, NULL, 0, 0, "1025 slots in use" },
		{ HDR(tight), NULL, 2, 4, NULL, 0, 0, "tight flag is 2" },
		{ GPU(3, state), NULL, 3, 4, NULL, 0, 0, "GPU entry 3 has state 3" },
		{ GPU(0, pci), "0000:3b:00.0abcd", 0, 0, NULL, 0, 0, "GPU entry 0 has no PCI id" },
		{ CHG(5, seq), NULL, 6, 8, NULL, 0, 0, "change entry 5 has seq 6" },
		{ CHG(2, seq), NULL, 34, 8, NULL, 0, 0, "change entry 2 has seq 34" }, /* > change_seq (2) */
		{ CHG(1, gpu), NULL, 32, 4, NULL, 0, 0, "change entry 1 names GPU 32" },
		{ CHG(1, gpu), NULL, UINT32_MAX, 4, NULL, 0, 0, "change entry 1 names GPU -1" },
		{ SLOT(9, state), NULL, 2, 4, NULL, 0, 0, "slot 9 has state 2" },
		{ SLOT(1, state), NULL, 1, 4, NULL, 0, 0, "slot 1 is live past the 1 in use" },
		{ 0, NULL, 0, 0, NULL, 0, 0, NULL },
	};
	/* A real book: one GPU, two changes, one member. */
	struct cumemcap_book b;
	open_book(&b, true);
	ck_assert_int_eq(cumemcap_book_gpu_find(&b, uuid_a, "0000:3b:00.0", 100, 50), 0);
	ck_assert_uint_eq(cumemcap_book_set_limit(&b, 0, 60, 0), 1);
	ck_assert_uint_eq(cumemcap_book_set_limit(&b, 0, 70, 0), 1);
	ck_assert_int_eq(cumemcap_book_claim(&b, "prog"), 0);
	unsigned char *good = malloc(CUMEMCAP_BOOK_SIZE), *img = malloc(CUMEMCAP_BOOK_SIZE);
	ck_assert(good && img);
	memcpy(good, b.map, CUMEMCAP_BOOK_SIZE);
	cumemcap_book_close(&b);
	ck_assert_msg(cumemcap_book_check(good, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, "team", why, sizeof(why)), "%s",
		      why);
	ck_assert(cumemcap_book_check(good, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, NULL, why, sizeof(why)));

	for (const struct spoil *c = cases; c->want; c++) {
		memcpy(img, good, CUMEMCAP_BOOK_SIZE);
		if (c->bytes)
			memcpy(img + c->at, c->bytes, strlen(c->bytes));
		else if (c->n)
			memcpy(img + c->at, &c->value, c->n); /* little-endian */
		why[0] = '\0';
		ck_assert_msg(!cumemcap_book_check(img, c->len ? c->len : CUMEMCAP_BOOK_SIZE,
						   c->kind ? (enum cumemcap_book_kind)c->kind : CUMEMCAP_BOOK_GROUP,
						   c->name, why, sizeof(why)),
			      "accepted with \"%s\" spoiled", c->want);
		ck_assert_msg(strstr(why, c->want) != NULL, "\"%s\" does not say \"%s\"", why, c->want);
	}
	/* A registry's name is a uid, not a group name: anything terminated. */
	memcpy(img, good, CUMEMCAP_BOOK_SIZE);
	uint32_t reg = CUMEMCAP_BOOK_REGISTRY;
	memcpy(img + HDR(kind), &reg, 4);
	memcpy(img + HDR(name), "0", 2);
	ck_assert_msg(cumemcap_book_check(img, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_REGISTRY, "0", why, sizeof(why)), "%s",
		      why);
	memset(img + HDR(name), 'x', CUMEMCAP_BOOK_NAME_MAX + 1);
	ck_assert(!cumemcap_book_check(img, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_REGISTRY, NULL, why, sizeof(why)));
	free(img);
	free(good);
}
END_TEST

/* ---- slots ---- */

START_TEST(book_claim_distinct_per_open_file)
{
	struct cumemcap_book a, b;
	open_book(&a, true);
	open_book(&b, false);
	ck_assert_int_eq(cumemcap_book_claim(&a, "first"), 0);
	ck_assert_int_eq(cumemcap_book_claim(&b, "second"), 1);
	const struct cumemcap_book_slot *s = cumemcap_book_slot(&a, 1);
	ck_assert_uint_eq(atomic_load(&s->state), 1);
	ck_assert_uint_eq(s->pid, (uint32_t)getpid());
	ck_assert_uint_eq(s->uid, geteuid());
	ck_assert_str_eq(s->program, "second");
	ck_assert_uint_eq(atomic_load(&cumemcap_book_header(&a)->slots_used), 2);
	/* Each sees the other's slot alive (its lock held by another open
	 * file), not its own; a free slot is not alive. */
	ck_assert(cumemcap_book_alive(&a, 1));
	ck_assert(cumemcap_book_alive(&b, 0));
	ck_assert(!cumemcap_book_alive(&a, 2));
	ck_assert(!cumemcap_book_alive(&a, CUMEMCAP_BOOK_SLOTS));
	/* Nothing to reap: both owners are alive. */
	ck_assert_uint_eq(cumemcap_book_reap(&a, 0), 0);
	ck_assert_uint_eq(cumemcap_book_reap(&b, 1), 0);
	/* Released: free, not alive, and claimed again. */
	atomic_store(&cumemcap_book_slot(&b, 1)->gpu[0].held, 5);
	cumemcap_book_release(&b, 1);
	ck_assert_uint_eq(atomic_load(&s->state), 0);
	ck_assert_uint_eq(atomic_load(&s->gpu[0].held), 0);
	ck_assert(!cumemcap_book_alive(&a, 1));
	ck_assert_int_eq(cumemcap_book_claim(&b, "again"), 1);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_header(&a)->slots_used), 2);
	cumemcap_book_release(&b, -1); /* no-op */
	cumemcap_book_release(&b, CUMEMCAP_BOOK_SLOTS);
	cumemcap_book_close(&b);
	cumemcap_book_close(&a);
}
END_TEST

/* A child that opens the book, claims a slot, holds `held` on GPU 0,
 * writes its slot's index to `out`, then waits to be killed. */
static pid_t member(int out, uint64_t held)
{
	pid_t pid = fork_child();
	if (pid > 0)
		return pid;
	struct cumemcap_book b;
	char w[256];
	if (!cumemcap_book_open(&b, path, CUMEMCAP_BOOK_GROUP, "team", CUMEMCAP_BOOK_USER,
				(gid_t)-1, false, w, sizeof(w)))
		fail_child(2);
	int i = cumemcap_book_claim(&b, "child");
	if (i < 0)
		fail_child(3);
	atomic_store(&cumemcap_book_slot(&b, (unsigned)i)->gpu[0].held, held);
	if (write(out, &i, sizeof(i)) != sizeof(i))
		fail_child(4);
	for (;;)
		pause();
}

START_TEST(book_reap_returns_a_killed_members_share)
{
	struct cumemcap_book a;
	open_book(&a, true);
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_a, "0000:3b:00.0", 1000, 500), 0);
	int self = cumemcap_book_claim(&a, "parent");
	ck_assert_int_eq(self, 0);
	atomic_store(&cumemcap_book_slot(&a, 0)->gpu[0].held, 7);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t live = member(p[1], 100), dead = member(p[1], 123);
	int si[2];
	ck_assert_int_eq(read(p[0], &si[0], sizeof(int)), sizeof(int));
	ck_assert_int_eq(read(p[0], &si[1], sizeof(int)), sizeof(int));
	ck_assert_int_ne(si[0], si[1]);
	ck_assert(si[0] > 0 && si[1] > 0);
	/* Which slot is whose: the pid is recorded. */
	int s_dead = cumemcap_book_slot(&a, (unsigned)si[0])->pid == (uint32_t)dead ? si[0] : si[1];
	int s_live = s_dead == si[0] ? si[1] : si[0];
	ck_assert_uint_eq(cumemcap_book_slot(&a, (unsigned)s_live)->pid, (uint32_t)live);
	ck_assert(cumemcap_book_alive(&a, (unsigned)s_dead));
	ck_assert(cumemcap_book_alive(&a, (unsigned)s_live));
	ck_assert_uint_eq(cumemcap_book_used(&a, 0), 7 + 100 + 123);
	/* Live children are not reaped. */
	ck_assert_uint_eq(cumemcap_book_reap(&a, self), 0);
	ck_assert_uint_eq(cumemcap_book_used(&a, 0), 7 + 100 + 123);

	ck_assert_int_eq(kill(dead, SIGKILL), 0);
	ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
	ck_assert(!cumemcap_book_alive(&a, (unsigned)s_dead));
	ck_assert(cumemcap_book_alive(&a, (unsigned)s_live));
	/* Its slot still says live, with its share, until it is reaped. */
	ck_assert_uint_eq(atomic_load(&cumemcap_book_slot(&a, (unsigned)s_dead)->state), 1);
	ck_assert_uint_eq(cumemcap_book_reap(&a, self), 1);
	const struct cumemcap_book_slot *s = cumemcap_book_slot(&a, (unsigned)s_dead);
	ck_assert_uint_eq(atomic_load(&s->state), 0);
	ck_assert_uint_eq(atomic_load(&s->gpu[0].held), 0);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_slot(&a, (unsigned)s_live)->gpu[0].held), 100);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_slot(&a, 0)->gpu[0].held), 7);
	ck_assert_uint_eq(cumemcap_book_used(&a, 0), 7 + 100);
	ck_assert_uint_eq(cumemcap_book_reap(&a, self), 0);
	/* The freed slot is the next one claimed. */
	struct cumemcap_book b;
	open_book(&b, false);
	ck_assert_int_eq(cumemcap_book_claim(&b, "next"), s_dead);

	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	ck_assert_uint_eq(cumemcap_book_reap(&a, self), 1);
	ck_assert_uint_eq(cumemcap_book_used(&a, 0), 7);
	cumemcap_book_close(&b);
	cumemcap_book_close(&a);
}
END_TEST

/* A dead member's slot whose recorded pid is now a live process (here:
 * this one) is reaped all the same: the lock decides, not the pid. */
START_TEST(book_reap_ignores_a_reused_pid)
{
	struct cumemcap_book a, b;
	open_book(&a, true);
	open_book(&b, false);
	int i = cumemcap_book_claim(&b, "gone");
	ck_assert_int_eq(i, 0);
	atomic_store(&cumemcap_book_slot(&b, 0)->gpu[3].held, 4096);
	cumemcap_book_close(&b); /* dies: its open file closes, its lock goes */
	struct cumemcap_book_slot *s = cumemcap_book_slot(&a, 0);
	ck_assert_uint_eq(atomic_load(&s->state), 1);
	pid_t other = fork_child(); /* a live process of another pid */
	if (other == 0) {
		for (;;)
			pause();
	}
	s->pid = (uint32_t)other;
	ck_assert_int_eq(kill(other, 0), 0);
	ck_assert(!cumemcap_book_alive(&a, 0));
	ck_assert_uint_eq(cumemcap_book_reap(&a, -1), 1);
	ck_assert_uint_eq(atomic_load(&s->state), 0);
	ck_assert_uint_eq(atomic_load(&s->gpu[3].held), 0);
	/* Again with this process's own pid. */
	open_book(&b, false);
	ck_assert_int_eq(cumemcap_book_claim(&b, "gone too"), 0);
	cumemcap_book_close(&b);
	s->pid = (uint32_t)getpid();
	ck_assert_uint_eq(cumemcap_book_reap(&a, -1), 1);
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
	cumemcap_book_close(&a);
}
END_TEST

#define CLAIMERS 64

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Children started together: each waits until the parent closes the
 * write end of the `go` pipe. */
static pid_t racer(const int go[2], int out, void (*body)(int out))
{
	pid_t pid = fork_child();
	if (pid > 0)
		return pid;
	close(go[1]);
	char c;
	if (read(go[0], &c, 1) != 0)
		fail_child(5);
	body(out);
	_exit(0);
}

static void claim_and_hold(int out)
{
	struct cumemcap_book b;
	char w[256];
	int i = -2; /* the book refused */
	if (cumemcap_book_open(&b, path, CUMEMCAP_BOOK_GROUP, "team", CUMEMCAP_BOOK_USER, (gid_t)-1,
			       false, w, sizeof(w)))
		i = cumemcap_book_claim(&b, "racer");
	if (write(out, &i, sizeof(i)) != sizeof(i))
		fail_child(4);
	for (;;)
		pause(); /* keep the slot until killed */
}

START_TEST(book_claim_64_children_at_once)
{
	make_book();
	int go[2], out[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(out), 0);
	pid_t kids[CLAIMERS];
	for (int k = 0; k < CLAIMERS; k++)
		kids[k] = racer(go, out[1], claim_and_hold);
	close(go[0]);
	close(go[1]);
	bool seen[CLAIMERS] = { false };
	for (int k = 0; k < CLAIMERS; k++) {
		int i;
		ck_assert_int_eq(read(out[0], &i, sizeof(i)), sizeof(i));
		ck_assert_msg(i >= 0 && i < CLAIMERS, "slot %d", i);
		ck_assert_msg(!seen[i], "slot %d given twice", i);
		seen[i] = true;
	}
	struct cumemcap_book a;
	open_book(&a, false);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_header(&a)->slots_used), CLAIMERS);
	for (int k = 0; k < CLAIMERS; k++)
		ck_assert(cumemcap_book_alive(&a, (unsigned)k));
	for (int k = 0; k < CLAIMERS; k++) {
		kill(kids[k], SIGKILL);
		waitpid(kids[k], NULL, 0);
	}
	ck_assert_uint_eq(cumemcap_book_reap(&a, -1), CLAIMERS);
	cumemcap_book_close(&a);
}
END_TEST

static void change_limits(int out)
{
	struct cumemcap_book b;
	char w[256];
	if (!cumemcap_book_open(&b, path, CUMEMCAP_BOOK_GROUP, "team", CUMEMCAP_BOOK_USER,
				(gid_t)-1, false, w, sizeof(w)))
		fail_child(2);
	for (int k = 0; k < 20000; k++)
		cumemcap_book_set_limit(&b, 0, (uint64_t)k, 0);
	int done = -1;
	if (write(out, &done, sizeof(done)) != sizeof(done))
		fail_child(4);
	for (;;)
		pause();
}

/* The loader passes a live book while members join (slots_used raised
 * before the slot's state is stored) and limits change (change_seq taken
 * before the entry's seq is stored). */
START_TEST(book_check_passes_a_book_in_use)
{
	struct cumemcap_book a;
	open_book(&a, true);
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_a, "0000:3b:00.0", 1000, 500), 0);
	int go[2], out[2];
	ck_assert_int_eq(pipe(go), 0);
	ck_assert_int_eq(pipe(out), 0);
	ck_assert_int_eq(fcntl(out[0], F_SETFL, O_NONBLOCK), 0);
	pid_t kids[CLAIMERS + 1];
	for (int k = 0; k < CLAIMERS; k++)
		kids[k] = racer(go, out[1], claim_and_hold);
	kids[CLAIMERS] = racer(go, out[1], change_limits);
	close(go[0]);
	close(go[1]);
	unsigned checks = 0, refused_n = 0, reported = 0;
	char first[512] = "";
	double t0 = now_s();
	while (reported < CLAIMERS + 1 && now_s() - t0 < 10) {
		int r;
		while (read(out[0], &r, sizeof(r)) == sizeof(r)) {
			reported++;
			if (r == -2 && refused_n++ == 0)
				snprintf(first, sizeof(first), "a member could not open it");
		}
		checks++;
		if (!cumemcap_book_check(a.map, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, "team", why, sizeof(why)) &&
		    refused_n++ == 0)
			snprintf(first, sizeof(first), "%s", why);
	}
	for (int k = 0; k <= CLAIMERS; k++) {
		kill(kids[k], SIGKILL);
		waitpid(kids[k], NULL, 0);
	}
	ck_assert_msg(refused_n == 0, "%u of %u checks refused the book in use: %s", refused_n, checks, first);
	ck_assert_uint_eq(reported, CLAIMERS + 1);
	cumemcap_book_close(&a);
}
END_TEST

/* ---- GPUs and limits ---- */

START_TEST(book_gpu_find_one_entry_per_uuid)
{
	struct cumemcap_book a;
	open_book(&a, true);
	ck_assert_int_eq(cumemcap_book_gpu_lookup(&a, uuid_a), -1);
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_a, "0000:3b:00.0", 1000, 500), 0);
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_b, "0000:3c:00.0", 2000, CUMEMCAP_BOOK_NONE), 1);
	/* Again: the same entry, which keeps its limit. */
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_a, "0000:99:00.0", 1, 1), 0);
	const struct cumemcap_book_gpu *g = cumemcap_book_gpu(&a, 0);
	ck_assert_uint_eq(atomic_load(&g->state), 2);
	ck_assert_uint_eq(atomic_load(&g->limit), 500);
	ck_assert_uint_eq(g->total, 1000);
	ck_assert_str_eq(g->pci, "0000:3b:00.0");
	ck_assert_int_eq(memcmp(g->uuid, uuid_a, 16), 0);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_gpu(&a, 2)->state), 0);
	char text[48];
	cumemcap_nvml_format_uuid(uuid_a, "GPU-", text);
	ck_assert_str_eq(text, "GPU-fa4ec0da-0000-4000-8000-000000000001");
	/* An entry left half-written (state 1) by a dead adder is taken. */
	atomic_store(&cumemcap_book_gpu(&a, 2)->state, 1);
	unsigned char u[16];
	memcpy(u, uuid_a, 16);
	u[15] = 3;
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, u, NULL, 0, 0), 2);
	/* The table fills at CUMEMCAP_BOOK_GPUS. */
	for (int k = 3; k < CUMEMCAP_BOOK_GPUS; k++) {
		u[15] = (unsigned char)(k + 1);
		ck_assert_int_eq(cumemcap_book_gpu_find(&a, u, "", 0, 0), k);
	}
	u[15] = 0xee;
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, u, "", 0, 0), -1);
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_b, "", 0, 0), 1);
	ck_assert(cumemcap_book_check(a.map, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, "team", why, sizeof(why)));
	cumemcap_book_close(&a);
}
END_TEST

#define ADDERS 16
#define ADDED 24

/* Shared by the adders and the test: the start line and what each got. */
struct adders {
	_Atomic int ready, go;
	int index[ADDERS][ADDED];
};

/* A child that opens the book first, spins until `go`, then (with the
 * others, to the microsecond) adds ADDED UUIDs, keeping the index it got
 * for each. */
static pid_t adder(struct adders *sh, int n)
{
	pid_t pid = fork_child();
	if (pid > 0)
		return pid;
	struct cumemcap_book b;
	char w[256];
	if (!cumemcap_book_open(&b, path, CUMEMCAP_BOOK_GROUP, "team", CUMEMCAP_BOOK_USER,
				(gid_t)-1, false, w, sizeof(w)))
		fail_child(2);
	atomic_fetch_add(&sh->ready, 1);
	while (!atomic_load(&sh->go))
		;
	unsigned char u[16];
	memcpy(u, uuid_a, 16);
	/* Adders start at different UUIDs: some add one UUID at once, some
	 * different ones into the same free entry. */
	for (int m = 0; m < ADDED; m++) {
		int k = (n * 5 + m) % ADDED;
		u[15] = (unsigned char)(0x80 + k);
		sh->index[n][k] = cumemcap_book_gpu_find(&b, u, "0000:01:00.0", 100, 10);
	}
	cumemcap_book_close(&b);
	_exit(0);
}

START_TEST(book_gpu_find_concurrent_adders_one_entry)
{
	/* A fresh book each round: a race lost once is enough. */
	for (int round = 0; round < 4; round++) {
	unlink(path);
	make_book();
	struct adders *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(sh, MAP_FAILED);
	pid_t kids[ADDERS];
	for (int n = 0; n < ADDERS; n++)
		kids[n] = adder(sh, n);
	double t0 = now_s();
	while (atomic_load(&sh->ready) < ADDERS && now_s() - t0 < 10)
		usleep(1000);
	atomic_store(&sh->go, 1);
	for (int n = 0; n < ADDERS; n++) {
		int st;
		ck_assert_int_eq(waitpid(kids[n], &st, 0), kids[n]);
		ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	struct cumemcap_book a;
	open_book(&a, false);
	unsigned ready = 0;
	for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++)
		ready += atomic_load(&cumemcap_book_gpu(&a, g)->state) == 2;
	ck_assert_uint_eq(ready, ADDED);
	for (int k = 0; k < ADDED; k++) {
		int g = sh->index[0][k];
		ck_assert(g >= 0 && g < CUMEMCAP_BOOK_GPUS);
		/* Every adder of one UUID got the same index ... */
		for (int n = 1; n < ADDERS; n++)
			ck_assert_msg(sh->index[n][k] == g, "UUID %d at %d and %d", k, g, sh->index[n][k]);
		/* ... whose entry holds that UUID. */
		ck_assert_msg(cumemcap_book_gpu(&a, (unsigned)g)->uuid[15] == 0x80 + k, "entry %d holds UUID %d, not %d",
			      g, cumemcap_book_gpu(&a, (unsigned)g)->uuid[15] - 0x80, k);
	}
	cumemcap_book_close(&a);
	munmap(sh, sizeof(*sh));
	}
}
END_TEST

START_TEST(book_set_limit_records_changes_in_a_ring)
{
	struct cumemcap_book a;
	open_book(&a, true);
	/* No GPU: nothing changes. */
	ck_assert_uint_eq(cumemcap_book_set_limit(&a, -1, 5, 1), 0);
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_a, "0000:3b:00.0", 1000, 500), 0);
	ck_assert_int_eq(cumemcap_book_gpu_find(&a, uuid_b, "0000:3c:00.0", 1000, CUMEMCAP_BOOK_NONE), 1);
	ck_assert_uint_eq(cumemcap_book_set_limit(&a, 5, 5, 1), 0); /* no such GPU */
	const struct cumemcap_book_header *h = cumemcap_book_header(&a);
	ck_assert_uint_eq(atomic_load(&h->change_seq), 0);

	ck_assert_uint_eq(cumemcap_book_set_limit(&a, 1, 300, 1234), 1);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_gpu(&a, 1)->limit), 300);
	ck_assert_uint_eq(atomic_load(&cumemcap_book_gpu(&a, 0)->limit), 500);
	const struct cumemcap_book_change *c = cumemcap_book_change(&a, 1);
	ck_assert_uint_eq(atomic_load(&c->seq), 1);
	ck_assert_uint_eq(c->uid, 1234);
	ck_assert_int_eq(c->gpu, 1);
	ck_assert_uint_eq(c->old_limit, CUMEMCAP_BOOK_NONE);
	ck_assert_uint_eq(c->new_limit, 300);
	ck_assert_uint_gt(c->time_ns, 0);

	/* Every GPU: one change each. */
	ck_assert_uint_eq(cumemcap_book_set_limit(&a, -1, 400, 42), 2);
	ck_assert_uint_eq(atomic_load(&h->change_seq), 3);
	c = cumemcap_book_change(&a, 2);
	ck_assert_uint_eq(atomic_load(&c->seq), 2);
	ck_assert_int_eq(c->gpu, 0);
	ck_assert_uint_eq(c->old_limit, 500);
	ck_assert_uint_eq(c->new_limit, 400);
	c = cumemcap_book_change(&a, 3);
	ck_assert_int_eq(c->gpu, 1);
	ck_assert_uint_eq(c->old_limit, 300);
	ck_assert_uint_eq(c->uid, 42);

	/* Up to 33: the 33rd overwrites the entry of the first. */
	for (uint64_t seq = 4; seq <= CUMEMCAP_BOOK_CHANGES + 1; seq++)
		ck_assert_uint_eq(cumemcap_book_set_limit(&a, 0, 1000 + seq, 7), 1);
	ck_assert_uint_eq(atomic_load(&h->change_seq), CUMEMCAP_BOOK_CHANGES + 1);
	c = (const struct cumemcap_book_change *)((const char *)a.map + CUMEMCAP_BOOK_CHANGE_OFF) + 1;
	ck_assert_ptr_eq(c, cumemcap_book_change(&a, 1));
	ck_assert_uint_eq(atomic_load(&c->seq), CUMEMCAP_BOOK_CHANGES + 1);
	ck_assert_uint_eq(c->new_limit, 1000 + CUMEMCAP_BOOK_CHANGES + 1);
	ck_assert_uint_eq(c->old_limit, 1000 + CUMEMCAP_BOOK_CHANGES);
	ck_assert_uint_eq(c->uid, 7);
	ck_assert_int_eq(c->gpu, 0);
	/* The second is still there. */
	ck_assert_uint_eq(atomic_load(&cumemcap_book_change(&a, 2)->seq), 2);
	ck_assert_msg(cumemcap_book_check(a.map, CUMEMCAP_BOOK_SIZE, CUMEMCAP_BOOK_GROUP, "team", why, sizeof(why)), "%s",
		      why);
	cumemcap_book_close(&a);
}
END_TEST

START_TEST(book_used_sums_held)
{
	struct cumemcap_book a, b, c;
	open_book(&a, true);
	open_book(&b, false);
	open_book(&c, false);
	ck_assert_uint_eq(cumemcap_book_used(&a, 2), 0);
	ck_assert_int_eq(cumemcap_book_claim(&a, "a"), 0);
	ck_assert_int_eq(cumemcap_book_claim(&b, "b"), 1);
	ck_assert_int_eq(cumemcap_book_claim(&c, "c"), 2);
	atomic_store(&cumemcap_book_slot(&a, 0)->gpu[2].held, 1000);
	atomic_store(&cumemcap_book_slot(&b, 1)->gpu[2].held, 20);
	atomic_store(&cumemcap_book_slot(&c, 2)->gpu[2].held, 3);
	atomic_store(&cumemcap_book_slot(&c, 2)->gpu[1].held, 99);
	ck_assert_uint_eq(cumemcap_book_used(&a, 2), 1023);
	ck_assert_uint_eq(cumemcap_book_used(&b, 1), 99);
	ck_assert_uint_eq(cumemcap_book_used(&c, 0), 0);
	/* Past slots_used nothing counts. */
	atomic_store(&cumemcap_book_slot(&a, 500)->gpu[2].held, 1);
	ck_assert_uint_eq(cumemcap_book_used(&a, 2), 1023);
	/* A sum past 2^64 stays at the top. */
	atomic_store(&cumemcap_book_slot(&b, 1)->gpu[2].held, UINT64_MAX - 10);
	ck_assert_uint_eq(cumemcap_book_used(&a, 2), UINT64_MAX);
	cumemcap_book_release(&b, 1);
	ck_assert_uint_eq(cumemcap_book_used(&a, 2), 1003);
	cumemcap_book_close(&c);
	cumemcap_book_close(&b);
	cumemcap_book_close(&a);
}
END_TEST

static void add(Suite *s, const TTest *t)
{
	cumemcap_test_add(s, t, setup, teardown, 0);
}

TEST_SUITE(book)
{
	Suite *s = suite_create("book");
	add(s, book_create_then_open_shares_the_mapping);
	add(s, book_create_reserves_its_bytes);
	add(s, book_create_sweeps_own_stale_temporaries_only);
	add(s, book_fate_sees_a_cut_and_a_removed_book);
	add(s, book_carry_copies_a_members_figures);
	add(s, book_open_refuses_mode_0644);
	add(s, book_open_refuses_another_owner);
	add(s, book_open_refuses_wrong_size);
	add(s, book_open_refuses_wrong_magic);
	add(s, book_open_refuses_other_version);
	add(s, book_open_refuses_symlink);
	add(s, book_check_refuses_each_field);
	add(s, book_claim_distinct_per_open_file);
	add(s, book_reap_returns_a_killed_members_share);
	add(s, book_reap_ignores_a_reused_pid);
	add(s, book_claim_64_children_at_once);
	add(s, book_check_passes_a_book_in_use);
	add(s, book_gpu_find_one_entry_per_uuid);
	add(s, book_gpu_find_concurrent_adders_one_entry);
	add(s, book_set_limit_records_changes_in_a_ring);
	add(s, book_used_sums_held);
	return s;
}
