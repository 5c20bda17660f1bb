/* Unit tests for secure execution (AT_SECURE) in src/config/policy.c and
 * src/config/cfgfile.c: cumemcap_policy_build_process with secure = true, which is
 * what the library calls when getauxval(AT_SECURE) says the process is
 * setuid, setgid or has file capabilities. The owner a trusted file must
 * have is a parameter (root in the library), so these tests run as any
 * user: they pass their own uid, and another uid for "not owned". Every
 * file lives in a private temporary directory. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/policy.h"
#include "test-common.h"

#define GiB (1024ull * 1024 * 1024)

static char dir[256], conf[300], secret[300], logpath[300];
static const char *env_pairs[16];
static struct cumemcap_policy policy;
static char err[2048], note[2048];

static const char *get(const char *name)
{
	for (const char *const *e = env_pairs; e[0]; e += 2)
		if (strcmp(e[0], name) == 0)
			return e[1];
	return NULL;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/cumemcap-secure.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	snprintf(conf, sizeof(conf), "%s/cumemcap.conf", dir);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	snprintf(logpath, sizeof(logpath), "%s/chosen-%%p.jsonl", dir);
	/* What an unprivileged caller of a setuid program would set. */
	write_file(secret, "root-only-first-line\n", 0600);
	const char *pairs[] = { "CUMEMCAP_CONFIG", secret, "CUMEMCAP_LIMIT", "4GiB",
				"CUMEMCAP_LOG", logpath, "CUMEMCAP_METRICS", logpath,
				"CUMEMCAP_DEVICE_LIMITS", "0=8GiB", NULL };
	memcpy(env_pairs, pairs, sizeof(pairs));
}

static void teardown(void)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static bool build(bool secure, uid_t owner)
{
	err[0] = note[0] = '\0';
	return cumemcap_policy_build_process(&policy, get, secure, conf, owner, "prog", err,
					     sizeof(err), note, sizeof(note));
}

static uint64_t limit0(struct cumemcap_source *src)
{
	unsigned char uuid[16] = { 0 };
	return cumemcap_policy_limit(&policy, false, 0, uuid, "0000:10:00.0", 16 * GiB, src);
}

START_TEST(secure_environment_names_no_path)
{
	/* Not secure, the same environment reads the caller's file and
	 * shows its first line: what must not happen to a setuid program. */
	ck_assert(!build(false, geteuid()));
	ck_assert_msg(strstr(err, "root-only-first-line") != NULL, "%s", err);

	ck_assert_msg(build(true, geteuid()), "%s", err);
	ck_assert_str_eq(note, "");
	ck_assert(policy.secure);
	ck_assert_str_eq(policy.config_path, "");
	ck_assert_uint_eq(limit0(NULL), UINT64_MAX);
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_OFF);
	ck_assert_str_eq(policy.metrics_path, "");
}
END_TEST

START_TEST(secure_trusted_default_applies)
{
	char text[400];
	snprintf(text, sizeof(text), "limit = 2GiB\nlog = %s/from-file-%%p.jsonl\n", dir);
	write_file(conf, text, 0644);
	ck_assert_msg(build(true, geteuid()), "%s", err);
	ck_assert_str_eq(note, "");
	struct cumemcap_source src;
	ck_assert_uint_eq(limit0(&src), 2 * GiB);
	ck_assert_int_eq(src.origin, CUMEMCAP_FROM_FILE);
	ck_assert_str_eq(policy.config_path, conf);
	/* The log the file asks for, not the caller's. */
	ck_assert_int_eq(policy.log, CUMEMCAP_LOG_FILE);
	ck_assert(strstr(policy.log_path, "from-file-") != NULL);
}
END_TEST

/* Each way a default file is not trusted: no limits, one note naming the
 * file, nothing of its contents. */
START_TEST(secure_untrusted_default_passes_through)
{
	static const struct {
		mode_t file_mode, dir_mode;
		bool other_owner, symlink;
		const char *reason;
	} cases[] = {
		{ 0666, 0755, false, false, "writable by others" },
		{ 0664, 0755, false, false, "writable by others" },
		{ 0644, 0777, false, false, "its directory" },
		{ 0644, 01777, false, false, "its directory" },
		{ 0644, 0775, false, false, "its directory" },
		{ 0644, 0755, true, false, "not owned by uid" },
		{ 0644, 0755, false, true, "symbolic link" },
		{ 0, 0, false, false, NULL },
	};
	for (int i = 0; cases[i].reason; i++) {
		char target[320];
		snprintf(target, sizeof(target), "%s/real.conf", dir);
		unlink(conf);
		if (cases[i].symlink) {
			write_file(target, "limit = 1GiB # topsecret\n", 0644);
			ck_assert_int_eq(symlink(target, conf), 0);
		} else {
			write_file(conf, "limit = 1GiB # topsecret\n", cases[i].file_mode);
		}
		ck_assert_int_eq(chmod(dir, cases[i].dir_mode), 0);
		uid_t owner = cases[i].other_owner ? geteuid() + 1 : geteuid();
		bool ok = build(true, owner);
		ck_assert_int_eq(chmod(dir, 0755), 0);
		ck_assert_msg(ok, "case %d: %s", i, err);
		ck_assert_msg(strstr(note, conf) == note, "case %d: %s", i, note);
		ck_assert_msg(strstr(note, cases[i].reason) != NULL, "case %d: %s", i, note);
		ck_assert_msg(strstr(note, "no limits") != NULL, "case %d: %s", i, note);
		ck_assert_msg(strstr(note, "topsecret") == NULL, "case %d: %s", i, note);
		ck_assert_msg(strchr(note, '\n') == NULL, "case %d: %s", i, note);
		ck_assert_uint_eq(limit0(NULL), UINT64_MAX);
		ck_assert_int_eq(policy.log, CUMEMCAP_LOG_OFF);
	}
}
END_TEST

START_TEST(secure_bad_trusted_line_not_shown)
{
	write_file(conf, "limit = 2GiB\nlimit_typo = topsecret-value\n", 0600);
	ck_assert(!build(true, geteuid()));
	char want[400];
	snprintf(want, sizeof(want), "%s:2: ", conf);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
	ck_assert_msg(strstr(err, "topsecret") == NULL && strstr(err, "limit_typo") == NULL, "%s", err);
}
END_TEST

START_TEST(secure_fifo_default_does_not_block)
{
	ck_assert_int_eq(mkfifo(conf, 0644), 0);
	ck_assert_msg(build(true, geteuid()), "%s", err);
	ck_assert_msg(strstr(note, "not a regular file") != NULL, "%s", note);
	ck_assert_uint_eq(limit0(NULL), UINT64_MAX);
}
END_TEST

static void add(Suite *s, const TTest *t)
{
	cumemcap_test_add(s, t, setup, teardown, 0);
}

TEST_SUITE(secure)
{
	Suite *s = suite_create("secure");
	add(s, secure_environment_names_no_path);
	add(s, secure_trusted_default_applies);
	add(s, secure_untrusted_default_passes_through);
	add(s, secure_bad_trusted_line_not_shown);
	add(s, secure_fifo_default_does_not_block);
	return s;
}
