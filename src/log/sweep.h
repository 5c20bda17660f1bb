/* log/sweep: who owns a metrics file, and the files of dead writers
 * (sweep.c says how a companion lock tells a live writer from a dead
 * one, and what a sweep may remove).
 *
 * Thread safety: called by the metrics writer only (metrics.c's lock);
 * no state of its own. Only the two that unlink are async-signal-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* ".NAME.cumemcap-lock" into out; false when it does not fit. */
bool log_sweep_companion(const char *name, char *out, size_t cap);
/* Create and lock the companion `companion` in dfd (a dead writer's is
 * swept first): its descriptor (held for life; *held its identity), or
 * -EEXIST when a live writer has it, or -errno. */
int log_sweep_claim(int dfd, const char *companion, struct stat *held);
/* Sweep every companion in dfd but `mine`. */
void log_sweep_dir(int dfd, const char *mine);
/* Whether `name` in dfd is there and another user's (of any file type):
 * not one a writer may replace. */
bool log_sweep_others(int dfd, const char *name);
/* Remove `name` in dfd if it is still the file `held` was.
 * Async-signal-safe. */
void log_sweep_unlink_held(int dfd, const char *name, const struct stat *held);
/* Remove `name` in dfd if it is a regular file of the effective uid's
 * (never what a link points at, never another user's file).
 * Async-signal-safe. */
void log_sweep_unlink_mine(int dfd, const char *name);
