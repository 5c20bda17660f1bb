/* bench: startup, what preloading the shim costs a program that never uses
 * CUDA (the bound: at most +0.5 ms and +20 page faults over no preload).
 *
 *   startup SHIM [ROUNDS [EXECS]]
 *
 * Starts this program itself as a child that returns at once (argv[1] ==
 * "--child"), EXECS times per round, in five modes taken in turn every
 * round so that the machine's drift hits each alike: no preload, an empty
 * preloaded library (what any LD_PRELOAD costs: ld.so opening one more
 * object), the shim with nothing configuring it, the shim configured by a
 * variable (CUMEMCAP_LIMIT=4GiB) and the shim configured by a file
 * (CUMEMCAP_CONFIG naming a file that sets the same limit, as
 * /etc/cumemcap.conf would on a node that preloads the shim everywhere).
 * Prints per mode the median and the min..max over rounds of the wall
 * time per start, and the minor page faults per start (getrusage of the
 * children; deterministic), then each shim mode's cost over both
 * baselines. A figure, never an assertion.
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

enum { NO_SHIM, EMPTY, SHIM, SHIM_LIMIT, SHIM_FILE, MODES };
static const char *const mode_name[MODES] = { "no preload", "empty preload", "shim", "shim, limit",
					      "shim, file" };

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The environment of a child: ours without LD_PRELOAD and CUMEMCAP_*,
 * plus LD_PRELOAD=preload when given and the variable extra when given. */
static char **child_env(const char *preload, const char *extra)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 3, sizeof(*env));
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 && strncmp(environ[i], "CUMEMCAP_", 9) != 0)
			env[k++] = environ[i];
	if (preload) {
		size_t len = strlen(preload) + 12;
		env[k] = malloc(len);
		snprintf(env[k++], len, "LD_PRELOAD=%s", preload);
	}
	if (extra)
		env[k++] = (char *)extra;
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

/* The benchmark itself, out of main: its 14 KB frame, allocated at main's
 * entry, would have every child touch its stack that deep and so hide
 * the stack pages the library's constructor takes. */
static __attribute__((noinline)) int bench(int argc, char **argv)
{
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
	/* The file mode's configuration: a limit, as a node's file would set. */
	char conf[] = "/tmp/cumemcap-startup-XXXXXX", conf_var[64];
	int fd = mkstemp(conf);
	static const char rules[] = "limit = 4GiB\n";
	if (fd < 0 || write(fd, rules, sizeof(rules) - 1) != (ssize_t)sizeof(rules) - 1 || close(fd) != 0) {
		fprintf(stderr, "startup: cannot write %s\n", conf);
		return 1;
	}
	snprintf(conf_var, sizeof(conf_var), "CUMEMCAP_CONFIG=%s", conf);
	char **env[MODES] = { child_env(NULL, NULL), child_env(empty, NULL), child_env(argv[1], NULL),
			      child_env(argv[1], "CUMEMCAP_LIMIT=4GiB"), child_env(argv[1], conf_var) };
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
	unlink(conf);
	for (int m = SHIM; m < MODES; m++) {
		printf("  %-12s over no preload:    %+7.1f us, %+5.1f faults\n", mode_name[m],
		       (med[m] - med[NO_SHIM]) * 1e6, flt[m] - flt[NO_SHIM]);
		printf("  %-12s over empty preload: %+7.1f us, %+5.1f faults\n", mode_name[m],
		       (med[m] - med[EMPTY]) * 1e6, flt[m] - flt[EMPTY]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	/* The child returns at once, as a program that never uses CUDA
	 * might, with a frame of a few bytes. */
	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return 0;
	return bench(argc, argv);
}
