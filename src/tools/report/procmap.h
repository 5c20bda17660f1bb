/* procmap: processes found by a 64-bit key in constant time (cumemcap
 * report), so reading a log of many processes stays linear in its records.
 *
 * An open-addressing hash table of (key, place) pairs, the place being the
 * process's index in the caller's list; several pairs may share a key (a
 * caller whose key is itself a hash checks each place). It grows at half
 * full. Allocation failure ends the program (report_oom). Single-threaded,
 * no global state. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct report_procmap_slot {
	uint64_t key;
	size_t place; /* SIZE_MAX: empty */
};

struct report_procmap {
	struct report_procmap_slot *slots;
	size_t n, cap; /* cap: 0 or a power of two */
};

/* Add the pair (key, place); a pair with that key already there stays. */
void report_procmap_add(struct report_procmap *m, uint64_t key, size_t place);

/* The places paired with `key`, one per call: start with *pos = 0; false
 * after the last. */
bool report_procmap_next(const struct report_procmap *m, uint64_t key, size_t *pos,
			 size_t *place);

/* Pair `key` with `place` alone: the first pair with that key is changed,
 * or one added. */
void report_procmap_set(struct report_procmap *m, uint64_t key, size_t place);

void report_procmap_free(struct report_procmap *m);

/* A key from two 64-bit words (a pid and the bits of a time). */
uint64_t report_procmap_mix(uint64_t a, uint64_t b);
