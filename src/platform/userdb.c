/* userdb: see userdb.h. */
#include "platform/userdb.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST 16384
#define BUF_MAX (1 << 20)

/* Group `name` (NULL: `gid`) into *gr: the buffer to free(), NULL if none. */
static char *group_entry(const char *name, gid_t gid, struct group *gr)
{
	for (size_t len = BUF_FIRST; len <= BUF_MAX; len *= 4) {
		char *buf = malloc(len);
		if (!buf)
			return NULL;
		struct group *found = NULL;
		int err = name ? getgrnam_r(name, gr, buf, len, &found) : getgrgid_r(gid, gr, buf, len, &found);
		if (!err && found)
			return buf;
		free(buf);
		if (err != ERANGE)
			return NULL;
	}
	return NULL;
}

bool cumemcap_userdb_group_gid(const char *name, uint32_t *gid)
{
	struct group gr;
	char *buf = group_entry(name, 0, &gr);
	if (!buf)
		return false;
	*gid = (uint32_t)gr.gr_gid;
	free(buf);
	return true;
}

int cumemcap_userdb_member(uid_t uid, gid_t gid)
{
	char pbuf[BUF_FIRST];
	struct passwd pw, *pwp = NULL;
	if (getpwuid_r(uid, &pw, pbuf, sizeof(pbuf), &pwp) != 0 || !pwp)
		return -1;
	if (pw.pw_gid == gid)
		return 1;
	struct group gr;
	char *buf = group_entry(NULL, gid, &gr);
	if (!buf)
		return -1;
	int member = 0;
	for (char **m = gr.gr_mem; m && *m && !member; m++)
		member = strcmp(*m, pw.pw_name) == 0;
	free(buf);
	return member;
}
