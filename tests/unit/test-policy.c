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
	return cumemcap_policy_build(&policy, get, text ? "test.conf" : "", text ? text : "",
				     text ? strlen(text) : 0, prog ? prog : "prog", err, sizeof(err));
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
	uint64_t l = cumemcap_policy_limit(&policy, false, dev, uuid, pci, 16 * GiB, &src);
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
	ck_assert_int_eq(policy.pool, CUMEMCAP_POOL_AUTO);
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
	{ "CUMEMCAP_LOG", "off#x", "a value cannot contain '#'" },
	{ "CUMEMCAP_METRICS", "/m/a#b", "a value cannot contain '#'" },
	{ "CUMEMCAP_POOL", "yes", "auto (pooled where a limit or a group applies), on, nopack" },
	{ "CUMEMCAP_RELEASE", "idle", "idle:SECONDS" },
	{ "CUMEMCAP_RELEASE", "idle:0", "idle:SECONDS" },
	{ "CUMEMCAP_RELEASE", "idle:1.0001", "idle:SECONDS" },
	{ "CUMEMCAP_FRAMEWORK_HINTS", "true", "on, off" },
	{ "CUMEMCAP_LOG_INTERVAL", "0.05", "0.1 to 86400" },
	{ "CUMEMCAP_LOG_INTERVAL", "5s", "0.1 to 86400" },
	{ "CUMEMCAP_METRICS", "/m/%q", "off, or a path" },
	{ "CUMEMCAP_DEBUG", "all", "doors" },
	{ "CUMEMCAP_GROUP", ".hidden", "not starting with '.' or '-'" },
	{ "CUMEMCAP_GROUP", "-x", "not starting with '.' or '-'" },
	{ "CUMEMCAP_GROUP", "a b", "is not a group name; accepted: 1 to 64 letters, digits, '.', '_' or '-'" },
	{ "CUMEMCAP_GROUP", "team/a", "is not a group name; accepted:" },
	{ "CUMEMCAP_GROUP", "team:a", "is not a group name; accepted:" },
	{ "CUMEMCAP_GROUP", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1 to 64" },
	{ "CUMEMCAP_GROUP_LIMIT", "banana", "is not a valid group limit; accepted: one amount for every GPU, bytes" },
	{ "CUMEMCAP_GROUP_LIMIT", "0", "SEL=AMOUNT[,SEL=AMOUNT...]" },
	{ "CUMEMCAP_GROUP_LIMIT", "150%", "is not a valid group limit" },
	{ "CUMEMCAP_GROUP_LIMIT", "", "is not a valid group limit" },
	{ "CUMEMCAP_GROUP_LIMIT", "foo=4GiB", "\"foo\" is not a GPU selector; accepted:" },
	{ "CUMEMCAP_GROUP_LIMIT", "0=4GiB,0=1GiB", "same GPU" },
	{ "CUMEMCAP_GROUP_LIMIT", "0=4XB", "entry 1" },
	{ "CUMEMCAP_GROUP_DIR", "shm", "is not an absolute path; accepted: an absolute directory path" },
	{ "CUMEMCAP_GROUP_DIR", "", "is not an absolute path; accepted:" },
	{ "CUMEMCAP_GROUP_ACCESS", "group", "accepted: user (the state file is 0600" },
	{ "CUMEMCAP_GROUP_ACCESS", "USER", "gid:GROUP (0660" },
	/* Plain gid trusted any group of the caller's (every user is in
	 * video): it names none, and is refused. */
	{ "CUMEMCAP_GROUP_ACCESS", "gid", "names no Unix group (any group of the caller's" },
	{ "CUMEMCAP_GROUP_ACCESS", "gid:", "names no Unix group on this system; accepted: user" },
	{ "CUMEMCAP_GROUP_ACCESS", "gid:no-such-group-cumemcap", "names no Unix group on this system" },
	{ "CUMEMCAP_ON_LIMIT", "wait", "accepted: fail, wait:SECONDS (0.001 to 86400" },
	{ "CUMEMCAP_ON_LIMIT", "wait:", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "wait:0", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "wait:0.0001", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "wait:86400.001", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "wait:86401", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "wait:-1", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "wait:1s", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "wait 30", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "fail:1", "accepted: fail, wait:SECONDS" },
	{ "CUMEMCAP_ON_LIMIT", "", "accepted: fail, wait:SECONDS" },
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

/* A process without a name (under secure execution: its executable's name
 * could not be read) matches no [program] section, not even "*". */
START_TEST(policy_file_program_sections_never_match_no_name)
{
	const char *text = "limit = 1GiB\n[program *]\nlimit = 3GiB\n";
	ck_assert_msg(build(no_env, text, ""), "%s", err);
	ck_assert_uint_eq(limit_of(0, NULL, 0), 1 * GiB);
	ck_assert_uint_eq(policy.program_section_line, 0);
	ck_assert_msg(build(no_env, text, "job"), "%s", err);
	ck_assert_uint_eq(limit_of(0, NULL, 0), 3 * GiB);
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

/* A source of higher precedence replaces a setting's whole value (growth
 * and its size together), and a value it overrides is still checked. */
START_TEST(policy_precedence_replaces_whole_values)
{
	const char *text = "growth = preallocate:4GiB\nrelease = idle:5\n"
			   "[program job]\ngrowth = ondemand\nrelease = never\n";
	ck_assert_msg(build(no_env, text, "job"), "%s", err);
	ck_assert_int_eq(policy.growth, CUMEMCAP_GROWTH_ONDEMAND);
	ck_assert_int_eq(policy.prealloc.kind, CUMEMCAP_AMOUNT_NONE);
	ck_assert_int_eq(policy.release, CUMEMCAP_RELEASE_NEVER);
	ck_assert_uint_eq(policy.release_idle_ms, 0);
	ck_assert_uint_eq(policy.growth_src.line, 4);
	ck_assert_msg(build(no_env, text, "other"), "%s", err);
	ck_assert_int_eq(policy.prealloc.kind, CUMEMCAP_AMOUNT_BYTES);
	ck_assert_uint_eq(policy.release_idle_ms, 5000);
	static const char *const env_log[] = { "CUMEMCAP_LOG", "stderr", NULL };
	ck_assert(!build(env_log, "log = /tmp/x%d\n", "job"));
	ck_assert_msg(strstr(err, "test.conf:1: log = \"/tmp/x%d\"") != NULL, "%s", err);
	ck_assert(!build(env_log, "[program job]\npool = maybe\n", "job"));
	ck_assert_msg(strstr(err, "test.conf:2: pool = \"maybe\"") != NULL, "%s", err);
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
	{ "banana = 1\n", "test.conf:1: ", "unknown key \"banana\"; accepted: limit, device_limits, count, overhead_estimate, growth, pool, release, framework_hints, log, log_interval, metrics, labels, debug, group, group_limit, group_dir, group_access, on_limit" },
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
	/* The group's keys. */
	{ "group = -a\n", "test.conf:1: ", "group = \"-a\" is not a group name; accepted:" },
	{ "# c\ngroup_limit = 8XB\n", "test.conf:2: ", "group_limit = \"8XB\" is not a valid group limit; accepted:" },
	{ "group_limit = x=1G\n", "test.conf:1: ", "group_limit = \"x=1G\": entry 1" },
	{ "group_dir = tmp/x\n", "test.conf:1: ", "group_dir = \"tmp/x\" is not an absolute path; accepted:" },
	{ "group_access = all\n", "test.conf:1: ", "group_access = \"all\" is not supported; accepted: user" },
	{ "on_limit = wait:0\n", "test.conf:1: ", "on_limit = \"wait:0\" is not supported; accepted: fail, wait:SECONDS" },
	{ "group = a\ngroup = b\n", "test.conf:2: ", "duplicate key \"group\" in this section (first at line 1)" },
	{ "[device 0]\ngroup_limit = 1G\n", "test.conf:2: ", "\"group_limit\" cannot stand in a [device] section" },
	{ "[device 0]\non_limit = fail\n", "test.conf:2: ", "\"on_limit\" cannot stand in a [device] section" },
	{ "grup = a\n", "test.conf:1: ", "did you mean \"group\"" },
	{ "[program x]\non_limit = later\n", "test.conf:2: ", "accepted: fail, wait:SECONDS" },
	/* A limit for no group: after precedence, naming the limit's line. */
	{ "log = off\ngroup_limit = 8GiB\n", "test.conf:2: ", "group_limit = \"8GiB\": needs a group; accepted: with a group key" },
	{ "[program prog]\ngroup_limit = 0=50%\n", "test.conf:2: ", "group_limit = \"0=50%\": needs a group" },
	{ "group = \ngroup_limit = 1G\n", "test.conf:2: ", "needs a group" },
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
		bool ok = cumemcap_policy_build(&policy, get, "test.conf", c->text, len, "prog", err,
						sizeof(err));
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
	ck_assert_str_eq(err, "test.conf:1: unknown key \"banana\"; accepted: limit, device_limits, count, overhead_estimate, growth, pool, release, framework_hints, log, log_interval, metrics, labels, debug, group, group_limit, group_dir, group_access, on_limit");
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
	ck_assert(!cumemcap_policy_build(&policy, get, "test.conf", text, n, "p", err, sizeof(err)));
	ck_assert_msg(strstr(err, "test.conf:1: line longer than") == err, "%s", err);
	free(text);
}
END_TEST

/* Lines of every length to past the parser's small buffer (cfgfile.c's
 * line_space), and longer ones read from its heap buffer, reused line
 * after line, up to a line of exactly CUMEMCAP_CONFIG_MAX_LINE bytes
 * whose parts fill it (ASan checks the edges). */
START_TEST(policy_file_long_lines)
{
	char path[1001], text[3000];
	for (size_t k = 1; k < sizeof(path); k++) {
		memset(path, 'l', k);
		path[0] = '/';
		path[k] = '\0';
		snprintf(text, sizeof(text), "log=%s\nlimit = 3GiB\nmetrics=%s # a comment\n", path, path);
		ck_assert_msg(build(no_env, text, NULL), "%zu: %s", k, err);
		ck_assert_str_eq(policy.log_path, path);
		ck_assert_str_eq(policy.metrics_path, path);
		ck_assert_uint_eq(limit_of(0, NULL, 0), 3 * GiB);
	}

	size_t n = CUMEMCAP_CONFIG_MAX_LINE;
	char *longest = malloc(n + 2);
	memset(longest, 'a', n);
	memcpy(longest, "labels=", 7);
	longest[n] = '\n';
	longest[n + 1] = '\0';
	fake_env = no_env;
	ck_assert(!cumemcap_policy_build(&policy, get, "test.conf", longest, n + 1, "p", err,
					 sizeof(err)));
	ck_assert_msg(strstr(err, "test.conf:1: labels = \"aaa") == err, "%s", err);
	ck_assert_msg(strstr(err, "is 4089 bytes long") != NULL, "%s", err);
	free(longest);
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

/* ---- the group and on_limit -------------------------------------------------------- */

/* The group's limit on GPU `dev` (as limit_of) of `total` bytes, and its source. */
static uint64_t group_limit_of(int dev, uint64_t total, char *where, size_t len)
{
	char pci[32];
	unsigned char uuid[16] = { 0xfa, 0x4e, 0xc0, 0xda, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0 };
	struct cumemcap_source src;
	uuid[15] = (unsigned char)dev;
	snprintf(pci, sizeof(pci), "0000:%02x:00.0", 0x10 + dev);
	memset(&src, 0x5a, sizeof(src));
	uint64_t l = cumemcap_policy_limit(&policy, true, dev, uuid, pci, total, &src);
	if (where)
		cumemcap_source_format(&policy, &src, where, len);
	return l;
}

START_TEST(policy_group_defaults)
{
	ck_assert_msg(build(no_env, "limit = 1GiB\n", NULL), "%s", err);
	char where[256], buf[32];
	ck_assert_str_eq(policy.group, "");
	ck_assert_str_eq(policy.group_dir, "/dev/shm");
	ck_assert_str_eq(policy.group_dir, CUMEMCAP_DEFAULT_GROUP_DIR);
	ck_assert(!policy.group_gid);
	ck_assert_uint_eq(policy.wait_ms, 0);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, where, sizeof(where)), UINT64_MAX);
	ck_assert_str_eq(where, "default");
	const struct cumemcap_source *srcs[] = { &policy.group_src, &policy.group_limit_src, &policy.group_dir_src,
						 &policy.group_access_src, &policy.on_limit_src };
	for (size_t i = 0; i < 5; i++)
		ck_assert_int_eq(srcs[i]->origin, CUMEMCAP_FROM_DEFAULT);
	cumemcap_policy_format_on_limit(&policy, buf, sizeof(buf));
	ck_assert_str_eq(buf, "fail");
	ck_assert_str_eq(cumemcap_policy_group_access_name(policy.group_gid), "user");
}
END_TEST

START_TEST(policy_group_reads_every_variable)
{
	static const char *const env[] = {
		"CUMEMCAP_GROUP", "team-a_2.train",
		"CUMEMCAP_GROUP_LIMIT", "8GiB",
		"CUMEMCAP_GROUP_DIR", "/run/cumemcap groups",
		"CUMEMCAP_GROUP_ACCESS", "gid:root",
		"CUMEMCAP_ON_LIMIT", "wait:0.5",
		NULL,
	};
	ck_assert_msg(build(env, NULL, NULL), "%s", err);
	char where[256], buf[32];
	ck_assert_str_eq(policy.group, "team-a_2.train");
	ck_assert_str_eq(policy.group_dir, "/run/cumemcap groups");
	ck_assert(policy.group_gid);
	ck_assert_uint_eq(policy.group_gid_id, 0);
	ck_assert_str_eq(cumemcap_policy_group_access_name(policy.group_gid), "gid");
	ck_assert_uint_eq(policy.wait_ms, 500);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, where, sizeof(where)), 8 * GiB);
	ck_assert_str_eq(where, "CUMEMCAP_GROUP_LIMIT");
	ck_assert_uint_eq(group_limit_of(3, 16 * GiB, NULL, 0), 8 * GiB);
	/* Never above the GPU. */
	ck_assert_uint_eq(group_limit_of(0, 4 * GiB, NULL, 0), 4 * GiB);
	const struct cumemcap_source *srcs[] = { &policy.group_src, &policy.group_limit_src, &policy.group_dir_src,
						 &policy.group_access_src, &policy.on_limit_src };
	static const char *const names[] = { "CUMEMCAP_GROUP", "CUMEMCAP_GROUP_LIMIT", "CUMEMCAP_GROUP_DIR",
					     "CUMEMCAP_GROUP_ACCESS", "CUMEMCAP_ON_LIMIT" };
	for (size_t i = 0; i < 5; i++) {
		cumemcap_source_format(&policy, srcs[i], where, sizeof(where));
		ck_assert_str_eq(where, names[i]);
	}
	cumemcap_policy_format_on_limit(&policy, buf, sizeof(buf));
	ck_assert_str_eq(buf, "wait:0.5");
	/* The shortest and longest names; an empty one is no group. */
	static const char *const edge[] = { "CUMEMCAP_GROUP", "a", NULL };
	ck_assert_msg(build(edge, NULL, NULL), "%s", err);
	ck_assert_str_eq(policy.group, "a");
	char name[CUMEMCAP_GROUP_NAME_MAX + 1];
	memset(name, 'z', CUMEMCAP_GROUP_NAME_MAX);
	name[0] = '_';
	name[CUMEMCAP_GROUP_NAME_MAX] = '\0';
	const char *longest[] = { "CUMEMCAP_GROUP", name, NULL };
	ck_assert_msg(build(longest, NULL, NULL), "%s", err);
	ck_assert_str_eq(policy.group, name);
	static const char *const none[] = { "CUMEMCAP_GROUP", "", NULL };
	ck_assert_msg(build(none, NULL, NULL), "%s", err);
	ck_assert_str_eq(policy.group, "");
	ck_assert_int_eq(policy.group_src.origin, CUMEMCAP_FROM_ENV);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, NULL, 0), UINT64_MAX);
}
END_TEST

/* Every form: one amount, a share, a list by ordinal, UUID and PCI id. */
START_TEST(policy_group_limit_forms)
{
	static const char *const share[] = { "CUMEMCAP_GROUP", "g", "CUMEMCAP_GROUP_LIMIT", "25%", NULL };
	ck_assert_msg(build(share, NULL, NULL), "%s", err);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, NULL, 0), 4 * GiB);
	ck_assert_uint_eq(group_limit_of(1, 80 * GiB, NULL, 0), 20 * GiB);
	static const char *const bytes[] = { "CUMEMCAP_GROUP", "g", "CUMEMCAP_GROUP_LIMIT", "1073741824", NULL };
	ck_assert_msg(build(bytes, NULL, NULL), "%s", err);
	ck_assert_uint_eq(group_limit_of(2, 16 * GiB, NULL, 0), 1 * GiB);
	static const char *const list[] = {
		"CUMEMCAP_GROUP", "g",
		"CUMEMCAP_GROUP_LIMIT", "0=1GiB," UUID1 "=50%,0000:12:00.0=3GiB",
		NULL,
	};
	ck_assert_msg(build(list, NULL, NULL), "%s", err);
	char where[256];
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, where, sizeof(where)), 1 * GiB);
	ck_assert_str_eq(where, "CUMEMCAP_GROUP_LIMIT");
	ck_assert_uint_eq(group_limit_of(1, 16 * GiB, NULL, 0), 8 * GiB);
	ck_assert_uint_eq(group_limit_of(2, 16 * GiB, NULL, 0), 3 * GiB);
	/* A GPU the list does not name: no group limit. */
	ck_assert_uint_eq(group_limit_of(3, 16 * GiB, where, sizeof(where)), UINT64_MAX);
	ck_assert_str_eq(where, "default");
	/* The process's limit is not the group's, nor the other way round. */
	ck_assert_uint_eq(limit_of(0, NULL, 0), UINT64_MAX);
}
END_TEST

START_TEST(policy_on_limit_forms)
{
	static const struct {
		const char *value, *shown;
		uint32_t ms;
	} cases[] = {
		{ "fail", "fail", 0 },
		{ "wait:0.5", "wait:0.5", 500 },
		{ "wait:30", "wait:30", 30000 },
		{ "wait:1.25", "wait:1.25", 1250 },
		{ "wait:0.001", "wait:0.001", 1 },
		{ "wait:2.100", "wait:2.1", 2100 },
		{ "wait:86400", "wait:86400", 86400000 },
		{ NULL, NULL, 0 },
	};
	for (size_t i = 0; cases[i].value; i++) {
		const char *env[] = { "CUMEMCAP_ON_LIMIT", cases[i].value, NULL };
		char buf[32];
		ck_assert_msg(build(env, NULL, NULL), "%s: %s", cases[i].value, err);
		ck_assert_uint_eq(policy.wait_ms, cases[i].ms);
		cumemcap_policy_format_on_limit(&policy, buf, sizeof(buf));
		ck_assert_str_eq(buf, cases[i].shown);
		ck_assert_str_eq(policy.on_limit_src.variable, "CUMEMCAP_ON_LIMIT");
	}
}
END_TEST

/* Every group key: environment > [program] > global part > default. */
static const char *const group_text =
	"group = node\n"                 /* 1 */
	"group_limit = 0=2GiB\n"         /* 2 */
	"group_dir = /srv/groups\n"      /* 3 */
	"group_access = gid:4242\n"      /* 4 */
	"on_limit = wait:5\n"            /* 5 */
	"[program job]\n"                /* 6 */
	"group = jobs\n"                 /* 7 */
	"group_limit = 6GiB\n"           /* 8 */
	"group_dir = /srv/jobs\n"        /* 9 */
	"group_access = user\n"          /* 10 */
	"on_limit = wait:60\n";          /* 11 */

START_TEST(policy_group_precedence)
{
	char where[256];
	ck_assert_msg(build(no_env, group_text, "other"), "%s", err);
	ck_assert_str_eq(policy.group, "node");
	ck_assert_uint_eq(policy.group_src.line, 1);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, where, sizeof(where)), 2 * GiB);
	ck_assert_str_eq(where, "test.conf:2");
	ck_assert_uint_eq(group_limit_of(1, 16 * GiB, NULL, 0), UINT64_MAX);
	ck_assert_str_eq(policy.group_dir, "/srv/groups");
	ck_assert_uint_eq(policy.group_dir_src.line, 3);
	ck_assert(policy.group_gid);
	ck_assert_uint_eq(policy.group_gid_id, 4242);
	ck_assert_uint_eq(policy.group_access_src.line, 4);
	ck_assert_uint_eq(policy.wait_ms, 5000);
	ck_assert_uint_eq(policy.on_limit_src.line, 5);

	ck_assert_msg(build(no_env, group_text, "job"), "%s", err);
	ck_assert_str_eq(policy.group, "jobs");
	ck_assert_uint_eq(policy.group_src.line, 7);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, where, sizeof(where)), 6 * GiB);
	ck_assert_str_eq(where, "test.conf:8");
	ck_assert_uint_eq(policy.group_limit_src.line, 8);
	ck_assert_str_eq(policy.group_dir, "/srv/jobs");
	ck_assert(!policy.group_gid);
	ck_assert_uint_eq(policy.group_access_src.line, 10);
	ck_assert_uint_eq(policy.wait_ms, 60000);

	static const char *const env[] = {
		"CUMEMCAP_GROUP", "mine",
		"CUMEMCAP_GROUP_LIMIT", "1=3GiB",
		"CUMEMCAP_GROUP_DIR", "/tmp/g",
		"CUMEMCAP_GROUP_ACCESS", "gid:0",
		"CUMEMCAP_ON_LIMIT", "fail",
		NULL,
	};
	ck_assert_msg(build(env, group_text, "job"), "%s", err);
	ck_assert_str_eq(policy.group, "mine");
	ck_assert_int_eq(policy.group_src.origin, CUMEMCAP_FROM_ENV);
	/* The environment's list names GPU 1; GPU 0 is left to the
	 * [program] section's single amount, as CUMEMCAP_DEVICE_LIMITS
	 * leaves a GPU it does not name to the lower rules. */
	ck_assert_uint_eq(group_limit_of(1, 16 * GiB, where, sizeof(where)), 3 * GiB);
	ck_assert_str_eq(where, "CUMEMCAP_GROUP_LIMIT");
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, where, sizeof(where)), 6 * GiB);
	ck_assert_str_eq(where, "test.conf:8");
	ck_assert_str_eq(policy.group_dir, "/tmp/g");
	ck_assert(policy.group_gid);
	ck_assert_uint_eq(policy.wait_ms, 0);
	ck_assert_int_eq(policy.on_limit_src.origin, CUMEMCAP_FROM_ENV);
	/* Not the program: GPU 0 from the environment's list missing it
	 * falls to the global part's list. */
	ck_assert_msg(build(env, group_text, "other"), "%s", err);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, where, sizeof(where)), 2 * GiB);
	ck_assert_str_eq(where, "test.conf:2");
	ck_assert_uint_eq(group_limit_of(2, 16 * GiB, NULL, 0), UINT64_MAX);
}
END_TEST

/* A group limit needs a group; CUMEMCAP_GROUP= turns a file's group off,
 * its limit with it. */
START_TEST(policy_group_limit_needs_a_group)
{
	static const char *const alone[] = { "CUMEMCAP_GROUP_LIMIT", "8GiB", NULL };
	ck_assert(!build(alone, NULL, NULL));
	ck_assert_str_eq(err, "CUMEMCAP_GROUP_LIMIT=\"8GiB\": needs a group; accepted: with CUMEMCAP_GROUP "
			      "(the group's name) set, here or in the configuration file");
	static const char *const empty[] = { "CUMEMCAP_GROUP", "", "CUMEMCAP_GROUP_LIMIT", "0=1GiB", NULL };
	ck_assert(!build(empty, "group = node\n", NULL));
	ck_assert_msg(strstr(err, "CUMEMCAP_GROUP_LIMIT=\"0=1GiB\": needs a group") == err, "%s", err);
	/* The environment's empty group over the file's group and limit. */
	static const char *const off[] = { "CUMEMCAP_GROUP", "", NULL };
	ck_assert_msg(build(off, "group = node\ngroup_limit = 4GiB\n", NULL), "%s", err);
	ck_assert_str_eq(policy.group, "");
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, NULL, 0), UINT64_MAX);
	/* A group from the environment, a limit from the file: both apply. */
	static const char *const named[] = { "CUMEMCAP_GROUP", "x", NULL };
	ck_assert_msg(build(named, "group_limit = 4GiB\n", NULL), "%s", err);
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, NULL, 0), 4 * GiB);
	/* A group without a limit is allowed. */
	ck_assert_msg(build(named, NULL, NULL), "%s", err);
	ck_assert_str_eq(policy.group, "x");
	ck_assert_uint_eq(group_limit_of(0, 16 * GiB, NULL, 0), UINT64_MAX);
	/* A [program] section's limit with no group anywhere, only for that program. */
	ck_assert_msg(build(no_env, "[program job]\ngroup_limit = 1GiB\n", "other"), "%s", err);
	ck_assert(!build(no_env, "[program job]\ngroup_limit = 1GiB\n", "job"));
	ck_assert_msg(strstr(err, "test.conf:2: group_limit = \"1GiB\": needs a group") == err, "%s", err);
}
END_TEST

struct seen_selector {
	char text[64];
	char where[64];
};

static void collect_selector(void *ctx, const struct cumemcap_selector *sel, const struct cumemcap_source *src)
{
	struct seen_selector *seen = ctx;
	size_t i = 0;
	while (seen[i].text[0])
		i++;
	cumemcap_selector_format(sel, seen[i].text, sizeof(seen[i].text));
	cumemcap_source_format(&policy, src, seen[i].where, sizeof(seen[i].where));
}

/* A group's list is checked against the GPUs like the other selectors. */
START_TEST(policy_group_selectors_are_reported)
{
	static struct seen_selector seen[8];
	static const char *const env[] = { "CUMEMCAP_GROUP_LIMIT", "7=1GiB,0000:3b:00.0=2GiB", NULL };
	const char *text = "group = g\ndevice_limits = 1=1GiB\n";
	ck_assert_msg(build(env, text, NULL), "%s", err);
	memset(seen, 0, sizeof(seen));
	cumemcap_policy_selectors(&policy, collect_selector, seen);
	ck_assert_str_eq(seen[0].text, "1");
	ck_assert_str_eq(seen[0].where, "test.conf:2");
	ck_assert_str_eq(seen[1].text, "7");
	ck_assert_str_eq(seen[1].where, "CUMEMCAP_GROUP_LIMIT");
	ck_assert_str_eq(seen[2].text, "0000:3b:00.0");
	ck_assert_str_eq(seen[3].text, "");
	/* No group (turned off): its list is not applied, so not reported. */
	static const char *const off[] = { "CUMEMCAP_GROUP", "", NULL };
	ck_assert_msg(build(off, "group = g\ngroup_limit = 5=1GiB\n", NULL), "%s", err);
	memset(seen, 0, sizeof(seen));
	cumemcap_policy_selectors(&policy, collect_selector, seen);
	ck_assert_str_eq(seen[0].text, "");
}
END_TEST

/* Values that the bad_envs table cannot hold: quoted text, a path too long. */
START_TEST(policy_group_dir_limits)
{
	static char long_dir[CUMEMCAP_PATH_MAX + 1];
	memset(long_dir, 'd', CUMEMCAP_PATH_MAX);
	long_dir[0] = '/';
	long_dir[CUMEMCAP_PATH_MAX] = '\0';
	const char *too_long[] = { "CUMEMCAP_GROUP_DIR", long_dir, NULL };
	ck_assert(!build(too_long, NULL, NULL));
	ck_assert_msg(strstr(err, "CUMEMCAP_GROUP_DIR=\"/ddd") == err, "%s", err);
	ck_assert_msg(strstr(err, "is too long; accepted: an absolute directory path (starting with '/') of at most 1023 bytes") != NULL, "%s", err);
	long_dir[CUMEMCAP_PATH_MAX - 1] = '\0';
	ck_assert_msg(build(too_long, NULL, NULL), "%s", err);
	ck_assert_uint_eq(strlen(policy.group_dir), CUMEMCAP_PATH_MAX - 1);
	static const char *const ctl[] = { "CUMEMCAP_GROUP_DIR", "/dev/\x1bshm", NULL };
	ck_assert(!build(ctl, NULL, NULL));
	ck_assert_str_eq(err, "CUMEMCAP_GROUP_DIR=\"/dev/\\x1bshm\" contains a control character; accepted: an absolute "
			      "directory path (starting with '/') of at most 1023 bytes without control characters, such as /dev/shm");
	/* Letters are ASCII letters: a UTF-8 name is not one. */
	static const char *const utf8[] = { "CUMEMCAP_GROUP", "\xc3\xa9quipe", NULL };
	ck_assert(!build(utf8, NULL, NULL));
	ck_assert_msg(strstr(err, "CUMEMCAP_GROUP=\"\\xc3\\xa9quipe\" is not a group name") == err, "%s", err);
}
END_TEST

/* Under secure execution the environment names no group; a trusted
 * file's keys are read as any file's (test-secure.c has the trust). */
START_TEST(policy_group_secure_ignores_environment)
{
	static const char *const env[] = { "CUMEMCAP_GROUP", "mine", "CUMEMCAP_GROUP_DIR", "/tmp/evil",
					   "CUMEMCAP_ON_LIMIT", "wait:10", NULL };
	char note[256];
	fake_env = env;
	ck_assert_msg(cumemcap_policy_build_process(&policy, get, true, "", 0, "prog", err, sizeof(err), note,
						     sizeof(note)), "%s", err);
	ck_assert_str_eq(policy.group, "");
	ck_assert_str_eq(policy.group_dir, "/dev/shm");
	ck_assert_uint_eq(policy.wait_ms, 0);
	ck_assert_msg(cumemcap_policy_build_process(&policy, get, false, "", 0, "prog", err, sizeof(err), note,
						     sizeof(note)), "%s", err);
	ck_assert_str_eq(policy.group, "mine");
	ck_assert_str_eq(policy.group_dir, "/tmp/evil");
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
	ck_assert(!cumemcap_policy_build(&policy, get, "/nonexistent/cumemcap.conf", NULL, 0, "p", err,
					 sizeof(err)));
	ck_assert_msg(strstr(err, "CUMEMCAP_CONFIG=\"/nonexistent/cumemcap.conf\": /nonexistent/cumemcap.conf: cannot open") == err,
		      "%s", err);
	ck_assert(!cumemcap_policy_build(&policy, get, "/", NULL, 0, "p", err, sizeof(err)));
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
	/* The interpreters' globs, as fnmatch(3) reads them (the constructor
	 * matches them without it: policy.c's glob_match). */
	{ { "python3.12", "a.py" }, "a.py" },
	{ { "pythonw", "a.py" }, "pythonw" },
	{ { "python-config", "a.py" }, "python-config" },
	{ { "pypy", "a.py" }, "a.py" },
	{ { "pypy3.10", "a.py" }, "a.py" },
	{ { "perl", "a.pl" }, "a.pl" },
	{ { "perl5.36.0", "a.pl" }, "a.pl" },
	{ { "perl6", "a.pl" }, "perl6" },
	{ { "ruby3.2", "a.rb" }, "a.rb" },
	{ { "node", "a.js" }, "a.js" },
	{ { "nodejs", "a.js" }, "a.js" },
	{ { "node18", "a.js" }, "node18" },
	{ { "sh", "a.sh" }, "a.sh" },
	{ { "shx", "a.sh" }, "shx" },
	{ { "Rscript", "a.R" }, "a.R" },
	{ { "rscript", "a.R" }, "rscript" },
	{ { "lua", "a.lua" }, "a.lua" },
	{ { "php8.2", "a.php" }, "a.php" },
	{ { "julia", "--", "a.jl" }, "julia" },
	{ { "python3", "-", "a.py" }, "python3" },
	{ { "python3", "-X", "dev", "-e", "a.py" }, "python3" },
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
	/* Cut to the buffer, as snprintf would. */
	char *const argv[] = { "python3", "train.py", NULL };
	char small[4] = "xyz";
	cumemcap_program_name(2, argv, small, sizeof(small));
	ck_assert_str_eq(small, "tra");
	cumemcap_program_name(2, argv, small, 1);
	ck_assert_str_eq(small, "");
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
	ADD_TEST(s, policy_file_program_sections_never_match_no_name);
	ADD_TEST(s, policy_precedence_file_layers);
	ADD_TEST(s, policy_precedence_environment_wins);
	ADD_TEST(s, policy_precedence_replaces_whole_values);
	ADD_TEST(s, policy_file_errors_point_at_the_line);
	ADD_TEST(s, policy_file_error_key_lists_are_exact);
	ADD_TEST(s, policy_file_line_too_long);
	ADD_TEST(s, policy_file_long_lines);
	ADD_TEST(s, policy_file_syntax_details);
	ADD_TEST(s, policy_config_path_choice);
	ADD_TEST(s, policy_missing_file_named_by_variable);
	ADD_TEST(s, policy_program_name);
	ADD_TEST(s, policy_suggestions);
	ADD_TEST(s, policy_group_defaults);
	ADD_TEST(s, policy_group_reads_every_variable);
	ADD_TEST(s, policy_group_limit_forms);
	ADD_TEST(s, policy_on_limit_forms);
	ADD_TEST(s, policy_group_precedence);
	ADD_TEST(s, policy_group_limit_needs_a_group);
	ADD_TEST(s, policy_group_selectors_are_reported);
	ADD_TEST(s, policy_group_dir_limits);
	ADD_TEST(s, policy_group_secure_ignores_environment);
	return s;
}
