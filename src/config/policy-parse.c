/* policy-parse: the parsers of the process-wide settings, one per row of
 * the settings table (settings-table.c); the group's are policy-group.c's.
 * Also the check of a value's form that comes before any parser, and the
 * values' forms in messages.
 *
 * Each sets every field of its setting and returns true, or writes why the
 * value is wrong (a sentence to put after `NAME="VALUE"`) and returns
 * false, leaving the other settings alone. Thread safety: reentrant, no
 * globals: each call touches only the caller's policy and buffers. */
#include "config.h"
#include "platform/msg.h"
#include "config/settings.h"

#include <stdio.h>
#include <string.h>

#include "config/cfgfile.h"
#include "config/parse.h"
#include "config/policy.h"

bool cumemcap_policy_parse_limit(struct cumemcap_policy *p, int source, const char *value, char *why, size_t len)
{
	if (cumemcap_parse_amount(value, &p->limits[source].limit))
		return true;
	snprintf(why, len, " is not a valid limit; accepted: %s", cumemcap_amount_forms);
	return false;
}

bool cumemcap_policy_parse_devices(struct cumemcap_policy *p, int source, const char *value, char *why, size_t len)
{
	char reason[512];
	if (cumemcap_parse_device_rules(value, &p->devices[source], reason, sizeof(reason)))
		return true;
	snprintf(why, len, ": %s", reason);
	return false;
}

bool cumemcap_policy_parse_growth(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (strcmp(value, "ondemand") == 0) {
		p->growth = CUMEMCAP_GROWTH_ONDEMAND;
		p->prealloc = (struct cumemcap_amount){ .kind = CUMEMCAP_AMOUNT_NONE };
		return true;
	}
	if (strcmp(value, "preallocate") == 0) {
		p->growth = CUMEMCAP_GROWTH_PREALLOCATE;
		p->prealloc = (struct cumemcap_amount){ .kind = CUMEMCAP_AMOUNT_NONE };
		return true;
	}
	if (strncmp(value, "preallocate:", 12) == 0) {
		if (!cumemcap_parse_amount(value + 12, &p->prealloc)) {
			snprintf(why, len, ": the size after \"preallocate:\" is not valid; accepted: %s",
				 cumemcap_amount_forms);
			return false;
		}
		p->growth = CUMEMCAP_GROWTH_PREALLOCATE;
		return true;
	}
	snprintf(why, len,
		 " is not supported; accepted: ondemand, preallocate (the whole limit), preallocate:SIZE");
	return false;
}

bool cumemcap_policy_parse_count(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (strcmp(value, "footprint") == 0 || strcmp(value, "allocations") == 0) {
		p->count = value[0] == 'f' ? CUMEMCAP_COUNT_FOOTPRINT : CUMEMCAP_COUNT_ALLOCATIONS;
		return true;
	}
	snprintf(why, len,
		 " is not supported; accepted: footprint (allocations and the driver's overhead), allocations");
	return false;
}

const char *cumemcap_policy_count_name(enum cumemcap_count c)
{
	return c == CUMEMCAP_COUNT_ALLOCATIONS ? "allocations" : "footprint";
}

bool cumemcap_policy_parse_estimate(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	struct cumemcap_amount a;
	if (strcmp(value, "0") == 0) {
		p->overhead_estimate = 0;
		return true;
	}
	if (cumemcap_parse_amount(value, &a) && a.kind == CUMEMCAP_AMOUNT_BYTES) {
		p->overhead_estimate = a.bytes;
		return true;
	}
	snprintf(why, len, " is not a valid size; accepted: 0, or a size per context such as 512MiB (no %%)");
	return false;
}

bool cumemcap_policy_parse_pool(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	static const char *const names[] = { "auto", "on", "nopack", "off" };
	for (int i = 0; i < 4; i++) {
		if (strcmp(value, names[i]) == 0) {
			p->pool = (enum cumemcap_pool_mode)i;
			return true;
		}
	}
	snprintf(why, len, " is not supported; accepted: auto (pooled where a limit or a group applies), on, nopack (no shared segments), off");
	return false;
}

const char *cumemcap_policy_pool_name(enum cumemcap_pool_mode m)
{
	return m == CUMEMCAP_POOL_OFF ? "off" : m == CUMEMCAP_POOL_NOPACK ? "nopack" : m == CUMEMCAP_POOL_ON ? "on" : "auto";
}

bool cumemcap_policy_parse_release(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (strcmp(value, "never") == 0 || strcmp(value, "immediate") == 0) {
		p->release = value[0] == 'n' ? CUMEMCAP_RELEASE_NEVER : CUMEMCAP_RELEASE_IMMEDIATE;
		p->release_idle_ms = 0;
		return true;
	}
	if (strncmp(value, "idle:", 5) == 0 &&
	    cumemcap_parse_seconds(value + 5, 1, 86400000u, &p->release_idle_ms)) {
		p->release = CUMEMCAP_RELEASE_IDLE;
		return true;
	}
	snprintf(why, len,
		 " is not supported; accepted: never, immediate, idle:SECONDS (0.001 to 86400, e.g. idle:30)");
	return false;
}

/* A switch: `word` or "off", which *on says; nothing is written otherwise. */
static bool parse_switch(const char *value, const char *word, bool *on, char *why, size_t len)
{
	if (strcmp(value, word) == 0 || strcmp(value, "off") == 0) {
		*on = strcmp(value, word) == 0;
		return true;
	}
	snprintf(why, len, " is not supported; accepted: %s, off", word);
	return false;
}

/* A path template into dst (size bytes); nothing is written when it is not
 * one, and why ends with what else `accepted` names. */
static bool parse_path(const char *value, char *dst, size_t size, const char *accepted, char *why,
		       size_t len)
{
	if (!cumemcap_parse_template(value, size, why, len)) {
		size_t n = strlen(why);
		snprintf(why + n, len - n, "; accepted: %s", accepted);
		return false;
	}
	cumemcap_copy(dst, size, value);
	return true;
}

bool cumemcap_policy_parse_hints(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	bool on;
	if (!parse_switch(value, "on", &on, why, len))
		return false;
	p->framework_hints = on;
	return true;
}

bool cumemcap_policy_parse_log(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (strcmp(value, "stderr") == 0 || strcmp(value, "off") == 0) {
		p->log = value[0] == 's' ? CUMEMCAP_LOG_STDERR : CUMEMCAP_LOG_OFF;
		p->log_path[0] = '\0';
		return true;
	}
	if (!parse_path(value, p->log_path, sizeof(p->log_path), "stderr, off, or a path template", why, len))
		return false;
	p->log = CUMEMCAP_LOG_FILE;
	return true;
}

bool cumemcap_policy_parse_interval(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (cumemcap_parse_seconds(value, 100, 86400000u, &p->log_interval_ms))
		return true;
	snprintf(why, len, " is not supported; accepted: seconds from 0.1 to 86400 (e.g. 5, 0.5)");
	return false;
}

bool cumemcap_policy_parse_metrics(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	if (strcmp(value, "off") == 0) {
		p->metrics_path[0] = '\0';
		return true;
	}
	return parse_path(value, p->metrics_path, sizeof(p->metrics_path), "off, or a path template", why, len);
}

bool cumemcap_policy_parse_debug(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	return parse_switch(value, "doors", &p->debug_doors, why, len);
}

/* A value whose form no setting takes: wrapped in quotes ("2GiB", '2GiB':
 * the quotes reached cumemcap as part of the value), or holding a '#'
 * (log = off#x would otherwise be a path named off#x: a comment starts
 * only at a '#' after a blank). One line saying so, naming the setting. */
__attribute__((noinline, cold)) bool cumemcap_policy_bad_form(const char *name, const char *sep, const char *value,
							      bool in_file, char *err, size_t errlen)
{
	char q[256];
	size_t n = strlen(value);
	if (n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n - 1] == value[0]) {
		char inner[256];
		snprintf(inner, sizeof(inner), "%.*s", (int)(n - 2), value + 1);
		snprintf(err, errlen, "%s%s%c%s%c: quotes are not part of the syntax; accepted without them: %s%s%s", name, sep,
			 value[0], cumemcap_config_quote(q, sizeof(q), inner), value[0], name, sep, q);
		return false;
	}
	snprintf(err, errlen, "%s%s\"%s\": a value cannot contain '#'; accepted: a value without one%s", name, sep,
		 cumemcap_config_quote(q, sizeof(q), value), in_file ? " (for a comment, put a blank before the '#')" : "");
	return false;
}

bool cumemcap_policy_plain_form(const char *value)
{
	size_t n = 0;
	for (; value[n]; n++)
		if (value[n] == '#')
			return false;
	return !(n >= 2 && (value[0] == '"' || value[0] == '\'') && value[n - 1] == value[0]);
}

void cumemcap_policy_format_growth(const struct cumemcap_policy *p, char *buf, size_t len)
{
	if (p->growth == CUMEMCAP_GROWTH_ONDEMAND)
		snprintf(buf, len, "ondemand");
	else if (p->prealloc.kind == CUMEMCAP_AMOUNT_BYTES)
		snprintf(buf, len, "preallocate:%llu", (unsigned long long)p->prealloc.bytes);
	else if (p->prealloc.kind == CUMEMCAP_AMOUNT_PERCENT)
		snprintf(buf, len, "preallocate:%u.%03u%%", p->prealloc.permille / 1000,
			 p->prealloc.permille % 1000);
	else
		snprintf(buf, len, "preallocate");
}

void cumemcap_policy_format_release(const struct cumemcap_policy *p, char *buf, size_t len)
{
	if (p->release == CUMEMCAP_RELEASE_NEVER)
		snprintf(buf, len, "never");
	else if (p->release == CUMEMCAP_RELEASE_IMMEDIATE)
		snprintf(buf, len, "immediate");
	else
		snprintf(buf, len, "idle:%u.%03u", p->release_idle_ms / 1000, p->release_idle_ms % 1000);
}
