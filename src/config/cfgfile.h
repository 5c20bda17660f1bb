/* cfgfile: the configuration file's reading and syntax (`key = value`, `#`
 * comments at a line's start or after a blank, `[kind argument]` headers),
 * and the configuration's message helpers. Thread safety: reentrant. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CUMEMCAP_CONFIG_MAX_BYTES (1u << 20)
#define CUMEMCAP_CONFIG_MAX_LINE 4096

/* A line's two words, trimmed, the second maybe empty: a header's kind (its
 * first word) and the rest, or an entry's key and value. False, with a
 * message (without path:line) in err, stops the parse. */
typedef bool (*cumemcap_config_fn)(void *ctx, const char *word, const char *rest, unsigned line, char *err,
				   size_t errlen);

/* Parse `len` bytes of `text`, calling `section` for each `[kind arg]` and
 * `entry` for each `key = value`, whose words it NUL-terminates in place:
 * text[len] must be writable. The first error stops it, as "path:line: message". */
bool cumemcap_config_parse(const char *path, char *text, size_t len, cumemcap_config_fn section,
			   cumemcap_config_fn entry, void *ctx, char *err, size_t errlen);

/* Read a whole regular file of at most CUMEMCAP_CONFIG_MAX_BYTES into a
 * malloc'd buffer, NUL-terminated. On error false, with "path: reason" in err. */
bool cumemcap_config_read(const char *path, char **text, size_t *len, char *err, size_t errlen);

/* For secure execution: read `path` only if it is a regular file (not a
 * symbolic link) owned by `owner` and writable by nobody else, in a
 * directory of which the same holds. 1: read; 0: no such file (why
 * untouched); -1: not trusted or not readable, "path: reason" in why
 * (never a byte of its contents). */
int cumemcap_config_read_trusted(const char *path, uid_t owner, char **text, size_t *len,
				 char *why, size_t whylen);

/* err rewritten as `fmt` followed by err's own text (up to 1023 bytes of
 * it). The arguments must not point into err. */
void cumemcap_config_prefix(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), cold, noinline));

/* `s` as it may appear inside "..." in a one-line message: control bytes,
 * bytes >= 0x80, '"' and '\\' as \xNN, cut to fit `cap`. Returns dst. */
const char *cumemcap_config_quote(char *dst, size_t cap, const char *s);

/* The closest of `candidates` (NULL-terminated) to `word` within edit distance 2, or NULL. */
const char *cumemcap_config_suggest(const char *word, const char *const *candidates);
