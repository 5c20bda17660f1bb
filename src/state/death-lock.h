/* death-lock: orders context deaths against everything else the shim does.
 *
 * A context dies inside the driver, which frees all its memory at once; the
 * shim's records of it must go at the same moment, before any hook can hand
 * out a block of a freed segment, record a pointer the driver will reuse,
 * or purge a record of a context revived under the same handle. So every
 * hook that touches those records holds the lock as a reader around its
 * begin -> driver call -> finish, and a death holds it as the writer. A
 * reader costs a store to its thread's own cache line and a load.
 *
 * Sections nest (a thread inside one never waits). The writer must not be
 * taken from inside a reader section. */
#pragma once

#include <stdbool.h>

void cumemcap_death_lock_read(void);
void cumemcap_death_unlock_read(void);

void cumemcap_death_lock_write(void);
void cumemcap_death_unlock_write(void);

/* Fork child: forget the other threads' sections and any death under way. */
void cumemcap_death_lock_fork_child(void);

/* For tests: whether readers publish with plain stores (false before the
 * first section); make membarrier fail from now on (as on old kernels, or
 * under a later seccomp filter); how many barriers writers have issued. */
bool cumemcap_death_lock_asymmetric(void);
void cumemcap_death_lock_no_membarrier(void);
unsigned long cumemcap_death_lock_barriers(void);
