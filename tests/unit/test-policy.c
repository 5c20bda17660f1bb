/* Unit tests for src/policy.c: the CUMEMCAP_* variables as a whole. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "test-common.h"

/* A fake environment: NULL-terminated name/value pairs. */
static const char *const *fake_env;

static const char *get(const char *name)
{
	for (const char *const *e = fake_env; e && e[0]; e += 2)
		if (strcmp(e[0], name) == 0)
			return e[1];
	return NULL;
}

static bool build(const char *const *env, struct cumemcap_policy *p, char *err, size_t len)
{
	fake_env = env;
	return cumemcap_policy_build(p, get, err, len);
}

START_TEST(policy_defaults_without_variables)
{
	static const char *const env[] = { NULL };
	struct cumemcap_policy p;
	char err[512] = "";
	ck_assert(build(env, &p, err, sizeof(err)));
	ck_assert_int_eq(p.limit.kind, CUMEMCAP_AMOUNT_NONE);
	ck_assert_uint_eq(p.devices.count, 0);
	ck_assert_int_eq(p.log, CUMEMCAP_LOG_OFF);
	ck_assert(!p.debug_doors);
}
END_TEST

START_TEST(policy_reads_every_variable)
{
	static const char *const env[] = {
		"CUMEMCAP_LIMIT", "8GiB",
		"CUMEMCAP_DEVICE_LIMITS", "0=4GiB,1=50%",
		"CUMEMCAP_GROWTH", "ondemand",
		"CUMEMCAP_LOG", "stderr",
		"CUMEMCAP_DEBUG", "doors",
		NULL,
	};
	struct cumemcap_policy p;
	char err[512] = "";
	ck_assert_msg(build(env, &p, err, sizeof(err)), "%s", err);
	ck_assert_int_eq(p.limit.kind, CUMEMCAP_AMOUNT_BYTES);
	ck_assert_uint_eq(p.limit.bytes, 8ull << 30);
	ck_assert_uint_eq(p.devices.count, 2);
	ck_assert_int_eq(p.log, CUMEMCAP_LOG_STDERR);
	ck_assert(p.debug_doors);
}
END_TEST

struct bad_case {
	const char *var;
	const char *value;
	const char *why; /* a word the message must contain */
};

static const struct bad_case bad_cases[] = {
	{ "CUMEMCAP_LIMIT", "banana", "accepted" },
	{ "CUMEMCAP_LIMIT", "-1G", "accepted" },
	{ "CUMEMCAP_LIMIT", "12XB", "accepted" },
	{ "CUMEMCAP_LIMIT", "150%", "accepted" },
	{ "CUMEMCAP_LIMIT", "", "accepted" },
	{ "CUMEMCAP_DEVICE_LIMITS", "foo=4GiB", "selector" },
	{ "CUMEMCAP_DEVICE_LIMITS", "0=4GiB,0=1GiB", "same GPU" },
	{ "CUMEMCAP_GROWTH", "preallocate:4GiB", "ondemand" },
	{ "CUMEMCAP_GROWTH", "sometimes", "ondemand" },
	{ "CUMEMCAP_LOG", "/var/log/x", "stderr" },
	{ "CUMEMCAP_DEBUG", "all", "doors" },
	{ "CUMEMCAP_CONFIG", "/etc/cumemcap.conf", "not built yet" },
	{ NULL, NULL, NULL },
};

/* Each bad value fails the whole policy with one line that names the
 * variable, quotes the value and says what would be accepted; the output
 * is left untouched. */
START_TEST(policy_bad_values_are_errors)
{
	for (const struct bad_case *c = bad_cases; c->var; c++) {
		const char *env[] = { "CUMEMCAP_LIMIT", "4GiB", c->var, c->value, NULL };
		if (strcmp(c->var, "CUMEMCAP_LIMIT") == 0) {
			env[0] = c->var;
			env[1] = c->value;
			env[2] = NULL;
		}
		struct cumemcap_policy p;
		memset(&p, 0x5a, sizeof(p));
		char err[1024] = "";
		char quoted[256];
		snprintf(quoted, sizeof(quoted), "\"%s\"", c->value);
		ck_assert_msg(!build(env, &p, err, sizeof(err)), "%s=%s accepted", c->var, c->value);
		ck_assert_msg(strstr(err, c->var) != NULL, "no variable name in: %s", err);
		ck_assert_msg(strstr(err, quoted) != NULL, "no value in: %s", err);
		ck_assert_msg(strstr(err, c->why) != NULL, "no \"%s\" in: %s", c->why, err);
		ck_assert_msg(strchr(err, '\n') == NULL, "more than one line: %s", err);
		ck_assert_int_eq(((unsigned char *)&p)[0], 0x5a);
	}
}
END_TEST

TEST_SUITE(policy)
{
	Suite *s = suite_create("policy");
	ADD_TEST(s, policy_defaults_without_variables);
	ADD_TEST(s, policy_reads_every_variable);
	ADD_TEST(s, policy_bad_values_are_errors);
	return s;
}
