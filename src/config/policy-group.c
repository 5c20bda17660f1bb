/* policy-group: the settings of a group of processes that share one budget
 * per GPU (group, group_limit, group_dir, group_access) and what a request
 * over a limit does (on_limit): their parsers, which the table of settings
 * names. What the group's limit is on one GPU is policy-limit.c's.
 *
 * Thread safety: pure functions on a policy the caller owns
 * while it is being built (see policy.h); no state of their own. */
#include "config/policy.h"
#include "config/settings.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfgfile.h"
#include "platform/userdb.h"

bool cumemcap_policy_parse_group(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	size_t n = strlen(value);
	bool ok = n <= CUMEMCAP_GROUP_NAME_MAX && value[0] != '.' && value[0] != '-';
	for (size_t i = 0; ok && i < n; i++) {
		char c = value[i];
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		     c == '_' || c == '-';
	}
	if (!ok) {
		snprintf(why, len,
			 " is not a group name; accepted: 1 to %d letters, digits, '.', '_' or '-', "
			 "not starting with '.' or '-' (empty: no group)", CUMEMCAP_GROUP_NAME_MAX);
		return false;
	}
	memcpy(p->group, value, n + 1);
	return true;
}

bool cumemcap_policy_parse_group_limit(struct cumemcap_policy *p, int source, const char *value, char *why,
				       size_t len)
{
	struct cumemcap_limits *l = &p->limits[source];
	/* A list names GPUs (SEL=AMOUNT); one amount has no '='. */
	if (strchr(value, '=')) {
		char reason[512];
		if (!cumemcap_parse_device_rules(value, &p->group_rules[source], reason, sizeof(reason))) {
			snprintf(why, len, ": %s", reason);
			return false;
		}
		l->group_limit = (struct cumemcap_amount){ .kind = CUMEMCAP_AMOUNT_NONE };
	} else {
		struct cumemcap_amount a;
		if (!cumemcap_parse_amount(value, &a)) {
			snprintf(why, len,
				 " is not a valid group limit; accepted: one amount for every GPU, %s; "
				 "or per GPU SEL=AMOUNT[,SEL=AMOUNT...] with SEL an ordinal, GPU-<uuid> or PCI bus id",
				 cumemcap_amount_forms);
			return false;
		}
		l->group_limit = a;
		p->group_rules[source].count = 0;
	}
	cumemcap_config_quote(l->group_limit_text, sizeof(l->group_limit_text), value);
	return true;
}

bool cumemcap_policy_parse_group_dir(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	size_t n = strlen(value);
	const char *wrong = NULL;
	if (value[0] != '/')
		wrong = "is not an absolute path";
	else if (n >= CUMEMCAP_PATH_MAX)
		wrong = "is too long";
	for (size_t i = 0; !wrong && i < n; i++)
		if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
			wrong = "contains a control character";
	if (wrong) {
		snprintf(why, len,
			 " %s; accepted: an absolute directory path (starting with '/') of at most %d bytes "
			 "without control characters, such as %s", wrong, CUMEMCAP_PATH_MAX - 1,
			 CUMEMCAP_DEFAULT_GROUP_DIR);
		return false;
	}
	memcpy(p->group_dir, value, n + 1);
	return true;
}

/* The Unix group of gid:GROUP: a name in the group database, or a number. */
static bool group_id(const char *text, uint32_t *out)
{
	if (!text[0])
		return false;
	char *end;
	errno = 0;
	unsigned long v = strtoul(text, &end, 10);
	if (text[0] >= '0' && text[0] <= '9' && !*end && errno == 0 && v < UINT32_MAX) {
		*out = (uint32_t)v;
		return true;
	}
	return cumemcap_userdb_group_gid(text, out);
}

bool cumemcap_policy_parse_group_access(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	static const char accepted[] =
		"accepted: user (the state file is 0600, owned by the caller's uid), gid:GROUP (0660, shared "
		"with the members of the Unix group GROUP, a name or a number, such as gid:render)";
	uint32_t gid;
	if (strcmp(value, "user") == 0) {
		p->group_gid = false;
		p->group_gid_id = 0;
		return true;
	}
	if (strncmp(value, "gid:", 4) == 0 && group_id(value + 4, &gid)) {
		p->group_gid = true;
		p->group_gid_id = gid;
		return true;
	}
	if (strcmp(value, "gid") == 0)
		snprintf(why, len, " names no Unix group (any group of the caller's would let every user of a "
			 "group such as video share the book); %s", accepted);
	else if (strncmp(value, "gid:", 4) == 0)
		snprintf(why, len, " names no Unix group on this system; %s", accepted);
	else
		snprintf(why, len, " is not supported; %s", accepted);
	return false;
}

const char *cumemcap_policy_group_access_name(bool gid)
{
	return gid ? "gid" : "user";
}

bool cumemcap_policy_parse_on_limit(struct cumemcap_policy *p, const char *value, char *why, size_t len)
{
	uint32_t ms;
	if (strcmp(value, "fail") == 0) {
		p->wait_ms = 0;
		return true;
	}
	if (strncmp(value, "wait:", 5) == 0 && cumemcap_parse_seconds(value + 5, 1, CUMEMCAP_MAX_WAIT_MS, &ms)) {
		p->wait_ms = ms;
		return true;
	}
	snprintf(why, len,
		 " is not supported; accepted: fail, wait:SECONDS (0.001 to 86400, e.g. wait:30 or wait:0.5)");
	return false;
}

void cumemcap_policy_format_on_limit(const struct cumemcap_policy *p, char *buf, size_t len)
{
	if (p->wait_ms == 0) {
		snprintf(buf, len, "fail");
		return;
	}
	char frac[8] = "";
	unsigned ms = p->wait_ms % 1000;
	if (ms) {
		snprintf(frac, sizeof(frac), ".%03u", ms);
		size_t n = strlen(frac);
		while (n > 1 && frac[n - 1] == '0')
			frac[--n] = '\0';
	}
	snprintf(buf, len, "wait:%u%s", p->wait_ms / 1000, frac);
}
