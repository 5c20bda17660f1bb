/* gtool: what the commands of cumemcap-group share (`cumemcap group ...`,
 * `cumemcap top`): their error lines and exit statuses, the directory of
 * books and the files in it, a snapshot of one book's figures, and the
 * text table and JSON writers they print with.
 *
 * The books are opened and copied by reader.h (any user may plant a file
 * under a book's name) and checked by group/book.h's loader; every figure
 * is loaded once from the copy into a snapshot and everything printed
 * comes from it.
 *
 * Thread safety: single-threaded; the program starts no thread. The
 * state shared with another context is `gtool_stop`, set by the SIGINT
 * and SIGTERM handler of `top` and read by its loops (a volatile
 * sig_atomic_t), and reader.c's SIGBUS jump while it reaps. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "group/book.h"
#include "tools/json-out.h"

/* Exit statuses. */
#define GTOOL_USAGE 2   /* a wrong argument */
#define GTOOL_FAILED 1  /* a runtime failure */

/* "cumemcap group" or "cumemcap top": the prefix of every error line. */
extern const char *gtool_prog;
extern volatile sig_atomic_t gtool_stop;

/* One line "PROG: ..." on stderr, then exit with `status`. */
_Noreturn void gtool_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The directory of books: --dir, else CUMEMCAP_GROUP_DIR, else /dev/shm. */
const char *gtool_default_dir(void);

/* The book files of `dir` of one kind, sorted by name: for each, the
 * name after the prefix ("NAME" of cumemcap-group.NAME, the uid of
 * cumemcap-node.UID). The whole directory is read before anything is
 * bounded or opened: a file here is only a candidate, which the caller
 * opens and checks (reader.h). Returns how many, with *names malloc()ed
 * (free with gtool_scan_free); -1 with errno when the directory cannot be
 * read. */
int gtool_scan(const char *dir, enum cumemcap_book_kind kind, char ***names);
void gtool_scan_free(char **names, int n);

/* What one member publishes for one GPU, loaded once. */
struct gtool_figs {
	uint64_t held, limit, live, pooled, reserved, footprint, refusals, waits;
	uint32_t waiting;
	int32_t ordinal;
};

struct gtool_member {
	unsigned slot;
	uint32_t pid, uid;
	bool alive;
	uint64_t joined_ns, published_ns;
	char program[CUMEMCAP_BOOK_PROGRAM_MAX];
	struct gtool_figs gpu[CUMEMCAP_BOOK_GPUS];
	bool uses[CUMEMCAP_BOOK_GPUS]; /* attached (ordinal >= 0) or holding budget there */
};

struct gtool_gpu {
	bool ready;
	char uuid[48];  /* "GPU-xxxxxxxx-..." */
	char pci[16];
	uint64_t total, limit, used;
};

/* A snapshot of an open book. */
struct gtool_book {
	enum cumemcap_book_kind kind;
	char name[CUMEMCAP_BOOK_NAME_MAX + 1];
	unsigned gpus_ready;
	struct gtool_gpu gpu[CUMEMCAP_BOOK_GPUS];
	unsigned nmembers, live, dead;
	struct gtool_member *members; /* malloc()ed, nmembers of them */
};

void gtool_snapshot(const struct cumemcap_book *b, enum cumemcap_book_kind kind, struct gtool_book *out);
void gtool_snapshot_free(struct gtool_book *s);

/* "fa4ec0da": the first 8 hex digits of a formatted UUID. */
const char *gtool_uuid_short(const char *uuid, char *buf, size_t len);
/* A size for the text output: "2.00 GiB", "none" for CUMEMCAP_BOOK_NONE. */
const char *gtool_size(uint64_t bytes, char *buf, size_t len);
/* A time (CLOCK_REALTIME ns) as "2024-01-02 03:04:05 UTC". */
const char *gtool_time(uint64_t ns, char *buf, size_t len);
/* A string from a book for a terminal: control characters become '?'. */
const char *gtool_safe(const char *s, char *buf, size_t len);

/* ---- text tables ---------------------------------------------------------------------------- */

#define GTOOL_COLS 16

struct gtool_table {
	unsigned cols, rows, cap;
	const char *head[GTOOL_COLS];
	bool right[GTOOL_COLS]; /* right-aligned (numbers) */
	char **cell;            /* rows * cols strings, malloc()ed */
};

/* `spec`: the headers, each preceded by '>' when the column is right-aligned. */
void gtool_table_init(struct gtool_table *t, unsigned cols, const char *const *spec);
/* Add a row of `cols` strings (copied). */
void gtool_table_row(struct gtool_table *t, const char *const *cells);
void gtool_table_print(const struct gtool_table *t, FILE *out);
void gtool_table_free(struct gtool_table *t);

/* ---- JSON ----------------------------------------------------------------------------------- */

/* A limit: null for CUMEMCAP_BOOK_NONE, else the number. */
void gtool_json_limit(FILE *out, uint64_t v);

/* ---- the commands --------------------------------------------------------------------------- */

int gtool_top(int argc, char **argv);
