/* exit-race: a member of a group exits while its threads allocate.
 *
 *   exit-race DOOR ROUNDS THREADS MIB
 *
 * Each round starts a child (this program again, "spin") whose THREADS
 * threads allocate and free MIB MiB in a loop (CUMEMCAP_POOL=off: every
 * call takes from the group's book or gives back to it) while its main
 * thread calls exit(). The destructor gives the child's slot of the book
 * back while those threads still run. Then a second child ("whole")
 * allocates the whole budget (CUMEMCAP_GROUP_LIMIT), which fits only if
 * nothing of the first stays counted.
 *
 * Once, a thread that had looked at the slot before the release wrote it
 * after: its share stayed held in a free slot for ever (the budget shrank
 * by it), or, with the slot's number already cleared, it wrote outside
 * the book (SIGSEGV; the worker's once-a-second publishing did that on a
 * CI run). Each child must exit with status 0.
 *
 * The book lives in a directory of this run's own (under TMPDIR),
 * removed at the end. */
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct api A;
static struct fake F;
static CUcontext ctx;
static size_t bytes;
static _Atomic int started;

static void *spin(void *arg)
{
	(void)arg;
	OK(A.cuCtxSetCurrent(ctx));
	atomic_fetch_add(&started, 1);
	for (;;) {
		CUdeviceptr p;
		CUresult r = A.cuMemAlloc(&p, bytes);
		if (r == CUDA_SUCCESS)
			A.cuMemFree(p);
		else if (r != CUDA_ERROR_OUT_OF_MEMORY)
			break; /* the process is ending under us */
	}
	return NULL;
}

static int child_spin(int threads)
{
	ctx = use_primary(&A, 0);
	for (int i = 0; i < threads; i++) {
		pthread_t t;
		CHECK(pthread_create(&t, NULL, spin, NULL) == 0);
	}
	while (atomic_load(&started) < threads)
		sched_yield();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	usleep(1000 + (useconds_t)(ts.tv_nsec / 1000 % 4000)); /* 1..5 ms of calls */
	exit(0); /* the destructor runs while the threads allocate */
}

static int child_whole(void)
{
	const char *limit = getenv("CUMEMCAP_GROUP_LIMIT");
	CHECK(limit && strcmp(limit, "1GiB") == 0);
	use_primary(&A, 0);
	CUdeviceptr p;
	CUresult r = A.cuMemAlloc(&p, GiB);
	if (r != CUDA_SUCCESS) {
		fprintf(stderr, "exit-race: the whole 1 GiB budget does not fit after a member's exit (%d)\n", (int)r);
		return 1;
	}
	OK(A.cuMemFree(p));
	return 0;
}

static bool run_child(char *self, char *how, char *what, char *threads, char *mib)
{
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char *argv[] = { self, how, what, threads, mib, NULL };
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	int st;
	CHECK(waitpid(pid, &st, 0) == pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return true;
	if (WIFSIGNALED(st))
		fprintf(stderr, "exit-race: %s child killed by signal %d\n", what, WTERMSIG(st));
	else
		fprintf(stderr, "exit-race: %s child exited with %d\n", what, WEXITSTATUS(st));
	return false;
}

static void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: %s DOOR ROUNDS|spin|whole THREADS MIB\n", argv[0]);
		return 2;
	}
	int threads = atoi(argv[3]);
	bytes = (size_t)atoi(argv[4]) * MiB;
	if (strcmp(argv[2], "spin") == 0 || strcmp(argv[2], "whole") == 0) {
		load_api(argc, argv, &A, &F);
		return strcmp(argv[2], "spin") == 0 ? child_spin(threads) : child_whole();
	}
	int rounds = atoi(argv[2]);
	const char *tmp = getenv("TMPDIR");
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/exit-race.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(dir) != NULL);
	setenv("CUMEMCAP_GROUP_DIR", dir, 1);
	setenv("CUMEMCAP_GROUP", "exitrace", 1);
	setenv("CUMEMCAP_GROUP_LIMIT", "1GiB", 1);
	setenv("CUMEMCAP_POOL", "off", 1);
	bool ok = true;
	for (int i = 0; i < rounds && ok; i++) {
		ok = run_child(argv[0], argv[1], "spin", argv[3], argv[4]) &&
		     run_child(argv[0], argv[1], "whole", argv[3], argv[4]);
		if (!ok)
			fprintf(stderr, "exit-race: failed in round %d of %d\n", i + 1, rounds);
	}
	remove_dir(dir);
	if (!ok)
		return 1;
	printf("exit-race (%s door): %d members exited while allocating; the budget stayed whole\n", argv[1],
	       rounds);
	return 0;
}
