/* text: how cumemcap report writes values for people: sizes in binary
 * units, durations, times, command lines quoted like a shell, strings from
 * a log made safe for a terminal; and a growable string to build them in.
 *
 * Pure functions plus a string builder; single-threaded, no global state.
 * Allocation failure ends the program (report_oom) with one line. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPORT_PRINTF(a, b) __attribute__((format(printf, a, b)))

struct report_buf {
	char *s; /* NUL-terminated once anything was added; NULL before */
	size_t len, cap;
};

void report_buf_add(struct report_buf *b, const char *s, size_t n);
void report_buf_puts(struct report_buf *b, const char *s);
void report_buf_printf(struct report_buf *b, const char *fmt, ...) REPORT_PRINTF(2, 3);
/* The string built so far ("" when empty), handed over to the caller. */
char *report_buf_take(struct report_buf *b);

/* Out of memory: one line on stderr, exit status 1. */
_Noreturn void report_oom(void);
void *report_xmalloc(size_t n);
void *report_xrealloc(void *p, size_t n);
char *report_xstrdup(const char *s);
/* A copy of s in which each byte that does not start a well-formed UTF-8
 * sequence is U+FFFD, so what a log held prints as UTF-8. */
char *report_xstrdup_utf8(const char *s);

/* "512 B", "1.50 GiB": two decimals (cut, not rounded: never more than the
 * value) in the largest binary unit the value reaches. buf >= 32 bytes. */
const char *report_fmt_size(uint64_t bytes, char *buf, size_t len);

/* "12.3 s" under a minute, then whole seconds: "4m05s", "2h03m04s". */
const char *report_fmt_duration(double seconds, char *buf, size_t len);

/* "2024-05-01 12:00:00 UTC". */
const char *report_fmt_time(double unix_seconds, char *buf, size_t len);

/* "2024-05-01T12:00:00.123Z": RFC 3339 in UTC with milliseconds (cut). */
const char *report_fmt_rfc3339(double unix_seconds, char *buf, size_t len);

/* "12:00:05": the UTC time of day. */
const char *report_fmt_clock(double unix_seconds, char *buf, size_t len);

/* A time as the logs and --since write it, into Unix seconds: RFC 3339
 * ("2024-05-01T12:00:00Z", fractions and a "+02:00" offset allowed, "t" and
 * "z" too) or, in UTC, "2024-05-01 12:00[:00]" and "2024-05-01". False
 * for anything else (a date that does not exist included). */
bool report_parse_rfc3339(const char *s, double *out);

/* The signal's name ("SIGKILL") or NULL when this reader does not know it. */
const char *report_signal_name(long long signo);

/* A string from a log made safe for one line of a terminal: control
 * characters (and DEL) as \xNN. */
void report_buf_safe(struct report_buf *b, const char *s);

/* One argument as a POSIX shell would read it back (Python's shlex.quote):
 * bare when it holds only [A-Za-z0-9_@%+=:,./-], else in single quotes;
 * control characters inside as \xNN (so the line stays one line). */
void report_buf_shell_arg(struct report_buf *b, const char *s);

/* Columns a UTF-8 string takes (its code points). */
size_t report_text_width(const char *s);
