/*
 * caller — who asked for the file operation this thread is serving: the
 * uid, gid, umask and thread id of the process behind a FUSE request.
 * fuse_ops.c records it per request (sbx_caller_set) before it calls the
 * fs/ mirror; a provider that can act as the caller (local: fsuid/fsgid,
 * supplementary groups and umask per thread) reads it. Threads that serve
 * no request (runs, timers, flushers) have none and act as the daemon.
 */
#ifndef SBX_CALLER_H
#define SBX_CALLER_H

#include <stdbool.h>
#include <sys/types.h>

struct sbx_caller {
	bool known;
	uid_t uid;
	gid_t gid;
	mode_t umask;
	pid_t tid; /* the requesting thread (its groups are read from /proc) */
};

/* Records the caller of the current request on this thread (NULL: none). */
void sbx_caller_set(const struct sbx_caller *c);
/* The caller recorded on this thread, or NULL. */
const struct sbx_caller *sbx_caller_get(void);
/* Reads the caller's supplementary groups (at most max); count or -errno. */
int sbx_caller_groups(const struct sbx_caller *c, gid_t *list, int max);
/*
 * Whether a host user may use what the mount serves outside FUSE (the
 * local provider's forwarded ports): the rule the core sets (access.h),
 * everyone while none is set.
 */
void sbx_caller_set_uid_check(bool (*fn)(uid_t uid));
bool sbx_caller_uid_allowed(uid_t uid);

#endif
