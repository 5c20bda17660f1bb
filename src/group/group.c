/* group: see group.h, which says how it is thread-safe; `join_lock` is an
 * xmutex (a child gets a fresh one). */
#include "group/group.h"

#include <sched.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "platform/msg.h"
#include "platform/worker.h"
#include "platform/xmutex.h"

struct cumemcap_group_dev cumemcap_group_devs[CUMEMCAP_MAX_DEVICES];
_Atomic uint32_t cumemcap_group_hot;
static _Atomic uint32_t no_squeeze;
static _Atomic uint32_t *_Atomic squeeze_word = &no_squeeze; /* the book's squeeze, or a local zero */
static _Atomic uint32_t squeeze_seen; /* the last squeeze this process answered (a hint) */

static struct cumemcap_xmutex join_lock = CUMEMCAP_XMUTEX_INIT(join_lock);
static struct cumemcap_book book; /* the group's book, or the registry */
static _Atomic bool booked;       /* book is open */
static bool in_group;             /* it is a group's */
static _Atomic int self = -1;     /* our slot */
static _Atomic bool rejoin;       /* a fork child: take a slot of our own first */
static char group_name[CUMEMCAP_BOOK_NAME_MAX + 1];
static _Atomic bool want_registry; /* join the node registry at the first attach */
static char registry_path[CUMEMCAP_PATH_MAX + 64], registry_uid[16];
static char program[CUMEMCAP_BOOK_PROGRAM_MAX];
static enum cumemcap_book_access access_mode;
static gid_t access_gid = (gid_t)-1; /* gid:GROUP: GROUP's gid */
static _Atomic uint32_t local_wake; /* the word waiters sleep on without a group */
static uint64_t changes_seen; /* the last change_seq logged, or at the join; join_lock */
/* Whether each GPU has its entry in the book, and this process's facts
 * about it (not the file's), for a new book. */
static struct {
	_Atomic bool in_book;
	unsigned char uuid[16];
	char pci[16];
	uint64_t total;
} attached[CUMEMCAP_MAX_DEVICES];

/* A share added to a free slot stays counted for ever, and the destructor
 * frees the slot while other threads may be in the shim. So every use of
 * the slot (or `book`) outside join_lock sits between slot_enter() and
 * slot_exit(), and whoever frees or replaces the slot waits until none is
 * inside. Dekker's pattern, seq_cst: a user counts itself in, then looks
 * at `leaving`; the leaver sets it, then looks at the count. While
 * `pausing` (the book being replaced) users wait outside. */
static _Atomic uint32_t slot_users;
static _Atomic bool leaving, pausing;

/* Our slot, or -1 (none, or leaving): then nothing to undo. */
static int slot_enter(void)
{
	for (;;) {
		atomic_fetch_add(&slot_users, 1);
		int s = self;
		if (s >= 0 && !atomic_load(&leaving) && !atomic_load(&pausing))
			return s;
		atomic_fetch_sub(&slot_users, 1);
		if (!atomic_load(&pausing))
			return -1;
		while (atomic_load(&pausing))
			sched_yield();
	}
}

static void slot_exit(void)
{
	atomic_fetch_sub(&slot_users, 1);
}

static struct cumemcap_book_figs *figs(int s, int dev)
{
	return &cumemcap_book_slot(&book, (unsigned)s)->gpu[cumemcap_group_devs[dev].gpu];
}

/* ---- joining ------------------------------------------------------------------------------ */

/* Open the group's book or the registry at `path` (creating it when
 * `create`) and take a slot; join_lock held. */
static bool join_locked(const char *path, const char *name, bool create, char *why, size_t len)
{
	enum cumemcap_book_kind kind = in_group ? CUMEMCAP_BOOK_GROUP : CUMEMCAP_BOOK_REGISTRY;
	if (!cumemcap_book_open(&book, path, kind, name, access_mode, access_gid, create, why, len))
		return false;
	int slot = cumemcap_book_claim(&book, program);
	if (slot < 0) {
		snprintf(why, len,
			 create ? "all %u member slots are taken by live processes" : "no free slot",
			 CUMEMCAP_BOOK_SLOTS);
		cumemcap_book_close(&book);
		return false;
	}
	self = slot;
	if (in_group) {
		squeeze_word = &cumemcap_book_header(&book)->squeeze;
		atomic_fetch_or(&cumemcap_group_hot, 1);
	}
	atomic_store(&booked, true);
	return true;
}

bool cumemcap_group_start(const struct cumemcap_policy *p, char *err, size_t errlen)
{
	cumemcap_copy(program, sizeof(program), p->program);
	char path[CUMEMCAP_PATH_MAX + 64], why[256];
	bool ok = true;
	cumemcap_xmutex_lock(&join_lock);
	if (p->group[0]) {
		in_group = true;
		if (p->group_gid) {
			access_mode = CUMEMCAP_BOOK_GID;
			access_gid = (gid_t)p->group_gid_id;
		}
		cumemcap_copy(group_name, sizeof(group_name), p->group);
		if (!cumemcap_book_path(path, sizeof(path), p->group_dir, CUMEMCAP_BOOK_GROUP, p->group)) {
			snprintf(err, errlen, "CUMEMCAP_GROUP=%s: the path of its book under %s is too long", p->group,
				 p->group_dir);
			ok = false;
		} else if (!join_locked(path, p->group, true, why, sizeof(why))) {
			snprintf(err, errlen, "CUMEMCAP_GROUP=%s: %s: %s", p->group, path, why);
			ok = false;
		} else {
			atomic_store(&squeeze_seen, atomic_load(squeeze_word));
			changes_seen = atomic_load(&cumemcap_book_header(&book)->change_seq);
		}
	} else if (!p->secure && cumemcap_policy_any_limit(p)) {
		snprintf(registry_uid, sizeof(registry_uid), "%u", (unsigned)geteuid());
		atomic_store(&want_registry, cumemcap_book_path(registry_path, sizeof(registry_path), p->group_dir,
								 CUMEMCAP_BOOK_REGISTRY, registry_uid));
	}
	cumemcap_xmutex_unlock(&join_lock);
	return ok;
}

bool cumemcap_group_member(void)
{
	return in_group && atomic_load(&booked);
}

const char *cumemcap_group_name(void)
{
	return in_group ? group_name : "";
}

const char *cumemcap_group_path(void)
{
	return in_group ? book.path : "";
}

/* A fork child takes a slot of its own before its first use; join_lock held. */
static void rejoin_locked(void)
{
	if (!atomic_load(&rejoin))
		return;
	atomic_store(&rejoin, false);
	char why[256], path[sizeof(book.path)];
	cumemcap_copy(path, sizeof(path), book.path);
	/* In a group, `on` stays set with no room: every grant is refused. */
	if (!join_locked(path, NULL, false, why, sizeof(why)) && in_group)
		cumemcap_msg("CUMEMCAP_GROUP=%s: a forked child cannot join %s (%s): it gets no memory on "
			     "the group's GPUs", group_name, path, why);
}

/* ---- GPUs ---------------------------------------------------------------------------------- */

void cumemcap_group_attach(int dev, const unsigned char uuid[16], const char *pci, uint64_t total,
			   uint64_t own_limit)
{
	if ((unsigned)dev >= CUMEMCAP_MAX_DEVICES || atomic_load(&leaving) ||
	    (!atomic_load(&booked) && !atomic_load(&rejoin) && !atomic_load(&want_registry)))
		return;
	uint64_t limit = in_group ? cumemcap_policy_limit(cumemcap_policy(), true, dev, uuid, pci, total, NULL)
				  : CUMEMCAP_BOOK_NONE;
	cumemcap_xmutex_lock(&join_lock);
	if (atomic_load(&leaving)) { /* the destructor's leave came first */
		cumemcap_xmutex_unlock(&join_lock);
		return;
	}
	rejoin_locked();
	if (!atomic_load(&booked) && atomic_load(&want_registry)) {
		char why[256];
		if (!join_locked(registry_path, registry_uid, true, why, sizeof(why))) {
			atomic_store(&want_registry, false); /* not asked again */
			struct stat st; /* said when it is there, not when it cannot be made */
			if (lstat(registry_path, &st) == 0)
				cumemcap_msg("CUMEMCAP_GROUP_DIR: the registry %s cannot be used (%s); this process "
					     "runs under its own limits, unseen by `cumemcap top`", registry_path, why);
		}
	}
	int g = atomic_load(&booked) ? cumemcap_book_gpu_find(&book, uuid, pci, total, limit) : -1;
	struct cumemcap_group_dev *gd = &cumemcap_group_devs[dev];
	if (g < 0 && in_group) {
		cumemcap_msg("CUMEMCAP_GROUP=%s: %s knows %u GPUs already; GPU %d gets no memory in the group",
			     group_name, book.path, CUMEMCAP_BOOK_GPUS, dev);
		gd->gpu = -1; /* its room stays 0 (attached once): refused, never uncapped */
		atomic_store(&gd->on, true);
	} else if (g >= 0 && self >= 0) {
		gd->gpu = g;
		memcpy(attached[dev].uuid, uuid, 16);
		cumemcap_copy(attached[dev].pci, sizeof(attached[dev].pci), pci ? pci : "");
		attached[dev].total = total;
		attached[dev].in_book = true;
		struct cumemcap_book_figs *f = figs(self, dev); /* join_lock: leave waits for it */
		atomic_store(&f->ordinal, dev);
		atomic_store(&f->limit, own_limit); /* UINT64_MAX is CUMEMCAP_BOOK_NONE */
		uint64_t budget = atomic_load(&cumemcap_book_gpu(&book, (unsigned)g)->limit);
		uint64_t c = budget == CUMEMCAP_BOOK_NONE ? (64ull << 20) : budget / 256;
		gd->chunk = c < (2ull << 20) ? 2ull << 20 : c > (64ull << 20) ? 64ull << 20 : c;
		if (in_group)
			atomic_store(&gd->on, true);
	}
	cumemcap_xmutex_unlock(&join_lock);
}

static bool ready(int dev)
{
	if (atomic_load(&rejoin)) {
		cumemcap_xmutex_lock(&join_lock);
		rejoin_locked();
		cumemcap_xmutex_unlock(&join_lock);
	}
	return atomic_load(&booked) && self >= 0 && cumemcap_group_devs[dev].gpu >= 0;
}

/* ---- a book removed, replaced or truncated ------------------------------------------------- */

/* Wait until no thread uses the slot; false after 200 ms (group.h: leave).
 * join_lock held, pausing or leaving set. */
static bool drain_slot_users(void)
{
	uint64_t until = cumemcap_now_ms() + 200;
	while (atomic_load(&slot_users) && cumemcap_now_ms() < until)
		sched_yield();
	return !atomic_load(&slot_users);
}

/* Stop using the book, for own limits only. The mapping stays (a thread
 * may hold a pointer into it); the descriptor and the slot's lock go.
 * join_lock held, pausing set. */
static void give_up_locked(const char *what)
{
	if (in_group)
		cumemcap_msg("CUMEMCAP_GROUP=%s: %s %s; this process leaves the group and runs under its own "
			     "limits", group_name, book.path, what);
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++) {
		atomic_store(&cumemcap_group_devs[d].on, false);
		atomic_store(&cumemcap_group_devs[d].room, 0);
		attached[d].in_book = false;
	}
	atomic_fetch_and(&cumemcap_group_hot, ~1u);
	atomic_store(&booked, false);
	atomic_store(&want_registry, false);
	squeeze_word = &no_squeeze;
	self = -1;
	if (book.fd >= 0)
		close(book.fd);
	book.fd = -1;
}

/* Go on in the book now at book.path: claim a slot, attach the GPUs again
 * and carry what this process holds. The old mapping stays, and is `book`
 * until the new one is whole, for sleepers that read it without the slot.
 * join_lock held, pausing set, no slot users. */
static void move_locked(void)
{
	struct cumemcap_book old = book, fresh;
	int old_self = self;
	char why[256];
	if (!cumemcap_book_open(&fresh, old.path, in_group ? CUMEMCAP_BOOK_GROUP : CUMEMCAP_BOOK_REGISTRY,
				in_group ? group_name : registry_uid, access_mode, access_gid, true, why,
				sizeof(why))) {
		char what[320];
		snprintf(what, sizeof(what), "was removed and the book now there cannot be used (%s)", why);
		give_up_locked(what);
		return;
	}
	int slot = cumemcap_book_claim(&fresh, program), gpus[CUMEMCAP_MAX_DEVICES];
	bool ok = slot >= 0;
	for (int d = 0; ok && d < CUMEMCAP_MAX_DEVICES; d++) {
		if (!attached[d].in_book)
			continue;
		/* The group's limit as it is now, not as this member started. */
		unsigned g = (unsigned)cumemcap_group_devs[d].gpu;
		gpus[d] = cumemcap_book_gpu_find(&fresh, attached[d].uuid, attached[d].pci, attached[d].total,
						 atomic_load(&cumemcap_book_gpu(&old, g)->limit));
		ok = gpus[d] >= 0;
	}
	if (!ok) {
		if (slot >= 0)
			cumemcap_book_release(&fresh, slot);
		cumemcap_book_close(&fresh);
		give_up_locked("was removed and the book now there has no room for this process");
		return;
	}
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++) {
		if (!attached[d].in_book)
			continue;
		cumemcap_book_carry(&old, (unsigned)old_self, (unsigned)cumemcap_group_devs[d].gpu, &fresh,
				    (unsigned)slot, (unsigned)gpus[d]);
		cumemcap_group_devs[d].gpu = gpus[d];
	}
	book = fresh;
	self = slot;
	if (in_group) {
		cumemcap_book_wake(&cumemcap_book_header(&old)->wake); /* its sleepers find the new word */
		squeeze_word = &cumemcap_book_header(&book)->squeeze;
		atomic_store(&squeeze_seen, atomic_load(squeeze_word));
	}
	changes_seen = atomic_load(&cumemcap_book_header(&book)->change_seq);
	cumemcap_book_release(&old, old_self); /* our share leaves the old book */
	close(old.fd);
}

/* Whether the book may still be used, after a move to a new book or
 * giving it up when it was removed or truncated. Takes join_lock: never on
 * a common path. */
static bool book_sound(void)
{
	uint64_t size = 0;
	if (!atomic_load(&booked))
		return false;
	cumemcap_xmutex_lock(&join_lock);
	enum cumemcap_book_fate fate = CUMEMCAP_BOOK_SOUND;
	if (atomic_load(&booked) && !atomic_load(&leaving))
		fate = cumemcap_book_fate(&book, &size);
	if (fate != CUMEMCAP_BOOK_SOUND) {
		atomic_store(&pausing, true);
		char what[96];
		snprintf(what, sizeof(what), "was cut to %llu bytes by another process", (unsigned long long)size);
		if (drain_slot_users() && fate == CUMEMCAP_BOOK_CUT)
			give_up_locked(what);
		else if (fate == CUMEMCAP_BOOK_REMOVED && !atomic_load(&slot_users))
			move_locked(); /* drained: no user came back while pausing is set */
		atomic_store(&pausing, false);
	}
	bool sound = atomic_load(&booked);
	cumemcap_xmutex_unlock(&join_lock);
	return sound;
}

/* ---- the budget ---------------------------------------------------------------------------- */

/* Whether the group asked for spare back since this process last gave. */
static bool squeezed(void)
{
	return atomic_load_explicit(squeeze_word, memory_order_relaxed) !=
	       atomic_load_explicit(&squeeze_seen, memory_order_relaxed);
}

bool cumemcap_group_take_member(int dev, uint64_t bytes)
{
	struct cumemcap_group_dev *gd = &cumemcap_group_devs[dev];
	if (!atomic_load_explicit(&gd->on, memory_order_relaxed))
		return true;
	int64_t r = atomic_load_explicit(&gd->room, memory_order_relaxed);
	while (bytes <= INT64_MAX && r >= (int64_t)bytes)
		if (atomic_compare_exchange_weak_explicit(&gd->room, &r, r - (int64_t)bytes, memory_order_relaxed,
							  memory_order_relaxed))
			return true;
	/* Grow `held`: with a spare chunk, then without, else squeeze the others. */
	if (!book_sound() && !atomic_load(&gd->on))
		return true; /* the group's book was given up: own limits only */
	if (bytes > INT64_MAX / 2 || !ready(dev))
		return false;
	int s = slot_enter();
	if (s < 0)
		return false;
	struct cumemcap_book_header *h = cumemcap_book_header(&book);
	struct cumemcap_book_gpu *gpu = cumemcap_book_gpu(&book, (unsigned)gd->gpu);
	_Atomic uint64_t *held = &figs(s, dev)->held;
	bool ok = false;
	for (int attempt = 0; !ok && attempt < 16; attempt++) {
		r = atomic_load(&gd->room);
		if (r >= (int64_t)bytes) {
			ok = atomic_compare_exchange_weak(&gd->room, &r, r - (int64_t)bytes);
			continue;
		}
		uint64_t need = bytes - (uint64_t)r; /* r < 0 (the overhead grew) adds to it */
		uint64_t limit = atomic_load(&gpu->limit);
		uint64_t want = need + (atomic_load(&h->tight) ? 0 : gd->chunk);
		for (;;) {
			atomic_fetch_add(held, want); /* seq_cst: see group.h */
			uint64_t used = limit == CUMEMCAP_BOOK_NONE ? 0 : cumemcap_book_used(&book, (unsigned)gd->gpu);
			if (limit == CUMEMCAP_BOOK_NONE || used <= limit) {
				if (limit != CUMEMCAP_BOOK_NONE) {
					uint32_t tight = used > limit / 4 * 3;
					if (atomic_load(&h->tight) != tight && (tight || used < limit / 2))
						atomic_store(&h->tight, tight);
				}
				atomic_fetch_add(&gd->room, (int64_t)want);
				break;
			}
			atomic_fetch_sub(held, want);
			if (want == need) {
				atomic_store(&h->tight, 1);
				atomic_fetch_add(squeeze_word, 1);
				goto out;
			}
			want = need;
		}
	}
out:
	slot_exit();
	return ok;
}

/* Hand back the room past what may be kept: a chunk, none when the group
 * is tight or asked for spare back. */
static void give_back(int dev)
{
	struct cumemcap_group_dev *gd = &cumemcap_group_devs[dev];
	if (!ready(dev))
		return;
	uint32_t sq = atomic_load(squeeze_word);
	bool asked = sq != atomic_load(&squeeze_seen);
	if (asked)
		atomic_store(&squeeze_seen, sq); /* a racy hint: a lost update only gives back twice */
	int s = slot_enter();
	if (s < 0)
		return;
	int64_t keep = asked || atomic_load(&cumemcap_book_header(&book)->tight) ? 0 : (int64_t)gd->chunk;
	int64_t r = atomic_load(&gd->room);
	while (r > keep && !atomic_compare_exchange_weak(&gd->room, &r, keep))
		;
	if (r > keep) {
		atomic_fetch_sub(&figs(s, dev)->held, (uint64_t)(r - keep));
		cumemcap_book_wake(&cumemcap_book_header(&book)->wake);
	}
	slot_exit();
}

void cumemcap_group_give_member(int dev, uint64_t bytes)
{
	struct cumemcap_group_dev *g = &cumemcap_group_devs[dev];
	if (atomic_load_explicit(&g->on, memory_order_relaxed)) {
		int64_t r = atomic_fetch_add_explicit(&g->room, (int64_t)bytes, memory_order_relaxed) + (int64_t)bytes;
		if (r > (int64_t)(2 * g->chunk) || squeezed())
			give_back(dev);
	}
	if (atomic_load_explicit(&cumemcap_group_hot, memory_order_relaxed) > 1)
		cumemcap_group_wake_local();
}

void cumemcap_group_force(int dev, uint64_t bytes)
{
	struct cumemcap_group_dev *gd = &cumemcap_group_devs[dev];
	if (!atomic_load_explicit(&gd->on, memory_order_relaxed) || bytes > INT64_MAX / 2)
		return;
	int64_t r = atomic_fetch_sub(&gd->room, (int64_t)bytes) - (int64_t)bytes;
	if (r >= 0 || !ready(dev))
		return;
	int s = slot_enter();
	if (s < 0)
		return;
	atomic_fetch_add(&figs(s, dev)->held, (uint64_t)-r);
	atomic_fetch_add(&gd->room, -r);
	slot_exit();
}

/* ---- waiting ------------------------------------------------------------------------------- */

/* The word waiters sleep on: the book's, read inside a use of the slot (a
 * move wakes the old word's sleepers), or this process's; futex calls for
 * a shared word serve both. */
static _Atomic uint32_t *wake_word(void)
{
	if (!in_group || !atomic_load(&booked) || slot_enter() < 0)
		return &local_wake;
	_Atomic uint32_t *w = &cumemcap_book_header(&book)->wake;
	slot_exit();
	return w;
}

uint32_t cumemcap_group_wake_seq(void)
{
	return atomic_load(wake_word());
}

void cumemcap_group_wake_local(void)
{
	cumemcap_book_wake(wake_word());
}

void cumemcap_group_waiting(int dev, int delta)
{
	atomic_fetch_add(&cumemcap_group_hot, (uint32_t)(2 * delta));
	/* Inside a use of the slot: a move carries `waiting` whole. */
	int s = slot_enter();
	if (s < 0)
		return;
	if ((unsigned)dev < CUMEMCAP_MAX_DEVICES && cumemcap_group_devs[dev].gpu >= 0)
		atomic_fetch_add(&figs(s, dev)->waiting, (uint32_t)delta);
	slot_exit();
}

void cumemcap_group_sleep(uint32_t seq, uint32_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	syscall(SYS_futex, (uint32_t *)wake_word(), FUTEX_WAIT, seq, &ts, NULL, 0);
}

void cumemcap_group_reap(void)
{
	if (!in_group || !atomic_load(&booked) || !book_sound())
		return;
	cumemcap_xmutex_lock(&join_lock);
	if (atomic_load(&booked))
		cumemcap_book_reap(&book, self);
	cumemcap_xmutex_unlock(&join_lock);
}

/* ---- the worker, top, the log ------------------------------------------------------------- */

void cumemcap_group_tick(void)
{
	if (!book_sound()) /* a fork child not yet rejoined has nothing to do either */
		return;
	cumemcap_group_reap();
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		if (atomic_load_explicit(&cumemcap_group_devs[dev].on, memory_order_relaxed) && squeezed())
			give_back(dev); /* which looks only at an attached GPU */
}

bool cumemcap_group_publishes(int dev)
{
	return (unsigned)dev < CUMEMCAP_MAX_DEVICES && attached[dev].in_book && ready(dev);
}

void cumemcap_group_publish(int dev, const struct cumemcap_group_figures *f)
{
	int s = slot_enter();
	if (s < 0)
		return;
	struct cumemcap_book_figs *b = figs(s, dev);
	atomic_store(&b->live, f->live);
	atomic_store(&b->pooled, f->pooled);
	atomic_store(&b->reserved, f->reserved);
	atomic_store(&b->footprint, f->footprint);
	atomic_store(&b->refusals, f->refusals);
	atomic_store(&b->waits, f->waits);
	atomic_store(&cumemcap_book_slot(&book, (unsigned)s)->published_ns, cumemcap_book_now_ns());
	slot_exit();
}

bool cumemcap_group_next_change(struct cumemcap_book_change *out, unsigned char uuid[16])
{
	bool got = false;
	/* The worker's and the destructor's, which does not wait for it. */
	cumemcap_xmutex_lock(&join_lock);
	uint64_t last = 0;
	if (in_group && atomic_load(&booked))
		last = atomic_load(&cumemcap_book_header(&book)->change_seq);
	while (!got && changes_seen < last) {
		uint64_t seq = ++changes_seen;
		struct cumemcap_book_change *c = cumemcap_book_change(&book, seq);
		if (atomic_load(&c->seq) != seq)
			continue; /* overwritten (more than the ring's changes since), or being written */
		memcpy(out, c, sizeof(*out)); /* with seq: a seq is never stored twice */
		got = atomic_load(&c->seq) == seq && out->gpu >= 0 && out->gpu < CUMEMCAP_BOOK_GPUS;
	}
	if (got)
		memcpy(uuid, cumemcap_book_gpu(&book, (unsigned)out->gpu)->uuid, 16);
	cumemcap_xmutex_unlock(&join_lock);
	return got;
}

/* dev's limit in the book (which 0), what all members hold (1) or this one
 * (2), read inside a use of the slot (a move waits for it); UINT64_MAX
 * when not in a group or dev has no entry. */
static uint64_t book_figure(int dev, int which)
{
	if ((unsigned)dev >= CUMEMCAP_MAX_DEVICES || !cumemcap_group_member() || !attached[dev].in_book)
		return UINT64_MAX;
	int s = slot_enter();
	if (s < 0)
		return UINT64_MAX;
	int g = cumemcap_group_devs[dev].gpu; /* in_book is cleared only while no thread is inside */
	uint64_t v = g < 0 ? UINT64_MAX
		     : which == 0 ? atomic_load(&cumemcap_book_gpu(&book, (unsigned)g)->limit)
		     : which == 1 ? cumemcap_book_used(&book, (unsigned)g)
				  : atomic_load(&figs(s, dev)->held);
	slot_exit();
	return v;
}

uint64_t cumemcap_group_limit(int dev)
{
	return book_figure(dev, 0);
}

uint64_t cumemcap_group_used(int dev)
{
	return book_figure(dev, 1);
}

uint64_t cumemcap_group_held(int dev)
{
	return book_figure(dev, 2);
}

void cumemcap_group_leave(void)
{
	cumemcap_xmutex_lock(&join_lock);
	atomic_store(&leaving, true); /* no user enters from now on */
	if (atomic_load(&booked) && self >= 0) {
		for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++)
			atomic_store(&cumemcap_group_devs[d].room, 0);
		drain_slot_users();
		for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++) /* what a grow in flight added */
			atomic_store(&cumemcap_group_devs[d].room, 0);
		if (!atomic_load(&slot_users))
			cumemcap_book_release(&book, self);
		self = -1;
	}
	cumemcap_xmutex_unlock(&join_lock);
}

void cumemcap_group_fork_child(void)
{
	cumemcap_xmutex_fork_child(&join_lock);
	atomic_store(&slot_users, 0); /* no thread came along */
	atomic_store(&pausing, false); /* nor the one moving the book */
	atomic_fetch_and(&cumemcap_group_hot, 1u); /* no thread came along, none waits */
	for (int d = 0; d < CUMEMCAP_MAX_DEVICES; d++)
		atomic_store(&cumemcap_group_devs[d].room, 0);
	if (!atomic_load(&booked))
		return;
	/* Drop our reference to the parent's slot lock and its mapping; take a
	 * slot at the next use, which a child that only execs never pays for. */
	cumemcap_book_close(&book);
	self = -1;
	atomic_store(&booked, false);
	squeeze_word = &no_squeeze;
	atomic_store(&squeeze_seen, 0);
	atomic_store(&rejoin, true);
}
