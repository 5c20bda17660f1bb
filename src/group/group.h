/* group: this process's place in a group's book (CUMEMCAP_GROUP) or the
 * node registry, and the words its waiting threads sleep on
 * (CUMEMCAP_ON_LIMIT=wait). docs/groups.md tells the protocol.
 *
 * A member's `held` (book.h) is what it counts plus its spare, the `room`
 * here. A grant past the room adds to `held`, then sums every member's and
 * takes the addition back past the limit: both seq_cst, so of two members
 * growing at once one sees the other. The overhead is added without asking.
 *
 * Any member may remove, replace or truncate the file: a member looks at
 * its descriptor once a second and before each reap or grant it asks for,
 * follows a book removed or replaced, and gives up one cut short (a touch
 * before that is a SIGBUS: cumemcap_mapped_fault).
 *
 * Thread safety: the room and the counters are atomics; joining, claiming
 * and reaping take one mutex, never held across a driver call or a wait.
 * A fork child leaves its parent's slot and takes its own at its next use. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/policy.h"
#include "platform/cuda-api.h"
#include "group/book.h"

struct cumemcap_group_dev {
	_Atomic int64_t room; /* held here and not counted; may go below 0 (the overhead grew) */
	_Atomic bool on;      /* the group's book counts this GPU */
	_Atomic int gpu;      /* its index in the book's GPU table (set once attached) */
	_Atomic uint64_t chunk; /* spare taken with a grant; twice it kept after a free */
};

extern struct cumemcap_group_dev cumemcap_group_devs[CUMEMCAP_MAX_DEVICES];

/* Join the group the policy names (creating its book), or else, with any
 * limit, the node registry at the first GPU's attach. False with one line
 * in err when the group cannot be joined: the process must not run. A
 * registry that cannot be made is left out quietly, one unusable said once. */
bool cumemcap_group_start(const struct cumemcap_policy *p, char *err, size_t errlen);

/* Whether this process is in a group. */
bool cumemcap_group_member(void);

/* GPU `dev` became known: find or add it in the book (with the policy's
 * group limit when new). */
void cumemcap_group_attach(int dev, const unsigned char uuid[16], const char *pci, uint64_t total,
			   uint64_t own_limit);

/* Bit 0 while in a group, plus 2 per thread of this process waiting for
 * room: one load tells an allocation's way whether to look at the group. */
extern _Atomic uint32_t cumemcap_group_hot;

/* Reserve `bytes` of the group's budget on `dev`, from the room or else by
 * growing `held`. False, nothing taken: the budget does not allow it. */
bool cumemcap_group_take_member(int dev, uint64_t bytes);

/* What this process counts on `dev` went down by `bytes`: the room grows,
 * spare past two chunks goes back to the group, waiting threads wake. */
void cumemcap_group_give_member(int dev, uint64_t bytes);
void cumemcap_group_wake_local(void);
static inline void cumemcap_group_give(int dev, uint64_t bytes)
{
	if (__builtin_expect(atomic_load_explicit(&cumemcap_group_hot, memory_order_relaxed) != 0, 0))
		cumemcap_group_give_member(dev, bytes);
}

/* What this process counts on `dev` went up by `bytes` without asking (a
 * pool's real figure, the overhead): `held` follows, past the limit too. */
void cumemcap_group_force(int dev, uint64_t bytes);

/* ---- waiting -------------------------------------------------------------------------------- */

/* A thread begins (+1) or ends (-1) waiting for room on dev; before its
 * last try it reads the word it sleeps on (so that room made between that
 * try and the sleep wakes it), then sleeps until the word moves from `seq`
 * or `ms` pass. Reap returns the share of members that died. */
void cumemcap_group_waiting(int dev, int delta);
uint32_t cumemcap_group_wake_seq(void);
void cumemcap_group_sleep(uint32_t seq, uint32_t ms);
void cumemcap_group_reap(void);

/* ---- the worker, `top`, the log ----------------------------------------------------------- */

/* Every second: reap dead members, hand back spare when squeezed. */
void cumemcap_group_tick(void);

/* What a member publishes of one GPU's figures (the ledger's, by name). */
struct cumemcap_group_figures {
	uint64_t live, pooled, reserved, footprint, refusals, waits;
};

/* Whether dev has an entry to publish to; publish there (every second). */
bool cumemcap_group_publishes(int dev);
void cumemcap_group_publish(int dev, const struct cumemcap_group_figures *f);

/* The next limit change of the group's book since joining or the last
 * call, and the changed GPU's uuid; false when there is none. */
bool cumemcap_group_next_change(struct cumemcap_book_change *out, unsigned char uuid[16]);

/* The group's name and its book's path ("" when in none). */
const char *cumemcap_group_name(void);
const char *cumemcap_group_path(void);

/* For the log and metrics: the group's limit on `dev` (CUMEMCAP_BOOK_NONE:
 * none), what all members hold, what this one holds; UINT64_MAX when not
 * in a group. */
uint64_t cumemcap_group_limit(int dev);
uint64_t cumemcap_group_used(int dev);
uint64_t cumemcap_group_held(int dev);

/* The group's budget on `dev` and what this member could still take (what
 * no member holds, plus its room); false in no group or with no budget on
 * dev. Sums every member's share: for cuMemGetInfo and NVML, not for an
 * allocation's way. */
static inline bool cumemcap_group_capacity(int dev, uint64_t *budget, uint64_t *room)
{
	uint64_t limit = cumemcap_group_limit(dev);
	if (limit == CUMEMCAP_BOOK_NONE) /* UINT64_MAX: no group either */
		return false;
	uint64_t used = cumemcap_group_used(dev);
	uint64_t left = used < limit ? limit - used : 0;
	int64_t spare = atomic_load(&cumemcap_group_devs[dev].room);
	if (spare >= 0)
		*room = left > UINT64_MAX - (uint64_t)spare ? UINT64_MAX : left + (uint64_t)spare;
	else /* the overhead grew past the share */
		*room = left > (uint64_t)0 - (uint64_t)spare ? left - ((uint64_t)0 - (uint64_t)spare) : 0;
	*budget = limit;
	return true;
}

/* The process is ending: hand back the slot once no other thread uses it
 * (group.c: slot_enter), and refuse grants from then on. A user still
 * inside after 200 ms (a thread this one interrupted) keeps the slot for
 * a reaper. */
void cumemcap_group_leave(void);

/* Fork child: leave the parent's slot; take one at the next use. */
void cumemcap_group_fork_child(void);
