/* death-lock: the lock that orders context deaths against everything else
 * the shim does.
 *
 * A context dies (cuCtxDestroy, a primary context's reset or last release)
 * inside the driver, which frees all its memory at once; the shim's records
 * of that context (arena segments and blocks, handed-out blocks, pending
 * frees, cached bytes) must go at the same moment, before any hook can hand
 * out a block of a freed segment, record a pointer the driver is about to
 * reuse, or purge a record of the context revived under the same handle.
 *
 * So every hook that touches those records holds it as a *reader* around
 * the whole begin -> driver call -> finish (a reader section), and a death
 * holds it as the *writer*: it waits until no hook is inside a section,
 * keeps new ones out, calls the driver, settles the records, and lets them
 * in again. Deaths are rare, so a reader costs only a store to a cache
 * line of its own thread and a load (death-lock.c).
 *
 * Sections nest (a thread already inside one never waits). The writer must
 * not be taken from inside a reader section. */
#pragma once

#include <stdbool.h>

void cumemcap_death_lock_read(void);
void cumemcap_death_unlock_read(void);

void cumemcap_death_lock_write(void);
void cumemcap_death_unlock_write(void);

/* Fork child: forget the parent's other threads' sections and any death
 * under way there (the writer's mutex may be held across a driver call,
 * so fork() does not take it: see xmutex.h). */
void cumemcap_death_lock_fork_child(void);

/* For tests: whether readers publish with plain stores (false before the
 * first section); make them publish with exchanges (call before the first
 * section); make writers' barriers fail from now on (as under a seccomp
 * filter installed since); how many barriers writers have issued. */
bool cumemcap_death_lock_asymmetric(void);
void cumemcap_death_lock_symmetric(void);
void cumemcap_death_lock_fail_barriers(void);
unsigned long cumemcap_death_lock_barriers(void);
