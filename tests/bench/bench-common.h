/* bench-common.h: what the benchmark programs in tests/bench share: a
 * monotonic clock, medians, the CPUs this process may use, key=value figures
 * on a child's output line, the environment of a mode (no shim, the shim with
 * pooling off, the shim pooled) and running this program as a child in one.
 *
 * Header-only (static inline functions), so each benchmark stays one
 * executable with no library of its own. Every function may be called from
 * any thread except bench_set_mode_env and bench_run_child, which change or
 * fork the process and belong to the single-threaded parent (or the child
 * between fork and exec). */
#pragma once

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Sorts v in place; an even count gives the mean of the middle two. */
static inline double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline int nproc(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}

/* BENCH_QUICK set to anything but "" or "0". */
static inline bool bench_quick(void)
{
	const char *q = getenv("BENCH_QUICK");
	return q && *q && strcmp(q, "0") != 0;
}

/* The value of "key=VALUE" in a line of "k=v k=v ..." figures; -1 if absent. */
static inline double field(const char *line, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = line; (p = strstr(p, key)) != NULL; p += k) {
		if ((p == line || p[-1] == ' ') && p[k] == '=')
			return strtod(p + k + 1, NULL);
	}
	return -1;
}

/* The modes every side-by-side benchmark compares, and their names on a
 * child's command line. */
enum bench_mode { M_NONE, M_OFF, M_POOLED, NMODES };
static const char *const mode_args[NMODES] = { "none", "off", "pooled" };

/* This process's environment for mode m (in the forked child, before exec):
 * every CUMEMCAP_* variable dropped, one fake GPU of `devices` bytes
 * (FAKECUDA_DEVICES syntax), and for the shim's modes LD_PRELOAD=shim,
 * CUMEMCAP_LOG=off and CUMEMCAP_CONFIG= (no file, so no limit). The pooled
 * mode takes pool_override / release_override (the parent's own
 * CUMEMCAP_POOL / CUMEMCAP_RELEASE) when given. */
static inline void bench_set_mode_env(enum bench_mode m, const char *shim, const char *devices,
				      const char *pool_override, const char *release_override)
{
	extern char **environ;
	for (;;) {
		char name[256] = "";
		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "CUMEMCAP_", 9) == 0) {
				size_t k = strcspn(*e, "=");
				if (k < sizeof(name)) {
					memcpy(name, *e, k);
					name[k] = '\0';
				}
				break;
			}
		}
		if (!name[0])
			break;
		unsetenv(name);
	}
	setenv("FAKECUDA_DEVICES", devices, 1);
	if (m == M_NONE) {
		unsetenv("LD_PRELOAD");
		return;
	}
	setenv("LD_PRELOAD", shim, 1);
	setenv("CUMEMCAP_LOG", "off", 1);
	setenv("CUMEMCAP_CONFIG", "", 1);
	if (m == M_OFF) {
		setenv("CUMEMCAP_POOL", "off", 1);
	} else {
		setenv("CUMEMCAP_POOL", pool_override ? pool_override : "on", 1);
		if (release_override)
			setenv("CUMEMCAP_RELEASE", release_override, 1);
	}
}

/* Runs argv (argv[0] the program) as a child, prep(arg) called in it before
 * exec to set its environment; its stdout (up to outlen - 1 bytes) in out,
 * its stderr passed through. Returns the child's exit status, or -1 when it
 * could not run or was killed (said on stderr, prefixed with `who`). */
static inline int bench_run_child(const char *who, const char *const *argv, void (*prep)(void *), void *arg,
				  char *out, size_t outlen)
{
	int fds[2];
	out[0] = '\0';
	if (pipe(fds))
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		if (prep)
			prep(arg);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	size_t n = 0;
	for (;;) {
		ssize_t got = read(fds[0], out + n, outlen - 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		n += (size_t)got;
		if (n == outlen - 1)
			break;
	}
	out[n] = '\0';
	close(fds[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
	}
	if (!WIFEXITED(st)) {
		fprintf(stderr, "%s: FAILED: child (%s) was killed by signal %d\n", who, argv[1] ? argv[1] : "",
			WTERMSIG(st));
		return -1;
	}
	return WEXITSTATUS(st);
}
