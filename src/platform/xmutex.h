/* xmutex: a mutex that may be held across a call into the driver.
 *
 * fork() must not take such a mutex in its prepare handler: the driver's
 * own fork handler may have run first and hold the lock that the call
 * under our mutex waits for, and the fork deadlocks. So fork() leaves it
 * alone, and a child, where it may be held by a thread that did not come
 * along, gets a fresh one (the parent's few bytes are left behind). What
 * an xmutex guards must be fine to find half-done in a child; the shim's
 * child empties its records. */
#pragma once

#include <pthread.h>
#include <stdlib.h>

struct cumemcap_xmutex {
	pthread_mutex_t *cur;
	pthread_mutex_t first;
};

#define CUMEMCAP_XMUTEX_INIT(name) { .cur = &(name).first, .first = PTHREAD_MUTEX_INITIALIZER }

static inline void cumemcap_xmutex_lock(struct cumemcap_xmutex *x)
{
	pthread_mutex_lock(x->cur);
}

static inline void cumemcap_xmutex_unlock(struct cumemcap_xmutex *x)
{
	pthread_mutex_unlock(x->cur);
}

/* Fork child (its only thread). */
static inline void cumemcap_xmutex_fork_child(struct cumemcap_xmutex *x)
{
	pthread_mutex_t *m = malloc(sizeof(*m));
	if (m && pthread_mutex_init(m, NULL) == 0)
		x->cur = m;
	else
		free(m); /* out of memory in a fresh child: keep the old one */
}
