/* mapped: a SIGBUS in a mapped book or registry (the table of mappings is
 * book.c's). Any member may cut the file under every other member's
 * mapping (group.h); the shim's SIGBUS handler (log/log.c) asks here.
 * Thread safety: no lock; async-signal-safe. */
#pragma once

#include <stdbool.h>

/* A SIGBUS at `addr`: when addr lies in a mapped book, replace that
 * mapping by zeroed private memory (the touch, done again when the handler
 * returns, reads and writes nothing shared) and mark the book cut, so that
 * its user gives it up at its next look (cumemcap_book_fate), even if the
 * file was written back to its size since. True when it was such a fault. */
bool cumemcap_mapped_fault(const void *addr);
