/* ofdlock: an open file description lock (F_OFD_SETLK). The kernel drops it
 * when the open file's last descriptor closes, whatever killed the holder,
 * so a lock that can be taken means its holder is gone, across PID
 * namespaces too. Thread safety: a system call, as thread-safe as fcntl. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/types.h>

/* Lock (F_RDLCK, F_WRLCK) or unlock (F_UNLCK) `len` bytes of fd from `at`
 * (len 0: to the end, however it grows), waiting when `wait`. 0, or -1
 * with errno (EAGAIN: held). */
static inline int cumemcap_ofd_lock(int fd, off_t at, off_t len, short type, bool wait)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = at, .l_len = len, .l_pid = 0 };
	int r;
	do
		r = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
	while (r != 0 && errno == EINTR);
	return r;
}
