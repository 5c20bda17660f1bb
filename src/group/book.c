/* book: see book.h; and the table of the books mapped, for a SIGBUS in
 * one of them. Thread safety: as book.h says; the table is atomics only,
 * and cumemcap_mapped_fault takes no lock and makes one system call. */
#include "group/book.h"
#include "platform/msg.h"
#include "platform/ofdlock.h"
#include "platform/userdb.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct cumemcap_book_header) <= CUMEMCAP_BOOK_HEADER_BYTES, "header fits its page");
_Static_assert(sizeof(struct cumemcap_book_gpu) % 8 == 0, "GPU entries stay aligned");
_Static_assert(sizeof(struct cumemcap_book_slot) % 8 == 0, "slots stay aligned");
_Static_assert(CUMEMCAP_BOOK_SLOT_OFF % 4096 == 0, "slots start on a page");
_Static_assert(CUMEMCAP_BOOK_SIZE % 4096 == 0, "the file is whole pages");

/* The byte whose OFD lock owns slot i (past the data: a lock needs none
 * under it); the one after the last slot's serializes adding a GPU. */
#define LOCK_BYTE(i) ((off_t)CUMEMCAP_BOOK_SIZE + (off_t)(i))

/* ---- the mapped books ---------------------------------------------------------------------- */

/* The address of each book mapped; only a tool opens more than these. */
#define MAPPED_MAX 64
static struct {
	_Atomic(uintptr_t) base;
	_Atomic bool cut;
} mapped[MAPPED_MAX];

/* Replace `from` (0: free) by `to` in the first slot holding it; that slot or -1. */
static int mapped_swap(const void *from, const void *to)
{
	for (int i = 0; i < MAPPED_MAX; i++) {
		uintptr_t was = (uintptr_t)from;
		if (atomic_compare_exchange_strong(&mapped[i].base, &was, (uintptr_t)to))
			return i;
	}
	return -1;
}

bool cumemcap_mapped_fault(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	for (size_t i = 0; i < MAPPED_MAX; i++) {
		uintptr_t base = atomic_load(&mapped[i].base);
		if (!base || a < base || a - base >= CUMEMCAP_BOOK_SIZE)
			continue;
		atomic_store(&mapped[i].cut, true);
		/* mmap is a plain system call: safe in a signal handler. */
		return mmap((void *)base, CUMEMCAP_BOOK_SIZE, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED;
	}
	return false;
}

/* ---- names and the loader ------------------------------------------------------------------ */

bool cumemcap_book_name_ok(const char *name)
{
	size_t n = strlen(name);
	const char *ok = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
	return n > 0 && n <= CUMEMCAP_BOOK_NAME_MAX && name[0] != '.' && name[0] != '-' &&
	       strspn(name, ok) == n;
}

bool cumemcap_book_path(char *out, size_t len, const char *dir, enum cumemcap_book_kind kind, const char *name)
{
	int n = snprintf(out, len, "%s%s%s.%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/",
			 kind == CUMEMCAP_BOOK_GROUP ? "cumemcap-group" : "cumemcap-node", name);
	return n > 0 && (size_t)n < len;
}

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), false)

bool cumemcap_book_check(const void *data, size_t len, enum cumemcap_book_kind kind, const char *name,
			 char *why, size_t whylen)
{
	if (len < sizeof(struct cumemcap_book_header))
		return WHY("%zu bytes: too short for a cumemcap book", len);
	/* Copied: another process may write the live book, and a value must
	 * not change between its check and its use. */
	struct cumemcap_book_header h;
	memcpy(&h, data, sizeof(h));
	const struct cumemcap_book view = { .fd = -1, .map = (void *)data };
	const struct cumemcap_book_header *live = data;
	if (h.magic != CUMEMCAP_BOOK_MAGIC)
		return WHY("not a cumemcap book (wrong magic number)");
	if (h.version != CUMEMCAP_BOOK_VERSION)
		return WHY("book version %u; this cumemcap reads version %u (members of one group must run "
			   "the same cumemcap)", h.version, CUMEMCAP_BOOK_VERSION);
	if (h.header_size != CUMEMCAP_BOOK_HEADER_BYTES || h.gpu_size != sizeof(struct cumemcap_book_gpu) ||
	    h.change_size != sizeof(struct cumemcap_book_change) || h.slot_size != sizeof(struct cumemcap_book_slot) ||
	    h.gpus != CUMEMCAP_BOOK_GPUS || h.changes != CUMEMCAP_BOOK_CHANGES || h.slots != CUMEMCAP_BOOK_SLOTS)
		return WHY("its layout is not this cumemcap's (made by another build of version %u)", h.version);
	if (h.size != CUMEMCAP_BOOK_SIZE || len != CUMEMCAP_BOOK_SIZE)
		return WHY("%zu bytes, the header says %llu, a book has %zu", len, (unsigned long long)h.size,
			   (size_t)CUMEMCAP_BOOK_SIZE);
	if (h.kind != (uint32_t)kind)
		return WHY("a %s book, not a %s", h.kind == CUMEMCAP_BOOK_GROUP ? "group" : h.kind == CUMEMCAP_BOOK_REGISTRY ? "registry" : "corrupt",
			   kind == CUMEMCAP_BOOK_GROUP ? "group" : "registry");
	if (!memchr(h.name, '\0', sizeof(h.name)) ||
	    (kind == CUMEMCAP_BOOK_GROUP && !cumemcap_book_name_ok(h.name)))
		return WHY("corrupt: the name in its header is not a group name");
	if (name && strcmp(h.name, name) != 0)
		return WHY("it is the book of \"%s\", not \"%s\"", h.name, name);
	uint32_t used = atomic_load_explicit(&live->slots_used, memory_order_relaxed);
	if (used > CUMEMCAP_BOOK_SLOTS)
		return WHY("corrupt: %u slots in use of %u", used, CUMEMCAP_BOOK_SLOTS);
	if (h.tight > 1)
		return WHY("corrupt: its tight flag is %u", (unsigned)h.tight);
	for (unsigned i = 0; i < CUMEMCAP_BOOK_GPUS; i++) {
		struct cumemcap_book_gpu g;
		memcpy(&g, cumemcap_book_gpu(&view, i), sizeof(g));
		if (g.state > 2)
			return WHY("corrupt: GPU entry %u has state %u", i, (unsigned)g.state);
		if (g.state == 2 && !memchr(g.pci, '\0', sizeof(g.pci)))
			return WHY("corrupt: GPU entry %u has no PCI id", i);
	}
	/* slots_used and change_seq grow before a slot or change entry uses
	 * them: one ahead of the header's copy is checked again against the
	 * live header, not refused as corrupt. */
	for (unsigned i = 0; i < CUMEMCAP_BOOK_CHANGES; i++) {
		const struct cumemcap_book_change *c = cumemcap_book_change(&view, i);
		uint64_t seq = atomic_load(&c->seq);
		int32_t gpu = c->gpu;
		if (seq && (seq % CUMEMCAP_BOOK_CHANGES != i ||
			    (seq > h.change_seq && seq > atomic_load(&live->change_seq))))
			return WHY("corrupt: change entry %u has seq %llu", i, (unsigned long long)seq);
		/* Readers index the GPU table with it. */
		if (seq && (gpu < 0 || gpu >= CUMEMCAP_BOOK_GPUS))
			return WHY("corrupt: change entry %u names GPU %d", i, (int)gpu);
	}
	for (unsigned i = 0; i < CUMEMCAP_BOOK_SLOTS; i++) {
		const struct cumemcap_book_slot *s = cumemcap_book_slot(&view, i);
		uint32_t state = atomic_load(&s->state);
		if (state > 1)
			return WHY("corrupt: slot %u has state %u", i, state);
		if (state == 1 && i >= used && i >= atomic_load(&live->slots_used))
			return WHY("corrupt: slot %u is live past the %u in use", i, used);
	}
	return true;
}

/* ---- creating and opening ------------------------------------------------------------------ */

uint64_t cumemcap_book_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Write n bytes of buf at `at`: 0 or an errno. */
static int write_all(int fd, const void *buf, size_t n, off_t at)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, buf, n, at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : ENOSPC;
		buf = (const char *)buf + w;
		n -= (size_t)w;
		at += w;
	}
	return 0;
}

/* Write the header with pwrite (no mapping: nothing can fault). */
static int write_header(int fd, enum cumemcap_book_kind kind, const char *name)
{
	_Alignas(64) unsigned char page[CUMEMCAP_BOOK_HEADER_BYTES] = { 0 };
	struct cumemcap_book_header *h = (struct cumemcap_book_header *)page;
	h->magic = CUMEMCAP_BOOK_MAGIC;
	h->version = CUMEMCAP_BOOK_VERSION;
	h->kind = kind;
	h->size = CUMEMCAP_BOOK_SIZE;
	h->header_size = CUMEMCAP_BOOK_HEADER_BYTES;
	h->gpu_size = sizeof(struct cumemcap_book_gpu);
	h->change_size = sizeof(struct cumemcap_book_change);
	h->slot_size = sizeof(struct cumemcap_book_slot);
	h->gpus = CUMEMCAP_BOOK_GPUS;
	h->changes = CUMEMCAP_BOOK_CHANGES;
	h->slots = CUMEMCAP_BOOK_SLOTS;
	h->creator_uid = (uint32_t)geteuid();
	cumemcap_copy(h->name, sizeof(h->name), name);
	return write_all(fd, page, sizeof(page), 0);
}

/* The file's owner, group and mode as `access` asks (book.h); the owner's
 * membership too: a set-group-ID directory gives anyone's file its group. */
static bool check_file(int fd, enum cumemcap_book_kind kind, enum cumemcap_book_access access,
		       gid_t gid, char *why, size_t whylen)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return WHY("cannot stat it: %s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return WHY("not a regular file");
	if (access == CUMEMCAP_BOOK_USER) {
		if (st.st_uid != geteuid())
			return WHY("owned by uid %u, not by this process's uid %u%s", (unsigned)st.st_uid,
				   (unsigned)geteuid(),
				   kind == CUMEMCAP_BOOK_GROUP ? " (CUMEMCAP_GROUP_ACCESS=gid:GROUP shares a book by group)" : "");
		if (st.st_mode & 077)
			return WHY("mode %04o; a user's book must be 0600", (unsigned)(st.st_mode & 07777));
	} else {
		if (gid != (gid_t)-1 && st.st_gid != gid)
			return WHY("its group is %u, not %u as CUMEMCAP_GROUP_ACCESS names", (unsigned)st.st_gid,
				   (unsigned)gid);
		gid_t groups[256];
		int n = getgroups(256, groups), i = 0;
		while (i < n && groups[i] != st.st_gid)
			i++;
		if (st.st_gid != getegid() && i >= n)
			return WHY("its group %u is none of this process's groups", (unsigned)st.st_gid);
		if ((st.st_mode & 07777) != 0660)
			return WHY("mode %04o; a group's shared book must be 0660", (unsigned)(st.st_mode & 07777));
		/* Unknown to the user database (a container's uid or fsGroup
		 * its image does not list): taken as a member. */
		if (st.st_uid != geteuid() && cumemcap_userdb_member(st.st_uid, st.st_gid) == 0)
			return WHY("owned by uid %u, who is not a member of its group %u", (unsigned)st.st_uid,
				   (unsigned)st.st_gid);
	}
	if ((uint64_t)st.st_size != CUMEMCAP_BOOK_SIZE)
		return WHY("%llu bytes, a book has %zu (corrupt, or made by another cumemcap)",
			   (unsigned long long)st.st_size, (size_t)CUMEMCAP_BOOK_SIZE);
	return true;
}

/* Reserve the book's bytes (a page of a sparse file that a full tmpfs cannot
 * back is a SIGBUS at its first touch); without fallocate(2), write zero
 * blocks: posix_fallocate's stand-in writes a byte per block. 0 or an errno. */
static int reserve(int fd)
{
	if (fallocate(fd, 0, 0, CUMEMCAP_BOOK_SIZE) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return errno;
	static const char zero[4096];
	int err = 0;
	for (off_t at = 0; at < (off_t)CUMEMCAP_BOOK_SIZE && !err; at += (off_t)sizeof(zero))
		err = write_all(fd, zero, sizeof(zero), at);
	return err;
}

/* Temporaries named where O_TMPFILE fails (no book has a dot name), and
 * the age past which one was left by a process that died making a book. */
#define TEMP_PREFIX ".cumemcap-new."
#define TEMP_STALE_S 600

/* Remove the caller's own stale temporaries (regular files) from dir, and
 * nothing else: in a sticky directory such as /dev/shm no other user can
 * swap one of ours for theirs between the check and the unlink. */
static void sweep_temporaries(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	time_t now = time(NULL);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, TEMP_PREFIX, sizeof(TEMP_PREFIX) - 1) != 0)
			continue;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid() || st.st_mtime > now - TEMP_STALE_S)
			continue;
		unlinkat(dirfd, e->d_name, 0);
	}
	closedir(d);
}

/* Build a new book in a file nobody else can open or name and link it to
 * path: an O_TMPFILE linked through /proc/self/fd (AT_EMPTY_PATH would
 * need CAP_DAC_READ_SEARCH), or without O_TMPFILE or /proc (a chroot), one
 * named by 128 random bits, made O_EXCL and unlinked once linked. 1: made
 * (*fdp is its), 0: someone else made it first, -1: error. */
static int create_book(const char *path, enum cumemcap_book_kind kind, const char *name,
		       enum cumemcap_book_access access, gid_t gid, int *fdp, char *why, size_t whylen)
{
	char dir[1024];
	const char *slash = strrchr(path, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
	const char *base = slash ? slash + 1 : path;
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		snprintf(why, whylen, "cannot open its directory: %s", strerror(errno));
		return -1;
	}
	sweep_temporaries(dirfd);
	mode_t mode = access == CUMEMCAP_BOOK_GID ? 0660 : 0600;
	char tmp[64] = "", self[64];
	int err = 0, fd = -1;
	for (int named = 0; named < 2 && fd < 0; named++) {
		if (!named) {
			fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, mode);
			if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL))
				continue;
		}
		for (int attempt = 0; named && fd < 0 && attempt < 8; attempt++) {
			uint64_t r[2];
			if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
				break;
			snprintf(tmp, sizeof(tmp), TEMP_PREFIX "%016llx%016llx",
				 (unsigned long long)r[0], (unsigned long long)r[1]);
			fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				    mode);
			if (fd < 0 && errno != EEXIST)
				break;
		}
		if (fd < 0)
			break;
		if (access == CUMEMCAP_BOOK_GID && fchown(fd, (uid_t)-1, gid) != 0)
			err = errno;
		if (!err && fchmod(fd, mode) != 0)
			err = errno;
		if (!err)
			err = reserve(fd);
		if (!err)
			err = write_header(fd, kind, name);
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		if (!err && (tmp[0] ? linkat(dirfd, tmp, dirfd, base, 0)
				    : linkat(AT_FDCWD, self, dirfd, base, AT_SYMLINK_FOLLOW)) != 0)
			err = errno;
		if (tmp[0])
			unlinkat(dirfd, tmp, 0);
		if (err == ENOENT && !tmp[0] && faccessat(AT_FDCWD, "/proc/self/fd", F_OK, 0) != 0) {
			close(fd);
			fd = -1;
			err = 0;
		}
	}
	int fail = fd < 0 ? errno : err;
	close(dirfd);
	if (fd >= 0 && err)
		close(fd);
	if (fd < 0 || (err && err != EEXIST)) {
		snprintf(why, whylen,
			 fd < 0 ? "cannot create it in its directory: %s" : "cannot create it: %s",
			 strerror(fail));
		return -1;
	}
	*fdp = fd;
	return err ? 0 : 1;
}

bool cumemcap_book_open(struct cumemcap_book *b, const char *path, enum cumemcap_book_kind kind,
			const char *name, enum cumemcap_book_access access, gid_t gid, bool create,
			char *why, size_t whylen)
{
	b->fd = -1;
	b->map = NULL;
	cumemcap_copy(b->path, sizeof(b->path), path);
	for (int attempt = 0; attempt < 4; attempt++) {
		int fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && create) {
			if (access == CUMEMCAP_BOOK_GID && gid == (gid_t)-1)
				return WHY("a book shared by group is made only for a named group");
			int made = create_book(path, kind, name, access, gid, &fd, why, whylen);
			if (made < 0)
				return false;
			if (made == 0)
				continue; /* made by another member meanwhile: open theirs */
		} else if (fd < 0) {
			if (errno == ELOOP)
				return WHY("a symbolic link; a book must be a regular file");
			return WHY("cannot open it: %s", strerror(errno));
		}
		b->fd = fd;
		if (!check_file(fd, kind, access, gid, why, whylen))
			goto fail;
		void *map = mmap(NULL, CUMEMCAP_BOOK_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			snprintf(why, whylen, "cannot map it: %s", strerror(errno));
			goto fail;
		}
		b->map = map;
		mapped_swap(NULL, map);
		if (cumemcap_book_check(map, CUMEMCAP_BOOK_SIZE, kind, name, why, whylen))
			return true;
		goto fail;
	}
	return WHY("it kept appearing and vanishing while it was opened");
fail:
	cumemcap_book_close(b);
	return false;
}

void cumemcap_book_close(struct cumemcap_book *b)
{
	if (b->map) {
		int i = mapped_swap(b->map, NULL);
		if (i >= 0)
			atomic_store(&mapped[i].cut, false); /* a free slot is not cut */
		munmap(b->map, CUMEMCAP_BOOK_SIZE);
	}
	if (b->fd >= 0)
		close(b->fd);
	b->map = NULL;
	b->fd = -1;
}

/* ---- slots ------------------------------------------------------------------------------- */

void cumemcap_book_wake(_Atomic uint32_t *word)
{
	atomic_fetch_add(word, 1);
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Free slot s, waking the waiters when it held anything; its lock held. */
static void empty_slot(struct cumemcap_book *b, struct cumemcap_book_slot *s)
{
	bool held = false;
	for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
		if (atomic_exchange(&s->gpu[g].held, 0))
			held = true;
		atomic_store(&s->gpu[g].waiting, 0);
		atomic_store(&s->gpu[g].ordinal, -1);
	}
	atomic_store(&s->state, 0);
	if (held)
		cumemcap_book_wake(&cumemcap_book_header(b)->wake);
}

int cumemcap_book_claim(struct cumemcap_book *b, const char *program)
{
	struct cumemcap_book_header *h = cumemcap_book_header(b);
	for (unsigned i = 0; i < CUMEMCAP_BOOK_SLOTS; i++) {
		if (cumemcap_ofd_lock(b->fd, LOCK_BYTE(i), 1, F_WRLCK, false) != 0)
			continue; /* a live member's, or being claimed */
		struct cumemcap_book_slot *s = cumemcap_book_slot(b, i);
		if (atomic_load(&s->state) == 1)
			empty_slot(b, s); /* its owner died */
		s->pid = (uint32_t)getpid();
		s->uid = (uint32_t)geteuid();
		s->joined_ns = cumemcap_book_now_ns();
		atomic_store(&s->published_ns, 0);
		cumemcap_copy(s->program, sizeof(s->program), program ? program : "");
		for (unsigned g = 0; g < CUMEMCAP_BOOK_GPUS; g++) {
			struct cumemcap_book_figs *f = &s->gpu[g];
			atomic_store(&f->limit, CUMEMCAP_BOOK_NONE);
			atomic_store(&f->live, 0);
			atomic_store(&f->pooled, 0);
			atomic_store(&f->reserved, 0);
			atomic_store(&f->footprint, 0);
			atomic_store(&f->refusals, 0);
			atomic_store(&f->waits, 0);
			atomic_store(&f->waiting, 0);
			atomic_store(&f->ordinal, -1); /* until the member attaches the GPU */
		}
		uint32_t used = atomic_load(&h->slots_used);
		while (used < i + 1 && !atomic_compare_exchange_weak(&h->slots_used, &used, i + 1))
			;
		atomic_store(&s->state, 1);
		return (int)i;
	}
	return -1;
}

void cumemcap_book_release(struct cumemcap_book *b, int i)
{
	if (i < 0 || i >= CUMEMCAP_BOOK_SLOTS)
		return;
	empty_slot(b, cumemcap_book_slot(b, (unsigned)i));
	cumemcap_ofd_lock(b->fd, LOCK_BYTE(i), 1, F_UNLCK, false);
}

bool cumemcap_book_alive(const struct cumemcap_book *b, unsigned i)
{
	if (i >= CUMEMCAP_BOOK_SLOTS || atomic_load(&cumemcap_book_slot(b, i)->state) != 1)
		return false;
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LOCK_BYTE(i), .l_len = 1 };
	if (fcntl(b->fd, F_OFD_GETLK, &fl) != 0)
		return true; /* cannot tell: count it as alive */
	return fl.l_type != F_UNLCK;
}

unsigned cumemcap_book_reap(struct cumemcap_book *b, int self)
{
	struct cumemcap_book_header *h = cumemcap_book_header(b);
	uint32_t used = atomic_load(&h->slots_used);
	unsigned reaped = 0;
	for (unsigned i = 0; i < used && i < CUMEMCAP_BOOK_SLOTS; i++) {
		struct cumemcap_book_slot *s = cumemcap_book_slot(b, i);
		if ((int)i == self || atomic_load(&s->state) != 1)
			continue;
		if (cumemcap_ofd_lock(b->fd, LOCK_BYTE(i), 1, F_WRLCK, false) != 0)
			continue; /* alive */
		if (atomic_load(&s->state) == 1) {
			empty_slot(b, s);
			reaped++;
		}
		cumemcap_ofd_lock(b->fd, LOCK_BYTE(i), 1, F_UNLCK, false);
	}
	return reaped;
}

/* ---- GPUs and limits ---------------------------------------------------------------------- */

int cumemcap_book_gpu_lookup(const struct cumemcap_book *b, const unsigned char uuid[16])
{
	for (unsigned i = 0; i < CUMEMCAP_BOOK_GPUS; i++) {
		struct cumemcap_book_gpu *g = cumemcap_book_gpu(b, i);
		if (atomic_load(&g->state) == 2 && memcmp(g->uuid, uuid, 16) == 0)
			return (int)i;
	}
	return -1;
}

int cumemcap_book_gpu_find(struct cumemcap_book *b, const unsigned char uuid[16], const char *pci,
			   uint64_t total, uint64_t limit)
{
	int found = cumemcap_book_gpu_lookup(b, uuid);
	if (found >= 0)
		return found;
	/* Serialized by the table's lock byte: one UUID gets one entry. */
	off_t table = LOCK_BYTE(CUMEMCAP_BOOK_SLOTS);
	if (cumemcap_ofd_lock(b->fd, table, 1, F_WRLCK, true) != 0)
		return -1;
	found = cumemcap_book_gpu_lookup(b, uuid);
	for (unsigned i = 0; found < 0 && i < CUMEMCAP_BOOK_GPUS; i++) {
		struct cumemcap_book_gpu *g = cumemcap_book_gpu(b, i);
		if (atomic_load(&g->state) == 2)
			continue;
		/* 0, or 1 left by an adder that died holding the lock. */
		atomic_store(&g->state, 1);
		memcpy(g->uuid, uuid, 16);
		memset(g->pci, 0, sizeof(g->pci));
		cumemcap_copy(g->pci, sizeof(g->pci), pci ? pci : "");
		g->total = total;
		atomic_store(&g->limit, limit);
		atomic_store(&g->state, 2);
		found = (int)i;
	}
	cumemcap_ofd_lock(b->fd, table, 1, F_UNLCK, false);
	return found;
}

uint64_t cumemcap_book_used(const struct cumemcap_book *b, unsigned g)
{
	uint32_t used = atomic_load(&cumemcap_book_header(b)->slots_used);
	uint64_t sum = 0;
	for (unsigned i = 0; i < used && i < CUMEMCAP_BOOK_SLOTS; i++) {
		uint64_t v = atomic_load(&cumemcap_book_slot(b, i)->gpu[g].held);
		sum = sum + v < sum ? UINT64_MAX : sum + v;
	}
	return sum;
}

unsigned cumemcap_book_set_limit(struct cumemcap_book *b, int g, uint64_t limit, uid_t uid)
{
	struct cumemcap_book_header *h = cumemcap_book_header(b);
	unsigned changed = 0;
	for (unsigned i = 0; i < CUMEMCAP_BOOK_GPUS; i++) {
		struct cumemcap_book_gpu *e = cumemcap_book_gpu(b, i);
		if ((g >= 0 && (unsigned)g != i) || atomic_load(&e->state) != 2)
			continue;
		uint64_t old = atomic_exchange(&e->limit, limit);
		uint64_t seq = atomic_fetch_add(&h->change_seq, 1) + 1;
		struct cumemcap_book_change *c = cumemcap_book_change(b, seq);
		atomic_store(&c->seq, 0);
		c->time_ns = cumemcap_book_now_ns();
		c->uid = (uint32_t)uid;
		c->gpu = (int32_t)i;
		c->old_limit = old;
		c->new_limit = limit;
		atomic_store(&c->seq, seq);
		changed++;
	}
	if (changed) /* waiters recheck against the new limit */
		cumemcap_book_wake(&h->wake);
	return changed;
}

/* ---- a book under its members ------------------------------------------------------------- */

enum cumemcap_book_fate cumemcap_book_fate(const struct cumemcap_book *b, uint64_t *size)
{
	struct stat st;
	if (fstat(b->fd, &st) != 0)
		return CUMEMCAP_BOOK_SOUND; /* cannot tell: as it was */
	*size = (uint64_t)st.st_size;
	int m = mapped_swap(b->map, b->map);
	if (*size != CUMEMCAP_BOOK_SIZE || (m >= 0 && atomic_load(&mapped[m].cut)))
		return CUMEMCAP_BOOK_CUT; /* cut, even if since restored: the mapping is private now */
	return st.st_nlink == 0 ? CUMEMCAP_BOOK_REMOVED : CUMEMCAP_BOOK_SOUND;
}

void cumemcap_book_carry(const struct cumemcap_book *from, unsigned from_slot, unsigned from_gpu,
			 struct cumemcap_book *to, unsigned to_slot, unsigned to_gpu)
{
	struct cumemcap_book_figs *f = &cumemcap_book_slot(from, from_slot)->gpu[from_gpu];
	struct cumemcap_book_figs *t = &cumemcap_book_slot(to, to_slot)->gpu[to_gpu];
	atomic_store(&t->ordinal, atomic_load(&f->ordinal));
	atomic_store(&t->limit, atomic_load(&f->limit));
	atomic_store(&t->waiting, atomic_load(&f->waiting));
	atomic_store(&t->held, atomic_load(&f->held));
}
