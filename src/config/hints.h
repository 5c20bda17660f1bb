/* hints: the framework settings cumemcap suggests in the environment
 * (framework_hints), and the rules for when it does.
 *
 * A hint is set only when all of these hold: framework_hints is on, growth
 * is ondemand, and a limit applies to the process (a per-process limit
 * rule, or a group, whose budget may come from its shared state): with no
 * limit, a run is observe-only and changes nothing. A hint is never set
 * over a user's choice: when any memory variable of that framework is in
 * the environment (TF_FORCE_GPU_ALLOW_GROWTH, TF_GPU_ALLOCATOR, ... for
 * TensorFlow; XLA_PYTHON_CLIENT_PREALLOCATE, XLA_PYTHON_CLIENT_MEM_FRACTION,
 * XLA_CLIENT_MEM_FRACTION, XLA_PYTHON_CLIENT_ALLOCATOR, ... for JAX), the
 * framework is left alone and the plan says which variable made it so.
 * Nothing is suggested to PyTorch or CuPy (docs/frameworks.md).
 *
 * Thread safety: cumemcap_hints_plan is reentrant. cumemcap_hints_apply
 * runs once, in the library constructor; what it did is published with a
 * release store, and cumemcap_hints_applied reads it with an acquire load
 * (NULL before), so any thread may read it. */
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

/* "apply", "off", "no_limit", "preallocate": the state's name in JSON
 * (--print-config --json, the log's start record). */
const char *cumemcap_hints_state_name(enum cumemcap_hints_state s);

/* "no limit applies (observe only)", ... for a state other than APPLY. */
const char *cumemcap_hints_state_text(enum cumemcap_hints_state s);

/* The library constructor: plan with getenv, setenv what the plan sets,
 * and keep the plan for the log. */
void cumemcap_hints_apply(const struct cumemcap_policy *p);

/* What cumemcap_hints_apply did, or NULL before it ran. */
const struct cumemcap_hints *cumemcap_hints_applied(void);
