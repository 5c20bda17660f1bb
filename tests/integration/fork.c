/* fork: the shim stays usable across fork() while other threads are inside
 * it, and a child starts with empty books (it holds none of its parent's
 * GPU memory).
 *
 * Four threads allocate and free in a loop while the main thread forks
 * repeatedly; each child calls into the shim (a refused allocation, the
 * stats) and must neither hang nor see its parent's bytes. A watchdog
 * alarm turns a deadlock into a failure. The forking thread has used a
 * stream, so the shim knows its context without asking the driver: the
 * child's stream-ordered allocation on it must still be the driver's
 * refusal alone, nothing counted. Run with FAKECUDA_DEVICES=4GiB
 * CUMEMCAP_LIMIT=256MiB. */
#include "common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static struct api A;
static struct fake F;
static CUcontext ctx;
static atomic_bool stop;

static void *churn(void *arg)
{
	(void)arg;
	OK(A.cuCtxSetCurrent(ctx));
	while (!atomic_load(&stop)) {
		CUdeviceptr p;
		if (A.cuMemAlloc(&p, 1 * MiB) == CUDA_SUCCESS)
			OK(A.cuMemFree(p));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	load_api(argc, argv, &A, &F);
	ctx = use_primary(&A, 0);
	CUdeviceptr held;
	OK(A.cuMemAlloc(&held, 64 * MiB));
	CUstream s = used_stream(&A);

	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, churn, NULL) == 0);
	for (int round = 0; round < 50; round++) {
		pid_t pid = fork();
		CHECK(pid >= 0);
		if (pid == 0) {
			alarm(10);
			struct cumemcap_stats st = shim_stats(0);
			if (st.reserved != 0 || st.allocs != 0)
				_exit(3); /* the parent's books leaked into the child */
			/* CUDA is unusable in a forked child; the shim must pass the
			 * driver's answer through without blocking on its locks. */
			CUdeviceptr p = 0;
			CUresult r = A.cuMemAlloc(&p, 1 * MiB);
			if (r == CUDA_SUCCESS)
				_exit(4);
			if (A.cuMemAllocAsync(&p, 3 * MiB, s) == CUDA_SUCCESS)
				_exit(5);
			st = shim_stats(0);
			if (st.reserved != 0 || st.allocs != 0 || st.largest_request != 0)
				_exit(6); /* the shim went past the driver's refusal */
			_exit(0);
		}
		int status;
		CHECK(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "fork: child %d ended with status %#x (signal 14 = deadlock)\n",
				round, status);
			return 1;
		}
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	/* The parent's books are intact. */
	CHECK(shim_stats(0).reserved == 64 * MiB);
	OK(A.cuStreamDestroy(s));
	OK(A.cuMemFree(held));
	CHECK(shim_stats(0).reserved == 0);
	CHECK(F.reserved(0) == 0);
	printf("fork: 50 children forked during allocation traffic, none hung or inherited books\n");
	return 0;
}
