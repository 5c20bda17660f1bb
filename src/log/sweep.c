/* log/sweep: who owns a metrics file, and the files of dead writers.
 *
 * Owns the companion of each metrics file: `.NAME.cumemcap-lock` next to
 * NAME (node_exporter's textfile collector reads only *.prom, and a name
 * starting with '.' is not one), created O_EXCL and held with an OFD write
 * lock (F_OFD_SETLKW) for the writer's whole life; its content, written
 * once the lock is held, is SWEEP_MAGIC. A process killed with SIGKILL
 * (the OOM killer's signal) cannot remove its NAME, but the kernel drops
 * its lock: whoever can then take a read lock on the companion knows its
 * writer is gone, whatever PID namespace it ran in (pods sharing a hostPath
 * directory do not share pid numbers, so "is that pid alive" is no test).
 *
 * A sweep (log_sweep_dir: when a writer takes its name, and once a minute
 * after) looks at every companion in the writer's own directory (the one
 * it could create its own in), and for each whose lock it can take and
 * whose content is the magic (or that is empty and older than a minute:
 * a writer that died between creating and locking it) removes NAME and
 * NAME.tmp when they are regular files (unlinkat never follows a link;
 * anything else is left), then the companion. Nothing else is touched:
 * only names of that shape, only regular files, never through a link.
 *
 * Only what the sweeper's own user wrote: the companion and each file it
 * removes must be owned by the sweeper's effective uid, and the companion
 * must have no other name (a hard link). The directory is shared (a
 * textfile collector's is often sticky and world-writable), so anyone can
 * create a companion next to any name: one planted by another user
 * removes nothing, and a sweeper run by root leaves every other user's
 * files, and its own files whose companion someone else made, alone.
 * Another user's dead writer is swept by that user's next one.
 *
 * The writer itself (metrics.c) holds to the same rule for its own NAME:
 * it takes no name where another user's file already is, never renames
 * over one, and at its end removes only regular files of its own user
 * (log_sweep_others, log_sweep_unlink_mine).
 *
 * Thread safety: see sweep.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log/format.h"
#include "log/sweep.h"
#include "platform/ofdlock.h"
#include "config/policy.h"

#define SWEEP_SUFFIX ".cumemcap-lock"
/* A companion's whole content: what its writer writes once it holds the lock. */
static const char SWEEP_MAGIC[] = "cumemcap metrics writer lock 1\n";
#define STALE_EMPTY_SECONDS 60

/* ".NAME.cumemcap-lock" into out (false: too long, or not a name). */
bool log_sweep_companion(const char *name, char *out, size_t cap)
{
	size_t n = strlen(name), sn = strlen(SWEEP_SUFFIX);
	if (!n || n + sn + 2 > cap || strchr(name, '/'))
		return false;
	out[0] = '.';
	memcpy(out + 1, name, n);
	memcpy(out + 1 + n, SWEEP_SUFFIX, sn + 1);
	return true;
}

/* NAME from ".NAME.cumemcap-lock"; false for any other name. */
static bool target_of(const char *companion, char *out, size_t cap)
{
	size_t n = strlen(companion), sn = strlen(SWEEP_SUFFIX);
	if (companion[0] != '.' || n <= sn + 1 || strcmp(companion + n - sn, SWEEP_SUFFIX) != 0 ||
	    n - sn - 1 + 5 > cap)
		return false;
	memcpy(out, companion + 1, n - sn - 1);
	out[n - sn - 1] = '\0';
	return strcmp(out, ".") != 0 && strcmp(out, "..") != 0;
}

static bool same_file(int dfd, const char *name, const struct stat *held)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == held->st_dev &&
	       st.st_ino == held->st_ino;
}

void log_sweep_unlink_held(int dfd, const char *name, const struct stat *held)
{
	if (same_file(dfd, name, held))
		unlinkat(dfd, name, 0);
}

bool log_sweep_others(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid != geteuid();
}

void log_sweep_unlink_mine(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
		unlinkat(dfd, name, 0);
}

/* Remove the files of a dead writer whose companion is `companion`;
 * whether it did. */
static bool sweep_one(int dfd, const char *companion)
{
	char target[CUMEMCAP_PATH_MAX + 8];
	if (!target_of(companion, target, sizeof(target) - 4))
		return false;
	int fd = openat(dfd, companion, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	struct stat st;
	bool stale = false;
	uid_t me = geteuid();
	/* A companion of ours: a regular file of our user's, with one name. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == me && st.st_nlink == 1 &&
	    cumemcap_ofd_lock(fd, 0, 0, F_RDLCK, false) == 0) {
		/* No writer holds it. Its content says whether one ever did. */
		char buf[sizeof(SWEEP_MAGIC)];
		ssize_t r = pread(fd, buf, sizeof(buf), 0);
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		if (r == (ssize_t)sizeof(SWEEP_MAGIC) - 1 && memcmp(buf, SWEEP_MAGIC, (size_t)r) == 0)
			stale = true;
		else if (r == 0 && st.st_size == 0 && now.tv_sec - st.st_mtime > STALE_EMPTY_SECONDS)
			stale = true;
	}
	/* Still the companion this lock is on (another sweeper may have
	 * removed it and a new writer made a new one meanwhile)? */
	if (stale && same_file(dfd, companion, &st)) {
		size_t n = strlen(target);
		log_sweep_unlink_mine(dfd, target);
		memcpy(target + n, ".tmp", 5);
		log_sweep_unlink_mine(dfd, target);
		log_sweep_unlink_held(dfd, companion, &st);
	} else {
		stale = false;
	}
	close(fd);
	return stale;
}

void log_sweep_dir(int dfd, const char *mine)
{
	int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dup_fd < 0)
		return;
	DIR *d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return;
	}
	struct dirent *e;
	for (unsigned seen = 0; seen < 100000 && (e = readdir(d)); seen++)
		if (strcmp(e->d_name, mine) != 0)
			sweep_one(dfd, e->d_name); /* a name not of a companion's shape is left */
	closedir(d);
}

int log_sweep_claim(int dfd, const char *companion, struct stat *held)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd = openat(dfd, companion, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			/* Taken: by a live writer, or by a dead one (swept, then
			 * try once more). */
			int e = errno;
			if (e == EEXIST && attempt == 0 && sweep_one(dfd, companion))
				continue;
			return -e;
		}
		if (cumemcap_ofd_lock(fd, 0, 0, F_WRLCK, true) != 0 || fstat(fd, held) != 0) {
			int e = errno;
			unlinkat(dfd, companion, 0);
			close(fd);
			return -e;
		}
		/* A sweeper may have taken it for a dead writer's between our
		 * create and our lock (it was empty, but old?): then it is
		 * gone, and we start over. */
		if (!same_file(dfd, companion, held)) {
			close(fd);
			continue;
		}
		if (!out_write_all(fd, SWEEP_MAGIC, sizeof(SWEEP_MAGIC) - 1)) {
			int e = errno ? errno : EIO;
			unlinkat(dfd, companion, 0);
			close(fd);
			return -e;
		}
		return fd;
	}
	return -EEXIST;
}
