/* userdb: the user and group database (NSS), a group's buffer grown to fit
 * (up to 1 MiB). Thread safety: the reentrant *_r lookups. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The gid of the group named `name`; false when there is none. */
bool cumemcap_userdb_group_gid(const char *name, uint32_t *gid);

/* Whether user `uid` is in group `gid` (primary group or member list):
 * 1 yes, 0 no, -1 the database knows the user or the group not. */
int cumemcap_userdb_member(uid_t uid, gid_t gid);
