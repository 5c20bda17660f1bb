/* msg: see msg.h. */
#include "platform/msg.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

size_t cumemcap_utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80 ? 1 : s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : s[0] <= 0xf4 ? 4 : 0;
	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) || (s[0] == 0xf0 && s[1] < 0x90) ||
	    (s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return len;
}

void cumemcap_signal_hold(struct cumemcap_signal_hold *h, int sig)
{
	sigset_t pending;
	sigemptyset(&h->set);
	sigaddset(&h->set, sig);
	pthread_sigmask(SIG_BLOCK, &h->set, &h->old);
	h->sig = sig;
	h->was_pending = sigpending(&pending) == 0 && sigismember(&pending, sig) == 1;
}

void cumemcap_signal_release(struct cumemcap_signal_hold *h)
{
	sigset_t pending;
	if (!h->was_pending && sigpending(&pending) == 0 && sigismember(&pending, h->sig) == 1) {
		struct timespec now = { 0, 0 };
		sigtimedwait(&h->set, NULL, &now);
	}
	pthread_sigmask(SIG_SETMASK, &h->old, NULL);
}

void cumemcap_write_stderr(const char *b, size_t n)
{
	int saved = errno;
	struct cumemcap_signal_hold h;
	cumemcap_signal_hold(&h, SIGPIPE);
	while (n) {
		ssize_t w = write(STDERR_FILENO, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		b += w;
		n -= (size_t)w;
	}
	cumemcap_signal_release(&h);
	errno = saved;
}

CUMEMCAP_PRINTF(1, 0) static void emit(const char *fmt, va_list ap)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "cumemcap: ");
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	cumemcap_write_stderr(line, len);
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
	/* Keep what was buffered; _exit: no atexit handler of a library whose
	 * constructor has not run. */
	fflush(NULL);
	_exit(CUMEMCAP_EXIT_CONFIG);
}

const char *cumemcap_size_split(uint64_t bytes, uint64_t *whole, unsigned *hundredths)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	unsigned u = 0;
	while (u < 6 && (bytes >> (10 * (u + 1))) != 0)
		u++;
	unsigned shift = 10 * u;
	uint64_t mask = (UINT64_C(1) << shift) - 1;
	uint64_t rem = bytes & mask;
	/* A digit at a time: rem * 100 would wrap for EiB. */
	uint64_t tenths = (rem * 10) >> shift;
	rem = (rem * 10) & mask;
	*whole = bytes >> shift;
	*hundredths = (unsigned)(tenths * 10 + ((rem * 10) >> shift));
	return units[u];
}

const char *cumemcap_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	uint64_t whole;
	unsigned hundredths;
	const char *unit = cumemcap_size_split(bytes, &whole, &hundredths);
	if (hundredths == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)whole, unit);
	else
		snprintf(buf, len, "%llu.%02u %s", (unsigned long long)whole, hundredths, unit);
	return buf;
}

void cumemcap_copy(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}
