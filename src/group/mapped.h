/* mapped: the books this process has mapped, for a SIGBUS in one of them.
 *
 * Every member may write its group's book, so a member may cut the file
 * under every other member's mapping; a touch past the new end is a
 * SIGBUS. The SIGBUS handler (log/signals.c) asks cumemcap_mapped_fault
 * whether the address lies in a book: then the mapping is
 * replaced by zeroed private memory, the touch goes on there when the
 * handler returns, and the book is marked cut, so that its user gives it
 * up at its next look (cumemcap_book_fate), even if the file was written
 * back to its size since. A slot holds a mapping's address while it is
 * mapped (map_checked and cumemcap_book_close in book.c); more books than
 * slots are mapped only by a tool that opens many at once, and those are
 * not covered. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

void cumemcap_mapped_add(void *map, size_t size);
void cumemcap_mapped_remove(void *map);
/* Whether the handler found `map` cut. */
bool cumemcap_mapped_cut(const void *map);

/* A SIGBUS at `addr`: when addr lies in a mapped book, replace that
 * mapping by zeroed private memory (the touch, done again when the handler
 * returns, reads and writes nothing shared) and mark it cut. True when it
 * was such a fault. Async-signal-safe. */
bool cumemcap_mapped_fault(const void *addr);
