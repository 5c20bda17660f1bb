/* logfile: opening one footprint log for logs.c. Logs often live in
 * directories other users write to (/var/log/cumemcap), so a file is
 * always opened non-blocking and read only when fstat() says it is a
 * regular file, and not one of /proc or /sys: a FIFO, a device or
 * /proc/kmsg never hangs the report. Which links are followed depends on
 * how the path came (enum report_source). Single-threaded. */
#pragma once

#include <stdio.h>

/* How a log's path came to the reader. */
enum report_source {
	REPORT_TYPED,  /* given on the command line: a symbolic link is followed */
	REPORT_LISTED, /* found in a directory given on the command line: only a
			* link the caller owns is followed; another user's is
			* skipped with a note */
};

enum report_read {
	REPORT_READ_FAILED = 0, /* could not be opened or read (one line said why) */
	REPORT_READ_DONE,
	REPORT_READ_SKIPPED,    /* a listed entry that is no log to read: another user's link
				 * (one line said so), or no regular file (quietly) */
};

/* Open the log at `path` as `source` says: a stream on a regular file, or
 * NULL with *result FAILED (after one line on stderr) or SKIPPED (after one
 * line for another user's link; quietly for a listed entry that is no
 * file, such as a subdirectory). */
FILE *report_log_open(const char *path, enum report_source source, enum report_read *result);
