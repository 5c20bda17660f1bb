/* test-common: how a unit-test file hands its suite to test-main.c.
 *
 * Shaped like libevdev's test/test-common.h: there is no central list of
 * suites. Each test file ends with
 *
 *	TEST_SUITE(parse)
 *	{
 *		Suite *s = suite_create("parse");
 *		...
 *		return s;
 *	}
 *
 * which defines the function that builds the suite and a constructor that
 * links it into a registry before main() runs. Adding a test file is one line
 * in tests/unit/meson.build. Tests are named <module>_<behaviour>
 * (parse_amount_units). Table-driven tests end their table in a sentinel row.
 *
 * Single-threaded: registration happens in constructors, before main().
 */
#pragma once

#include "config.h"

#include <check.h>

struct cumemcap_test_suite {
	const char *name;
	Suite *(*setup)(void);
	struct cumemcap_test_suite *next;
};

/* Defined in test-main.c. */
void cumemcap_test_register(struct cumemcap_test_suite *suite);

#define TEST_SUITE(name_)                                                      \
	static Suite *name_##_suite_setup(void);                               \
	static struct cumemcap_test_suite name_##_suite_entry = {              \
		.name = #name_,                                                \
		.setup = name_##_suite_setup,                                  \
	};                                                                     \
	__attribute__((constructor)) static void name_##_suite_register(void)  \
	{                                                                      \
		cumemcap_test_register(&name_##_suite_entry);                  \
	}                                                                      \
	static Suite *name_##_suite_setup(void)

/* A test case of one test, named after the test, with a fixture that runs
 * in the parent around the forked test (so a failed test is cleaned up
 * too), and a timeout in seconds (0: Check's default). */
static inline void cumemcap_test_add(Suite *s, const TTest *t, SFun setup, SFun teardown, double timeout)
{
	TCase *tc = tcase_create(t->name);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	if (timeout > 0)
		tcase_set_timeout(tc, timeout);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

/* A test case of one test, named after the test: keeps `CK_RUN_CASE=parse_amount_units`
 * able to pick out a single test. */
#define ADD_TEST(suite_, test_)                                                \
	do {                                                                   \
		TCase *tc_ = tcase_create(#test_);                             \
		tcase_add_test(tc_, test_);                                    \
		suite_add_tcase((suite_), tc_);                                \
	} while (0)
