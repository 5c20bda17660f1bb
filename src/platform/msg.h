/* msg: one-line messages on stderr, and the text helpers they use. Each line
 * is one write(2), so threads never interleave. No locks, no allocation:
 * callable from any hook, a constructor or a forked child. */
#pragma once

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#define CUMEMCAP_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Hold off a signal a write raises (SIGPIPE, SIGXFSZ): release consumes
 * one raised since the hold (not one pending before) and restores the
 * mask. Async-signal-safe. */
struct cumemcap_signal_hold {
	sigset_t set, old;
	int sig;
	bool was_pending;
};
void cumemcap_signal_hold(struct cumemcap_signal_hold *h, int sig);
void cumemcap_signal_release(struct cumemcap_signal_hold *h);

/* Write to stderr until done or an error, errno kept, SIGPIPE held. */
void cumemcap_write_stderr(const char *b, size_t n);

/* Bytes of the valid UTF-8 sequence at s, of n > 0 bytes (0: none). */
size_t cumemcap_utf8_len(const unsigned char *s, size_t n);

/* Copy src into dst of `size` > 0 bytes: cut to fit, always terminated. */
void cumemcap_copy(char *dst, size_t size, const char *src);

/* "cumemcap: <text>\n" on stderr. */
void cumemcap_msg(const char *fmt, ...) CUMEMCAP_PRINTF(1, 2);

/* The exit status of a process the shim refuses to start. */
#define CUMEMCAP_EXIT_CONFIG 125

/* A configuration error, before main: one line, then _exit(CUMEMCAP_EXIT_CONFIG). */
_Noreturn void cumemcap_fatal(const char *fmt, ...) CUMEMCAP_PRINTF(1, 2);

/* A size's binary unit ("B" .. "EiB"), whole units and hundredths (cut). */
const char *cumemcap_size_split(uint64_t bytes, uint64_t *whole, unsigned *hundredths);

/* Human-readable size ("1.50 GiB", "512 MiB", "4096 B") into buf. */
const char *cumemcap_fmt_size(uint64_t bytes, char *buf, size_t len);
