/* log: see log.h. The record schema is README "Footprint logs".
 *
 * One JSON Lines file per process, opened at the first GPU use (so a
 * process that never uses CUDA writes nothing), in a directory checked
 * with the file created O_EXCL|O_NOFOLLOW, mode 0600. Every record is
 * formatted whole into a buffer and written with one write(2) to an
 * O_APPEND descriptor: lines from different threads (and from a signal
 * handler) never interleave or tear, and no lock is needed to write.
 *
 * Events from hooks (segment, refusal, driver_oom) are written at once
 * rather than queued for the worker: they are rare (a segment is a driver
 * allocation, a refusal the end of a request), the write is one syscall
 * into the page cache, and a queue would lose the last events exactly
 * when they matter, on a crash. The hook holds no lock while it writes.
 *
 * Samples, NVML and the Prometheus file belong to the worker thread
 * (cumemcap_log_tick); writing them holds tick_lock, which no hook ever
 * takes, and NVML is asked with no lock held.
 *
 * The exit summary is written once, by whoever claims it first: the
 * library destructor (normal exit, exit() from any thread) or the handler
 * of a fatal signal. That path is async-signal-safe: no malloc, no stdio,
 * no locks; numbers are formatted here; the record goes through a static
 * buffer only its one claimant uses.
 *
 * Which figures a record, the summary and the metrics carry, under which
 * names and in which order, is the figure list's (figures.h); they are
 * read through the ledger's snapshot (cumemcap_ledger_read), never from
 * its storage. This file only walks the list and formats.
 *
 * A failed write turns logging off with one stderr line; errno is kept
 * and nothing of the failure reaches the program. Never calls CUDA. */
#include "log/log.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "state/device.h"
#include "state/ledger.h"
#include "platform/msg.h"
#include "driver/nvml.h"
#include "config/policy.h"

/* ---- text: async-signal-safe formatting ------------------------------------------------ */

struct out {
	char *p;
	size_t cap, len;
	int flush_fd; /* >= 0: write out when full instead of cutting */
	bool lost;    /* something did not fit or could not be written */
};

#define OUT(buf) { .p = (buf), .cap = sizeof(buf), .len = 0, .flush_fd = -1, .lost = false }

static bool write_all(int fd, const char *b, size_t n)
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

static void put(struct out *o, const char *s, size_t n)
{
	if (o->len + n > o->cap && o->flush_fd >= 0) {
		if (!write_all(o->flush_fd, o->p, o->len))
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

static void put_s(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* The text so far as a C string (its last byte gives way when full). */
static const char *cstr(struct out *o)
{
	o->p[o->len < o->cap ? o->len : o->cap - 1] = '\0';
	return o->p;
}

static void put_u(struct out *o, uint64_t v)
{
	char d[24];
	size_t i = sizeof(d);
	do {
		d[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(o, d + i, sizeof(d) - i);
}

/* Milliseconds as seconds with three decimals: 5000 -> 5.000. */
static void put_ms(struct out *o, uint64_t ms)
{
	char frac[4] = { '.', (char)('0' + ms % 1000 / 100), (char)('0' + ms % 100 / 10),
			 (char)('0' + ms % 10) };
	put_u(o, ms / 1000);
	put(o, frac, 4);
}

static void put_u_or_null(struct out *o, bool known, uint64_t v)
{
	if (known)
		put_u(o, v);
	else
		put_s(o, "null");
}

/* What cumemcap_fmt_size writes: "512 MiB", "1.50 GiB", "4096 B"... */
static void put_size(struct out *o, uint64_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	unsigned u = 0;
	uint64_t scale = 1;
	while (bytes >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]) && bytes / scale >= 1024) {
		scale *= 1024;
		u++;
	}
	put_u(o, bytes / scale);
	uint64_t hundredths = (bytes % scale) * 100 / scale;
	if (hundredths) {
		char h[3] = { '.', (char)('0' + hundredths / 10), (char)('0' + hundredths % 10) };
		put(o, h, 3);
	}
	put_s(o, " ");
	put_s(o, units[u]);
}

/* Bytes of a valid UTF-8 sequence at s (0: not one). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
		return 0; /* overlong, surrogate, past U+10FFFF */
	return len;
}

/* A JSON string; bytes that are not UTF-8 become U+FFFD. */
static void put_json_n(struct out *o, const char *str, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str;
	put_s(o, "\"");
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len = 1;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			put(o, e, 2);
		} else if (c < 0x20 || c == 0x7f) {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			put(o, e, 6);
		} else if (c < 0x80) {
			put(o, (const char *)s + i, 1);
		} else if ((len = utf8_len(s + i, n - i))) {
			put(o, (const char *)s + i, len);
		} else {
			put_s(o, "\\ufffd");
			len = 1;
		}
		i += len;
	}
	put_s(o, "\"");
}

static void put_json(struct out *o, const char *s)
{
	put_json_n(o, s, strlen(s));
}

/* ,"key": */
static void key(struct out *o, const char *k)
{
	put_s(o, ",\"");
	put_s(o, k);
	put_s(o, "\":");
}

static void put_errno(struct out *o, int e)
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
			put_s(o, known[i].text);
			return;
		}
	put_s(o, "error ");
	put_u(o, (uint64_t)e);
}

/* "cumemcap: <o>\n" on stderr, one write. */
static void say(struct out *o)
{
	char line[CUMEMCAP_PATH_MAX + 256];
	struct out l = OUT(line);
	put_s(&l, "cumemcap: ");
	put(&l, o->p, o->len);
	if (l.len == l.cap)
		l.len--;
	line[l.len++] = '\n';
	cumemcap_write_stderr(line, l.len);
}

/* ---- state ---------------------------------------------------------------------------- */

enum { CLOSED = 0, OPEN, OFF };

/* The policy's answers, copied once (a signal handler reads these). */
static pthread_once_t snapshot_once = PTHREAD_ONCE_INIT;
static enum cumemcap_log_target target = CUMEMCAP_LOG_OFF;
static uint32_t interval_ms = CUMEMCAP_DEFAULT_LOG_INTERVAL_MS;
static bool metrics_wanted;

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int file_state;
static int file_fd = -1;
static dev_t file_dev;
static ino_t file_ino;
static char file_path[CUMEMCAP_PATH_MAX + 16];

static _Atomic bool exit_claimed;
static _Atomic uint64_t samples_written;
/* Highest NVML figure seen per GPU, plus one (0: never known). */
static _Atomic uint64_t peak_driver[CUMEMCAP_MAX_DEVICES];

static void snapshot(void)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	interval_ms = p->log_interval_ms ? p->log_interval_ms : CUMEMCAP_DEFAULT_LOG_INTERVAL_MS;
	metrics_wanted = p->metrics_path[0] != '\0';
	target = p->log;
}

static void ensure_snapshot(void)
{
	pthread_once(&snapshot_once, snapshot);
}

/* "/tmp/cumemcap-%u/%n.%h.%p.jsonl" -> a path; false if too long. */
static bool expand(const char *tmpl, char *dst, size_t len)
{
	struct out o = { .p = dst, .cap = len - 1, .flush_fd = -1 };
	char host[256] = "unknown";
	if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
		memcpy(host, "unknown", 8);
	host[sizeof(host) - 1] = '\0';
	const char *prog = cumemcap_policy()->program[0] ? cumemcap_policy()->program : "unknown";
	for (const char *s = tmpl; *s; s++) {
		if (*s != '%' || !s[1]) {
			put(&o, s, 1);
			continue;
		}
		const char *text = NULL;
		switch (*++s) {
		case 'p': put_u(&o, (uint64_t)getpid()); break;
		case 'u': put_u(&o, (uint64_t)geteuid()); break;
		case 'h': text = host; break;
		case 'n': text = prog; break;
		default: put(&o, s, 1); break; /* %% (the parser allows no other) */
		}
		/* A name never adds a directory level. */
		for (; text && *text; text++)
			put(&o, *text == '/' ? "_" : text, 1);
	}
	dst[o.len] = '\0';
	return !o.lost;
}

bool cumemcap_log_expand(const char *tmpl, char *dst, size_t len)
{
	return len > 0 && expand(tmpl, dst, len);
}

/* ---- the file ------------------------------------------------------------------------- */

/* Say why logging is off; `what` and `err` (an errno, 0: none) name it. */
static void say_off(const char *what, int err)
{
	char buf[CUMEMCAP_PATH_MAX + 128];
	struct out o = OUT(buf);
	put_s(&o, "log ");
	put_s(&o, file_path);
	put_s(&o, ": ");
	put_s(&o, what);
	if (err) {
		put_s(&o, what[0] ? ": " : "");
		put_errno(&o, err);
	}
	put_s(&o, "; logging is off");
	say(&o);
}

static void turn_off(const char *what, int err)
{
	int open_state = OPEN;
	if (atomic_compare_exchange_strong(&file_state, &open_state, OFF))
		say_off(what, err);
}

/* Whether RLIMIT_FSIZE was finite when the file was opened. */
static bool size_limited;

/* One record, one write(2). Async-signal-safe. Under a file size limit,
 * SIGXFSZ (a write past it) is held off so that only the log notices; a
 * pending one of the program's own is left alone. */
static bool write_record(const char *b, size_t n, const char **what, int *err)
{
	struct stat st;
	if (fstat(file_fd, &st) != 0 || st.st_dev != file_dev || st.st_ino != file_ino) {
		*what = "the program closed or reused its descriptor";
		*err = 0;
		return false;
	}
	sigset_t xfsz, old, pending;
	bool was_pending = false;
	if (size_limited) {
		sigemptyset(&xfsz);
		sigaddset(&xfsz, SIGXFSZ);
		pthread_sigmask(SIG_BLOCK, &xfsz, &old);
		was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1;
	}
	ssize_t w;
	do
		w = write(file_fd, b, n);
	while (w < 0 && errno == EINTR);
	int e = errno;
	if (size_limited) {
		if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ) == 1) {
			struct timespec now = { 0, 0 };
			sigtimedwait(&xfsz, NULL, &now);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (w == (ssize_t)n)
		return true;
	*what = w < 0 ? "" : "short write (the disk is full or the file at its size limit)";
	*err = w < 0 ? e : 0;
	return false;
}

static void emit(struct out *o)
{
	if (o->lost || atomic_load_explicit(&file_state, memory_order_acquire) != OPEN)
		return;
	int saved = errno;
	const char *what;
	int err;
	if (!write_record(o->p, o->len, &what, &err))
		turn_off(what, err);
	errno = saved;
}

/* The next component of the path at *p ("" and "." are skipped) into
 * comp; false at the end or when one is longer than a name can be. */
static bool next_component(const char **p, char *comp, size_t cap, bool *too_long)
{
	for (;;) {
		while (**p == '/')
			(*p)++;
		if (!**p)
			return false;
		const char *e = *p;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - *p);
		if (n >= cap) {
			*too_long = true;
			return false;
		}
		memcpy(comp, *p, n);
		comp[n] = '\0';
		*p = e;
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

/* Why resolve_dir failed: a sentence about `dir` and an errno (0: none). */
struct dir_failure {
	const char *what; /* "cannot create", "is a symbolic link", ... */
	int err;
	uid_t owner;      /* "is owned by uid" */
};

/* Open the directory `dir` component by component from "/" (or the
 * working directory), so that no spelling of the path ("//", "/./", "..",
 * a link) escapes the check: every directory reached inside a shared one
 * (writable by others, such as /tmp) is opened O_NOFOLLOW and must be
 * owned by us or root, and the last one, when it lies in a shared
 * directory, must be ours and writable by nobody else. A link in a
 * directory only we (or root) can write is followed, its target walked
 * the same way. With `create`, a missing last component is made 0700.
 * Returns an O_DIRECTORY descriptor, or -1 with *fail set and the path up
 * to the failing component in `at`. Async-signal-safe. */
static int resolve_dir(const char *dir, bool create, char *at, size_t atcap, struct dir_failure *fail)
{
	/* The part not walked yet; a followed link's target goes in front. */
	char rest[2 * CUMEMCAP_PATH_MAX], comp[256], link[CUMEMCAP_PATH_MAX];
	size_t dn = strlen(dir);
	uid_t me = geteuid();
	unsigned links = 0;
	if (dn >= sizeof(rest) || dn >= atcap) {
		*fail = (struct dir_failure){ "", ENAMETOOLONG, 0 };
		return -1;
	}
	memcpy(rest, dir, dn + 1);
	memcpy(at, dir, dn + 1);
	int cur = open(rest[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat cs, ns;
	if (cur < 0 || fstat(cur, &cs) != 0) {
		*fail = (struct dir_failure){ "", errno, 0 };
		if (cur >= 0)
			close(cur);
		return -1;
	}
	const char *p = rest;
	bool too_long = false;
	while (next_component(&p, comp, sizeof(comp), &too_long)) {
		/* `at`: the path as written, up to this component, for messages
		 * (the whole path once a link was followed). */
		if (links == 0) {
			size_t n = (size_t)(p - rest);
			memcpy(at, rest, n);
			at[n] = '\0';
		}
		bool last = !more_components(p);
		bool shared = (cs.st_mode & S_IWOTH) != 0;
		int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		if (next < 0 && e == ENOENT && last && create) {
			if (mkdirat(cur, comp, 0700) != 0 && errno != EEXIST) {
				*fail = (struct dir_failure){ "cannot create", errno, 0 };
				goto fail;
			}
			next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			e = errno;
		}
		if (next < 0) {
			struct stat ls;
			if (fstatat(cur, comp, &ls, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(ls.st_mode)) {
				*fail = (struct dir_failure){ e == ENOENT || e == ENOTDIR ? "cannot create" : "", e, 0 };
				goto fail;
			}
			if (shared) {
				*fail = (struct dir_failure){ "is a symbolic link", 0, 0 };
				goto fail;
			}
			/* A link in a private directory: walk its target instead. */
			ssize_t ln = readlinkat(cur, comp, link, sizeof(link));
			size_t tail = strlen(p);
			if (++links > 40 || ln <= 0 || (size_t)ln >= sizeof(link) ||
			    (size_t)ln + 1 + tail >= sizeof(rest)) {
				*fail = (struct dir_failure){ "", ln <= 0 ? errno : ELOOP, 0 };
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
					*fail = (struct dir_failure){ "", errno, 0 };
					goto fail;
				}
			}
			continue;
		}
		if (fstat(next, &ns) != 0) {
			*fail = (struct dir_failure){ "", errno, 0 };
			close(next);
			goto fail;
		}
		if (shared && (last ? ns.st_uid != me : ns.st_uid != me && ns.st_uid != 0)) {
			*fail = (struct dir_failure){ "is owned by uid", 0, ns.st_uid };
			close(next);
			goto fail;
		}
		if (shared && last && (ns.st_mode & (S_IWGRP | S_IWOTH))) {
			*fail = (struct dir_failure){ "is writable by other users", 0, 0 };
			close(next);
			goto fail;
		}
		close(cur);
		cur = next;
		cs = ns;
	}
	if (too_long) {
		*fail = (struct dir_failure){ "", ENAMETOOLONG, 0 };
		goto fail;
	}
	return cur;
fail:
	if (cur >= 0)
		close(cur);
	return -1;
}

/* Put why resolve_dir failed on `dir`: "<at> is a symbolic link (...)". */
static void put_failure(struct out *o, const char *dir, const char *at, const struct dir_failure *f)
{
	bool refusal = f->what[0] && strcmp(f->what, "cannot create") != 0;
	if (strcmp(f->what, "cannot create") == 0) {
		put_s(o, "cannot create ");
		put_s(o, dir);
	} else {
		put_s(o, refusal ? at : dir);
	}
	if (refusal) {
		put_s(o, " ");
		put_s(o, f->what);
		if (strcmp(f->what, "is owned by uid") == 0) {
			put_s(o, " ");
			put_u(o, f->owner);
			put_s(o, ", not ");
			put_u(o, geteuid());
		}
		put_s(o, " (a shared directory must hold a private one)");
	}
}

/* The log's directory, made when missing; -1 when refused (said). */
static int open_dir(const char *dir)
{
	char at[CUMEMCAP_PATH_MAX];
	struct dir_failure f;
	int fd = resolve_dir(dir, true, at, sizeof(at), &f);
	if (fd >= 0)
		return fd;
	char why[2 * CUMEMCAP_PATH_MAX + 64];
	struct out o = OUT(why);
	put_failure(&o, dir, at, &f);
	say_off(cstr(&o), f.err);
	return -1;
}

static void start_record(struct out *o);

/* Open the file and write the start record (open_lock held). */
static bool open_file(void)
{
	if (!expand(cumemcap_policy()->log_path, file_path, CUMEMCAP_PATH_MAX)) {
		say_off("the expanded path is too long", 0);
		return false;
	}
	char dir[CUMEMCAP_PATH_MAX];
	const char *name = strrchr(file_path, '/');
	if (name) {
		size_t n = (size_t)(name - file_path);
		memcpy(dir, file_path, n ? n : 1);
		dir[n ? n : 1] = '\0';
		name++;
	} else {
		memcpy(dir, ".", 2);
		name = file_path;
	}
	int dfd = open_dir(dir);
	if (dfd < 0)
		return false;
	/* An existing file (pid reuse, a planted link) is never followed
	 * nor appended to: NAME.1, NAME.2, ... */
	char base[sizeof(file_path)];
	snprintf(base, sizeof(base), "%s", name);
	int fd = -1, e = 0;
	for (unsigned i = 0; i < 100 && fd < 0; i++) {
		char cand[CUMEMCAP_PATH_MAX + 8];
		struct out o = OUT(cand);
		put_s(&o, base);
		if (i) {
			put_s(&o, ".");
			put_u(&o, i);
		}
		fd = openat(dfd, cstr(&o), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0600);
		e = errno;
		if (fd >= 0 && i)
			snprintf(file_path + (name - file_path), sizeof(file_path) - (size_t)(name - file_path),
				 "%s", cand);
		if (fd < 0 && e != EEXIST)
			break;
	}
	close(dfd);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		say_off("", e ? e : EEXIST);
		if (fd >= 0)
			close(fd);
		return false;
	}
	struct rlimit fsize;
	size_limited = getrlimit(RLIMIT_FSIZE, &fsize) != 0 || fsize.rlim_cur != RLIM_INFINITY;
	file_fd = fd;
	file_dev = st.st_dev;
	file_ino = st.st_ino;
	static char buf[96 * 1024];
	struct out o = OUT(buf);
	start_record(&o);
	const char *what = "the start record does not fit";
	int err = 0;
	if (!o.lost && write_record(o.p, o.len, &what, &err))
		return true;
	say_off(what, err);
	close(fd);
	file_fd = -1;
	return false;
}

/* ---- fatal signals -------------------------------------------------------------------- */

#define FATAL(sig) { sig, #sig }
static const struct {
	int signo;
	const char *name; /* in the exit record */
} fatal[] = { FATAL(SIGSEGV), FATAL(SIGBUS),  FATAL(SIGFPE), FATAL(SIGILL),  FATAL(SIGABRT),
	      FATAL(SIGTERM), FATAL(SIGINT), FATAL(SIGHUP), FATAL(SIGQUIT) };
#undef FATAL
#define N_FATAL (sizeof(fatal) / sizeof(fatal[0]))
static struct sigaction previous[N_FATAL];
static atomic_flag armed = ATOMIC_FLAG_INIT;

/* A signal whose previous disposition was the default ends the process:
 * write the summary, put the default back and raise it again, so the
 * process ends as it would have (status, core dump). A handler the
 * program had installed is called instead: the program decides, and if
 * it exits, the destructor writes the summary. */
static void on_fatal(int sig, siginfo_t *info, void *uc)
{
	int saved = errno;
	size_t i = 0;
	while (i < N_FATAL && fatal[i].signo != sig)
		i++;
	if (i == N_FATAL)
		return;
	const struct sigaction *old = &previous[i];
	if (old->sa_handler == SIG_DFL) {
		cumemcap_log_exit(sig);
		sigaction(sig, old, NULL);
		raise(sig); /* blocked until we return */
	} else if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, info, uc);
	} else if (old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
	}
	errno = saved;
}

/* Alternate signal stacks: a stack overflow raises SIGSEGV with no stack
 * left to run a handler on, so without one the exit record is lost. Each
 * thread the shim sees once the handlers are armed (the one that arms
 * them, and every thread that enters a hook) gets one, unless it has one
 * already (the program's, a runtime's or a sanitizer's stays). Freed when
 * the thread ends; the main thread's lives as long as the process. */
#define ALTSTACK_BYTES (64u * 1024)
_Atomic bool cumemcap_log_signals_armed;
CUMEMCAP_TLS bool cumemcap_log_thread_seen;
static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;
static bool altstack_key_ok;

static size_t altstack_size(void)
{
	long min = sysconf(_SC_SIGSTKSZ), page = sysconf(_SC_PAGESIZE);
	size_t size = ALTSTACK_BYTES;
	if (min > 0 && (size_t)min * 4 > size)
		size = (size_t)min * 4;
	return page > 0 ? (size + (size_t)page - 1) / (size_t)page * (size_t)page : size;
}

/* Thread exit: the stack is ours to drop only if it is still in place
 * and not in use; the guard page goes with it. */
static void altstack_free(void *mem)
{
	long page = sysconf(_SC_PAGESIZE);
	stack_t cur;
	if (sigaltstack(NULL, &cur) == 0 && (char *)cur.ss_sp == (char *)mem + page) {
		if (cur.ss_flags & SS_ONSTACK)
			return;
		stack_t off = { .ss_flags = SS_DISABLE };
		sigaltstack(&off, NULL);
	}
	munmap(mem, altstack_size() + (size_t)page);
}

static void altstack_make_key(void)
{
	altstack_key_ok = pthread_key_create(&altstack_key, altstack_free) == 0;
}

void cumemcap_log_thread_slow(void)
{
	if (cumemcap_log_thread_seen || !atomic_load_explicit(&cumemcap_log_signals_armed, memory_order_relaxed))
		return;
	cumemcap_log_thread_seen = true;
	int saved = errno;
	stack_t cur;
	if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE))
		goto out;
	pthread_once(&altstack_once, altstack_make_key);
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size = altstack_size();
	char *mem = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
			 -1, 0);
	if (mem == MAP_FAILED)
		goto out;
	mprotect(mem, page, PROT_NONE); /* an overflow of the handler faults, not corrupts */
	stack_t ss = { .ss_sp = mem + page, .ss_size = size, .ss_flags = 0 };
	if (sigaltstack(&ss, NULL) != 0) {
		munmap(mem, size + page);
		goto out;
	}
	if (altstack_key_ok)
		pthread_setspecific(altstack_key, mem);
out:
	errno = saved;
}

/* Installed at the first GPU use, not in the constructor: a process that
 * never uses CUDA is left as it was, and an interpreter that installs its
 * own handlers only over the default (CPython's SIGINT ->
 * KeyboardInterrupt) has done so by then. An ignored signal stays
 * ignored. */
static void arm_signals(void)
{
	if (atomic_flag_test_and_set(&armed))
		return;
	for (size_t i = 0; i < N_FATAL; i++) {
		struct sigaction cur, act;
		if (sigaction(fatal[i].signo, NULL, &cur) != 0 || cur.sa_handler == SIG_IGN)
			continue;
		memset(&act, 0, sizeof(act));
		act.sa_sigaction = on_fatal;
		act.sa_flags = SA_SIGINFO | SA_ONSTACK;
		if (cur.sa_handler == SIG_DFL) {
			sigfillset(&act.sa_mask);
		} else {
			act.sa_mask = cur.sa_mask;
			act.sa_flags |= cur.sa_flags & (SA_RESTART | SA_NODEFER);
		}
		previous[i] = cur;
		sigaction(fatal[i].signo, &act, &previous[i]);
	}
	atomic_store(&cumemcap_log_signals_armed, true);
	cumemcap_log_thread_slow();
}

/* ---- records -------------------------------------------------------------------------- */

static void begin(struct out *o, const char *type)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	put_s(o, "{\"v\":1,\"type\":\"");
	put_s(o, type);
	put_s(o, "\",\"t\":");
	put_ms(o, (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
	key(o, "pid");
	put_u(o, (uint64_t)getpid());
}

static void end(struct out *o)
{
	put_s(o, "}\n");
}

/* "name":{"value":...,"source":...}; the first without a comma. */
static void rule(struct out *o, bool first, const char *name, const char *value,
		 const struct cumemcap_source *src)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	char where[CUMEMCAP_PATH_MAX + 16];
	cumemcap_source_format(p, src, where, sizeof(where));
	put_s(o, first ? "\"" : ",\"");
	put_s(o, name);
	put_s(o, "\":{\"value\":");
	if (value)
		put_json(o, value);
	else
		put_ms(o, p->log_interval_ms);
	put_s(o, ",\"source\":");
	put_json(o, where);
	put_s(o, "}");
}

static void start_record(struct out *o)
{
	const struct cumemcap_policy *p = cumemcap_policy();
	begin(o, "start");
	key(o, "ppid");
	put_u(o, (uint64_t)getppid());
	key(o, "uid");
	put_u(o, (uint64_t)getuid());
	key(o, "program");
	put_json(o, p->program);

	static char cmdline[32 * 1024];
	size_t n = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t r;
		while (n < sizeof(cmdline) && (r = read(fd, cmdline + n, sizeof(cmdline) - n)) > 0)
			n += (size_t)r;
		close(fd);
	}
	/* Escaping can grow an argument sixfold: stop while a third of the
	 * buffer is left for the rest of the record. */
	bool cut = n == sizeof(cmdline);
	key(o, "argv");
	put_s(o, "[");
	for (size_t i = 0, first = 1; i < n; first = 0) {
		size_t len = strnlen(cmdline + i, n - i);
		if (o->len + 6 * len + 8 > o->cap / 3 * 2) {
			cut = true;
			break;
		}
		put_s(o, first ? "" : ",");
		put_json_n(o, cmdline + i, len);
		i += len + 1;
	}
	put_s(o, "]");
	if (cut) {
		key(o, "argv_truncated");
		put_s(o, "true");
	}
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	key(o, "host");
	put_json(o, host);
	key(o, "driver_version");
	/* Asked by the device layer at the first GPU use; logging asks the
	 * driver nothing. */
	int dv = cumemcap_device_driver_version();
	put_u_or_null(o, dv > 0, (uint64_t)(dv > 0 ? dv : 0));
	key(o, "cumemcap");
	put_json(o, CUMEMCAP_VERSION_STRING);
	key(o, "interval");
	put_ms(o, interval_ms);
	key(o, "log");
	put_json(o, file_path);
	key(o, "metrics");
	char mpath[CUMEMCAP_PATH_MAX];
	if (metrics_wanted && expand(p->metrics_path, mpath, sizeof(mpath)))
		put_json(o, mpath);
	else
		put_s(o, "null");
	key(o, "config");
	if (p->config_path[0])
		put_json(o, p->config_path);
	else
		put_s(o, "null");

	const struct cumemcap_device_info *all;
	int count = cumemcap_device_all(&all);
	key(o, "gpus");
	put_s(o, "[");
	for (int d = 0; d < count; d++) {
		char uuid[48], src[CUMEMCAP_PATH_MAX + 16];
		cumemcap_nvml_format_uuid(all[d].uuid, "GPU-", uuid);
		cumemcap_source_format(p, &all[d].limit_src, src, sizeof(src));
		put_s(o, d ? ",{\"gpu\":" : "{\"gpu\":");
		put_u(o, (uint64_t)d);
		key(o, "uuid");
		put_json(o, uuid);
		key(o, "pci");
		put_json(o, all[d].pci_bus_id);
		key(o, "capacity");
		put_u(o, all[d].total);
		key(o, "limit");
		put_u_or_null(o, all[d].limit != CUMEMCAP_NO_LIMIT, all[d].limit);
		key(o, "limit_source");
		put_json(o, src);
		put_s(o, "}");
	}
	put_s(o, "]");

	char growth[64], release[64];
	cumemcap_policy_format_growth(p, growth, sizeof(growth));
	cumemcap_policy_format_release(p, release, sizeof(release));
	key(o, "rules");
	put_s(o, "{");
	rule(o, true, "growth", growth, &p->growth_src);
	rule(o, false, "pool", cumemcap_policy_pool_name(p->pool), &p->pool_src);
	rule(o, false, "release", release, &p->release_src);
	rule(o, false, "framework_hints", p->framework_hints ? "on" : "off", &p->hints_src);
	rule(o, false, "log_interval", NULL, &p->interval_src);
	put_s(o, "}");
	end(o);
}

/* ---- the public events ---------------------------------------------------------------- */

void cumemcap_log_init(void)
{
	ensure_snapshot();
}

static void ensure_open(void)
{
	if (atomic_load_explicit(&file_state, memory_order_acquire) != CLOSED)
		return;
	int saved = errno;
	pthread_mutex_lock(&open_lock);
	if (atomic_load(&file_state) == CLOSED)
		atomic_store_explicit(&file_state, open_file() ? OPEN : OFF, memory_order_release);
	pthread_mutex_unlock(&open_lock);
	errno = saved;
}

/* At most this many event records a second: a program spinning on
 * refusals must not fill the disk. The rest are counted (samples and the
 * exit record say how many); the ledger's counters still have them all. */
#define EVENTS_PER_SECOND 1000u
static _Atomic uint64_t window_second;
static _Atomic uint32_t window_events;
static _Atomic uint64_t events_dropped;

static bool event_allowed(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	uint64_t now = (uint64_t)ts.tv_sec + 1, was = atomic_load(&window_second);
	if (was != now && atomic_compare_exchange_strong(&window_second, &was, now))
		atomic_store(&window_events, 0); /* approximate at the edge; fine */
	if (atomic_fetch_add(&window_events, 1) < EVENTS_PER_SECOND)
		return true;
	atomic_fetch_add(&events_dropped, 1);
	return false;
}

/* An event record should be written: file logging is on, the summary
 * not yet written, and the rate allows it. */
static bool file_logging(void)
{
	ensure_snapshot();
	if (target != CUMEMCAP_LOG_FILE || atomic_load(&exit_claimed))
		return false;
	ensure_open();
	return atomic_load_explicit(&file_state, memory_order_acquire) == OPEN && event_allowed();
}

void cumemcap_log_device(int dev)
{
	(void)dev;
	ensure_snapshot();
	if (target == CUMEMCAP_LOG_OFF)
		return;
	if (target == CUMEMCAP_LOG_FILE)
		ensure_open();
	arm_signals();
}

/* The figures of a device as the ledger and the device layer have them
 * (NVML's are the worker's: gather). Async-signal-safe. */
static void read_figures(int dev, const struct cumemcap_device_info *info, struct cumemcap_figures *f)
{
	cumemcap_ledger_read(dev, f);
	f->v[CUMEMCAP_FIG_total] = info ? info->total : CUMEMCAP_FIGURE_NONE;
}

/* ,"key":value for each figure whose column `col` (an offset in struct
 * cumemcap_figure_info) is `part`, in the figure list's order. */
static void put_part(struct out *o, const struct cumemcap_figures *f, size_t col, unsigned part)
{
	for (size_t i = 0; i < CUMEMCAP_FIG_COUNT; i++) {
		const struct cumemcap_figure_info *fi = &cumemcap_figure_info[i];
		if (((const unsigned char *)fi)[col] != part)
			continue;
		key(o, fi->key);
		put_u_or_null(o, !fi->null || f->v[i] != CUMEMCAP_FIGURE_NONE, f->v[i]);
	}
}

#define PUT_PART(o, f, column, part)                                                             \
	do {                                                                                     \
		_Static_assert(sizeof(cumemcap_figure_info[0].column) == 1, "a one-byte column"); \
		put_part(o, f, offsetof(struct cumemcap_figure_info, column), part);               \
	} while (0)

/* An event record's figures (`event` in figures.h). */
static void put_figures(struct out *o, int dev)
{
	struct cumemcap_figures f;
	read_figures(dev, cumemcap_device_info(dev), &f);
	PUT_PART(o, &f, event, 1);
}

void cumemcap_log_segment(int dev, bool taken, uint64_t bytes)
{
	if (!file_logging())
		return;
	char buf[512];
	struct out o = OUT(buf);
	begin(&o, "segment");
	key(&o, "gpu");
	put_u(&o, (uint64_t)dev);
	key(&o, "op");
	put_s(&o, taken ? "\"take\"" : "\"release\"");
	key(&o, "bytes");
	put_u(&o, bytes);
	put_figures(&o, dev);
	end(&o);
	emit(&o);
}

static void refusal_or_oom(const char *type, int dev, const char *door, uint64_t requested)
{
	char buf[768];
	struct out o = OUT(buf);
	uint64_t limit = cumemcap_ledger_limit(dev);
	begin(&o, type);
	key(&o, "gpu");
	put_u(&o, (uint64_t)dev);
	key(&o, "requested");
	put_u(&o, requested);
	key(&o, "door");
	put_json_n(&o, door ? door : "", door ? strnlen(door, 96) : 0);
	put_figures(&o, dev);
	key(&o, "limit");
	put_u_or_null(&o, limit != CUMEMCAP_NO_LIMIT, limit);
	end(&o);
	emit(&o);
}

void cumemcap_log_refusal(int dev, const char *door, uint64_t requested)
{
	ensure_snapshot();
	if (target == CUMEMCAP_LOG_STDERR) {
		char want[32], lim[32], held[32];
		cumemcap_msg("device %d: refused %s (%s) at the limit: %s held of %s", dev,
			     cumemcap_fmt_size(requested, want, sizeof(want)), door,
			     cumemcap_fmt_size(cumemcap_ledger_get(dev, CUMEMCAP_FIG_reserved), held, sizeof(held)),
			     cumemcap_fmt_size(cumemcap_ledger_limit(dev), lim, sizeof(lim)));
		return;
	}
	if (file_logging())
		refusal_or_oom("refusal", dev, door, requested);
}

void cumemcap_log_driver_oom(int dev, const char *door, uint64_t requested)
{
	if (file_logging())
		refusal_or_oom("driver_oom", dev, door, requested);
}

/* ---- samples and metrics (the worker thread) ------------------------------------------ */

/* A GPU's figures for a sample and the metrics. */
struct gpu_figures {
	int dev;
	struct cumemcap_figures f;
	char uuid[48];
};

static pthread_mutex_t tick_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_due; /* CLOCK_MONOTONIC ms; 0: not scheduled */
static _Atomic int metrics_state;
static char metrics_path[CUMEMCAP_PATH_MAX], metrics_dir[CUMEMCAP_PATH_MAX];
static char metrics_name[CUMEMCAP_PATH_MAX], metrics_tmp[CUMEMCAP_PATH_MAX + 8];

/* The metrics file goes away with the process: through its checked
 * directory, quietly (this may run in a signal handler). */
static void metrics_unlink(void)
{
	char at[CUMEMCAP_PATH_MAX];
	struct dir_failure df;
	int dfd = resolve_dir(metrics_dir, false, at, sizeof(at), &df);
	if (dfd >= 0) {
		unlinkat(dfd, metrics_name, 0);
		close(dfd);
	}
}

static int gather(struct gpu_figures *all)
{
	int n = 0;
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		const struct cumemcap_device_info *info = cumemcap_device_info(dev);
		if (!info)
			continue;
		struct gpu_figures *g = &all[n++];
		uint64_t *v = g->f.v, driver = 0;
		g->dev = dev;
		read_figures(dev, info, &g->f);
		cumemcap_nvml_format_uuid(info->uuid, "GPU-", g->uuid);
		bool known = cumemcap_nvml_process_used(info->uuid, (unsigned)getpid(), &driver);
		uint64_t reserved = v[CUMEMCAP_FIG_reserved];
		v[CUMEMCAP_FIG_driver_used] = known ? driver : CUMEMCAP_FIGURE_NONE;
		v[CUMEMCAP_FIG_context_overhead] =
			known && driver >= reserved ? driver - reserved : CUMEMCAP_FIGURE_NONE;
		if (known) {
			uint64_t seen = atomic_load(&peak_driver[dev]);
			while (driver + 1 > seen && !atomic_compare_exchange_weak(&peak_driver[dev], &seen, driver + 1))
				;
		}
	}
	return n;
}

static void sample_record(const struct gpu_figures *all, int n)
{
	static char buf[48 * 1024];
	struct out o = OUT(buf);
	begin(&o, "sample");
	key(&o, "gpus");
	put_s(&o, "[");
	for (int i = 0; i < n; i++) {
		put_s(&o, i ? ",{\"gpu\":" : "{\"gpu\":");
		put_u(&o, (uint64_t)all[i].dev);
		PUT_PART(&o, &all[i].f, sample, 1);
		put_s(&o, "}");
	}
	put_s(&o, "]");
	key(&o, "events_dropped");
	put_u(&o, atomic_load(&events_dropped));
	end(&o);
	if (!atomic_load(&exit_claimed)) {
		emit(&o);
		atomic_fetch_add(&samples_written, 1);
	}
}

static void metrics_off(const char *what, int err)
{
	atomic_store(&metrics_state, OFF);
	char buf[CUMEMCAP_PATH_MAX + 128];
	struct out o = OUT(buf);
	put_s(&o, "metrics ");
	put_s(&o, metrics_path);
	put_s(&o, ": ");
	put_s(&o, what);
	if (err)
		put_errno(&o, err);
	put_s(&o, "; metrics are off");
	say(&o);
}

/* A Prometheus label value: backslash, quote and newline escaped. */
static void label_value(struct out *o, const char *s)
{
	put_s(o, "\"");
	for (; *s; s++) {
		if (*s == '\\')
			put_s(o, "\\\\");
		else if (*s == '"')
			put_s(o, "\\\"");
		else if (*s == '\n')
			put_s(o, "\\n");
		else
			put(o, s, 1);
	}
	put_s(o, "\"");
}

/* The Prometheus text file, replaced whole (temp file + rename). */
static void write_metrics(const struct gpu_figures *all, int n)
{
	if (atomic_load(&metrics_state) == CLOSED) {
		if (!expand(cumemcap_policy()->metrics_path, metrics_path, sizeof(metrics_path))) {
			metrics_off("the expanded path is too long", 0);
			return;
		}
		const char *slash = strrchr(metrics_path, '/');
		size_t dn = slash ? (size_t)(slash - metrics_path) : 0;
		memcpy(metrics_dir, slash ? metrics_path : ".", slash ? (dn ? dn : 1) : 1);
		metrics_dir[slash ? (dn ? dn : 1) : 1] = '\0';
		snprintf(metrics_name, sizeof(metrics_name), "%s", slash ? slash + 1 : metrics_path);
		snprintf(metrics_tmp, sizeof(metrics_tmp), "%s.tmp", metrics_name);
		atomic_store(&metrics_state, OPEN);
	}
	if (atomic_load(&metrics_state) != OPEN)
		return;
	/* The directory is checked again for every write: it is a path. */
	char at[CUMEMCAP_PATH_MAX];
	struct dir_failure df;
	int dfd = resolve_dir(metrics_dir, false, at, sizeof(at), &df);
	if (dfd < 0) {
		char why[2 * CUMEMCAP_PATH_MAX + 64];
		struct out wo = OUT(why);
		put_failure(&wo, metrics_dir, at, &df);
		if (df.err)
			put_s(&wo, ": ");
		metrics_off(cstr(&wo), df.err);
		return;
	}
	unlinkat(dfd, metrics_tmp, 0);
	int fd = openat(dfd, metrics_tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		metrics_off("", errno);
		close(dfd);
		return;
	}
	static char buf[16 * 1024];
	struct out o = { .p = buf, .cap = sizeof(buf), .flush_fd = fd };
	char pid_buf[24];
	struct out po = OUT(pid_buf);
	put_u(&po, (uint64_t)getpid());
	const char *pid = cstr(&po);
	/* A family for each figure with a `prom` name, in the list's order. */
	for (size_t fig = 0; fig < CUMEMCAP_FIG_COUNT; fig++) {
		const struct cumemcap_figure_info *fi = &cumemcap_figure_info[fig];
		if (!fi->prom)
			continue;
		put_s(&o, "# HELP ");
		put_s(&o, fi->prom);
		put_s(&o, " ");
		put_s(&o, fi->help);
		put_s(&o, "\n# TYPE ");
		put_s(&o, fi->prom);
		put_s(&o, fi->kind == CUMEMCAP_FK_counter ? " counter\n" : " gauge\n");
		for (int i = 0; i < n; i++) {
			uint64_t v = all[i].f.v[fig];
			if (fi->null && v == CUMEMCAP_FIGURE_NONE)
				continue; /* no series: no limit, NVML does not know */
			put_s(&o, fi->prom);
			put_s(&o, "{pid=\"");
			put_s(&o, pid);
			put_s(&o, "\",program=");
			label_value(&o, cumemcap_policy()->program);
			put_s(&o, ",gpu=\"");
			put_u(&o, (uint64_t)all[i].dev);
			put_s(&o, "\",uuid=\"");
			put_s(&o, all[i].uuid);
			put_s(&o, "\"} ");
			put_u(&o, v);
			put_s(&o, "\n");
		}
	}
	int err = o.lost || !write_all(fd, o.p, o.len) ? (errno ? errno : EIO) : 0;
	if (close(fd) != 0 && !err)
		err = errno;
	if (!err && renameat(dfd, metrics_tmp, dfd, metrics_name) != 0)
		err = errno;
	if (err) {
		unlinkat(dfd, metrics_tmp, 0);
		metrics_off("", err);
	} else if (atomic_load(&metrics_state) != OPEN) {
		unlinkat(dfd, metrics_name, 0); /* the process ended meanwhile */
	}
	close(dfd);
}

uint32_t cumemcap_log_tick(uint64_t now_ms)
{
	ensure_snapshot();
	bool log_on = target == CUMEMCAP_LOG_FILE && atomic_load(&file_state) == OPEN;
	bool metrics_on = metrics_wanted && atomic_load(&metrics_state) != OFF;
	if ((!log_on && !metrics_on) || atomic_load(&exit_claimed))
		return UINT32_MAX;
	uint32_t wait;
	bool due = false;
	pthread_mutex_lock(&tick_lock);
	if (!next_due)
		next_due = now_ms + interval_ms;
	if (now_ms >= next_due) {
		due = true;
		next_due += interval_ms;
		if (next_due <= now_ms)
			next_due = now_ms + interval_ms;
	}
	wait = (uint32_t)(next_due - now_ms);
	pthread_mutex_unlock(&tick_lock);
	if (!due)
		return wait;
	/* NVML is asked with no lock of ours held: fork() takes tick_lock
	 * after other libraries' fork handlers took theirs (the fake driver's
	 * lock, which the fake NVML takes too), so holding it across the query
	 * could deadlock a fork (ThreadSanitizer: lock-order inversion). The
	 * figures are the worker's own (only it ticks). */
	static struct gpu_figures f[CUMEMCAP_MAX_DEVICES];
	int n = gather(f);
	pthread_mutex_lock(&tick_lock);
	if (log_on)
		sample_record(f, n);
	if (metrics_on)
		write_metrics(f, n);
	pthread_mutex_unlock(&tick_lock);
	return wait;
}

/* ---- the end -------------------------------------------------------------------------- */

static bool used_gpu(void)
{
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		struct cumemcap_figures f;
		read_figures(dev, cumemcap_device_info(dev), &f);
		if (cumemcap_device_info(dev) && f.v[CUMEMCAP_FIG_allocs] + f.v[CUMEMCAP_FIG_frees] +
							 f.v[CUMEMCAP_FIG_refusals] + f.v[CUMEMCAP_FIG_driver_oom])
			return true;
	}
	return false;
}

/* Today's human lines: one per GPU that saw an allocation or refusal,
 * its `summary` figures written `pre` value `post`. */
static void stderr_summary(void)
{
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		const struct cumemcap_device_info *info = cumemcap_device_info(dev);
		struct cumemcap_figures f;
		read_figures(dev, info, &f);
		if (!info || f.v[CUMEMCAP_FIG_allocs] + f.v[CUMEMCAP_FIG_refusals] == 0)
			continue;
		char buf[512];
		struct out o = OUT(buf);
		put_s(&o, "device ");
		put_u(&o, (uint64_t)dev);
		put_s(&o, " (");
		put_s(&o, info->pci_bus_id);
		put_s(&o, "): ");
		for (unsigned part = 1; part <= 2; part++)
			for (size_t i = 0; i < CUMEMCAP_FIG_COUNT; i++) {
				const struct cumemcap_figure_info *fi = &cumemcap_figure_info[i];
				if (fi->summary != part)
					continue;
				put_s(&o, fi->pre);
				if (fi->null && f.v[i] == CUMEMCAP_FIGURE_NONE)
					put_s(&o, "none");
				else if (fi->unit == CUMEMCAP_FU_bytes)
					put_size(&o, f.v[i]);
				else
					put_u(&o, f.v[i]);
				put_s(&o, fi->post);
			}
		say(&o);
	}
}

static void exit_record(int signo)
{
	static char buf[64 * 1024]; /* only the one claimant of exit_claimed writes it */
	struct out o = OUT(buf);
	begin(&o, "exit");
	key(&o, "reason");
	put_s(&o, signo ? "\"signal\"" : "\"exit\"");
	if (signo) {
		key(&o, "signal");
		put_u(&o, (uint64_t)signo);
		for (size_t i = 0; i < N_FATAL; i++)
			if (fatal[i].signo == signo) {
				key(&o, "signal_name");
				put_json(&o, fatal[i].name);
			}
	}
	key(&o, "samples");
	put_u(&o, atomic_load(&samples_written));
	key(&o, "events_dropped");
	put_u(&o, atomic_load(&events_dropped));
	key(&o, "gpus");
	put_s(&o, "[");
	bool first = true;
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++) {
		if (!cumemcap_device_info(dev))
			continue;
		struct cumemcap_figures f;
		uint64_t pd = atomic_load(&peak_driver[dev]);
		read_figures(dev, cumemcap_device_info(dev), &f);
		f.v[CUMEMCAP_FIG_peak_driver_used] = pd ? pd - 1 : CUMEMCAP_FIGURE_NONE;
		put_s(&o, first ? "{\"gpu\":" : ",{\"gpu\":");
		first = false;
		put_u(&o, (uint64_t)dev);
		/* The run's limit, peaks and counts, then what was held at exit. */
		PUT_PART(&o, &f, exit, 1);
		PUT_PART(&o, &f, exit, 2);
		put_s(&o, "}");
	}
	put_s(&o, "]");
	end(&o);
	emit(&o);
}

void cumemcap_log_exit(int signo)
{
	int saved = errno;
	if (!signo) {
		ensure_snapshot();
		/* A forked child opens its file only if it used the GPU. */
		if (target == CUMEMCAP_LOG_FILE && atomic_load(&file_state) == CLOSED && used_gpu())
			ensure_open();
	}
	if (!atomic_exchange(&exit_claimed, true)) {
		if (target == CUMEMCAP_LOG_STDERR)
			stderr_summary();
		else if (target == CUMEMCAP_LOG_FILE && atomic_load(&file_state) == OPEN)
			exit_record(signo);
		/* A finished process leaves no stale series behind. */
		if (atomic_exchange(&metrics_state, OFF) == OPEN)
			metrics_unlink();
	}
	errno = saved;
}

/* Taken before the shim's other locks: no holder of those waits for
 * these. A tick in progress (an NVML query) delays fork() until it ends. */
void cumemcap_log_fork_prepare(void)
{
	pthread_mutex_lock(&open_lock);
	pthread_mutex_lock(&tick_lock);
}

void cumemcap_log_fork_parent(void)
{
	pthread_mutex_unlock(&tick_lock);
	pthread_mutex_unlock(&open_lock);
}

void cumemcap_log_fork_child(void)
{
	pthread_mutex_unlock(&tick_lock);
	pthread_mutex_unlock(&open_lock);
	/* The parent's file is not ours to write: close it, but only if the
	 * descriptor still is that file (the program may have closed the
	 * number and reused it, as write_record checks). */
	struct stat st;
	if (atomic_load(&file_state) == OPEN && file_fd >= 0 && fstat(file_fd, &st) == 0 &&
	    st.st_dev == file_dev && st.st_ino == file_ino)
		close(file_fd);
	file_fd = -1;
	atomic_store(&file_state, CLOSED);
	atomic_store(&metrics_state, CLOSED);
	atomic_store(&exit_claimed, false);
	atomic_store(&samples_written, 0);
	atomic_store(&events_dropped, 0);
	for (int dev = 0; dev < CUMEMCAP_MAX_DEVICES; dev++)
		atomic_store(&peak_driver[dev], 0);
	next_due = 0;
}

void cumemcap_log_context(int dev, const char *event, uint64_t live, uint64_t held, uint64_t blocks)
{
	if (!file_logging())
		return;
	char buf[512];
	struct out o = OUT(buf);
	begin(&o, "context");
	key(&o, "gpu");
	put_u(&o, (uint64_t)dev);
	key(&o, "event");
	put_json(&o, event);
	key(&o, "freed_live");
	put_u(&o, live);
	key(&o, "freed_segments");
	put_u(&o, held);
	key(&o, "blocks");
	put_u(&o, blocks);
	put_figures(&o, dev);
	end(&o);
	emit(&o);
}
