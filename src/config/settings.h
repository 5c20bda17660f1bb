/* settings: the one table of settings (settings-table.c), a row per
 * setting. The environment, the file, the launcher's options and --help,
 * the example files and the man pages all come from it. Thread safety:
 * the table is constant; the lookups only read it. */
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
	/* Sets every field of its setting and returns true, or writes why the
	 * value is wrong (a sentence to put after `NAME="VALUE"`) and returns
	 * false, leaving the other settings alone. */
	bool (*parse)(struct cumemcap_policy *p, const char *value, char *why, size_t len);
	bool rules;     /* a limit rule: parse appends to the policy's rules */
	size_t src_off; /* its struct cumemcap_source in the policy; 0: none */
	/* Documentation, one source for --help, the example files and the
	 * man pages. Sentences in plain ASCII, without line breaks. */
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

/* When the environment entry "NAME=VALUE" is a CUMEMCAP_ variable cumemcap
 * does not read (a misspelling, or a setting of a newer cumemcap), the line
 * that names it: "unknown variable CUMEMCAP_LIMITS, ignored (did you mean
 * CUMEMCAP_LIMIT?)". False for any other entry, and for one that
 * CUMEMCAP_NAMED_UNKNOWN (the launcher's, which named them) lists. */
bool cumemcap_variable_unknown_line(const char *entry, char *line, size_t len);
/* "--limit" or "--limit=..." (the part before '='); NULL for none. */
const struct cumemcap_setting *cumemcap_setting_by_flag(const char *flag);
/* The launcher's option of a setting: "--" and the key with '-' for '_'. */
void cumemcap_setting_flag(const struct cumemcap_setting *s, char *buf, size_t len);
