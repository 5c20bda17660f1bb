/* log/file: see file.h (what it owns and how it is thread-safe). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/file.h"
#include "platform/msg.h"

_Atomic int log_file_state;
static int file_fd = -1;
static struct stat file_st; /* what file_fd is */
char log_file_path[CUMEMCAP_PATH_MAX + 16];

bool log_expand(const char *tmpl, char *dst, size_t len)
{
	if (len == 0)
		return false;
	struct out o = { .p = dst, .cap = len - 1, .flush_fd = -1 };
	char host[256] = ""; /* terminated: gethostname gets one byte less */
	if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
		memcpy(host, "unknown", 8);
	const char *prog = cumemcap_policy()->program[0] ? cumemcap_policy()->program : "unknown";
	for (const char *s = tmpl; *s; s++) {
		if (*s != '%' || !s[1]) {
			out_put(&o, s, 1);
			continue;
		}
		const char *text = NULL;
		switch (*++s) {
		case 'p': out_u(&o, (uint64_t)getpid()); break;
		case 'u': out_u(&o, (uint64_t)geteuid()); break;
		case 'h': text = host; break;
		case 'n': text = prog; break;
		default: out_put(&o, s, 1); break; /* %% (the parser allows no other) */
		}
		for (; text && *text; text++)
			out_put(&o, *text == '/' ? "_" : text, 1);
	}
	dst[o.len] = '\0';
	return !o.lost;
}

/* So that "*.jsonl" still matches; ".x" has no extension: ".x.1". */
bool log_suffixed(const char *name, unsigned n, char *out, size_t cap)
{
	struct out o = { .p = out, .cap = cap - 1, .flush_fd = -1 };
	const char *dot = strrchr(name, '.');
	if (n == 0 || !dot || dot == name)
		dot = name + strlen(name);
	out_put(&o, name, (size_t)(dot - name));
	if (n) {
		out_str(&o, ".");
		out_u(&o, n);
	}
	out_str(&o, dot);
	out[o.len] = '\0';
	return !o.lost;
}

static char default_template[CUMEMCAP_PATH_MAX]; /* under $TMPDIR ("": the policy's) */
static const char default_log[] = CUMEMCAP_DEFAULT_LOG;

void log_file_init(bool ask_policy)
{
	const struct cumemcap_policy *p = ask_policy ? cumemcap_policy() : NULL;
	if (p && (p->secure || p->log != CUMEMCAP_LOG_FILE || p->log_src.origin != CUMEMCAP_FROM_DEFAULT ||
		  strcmp(p->log_path, default_log) != 0))
		return;
	const char *tmp = secure_getenv("TMPDIR");
	if (!tmp || tmp[0] != '/')
		return;
	struct out o = { .p = default_template, .cap = sizeof(default_template) - 1, .flush_fd = -1 };
	size_t n = strlen(tmp);
	while (n > 0 && tmp[n - 1] == '/')
		n--;
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)tmp[i] < 0x20 || tmp[i] == 0x7f) {
			default_template[0] = '\0';
			return; /* not a directory anyone meant */
		}
		out_put(&o, tmp[i] == '%' ? "%%" : &tmp[i], tmp[i] == '%' ? 2 : 1);
	}
	out_str(&o, default_log + sizeof("/tmp") - 1);
	default_template[o.lost ? 0 : o.len] = '\0';
}

void log_say_off(const char *subject, const char *path, const char *what, int err, const char *off)
{
	char buf[CUMEMCAP_PATH_MAX + 128];
	struct out o = OUT(buf);
	out_strs(&o, subject, " ", path, ": ", what, NULL);
	if (err) {
		out_str(&o, what[0] ? ": " : "");
		out_errno(&o, err);
	}
	out_strs(&o, "; ", off, NULL);
	out_say(&o);
}

/* Said once, by the thread that turns logging off. */
static void turn_off(const char *what, int err)
{
	if (atomic_exchange(&log_file_state, OFF) != OFF)
		log_say_off("log", log_file_path, what, err, "logging is off");
}

bool log_fd_is(int fd, const struct stat *held)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_dev == held->st_dev && st.st_ino == held->st_ino;
}

/* One record, one write(2). SIGXFSZ is held off, so that only the log
 * notices a write past a file size limit. Async-signal-safe. */
static bool write_record(const char *b, size_t n)
{
	if (!log_fd_is(file_fd, &file_st)) {
		turn_off("the program closed or reused its descriptor", 0);
		return false;
	}
	struct cumemcap_signal_hold h;
	cumemcap_signal_hold(&h, SIGXFSZ);
	ssize_t w;
	do
		w = write(file_fd, b, n);
	while (w < 0 && errno == EINTR);
	int e = errno;
	cumemcap_signal_release(&h);
	if (w != (ssize_t)n)
		turn_off(w < 0 ? "" : "short write (the disk is full or the file at its size limit)", w < 0 ? e : 0);
	return w == (ssize_t)n;
}

void log_emit(struct out *o)
{
	if (o->lost || atomic_load_explicit(&log_file_state, memory_order_acquire) != OPEN)
		return;
	int saved = errno;
	write_record(o->p, o->len);
	errno = saved;
}

/* The next component at *p ("" and "." skipped) into comp; false at the
 * end or when one is too long (*too_long). */
static bool next_component(const char **p, char *comp, size_t cap, bool *too_long)
{
	for (;;) {
		*p += strspn(*p, "/");
		size_t n = strcspn(*p, "/");
		if (n == 0 || n >= cap) {
			*too_long = n >= cap;
			return false;
		}
		memcpy(comp, *p, n);
		comp[n] = '\0';
		*p += n;
		if (strcmp(comp, ".") != 0)
			return true;
	}
}

static bool more_components(const char *p)
{
	char comp[256];
	bool too_long = false;
	return next_component(&p, comp, sizeof(comp), &too_long) || too_long;
}

/* Walked from "/" (or ".") a component at a time, so that no spelling of
 * the path escapes the check: in a directory others can write, nothing is
 * followed, each step is ours or root's, the last ours and private
 * (docs/footprint-log.md#file-safety). */
int log_open_dir(const char *dir, bool create, const char *subject, const char *path, const char *off)
{
	/* rest: what is not walked yet, a followed link's target in front; at:
	 * the path up to the failing component (all once a link was followed). */
	char rest[2 * CUMEMCAP_PATH_MAX], comp[256], link[CUMEMCAP_PATH_MAX], at[CUMEMCAP_PATH_MAX];
	/* With err: "" or "cannot create "; without: what is wrong with `at`. */
	const char *what = "";
	int err = ENAMETOOLONG, cur = -1;
	size_t dn = strlen(dir);
	uid_t me = geteuid(), owner = 0;
	unsigned links = 0;
	if (dn >= sizeof(rest) || dn >= sizeof(at))
		goto fail;
	memcpy(rest, dir, dn + 1);
	memcpy(at, dir, dn + 1);
	cur = open(rest[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat cs, ns;
	if (cur < 0 || fstat(cur, &cs) != 0) {
		err = errno;
		goto fail;
	}
	const char *p = rest;
	bool too_long = false;
	while (next_component(&p, comp, sizeof(comp), &too_long)) {
		if (links == 0) {
			memcpy(at, rest, (size_t)(p - rest));
			at[p - rest] = '\0';
		}
		bool last = !more_components(p);
		bool shared = (cs.st_mode & S_IWOTH) != 0;
		int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = errno;
		if (next < 0 && err == ENOENT && last && create) {
			if (mkdirat(cur, comp, 0700) != 0 && errno != EEXIST) {
				what = "cannot create ";
				err = errno;
				goto fail;
			}
			next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			err = errno;
		}
		if (next < 0) {
			struct stat ls;
			if (fstatat(cur, comp, &ls, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(ls.st_mode)) {
				what = err == ENOENT || err == ENOTDIR ? "cannot create " : "";
				goto fail;
			}
			if (shared) {
				what = "is a symbolic link";
				err = 0;
				goto fail;
			}
			/* A link in a private directory: walk its target instead. */
			ssize_t ln = readlinkat(cur, comp, link, sizeof(link));
			size_t tail = strlen(p);
			if (++links > 40 || ln <= 0 || (size_t)ln >= sizeof(link) ||
			    (size_t)ln + 1 + tail >= sizeof(rest)) {
				err = ln <= 0 ? errno : ELOOP;
				goto fail;
			}
			memmove(rest + ln + 1, p, tail + 1);
			memcpy(rest, link, (size_t)ln);
			rest[ln] = '/';
			p = rest;
			if (link[0] == '/') {
				close(cur);
				cur = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
				if (cur < 0 || fstat(cur, &cs) != 0) {
					err = errno;
					goto fail;
				}
			}
			continue;
		}
		err = fstat(next, &ns) != 0 ? errno : 0;
		if (!err && shared && (last ? ns.st_uid != me : ns.st_uid != me && ns.st_uid != 0)) {
			what = "is owned by uid";
			owner = ns.st_uid;
		} else if (!err && shared && last && (ns.st_mode & (S_IWGRP | S_IWOTH))) {
			what = "is writable by other users";
		} else if (!err) {
			close(cur);
			cur = next;
			cs = ns;
			continue;
		}
		close(next);
		goto fail;
	}
	if (!too_long)
		return cur;
	err = ENAMETOOLONG;
fail:
	if (cur >= 0)
		close(cur);
	if (!subject)
		return -1;
	char why[2 * CUMEMCAP_PATH_MAX + 64];
	struct out o = OUT(why);
	if (err) {
		out_strs(&o, what, dir, NULL);
	} else {
		out_strs(&o, at, " ", what, NULL);
		if (strcmp(what, "is owned by uid") == 0) {
			out_str(&o, " ");
			out_u(&o, owner);
			out_str(&o, ", not ");
			out_u(&o, me);
		}
		out_str(&o, " (a shared directory must hold a private one)");
	}
	why[o.len < o.cap ? o.len : o.cap - 1] = '\0';
	log_say_off(subject, path, why, err, off);
	return -1;
}

int log_open_template(const char *tmpl, char *path, char *dir, char *name, bool create, const char *subject,
		      const char *off)
{
	if (!log_expand(tmpl, path, CUMEMCAP_PATH_MAX)) {
		log_say_off(subject, path, "the expanded path is too long", 0, off);
		return -1;
	}
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	snprintf(dir, CUMEMCAP_PATH_MAX, "%.*s", (int)(n ? n : 1), slash ? path : ".");
	cumemcap_copy(name, CUMEMCAP_PATH_MAX, slash ? slash + 1 : path);
	return log_open_dir(dir, create, subject, path, off);
}

bool log_file_create(void)
{
	const char *tmpl = default_template[0] ? default_template : cumemcap_policy()->log_path;
	char dir[CUMEMCAP_PATH_MAX], base[CUMEMCAP_PATH_MAX];
	int dfd = log_open_template(tmpl, log_file_path, dir, base, true, "log", "logging is off");
	if (dfd < 0) {
		atomic_store(&log_file_state, OFF);
		return false;
	}
	/* Never followed nor appended to (pid reuse, a link): NAME.1.jsonl, ... */
	size_t at = strlen(log_file_path) - strlen(base);
	int fd = -1, e = EEXIST;
	for (unsigned i = 0; i < 100 && fd < 0 && e == EEXIST; i++) {
		char cand[CUMEMCAP_PATH_MAX + 8];
		if (!log_suffixed(base, i, cand, sizeof(cand))) {
			e = ENAMETOOLONG;
			break;
		}
		fd = openat(dfd, cand, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0600);
		e = errno;
		if (fd >= 0)
			cumemcap_copy(log_file_path + at, sizeof(log_file_path) - at, cand);
	}
	close(dfd);
	if (fd < 0 || fstat(fd, &file_st) != 0) {
		turn_off("", e ? e : EEXIST);
		if (fd >= 0)
			close(fd);
		return false;
	}
	file_fd = fd;
	return true;
}

void log_file_start(struct out *start)
{
	if (start->lost) {
		turn_off("the start record does not fit", 0);
	} else if (write_record(start->p, start->len)) {
		atomic_store_explicit(&log_file_state, OPEN, memory_order_release);
		return;
	}
	close(file_fd);
	file_fd = -1;
}

/* The parent's file is not ours: close it if the number is still that file. */
void log_file_fork_child(void)
{
	if (atomic_load(&log_file_state) == OPEN && file_fd >= 0 && log_fd_is(file_fd, &file_st))
		close(file_fd);
	file_fd = -1;
	atomic_store(&log_file_state, CLOSED);
}
