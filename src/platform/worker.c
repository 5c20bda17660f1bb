/* worker: see worker.h. One mutex and condition variable guard its state. */
#include "platform/worker.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static _Atomic bool started;
static bool stopping;
static _Atomic cumemcap_tick_fn ticks[CUMEMCAP_WORKER_TICKS];

bool cumemcap_worker_register(cumemcap_tick_fn tick)
{
	bool ok = false;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < CUMEMCAP_WORKER_TICKS; i++) {
		cumemcap_tick_fn t = atomic_load_explicit(&ticks[i], memory_order_relaxed);
		if (t == tick || !t) {
			atomic_store_explicit(&ticks[i], tick, memory_order_release);
			ok = true;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return ok;
}

uint64_t cumemcap_now_ms(void)
{
	/* Coarse (a few ms) suffices for idle timers, cheap at a pooled reuse. */
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
		clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void *run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!stopping) {
		pthread_mutex_unlock(&lock);
		uint64_t now = cumemcap_now_ms();
		uint32_t wait = 1000; /* at least once a second */
		for (int i = 0; i < CUMEMCAP_WORKER_TICKS; i++) {
			cumemcap_tick_fn t = atomic_load_explicit(&ticks[i], memory_order_acquire);
			if (!t)
				break;
			uint32_t w = t(now);
			if (w < wait)
				wait = w;
		}
		if (wait < 10)
			wait = 10;
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)wait * 1000000L; /* at most 1 s: no overflow */
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&lock);
		while (!stopping && pthread_cond_timedwait(&wake, &lock, &until) == 0)
			;
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

void cumemcap_worker_start(void)
{
	if (atomic_load_explicit(&started, memory_order_acquire))
		return;
	pthread_mutex_lock(&lock);
	if (!atomic_load(&started) && !stopping) {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_destroy(&wake);
		pthread_cond_init(&wake, &ca);
		pthread_condattr_destroy(&ca);

		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		pthread_t t;
		if (pthread_create(&t, &attr, run, NULL) == 0)
			atomic_store_explicit(&started, true, memory_order_release);
		pthread_attr_destroy(&attr);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&lock);
}

void cumemcap_worker_stop(void)
{
	pthread_mutex_lock(&lock);
	stopping = true;
	pthread_cond_signal(&wake);
	pthread_mutex_unlock(&lock);
}

void cumemcap_worker_lock(void)
{
	pthread_mutex_lock(&lock);
}

void cumemcap_worker_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

void cumemcap_worker_fork_child(void)
{
	/* The thread did not come along; the next GPU use starts one. */
	atomic_store(&started, false);
	pthread_mutex_unlock(&lock);
}
