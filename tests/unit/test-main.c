/* test-main: runs every suite that a test file registered with TEST_SUITE().
 *
 * One executable, one SRunner. Suites run in name order so output is stable
 * whatever the link order. Check's own variables pick a subset:
 * CK_RUN_SUITE=parse, CK_RUN_CASE=parse_amount_units; CK_FORK=no runs in
 * process (for gdb).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test-common.h"

static struct cumemcap_test_suite *suites;

void cumemcap_test_register(struct cumemcap_test_suite *suite)
{
	struct cumemcap_test_suite **pos = &suites;

	while (*pos != NULL && strcmp((*pos)->name, suite->name) < 0)
		pos = &(*pos)->next;
	suite->next = *pos;
	*pos = suite;
}

int main(void)
{
	SRunner *sr = NULL;
	int failed;

	if (suites == NULL) {
		fprintf(stderr, "test-unit: no suites registered\n");
		return EXIT_FAILURE;
	}
	for (struct cumemcap_test_suite *t = suites; t != NULL; t = t->next) {
		Suite *s = t->setup();

		if (sr == NULL)
			sr = srunner_create(s);
		else
			srunner_add_suite(sr, s);
	}
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
