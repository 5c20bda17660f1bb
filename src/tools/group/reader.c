/* reader: see reader.h (opening and copying the books of a shared
 * directory). Thread safety: single-threaded, as reader.h says. */
#include "tools/group/reader.h"

#include "tools/shared-file.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), false)

/* The owner and mode a member would have given the file (book.c's
 * check_file for members): a registry is its uid's alone; a group's book
 * is shared with nobody outside its owner and, at most, its group. */
static bool owner_ok(const struct stat *st, enum cumemcap_book_kind kind, const char *name, char *why,
		     size_t whylen)
{
	unsigned mode = (unsigned)(st->st_mode & 07777);
	if (kind == CUMEMCAP_BOOK_REGISTRY) {
		char *end;
		errno = 0;
		unsigned long uid = strtoul(name, &end, 10);
		if (errno || *end || end == name || uid != (unsigned long)st->st_uid)
			return WHY("owned by uid %u, not by uid %s whose registry its name says it is",
				   (unsigned)st->st_uid, name);
		if (mode & 077)
			return WHY("mode %04o; a user's registry is 0600", mode);
		return true;
	}
	if (mode & 007)
		return WHY("mode %04o: open to every user; a group's book is 0600, or 0660 when shared by group",
			   mode);
	return true;
}

bool gtool_copy_read(struct gtool_copy *c, const char *dir, enum cumemcap_book_kind kind, const char *name,
		     bool try_write, char *why, size_t whylen)
{
	memset(c, 0, sizeof(*c));
	c->book.fd = -1;
	if (!cumemcap_book_path(c->book.path, sizeof(c->book.path), dir, kind, name))
		return WHY("its path is too long");
	/* For writing when allowed and asked, else for reading. */
	int fd;
	struct stat st;
	enum cumemcap_shared_open r = CUMEMCAP_SHARED_NO_OPEN;
	if (try_write)
		r = cumemcap_shared_open(c->book.path, O_RDWR, false, &fd, &st);
	c->writable = r == CUMEMCAP_SHARED_REGULAR;
	if (r == CUMEMCAP_SHARED_NO_OPEN)
		r = cumemcap_shared_open(c->book.path, O_RDONLY, false, &fd, &st);
	if (r == CUMEMCAP_SHARED_NO_OPEN && errno == ELOOP)
		return WHY("a symbolic link; a book is a regular file");
	if (r == CUMEMCAP_SHARED_NO_OPEN)
		return WHY("cannot open it: %s", strerror(errno));
	if (r == CUMEMCAP_SHARED_NO_STAT)
		return WHY("cannot stat it: %s", strerror(errno));
	if (r == CUMEMCAP_SHARED_NOT_REGULAR)
		return WHY("not a regular file (%s)", cumemcap_file_kind(st.st_mode));
	size_t got = 0;
	char *buf = NULL;
	if (!owner_ok(&st, kind, name, why, whylen))
		goto fail;
	if ((uint64_t)st.st_size != CUMEMCAP_BOOK_SIZE) {
		snprintf(why, whylen, "%llu bytes, a book has %zu (corrupt, or made by another cumemcap)",
			 (unsigned long long)st.st_size, (size_t)CUMEMCAP_BOOK_SIZE);
		goto fail;
	}
	buf = malloc(CUMEMCAP_BOOK_SIZE);
	if (!buf) {
		snprintf(why, whylen, "out of memory for a copy of it");
		goto fail;
	}
	while (got < CUMEMCAP_BOOK_SIZE) {
		ssize_t n = pread(fd, buf + got, CUMEMCAP_BOOK_SIZE - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, whylen, "cannot read it: %s", strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	/* A short copy: its owner truncated it while it was read. The check
	 * refuses it by its length. */
	if (!cumemcap_book_check(buf, got, kind, name, why, whylen))
		goto fail;
	c->book.fd = fd;
	c->book.map = buf;
	return true;
fail:
	free(buf);
	close(fd);
	c->writable = false;
	return false;
}

void gtool_copy_close(struct gtool_copy *c)
{
	free(c->book.map);
	c->book.map = NULL;
	if (c->book.fd >= 0)
		close(c->book.fd);
	c->book.fd = -1;
}

/* ---- reaping through a mapping ---------------------------------------------------------------- */

static sigjmp_buf bus_jump;

static void on_sigbus(int sig)
{
	(void)sig;
	siglongjmp(bus_jump, 1);
}

bool gtool_copy_reap(struct gtool_copy *c)
{
	if (!c->writable || c->book.fd < 0)
		return false;
	void *map = mmap(NULL, CUMEMCAP_BOOK_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, c->book.fd, 0);
	if (map == MAP_FAILED)
		return false;
	/* cumemcap_book_reap trusts no figure of the mapping (it bounds
	 * slots_used and reads states and locks only), so the live file
	 * needs no second check; only its length can change under it. */
	struct cumemcap_book live = { .fd = c->book.fd, .map = map };
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &old);
	volatile bool ok = false;
	if (sigsetjmp(bus_jump, 1) == 0) {
		cumemcap_book_reap(&live, -1);
		ok = true;
	}
	sigaction(SIGBUS, &old, NULL);
	munmap(map, CUMEMCAP_BOOK_SIZE);
	return ok;
}
