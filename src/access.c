/*
 * access — the mount's owner and share group (access.h).
 */
#include "access.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static uid_t owner;
static gid_t share = SBX_NO_GROUP;
static bool set;
static bool fs_shared;

void sbx_access_share_fs(bool on)
{
	fs_shared = on;
}

bool sbx_access_fs_shared(void)
{
	return fs_shared;
}

mode_t sbx_access_dir_mode(mode_t mode)
{
	return fs_shared ? mode | S_IXGRP | S_IXOTH : mode;
}

void sbx_access_set(uid_t uid, gid_t group)
{
	owner = uid;
	share = group;
	set = true;
}

bool sbx_access_allows(uid_t uid, gid_t gid, const gid_t *groups, int ngroups)
{
	if (!set || uid == 0 || uid == owner)
		return true;
	if (share == SBX_NO_GROUP)
		return false;
	if (gid == share)
		return true;
	for (int i = 0; i < ngroups; i++)
		if (groups[i] == share)
			return true;
	return false;
}

bool sbx_access_allows_uid(uid_t uid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	gid_t groups[256];
	int n = 256;
	if (sbx_access_allows(uid, (gid_t)-1, NULL, 0))
		return true;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) || !res)
		return false;
	if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) < 0)
		n = 256; /* more than fit: the first 256 */
	return sbx_access_allows(uid, pw.pw_gid, groups, n);
}

mode_t sbx_access_mode(mode_t mode)
{
	mode_t own = mode & S_IRWXU;
	return (mode & ~(mode_t)07777) | own | (share != SBX_NO_GROUP ? own >> 3 : 0);
}

gid_t sbx_access_gid(void)
{
	return share != SBX_NO_GROUP ? share : getgid();
}

int sbx_access_group(const char *name, gid_t *out)
{
	struct group *g = getgrnam(name);
	char *end;
	if (g) {
		*out = g->gr_gid;
		return 0;
	}
	unsigned long v = strtoul(name, &end, 10);
	if (*name && !*end && v < (gid_t)-1) {
		*out = (gid_t)v;
		return 0;
	}
	return -ENOENT;
}
