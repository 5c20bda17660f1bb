/* xmutex: a mutex that may be held across a call into the driver.
 * fork()'s prepare handler must not take it: the driver's own fork handler
 * may have run first and hold the lock the call under it waits for. So a
 * child, where a thread that did not come along may hold it, gets a fresh
 * one; what it guards must be fine to find half-done there. */
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
		free(m); /* keep the old one */
}
