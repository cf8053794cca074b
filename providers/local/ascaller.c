/*
 * ascaller — runs the local provider's tree-changing file slots as the
 * process that asked for them through fs/, so the lease's root answers
 * exactly as it would answer that process directly: new files, dirs,
 * nodes and links belong to the caller's uid (and gid, or the directory's
 * under a setgid directory), the caller's umask alone masks a new mode,
 * chown/chmod/utimes/unlink in sticky directories get the kernel's own
 * permission checks, and device nodes need the caller's CAP_MKNOD.
 *
 * How: for the duration of one slot, the serving thread takes the
 * caller's fsuid, fsgid and supplementary groups (the raw syscalls are
 * per thread; glibc's setgroups() would change every thread) and its
 * umask (each serving thread has its own fs_struct, unshare(CLONE_FS),
 * so a umask is per thread too), then takes the daemon's back. The
 * caller comes from base/caller.h (fuse_ops.c records it per request);
 * with none (a run, a timer), or for a caller who is the daemon, the slot
 * runs unchanged. Reads (stat, list, read, readlink) stay the daemon's:
 * they change nothing, and the kernel checks access to what it shows.
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ascaller.h"
#include "base/caller.h"
#include "base/log.h"
#include "files.h"

#define MAX_GROUPS 1024

/* The daemon's own supplementary groups, restored after each slot. */
static gid_t daemon_groups[MAX_GROUPS];
static int n_daemon_groups;
static pthread_once_t daemon_once = PTHREAD_ONCE_INIT;

static void read_daemon_groups(void)
{
	int n = getgroups(MAX_GROUPS, daemon_groups);
	n_daemon_groups = n < 0 ? 0 : n;
}

/* 1 once this thread has its own umask, -1 if it cannot have one. */
static _Thread_local int own_fs;

struct as {
	bool creds;
	bool mask;
	mode_t umask;
};

static void as_caller(struct as *a)
{
	const struct sbx_caller *c = sbx_caller_get();
	a->creds = a->mask = false;
	if (!c)
		return;
	if (!own_fs) {
		own_fs = unshare(CLONE_FS) == 0 ? 1 : -1;
		if (own_fs < 0)
			sbx_log(SBX_LOG_WARN, "unshare(CLONE_FS): %m; new modes masked twice");
	}
	if (own_fs > 0) {
		a->umask = umask(c->umask & 0777);
		a->mask = true;
	}
	if (c->uid == geteuid() && c->gid == getegid())
		return;
	gid_t groups[MAX_GROUPS];
	int n = sbx_caller_groups(c, groups, MAX_GROUPS);
	pthread_once(&daemon_once, read_daemon_groups);
	/* A caller gone already, or with too many groups: its primary group only. */
	syscall(SYS_setgroups, n < 0 ? 0 : n, groups);
	syscall(SYS_setfsgid, c->gid);
	syscall(SYS_setfsuid, c->uid);
	a->creds = true;
}

static void as_daemon(struct as *a)
{
	int e = errno;
	if (a->creds) {
		syscall(SYS_setfsuid, geteuid());
		syscall(SYS_setfsgid, getegid());
		syscall(SYS_setgroups, n_daemon_groups, daemon_groups);
	}
	if (a->mask)
		umask(a->umask);
	errno = e;
}

/* One wrapper per slot: the same call between as_caller and as_daemon. */
#define AS_CALLER(name, fn, params, args)                                                          \
	int name params                                                                            \
	{                                                                                          \
		struct as a;                                                                       \
		as_caller(&a);                                                                     \
		int rc = fn args;                                                                  \
		as_daemon(&a);                                                                     \
		return rc;                                                                         \
	}

AS_CALLER(lcl_c_truncate, lcl_f_truncate,
	  (struct sbx_instance * inst, const char *path, off_t size, struct sbx_error *err),
	  (inst, path, size, err))
AS_CALLER(lcl_c_mkdir, lcl_f_mkdir,
	  (struct sbx_instance * inst, const char *path, mode_t mode, struct sbx_error *err),
	  (inst, path, mode, err))
AS_CALLER(lcl_c_unlink, lcl_f_unlink,
	  (struct sbx_instance * inst, const char *path, struct sbx_error *err), (inst, path, err))
AS_CALLER(lcl_c_rmdir, lcl_f_rmdir,
	  (struct sbx_instance * inst, const char *path, struct sbx_error *err), (inst, path, err))
AS_CALLER(lcl_c_rename, lcl_f_rename,
	  (struct sbx_instance * inst, const char *from, const char *to, unsigned flags,
	   struct sbx_error *err),
	  (inst, from, to, flags, err))
static int as_caller_chmod(struct sbx_instance *inst, const char *path, mode_t mode,
			   struct sbx_error *err);
AS_CALLER(as_caller_chmod, lcl_f_chmod,
	  (struct sbx_instance * inst, const char *path, mode_t mode, struct sbx_error *err),
	  (inst, path, mode, err))

/*
 * A write by someone other than the owner makes the FUSE kernel clear the
 * file's set-user-ID and set-group-ID bits itself, by a chmod in the
 * writer's name, which the lease root refuses (only the owner may chmod).
 * Such a chmod — EPERM as the caller, a regular file, nothing changed but
 * set-ID bits removed — is done as the daemon. With default_permissions
 * the kernel refuses every other chmod by a non-owner before it comes
 * here, so only these arrive; without it, a non-owner may thus remove
 * set-ID bits (and nothing else).
 */
int lcl_c_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	struct sbx_stat st;
	int rc = as_caller_chmod(inst, path, mode, err);
	const mode_t setid = S_ISUID | S_ISGID;
	if (rc == -EPERM && sbx_caller_get() && lcl_f_stat(inst, path, &st, err) == 0 &&
	    S_ISREG(st.mode) && (st.mode & setid) && !(mode & ~st.mode & 07777) &&
	    (mode & 07777) == (st.mode & 07777 & ~setid))
		rc = lcl_f_chmod(inst, path, mode, err);
	return rc;
}
AS_CALLER(lcl_c_chown, lcl_f_chown,
	  (struct sbx_instance * inst, const char *path, uid_t uid, gid_t gid,
	   struct sbx_error *err),
	  (inst, path, uid, gid, err))
AS_CALLER(lcl_c_utimens, lcl_f_utimens,
	  (struct sbx_instance * inst, const char *path, const struct timespec ts[2],
	   struct sbx_error *err),
	  (inst, path, ts, err))
AS_CALLER(lcl_c_symlink, lcl_f_symlink,
	  (struct sbx_instance * inst, const char *target, const char *path, struct sbx_error *err),
	  (inst, target, path, err))
AS_CALLER(lcl_c_link, lcl_f_link,
	  (struct sbx_instance * inst, const char *from, const char *to, struct sbx_error *err),
	  (inst, from, to, err))
AS_CALLER(lcl_c_mknod, lcl_f_mknod,
	  (struct sbx_instance * inst, const char *path, mode_t mode, dev_t dev,
	   struct sbx_error *err),
	  (inst, path, mode, dev, err))

/*
 * Extended attributes: set and removed as the caller, read as the daemon
 * (as every read). The kernel checks the root-only namespaces against the
 * caller before FUSE sees the call (trusted.* and security.capability need
 * its CAP_SYS_ADMIN and CAP_SETFCAP, which the daemon keeps under any
 * fsuid), but hands a list on as the daemon made it: a caller other than
 * root does not see trusted.* names, as on a local disk.
 */
ssize_t lcl_c_xattr(struct sbx_instance *inst, const char *path, const struct sbx_xattr_req *rq,
		    struct sbx_error *err)
{
	const struct sbx_caller *c = sbx_caller_get();
	struct as a = {0};
	bool changes = rq->op == SBX_XATTR_SET || rq->op == SBX_XATTR_REMOVE;
	ssize_t n, kept = 0;
	if (changes)
		as_caller(&a);
	n = lcl_f_xattr(inst, path, rq, err);
	if (changes)
		as_daemon(&a);
	if (rq->op != SBX_XATTR_LIST || n <= 0 || !rq->size || !c || c->uid == 0)
		return n;
	for (ssize_t i = 0; i < n;) {
		size_t len = strnlen(rq->buf + i, (size_t)(n - i)) + 1;
		if (strncmp(rq->buf + i, "trusted.", 8) != 0) {
			memmove(rq->buf + kept, rq->buf + i, len);
			kept += (ssize_t)len;
		}
		i += (ssize_t)len;
	}
	return kept;
}

/* Opens that may create or truncate run as the caller; plain opens as the daemon. */
int lcl_c_open(struct sbx_instance *inst, const char *path, int flags, mode_t mode, uint64_t *fh,
	       struct sbx_error *err)
{
	struct as a = {0};
	bool changes = (flags & (O_CREAT | O_TRUNC)) || (flags & O_ACCMODE) != O_RDONLY;
	if (changes)
		as_caller(&a);
	int rc = lcl_f_open(inst, path, flags, mode, fh, err);
	if (changes)
		as_daemon(&a);
	return rc;
}
