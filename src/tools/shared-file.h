/* shared-file: how the tools open a file in a directory other users may
 * write to (a group's books, a log directory), where a FIFO could hang a
 * reader and a planted link could lead it anywhere: non-blocking,
 * close-on-exec, a final link followed only when asked, and kept only when
 * fstat says it is a regular file. What owner a file must have is the
 * caller's check (it differs by file). Thread safety: no state; errno is
 * the thread's. */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>

enum cumemcap_shared_open {
	CUMEMCAP_SHARED_REGULAR,     /* *fd open on a regular file, *st its fstat */
	CUMEMCAP_SHARED_NO_OPEN,     /* open failed: errno (ELOOP: a final link, not followed) */
	CUMEMCAP_SHARED_NO_STAT,     /* fstat failed: errno */
	CUMEMCAP_SHARED_NOT_REGULAR, /* no regular file: *st says what (cumemcap_file_kind) */
};

/* Open `path` with `access` (O_RDONLY or O_RDWR) as above; follow: a final
 * symbolic link is followed. *fd is -1 unless the result is REGULAR. */
enum cumemcap_shared_open cumemcap_shared_open(const char *path, int access, bool follow, int *fd,
					       struct stat *st);

/* What a file that is no regular file and no link is, for a message:
 * "a FIFO", "a socket", "a directory" or "a device". */
static inline const char *cumemcap_file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISDIR(mode))
		return "a directory";
	return "a device";
}
