/* log/metrics: the Prometheus text file (CUMEMCAP_METRICS).
 *
 * Owns the metrics file: its path (a template, expanded once; ".N" before
 * the extension while a live writer holds the name, which its companion
 * lock tells: sweep.c), its directory (checked again for every write,
 * through log_open_dir), its labels and its text: one family per figure
 * with a Prometheus name in the figure list (state/figures.h), one series
 * per GPU. The file is replaced whole (a temporary file renamed over it)
 * and removed, with its companion, when the process ends; the files of
 * writers that died without removing theirs (SIGKILL) are swept.
 *
 * Labels, so that a series names one process on one GPU across a cluster:
 * pid, program, host (gethostname), node, pod, namespace, container (from
 * the Downward API variables NODE_NAME, POD_NAME, POD_NAMESPACE,
 * CONTAINER_NAME, read in the constructor; left out when unset or empty,
 * and under secure execution, where the caller chose the environment),
 * CUMEMCAP_LABELS's pairs, then per GPU gpu (nvidia-smi's index, as
 * dcgm-exporter's `gpu`; left out when NVML cannot say), cuda_device (the
 * CUDA ordinal), uuid and UUID (dcgm-exporter's name for it, for joins),
 * and group in a group. Values are escaped, cut at LABEL_VALUE_MAX bytes.
 *
 * Thread safety: see metrics.h; the file is written under log.c's tick
 * lock and metrics_lock. */
#include "config.h"
#include "platform/msg.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/file.h"
#include "log/metrics.h"
#include "log/sweep.h"
#include "group/group.h"
#include "state/figures.h"
#include "platform/worker.h"
#include "config/policy.h"

/* Longer than any Kubernetes name (253): a value is cut there. */
#define LABEL_VALUE_MAX 253u
/* How often a writer sweeps its directory again after its start. */
#define SWEEP_EVERY_MS 60000u

_Atomic int log_metrics_state;
static pthread_mutex_t metrics_lock = PTHREAD_MUTEX_INITIALIZER;
static char metrics_path[CUMEMCAP_PATH_MAX + 16], metrics_dir[CUMEMCAP_PATH_MAX];
static char metrics_name[CUMEMCAP_PATH_MAX + 16], metrics_tmp[CUMEMCAP_PATH_MAX + 24];
static char companion[CUMEMCAP_PATH_MAX + 40];
static int companion_fd = -1;
static struct stat companion_st;
static uint64_t last_sweep_ms;

/* The Downward API's names, copied in the constructor. */
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
		/* Under secure execution the caller chose the environment:
		 * no label of a setuid program's comes from it. */
		const char *v = secure_getenv(downward[i].variable);
		if (v) /* "" otherwise, as it is: nothing written */
			cumemcap_copy(downward_value[i], sizeof(downward_value[i]), v);
	}
}

const char *log_metrics_path(void)
{
	return atomic_load(&log_metrics_state) == OPEN ? metrics_path : "";
}

/* The metrics file goes away with the process, its companion after it:
 * through its checked directory, quietly (this may run in a signal
 * handler). */
void log_metrics_unlink(void)
{
	int dfd = log_open_dir(metrics_dir, false, NULL, NULL, NULL);
	if (dfd >= 0) {
		log_sweep_unlink_mine(dfd, metrics_name);
		log_sweep_unlink_mine(dfd, metrics_tmp);
		if (companion_fd >= 0)
			log_sweep_unlink_held(dfd, companion, &companion_st);
		close(dfd);
	}
}

static void metrics_off(const char *what, int err)
{
	atomic_store(&log_metrics_state, OFF);
	log_say_off("metrics", metrics_path, what, err, "metrics are off");
}

/* The directory, checked; -1 when refused (then metrics are off). */
static int open_dir(void)
{
	int dfd = log_open_dir(metrics_dir, false, "metrics", metrics_path, "metrics are off");
	if (dfd < 0)
		atomic_store(&log_metrics_state, OFF);
	return dfd;
}

/* metrics_lock held: the name, its companion locked; then a sweep. */
static void claim(void)
{
	if (!log_expand(cumemcap_policy()->metrics_path, metrics_path, CUMEMCAP_PATH_MAX)) {
		metrics_off("the expanded path is too long", 0);
		return;
	}
	char base[sizeof(metrics_path)];
	cumemcap_copy(base, sizeof(base), log_split_path(metrics_path, metrics_dir, sizeof(metrics_dir)));
	int dfd = open_dir();
	if (dfd < 0)
		return;
	int fd = -EEXIST;
	for (unsigned i = 0; i < 100 && fd == -EEXIST; i++) {
		if (!log_suffixed(base, i, metrics_name, sizeof(metrics_name)) ||
		    !log_sweep_companion(metrics_name, companion, sizeof(companion))) {
			fd = -ENAMETOOLONG;
			break;
		}
		fd = log_sweep_claim(dfd, companion, &companion_st);
		/* Another user's file under this name or its .tmp is not ours
		 * to replace: the next name. */
		snprintf(metrics_tmp, sizeof(metrics_tmp), "%s.tmp", metrics_name);
		if (fd >= 0 && (log_sweep_others(dfd, metrics_name) || log_sweep_others(dfd, metrics_tmp))) {
			unlinkat(dfd, companion, 0); /* ours: created and locked just now */
			close(fd);
			fd = -EEXIST;
		}
	}
	if (fd < 0) {
		close(dfd);
		if (fd == -EEXIST)
			metrics_off("live writers or other users' files hold this name and its .1 to .99", 0);
		else
			metrics_off("", -fd);
		return;
	}
	companion_fd = fd;
	size_t at = (size_t)(log_split_path(metrics_path, metrics_dir, sizeof(metrics_dir)) - metrics_path);
	cumemcap_copy(metrics_path + at, sizeof(metrics_path) - at, metrics_name);
	atomic_store(&log_metrics_state, OPEN);
	log_sweep_dir(dfd, companion);
	last_sweep_ms = cumemcap_now_ms();
	close(dfd);
}

void log_metrics_claim(void)
{
	if (atomic_load(&log_metrics_state) != CLOSED)
		return;
	int saved = errno;
	pthread_mutex_lock(&metrics_lock);
	if (atomic_load(&log_metrics_state) == CLOSED)
		claim();
	pthread_mutex_unlock(&metrics_lock);
	errno = saved;
}

/* name="value" with a comma first unless `first`. */
static void label(struct out *o, bool first, const char *name, size_t nn, const char *value, size_t vn)
{
	out_str(o, first ? "" : ",");
	out_put(o, name, nn);
	out_str(o, "=");
	out_label_value(o, value, vn, LABEL_VALUE_MAX);
}

/* The labels every series of this process has, once per file. */
static void process_labels(struct out *o, const char *pid)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	label(o, true, "pid", 3, pid, strlen(pid));
	label(o, false, "program", 7, p->program, strlen(p->program));
	if (log_host[0])
		label(o, false, "host", 4, log_host, strlen(log_host));
	for (size_t i = 0; i < N_DOWNWARD; i++)
		if (downward_value[i][0])
			label(o, false, downward[i].label, strlen(downward[i].label), downward_value[i],
			      strlen(downward_value[i]));
	const char *cur = cumemcap_policy_labels(p, NULL), *k, *v;
	size_t kn, vn;
	while (cumemcap_labels_next(&cur, &k, &kn, &v, &vn))
		label(o, false, k, kn, v, vn);
}

/* The Prometheus text file, replaced whole (temp file + rename). */
void log_write_metrics(const struct gpu_figures *all, int n)
{
	log_metrics_claim();
	pthread_mutex_lock(&metrics_lock);
	if (atomic_load(&log_metrics_state) != OPEN) {
		pthread_mutex_unlock(&metrics_lock);
		return;
	}
	/* The directory is checked again for every write: it is a path. */
	int dfd = open_dir();
	if (dfd < 0) {
		pthread_mutex_unlock(&metrics_lock);
		return;
	}
	if (cumemcap_now_ms() - last_sweep_ms >= SWEEP_EVERY_MS) {
		log_sweep_dir(dfd, companion);
		last_sweep_ms = cumemcap_now_ms();
	}
	log_sweep_unlink_mine(dfd, metrics_tmp);
	int fd = openat(dfd, metrics_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		int e = errno;
		bool others = e == EEXIST && log_sweep_others(dfd, metrics_tmp);
		metrics_off(others ? "another user's file is at its .tmp name now" : "", e);
		close(dfd);
		pthread_mutex_unlock(&metrics_lock);
		return;
	}
	static char buf[16 * 1024], head[8 * 1024];
	struct out o = { .p = buf, .cap = sizeof(buf), .flush_fd = fd };
	char pid_buf[24];
	struct out po = OUT(pid_buf);
	out_u(&po, (uint64_t)getpid());
	struct out ho = OUT(head);
	process_labels(&ho, out_cstr(&po));
	/* A family for each figure with a `prom` name, in the list's order. */
	for (size_t fig = 0; fig < CUMEMCAP_FIG_COUNT; fig++) {
		const struct cumemcap_figure_info *fi = &cumemcap_figure_info[fig];
		const char *prom = fi->prom;
		if (!*prom)
			continue;
		out_str(&o, "# HELP ");
		out_str(&o, prom);
		out_str(&o, " ");
		out_str(&o, fi->help);
		out_str(&o, "\n# TYPE ");
		out_str(&o, prom);
		out_str(&o, fi->kind == CUMEMCAP_FK_counter ? " counter\n" : " gauge\n");
		for (int i = 0; i < n; i++) {
			uint64_t v = all[i].f.v[fig];
			if (fi->null && v == CUMEMCAP_FIGURE_NONE)
				continue; /* no series: no limit, NVML does not know */
			out_str(&o, prom);
			out_str(&o, "{");
			out_put(&o, ho.p, ho.len);
			unsigned index;
			if (log_gpu_index(all[i].dev, &index)) {
				out_str(&o, ",gpu=\"");
				out_u(&o, index);
				out_str(&o, "\"");
			}
			out_str(&o, ",cuda_device=\"");
			out_u(&o, (uint64_t)all[i].dev);
			out_str(&o, "\",uuid=\"");
			out_str(&o, all[i].uuid);
			out_str(&o, "\",UUID=\"");
			out_str(&o, all[i].uuid);
			if (cumemcap_group_member()) {
				out_str(&o, "\",group=\"");
				out_str(&o, cumemcap_group_name()); /* [A-Za-z0-9._-]: nothing to escape */
			}
			out_str(&o, "\"} ");
			out_u(&o, v);
			out_str(&o, "\n");
		}
	}
	int err = o.lost || ho.lost || !out_write_all(fd, o.p, o.len) ? (errno ? errno : EIO) : 0;
	if (close(fd) != 0 && !err)
		err = errno;
	/* Never over another user's file (one made after the name was
	 * taken): root's rename would remove it. */
	bool foreign = !err && log_sweep_others(dfd, metrics_name);
	if (!err && !foreign && renameat(dfd, metrics_tmp, dfd, metrics_name) != 0)
		err = errno;
	if (err || foreign) {
		unlinkat(dfd, metrics_tmp, 0);
		metrics_off(foreign ? "another user's file is there now" : "", err);
	} else if (atomic_load(&log_metrics_state) != OPEN) {
		unlinkat(dfd, metrics_name, 0); /* the process ended meanwhile */
	}
	close(dfd);
	pthread_mutex_unlock(&metrics_lock);
}

void log_metrics_fork_prepare(void)
{
	pthread_mutex_lock(&metrics_lock);
}

void log_metrics_fork_parent(void)
{
	pthread_mutex_unlock(&metrics_lock);
}

/* The child writes a file of its own, under a name of its own: it lets go
 * of its copy of the parent's companion (the parent's lock stays: it has
 * its own descriptor of it), if the number still is that file. */
void log_metrics_fork_child(void)
{
	pthread_mutex_unlock(&metrics_lock);
	if (companion_fd >= 0 && log_fd_is(companion_fd, &companion_st))
		close(companion_fd);
	companion_fd = -1;
	atomic_store(&log_metrics_state, CLOSED);
}
