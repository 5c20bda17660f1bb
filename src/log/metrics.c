/* log/metrics: the Prometheus text file (CUMEMCAP_METRICS).
 *
 * Owns the metrics file: its path (a template, expanded once), its
 * directory (checked again for every write, through log_resolve_dir), and
 * its text: one family per figure with a Prometheus name in the figure
 * list (state/figures.h), one series per GPU. The file is replaced whole
 * (a temporary file renamed over it) and removed when the process ends.
 *
 * Thread safety: written only by the worker thread, under tick_lock
 * (log.c); log_metrics_state is atomic because the exit path, possibly a
 * fatal-signal handler, turns it off and unlinks the file
 * (log_metrics_unlink is async-signal-safe: no malloc, no stdio, no
 * locks). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log/log-internal.h"
#include "state/group.h"
#include "state/figures.h"
#include "config/policy.h"

_Atomic int log_metrics_state;
static char metrics_path[CUMEMCAP_PATH_MAX], metrics_dir[CUMEMCAP_PATH_MAX];
static char metrics_name[CUMEMCAP_PATH_MAX], metrics_tmp[CUMEMCAP_PATH_MAX + 8];

/* The metrics file goes away with the process: through its checked
 * directory, quietly (this may run in a signal handler). */
void log_metrics_unlink(void)
{
	char at[CUMEMCAP_PATH_MAX];
	struct dir_failure df;
	int dfd = log_resolve_dir(metrics_dir, false, at, sizeof(at), &df);
	if (dfd >= 0) {
		unlinkat(dfd, metrics_name, 0);
		close(dfd);
	}
}

static void metrics_off(const char *what, int err)
{
	atomic_store(&log_metrics_state, OFF);
	log_say_off("metrics", metrics_path, what, err, "metrics are off");
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_value(struct out *o, const char *s)
{
	out_str(o, "\"");
	for (; *s; s++) {
		if (*s == '\\')
			out_str(o, "\\\\");
		else if (*s == '"')
			out_str(o, "\\\"");
		else if (*s == '\n')
			out_str(o, "\\n");
		else
			out_put(o, s, 1);
	}
	out_str(o, "\"");
}

/* The Prometheus text file, replaced whole (temp file + rename). */
void log_write_metrics(const struct gpu_figures *all, int n)
{
	if (atomic_load(&log_metrics_state) == CLOSED) {
		if (!log_expand(cumemcap_policy()->metrics_path, metrics_path, sizeof(metrics_path))) {
			metrics_off("the expanded path is too long", 0);
			return;
		}
		const char *slash = strrchr(metrics_path, '/');
		size_t dn = slash ? (size_t)(slash - metrics_path) : 0;
		memcpy(metrics_dir, slash ? metrics_path : ".", slash ? (dn ? dn : 1) : 1);
		metrics_dir[slash ? (dn ? dn : 1) : 1] = '\0';
		snprintf(metrics_name, sizeof(metrics_name), "%s", slash ? slash + 1 : metrics_path);
		snprintf(metrics_tmp, sizeof(metrics_tmp), "%s.tmp", metrics_name);
		atomic_store(&log_metrics_state, OPEN);
	}
	if (atomic_load(&log_metrics_state) != OPEN)
		return;
	/* The directory is checked again for every write: it is a path. */
	char at[CUMEMCAP_PATH_MAX];
	struct dir_failure df;
	int dfd = log_resolve_dir(metrics_dir, false, at, sizeof(at), &df);
	if (dfd < 0) {
		char why[2 * CUMEMCAP_PATH_MAX + 64];
		struct out wo = OUT(why);
		log_put_failure(&wo, metrics_dir, at, &df);
		metrics_off(out_cstr(&wo), df.err);
		return;
	}
	unlinkat(dfd, metrics_tmp, 0);
	int fd = openat(dfd, metrics_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		metrics_off("", errno);
		close(dfd);
		return;
	}
	static char buf[16 * 1024];
	struct out o = { .p = buf, .cap = sizeof(buf), .flush_fd = fd };
	char pid_buf[24];
	struct out po = OUT(pid_buf);
	out_u(&po, (uint64_t)getpid());
	const char *pid = out_cstr(&po);
	/* A family for each figure with a `prom` name, in the list's order. */
	for (size_t fig = 0; fig < CUMEMCAP_FIG_COUNT; fig++) {
		const struct cumemcap_figure_info *fi = &cumemcap_figure_info[fig];
		if (!fi->prom)
			continue;
		out_str(&o, "# HELP ");
		out_str(&o, fi->prom);
		out_str(&o, " ");
		out_str(&o, fi->help);
		out_str(&o, "\n# TYPE ");
		out_str(&o, fi->prom);
		out_str(&o, fi->kind == CUMEMCAP_FK_counter ? " counter\n" : " gauge\n");
		for (int i = 0; i < n; i++) {
			uint64_t v = all[i].f.v[fig];
			if (fi->null && v == CUMEMCAP_FIGURE_NONE)
				continue; /* no series: no limit, NVML does not know */
			out_str(&o, fi->prom);
			out_str(&o, "{pid=\"");
			out_str(&o, pid);
			out_str(&o, "\",program=");
			label_value(&o, cumemcap_policy()->program);
			out_str(&o, ",gpu=\"");
			out_u(&o, (uint64_t)all[i].dev);
			out_str(&o, "\",uuid=\"");
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
	int err = o.lost || !out_write_all(fd, o.p, o.len) ? (errno ? errno : EIO) : 0;
	if (close(fd) != 0 && !err)
		err = errno;
	if (!err && renameat(dfd, metrics_tmp, dfd, metrics_name) != 0)
		err = errno;
	if (err) {
		unlinkat(dfd, metrics_tmp, 0);
		metrics_off("", err);
	} else if (atomic_load(&log_metrics_state) != OPEN) {
		unlinkat(dfd, metrics_name, 0); /* the process ended meanwhile */
	}
	close(dfd);
}

