/* hints: the framework variables cumemcap sets (framework_hints) when growth
 * is ondemand and a limit applies, never for a framework any of whose memory
 * variables is set (docs/frameworks.md). Thread safety: cumemcap_hints_plan
 * is reentrant; cumemcap_hints_apply runs once, in the library constructor,
 * and publishes its plan with a release store (cumemcap_hints_applied). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "config/policy.h"

enum cumemcap_hints_state {
	CUMEMCAP_HINTS_APPLY = 0, /* hints apply: each entry says set or left */
	CUMEMCAP_HINTS_OFF,       /* framework_hints off */
	CUMEMCAP_HINTS_NO_LIMIT,  /* no limit applies: observe only */
	CUMEMCAP_HINTS_PREALLOC,  /* growth preallocate: the frameworks may take what they like */
};

#define CUMEMCAP_HINTS_MAX 4

struct cumemcap_hint {
	const char *framework; /* "TensorFlow", "JAX" */
	const char *variable;  /* the variable cumemcap sets */
	const char *value;
	const char *user;      /* NULL: set (or would be); else the user's variable that left it */
};

struct cumemcap_hints {
	enum cumemcap_hints_state state;
	size_t count;
	struct cumemcap_hint hint[CUMEMCAP_HINTS_MAX];
};

/* The hints for policy p in the environment `get` reads. */
void cumemcap_hints_plan(const struct cumemcap_policy *p, cumemcap_getenv_fn get, struct cumemcap_hints *out);

/* The state's name in JSON: "apply", "off", "no_limit", "preallocate". */
const char *cumemcap_hints_state_name(enum cumemcap_hints_state s);

/* The library constructor's: plan, set what the plan sets, keep it for the log. */
void cumemcap_hints_apply(const struct cumemcap_policy *p);

/* What cumemcap_hints_apply did, or NULL before it ran. */
const struct cumemcap_hints *cumemcap_hints_applied(void);
