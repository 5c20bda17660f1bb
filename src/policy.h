/* policy: the rules of this process, built once from the environment.
 *
 * Owns the table of CUMEMCAP_* variables (name, parser, meaning) and the
 * immutable struct cumemcap_policy the other layers read. Built in the
 * library constructor (or by the first hook, whichever comes first) and
 * never changed afterwards, so readers need no lock. A value that cannot be
 * honoured exactly is an error, never a warning: the process must not run
 * with a limit other than the one its user meant. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "parse.h"

enum cumemcap_log_target {
	CUMEMCAP_LOG_OFF = 0,
	CUMEMCAP_LOG_STDERR,
};

struct cumemcap_policy {
	struct cumemcap_amount limit;         /* CUMEMCAP_LIMIT */
	struct cumemcap_device_rules devices; /* CUMEMCAP_DEVICE_LIMITS */
	enum cumemcap_log_target log;         /* CUMEMCAP_LOG */
	bool debug_doors;                     /* CUMEMCAP_DEBUG=doors */
};

/* Where a variable's value comes from; getenv in the library, a table in
 * the unit tests. */
typedef const char *(*cumemcap_getenv_fn)(const char *name);

/* Build a policy. On error returns false and writes one line into err:
 * the variable, its value and what is accepted. */
bool cumemcap_policy_build(struct cumemcap_policy *out, cumemcap_getenv_fn get, char *err,
			   size_t errlen);

/* The process's policy; built on first use. A bad environment ends the
 * process with the message (see msg.h). */
const struct cumemcap_policy *cumemcap_policy(void);
