/* log/format: a bounded text writer; numbers, sizes, times, JSON strings
 * and Prometheus label values formatted by hand. Async-signal-safe and
 * thread-safe: no malloc, stdio, locks or state, only the caller's out. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Text in a caller's buffer: cut and marked lost when full, or, with
 * flush_fd >= 0, written out to that descriptor as it fills. */
struct out {
	char *p;
	size_t cap, len;
	int flush_fd;
	bool lost; /* something did not fit or could not be written */
};

#define OUT(buf) { .p = (buf), .cap = sizeof(buf), .len = 0, .flush_fd = -1, .lost = false }

/* write(2) all of b, again after EINTR; false on any failure. */
bool out_write_all(int fd, const char *b, size_t n);
void out_put(struct out *o, const char *s, size_t n);
void out_str(struct out *o, const char *s);
/* Each string up to the NULL, in turn. */
void out_strs(struct out *o, ...) __attribute__((sentinel));
void out_u(struct out *o, uint64_t v);
/* Milliseconds as seconds with three decimals: 5000 -> 5.000. */
void out_ms(struct out *o, uint64_t ms);
/* What cumemcap_fmt_size writes: "512 MiB", "1.50 GiB", "4096 B"... */
void out_size(struct out *o, uint64_t bytes);
/* s[0..n) quoted as a JSON string or (label) a Prometheus label value,
 * non-UTF-8 bytes as U+FFFD, at most `max` bytes of s, no half character. */
void out_quoted(struct out *o, const char *s, size_t n, size_t max, bool label);
/* A C string as a JSON string, or null for NULL. */
void out_json(struct out *o, const char *s);
/* "2026-11-23T10:15:02.123Z", quoted (RFC 3339, UTC). */
void out_time(struct out *o, uint64_t unix_ms);
/* ,"key": and, for the three after it, the value (null when not known). */
void out_key(struct out *o, const char *k);
void out_key_u(struct out *o, const char *k, uint64_t v);
void out_key_u_or_null(struct out *o, const char *k, bool known, uint64_t v);
void out_key_json(struct out *o, const char *k, const char *s);
/* A short text for an errno value ("no space left on device"). */
void out_errno(struct out *o, int e);
/* "cumemcap: <o>\n" on stderr, one write. */
void out_say(struct out *o);
