/* reader: how the commands read the books in a shared directory, where
 * any user may plant a file under a book's name (/dev/shm is sticky and
 * world-writable).
 *
 * A file is opened O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC (a FIFO or a device
 * cannot block the open, a link is not followed) and refused unless
 * fstat() says it is a regular file of a book's size whose owner and mode
 * are ones a member would have used:
 *   cumemcap-node.UID    owned by UID, mode 0600 (no bit for group or others);
 *   cumemcap-group.NAME  no bit for others (0600, or 0660 when shared by group).
 * A book is then read by copying it (pread into a private buffer) and
 * checked with cumemcap_book_check on the copy, its header's name against
 * the file's: the copy cannot change under the reader, and a book that is
 * truncated meanwhile is a short read, not a SIGBUS. Only reaping maps the
 * file, under a SIGBUS guard (gtool_copy_reap).
 *
 * Thread safety: single-threaded (gtool.h); gtool_copy_reap installs a
 * SIGBUS handler for its duration. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "group/book.h"

/* A book read by copying. `book.map` is the private copy (malloc()ed,
 * CUMEMCAP_BOOK_SIZE bytes; every inline reader of book.h works on it)
 * and `book.fd` the open file, whose slot locks say who is alive
 * (cumemcap_book_alive). */
struct gtool_copy {
	struct cumemcap_book book;
	bool writable; /* opened for writing: gtool_copy_reap may return dead members' shares */
};

/* Open and copy the book of `kind` named `name` (a group's name, a uid's
 * digits) in dir; `try_write`: open it for writing when the caller may.
 * False with one line in `why` (the caller names the file), c->book.fd
 * -1 and nothing to close. */
bool gtool_copy_read(struct gtool_copy *c, const char *dir, enum cumemcap_book_kind kind, const char *name,
		     bool try_write, char *why, size_t whylen);

void gtool_copy_close(struct gtool_copy *c);

/* Return the shares of the members that died (cumemcap_book_reap) through
 * a shared mapping of the open file. A file truncated meanwhile by its
 * owner raises SIGBUS in the mapping: it is caught, nothing more is done
 * to that book, and false is returned. */
bool gtool_copy_reap(struct gtool_copy *c);
