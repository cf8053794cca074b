/*
 * pathmax — how long a path under fs/ may be, in the core and in the
 * providers' file slots.
 *
 * Longer than PATH_MAX on purpose: PATH_MAX bounds the path of one system
 * call, not a path reached relative to a deep working directory (`cd
 * a/b/...; mkdir NAME` with NAME of PATH_MAX-1 bytes). The kernel sends
 * such a request name by name, libfuse joins the whole mount path
 * ("/LEASE/fs/..."), and fs/ must accept it as a disk does. Past this,
 * ENAMETOOLONG.
 */
#ifndef SBX_PATHMAX_H
#define SBX_PATHMAX_H

/* A sandbox path with its NUL. */
#define SBX_FS_PATH_MAX 16384
/* A mount path ("/" NAME "/fs" sandbox path) with its NUL: a lease name is at most 64. */
#define SBX_MOUNT_PATH_MAX (SBX_FS_PATH_MAX + 72)

#endif
