/* policy: see policy.h. */
#include "policy.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

typedef bool (*option_parser)(struct cumemcap_policy *p, const char *name, const char *value,
			      char *err, size_t errlen);

static bool parse_limit(struct cumemcap_policy *p, const char *name, const char *value,
			char *err, size_t errlen)
{
	if (cumemcap_parse_amount(value, &p->limit))
		return true;
	snprintf(err, errlen, "%s=\"%s\" is not a valid limit; accepted: %s", name, value,
		 cumemcap_amount_forms);
	return false;
}

static bool parse_devices(struct cumemcap_policy *p, const char *name, const char *value,
			  char *err, size_t errlen)
{
	char why[512];
	if (cumemcap_parse_device_rules(value, &p->devices, why, sizeof(why)))
		return true;
	snprintf(err, errlen, "%s=\"%s\": %s", name, value, why);
	return false;
}

static bool parse_growth(struct cumemcap_policy *p, const char *name, const char *value,
			 char *err, size_t errlen)
{
	if (strcmp(value, "ondemand") == 0)
		return true;
	snprintf(err, errlen,
		 "%s=\"%s\" is not supported; accepted: ondemand (preallocate is not built yet)",
		 name, value);
	return false;
}

static bool parse_log(struct cumemcap_policy *p, const char *name, const char *value,
		      char *err, size_t errlen)
{
	if (strcmp(value, "stderr") == 0) {
		p->log = CUMEMCAP_LOG_STDERR;
		return true;
	}
	if (strcmp(value, "off") == 0) {
		p->log = CUMEMCAP_LOG_OFF;
		return true;
	}
	snprintf(err, errlen,
		 "%s=\"%s\" is not supported; accepted: stderr, off (log files are not built yet)",
		 name, value);
	return false;
}

static bool parse_debug(struct cumemcap_policy *p, const char *name, const char *value,
			char *err, size_t errlen)
{
	if (strcmp(value, "doors") == 0) {
		p->debug_doors = true;
		return true;
	}
	snprintf(err, errlen, "%s=\"%s\" is not supported; accepted: doors", name, value);
	return false;
}

static bool parse_config(struct cumemcap_policy *p, const char *name, const char *value,
			 char *err, size_t errlen)
{
	/* Refuse rather than ignore: a file the user meant would be silently
	 * different rules. */
	snprintf(err, errlen,
		 "%s=\"%s\": configuration files are not built yet; use the CUMEMCAP_* variables",
		 name, value);
	return false;
}

/* Every variable the shim reads, in the order it reads them. */
static const struct option {
	const char *name;
	option_parser parse;
} options[] = {
	{ "CUMEMCAP_LIMIT", parse_limit },          /* limit for every GPU; default none */
	{ "CUMEMCAP_DEVICE_LIMITS", parse_devices }, /* per-GPU limits; default none */
	{ "CUMEMCAP_GROWTH", parse_growth },        /* ondemand (default) */
	{ "CUMEMCAP_LOG", parse_log },              /* off (default) or stderr */
	{ "CUMEMCAP_DEBUG", parse_debug },          /* doors: trace every door answer */
	{ "CUMEMCAP_CONFIG", parse_config },        /* not built yet: refused */
};

bool cumemcap_policy_build(struct cumemcap_policy *out, cumemcap_getenv_fn get, char *err,
			   size_t errlen)
{
	struct cumemcap_policy p;
	memset(&p, 0, sizeof(p));
	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		const char *value = get(options[i].name);
		if (!value)
			continue;
		if (!options[i].parse(&p, options[i].name, value, err, errlen))
			return false;
	}
	*out = p;
	return true;
}

static struct cumemcap_policy the_policy;
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;

static const char *env_get(const char *name)
{
	return getenv(name);
}

static void policy_init(void)
{
	char err[1024];
	if (!cumemcap_policy_build(&the_policy, env_get, err, sizeof(err)))
		cumemcap_fatal("%s", err);
}

const struct cumemcap_policy *cumemcap_policy(void)
{
	pthread_once(&policy_once, policy_init);
	return &the_policy;
}
