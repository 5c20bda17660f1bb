/* shared-file: see shared-file.h, which also says how it is thread-safe. */
#include "tools/shared-file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

enum cumemcap_shared_open cumemcap_shared_open(const char *path, int access, bool follow, int *fd,
					       struct stat *st)
{
	*fd = open(path, access | O_NONBLOCK | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	if (*fd < 0)
		return CUMEMCAP_SHARED_NO_OPEN;
	enum cumemcap_shared_open r = CUMEMCAP_SHARED_REGULAR;
	if (fstat(*fd, st) != 0)
		r = CUMEMCAP_SHARED_NO_STAT;
	else if (!S_ISREG(st->st_mode))
		r = CUMEMCAP_SHARED_NOT_REGULAR;
	if (r != CUMEMCAP_SHARED_REGULAR) {
		int saved = errno;
		close(*fd);
		*fd = -1;
		errno = saved;
	}
	return r;
}
