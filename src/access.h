/*
 * access — who may use the mount: the user who mounted it (and root), plus
 * the members of one group when -o share_group=GROUP opens it on purpose.
 * The control files' modes keep the owner's bits only (the group gets the
 * same bits when shared), whatever allow_other says; fuse_ops refuses any
 * other caller with EACCES before touching anything (doc/DESIGN.md,
 * "Threat model").
 */
#ifndef SBX_ACCESS_H
#define SBX_ACCESS_H

#include <stdbool.h>
#include <sys/types.h>

#define SBX_NO_GROUP ((gid_t)-1)

/* Owner and share group (SBX_NO_GROUP: none) of the mount. */
void sbx_access_set(uid_t owner, gid_t group);
/*
 * -o share_fs: every user may reach fs/ (and look up the root and lease
 * directories on the way, which then show o+x), the kernel checking the
 * files' modes (default_permissions comes with allow_other); the control
 * files stay the owner's. Off by default.
 */
void sbx_access_share_fs(bool on);
bool sbx_access_fs_shared(void);
/* A directory node's mode on the way to fs/: x for everyone when fs/ is shared. */
mode_t sbx_access_dir_mode(mode_t mode);
/* Whether a caller (uid, gid, supplementary groups) may use the mount. */
bool sbx_access_allows(uid_t uid, gid_t gid, const gid_t *groups, int ngroups);
/* The same for a user known by uid only (its groups from the user database). */
bool sbx_access_allows_uid(uid_t uid);
/* A control node's mode as shown: owner bits, copied to the group when shared. */
mode_t sbx_access_mode(mode_t mode);
/* The group control nodes show: the share group, else the owner's. */
gid_t sbx_access_gid(void);
/* Looks GROUP (a name or a number) up: 0 or -ENOENT. */
int sbx_access_group(const char *name, gid_t *out);

#endif
