/* Unit tests for src/config/policy.c and src/config/cfgfile.c: the environment, the
 * configuration file, their precedence, and every error. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/cfgfile.h"
#include "config/policy.h"
#include "test-common.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

/* A fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;
static const char *const no_env[] = { NULL };

static const char *get(const char *name)
{
	for (const char *const *e = fake_env; e && e[0]; e += 2)
		if (strcmp(e[0], name) == 0)
			return e[1];
	return NULL;
}

static struct cumemcap_policy policy;
static char err[2048];

/* Build from env + file text for program `prog`. */
static bool build(const char *const *env, const char *text, const char *prog)
{
	fake_env = env;
	err[0] = '\0';
	return cumemcap_policy_build_from_text(&policy, get, text ? "test.conf" : "", text ? text : "",
					       text ? strlen(text) : 0, prog ? prog : "prog", err,
					       sizeof(err));
}

#define UUID1 "GPU-fa4ec0da-0000-4000-8000-000000000001"

/* The limit of GPU `dev` (UUID GPU-fa4ec0da-0000-4000-8000-00000000000N,
 * PCI 0000:1N:00.0, 16 GiB: the fake driver's defaults) and its source. */
static uint64_t limit_of(int dev, char *where, size_t len)
{
	char pci[32];
	unsigned char uuid[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
	struct cumemcap_source src;
	uuid[15] = (unsigned char)dev;
	snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + dev);
	uint64_t l = cumemcap_policy_limit(&policy, dev, uuid, pci, 16 * GiB, &src);
	if (where)
		cumemcap_source_format(&policy, &src, where, len);
	return l;
}

/* ---- the environment -------------------------------------------------------- */

START_TEST(policy_defaults_without_anything)
{
	ck_assert_msg(build(no_env, NULL, NULL), "%s", err);
	char where[256];
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), UINT64_MAX);
	ck_assert_str_eq(where, "default");
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_FILE);
	ck_assert_str_eq(policy.log_path, CUMEMCAP_DEFAULT_LOG);
	ck_assert(!policy.debug_doors);
	ck_assert_int_eq(policy.growth, CUMEMCAP_GROWTH_ONDEMAND);
	ck_assert_int_eq(policy.pool, CUMEMCAP_POOL_ON);
	ck_assert_int_eq(policy.release, CUMEMCAP_RELEASE_IDLE);
	ck_assert_uint_eq(policy.release_idle_ms, CUMEMCAP_DEFAULT_RELEASE_IDLE_MS);
	ck_assert(policy.framework_hints);
	ck_assert_uint_eq(policy.log_interval_ms, CUMEMCAP_DEFAULT_LOG_INTERVAL_MS);
	ck_assert_str_eq(policy.metrics_path, "");
	ck_assert_int_eq(policy.log_src.origin, CUMEMCAP_FROM_DEFAULT);
}
END_TEST

START_TEST(policy_reads_every_variable)
{
	static const char *const env[] = {
		"CUMEMCAP_LIMIT", "8GiB",
		"CUMEMCAP_DEVICE_LIMITS", "1=50%",
		"CUMEMCAP_GROWTH", "ondemand",
		"CUMEMCAP_LOG", "stderr",
		"CUMEMCAP_DEBUG", "doors",
		NULL,
	};
	ck_assert_msg(build(env, NULL, NULL), "%s", err);
	char where[256];
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), 8 * GiB);
	ck_assert_str_eq(where, "CUMEMCAP_LIMIT");
	ck_assert_uint_eq(limit_of(1, where, sizeof(where)), 8 * GiB);
	ck_assert_str_eq(where, "CUMEMCAP_DEVICE_LIMITS");
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_STDERR);
	ck_assert(policy.debug_doors);
	ck_assert_int_eq(policy.log_src.origin, CUMEMCAP_FROM_ENV);
}
END_TEST

/* The arena and log settings: values, their sources, and the file. */
START_TEST(policy_reads_pool_release_growth_log)
{
	static const char *const env[] = {
		"CUMEMCAP_GROWTH", "preallocate:6GiB",
		"CUMEMCAP_POOL", "nopack",
		"CUMEMCAP_RELEASE", "idle:2.5",
		"CUMEMCAP_FRAMEWORK_HINTS", "off",
		"CUMEMCAP_LOG", "/var/tmp/job-%n-%p.jsonl",
		"CUMEMCAP_LOG_INTERVAL", "0.25",
		"CUMEMCAP_METRICS", "/run/cumemcap/%p.prom",
		NULL,
	};
	ck_assert_msg(build(env, NULL, NULL), "%s", err);
	ck_assert_int_eq(policy.growth, CUMEMCAP_GROWTH_PREALLOCATE);
	ck_assert_int_eq(policy.prealloc.kind, CUMEMCAP_AMOUNT_BYTES);
	ck_assert_uint_eq(policy.prealloc.bytes, 6 * GiB);
	ck_assert_int_eq(policy.pool, CUMEMCAP_POOL_NOPACK);
	ck_assert_int_eq(policy.release, CUMEMCAP_RELEASE_IDLE);
	ck_assert_uint_eq(policy.release_idle_ms, 2500);
	ck_assert(!policy.framework_hints);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_FILE);
	ck_assert_str_eq(policy.log_path, "/var/tmp/job-%n-%p.jsonl");
	ck_assert_uint_eq(policy.log_interval_ms, 250);
	ck_assert_str_eq(policy.metrics_path, "/run/cumemcap/%p.prom");
	ck_assert_str_eq(policy.release_src.variable, "CUMEMCAP_RELEASE");
	char buf[64];
	cumemcap_policy_format_growth(&policy, buf, sizeof(buf));
	ck_assert_str_eq(buf, "preallocate:6442450944");
	cumemcap_policy_format_release(&policy, buf, sizeof(buf));
	ck_assert_str_eq(buf, "idle:2.500");

	const char *text = "growth = preallocate\npool = off\n";
	ck_assert(!build(no_env, text, NULL));
	ck_assert_msg(strstr(err, "test.conf:1: growth \"preallocate\"") == err, "%s", err);
	ck_assert_msg(strstr(err, "test.conf:2 turns them off") != NULL, "%s", err);

	text = "release = never\n[program job]\nrelease = immediate\nframework_hints = off\nlog = off\n";
	ck_assert_msg(build(no_env, text, "job"), "%s", err);
	ck_assert_int_eq(policy.release, CUMEMCAP_RELEASE_IMMEDIATE);
	ck_assert_uint_eq(policy.release_src.line, 3);
	ck_assert(!policy.framework_hints);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_OFF);
	ck_assert_msg(build(no_env, text, "other"), "%s", err);
	ck_assert_int_eq(policy.release, CUMEMCAP_RELEASE_NEVER);
	ck_assert(policy.framework_hints);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_FILE);
}
END_TEST

struct bad_env {
	const char *var, *value, *why;
};

static const struct bad_env bad_envs[] = {
	{ "CUMEMCAP_LIMIT", "banana", "accepted" },
	{ "CUMEMCAP_LIMIT", "-1G", "accepted" },
	{ "CUMEMCAP_LIMIT", "12XB", "accepted" },
	{ "CUMEMCAP_LIMIT", "150%", "accepted" },
	{ "CUMEMCAP_LIMIT", "", "accepted" },
	{ "CUMEMCAP_DEVICE_LIMITS", "foo=4GiB", "selector" },
	{ "CUMEMCAP_DEVICE_LIMITS", "0=4GiB,0=1GiB", "same GPU" },
	{ "CUMEMCAP_GROWTH", "preallocate:4GB!", "accepted" },
	{ "CUMEMCAP_GROWTH", "grow", "ondemand, preallocate" },
	{ "CUMEMCAP_LOG", "/var/log/%x", "%p (pid)" },
	{ "CUMEMCAP_LOG", "", "stderr, off" },
	{ "CUMEMCAP_POOL", "yes", "nopack" },
	{ "CUMEMCAP_RELEASE", "idle", "idle:SECONDS" },
	{ "CUMEMCAP_RELEASE", "idle:0", "idle:SECONDS" },
	{ "CUMEMCAP_RELEASE", "idle:1.0001", "idle:SECONDS" },
	{ "CUMEMCAP_FRAMEWORK_HINTS", "true", "on, off" },
	{ "CUMEMCAP_LOG_INTERVAL", "0.05", "0.1 to 86400" },
	{ "CUMEMCAP_LOG_INTERVAL", "5s", "0.1 to 86400" },
	{ "CUMEMCAP_METRICS", "/m/%q", "off, or a path" },
	{ "CUMEMCAP_DEBUG", "all", "doors" },
	{ NULL, NULL, NULL },
};

/* One line naming the variable, quoting the value, saying what is
 * accepted; the output untouched. */
START_TEST(policy_bad_variables_are_errors)
{
	for (const struct bad_env *c = bad_envs; c->var; c++) {
		const char *env[] = { c->var, c->value, NULL };
		char quoted[256];
		snprintf(quoted, sizeof(quoted), "%s=\"%s\"", c->var, c->value);
		memset(&policy, 0x5a, sizeof(policy));
		ck_assert_msg(!build(env, NULL, NULL), "%s=%s accepted", c->var, c->value);
		ck_assert_msg(strstr(err, quoted) == err, "message does not start with %s: %s", quoted, err);
		ck_assert_msg(strstr(err, c->why) != NULL, "no \"%s\" in: %s", c->why, err);
		ck_assert_msg(strchr(err, '\n') == NULL, "more than one line: %s", err);
		ck_assert_int_eq(((unsigned char *)&policy)[0], 0x5a);
	}
}
END_TEST

/* ---- the file: every key, every section kind ----------------------------------- */

START_TEST(policy_file_every_key)
{
	const char *text = "# a node's rules\n"
			   "limit = 10GiB\n"
			   "device_limits = 1=2GiB\n"
			   "growth = ondemand   # the default\n"
			   "log = stderr\n"
			   "debug = doors\n";
	ck_assert_msg(build(no_env, text, NULL), "%s", err);
	char where[256];
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), 10 * GiB);
	ck_assert_str_eq(where, "test.conf:2");
	ck_assert_uint_eq(limit_of(1, where, sizeof(where)), 2 * GiB);
	ck_assert_str_eq(where, "test.conf:3");
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_STDERR);
	cumemcap_source_format(&policy, &policy.log_src, where, sizeof(where));
	ck_assert_str_eq(where, "test.conf:5");
	ck_assert(policy.debug_doors);
	ck_assert_str_eq(policy.config_path, "test.conf");
}
END_TEST

START_TEST(policy_file_device_sections_by_each_selector)
{
	const char *text = "[device 0]\nlimit = 1GiB\n"
			   "[device " UUID1 "]\nlimit = 25%\n"
			   "[device 0000:12:00.0]\nlimit = 3GiB\n";
	ck_assert_msg(build(no_env, text, NULL), "%s", err);
	char where[256];
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), 1 * GiB);
	ck_assert_str_eq(where, "test.conf:2");
	ck_assert_uint_eq(limit_of(1, where, sizeof(where)), 4 * GiB);
	ck_assert_str_eq(where, "test.conf:4");
	ck_assert_uint_eq(limit_of(2, where, sizeof(where)), 3 * GiB);
	ck_assert_str_eq(where, "test.conf:6");
	ck_assert_uint_eq(limit_of(3, NULL, 0), UINT64_MAX);
}
END_TEST

START_TEST(policy_file_program_sections_first_match_wins)
{
	const char *text = "limit = 8GiB\n"
			   "[program train*.py]\nlimit = 20GiB\nlog = stderr\n"
			   "[program *.py]\nlimit = 2GiB\n"
			   "[program serve]\nlimit = 1GiB\n";
	ck_assert_msg(build(no_env, text, "train_resnet.py"), "%s", err);
	ck_assert_uint_eq(limit_of(0, NULL, 0), 16 * GiB); /* 20 GiB clamped to the GPU */
	ck_assert_uint_eq(policy.program_section_line, 2);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_STDERR);
	ck_assert_msg(build(no_env, text, "eval.py"), "%s", err);
	ck_assert_uint_eq(limit_of(0, NULL, 0), 2 * GiB);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_FILE);
	ck_assert_msg(build(no_env, text, "serve"), "%s", err);
	ck_assert_uint_eq(limit_of(0, NULL, 0), 1 * GiB);
	ck_assert_msg(build(no_env, text, "other"), "%s", err);
	char where[256];
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), 8 * GiB);
	ck_assert_str_eq(where, "test.conf:1");
	ck_assert_uint_eq(policy.program_section_line, 0);
}
END_TEST

/* ---- precedence --------------------------------------------------------------- */

static const char *const precedence_text =
	"limit = 1GiB\n"                       /* 1: file global */
	"device_limits = 1=2GiB\n"             /* 2: file global, per GPU */
	"[device 0]\nlimit = 3GiB\n"           /* 4: [device] */
	"[program job]\nlimit = 5GiB\n"        /* 6: [program] */
	"device_limits = 1=6GiB\n";            /* 7: [program], per GPU */

START_TEST(policy_precedence_file_layers)
{
	char where[256];
	/* Not the program: [device] beats global device_limits beats global limit. */
	ck_assert_msg(build(no_env, precedence_text, "other"), "%s", err);
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), 3 * GiB);
	ck_assert_str_eq(where, "test.conf:4");
	ck_assert_uint_eq(limit_of(1, where, sizeof(where)), 2 * GiB);
	ck_assert_str_eq(where, "test.conf:2");
	ck_assert_uint_eq(limit_of(2, where, sizeof(where)), 1 * GiB);
	ck_assert_str_eq(where, "test.conf:1");
	/* The program: its section beats [device] and the global part; its
	 * per-GPU rule beats its limit. */
	ck_assert_msg(build(no_env, precedence_text, "job"), "%s", err);
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), 5 * GiB);
	ck_assert_str_eq(where, "test.conf:6");
	ck_assert_uint_eq(limit_of(1, where, sizeof(where)), 6 * GiB);
	ck_assert_str_eq(where, "test.conf:7");
}
END_TEST

START_TEST(policy_precedence_environment_wins)
{
	char where[256];
	static const char *const env_limit[] = { "CUMEMCAP_LIMIT", "7GiB", NULL };
	ck_assert_msg(build(env_limit, precedence_text, "job"), "%s", err);
	ck_assert_uint_eq(limit_of(0, where, sizeof(where)), 7 * GiB);
	ck_assert_str_eq(where, "CUMEMCAP_LIMIT");
	ck_assert_uint_eq(limit_of(1, NULL, 0), 7 * GiB);
	static const char *const env_rules[] = { "CUMEMCAP_DEVICE_LIMITS", "1=9GiB",
						 "CUMEMCAP_LIMIT", "7GiB", NULL };
	ck_assert_msg(build(env_rules, precedence_text, "job"), "%s", err);
	ck_assert_uint_eq(limit_of(1, where, sizeof(where)), 9 * GiB);
	ck_assert_str_eq(where, "CUMEMCAP_DEVICE_LIMITS");
	ck_assert_uint_eq(limit_of(0, NULL, 0), 7 * GiB);
	/* Process-wide keys: env > [program] > global > default. */
	const char *text = "log = off\n[program job]\nlog = stderr\n";
	ck_assert_msg(build(no_env, text, "job"), "%s", err);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_STDERR);
	ck_assert_msg(build(no_env, text, "other"), "%s", err);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_OFF);
	ck_assert_int_eq(policy.log_src.origin, CUMEMCAP_FROM_FILE);
	static const char *const env_log[] = { "CUMEMCAP_LOG", "off", NULL };
	ck_assert_msg(build(env_log, text, "job"), "%s", err);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_OFF);
	ck_assert_int_eq(policy.log_src.origin, CUMEMCAP_FROM_ENV);
}
END_TEST

/* ---- file errors ------------------------------------------------------------- */

struct bad_file {
	const char *text;
	const char *where; /* "test.conf:N: " */
	const char *says;  /* a fragment the message must contain */
};

static const struct bad_file bad_files[] = {
	{ "limt = 4GiB\n", "test.conf:1: ", "unknown key \"limt\" (did you mean \"limit\"?)" },
	{ "# c\nlogg = off\n", "test.conf:2: ", "did you mean \"log\"" },
	{ "banana = 1\n", "test.conf:1: ", "unknown key \"banana\"; accepted: limit, device_limits, count, overhead_estimate, growth, pool, release, framework_hints, log, log_interval, metrics, debug, group, group_limit, group_dir, group_access, on_limit" },
	{ "limit = banana\n", "test.conf:1: ", "limit = \"banana\" is not a valid limit; accepted:" },
	{ "limit = \n", "test.conf:1: ", "is not a valid limit" },
	{ "limit = 150%\n", "test.conf:1: ", "accepted" },
	{ "device_limits = foo=1G\n", "test.conf:1: ", "is not a GPU selector" },
	{ "growth = preallocate:0\n", "test.conf:1: ", "accepted:" },
	{ "log = /tmp/x%d\n", "test.conf:1: ", "accepted: stderr, off" },
	{ "release = soon\n", "test.conf:1: ", "accepted: never, immediate, idle:SECONDS" },
	{ "limit = 1G\nlimit = 2G\n", "test.conf:2: ", "duplicate key \"limit\" in this section (first at line 1)" },
	{ "[program a]\nlog = off\nlog = off\n", "test.conf:3: ", "duplicate key \"log\"" },
	{ "[device 0]\nlimit = 1G\nlimit = 2G\n", "test.conf:3: ", "duplicate key \"limit\"" },
	{ "[device 0]\nlimit = 1G\n[device 0]\nlimit = 2G\n", "test.conf:3: ", "repeats the section at line 1" },
	{ "[device 0]\ngrowth = ondemand\n", "test.conf:2: ", "\"growth\" cannot stand in a [device] section; accepted there: limit" },
	{ "[device 0]\ndevice_limits = 1=1G\n", "test.conf:2: ", "cannot stand in a [device] section" },
	{ "[gpu 0]\n", "test.conf:1: ", "unknown section kind \"gpu\"; accepted: [device SELECTOR], [program GLOB]" },
	{ "[devices 0]\n", "test.conf:1: ", "did you mean \"device\"" },
	{ "[device foo]\n", "test.conf:1: ", "\"foo\" is not a GPU selector" },
	{ "[device]\n", "test.conf:1: ", "is not a GPU selector" },
	{ "[program]\n", "test.conf:1: ", "expected a glob" },
	{ "[program bin/train]\n", "test.conf:1: ", "no '/'" },
	{ "[device 0\n", "test.conf:1: ", "does not end with ']'" },
	{ "just words\n", "test.conf:1: ", "is not a setting; expected key = value" },
	{ "= 4G\n", "test.conf:1: ", "missing key" },
	{ "limit = 1G\0\n", "test.conf:1: ", "NUL byte" },
	/* User text is quoted: control bytes cannot hide the file:line. */
	{ "limit = 1\r2G\n", "test.conf:1: ", "limit = \"1\\x0d2G\" is not a valid limit" },
	{ "lim\033[2Jit = 1G\n", "test.conf:1: ", "unknown key \"lim\\x1b[2Jit\"" },
	/* A [program] section that does not match is still checked. */
	{ "[program nothing-matches-this]\nlimit = banana\n", "test.conf:2: ", "not a valid limit" },
	{ NULL, NULL, NULL },
};

START_TEST(policy_file_errors_point_at_the_line)
{
	for (const struct bad_file *c = bad_files; c->text; c++) {
		size_t len = strlen(c->text);
		if (strstr(c->says, "NUL"))
			len = 12; /* the text holds a NUL byte */
		fake_env = no_env;
		memset(&policy, 0x5a, sizeof(policy));
		err[0] = '\0';
		bool ok = cumemcap_policy_build_from_text(&policy, get, "test.conf", c->text, len, "prog",
							  err, sizeof(err));
		ck_assert_msg(!ok, "accepted: %s", c->text);
		ck_assert_msg(strncmp(err, c->where, strlen(c->where)) == 0, "%s: expected %s...", err, c->where);
		ck_assert_msg(strstr(err, c->says) != NULL, "\"%s\" not in: %s", c->says, err);
		ck_assert_msg(strchr(err, '\n') == NULL, "more than one line: %s", err);
		ck_assert_int_eq(((unsigned char *)&policy)[0], 0x5a);
	}
}
END_TEST

/* The lists in the messages are exactly the keys allowed there. */
START_TEST(policy_file_error_key_lists_are_exact)
{
	ck_assert(!build(no_env, "[device 0]\ngrowth = ondemand\n", NULL));
	ck_assert_str_eq(err, "test.conf:2: \"growth\" cannot stand in a [device] section; accepted there: limit");
	ck_assert(!build(no_env, "banana = 1\n", NULL));
	ck_assert_str_eq(err, "test.conf:1: unknown key \"banana\"; accepted: limit, device_limits, count, overhead_estimate, growth, pool, release, framework_hints, log, log_interval, metrics, debug, group, group_limit, group_dir, group_access, on_limit");
}
END_TEST

START_TEST(policy_file_line_too_long)
{
	size_t n = CUMEMCAP_CONFIG_MAX_LINE + 10;
	char *text = malloc(n + 1);
	memset(text, 'x', n);
	memcpy(text, "limit = ", 8);
	text[n] = '\0';
	fake_env = no_env;
	ck_assert(!cumemcap_policy_build_from_text(&policy, get, "test.conf", text, n, "p", err, sizeof(err)));
	ck_assert_msg(strstr(err, "test.conf:1: line longer than") == err, "%s", err);
	free(text);
}
END_TEST

START_TEST(policy_file_syntax_details)
{
	/* Blank lines, indentation, CRLF, comments after whitespace, '#' inside
	 * a value not preceded by a blank, no final newline. */
	const char *text = "\n   \t\n  limit=2GiB \r\n\t# comment\n[program  a#b ]  # note\nlog=stderr";
	ck_assert_msg(build(no_env, text, "a#b"), "%s", err);
	ck_assert_uint_eq(limit_of(0, NULL, 0), 2 * GiB);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_STDERR);
	ck_assert_uint_eq(policy.program_section_line, 5);
}
END_TEST

/* ---- where the file comes from --------------------------------------------------- */

START_TEST(policy_config_path_choice)
{
	char path[256];
	char fallback[] = "/tmp/cumemcap-test-XXXXXX";
	int fd = mkstemp(fallback);
	ck_assert_int_ge(fd, 0);
	close(fd);
	static const char *const named[] = { "CUMEMCAP_CONFIG", "/srv/rules.conf", NULL };
	fake_env = named;
	ck_assert(cumemcap_policy_config_path(get, fallback, path, sizeof(path), err, sizeof(err)));
	ck_assert_str_eq(path, "/srv/rules.conf");
	static const char *const empty[] = { "CUMEMCAP_CONFIG", "", NULL };
	fake_env = empty;
	ck_assert(cumemcap_policy_config_path(get, fallback, path, sizeof(path), err, sizeof(err)));
	ck_assert_str_eq(path, "");
	fake_env = no_env;
	ck_assert(cumemcap_policy_config_path(get, fallback, path, sizeof(path), err, sizeof(err)));
	ck_assert_str_eq(path, fallback);
	unlink(fallback);
	ck_assert(cumemcap_policy_config_path(get, fallback, path, sizeof(path), err, sizeof(err)));
	ck_assert_str_eq(path, "");
}
END_TEST

START_TEST(policy_missing_file_named_by_variable)
{
	static const char *const env[] = { "CUMEMCAP_CONFIG", "/nonexistent/cumemcap.conf", NULL };
	fake_env = env;
	ck_assert(!cumemcap_policy_build(&policy, get, "/nonexistent/cumemcap.conf", "p", err, sizeof(err)));
	ck_assert_msg(strstr(err, "CUMEMCAP_CONFIG=\"/nonexistent/cumemcap.conf\": /nonexistent/cumemcap.conf: cannot open") == err,
		      "%s", err);
	ck_assert(!cumemcap_policy_build(&policy, get, "/", "p", err, sizeof(err)));
	ck_assert_msg(strstr(err, "not a regular file") != NULL, "%s", err);
}
END_TEST

/* ---- the program's name ----------------------------------------------------------- */

struct name_case {
	const char *argv[6];
	const char *expected;
};

static const struct name_case names[] = {
	{ { "/usr/bin/python3", "train.py", "--epochs", "3" }, "train.py" },
	{ { "python3.11", "-u", "/work/jobs/train.py" }, "train.py" },
	{ { "python", "-W", "ignore", "eval.py" }, "eval.py" },
	{ { "python3", "-m", "torch.distributed.run", "train.py" }, "torch.distributed.run" },
	{ { "python3", "-c", "print(1)" }, "python3" },
	{ { "python3" }, "python3" },
	{ { "/opt/bin/myjob", "--flag", "x.py" }, "myjob" },
	{ { "bash", "run.sh" }, "run.sh" },
	{ { "/usr/bin/env" }, "env" },
	{ { NULL }, "" },
};

START_TEST(policy_program_name)
{
	for (const struct name_case *c = names; c->expected; c++) {
		int argc = 0;
		while (argc < 6 && c->argv[argc])
			argc++;
		char out[256];
		cumemcap_program_name(argc, (char *const *)c->argv, out, sizeof(out));
		ck_assert_msg(strcmp(out, c->expected) == 0, "%s...: got \"%s\", expected \"%s\"",
			      c->argv[0] ? c->argv[0] : "(none)", out, c->expected);
		if (!c->argv[0])
			break;
	}
}
END_TEST

START_TEST(policy_suggestions)
{
	static const char *const words[] = { "limit", "device_limits", "growth", "log", NULL };
	ck_assert_str_eq(cumemcap_config_suggest("limt", words), "limit");
	ck_assert_str_eq(cumemcap_config_suggest("device-limits", words), "device_limits");
	ck_assert_str_eq(cumemcap_config_suggest("groth", words), "growth");
	ck_assert_ptr_null(cumemcap_config_suggest("banana", words));
	ck_assert_ptr_null(cumemcap_config_suggest("", words));
}
END_TEST

TEST_SUITE(policy)
{
	Suite *s = suite_create("policy");
	ADD_TEST(s, policy_defaults_without_anything);
	ADD_TEST(s, policy_reads_every_variable);
	ADD_TEST(s, policy_reads_pool_release_growth_log);
	ADD_TEST(s, policy_bad_variables_are_errors);
	ADD_TEST(s, policy_file_every_key);
	ADD_TEST(s, policy_file_device_sections_by_each_selector);
	ADD_TEST(s, policy_file_program_sections_first_match_wins);
	ADD_TEST(s, policy_precedence_file_layers);
	ADD_TEST(s, policy_precedence_environment_wins);
	ADD_TEST(s, policy_file_errors_point_at_the_line);
	ADD_TEST(s, policy_file_error_key_lists_are_exact);
	ADD_TEST(s, policy_file_line_too_long);
	ADD_TEST(s, policy_file_syntax_details);
	ADD_TEST(s, policy_config_path_choice);
	ADD_TEST(s, policy_missing_file_named_by_variable);
	ADD_TEST(s, policy_program_name);
	ADD_TEST(s, policy_suggestions);
	return s;
}
