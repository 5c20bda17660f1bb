/* hints: see hints.h, which says how it is thread-safe. What each framework
 * reads, with sources, is in docs/frameworks.md. */
#include "config.h"
#include "config/hints.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per framework: the variable cumemcap sets, and every variable by which a
 * user says how it should take memory (the set one included). */
static const struct framework {
	const char *name;
	char variable[32], value[8];
	char user[6][48]; /* ends at the first empty one */
} frameworks[] = {
	/* TensorFlow (tensorflow/core/common_runtime/gpu): allow_growth, the
	 * allocator, the async allocator's preallocation, unified memory. */
	{ "TensorFlow", "TF_FORCE_GPU_ALLOW_GROWTH", "true",
	  { "TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "TF_CUDA_MALLOC_ASYNC_SUPPORTED_PREALLOC",
	    "TF_FORCE_UNIFIED_MEMORY" } },
	/* JAX (xla_client.generate_pjrt_gpu_plugin_options): preallocation, its
	 * fraction under both names (never set: JAX raises if both are), the
	 * allocator; XLA_CLIENT_PREALLOCATE too, which a user sets meaning something. */
	{ "JAX", "XLA_PYTHON_CLIENT_PREALLOCATE", "false",
	  { "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
	    "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR" } },
};
#define FRAMEWORK_COUNT (sizeof(frameworks) / sizeof(frameworks[0]))
_Static_assert(FRAMEWORK_COUNT <= CUMEMCAP_HINTS_MAX, "struct cumemcap_hints holds every framework");

void cumemcap_hints_plan(const struct cumemcap_policy *p, cumemcap_getenv_fn get, struct cumemcap_hints *out)
{
	out->count = 0;
	if (!p->framework_hints)
		out->state = CUMEMCAP_HINTS_OFF;
	else if (!cumemcap_policy_any_limit(p))
		out->state = CUMEMCAP_HINTS_NO_LIMIT;
	else if (p->growth != CUMEMCAP_GROWTH_ONDEMAND)
		out->state = CUMEMCAP_HINTS_PREALLOC;
	else
		out->state = CUMEMCAP_HINTS_APPLY;
	if (out->state != CUMEMCAP_HINTS_APPLY)
		return;
	for (size_t i = 0; i < FRAMEWORK_COUNT; i++) {
		const struct framework *f = &frameworks[i];
		struct cumemcap_hint *h = &out->hint[out->count++];
		*h = (struct cumemcap_hint){ f->name, f->variable, f->value, NULL };
		for (size_t u = 0; u < sizeof(f->user) / sizeof(f->user[0]) && f->user[u][0]; u++)
			if (get(f->user[u])) {
				h->user = f->user[u];
				break;
			}
	}
}

const char *cumemcap_hints_state_name(enum cumemcap_hints_state s)
{
	static const char *const names[] = { "apply", "off", "no_limit", "preallocate" };
	return names[s];
}

/* Written before main in a configured process. */
static struct cumemcap_hints applied;
static _Atomic bool applied_ready;

/* "VARIABLE=value" of each hint set, for putenv, which keeps them: setenv's
 * heap copies and printf's code are pages a configured start leaves alone. */
static char hint_strings[CUMEMCAP_HINTS_MAX][sizeof(frameworks[0].variable) +
								  sizeof(frameworks[0].value)];

void cumemcap_hints_apply(const struct cumemcap_policy *p)
{
	cumemcap_hints_plan(p, cumemcap_getenv, &applied);
	for (size_t i = 0; i < applied.count; i++) {
		if (applied.hint[i].user)
			continue;
		/* None of the framework's variables is set: putenv overwrites nothing. */
		char *s = hint_strings[i];
		size_t n = strlen(applied.hint[i].variable);
		memcpy(s, applied.hint[i].variable, n);
		s[n] = '=';
		memcpy(s + n + 1, applied.hint[i].value, strlen(applied.hint[i].value) + 1);
		putenv(s);
	}
	atomic_store_explicit(&applied_ready, true, memory_order_release);
}

const struct cumemcap_hints *cumemcap_hints_applied(void)
{
	return atomic_load_explicit(&applied_ready, memory_order_acquire) ? &applied : NULL;
}
