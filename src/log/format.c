/* log/format: see format.h. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log/format.h"
#include "platform/msg.h"
#include "config/policy.h"

bool out_write_all(int fd, const char *b, size_t n)
{
	while (n) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		b += w;
		n -= (size_t)w;
	}
	return true;
}

void out_put(struct out *o, const char *s, size_t n)
{
	if (o->len + n > o->cap && o->flush_fd >= 0) {
		if (!out_write_all(o->flush_fd, o->p, o->len))
			o->lost = true;
		o->len = 0;
	}
	if (o->len + n > o->cap) {
		n = o->cap - o->len;
		o->lost = true;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
}

void out_str(struct out *o, const char *s)
{
	out_put(o, s, strlen(s));
}

void out_strs(struct out *o, ...)
{
	va_list ap;
	va_start(ap, o);
	for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *))
		out_str(o, s);
	va_end(ap);
}

void out_u(struct out *o, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);
	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	out_put(o, d + i, sizeof(d) - i);
}

void out_ms(struct out *o, uint64_t ms)
{
	char frac[4] = { '.', (char)('0' + ms % 1000 / 100), (char)('0' + ms % 100 / 10),
			 (char)('0' + ms % 10) };
	out_u(o, ms / 1000);
	out_put(o, frac, 4);
}

void out_size(struct out *o, uint64_t bytes)
{
	uint64_t whole;
	unsigned hundredths;
	const char *unit = cumemcap_size_split(bytes, &whole, &hundredths);
	out_u(o, whole);
	if (hundredths) {
		char h[3] = { '.', (char)('0' + hundredths / 10), (char)('0' + hundredths % 10) };
		out_put(o, h, 3);
	}
	out_strs(o, " ", unit, NULL);
}

/* JSON: control characters as \u00XX, U+FFFD as \ufffd; a label: the
 * newline as \n, U+FFFD as UTF-8. */
void out_quoted(struct out *o, const char *str, size_t n, size_t max, bool label)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	out_str(o, "\"");
	for (size_t i = 0, len; i < n; i += len ? len : 1) {
		unsigned char c = s[i];
		len = cumemcap_utf8_len(s + i, n - i);
		if (i + (len ? len : 1) > max)
			break;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			out_put(o, e, 2);
		} else if (label ? c == '\n' : c < 0x20 || c == 0x7f) {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			out_put(o, label ? "\\n" : e, label ? 2 : 6);
		} else if (len) {
			out_put(o, (const char *)s + i, len);
		} else {
			out_str(o, label ? "\xef\xbf\xbd" : "\\ufffd");
		}
	}
	out_str(o, "\"");
}

/* Days to a civil date by hand (H. Hinnant's days_from_civil,
 * inverted), since gmtime_r may take a lock. */
void out_time(struct out *o, uint64_t unix_ms)
{
	uint64_t secs = unix_ms / 1000, days = secs / 86400, sod = secs % 86400;
	uint64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
	uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
	uint64_t d = doy - (153 * mp + 2) / 5 + 1, m = mp < 10 ? mp + 3 : mp - 9;
	uint64_t y = yoe + era * 400 + (m <= 2);
	uint64_t f[] = { y, m, d, sod / 3600, sod / 60 % 60, sod % 60, unix_ms % 1000 };
	static const char sep[] = "\"--T::.";
	static const unsigned width[] = { 4, 2, 2, 2, 2, 2, 3 };
	for (int i = 0; i < 7; i++) {
		char digits[8];
		uint64_t v = f[i];
		out_put(o, &sep[i], 1);
		for (unsigned k = width[i]; k-- > 0; v /= 10)
			digits[k] = (char)('0' + v % 10);
		out_put(o, digits, width[i]);
	}
	out_str(o, "Z\"");
}

void out_json(struct out *o, const char *s)
{
	if (s)
		out_quoted(o, s, strlen(s), SIZE_MAX, false);
	else
		out_str(o, "null");
}

void out_key(struct out *o, const char *k)
{
	out_strs(o, ",\"", k, "\":", NULL);
}

void out_key_u(struct out *o, const char *k, uint64_t v)
{
	out_key(o, k);
	out_u(o, v);
}

void out_key_u_or_null(struct out *o, const char *k, bool known, uint64_t v)
{
	out_key(o, k);
	if (known)
		out_u(o, v);
	else
		out_str(o, "null");
}

void out_key_json(struct out *o, const char *k, const char *s)
{
	out_key(o, k);
	out_json(o, s);
}

void out_errno(struct out *o, int e)
{
	static const struct { int e; const char *text; } known[] = {
		{ ENOSPC, "no space left on device" }, { EFBIG, "file too large" },
		{ EDQUOT, "disk quota exceeded" },     { EIO, "input/output error" },
		{ EROFS, "read-only file system" },    { EACCES, "permission denied" },
		{ EPERM, "operation not permitted" },  { ENOENT, "no such file or directory" },
		{ ENOTDIR, "not a directory" },        { ELOOP, "a symbolic link is in the way" },
		{ EEXIST, "file exists" },             { ENAMETOOLONG, "file name too long" },
		{ EMFILE, "too many open files" },     { ENFILE, "too many open files in the system" },
		{ EISDIR, "is a directory" },
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i].e == e) {
			out_str(o, known[i].text);
			return;
		}
	out_str(o, "error ");
	out_u(o, (uint64_t)e);
}

void out_say(struct out *o)
{
	char line[CUMEMCAP_PATH_MAX + 256];
	struct out l = OUT(line);
	out_str(&l, "cumemcap: ");
	out_put(&l, o->p, o->len);
	if (l.len == l.cap)
		l.len--;
	line[l.len++] = '\n';
	cumemcap_write_stderr(line, l.len);
}

