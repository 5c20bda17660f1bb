/* settings: the one table of settings (settings-table.c), a row per setting,
 * from which the environment, the file, the launcher's options, --help, the
 * examples and the man pages come. Thread safety: the table is constant. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct cumemcap_policy; /* config/policy.h */

/* Where a setting may be given. */
enum cumemcap_scope {
	CUMEMCAP_IN_ENV = 1,     /* as an environment variable */
	CUMEMCAP_IN_GLOBAL = 2,  /* before the first section of the file */
	CUMEMCAP_IN_PROGRAM = 4, /* in a [program GLOB] section */
	CUMEMCAP_IN_DEVICE = 8,  /* in a [device SELECTOR] section */
};

#define CUMEMCAP_VARIABLE_MAX 32
#define CUMEMCAP_KEY_MAX 24

struct cumemcap_setting {
	char variable[CUMEMCAP_VARIABLE_MAX]; /* CUMEMCAP_LIMIT */
	char key[CUMEMCAP_KEY_MAX];           /* limit; the launcher's option: --limit */
	unsigned scope;                       /* enum cumemcap_scope bits */
	/* Sets its setting's fields, or writes why the value is wrong (to follow
	 * `NAME="VALUE"`) and returns false, leaving the other settings alone. */
	bool (*parse)(struct cumemcap_policy *p, const char *value, char *why, size_t len);
	bool rules;     /* a limit rule: parse appends to the policy's rules */
	size_t src_off; /* its struct cumemcap_source in the policy; 0: none */
	/* Documentation: plain ASCII sentences without line breaks. */
	const char *arg;           /* the option's argument in --help: SIZE */
	const char *summary;       /* one line after the option in --help */
	const char *doc;           /* what the setting does and what it accepts */
	const char *default_text;  /* the default, in words ("none (no limit)") */
	const char *default_value; /* the default as a value the parser takes; NULL when none can be written */
	const char *example;       /* a value for the example files when default_value is NULL */
};

#define CUMEMCAP_SETTINGS_MAX 32

extern const struct cumemcap_setting cumemcap_settings[];
extern const size_t cumemcap_setting_count;

/* For a CUMEMCAP_ entry "NAME=VALUE" cumemcap does not read, the line "unknown
 * variable CUMEMCAP_LIMITS, ignored (did you mean CUMEMCAP_LIMIT?)"; false
 * for any other, and one the launcher named (CUMEMCAP_NAMED_UNKNOWN). */
bool cumemcap_variable_unknown_line(const char *entry, char *line, size_t len);
