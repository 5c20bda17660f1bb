/* msg: one-line messages on stderr, and the text helpers they use.
 *
 * Each line is formatted into a stack buffer and written with a single
 * write(2), so lines from different threads never interleave; write errors
 * never reach the program. No locks, no allocation: callable from any
 * hook, a constructor or a forked child. */
#pragma once

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#define CUMEMCAP_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Hold signal `sig` off around a write, so that a signal the write raises
 * (SIGPIPE, SIGXFSZ) never reaches the program: hold blocks it; release
 * consumes one the write raised (one the program had pending already is
 * left to it) and restores the mask. Async-signal-safe. */
struct cumemcap_signal_hold {
	sigset_t set, old;
	int sig;
	bool was_pending;
};
void cumemcap_signal_hold(struct cumemcap_signal_hold *h, int sig);
void cumemcap_signal_release(struct cumemcap_signal_hold *h);

/* Write to stderr until done or an error, errno kept, SIGPIPE held. */
void cumemcap_write_stderr(const char *b, size_t n);

/* Bytes of the valid UTF-8 sequence at s, of n > 0 bytes (1 for ASCII;
 * 0: not one, or cut short). */
size_t cumemcap_utf8_len(const unsigned char *s, size_t n);

/* Copy the string src into dst, a buffer of `size` bytes (size > 0): cut
 * to fit, always terminated. */
void cumemcap_copy(char *dst, size_t size, const char *src);

/* "cumemcap: <text>\n" on stderr. */
void cumemcap_msg(const char *fmt, ...) CUMEMCAP_PRINTF(1, 2);

/* The exit status of a process the shim refuses to start. */
#define CUMEMCAP_EXIT_CONFIG 125

/* A configuration error the user must fix: print one line and end the
 * process with CUMEMCAP_EXIT_CONFIG before the program's main runs. */
_Noreturn void cumemcap_fatal(const char *fmt, ...) CUMEMCAP_PRINTF(1, 2);

/* A size in binary units: returns the unit ("B", "KiB", ... "EiB") and
 * sets the whole units and the hundredths, cut (never rounded up). */
const char *cumemcap_size_split(uint64_t bytes, uint64_t *whole, unsigned *hundredths);

/* Human-readable size ("1.50 GiB", "512 MiB", "4096 B") into buf. */
const char *cumemcap_fmt_size(uint64_t bytes, char *buf, size_t len);
