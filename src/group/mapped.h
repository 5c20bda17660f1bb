/* mapped: the books this process has mapped, for a SIGBUS in one of them
 * (the table is book.c's, where books are mapped and unmapped).
 *
 * Every member may write its group's book, so a member may cut the file
 * under every other member's mapping; a touch past the new end is a
 * SIGBUS. The SIGBUS handler (log/signals.c) asks cumemcap_mapped_fault
 * whether the address lies in a book: then the mapping is replaced by
 * zeroed private memory, the touch goes on there when the handler returns
 * (it reads and writes nothing shared), and the book is marked cut, so
 * that its user gives it up at its next look (cumemcap_book_fate), even if
 * the file was written back to its size since. Thread safety: no lock;
 * async-signal-safe. */
#pragma once

#include <stdbool.h>

/* A SIGBUS at `addr`: true when addr lies in a mapped book, now replaced
 * and marked cut as above. */
bool cumemcap_mapped_fault(const void *addr);
