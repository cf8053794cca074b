/*
 * caller — the thread-local record of the current request's caller
 * (caller.h), and its supplementary groups as the kernel reports them in
 * /proc/<tid>/status (FUSE requests carry only uid, gid and umask).
 */
#include "base/caller.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local struct sbx_caller current;
static bool (*uid_check)(uid_t uid);

void sbx_caller_set_uid_check(bool (*fn)(uid_t uid))
{
	uid_check = fn;
}

bool sbx_caller_uid_allowed(uid_t uid)
{
	return !uid_check || uid_check(uid);
}

void sbx_caller_set(const struct sbx_caller *c)
{
	if (c)
		current = *c;
	else
		memset(&current, 0, sizeof(current));
}

const struct sbx_caller *sbx_caller_get(void)
{
	return current.known ? &current : NULL;
}

int sbx_caller_groups(const struct sbx_caller *c, gid_t *list, int max)
{
	char path[64], line[4096];
	int n = -ENOENT;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)c->tid, (int)c->tid);
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(path, sizeof(path), "/proc/%d/status", (int)c->tid);
		if (!(f = fopen(path, "re")))
			return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Groups:", 7))
			continue;
		char *p = line + 7, *end;
		n = 0;
		for (;;) {
			unsigned long g = strtoul(p, &end, 10);
			if (end == p)
				break;
			if (n == max) {
				n = -E2BIG;
				break;
			}
			list[n++] = (gid_t)g;
			p = end;
		}
		break;
	}
	fclose(f);
	return n;
}
