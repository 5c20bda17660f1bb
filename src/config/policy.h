/* policy: the rules of this process, built once from the environment and
 * the configuration file by the table of settings (settings.h). Built in the
 * library constructor or at first use and never changed afterwards, so
 * readers need no lock. A value that cannot be honoured exactly is an error.
 *
 * Precedence, highest first (see README "Configuration"):
 *   1. the environment: CUMEMCAP_DEVICE_LIMITS (per GPU), then CUMEMCAP_LIMIT;
 *   2. the first [program GLOB] section matching the program:
 *      its device_limits, then its limit;
 *   3. the first [device SELECTOR] section matching the GPU: its limit;
 *   4. the file's global keys: device_limits, then limit;
 *   5. built-in defaults (no limit).
 * Every other key, the group's limit included, follows 1, 2, 4, 5. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/parse.h"

#define CUMEMCAP_MAX_DEVICE_SECTIONS 64
#define CUMEMCAP_PATH_MAX 1024
#define CUMEMCAP_PROGRAM_MAX 256
#define CUMEMCAP_LABELS_MAX 1024 /* CUMEMCAP_LABELS's bytes, the NUL included */
#define CUMEMCAP_GROUP_NAME_MAX 64
#define CUMEMCAP_DEFAULT_GROUP_DIR "/dev/shm"

enum cumemcap_log_target {
	CUMEMCAP_LOG_FILE = 0, /* JSON Lines into log_path (a template); the default */
	CUMEMCAP_LOG_STDERR,   /* human-readable lines on stderr */
	CUMEMCAP_LOG_OFF,
};

#define CUMEMCAP_DEFAULT_LOG "/tmp/cumemcap-%u/%n.%h.%p.jsonl"

enum cumemcap_growth {
	CUMEMCAP_GROWTH_ONDEMAND = 0,
	CUMEMCAP_GROWTH_PREALLOCATE, /* prealloc: how much; NONE = the whole limit */
};

enum cumemcap_pool_mode {
	CUMEMCAP_POOL_AUTO = 0, /* ON on the GPUs a limit or a group applies to, OFF elsewhere */
	CUMEMCAP_POOL_ON,     /* arenas; small requests packed into shared segments */
	CUMEMCAP_POOL_NOPACK, /* arenas, but every block is a segment of its own */
	CUMEMCAP_POOL_OFF,    /* accounting only: every call goes to the driver */
};

enum cumemcap_release {
	CUMEMCAP_RELEASE_IDLE = 0, /* release_idle_ms after a segment fell free */
	CUMEMCAP_RELEASE_NEVER,
	CUMEMCAP_RELEASE_IMMEDIATE,
};

enum cumemcap_count {
	CUMEMCAP_COUNT_FOOTPRINT = 0, /* what the driver holds for the process: calls and overhead */
	CUMEMCAP_COUNT_ALLOCATIONS,
};

#define CUMEMCAP_DEFAULT_RELEASE_IDLE_MS 30000u
#define CUMEMCAP_DEFAULT_LOG_INTERVAL_MS 5000u

enum cumemcap_origin {
	CUMEMCAP_FROM_DEFAULT = 0,
	CUMEMCAP_FROM_ENV,
	CUMEMCAP_FROM_FILE,
};

/* The sources of settings, in the order of precedence above. */
enum cumemcap_rank {
	CUMEMCAP_RANK_ENV = 0,
	CUMEMCAP_RANK_PROGRAM,
	CUMEMCAP_RANK_DEVICE,
	CUMEMCAP_RANK_GLOBAL,
	CUMEMCAP_RANKS, /* none: a section that does not apply */
};

struct cumemcap_source {
	enum cumemcap_origin origin;
	enum cumemcap_rank rank; /* but FROM_DEFAULT */
	unsigned line;           /* FROM_FILE */
	const char *variable;    /* FROM_ENV: the variable's name */
};

/* A limit, an entry of device_limits, a [device] section's limit, or the
 * group's. Every source's are kept: a GPU one list omits falls through. */
struct cumemcap_rule {
	struct cumemcap_selector selector; /* kind 0: every GPU (a single amount) */
	struct cumemcap_amount amount;
	struct cumemcap_source src;
	bool group;
};

/* Three sources of limit, device_limits and group_limit, and the [device] sections. */
#define CUMEMCAP_MAX_RULES (6 * (CUMEMCAP_MAX_DEVICE_RULES + 1) + CUMEMCAP_MAX_DEVICE_SECTIONS)

struct cumemcap_device_section {
	struct cumemcap_selector selector;
	unsigned line; /* of the [device ...] header */
};

/* Every setting but the rules, from the source of highest precedence, which
 * X_src names. Small fields first: a start touches fewer pages. */
struct cumemcap_policy {
	enum cumemcap_count count;
	uint64_t overhead_estimate;
	enum cumemcap_growth growth;
	struct cumemcap_amount prealloc;
	enum cumemcap_pool_mode pool;
	enum cumemcap_release release;
	uint32_t release_idle_ms;
	bool framework_hints;
	enum cumemcap_log_target log;
	uint32_t log_interval_ms;
	bool debug_doors;
	bool secure; /* built for secure execution (AT_SECURE) */
	bool group_gid;        /* group_access=gid:GROUP: 0660, shared with GROUP */
	uint32_t group_gid_id; /* GROUP's gid */
	uint32_t wait_ms;      /* 0: on_limit=fail; else wait up to this many ms */
	struct cumemcap_source count_src, estimate_src, growth_src, pool_src, release_src, hints_src, log_src,
		interval_src, metrics_src, debug_src, labels_src, group_src, group_dir_src, group_access_src,
		on_limit_src, group_limit_src;
	char group_limit_text[96];     /* group_limit_src's value, quoted, for messages */
	unsigned program_section_line; /* 0: no [program] section matched */
	size_t program_section_count;  /* [program] sections in the file, matching or not */
	size_t device_section_count;
	size_t rule_count;
	char group[CUMEMCAP_GROUP_NAME_MAX + 1]; /* "" = no group */

	char program[CUMEMCAP_PROGRAM_MAX]; /* the name [program] sections match */
	char metrics_path[CUMEMCAP_PATH_MAX]; /* the template; "" = off */
	char log_path[CUMEMCAP_PATH_MAX];     /* the template, CUMEMCAP_LOG_FILE only */
	char group_dir[CUMEMCAP_PATH_MAX];    /* default CUMEMCAP_DEFAULT_GROUP_DIR */
	char labels[CUMEMCAP_LABELS_MAX];     /* extra Prometheus labels, as given */
	char config_path[CUMEMCAP_PATH_MAX]; /* the file read, "" for none */

	struct cumemcap_rule rules[CUMEMCAP_MAX_RULES];
	struct cumemcap_device_section device_sections[CUMEMCAP_MAX_DEVICE_SECTIONS];
};

/* Whether a value is neither in quotes nor has a '#' (log = off#x would be a path). */
bool cumemcap_policy_plain_form(const char *value);

/* A setting's value as it is written: "preallocate:4GiB", "idle:30.000",
 * "wait:0.5", "auto", "footprint", "gid". */
void cumemcap_policy_format_growth(const struct cumemcap_policy *p, char *buf, size_t len);
void cumemcap_policy_format_release(const struct cumemcap_policy *p, char *buf, size_t len);
void cumemcap_policy_format_on_limit(const struct cumemcap_policy *p, char *buf, size_t len);
const char *cumemcap_policy_pool_name(enum cumemcap_pool_mode m);
const char *cumemcap_policy_count_name(enum cumemcap_count c);
const char *cumemcap_policy_group_access_name(bool gid);

/* Walks the policy's labels (`k=v[,k=v...]`), one pair a call; false at the end. */
bool cumemcap_labels_next(const char **cursor, const char **key, size_t *klen, const char **value, size_t *vlen);

/* Where a variable's value comes from: cumemcap_getenv, or a test's table. */
typedef const char *(*cumemcap_getenv_fn)(const char *name);
const char *cumemcap_getenv(const char *name);

/* The file to read: CUMEMCAP_CONFIG when set (empty: none), else `fallback`
 * when anything (a dangling link too) is at that path, else none (""). A
 * path that does not fit in `len` is an error, never cut. */
bool cumemcap_policy_config_path(cumemcap_getenv_fn get, const char *fallback, char *out, size_t len,
				 char *err, size_t errlen);

/* Build a policy for `program` from the environment and, when `path` is not
 * empty, that file, or `len` bytes of `text` as its contents when not NULL.
 * `out` is written only on success; on error, one line in err: the
 * variable or "path:line", the value, and what is accepted. */
bool cumemcap_policy_build(struct cumemcap_policy *out, cumemcap_getenv_fn get, const char *path,
			   const char *text, size_t len, const char *program, char *err, size_t errlen);

/* The process's policy as the library builds it. Not secure: as
 * cumemcap_policy_build with CUMEMCAP_CONFIG or else `default_path`. Secure:
 * no environment; `default_path` only when it and its directory are owned by
 * `owner` and writable by nobody else, and a log only where it asks. A file
 * not trusted means no limits and a line in `note` naming it and why; a bad
 * line of a trusted one is an error naming path:line, not its text. */
bool cumemcap_policy_build_process(struct cumemcap_policy *out, cumemcap_getenv_fn get, bool secure,
				   const char *default_path, uid_t owner, const char *program,
				   char *err, size_t errlen, char *note, size_t notelen);

/* The process's (or with `group`, the group's) limit for one GPU by the
 * precedence above (a list's entry before a single amount), and its source
 * (src may be NULL); UINT64_MAX when none applies, or there is no group. */
uint64_t cumemcap_policy_limit(const struct cumemcap_policy *p, bool group, int ordinal,
			       const unsigned char uuid[16], const char *pci_bus_id, uint64_t total,
			       struct cumemcap_source *src);

/* Whether a limit may apply: a per-process limit rule (it may match no
 * GPU), or a group (its budget may come from its shared state). */
bool cumemcap_policy_any_limit(const struct cumemcap_policy *p);

/* Call fn for every GPU selector the rules name (group_limit's only when
 * there is a group), with its source: to report those that match no GPU. */
void cumemcap_policy_selectors(const struct cumemcap_policy *p,
			       void (*fn)(void *ctx, const struct cumemcap_selector *sel,
					  const struct cumemcap_source *src),
			       void *ctx);

/* "CUMEMCAP_LIMIT", "/etc/cumemcap.conf:12", "default". */
void cumemcap_source_format(const struct cumemcap_policy *p, const struct cumemcap_source *src,
			    char *buf, size_t len);

/* The name sections match: argv[0]'s base name, or for an interpreter
 * (python*, perl, bash, ...) its script's, or "-m MODULE"'s module. */
void cumemcap_program_name(int argc, char *const *argv, char *out, size_t len);

/* The process's policy, built on first use; bad settings end the process. */
const struct cumemcap_policy *cumemcap_policy(void);

/* The library constructor's: build the policy now (true) unless nothing
 * configures the process (no CUMEMCAP_ variable, no file at the default path,
 * no secure execution): then (false) the defaults are built at first use. */
bool cumemcap_policy_start(int argc, char *const *argv);
