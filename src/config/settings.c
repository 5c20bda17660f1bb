/* settings: looking settings up in the table (settings-table.c) by key
 * and by the launcher's option; see settings.h.
 * Thread safety: lookups that only read constant data. */
#include "config.h"
#include "config/settings.h"

#include <stdio.h>
#include <string.h>

const struct cumemcap_setting *cumemcap_setting_by_key(const char *key)
{
	for (size_t i = 0; i < cumemcap_setting_count; i++)
		if (strcmp(cumemcap_settings[i].key, key) == 0)
			return &cumemcap_settings[i];
	return NULL;
}

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
