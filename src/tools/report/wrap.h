/* wrap: a line of text wrapped for the plot's titles (cumemcap report).
 *
 * The text's clauses (split at ", " outside parentheses: "GPU 0 (GPU-...,
 * nvidia-smi 2)" is one) are wrapped into lines of at most `width`
 * characters (code points); a clause longer than a line is wrapped at its
 * spaces, and a word longer than a line is cut into pieces, so a long
 * program name takes more lines instead of pushing the limit off a panel.
 *
 * Pure functions, thread-safe; allocation failure ends the program
 * (report_oom). */
#pragma once

#include <stddef.h>

struct report_wrapped {
	char **lines; /* at least one, "" for an empty text */
	size_t n;
};

void report_wrap(struct report_wrapped *w, const char *text, size_t width);
void report_wrapped_free(struct report_wrapped *w);
