/* bench: startup, what preloading the shim costs a program that never uses
 * CUDA (issue 17's target: at most +0.3 ms and 10 page faults).
 *
 *   startup SHIM [ROUNDS [EXECS]]
 *
 * Starts this program itself as a child that returns at once (argv[1] ==
 * "--child"), EXECS times per round, in three modes taken in turn every
 * round so that the machine's drift hits each alike: no preload, an empty
 * preloaded library (what any LD_PRELOAD costs: ld.so opening one more
 * object), and the shim. Prints per mode the median and the min..max over
 * rounds of the wall time per start, and the minor page faults per start
 * (getrusage of the children; deterministic), then the shim's cost over
 * each baseline. A figure, never an assertion.
 *
 * The empty library is built by the benchmark's meson rule
 * (startup-empty.so, beside this program). */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { NO_SHIM, EMPTY, SHIM, MODES };
static const char *const mode_name[MODES] = { "no preload", "empty preload", "shim" };

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The environment of a child: ours without LD_PRELOAD and CUMEMCAP_*,
 * plus LD_PRELOAD=preload when given. */
static char **child_env(const char *preload)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 2, sizeof(*env));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 && strncmp(environ[i], "CUMEMCAP_", 9) != 0)
			env[k++] = environ[i];
	if (preload) {
		size_t len = strlen(preload) + 12;
		env[k] = malloc(len);
		snprintf(env[k++], len, "LD_PRELOAD=%s", preload);
	}
	env[k] = NULL;
	return env;
}

/* EXECS starts; wall seconds and minor faults per start. */
static void round_of(const char *self, char **env, int execs, double *secs, double *faults)
{
	struct rusage r0, r1;
	getrusage(RUSAGE_CHILDREN, &r0);
	double t0 = now();
	for (int i = 0; i < execs; i++) {
		char *argv[] = { (char *)self, "--child", NULL };
		pid_t pid;
		int status;
		if (posix_spawn(&pid, self, NULL, NULL, argv, env) != 0 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "startup: a child failed\n");
			exit(1);
		}
	}
	*secs = (now() - t0) / execs;
	getrusage(RUSAGE_CHILDREN, &r1);
	*faults = (double)(r1.ru_minflt - r0.ru_minflt) / execs;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return 0;
	if (argc < 2) {
		fprintf(stderr, "usage: startup SHIM [ROUNDS [EXECS]]\n");
		return 2;
	}
	int rounds = argc > 2 ? atoi(argv[2]) : 7, execs = argc > 3 ? atoi(argv[3]) : 200;
	if (getenv("BENCH_QUICK"))
		rounds = 3, execs = 50;
	char self[4096], empty[4200];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = '\0';
	snprintf(empty, sizeof(empty), "%.*s/startup-empty.so", (int)(strrchr(self, '/') - self), self);
	char **env[MODES] = { child_env(NULL), child_env(empty), child_env(argv[1]) };
	double secs[MODES][64], faults[MODES][64];
	if (rounds > 64)
		rounds = 64;
	for (int r = 0; r < rounds; r++)
		for (int m = 0; m < MODES; m++)
			round_of(self, env[m], execs, &secs[m][r], &faults[m][r]);
	printf("startup: %d rounds of %d starts of a program that never uses CUDA\n", rounds, execs);
	double med[MODES], flt[MODES];
	for (int m = 0; m < MODES; m++) {
		qsort(secs[m], (size_t)rounds, sizeof(double), cmp);
		qsort(faults[m], (size_t)rounds, sizeof(double), cmp);
		med[m] = secs[m][rounds / 2];
		flt[m] = faults[m][rounds / 2];
		printf("  %-14s %8.1f us per start (min %.1f, max %.1f), %6.1f minor faults\n", mode_name[m],
		       med[m] * 1e6, secs[m][0] * 1e6, secs[m][rounds - 1] * 1e6, flt[m]);
	}
	printf("  shim over no preload:    %+7.1f us, %+5.1f faults\n", (med[SHIM] - med[NO_SHIM]) * 1e6,
	       flt[SHIM] - flt[NO_SHIM]);
	printf("  shim over empty preload: %+7.1f us, %+5.1f faults\n", (med[SHIM] - med[EMPTY]) * 1e6,
	       flt[SHIM] - flt[EMPTY]);
	return 0;
}
