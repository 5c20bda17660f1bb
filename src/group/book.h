/* book: a group's shared file (cumemcap-group.NAME, one budget per
 * physical GPU) or a user's node registry (cumemcap-node.UID, for
 * `cumemcap top`), one layout for both, in CUMEMCAP_GROUP_DIR and mapped
 * MAP_SHARED by every process that uses it (docs/groups.md).
 *
 * No lock a dead process can leave held: a member writes only its own
 * slot, a GPU's use is the sum of the members' `held`, and a slot is owned
 * through an OFD lock on its byte of the file, which the kernel drops when
 * the owner dies: a live slot whose lock can be taken is a dead process's,
 * whose share the taker returns (reap).
 *
 * Thread safety: a struct cumemcap_book is its owner's; the mapped atomics
 * may be used by any thread of any process. Callers in one process
 * serialize claiming, releasing and reaping (group.c holds one mutex). */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CUMEMCAP_BOOK_MAGIC 0x4b4f4f4250414d43ull /* "CMAPBOOK" */
#define CUMEMCAP_BOOK_VERSION 1u
#define CUMEMCAP_BOOK_GPUS 32     /* physical GPUs a book can know */
#define CUMEMCAP_BOOK_SLOTS 1024  /* members at once */
#define CUMEMCAP_BOOK_CHANGES 32  /* limit changes remembered */
#define CUMEMCAP_BOOK_NAME_MAX 64
#define CUMEMCAP_BOOK_PROGRAM_MAX 48
#define CUMEMCAP_BOOK_NONE UINT64_MAX /* no limit */

enum cumemcap_book_kind {
	CUMEMCAP_BOOK_GROUP = 1,
	CUMEMCAP_BOOK_REGISTRY = 2,
};

/* A GPU, by UUID (members may see other ordinals). state: 0 free, 1 being
 * filled, 2 ready (then uuid, pci and total never change). */
struct cumemcap_book_gpu {
	_Atomic uint32_t state;
	uint32_t reserved0;
	unsigned char uuid[16];
	char pci[16];            /* "0000:3b:00.0", NUL-padded */
	uint64_t total;          /* the GPU's memory */
	_Atomic uint64_t limit;  /* the group's budget here; CUMEMCAP_BOOK_NONE: none */
	uint64_t reserved1[3];
};

/* One change of a limit (`cumemcap group set`). A writer takes the next
 * header.change_seq, writes the entry at seq % CHANGES and stores `seq`
 * last; a reader that finds another seq there has lost that entry. */
struct cumemcap_book_change {
	_Atomic uint64_t seq;     /* 1, 2, ... (0: empty) */
	uint64_t time_ns;         /* CLOCK_REALTIME */
	uint32_t uid;             /* who */
	int32_t gpu;              /* index in the GPU table (one entry per GPU changed) */
	uint64_t old_limit, new_limit;
};

/* A member's figures for one GPU: `held` exact, the rest copied once a second for `top`. */
struct cumemcap_book_figs {
	_Atomic uint64_t held;      /* of the group's budget: >= what it counts here */
	_Atomic uint64_t limit;     /* the member's own limit (CUMEMCAP_BOOK_NONE: none) */
	_Atomic uint64_t live, pooled, reserved, footprint, refusals, waits;
	_Atomic uint32_t waiting;   /* threads waiting for room now */
	_Atomic int32_t ordinal;    /* the GPU's ordinal in the member; -1: not used */
};

/* A member. state: 0 free, 1 live; only its lock's holder changes state and identity. */
struct cumemcap_book_slot {
	_Atomic uint32_t state;
	uint32_t pid;               /* as the member sees itself */
	uint64_t pidns;             /* unused: nothing reads it, kept for the layout */
	uint64_t start;             /* unused */
	uint32_t uid;
	uint32_t reserved0;
	uint64_t joined_ns;         /* CLOCK_REALTIME */
	_Atomic uint64_t published_ns;
	char program[CUMEMCAP_BOOK_PROGRAM_MAX];
	struct cumemcap_book_figs gpu[CUMEMCAP_BOOK_GPUS];
};

struct cumemcap_book_header {
	uint64_t magic;
	uint32_t version;
	uint32_t kind;              /* enum cumemcap_book_kind */
	uint64_t size;              /* of the file */
	uint32_t header_size, gpu_size, change_size, slot_size;
	uint32_t gpus, changes, slots;
	uint32_t creator_uid;
	uint64_t created_ns;        /* unused: nothing reads it, kept for the layout */
	unsigned char boot_id[16];  /* unused */
	char name[CUMEMCAP_BOOK_NAME_MAX + 1];
	char reserved0[7];
	_Atomic uint32_t slots_used;  /* 1 + the highest slot ever claimed */
	_Atomic uint32_t wake;        /* futex word: bumped when room may have appeared */
	uint32_t reserved2;
	_Atomic uint32_t squeeze;     /* bumped when a grant failed: members hand back spare budget */
	_Atomic uint32_t tight;       /* 1: a GPU is near its budget: members keep no spare */
	uint32_t reserved1;
	_Atomic uint64_t change_seq;  /* the last change's seq */
};

/* The file: header, GPUs, changes, slots, each at a multiple of 64, all
 * little-endian and fixed by CUMEMCAP_BOOK_VERSION. */
#define CUMEMCAP_BOOK_HEADER_BYTES 4096u
#define CUMEMCAP_BOOK_GPU_OFF CUMEMCAP_BOOK_HEADER_BYTES
#define CUMEMCAP_BOOK_CHANGE_OFF \
	(CUMEMCAP_BOOK_GPU_OFF + CUMEMCAP_BOOK_GPUS * sizeof(struct cumemcap_book_gpu))
#define CUMEMCAP_BOOK_SLOT_OFF \
	((CUMEMCAP_BOOK_CHANGE_OFF + CUMEMCAP_BOOK_CHANGES * sizeof(struct cumemcap_book_change) + 4095) / 4096 * 4096)
#define CUMEMCAP_BOOK_SIZE (CUMEMCAP_BOOK_SLOT_OFF + CUMEMCAP_BOOK_SLOTS * sizeof(struct cumemcap_book_slot))

/* An open book (or registry). */
struct cumemcap_book {
	int fd;
	void *map;
	char path[1024];
};

static inline struct cumemcap_book_header *cumemcap_book_header(const struct cumemcap_book *b)
{
	return (struct cumemcap_book_header *)b->map;
}

static inline struct cumemcap_book_gpu *cumemcap_book_gpu(const struct cumemcap_book *b, unsigned i)
{
	return (struct cumemcap_book_gpu *)((char *)b->map + CUMEMCAP_BOOK_GPU_OFF) + i;
}

static inline struct cumemcap_book_change *cumemcap_book_change(const struct cumemcap_book *b, uint64_t seq)
{
	return (struct cumemcap_book_change *)((char *)b->map + CUMEMCAP_BOOK_CHANGE_OFF) +
	       seq % CUMEMCAP_BOOK_CHANGES;
}

static inline struct cumemcap_book_slot *cumemcap_book_slot(const struct cumemcap_book *b, unsigned i)
{
	return (struct cumemcap_book_slot *)((char *)b->map + CUMEMCAP_BOOK_SLOT_OFF) + i;
}

/* The path of a group's book or a user's registry under dir; false if too long. */
bool cumemcap_book_path(char *out, size_t len, const char *dir, enum cumemcap_book_kind kind,
			const char *name);

/* Whether `name` may name a group: 1..64 of [A-Za-z0-9._-], not starting
 * with '.' or '-'. */
bool cumemcap_book_name_ok(const char *name);

/* Check a book's `len` bytes: magic, version, layout, kind, the name
 * (unless NULL) and every field a reader indexes or trusts. False with the
 * reason in `why`. Reads only the bytes given (the fuzz target). */
bool cumemcap_book_check(const void *data, size_t len, enum cumemcap_book_kind kind, const char *name,
			 char *why, size_t whylen);

enum cumemcap_book_access {
	CUMEMCAP_BOOK_USER = 0, /* 0600, owned by the caller's uid */
	CUMEMCAP_BOOK_GID,      /* 0660, its group the named one, its owner a member */
};

/* Open the book at `path` read-write, creating it when there is none and
 * `create` is set (built whole in a file nobody else can name, its bytes
 * reserved, then linked). It must be a regular file, not a symbolic link,
 * passing cumemcap_book_check, with the access's mode and owner; for GID
 * its group is `gid` (a new book's) or, gid -1, any of the caller's (none
 * is made then). False with the reason in `why` (the caller names the
 * file); a failed creation leaves no temporary file. */
bool cumemcap_book_open(struct cumemcap_book *b, const char *path, enum cumemcap_book_kind kind,
			const char *name, enum cumemcap_book_access access, gid_t gid, bool create,
			char *why, size_t whylen);

void cumemcap_book_close(struct cumemcap_book *b);

/* Take a free slot (or a dead owner's, its share returned first) and fill
 * its identity; -1 when every slot is live. b's open file holds its lock
 * until released or the process dies. */
int cumemcap_book_claim(struct cumemcap_book *b, const char *program);

/* Give up slot i, returning what it holds. */
void cumemcap_book_release(struct cumemcap_book *b, int i);

/* Whether slot i is live and locked by an open file other than b's. */
bool cumemcap_book_alive(const struct cumemcap_book *b, unsigned i);

/* Free every dead member's slot but `self`, waking the waiters when one
 * held something. Returns how many were reaped. */
unsigned cumemcap_book_reap(struct cumemcap_book *b, int self);

/* The GPU with this UUID, added with pci, total and limit when new (an
 * existing entry keeps its limit); -1 when the table is full. */
int cumemcap_book_gpu_find(struct cumemcap_book *b, const unsigned char uuid[16], const char *pci,
			   uint64_t total, uint64_t limit);

/* The GPU with this UUID, or -1 (no change to the table). */
int cumemcap_book_gpu_lookup(const struct cumemcap_book *b, const unsigned char uuid[16]);

/* The sum of the members' `held` of GPU g (seq_cst loads, see group.h). */
uint64_t cumemcap_book_used(const struct cumemcap_book *b, unsigned g);

/* Set GPU g's limit (g < 0: every GPU), append a change by `uid` per GPU
 * changed and wake the waiters. Returns how many GPUs changed. */
unsigned cumemcap_book_set_limit(struct cumemcap_book *b, int g, uint64_t limit, uid_t uid);

/* Bump a futex word and wake every thread (of any process) waiting on it. */
void cumemcap_book_wake(_Atomic uint32_t *word);

uint64_t cumemcap_book_now_ns(void); /* CLOCK_REALTIME, as the book's times */

/* A SIGBUS at `addr` (log/log.c's handler asks): when addr lies in a
 * mapped book, replace that mapping by zeroed private memory (the touch,
 * done again after the handler, shares nothing) and mark the book CUT for
 * good. True when it was such a fault. Async-signal-safe. */
bool cumemcap_mapped_fault(const void *addr);

/* What became of an open book's file (one fstat): REMOVED (deleted or
 * renamed over), CUT (another size, in *size, or a SIGBUS seen in its
 * mapping). SOUND when fstat fails. */
enum cumemcap_book_fate {
	CUMEMCAP_BOOK_SOUND = 0,
	CUMEMCAP_BOOK_REMOVED,
	CUMEMCAP_BOOK_CUT,
};
enum cumemcap_book_fate cumemcap_book_fate(const struct cumemcap_book *b, uint64_t *size);

/* Copy a member's held, limit, ordinal and waiting of one GPU to its slot
 * in another book (a member going on in a new book). */
void cumemcap_book_carry(const struct cumemcap_book *from, unsigned from_slot, unsigned from_gpu,
			 struct cumemcap_book *to, unsigned to_slot, unsigned to_gpu);
