/* json-out: a JSON string written to a stdio stream, for the tools'
 * --json outputs (cumemcap-config, cumemcap-group, cumemcap-report).
 *
 * Thread safety: none of its own; it writes to the stream it is given, as
 * stdio does. */
#pragma once

#include <stdio.h>

/* s as a JSON string: quotes, backslashes, control characters and DEL
 * escaped; other bytes as they are (the callers hand over UTF-8). NULL
 * writes null. */
void cumemcap_json_put_str(FILE *out, const char *s);
