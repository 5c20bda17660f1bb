/* Unit tests for src/state/death-lock.c: the death lock's readers against its
 * writer, with the readers' plain stores (membarrier) and with exchanges. */
#include "config.h"

#include <limits.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "state/death-lock.h"
#include "test-common.h"

static bool kernel_has_membarrier(void)
{
#if defined(__SANITIZE_THREAD__)
	return false; /* death-lock.c keeps to exchanges under ThreadSanitizer */
#else
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED);
#endif
}

/* Readers enter and, inside, look for the writer; the writer, inside,
 * says so. A reader that ever sees the writer inside its own section
 * broke the exclusion. */
static _Atomic int writer_inside, stop;
static _Atomic unsigned long seen, sections, deaths;

static void *reader(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		cumemcap_death_lock_read();
		for (int i = 0; i < 256; i++)
			if (atomic_load_explicit(&writer_inside, memory_order_relaxed))
				atomic_fetch_add(&seen, 1);
		cumemcap_death_unlock_read();
		atomic_fetch_add_explicit(&sections, 1, memory_order_relaxed);
	}
	return NULL;
}

static void *writer_thread(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		cumemcap_death_lock_write();
		atomic_store_explicit(&writer_inside, 1, memory_order_relaxed);
		for (volatile int i = 0; i < 200; i++)
			;
		atomic_store_explicit(&writer_inside, 0, memory_order_relaxed);
		cumemcap_death_unlock_write();
		atomic_fetch_add_explicit(&deaths, 1, memory_order_relaxed);
	}
	return NULL;
}

/* Run readers against the writer until it has made `deaths_wanted`
 * deaths or `seconds` passed (a loaded machine starves the writer). */
static void exclusion_run(unsigned long deaths_wanted, double seconds)
{
	enum { READERS = 3 };
	pthread_t r[READERS], w;
	atomic_store(&stop, 0);
	for (int i = 0; i < READERS; i++)
		ck_assert_int_eq(pthread_create(&r[i], NULL, reader, NULL), 0);
	ck_assert_int_eq(pthread_create(&w, NULL, writer_thread, NULL), 0);
	struct timespec tick = { .tv_nsec = 10 * 1000 * 1000 };
	for (double waited = 0; waited < seconds && atomic_load(&deaths) < deaths_wanted; waited += 0.01)
		nanosleep(&tick, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < READERS; i++)
		pthread_join(r[i], NULL);
	pthread_join(w, NULL);
	ck_assert_uint_gt(atomic_load(&sections), 0);
	ck_assert_uint_gt(atomic_load(&deaths), 0);
	ck_assert_msg(atomic_load(&seen) == 0, "a reader saw the writer inside its section %lu times in %lu sections",
		      atomic_load(&seen), atomic_load(&sections));
}

/* Readers publish with plain stores where the kernel has membarrier. */
START_TEST(death_lock_readers_exclude_writer)
{
	cumemcap_death_lock_read();
	cumemcap_death_unlock_read();
	ck_assert_int_eq(cumemcap_death_lock_asymmetric(), kernel_has_membarrier());
	/* Each writer issues the barrier that makes the readers' plain
	 * stores visible (the run below can only catch its absence by
	 * chance: a store-buffer race). */
	unsigned long before = cumemcap_death_lock_barriers();
	cumemcap_death_lock_write();
	cumemcap_death_unlock_write();
	ck_assert_uint_eq(cumemcap_death_lock_barriers() - before,
			  (cumemcap_death_lock_asymmetric() ? 1u : 0u));
	exclusion_run(ULONG_MAX, 2.0);
}
END_TEST

/* Without membarrier (cumemcap_death_lock_no_membarrier: as on old kernels,
 * valgrind), readers publish with exchanges, as correct. */
START_TEST(death_lock_readers_exclude_writer_without_membarrier)
{
	cumemcap_death_lock_no_membarrier();
	cumemcap_death_lock_read();
	cumemcap_death_unlock_read();
	ck_assert(!cumemcap_death_lock_asymmetric());
	unsigned long before = cumemcap_death_lock_barriers();
	cumemcap_death_lock_write();
	cumemcap_death_unlock_write();
	ck_assert_uint_eq(cumemcap_death_lock_barriers(), before);
	exclusion_run(ULONG_MAX, 0.5);
}
END_TEST

/* A writer whose barrier fails sends every reader back to exchanges, and
 * the exclusion holds. */
START_TEST(death_lock_failed_barrier_falls_back)
{
	if (!kernel_has_membarrier())
		return;
	cumemcap_death_lock_read();
	cumemcap_death_unlock_read();
	ck_assert(cumemcap_death_lock_asymmetric());
	cumemcap_death_lock_no_membarrier();
	cumemcap_death_lock_write();
	cumemcap_death_unlock_write();
	ck_assert(!cumemcap_death_lock_asymmetric());
	exclusion_run(ULONG_MAX, 0.5);
}
END_TEST

/* A fork child keeps the readers' mode and its writer works there. */
START_TEST(death_lock_fork_child_keeps_barrier)
{
	cumemcap_death_lock_read();
	cumemcap_death_unlock_read();
	bool mode = cumemcap_death_lock_asymmetric();
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		cumemcap_death_lock_fork_child();
		if (cumemcap_death_lock_asymmetric() != mode)
			_exit(3);
		cumemcap_death_lock_read();
		cumemcap_death_unlock_read();
		exclusion_run(ULONG_MAX, 0.5);
		_exit(0);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST

TEST_SUITE(death_lock)
{
	Suite *s = suite_create("death_lock");
	TCase *tc = tcase_create("death_lock");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, death_lock_readers_exclude_writer);
	tcase_add_test(tc, death_lock_readers_exclude_writer_without_membarrier);
	tcase_add_test(tc, death_lock_fork_child_keeps_barrier);
	tcase_add_test(tc, death_lock_failed_barrier_falls_back);
	suite_add_tcase(s, tc);
	return s;
}
