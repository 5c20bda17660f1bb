/* settings: settings by the launcher's option, and the CUMEMCAP_ variables
 * that are no setting. Thread safety: see settings.h. */
#include "config.h"
#include "config/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/cfgfile.h"

void cumemcap_setting_flag(const struct cumemcap_setting *s, char *buf, size_t len)
{
	if (!len)
		return;
	size_t o = (size_t)snprintf(buf, len, "--");
	for (const char *k = s->key; *k && o + 1 < len; k++)
		buf[o++] = *k == '_' ? '-' : *k;
	buf[o < len ? o : len - 1] = '\0';
}

const struct cumemcap_setting *cumemcap_setting_by_flag(const char *flag)
{
	size_t n = strcspn(flag, "=");
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		char f[64];
		cumemcap_setting_flag(&cumemcap_settings[i], f, sizeof(f));
		if (strlen(f) == n && strncmp(f, flag, n) == 0)
			return &cumemcap_settings[i];
	}
	return NULL;
}

/* The CUMEMCAP_ variables some part of cumemcap reads besides the settings. */
static const char other_variables[][CUMEMCAP_VARIABLE_MAX] = {
	"CUMEMCAP_CONFIG",        /* the configuration file: policy.c, the launcher */
	"CUMEMCAP_NAMED_UNKNOWN", /* the unknown variables the launcher has named */
	"CUMEMCAP_LAUNCHED",      /* the pid the launcher exec'd as: it says where its log went */
	/* the launcher's own programs (scripts/cumemcap.in) */
	"CUMEMCAP_LIBRARY", "CUMEMCAP_TOOL", "CUMEMCAP_REPORT", "CUMEMCAP_GROUP_TOOL",
	/* the node installer (deploy/kubernetes/install-node.sh) */
	"CUMEMCAP_IMAGE_TREE", "CUMEMCAP_NODE_OPT", "CUMEMCAP_NODE_ETC", "CUMEMCAP_CONFIGMAP",
	"CUMEMCAP_SHARED_DIRS", "CUMEMCAP_SHARED_MODE", "CUMEMCAP_SYNC_SECONDS", "CUMEMCAP_CHECK",
	"CUMEMCAP_INSTALL_ONCE",
	/* the project's scripts and tests (scripts/lib/deps.sh, scripts/fresh-check,
	 * tests/bench/overhead.c, tests/integration/users.py, tests/deploy) */
	"CUMEMCAP_DEBS_BUILD", "CUMEMCAP_DEBS_SUITE", "CUMEMCAP_FRESH_NAMESPACE", "CUMEMCAP_SHIM",
	"CUMEMCAP_TEST_USERS_NAMESPACE", "CUMEMCAP_TEST_REQUIRE_PROGRAMS",
};

#define OTHER_VARIABLES (sizeof(other_variables) / sizeof(other_variables[0]))

/* The longest setting's variable that `name` ends in after a '_':
 * CUMEMCAP_GPU_LIMIT -> CUMEMCAP_LIMIT, CUMEMCAP_MAX_GROUP_LIMIT -> CUMEMCAP_GROUP_LIMIT. */
static const char *ending_in(const char *name)
{
	const char *best = NULL;
	size_t n = strlen(name), p = strlen("CUMEMCAP_");
	for (size_t i = 0; i < cumemcap_setting_count; i++) {
		const char *tail = cumemcap_settings[i].variable + p;
		size_t t = strlen(tail);
		if (n > p + t && name[n - t - 1] == '_' && strcmp(name + n - t, tail) == 0 &&
		    (!best || strlen(best) < strlen(cumemcap_settings[i].variable)))
			best = cumemcap_settings[i].variable;
	}
	return best;
}

bool cumemcap_variable_unknown_line(const char *entry, char *line, size_t len)
{
	char name[96], q[128];
	const char *known[CUMEMCAP_SETTINGS_MAX + OTHER_VARIABLES + 1];
	size_t c = 0;
	if (strncmp(entry, "CUMEMCAP_", 9) != 0)
		return false;
	for (size_t i = 0; i < cumemcap_setting_count; i++)
		known[c++] = cumemcap_settings[i].variable;
	for (size_t i = 0; i < OTHER_VARIABLES; i++)
		known[c++] = other_variables[i];
	known[c] = NULL;
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(entry, "="), entry);
	for (size_t i = 0; i < c; i++)
		if (strcmp(name, known[i]) == 0)
			return false;
	const char *said = getenv("CUMEMCAP_NAMED_UNKNOWN");
	for (const char *w = said; w && *w; w += strspn(w, " ")) {
		size_t k = strcspn(w, " ");
		if (k == strlen(name) && strncmp(w, name, k) == 0)
			return false;
		w += k;
	}
	const char *hint = cumemcap_config_suggest(name, known);
	if (!hint)
		hint = ending_in(name);
	cumemcap_config_quote(q, sizeof(q), name);
	if (hint)
		snprintf(line, len, "unknown variable %s, ignored (did you mean %s?)", q, hint);
	else
		snprintf(line, len, "unknown variable %s, ignored (cumemcap --help lists the variables)", q);
	return true;
}
