/* life: context deaths against everything else the shim does.
 *
 * A context dies (cuCtxDestroy, a primary context's reset or last release)
 * inside the driver, which frees all its memory at once; the shim's books
 * of that context (arena segments and blocks, records, pending frees,
 * cached bytes) must go at the same moment, before any hook can hand out a
 * block of a freed segment, record a pointer the driver is about to reuse,
 * or purge a record of the context revived under the same handle.
 *
 * So every hook that touches the books runs inside a *reader* section
 * (cumemcap_life_enter/exit, around the whole begin -> driver call ->
 * finish), and a death runs as the *writer* (cumemcap_life_lock/unlock):
 * it waits until no hook is inside a section, keeps new ones out, calls
 * the driver, settles the books, and lets them in again. Deaths are rare;
 * a reader costs a plain store on a cache line of its own thread and a
 * load (the writer pays a membarrier for both; where there is none, the
 * reader's store is an exchange), so threads that allocate at once never
 * contend on it and take no locked instruction.
 *
 * Sections nest (a thread already inside one never waits). The writer must
 * not be taken from inside a reader section. */
#pragma once

#include <stdbool.h>

void cumemcap_life_enter(void);
void cumemcap_life_exit(void);

void cumemcap_life_lock(void);
void cumemcap_life_unlock(void);

/* Fork child: forget the parent's other threads' sections and any death
 * under way there (the writer's mutex may be held across a driver call,
 * so fork() does not take it: see xmutex.h). */
void cumemcap_life_fork_child(void);

/* Whether readers publish with plain stores (the process registered for
 * membarrier: see life.c); false before the first section. */
bool cumemcap_life_asymmetric(void);
/* Tests: readers publish with exchanges, as without membarrier. Before
 * the process's first section. */
void cumemcap_life_symmetric(void);
/* Tests: writers' barriers fail from now on (as under a seccomp filter
 * installed after the registration). */
void cumemcap_life_fail_barriers(void);
/* Tests: how many barriers writers have issued. */
unsigned long cumemcap_life_barriers(void);
