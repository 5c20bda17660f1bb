/* json-out: see json-out.h. One escaping rule for every tool's --json.
 *
 * Thread safety: none needed; it writes to the stream it is given, as
 * stdio does. */
#include "config.h"
#include "tools/json-out.h"

void cumemcap_json_put_str(FILE *out, const char *s)
{
	if (!s) {
		fputs("null", out);
		return;
	}
	fputc('"', out);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			fprintf(out, "\\%c", *c);
		else if (*c < 0x20 || *c == 0x7f)
			fprintf(out, "\\u%04x", *c);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}
