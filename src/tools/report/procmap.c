/* procmap: processes by a 64-bit key (see procmap.h). Linear probing over
 * a power-of-two table, keys spread by a 64-bit finalizer. */
#include "config.h"

#include "procmap.h"

#include <stdlib.h>

#include "text.h"

/* A 64-bit integer finalizer: every input bit reaches every output bit, so
 * pids in a row spread over the table. */
static uint64_t spread(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64_C(0xc4ceb9fe1a85ec53);
	x ^= x >> 33;
	return x;
}

uint64_t report_procmap_mix(uint64_t a, uint64_t b)
{
	return spread(a ^ spread(b));
}

static void put(struct report_procmap_slot *slots, size_t cap, uint64_t key, size_t place)
{
	size_t i = spread(key) & (cap - 1);

	while (slots[i].place != SIZE_MAX)
		i = (i + 1) & (cap - 1);
	slots[i].key = key;
	slots[i].place = place;
}

void report_procmap_add(struct report_procmap *m, uint64_t key, size_t place)
{
	if (2 * (m->n + 1) > m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 64;
		struct report_procmap_slot *slots = report_xmalloc(cap * sizeof(*slots));
		for (size_t i = 0; i < cap; i++)
			slots[i].place = SIZE_MAX;
		for (size_t i = 0; i < m->cap; i++) {
			if (m->slots[i].place != SIZE_MAX)
				put(slots, cap, m->slots[i].key, m->slots[i].place);
		}
		free(m->slots);
		m->slots = slots;
		m->cap = cap;
	}
	put(m->slots, m->cap, key, place);
	m->n++;
}

/* *pos counts the slots probed so far, from the key's home slot. */
static struct report_procmap_slot *next_slot(const struct report_procmap *m, uint64_t key,
					     size_t *pos)
{
	if (!m->cap)
		return NULL;
	size_t home = spread(key) & (m->cap - 1);
	while (*pos < m->cap) {
		struct report_procmap_slot *s = &m->slots[(home + (*pos)++) & (m->cap - 1)];
		if (s->place == SIZE_MAX)
			return NULL;
		if (s->key == key)
			return s;
	}
	return NULL;
}

bool report_procmap_next(const struct report_procmap *m, uint64_t key, size_t *pos,
			 size_t *place)
{
	struct report_procmap_slot *s = next_slot(m, key, pos);

	if (s)
		*place = s->place;
	return s != NULL;
}

void report_procmap_set(struct report_procmap *m, uint64_t key, size_t place)
{
	size_t pos = 0;
	struct report_procmap_slot *s = next_slot(m, key, &pos);

	if (s)
		s->place = place;
	else
		report_procmap_add(m, key, place);
}

void report_procmap_free(struct report_procmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->n = m->cap = 0;
}
