/* log/file: the footprint log's file, and opening files in shared
 * directories: path templates, a directory walked and checked component
 * by component, the file created O_EXCL|O_NOFOLLOW|O_APPEND, one write(2)
 * per record.
 *
 * Thread safety: the file is created once, by the caller holding its own
 * lock (log.c's open lock); log_file_state goes CLOSED -> OPEN or OFF,
 * released after the descriptor is set. Writing takes no lock: each
 * record is one write(2) to an O_APPEND descriptor, so lines never
 * interleave. log_emit, log_open_dir and log_fd_is are async-signal-safe
 * (the exit record is written from a fatal-signal handler). */
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

/* A path template (checked by cumemcap_parse_template) with %p, %u, %h, %n
 * and %% expanded into dst, as the log and metrics files are named; a host
 * or program name never adds a directory level ('/' becomes '_'). False
 * when it does not fit in `len` bytes (dst is then cut, still terminated,
 * when len > 0). */
bool log_expand(const char *tmpl, char *dst, size_t len);
/* NAME with ".N" before its extension (N > 0): "x.jsonl" -> "x.1.jsonl",
 * "x" -> "x.1". False when it does not fit. */
bool log_suffixed(const char *name, unsigned n, char *out, size_t cap);
/* The directory `dir`, walked from the root and checked (file.c says
 * how; with `create`, a missing last component is made 0700): an
 * O_DIRECTORY descriptor, or -1. When refused and `subject` is not NULL,
 * one stderr line says why (log_say_off). */
int log_open_dir(const char *dir, bool create, const char *subject, const char *path, const char *off);
/* `tmpl` expanded into path, its directory ("." when none) into dir and
 * its name into name (each CUMEMCAP_PATH_MAX bytes), and that directory
 * opened by log_open_dir: its descriptor, or -1, said on stderr. */
int log_open_template(const char *tmpl, char *path, char *dir, char *name, bool create, const char *subject,
		      const char *off);
/* Whether descriptor fd is still the file `held` was (the program may
 * have closed the number and reused it). */
bool log_fd_is(int fd, const struct stat *held);
/* One stderr line: "SUBJECT PATH: WHAT[: errno text]; OFF", where the
 * errno text is left out for `err` 0 (and ": " for an empty `what`). */
void log_say_off(const char *subject, const char *path, const char *what, int err, const char *off);

/* TMPDIR, read once: the default template's directory is under it
 * instead of /tmp when it is set (not in secure execution). With
 * `ask_policy`, only when the policy's template is the default; without
 * (a process nothing configures, its policy not built yet), always. */
void log_file_init(bool ask_policy);

/* Create the file (log_file_state CLOSED, the caller's lock held); on
 * failure, say why and set OFF. */
bool log_file_create(void);
/* Write the start record into the file just created: OPEN, or (it did
 * not fit or fails to write) say why, close it, OFF. */
void log_file_start(struct out *start);
/* Write a whole record if the file is open; a failure turns logging off
 * with one stderr line. */
void log_emit(struct out *o);
/* After fork, in the child: close the parent's file, state CLOSED. */
void log_file_fork_child(void);
