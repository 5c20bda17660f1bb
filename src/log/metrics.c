/* log/metrics: see metrics.h; docs/metrics.md says how names are taken
 * and dead writers swept. A name's companion `.NAME.cumemcap-lock` holds
 * an OFD write lock for its writer's life, which the kernel drops when
 * the writer dies: a read lock taken on it means the writer is gone. In
 * the shared directory only our euid's regular files are removed, never
 * through a link, and nothing is renamed over another user's file. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log/file.h"
#include "log/metrics.h"
#include "group/group.h"
#include "state/figures.h"
#include "platform/msg.h"
#include "platform/ofdlock.h"
#include "platform/worker.h"
#include "config/policy.h"

#define LABEL_VALUE_MAX 253u   /* a label value is cut at the longest Kubernetes name */
#define SWEEP_EVERY_MS  60000u /* how often a writer sweeps its directory again */
#define SWEEP_SUFFIX    ".cumemcap-lock"
static const char SWEEP_MAGIC[] = "cumemcap metrics writer lock 1\n";
#define STALE_EMPTY_SECONDS 60

_Atomic int log_metrics_state;
pthread_mutex_t log_metrics_lock = PTHREAD_MUTEX_INITIALIZER;
static char metrics_path[CUMEMCAP_PATH_MAX + 16], metrics_dir[CUMEMCAP_PATH_MAX];
static char metrics_name[CUMEMCAP_PATH_MAX + 16], metrics_tmp[CUMEMCAP_PATH_MAX + 24];
static char own_companion[CUMEMCAP_PATH_MAX + 40];
static int companion_fd = -1;
static struct stat companion_st;
static uint64_t last_sweep_ms;

/* ".NAME.cumemcap-lock" into out (false: too long, or not a name). */
static bool companion_of(const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, ".%s" SWEEP_SUFFIX, name);
	return name[0] && !strchr(name, '/') && n > 0 && (size_t)n < cap;
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

/* Whether `name` in dfd is another user's (any type): not ours to replace. */
static bool others_file(int dfd, const char *name)
{
	struct stat st;
	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_uid != geteuid();
}

/* Remove `name` in dfd if it is a regular file of the effective uid's. */
static void unlink_mine(int dfd, const char *name)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
		unlinkat(dfd, name, 0);
}

/* Remove the files of the dead writer of `companion`; whether it did. */
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
	/* A companion of ours: our user's regular file, with one name. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1 &&
	    cumemcap_ofd_lock(fd, 0, 0, F_RDLCK, false) == 0) {
		/* No writer holds it; its content says whether one ever did. */
		char buf[sizeof(SWEEP_MAGIC)];
		ssize_t r = pread(fd, buf, sizeof(buf), 0);
		stale = (r == (ssize_t)sizeof(SWEEP_MAGIC) - 1 && memcmp(buf, SWEEP_MAGIC, (size_t)r) == 0) ||
			(r == 0 && st.st_size == 0 && time(NULL) - st.st_mtime > STALE_EMPTY_SECONDS);
	}
	/* Still the companion locked (not removed and made anew meanwhile)? */
	if (stale && same_file(dfd, companion, &st)) {
		size_t n = strlen(target);
		unlink_mine(dfd, target);
		memcpy(target + n, ".tmp", 5);
		unlink_mine(dfd, target);
		if (same_file(dfd, companion, &st))
			unlinkat(dfd, companion, 0);
	} else {
		stale = false;
	}
	close(fd);
	return stale;
}

/* Sweep every companion in dfd but `mine`. */
static void sweep_dir(int dfd, const char *mine)
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

/* Create and lock `companion` in dfd (a dead writer's swept first): its
 * descriptor (*held its identity), -EEXIST for a live writer's, -errno. */
static int claim_companion(int dfd, const char *companion, struct stat *held)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd = openat(dfd, companion, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0) {
			/* Taken by a live writer, or a dead one: swept, once more. */
			int e = errno;
			if (e == EEXIST && attempt == 0 && sweep_one(dfd, companion))
				continue;
			return -e;
		}
		int e = cumemcap_ofd_lock(fd, 0, 0, F_WRLCK, true) != 0 || fstat(fd, held) != 0 ? errno : 0;
		/* Removed by a sweeper between our create and lock? Start over. */
		if (!e && !same_file(dfd, companion, held)) {
			close(fd);
			continue;
		}
		if (!e && out_write_all(fd, SWEEP_MAGIC, sizeof(SWEEP_MAGIC) - 1))
			return fd;
		e = e ? e : errno ? errno : EIO;
		unlinkat(dfd, companion, 0);
		close(fd);
		return -e;
	}
	return -EEXIST;
}

/* The Downward API's variables and their labels. */
static const struct {
	char variable[16];
	const char *label;
} downward[] = {
	{ "NODE_NAME", "node" },
	{ "POD_NAME", "pod" },
	{ "POD_NAMESPACE", "namespace" },
	{ "CONTAINER_NAME", "container" },
};
#define N_DOWNWARD (sizeof(downward) / sizeof(downward[0]))
static char downward_value[N_DOWNWARD][LABEL_VALUE_MAX + 1];

void log_metrics_init(void)
{
	for (size_t i = 0; i < N_DOWNWARD; i++) {
		/* Under secure execution the caller chose the environment. */
		const char *v = secure_getenv(downward[i].variable);
		if (v)
			cumemcap_copy(downward_value[i], sizeof(downward_value[i]), v);
	}
}

const char *log_metrics_path(void)
{
	return atomic_load(&log_metrics_state) == OPEN ? metrics_path : "";
}

void log_metrics_unlink(void)
{
	int dfd = log_open_dir(metrics_dir, false, NULL, NULL, NULL);
	if (dfd >= 0) {
		unlink_mine(dfd, metrics_name);
		unlink_mine(dfd, metrics_tmp);
		if (companion_fd >= 0 && same_file(dfd, own_companion, &companion_st))
			unlinkat(dfd, own_companion, 0);
		close(dfd);
	}
}

static void metrics_off(const char *what, int err)
{
	atomic_store(&log_metrics_state, OFF);
	log_say_off("metrics", metrics_path, what, err, "metrics are off");
}

/* The name, its companion locked, then a sweep; under log_metrics_lock. */
void log_metrics_claim(void)
{
	if (atomic_load(&log_metrics_state) != CLOSED)
		return;
	int saved = errno;
	pthread_mutex_lock(&log_metrics_lock);
	if (atomic_load(&log_metrics_state) != CLOSED)
		goto unlock;
	char base[CUMEMCAP_PATH_MAX];
	int dfd = log_open_template(cumemcap_policy()->metrics_path, metrics_path, metrics_dir, base, false, "metrics",
				    "metrics are off");
	if (dfd < 0) {
		atomic_store(&log_metrics_state, OFF);
		goto unlock;
	}
	size_t at = strlen(metrics_path) - strlen(base);
	int fd = -EEXIST;
	for (unsigned i = 0; i < 100 && fd == -EEXIST; i++) {
		if (!log_suffixed(base, i, metrics_name, sizeof(metrics_name)) ||
		    !companion_of(metrics_name, own_companion, sizeof(own_companion))) {
			fd = -ENAMETOOLONG;
			break;
		}
		fd = claim_companion(dfd, own_companion, &companion_st);
		/* Another user's file at this name or its .tmp: the next name. */
		snprintf(metrics_tmp, sizeof(metrics_tmp), "%s.tmp", metrics_name);
		if (fd >= 0 && (others_file(dfd, metrics_name) || others_file(dfd, metrics_tmp))) {
			unlinkat(dfd, own_companion, 0); /* ours: created and locked just now */
			close(fd);
			fd = -EEXIST;
		}
	}
	if (fd < 0) {
		metrics_off(fd == -EEXIST ? "live writers or other users' files hold this name and its .1 to .99" : "",
			    fd == -EEXIST ? 0 : -fd);
	} else {
		companion_fd = fd;
		cumemcap_copy(metrics_path + at, sizeof(metrics_path) - at, metrics_name);
		atomic_store(&log_metrics_state, OPEN);
		sweep_dir(dfd, own_companion);
		last_sweep_ms = cumemcap_now_ms();
	}
	close(dfd);
unlock:
	pthread_mutex_unlock(&log_metrics_lock);
	errno = saved;
}

static void label(struct out *o, const char *name, size_t nn, const char *value, size_t vn)
{
	out_str(o, ",");
	out_put(o, name, nn);
	out_str(o, "=");
	out_quoted(o, value, vn, LABEL_VALUE_MAX, true);
}

/* A temporary file renamed over it, in the directory checked anew. */
void log_write_metrics(const struct gpu_figures *all, int n)
{
	log_metrics_claim();
	pthread_mutex_lock(&log_metrics_lock);
	int dfd = atomic_load(&log_metrics_state) == OPEN
			  ? log_open_dir(metrics_dir, false, "metrics", metrics_path, "metrics are off")
			  : -1;
	if (dfd < 0) {
		atomic_store(&log_metrics_state, OFF); /* refused, or it was already */
		goto unlock;
	}
	if (cumemcap_now_ms() - last_sweep_ms >= SWEEP_EVERY_MS) {
		sweep_dir(dfd, own_companion);
		last_sweep_ms = cumemcap_now_ms();
	}
	unlink_mine(dfd, metrics_tmp);
	int fd = openat(dfd, metrics_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		bool others = e == EEXIST && others_file(dfd, metrics_tmp);
		metrics_off(others ? "another user's file is at its .tmp name now" : "", e);
		goto close_dir;
	}
	/* The labels every series of this process has, once per file. */
	static char buf[16 * 1024], head[8 * 1024];
	struct out o = { .p = buf, .cap = sizeof(buf), .flush_fd = fd };
	struct out ho = OUT(head);
	const struct cumemcap_policy *p = cumemcap_policy();
	out_str(&ho, "pid=\"");
	out_u(&ho, (uint64_t)getpid());
	out_str(&ho, "\"");
	label(&ho, "program", 7, p->program, strlen(p->program));
	if (log_host[0])
		label(&ho, "host", 4, log_host, strlen(log_host));
	for (size_t i = 0; i < N_DOWNWARD; i++)
		if (downward_value[i][0])
			label(&ho, downward[i].label, strlen(downward[i].label), downward_value[i],
			      strlen(downward_value[i]));
	const char *cur = p->labels, *key, *value;
	size_t kn, vn;
	while (cumemcap_labels_next(&cur, &key, &kn, &value, &vn))
		label(&ho, key, kn, value, vn);
	/* A family for each figure with a `prom` name, in the list's order. */
	for (size_t fig = 0; fig < CUMEMCAP_FIG_COUNT; fig++) {
		const struct cumemcap_figure_info *fi = &cumemcap_figure_info[fig];
		const char *prom = fi->prom;
		if (!*prom)
			continue;
		const char *type = fi->kind == CUMEMCAP_FK_counter ? " counter\n" : " gauge\n";
		out_strs(&o, "# HELP ", prom, " ", fi->help, "\n# TYPE ", prom, type, NULL);
		for (int i = 0; i < n; i++) {
			uint64_t v = all[i].f.v[fig];
			if (fi->null && v == CUMEMCAP_FIGURE_NONE)
				continue; /* no series: no limit, NVML does not know */
			out_strs(&o, prom, "{", NULL);
			out_put(&o, ho.p, ho.len);
			int index = log_gpu_index(all[i].dev);
			if (index >= 0) {
				out_str(&o, ",gpu=\"");
				out_u(&o, (uint64_t)index);
				out_str(&o, "\"");
			}
			out_str(&o, ",cuda_device=\"");
			out_u(&o, (uint64_t)all[i].dev);
			out_strs(&o, "\",uuid=\"", all[i].uuid, "\",UUID=\"", all[i].uuid, NULL);
			if (cumemcap_group_member()) /* [A-Za-z0-9._-]: nothing to escape */
				out_strs(&o, "\",group=\"", cumemcap_group_name(), NULL);
			out_str(&o, "\"} ");
			out_u(&o, v);
			out_str(&o, "\n");
		}
	}
	int err = o.lost || ho.lost || !out_write_all(fd, o.p, o.len) ? (errno ? errno : EIO) : 0;
	if (close(fd) != 0 && !err)
		err = errno;
	/* Never over another user's file made since (root's rename would). */
	bool foreign = !err && others_file(dfd, metrics_name);
	if (!err && !foreign && renameat(dfd, metrics_tmp, dfd, metrics_name) != 0)
		err = errno;
	if (err || foreign) {
		unlinkat(dfd, metrics_tmp, 0);
		metrics_off(foreign ? "another user's file is there now" : "", err);
	} else if (atomic_load(&log_metrics_state) != OPEN) {
		unlinkat(dfd, metrics_name, 0); /* the process ended meanwhile */
	}
close_dir:
	close(dfd);
unlock:
	pthread_mutex_unlock(&log_metrics_lock);
}

/* The child takes a name of its own: it closes its copy of the parent's
 * companion (whose lock the parent keeps) if the number is still that file. */
void log_metrics_fork_child(void)
{
	if (companion_fd >= 0 && log_fd_is(companion_fd, &companion_st))
		close(companion_fd);
	companion_fd = -1;
	atomic_store(&log_metrics_state, CLOSED);
}
