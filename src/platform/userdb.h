/* userdb: the user and group database (NSS: /etc/passwd, /etc/group, or a
 * directory service), asked by the group-access setting and the checks on
 * a book shared by group. A group with many members (video on a large
 * node) does not fit a small buffer: each lookup grows its buffer until
 * the entry fits (up to 1 MiB).
 *
 * Thread safety: the reentrant *_r lookups, buffers of the caller's. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The gid of the group named `name`; false when there is none. */
bool cumemcap_userdb_group_gid(const char *name, uint32_t *gid);

/* Whether user `uid` is a member of group `gid` (its primary group, or in
 * the group's member list): 1 yes, 0 no, -1 the database knows the user
 * or the group not (nobody can tell). */
int cumemcap_userdb_member(uid_t uid, gid_t gid);
