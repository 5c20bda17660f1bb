/* capture: see capture.h. Captures are few: a fixed array, and a count past it. */
#include "state/capture.h"

#include "driver/driver.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define MAX_TRACKED 256

static _Atomic int captures;

static struct entry {
	CUstream stream;
	pthread_t thread; /* for a per-thread default stream: whose */
	bool per_thread;
} set[MAX_TRACKED];
static int used;
static int untracked; /* began past the array's end: counted, never matched */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* The quiet gate: shared by quiet sections, exclusive around a beginning. */
static pthread_rwlock_t first_gate = PTHREAD_RWLOCK_INITIALIZER;
static pthread_rwlock_t *gate = &first_gate;

static bool active(void)
{
	return atomic_load_explicit(&captures, memory_order_acquire) > 0;
}

/* A per-thread default stream is one handle for every thread. */
static bool is_per_thread(CUstream s, bool ptsz)
{
	return s == CU_STREAM_PER_THREAD || (ptsz && s == NULL);
}

static int find(CUstream s, bool pt)
{
	for (int i = 0; i < used; i++)
		if (set[i].stream == s && set[i].per_thread == pt &&
		    (!pt || pthread_equal(set[i].thread, pthread_self())))
			return i;
	return -1;
}

void cumemcap_capture_began(CUstream stream, bool ptsz)
{
	bool pt = is_per_thread(stream, ptsz);
	pthread_mutex_lock(&lock);
	if (find(stream, pt) < 0) {
		if (used < MAX_TRACKED)
			set[used++] = (struct entry){ .stream = stream, .thread = pthread_self(), .per_thread = pt };
		else
			untracked++;
		atomic_fetch_add_explicit(&captures, 1, memory_order_release);
	}
	pthread_mutex_unlock(&lock);
}

void cumemcap_capture_ended(CUstream stream, bool ptsz)
{
	bool pt = is_per_thread(stream, ptsz);
	pthread_mutex_lock(&lock);
	int i = find(stream, pt);
	if (i >= 0) {
		set[i] = set[--used];
		atomic_fetch_sub_explicit(&captures, 1, memory_order_release);
	} else if (untracked > 0) {
		untracked--;
		atomic_fetch_sub_explicit(&captures, 1, memory_order_release);
	}
	pthread_mutex_unlock(&lock);
}

void cumemcap_capture_lock(void)
{
	pthread_mutex_lock(&lock);
}

void cumemcap_capture_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

void cumemcap_capture_fork_child(void)
{
	used = untracked = 0;
	atomic_store(&captures, 0);
	pthread_mutex_unlock(&lock);
	pthread_rwlock_t *g = malloc(sizeof(*g));
	if (g && pthread_rwlock_init(g, NULL) == 0)
		gate = g;
	else
		free(g);
}

bool cumemcap_capture_quiet_enter(void)
{
	if (active() || pthread_rwlock_tryrdlock(gate) != 0)
		return false;
	if (!active())
		return true;
	pthread_rwlock_unlock(gate);
	return false;
}

void cumemcap_capture_quiet_exit(void)
{
	pthread_rwlock_unlock(gate);
}

void cumemcap_capture_begin_lock(void)
{
	pthread_rwlock_wrlock(gate);
}

void cumemcap_capture_begin_unlock(void)
{
	pthread_rwlock_unlock(gate);
}

bool cumemcap_capture_stream(CUstream stream, bool ptsz)
{
	if (!active())
		return false;
	CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
	return cumemcap_driver_stream_capturing(stream, ptsz, &st) && st != CU_STREAM_CAPTURE_STATUS_NONE;
}
