/* text: sizes, durations, times, quoting and the string builder of
 * cumemcap report (see text.h). Single-threaded, no global state. */
#include "config.h"

#include "text.h"

#include "platform/msg.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Noreturn void report_oom(void)
{
	fputs("cumemcap report: out of memory\n", stderr);
	exit(1);
}

void *report_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		report_oom();
	return p;
}

void *report_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		report_oom();
	return p;
}

char *report_xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(report_xmalloc(n), s, n);
}

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), 0 when none. */
static size_t utf8_sequence(const unsigned char *s)
{
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (s[0] >= 0xe0 && s[0] <= 0xef) {
		unsigned char lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		unsigned char lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80
			       ? 4
			       : 0;
	}
	return 0;
}

char *report_xstrdup_utf8(const char *s)
{
	struct report_buf b = { 0 };
	const unsigned char *u = (const unsigned char *)s;

	while (*u) {
		size_t n = utf8_sequence(u);
		if (n) {
			report_buf_add(&b, (const char *)u, n);
			u += n;
		} else {
			report_buf_puts(&b, "\xef\xbf\xbd");
			u++;
		}
	}
	return report_buf_take(&b);
}

/* ---- the string builder ---------------------------------------------------- */

void report_buf_add(struct report_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->s = report_xrealloc(b->s, cap);
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

void report_buf_puts(struct report_buf *b, const char *s)
{
	report_buf_add(b, s, strlen(s));
}

void report_buf_printf(struct report_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		report_buf_add(b, small, (size_t)n);
		return;
	}
	char *big = report_xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	report_buf_add(b, big, (size_t)n);
	free(big);
}

char *report_buf_take(struct report_buf *b)
{
	char *s = b->s ? b->s : report_xstrdup("");
	b->s = NULL;
	b->len = b->cap = 0;
	return s;
}

/* ---- values ----------------------------------------------------------------- */

const char *report_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	uint64_t whole;
	unsigned hundredths;
	const char *unit = cumemcap_size_split(bytes, &whole, &hundredths);
	snprintf(buf, len, "%llu.%02u %s", (unsigned long long)whole, hundredths, unit);
	return buf;
}

const char *report_fmt_duration(double seconds, char *buf, size_t len)
{
	if (!(seconds >= 0) || seconds > 1e12) {
		snprintf(buf, len, "?");
	} else if (seconds < 59.95) {
		snprintf(buf, len, "%.1f s", seconds);
	} else {
		unsigned long long s = (unsigned long long)(seconds + 0.5);
		if (s < 3600)
			snprintf(buf, len, "%llum%02llus", s / 60, s % 60);
		else
			snprintf(buf, len, "%lluh%02llum%02llus", s / 3600, s / 60 % 60, s % 60);
	}
	return buf;
}

/* unix_seconds as UTC calendar time; false when out of range (before
 * 1970, after 9999). The callers format it with a literal strftime format
 * (so that -Wformat checks it) and write "?" when either step fails. */
static bool utc(double unix_seconds, struct tm *tm)
{
	time_t t = (time_t)floor(unix_seconds);
	return unix_seconds >= 0 && unix_seconds < 253402300800.0 && gmtime_r(&t, tm);
}

const char *report_fmt_time(double unix_seconds, char *buf, size_t len)
{
	struct tm tm;
	if (!utc(unix_seconds, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, len, "?");
	return buf;
}

const char *report_fmt_rfc3339(double unix_seconds, char *buf, size_t len)
{
	struct tm tm;
	if (!utc(unix_seconds, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
		snprintf(buf, len, "?");
		return buf;
	}
	double whole = floor(unix_seconds);
	unsigned ms = (unsigned)floor((unix_seconds - whole) * 1000.0 + 1e-6);
	size_t n = strlen(buf);
	snprintf(buf + n, len - n, ".%03uZ", ms > 999 ? 999 : ms);
	return buf;
}

const char *report_fmt_clock(double unix_seconds, char *buf, size_t len)
{
	struct tm tm;
	if (!utc(unix_seconds, &tm) || strftime(buf, len, "%H:%M:%S", &tm) == 0)
		snprintf(buf, len, "?");
	return buf;
}

/* `n` decimal digits at *s into *v. */
static bool digits(const char **s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		if ((*s)[i] < '0' || (*s)[i] > '9')
			return false;
		*v = *v * 10 + ((*s)[i] - '0');
	}
	*s += n;
	return true;
}

bool report_parse_rfc3339(const char *s, double *out)
{
	int year, mon, day, hour = 0, min = 0, sec = 0;
	double frac = 0;
	long offset = 0;
	bool zone = false;

	if (!digits(&s, 4, &year) || *s++ != '-' || !digits(&s, 2, &mon) || *s++ != '-' ||
	    !digits(&s, 2, &day))
		return false;
	if (*s == 'T' || *s == 't' || *s == ' ') {
		char sep = *s++;
		if (!digits(&s, 2, &hour) || *s++ != ':' || !digits(&s, 2, &min))
			return false;
		if (*s == ':') {
			s++;
			if (!digits(&s, 2, &sec))
				return false;
			if (*s == '.') {
				double scale = 0.1;
				if (*++s < '0' || *s > '9')
					return false;
				for (; *s >= '0' && *s <= '9'; s++, scale /= 10)
					frac += (*s - '0') * scale;
			}
		} else if (sep != ' ') {
			return false; /* RFC 3339 has its seconds */
		}
		if (*s == 'Z' || *s == 'z') {
			s++;
			zone = true;
		} else if (*s == '+' || *s == '-') {
			int sign = *s++ == '-' ? -1 : 1, oh, om;
			if (!digits(&s, 2, &oh) || *s++ != ':' || !digits(&s, 2, &om) || oh > 23 ||
			    om > 59)
				return false;
			offset = sign * (oh * 3600L + om * 60L);
			zone = true;
		}
		if (sep != ' ' && !zone)
			return false;
	}
	if (*s || year < 1970 || mon < 1 || mon > 12 || day < 1 || hour > 23 || min > 59 ||
	    sec > 60)
		return false;
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
	if (day > mdays[mon - 1] || (mon == 2 && day == 29 && !leap))
		return false;
	struct tm tm = { .tm_year = year - 1900, .tm_mon = mon - 1, .tm_mday = day,
			 .tm_hour = hour, .tm_min = min, .tm_sec = sec };
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return false;
	*out = (double)t - (double)offset + frac;
	return true;
}

const char *report_signal_name(long long signo)
{
	static const struct {
		int no;
		const char *name;
	} names[] = {
		{ SIGHUP, "SIGHUP" },   { SIGINT, "SIGINT" },   { SIGQUIT, "SIGQUIT" },
		{ SIGILL, "SIGILL" },   { SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" },
		{ SIGBUS, "SIGBUS" },   { SIGFPE, "SIGFPE" },   { SIGKILL, "SIGKILL" },
		{ SIGUSR1, "SIGUSR1" }, { SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
		{ SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" }, { SIGTERM, "SIGTERM" },
		{ SIGXCPU, "SIGXCPU" }, { SIGXFSZ, "SIGXFSZ" }, { SIGSYS, "SIGSYS" },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (names[i].no == signo)
			return names[i].name;
	}
	return NULL;
}

/* ---- strings from a log ------------------------------------------------------ */

static bool is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

static void add_char_safe(struct report_buf *b, unsigned char c)
{
	if (is_control(c))
		report_buf_printf(b, "\\x%02x", c);
	else
		report_buf_add(b, (const char *)&c, 1);
}

void report_buf_safe(struct report_buf *b, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		add_char_safe(b, *p);
}

static bool shell_safe(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("_@%+=:,./-", c) != NULL);
}

void report_buf_shell_arg(struct report_buf *b, const char *s)
{
	bool bare = *s != '\0';

	for (const unsigned char *p = (const unsigned char *)s; *p && bare; p++)
		bare = shell_safe(*p);
	if (bare) {
		report_buf_puts(b, s);
		return;
	}
	report_buf_puts(b, "'");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\'')
			report_buf_puts(b, "'\"'\"'");
		else
			add_char_safe(b, *p);
	}
	report_buf_puts(b, "'");
}

size_t report_text_width(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		n += (*p & 0xc0) != 0x80;
	return n;
}
