/* fuzz-logpath: the log and metrics path templates (CUMEMCAP_LOG,
 * CUMEMCAP_METRICS): their check (src/config/parse.c), the settings built on it
 * (src/config/policy.c) and their expansion (src/log/file.c), under libFuzzer or
 * fuzz-replay.
 *
 * The input up to its first NUL byte is the template. What must hold,
 * whatever the bytes (a violation is __builtin_trap()):
 *   - the check and the setting agree: CUMEMCAP_LOG and CUMEMCAP_METRICS
 *     accept exactly the templates cumemcap_parse_template accepts in the
 *     form every value must have (cumemcap_policy_plain_form: no '#', not
 *     wrapped in quotes), and "stderr"/"off", and keep them unchanged;
 *   - a refusal is one line (no '\n') naming the variable, the value quoted
 *     (in its own quotes when it came wrapped in them), and what is
 *     accepted;
 *   - an accepted template expands, in a buffer of exactly its size, to a
 *     terminated path with exactly as many '/' as the template (a host or
 *     program name never adds a directory level), or reports that it does
 *     not fit; a buffer of any smaller size is never overrun. */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log/file.h"
#include "config/parse.h"
#include "config/policy.h"

#define CHECK(cond)                       \
	do {                              \
		if (!(cond))              \
			__builtin_trap(); \
	} while (0)

static const char *variable, *value;

static const char *one_var(const char *name)
{
	return strcmp(name, variable) == 0 ? value : NULL;
}

static size_t slashes(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '/';
	return n;
}

/* Expand into a malloc'd buffer of exactly `cap` bytes (ASan sees an
 * overrun), pre-filled so a missing terminator shows. */
static void check_expand(const char *tmpl, size_t cap)
{
	char *buf = malloc(cap);
	CHECK(buf);
	memset(buf, 0x5a, cap);
	bool ok = log_expand(tmpl, buf, cap);
	CHECK(memchr(buf, '\0', cap) != NULL);
	if (ok) {
		/* %% and the names may shrink or grow it; the levels never change. */
		CHECK(slashes(buf) == slashes(tmpl));
		CHECK(strlen(buf) < cap);
	}
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *tmpl = malloc(size + 1);
	struct cumemcap_policy *p = malloc(sizeof(*p));
	char err[2048], why[512];
	CHECK(tmpl && p);
	memcpy(tmpl, data, size);
	tmpl[size] = '\0';

	bool valid = cumemcap_parse_template(tmpl, CUMEMCAP_PATH_MAX, why, sizeof(why));
	if (!valid)
		CHECK(why[0] == ' ' && strchr(why, '\n') == NULL);
	bool plain = cumemcap_policy_plain_form(tmpl);

	static const char *const vars[] = { "CUMEMCAP_LOG", "CUMEMCAP_METRICS" };
	for (int v = 0; v < 2; v++) {
		bool keyword = strcmp(tmpl, "off") == 0 || (v == 0 && strcmp(tmpl, "stderr") == 0);
		variable = vars[v];
		value = tmpl;
		memset(err, 0x5a, sizeof(err));
		bool ok = cumemcap_policy_build(p, one_var, "", "", 0, "train.py", err, sizeof(err));
		CHECK(ok == (plain && (valid || keyword)));
		if (!ok) {
			CHECK(memchr(err, '\0', sizeof(err)) != NULL);
			CHECK(strchr(err, '\n') == NULL);
			CHECK(strncmp(err, variable, strlen(variable)) == 0);
			char q = err[strlen(variable) + 1];
			CHECK(err[strlen(variable)] == '=' && (q == '"' || (!plain && q == tmpl[0])));
			CHECK(strstr(err, "accepted") != NULL);
		} else if (!keyword) {
			CHECK(strcmp(v == 0 ? p->log_path : p->metrics_path, tmpl) == 0);
			CHECK(v != 0 || p->log == CUMEMCAP_LOG_FILE);
		}
	}

	if (valid) { /* the expansion does not depend on the form */
		check_expand(tmpl, CUMEMCAP_PATH_MAX);
		check_expand(tmpl, 1 + size % 64);
		check_expand(tmpl, 1);
	}
	free(p);
	free(tmpl);
	return 0;
}
