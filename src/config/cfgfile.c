/* cfgfile: see cfgfile.h, which says how it is thread-safe. */
#include "config/cfgfile.h"
#include "platform/msg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Trim [*b, *e) in place. */
static void trim(const char **b, const char **e)
{
	while (*b < *e && is_blank(**b))
		(*b)++;
	while (*e > *b && is_blank((*e)[-1]))
		(*e)--;
}

const char *cumemcap_config_quote(char *dst, size_t cap, const char *s)
{
	size_t o = 0;
	for (const char *p = s; *p && o + 5 < cap; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", c);
		else
			dst[o++] = (char)c;
	}
	if (o < cap)
		dst[o] = '\0';
	return dst;
}

void cumemcap_config_prefix(char *err, size_t errlen, const char *fmt, ...)
{
	char own[1024];
	cumemcap_copy(own, sizeof(own), err);
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < errlen)
		cumemcap_copy(err + n, errlen - (size_t)n, own);
}

bool cumemcap_config_parse(const char *path, char *text, size_t len, cumemcap_config_fn section,
			   cumemcap_config_fn entry, void *ctx, char *err, size_t errlen)
{
	char *p = text, *end = text + len, shown[160];
	unsigned line = 0;

	while (p < end) {
		char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *lb = p, *le = eol ? eol : end;
		line++;
		p = eol ? eol + 1 : end;
		if ((size_t)(le - lb) > CUMEMCAP_CONFIG_MAX_LINE) {
			snprintf(err, errlen, "line longer than %u bytes", CUMEMCAP_CONFIG_MAX_LINE);
			goto fail;
		}
		if (memchr(lb, '\0', (size_t)(le - lb))) {
			snprintf(err, errlen, "NUL byte in line; is this a text file?");
			goto fail;
		}
		for (const char *c = lb; c < le; c++)
			if (*c == '#' && (c == lb || is_blank(c[-1])))
				le = c;
		trim(&lb, &le);
		if (lb == le)
			continue;
		/* The line and its words end in place, at most at text[len]. */
		text[le - text] = '\0';
		const char *kb, *ke, *vb, *ve;
		bool header = *lb == '[';
		if (header) {
			if (le[-1] != ']') {
				snprintf(err, errlen, "section header \"%s\" does not end with ']'; "
					 "expected [device SELECTOR] or [program GLOB]",
					 cumemcap_config_quote(shown, sizeof(shown), lb));
				goto fail;
			}
			kb = lb + 1;
			ve = le - 1;
			trim(&kb, &ve);
			for (ke = kb; ke < ve && !is_blank(*ke); ke++)
				;
			vb = ke;
		} else {
			const char *eq = memchr(lb, '=', (size_t)(le - lb));
			if (!eq) {
				snprintf(err, errlen, "\"%s\" is not a setting; expected key = value",
					 cumemcap_config_quote(shown, sizeof(shown), lb));
				goto fail;
			}
			kb = lb;
			ke = eq;
			vb = eq + 1;
			ve = le;
			trim(&kb, &ke);
			if (kb == ke) {
				snprintf(err, errlen, "missing key before '='");
				goto fail;
			}
		}
		trim(&vb, &ve);
		text[ke - text] = '\0';
		text[ve - text] = '\0';
		if (!(header ? section : entry)(ctx, kb, vb, line, err, errlen))
			goto fail;
	}
	return true;
fail:
	cumemcap_config_prefix(err, errlen, "%s:%u: ", path, line);
	return false;
}

/* Read the open file `fd` (closed here): at most the limit and one byte,
 * whatever fstat said, since the file may grow while it is read. */
static bool read_fd(int fd, const char *path, char **text, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	ssize_t r = 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		snprintf(err, errlen, "%s: not a regular file", path);
	else if (st.st_size > (off_t)CUMEMCAP_CONFIG_MAX_BYTES)
		snprintf(err, errlen, "%s: larger than %u bytes", path, CUMEMCAP_CONFIG_MAX_BYTES);
	else if (!(buf = malloc((cap = (size_t)st.st_size + 1) + 1)))
		snprintf(err, errlen, "%s: out of memory", path);
	while (buf && n <= CUMEMCAP_CONFIG_MAX_BYTES) {
		if (n == cap) {
			/* It grew since fstat: room for all it may hold. */
			char *more = realloc(buf, CUMEMCAP_CONFIG_MAX_BYTES + 2);
			if (!more)
				break;
			buf = more;
			cap = CUMEMCAP_CONFIG_MAX_BYTES + 1;
		}
		r = read(fd, buf + n, cap - n);
		if (r > 0)
			n += (size_t)r;
		else if (r == 0 || errno != EINTR)
			break;
	}
	int e = errno;
	close(fd);
	if (buf && r < 0) {
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(e));
	} else if (buf && n > CUMEMCAP_CONFIG_MAX_BYTES) {
		snprintf(err, errlen, "%s: larger than %u bytes", path, CUMEMCAP_CONFIG_MAX_BYTES);
	} else if (buf) {
		buf[n] = '\0';
		*text = buf;
		*len = n;
		return true;
	}
	free(buf);
	return false;
}

/* O_NONBLOCK: opening a FIFO must not hang the process before main; only a
 * regular file is read, and O_NONBLOCK does nothing to those. */
#define CONFIG_OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

bool cumemcap_config_read(const char *path, char **text, size_t *len, char *err, size_t errlen)
{
	int fd = open(path, CONFIG_OPEN_FLAGS);
	if (fd < 0) {
		int e = errno;
		struct stat ls;
		if (e == ENOENT && lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode))
			snprintf(err, errlen, "%s: cannot open: a symbolic link to a file that does not exist", path);
		else
			snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
		return false;
	}
	return read_fd(fd, path, text, len, err, errlen);
}

int cumemcap_config_read_trusted(const char *path, uid_t owner, char **text, size_t *len,
				 char *why, size_t whylen)
{
	char dir[4096];
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	if (slash && ((size_t)(slash - path) >= sizeof(dir) || !*base)) {
		snprintf(why, whylen, "%s: not a usable file name", path);
		return -1;
	}
	/* "/etc" for /etc/x, "/" for /x, "." for x */
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
		 slash ? path : ".");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0; /* no directory, no file */
	int fd = openat(dfd, base, CONFIG_OPEN_FLAGS | O_NOFOLLOW);
	int e = errno;
	struct stat ds, fs;
	bool dir_ok = fstat(dfd, &ds) == 0 && ds.st_uid == owner && !(ds.st_mode & (S_IWGRP | S_IWOTH));
	close(dfd);
	if (fd < 0) {
		if (e == ENOENT)
			return 0;
		snprintf(why, whylen, "%s: %s", path,
			 e == ELOOP ? "is a symbolic link" : strerror(e));
		return -1;
	}
	/* read_fd refuses what is not a regular file. */
	if (!dir_ok)
		snprintf(why, whylen, "%s: its directory %s is not owned by uid %u or is writable by others",
			 path, dir, (unsigned)owner);
	else if (fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) &&
		 (fs.st_uid != owner || (fs.st_mode & (S_IWGRP | S_IWOTH))))
		snprintf(why, whylen, "%s: not owned by uid %u or writable by others", path, (unsigned)owner);
	else
		return read_fd(fd, path, text, len, why, whylen) ? 1 : -1;
	close(fd);
	return -1;
}

/* Levenshtein distance, capped: words here are short. */
static unsigned distance(const char *s, const char *t)
{
	size_t n = strlen(s), m = strlen(t);
	if (n > 32 || m > 32)
		return 99;
	unsigned row[33];
	for (size_t j = 0; j <= m; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= n; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= m; j++) {
			unsigned up = row[j];
			unsigned best = diag + (s[i - 1] != t[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[m];
}

const char *cumemcap_config_suggest(const char *word, const char *const *candidates)
{
	const char *best = NULL;
	unsigned best_d = 3;
	for (const char *const *c = candidates; *c; c++) {
		unsigned d = distance(word, *c);
		if (d < best_d) {
			best_d = d;
			best = *c;
		}
	}
	return best;
}
