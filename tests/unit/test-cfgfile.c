/* Unit tests for opening the configuration file (src/config/cfgfile.c and
 * cumemcap_policy_build_process in src/config/policy.c, not under secure
 * execution): a FIFO never blocks, only regular files are read, a path is
 * never cut, and a default that is there but unusable is an error naming
 * it, never a silent run without limits. Every file lives in a private
 * temporary directory, which stands in for /etc. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfgfile.h"
#include "config/policy.h"
#include "test-common.h"

#define GiB (1024ull * 1024 * 1024)

static char dir[256], conf[300];
static const char *env_pairs[8];
static struct cumemcap_policy policy;
static char err[2048], note[512];

static const char *get(const char *name)
{
	for (const char *const *e = env_pairs; e[0]; e += 2)
		if (strcmp(e[0], name) == 0)
			return e[1];
	return NULL;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/cumemcap-cfgfile.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/cumemcap.conf", dir);
	env_pairs[0] = NULL;
}

static void teardown(void)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* The library's build: CUMEMCAP_CONFIG from env_pairs, else `conf` as the
 * default (/etc/cumemcap.conf). */
static bool build(void)
{
	err[0] = '\0';
	return cumemcap_policy_build_process(&policy, get, false, conf, 0, "prog", err, sizeof(err), note,
					     sizeof(note));
}

static uint64_t limit0(void)
{
	unsigned char uuid[16] = { 0 };
	return cumemcap_policy_limit(&policy, false, 0, uuid, "0000:10:00.0", 16 * GiB, NULL);
}

/* One line naming the file, then the reason. */
static void assert_error_names(const char *path, const char *reason)
{
	ck_assert_msg(strstr(err, path) != NULL, "%s", err);
	ck_assert_msg(strstr(err, reason) != NULL, "%s", err);
	ck_assert_msg(strchr(err, '\n') == NULL, "%s", err);
}

START_TEST(cfgfile_default_absent_means_none)
{
	ck_assert_msg(build(), "%s", err);
	ck_assert_str_eq(policy.config_path, "");
	ck_assert_uint_eq(limit0(), UINT64_MAX);
	write_file(conf, "limit = 3GiB\n");
	ck_assert_msg(build(), "%s", err);
	ck_assert_uint_eq(limit0(), 3 * GiB);
}
END_TEST

START_TEST(cfgfile_default_dangling_link_is_an_error)
{
	char missing[320];
	snprintf(missing, sizeof(missing), "%s/gone.conf", dir);
	ck_assert_int_eq(symlink(missing, conf), 0);
	ck_assert(!build());
	assert_error_names(conf, "symbolic link to a file that does not exist");
}
END_TEST

START_TEST(cfgfile_default_fifo_is_an_error_not_a_hang)
{
	ck_assert_int_eq(mkfifo(conf, 0644), 0);
	ck_assert(!build());
	assert_error_names(conf, "not a regular file");
	/* Named by the variable: the same, with the variable named. */
	char fifo[320];
	snprintf(fifo, sizeof(fifo), "%s/other.fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0644), 0);
	const char *pairs[] = { "CUMEMCAP_CONFIG", fifo, NULL };
	memcpy(env_pairs, pairs, sizeof(pairs));
	ck_assert(!build());
	assert_error_names(fifo, "not a regular file");
	ck_assert_msg(strncmp(err, "CUMEMCAP_CONFIG=", 16) == 0, "%s", err);
}
END_TEST

START_TEST(cfgfile_default_not_regular_or_unreadable_is_an_error)
{
	ck_assert_int_eq(mkdir(conf, 0755), 0);
	ck_assert(!build());
	assert_error_names(conf, "not a regular file");
	ck_assert_int_eq(rmdir(conf), 0);
	write_file(conf, "limit = 1GiB\n");
	ck_assert_int_eq(chmod(conf, 0), 0);
	if (access(conf, R_OK) == 0)
		return; /* root reads it anyway */
	ck_assert(!build());
	assert_error_names(conf, "cannot open");
}
END_TEST

/* A path longer than the shim keeps is refused, not cut: a file at the
 * cut path must not apply instead. */
START_TEST(cfgfile_long_path_is_an_error)
{
	char cut[CUMEMCAP_PATH_MAX + 1], named[CUMEMCAP_PATH_MAX + 64];
	size_t n = (size_t)snprintf(cut, sizeof(cut), "%s", dir);
	while (n + 1 + 200 < CUMEMCAP_PATH_MAX - 1 - 100) {
		n += (size_t)snprintf(cut + n, sizeof(cut) - n, "/%0200d", 0);
		ck_assert_int_eq(mkdir(cut, 0700), 0);
	}
	cut[n++] = '/';
	while (n < CUMEMCAP_PATH_MAX - 1)
		cut[n++] = 'x';
	cut[n] = '\0';
	write_file(cut, "limit = 7GiB\n");
	snprintf(named, sizeof(named), "%s-longer.conf", cut);
	const char *pairs[] = { "CUMEMCAP_CONFIG", named, NULL };
	memcpy(env_pairs, pairs, sizeof(pairs));
	ck_assert(!build());
	ck_assert_msg(strncmp(err, "CUMEMCAP_CONFIG=\"", 17) == 0, "%s", err);
	ck_assert_msg(strstr(err, "longer than 1023 bytes") != NULL, "%s", err);
	ck_assert_msg(strchr(err, '\n') == NULL, "%s", err);
}
END_TEST

static void add(Suite *s, const TTest *t)
{
	cumemcap_test_add(s, t, setup, teardown, 10);
}

TEST_SUITE(cfgfile)
{
	Suite *s = suite_create("cfgfile");
	add(s, cfgfile_default_absent_means_none);
	add(s, cfgfile_default_dangling_link_is_an_error);
	add(s, cfgfile_default_fifo_is_an_error_not_a_hang);
	add(s, cfgfile_default_not_regular_or_unreadable_is_an_error);
	add(s, cfgfile_long_path_is_an_error);
	return s;
}
