/* json: a small strict JSON reader for one record per line (cumemcap report).
 *
 * Owns the syntax of one JSON text (RFC 8259) and nothing of the log's
 * schema: literals, numbers, strings, arrays and objects, with nothing but
 * whitespace around the value. Rejected: trailing commas, comments, single
 * quotes, NaN/Infinity, leading zeros, raw control characters in strings,
 * unknown escapes, nesting deeper than REPORT_JSON_MAX_DEPTH.
 *
 * Numbers keep both readings: `num` (the nearest double) and, for a
 * non-negative integer literal up to 2^64-1, the exact `u64` (byte counts
 * above 2^53 do not survive a double). Strings are decoded to UTF-8; the
 * text of a string is taken as it comes (an invalid UTF-8 byte or a lone
 * surrogate escape becomes U+FFFD) so one odd argv byte does not cost a
 * whole record. A "\u0000" ends the string as C sees it (`len` keeps all).
 *
 * Everything a parse returns lives in its arena until the next reset; the
 * arena grows with the line (at most about 64 bytes per input byte), so a
 * caller that bounds the line bounds the memory. Single-threaded: one arena
 * per reader, no global state. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPORT_JSON_MAX_DEPTH 64

enum report_json_kind {
	REPORT_JSON_NULL,
	REPORT_JSON_FALSE,
	REPORT_JSON_TRUE,
	REPORT_JSON_NUMBER,
	REPORT_JSON_STRING,
	REPORT_JSON_ARRAY,
	REPORT_JSON_OBJECT,
};

struct report_json {
	enum report_json_kind kind;
	bool is_u64;                 /* NUMBER: a non-negative integer literal <= 2^64-1 */
	uint64_t u64;                /* NUMBER, is_u64: its exact value */
	double num;                  /* NUMBER: the nearest double (may be +-inf) */
	const char *str;             /* STRING: UTF-8, NUL-terminated */
	size_t len;                  /* STRING: bytes in str; ARRAY/OBJECT: elements */
	const char *key;             /* a member of an object: its name (UTF-8) */
	struct report_json *child; /* ARRAY/OBJECT: the first element or member */
	struct report_json *next;  /* the next element or member of the parent */
};

struct report_json_chunk;

struct report_json_arena {
	struct report_json_chunk *chunks;
};

/* Parse text[0..len) as one JSON value. NULL when it is not valid JSON (or
 * memory ran out). The result lives until the next reset or free. */
const struct report_json *report_json_parse(struct report_json_arena *arena,
						const char *text, size_t len);

/* Forget every parse result; keeps one chunk for the next line. */
void report_json_reset(struct report_json_arena *arena);

/* Release all memory. The arena may be used again afterwards. */
void report_json_free(struct report_json_arena *arena);

/* The member `key` of an object (the last one, when a name repeats, as in
 * most readers), or NULL when `obj` is not an object or has no such member. */
const struct report_json *report_json_get(const struct report_json *obj, const char *key);
