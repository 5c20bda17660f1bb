/* logfile: opening one footprint log as its source says (logfile.h), so
 * that nothing another user puts in a shared log directory can hang the
 * report or lead it to a file it should not read. Single-threaded, like
 * the rest of the report; no state of its own. */
#include "logfile.h"

#include "tools/shared-file.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

static const char *file_type(mode_t mode)
{
	return cumemcap_file_kind(mode);
}

FILE *report_log_open(const char *path, enum report_source source, enum report_read *result)
{
	const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;
	bool listed = source == REPORT_LISTED;
	struct stat st;
	*result = REPORT_READ_FAILED;
	int fd = open(path, flags | (listed ? O_NOFOLLOW : 0));
	if (fd < 0 && listed && errno == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		/* In a directory another user may write, their link could lead
		 * anywhere the caller may read (/proc/kmsg): follow only ours.
		 * In a sticky directory nobody else can replace our link. */
		if (st.st_uid != geteuid()) {
			fprintf(stderr, "cumemcap report: %s: skipped: a symbolic link owned by "
					"uid %u, not by you (in a directory, only your own links "
					"are followed)\n",
				path, (unsigned)st.st_uid);
			*result = REPORT_READ_SKIPPED;
			return NULL;
		}
		fd = open(path, flags);
	}
	if (fd < 0) {
		fprintf(stderr, "cumemcap report: %s: cannot open: %s\n", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0) {
		fprintf(stderr, "cumemcap report: %s: cannot stat: %s\n", path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (S_ISDIR(st.st_mode) && !listed) {
		fprintf(stderr, "cumemcap report: %s: is a directory; expected a log file "
				"(JSON Lines written by CUMEMCAP_LOG)\n", path);
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		if (listed) {
			/* A directory's *.jsonl entry that is no file (a
			 * subdirectory, a FIFO): not a log, quietly. */
			*result = REPORT_READ_SKIPPED;
		} else {
			fprintf(stderr, "cumemcap report: %s: %s, not a log file; give a regular "
					"file, or - to read standard input\n",
				path, file_type(st.st_mode));
		}
		close(fd);
		return NULL;
	}
	/* /proc and /sys hold regular files whose reading has effects
	 * (/proc/kmsg takes the kernel's messages): no log lives there. */
	struct statfs fs;
	if (fstatfs(fd, &fs) == 0 && (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC)) {
		fprintf(stderr, "cumemcap report: %s: a file of %s, not a log file\n", path,
			fs.f_type == PROC_SUPER_MAGIC ? "/proc" : "/sys");
		close(fd);
		return NULL;
	}
	FILE *f = fdopen(fd, "r");
	if (!f) {
		fprintf(stderr, "cumemcap report: %s: cannot read: %s\n", path, strerror(errno));
		close(fd);
	}
	return f;
}
