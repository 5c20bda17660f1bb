/* msg: see msg.h. */
#include "msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

CUMEMCAP_PRINTF(1, 0) static void emit(const char *fmt, va_list ap)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "cumemcap: ");
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	int saved = errno;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(STDERR_FILENO, line + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	errno = saved;
}

void cumemcap_msg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(fmt, ap);
	va_end(ap);
}

_Noreturn void cumemcap_fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	emit(fmt, ap);
	va_end(ap);
	/* Whatever other libraries' constructors buffered is kept; the
	 * program's main has not run. _exit: atexit handlers of libraries
	 * whose constructors have not run yet must not run either. */
	fflush(NULL);
	_exit(CUMEMCAP_EXIT_CONFIG);
}

const char *cumemcap_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	unsigned u = 0;
	uint64_t scale = 1;
	while (u + 1 < sizeof(units) / sizeof(units[0]) && bytes / scale >= 1024) {
		scale *= 1024;
		u++;
	}
	uint64_t whole = bytes / scale;
	uint64_t hundredths = (bytes % scale) * 100 / scale;
	if (hundredths == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)whole, units[u]);
	else
		snprintf(buf, len, "%llu.%02llu %s", (unsigned long long)whole,
			 (unsigned long long)hundredths, units[u]);
	return buf;
}
