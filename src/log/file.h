/* log/file: the log's file, and files in shared directories: path
 * templates, directories checked component by component, the file
 * created O_EXCL|O_NOFOLLOW|O_APPEND.
 *
 * Thread safety: the file is created once, under log.c's open lock;
 * log_file_state goes CLOSED -> OPEN or OFF, released after the
 * descriptor is set. A record is one write(2) to an O_APPEND descriptor,
 * no lock. log_emit, log_open_dir and log_fd_is are async-signal-safe. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "log/format.h"
#include "config/policy.h"

enum { CLOSED = 0, OPEN, OFF };

extern _Atomic int log_file_state; /* CLOSED, OPEN, OFF */
extern char log_file_path[];        /* the file's path, once created */

/* A checked path template with %p, %u, %h, %n and %% expanded into dst (a
 * name's '/' as '_'). False when it does not fit in `len` bytes (dst is
 * then cut, still terminated, when len > 0). */
bool log_expand(const char *tmpl, char *dst, size_t len);
/* NAME with ".N" before its extension (N > 0): "x.jsonl" -> "x.1.jsonl",
 * "x" -> "x.1". False when it does not fit. */
bool log_suffixed(const char *name, unsigned n, char *out, size_t cap);
/* The directory `dir`, walked and checked (file.c says how; with
 * `create`, a missing last component is made 0700): its descriptor, or
 * -1, said on stderr (log_say_off) unless `subject` is NULL. */
int log_open_dir(const char *dir, bool create, const char *subject, const char *path, const char *off);
/* `tmpl` expanded into path, its directory ("." when none) into dir, its
 * name into name (CUMEMCAP_PATH_MAX bytes each); log_open_dir(dir). */
int log_open_template(const char *tmpl, char *path, char *dir, char *name, bool create, const char *subject,
		      const char *off);
/* Whether fd is still the file `held` (the program may reuse the number). */
bool log_fd_is(int fd, const struct stat *held);
/* One stderr line: "SUBJECT PATH: WHAT[: errno text]; OFF" (no errno
 * text for `err` 0, no ": " before it for an empty `what`). */
void log_say_off(const char *subject, const char *path, const char *what, int err, const char *off);

/* TMPDIR, read once: when set (not in secure execution), the default
 * template's directory is under it instead of /tmp: with `ask_policy`,
 * if the policy's template is the default; without (no policy yet), always. */
void log_file_init(bool ask_policy);

/* Create the file (CLOSED, the caller's lock held); on failure say why, OFF. */
bool log_file_create(void);
/* Write the start record into the new file: OPEN, or say why, close, OFF. */
void log_file_start(struct out *start);
/* Write a whole record if the file is open; a failure turns logging off. */
void log_emit(struct out *o);
/* After fork, in the child: close the parent's file, state CLOSED. */
void log_file_fork_child(void);
