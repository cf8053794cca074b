/*
 * fsmirror — the fs/ tree of a lease: the sandbox's filesystem as POSIX
 * operations. `path` is the path inside the sandbox ("/" is fs/ itself).
 *
 * Two implementations sit behind one table: fs_direct.c for providers with
 * SBX_CAP_DIRECT_IO (local: straight to the provider's file handles, no
 * cache), and fs_cached.c for remote providers (attribute and listing
 * cache, whole-file content cache with upload on flush/fsync), chosen by
 * sbx_fs_ops_for(); fsmirror.c holds what is common to both (invalidation,
 * pseudo paths, the answer-or-fault rule). This layer
 * resumes paused sandboxes through sbx_lease_use(), records every failure
 * in the lease's `error` file, and knows nothing of FUSE.
 */
#ifndef SBX_FSMIRROR_H
#define SBX_FSMIRROR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "lease.h"

/* One open file of fs/ (fi->fh points at it). */
struct sbx_fs_file {
	struct sbx_lease *lease; /* holds a reference */
	char *path;
	int flags;   /* open(2) flags */
	uint64_t fh; /* direct: the provider's handle */
	void *priv;  /* cached: the cache entry */
};

/* Fills one directory entry; st may be NULL. Returns non-zero to stop. */
typedef int (*sbx_fs_fill_fn)(void *ctx, const char *name, const struct stat *st);

struct sbx_fs_ops {
	int (*getattr)(struct sbx_lease *l, const char *path, struct sbx_fs_file *f,
		       struct stat *st, struct sbx_error *err);
	int (*readdir)(struct sbx_lease *l, const char *path, sbx_fs_fill_fn fill, void *ctx,
		       struct sbx_error *err);
	/* Opens (and with O_CREAT creates) path; *out on success. */
	int (*open)(struct sbx_lease *l, const char *path, int flags, mode_t mode,
		    struct sbx_fs_file **out, struct sbx_error *err);
	ssize_t (*read)(struct sbx_fs_file *f, char *buf, size_t size, off_t off,
			struct sbx_error *err);
	ssize_t (*write)(struct sbx_fs_file *f, const char *buf, size_t size, off_t off,
			 struct sbx_error *err);
	/* Uploads pending data (cached); the data stays cached on failure. */
	int (*flush)(struct sbx_fs_file *f, struct sbx_error *err);
	int (*fsync)(struct sbx_fs_file *f, int datasync, struct sbx_error *err);
	void (*release)(struct sbx_fs_file *f);
	/* fallocate(2) on an open file: its mode as the kernel passes it (KEEP_SIZE,
	 * PUNCH_HOLE, ZERO_RANGE); EOPNOTSUPP where it cannot. */
	int (*fallocate)(struct sbx_fs_file *f, int mode, off_t off, off_t len,
			 struct sbx_error *err);
	/* lseek(2) with SEEK_DATA or SEEK_HOLE (ENXIO: none at or after off); NULL, or
	 * ENOSYS, where the file is to be taken as having no holes. */
	off_t (*seek_data)(struct sbx_fs_file *f, off_t off, int whence, struct sbx_error *err);
	/* f may be NULL (truncate by path). */
	int (*truncate)(struct sbx_lease *l, const char *path, struct sbx_fs_file *f, off_t size,
			struct sbx_error *err);
	int (*mkdir)(struct sbx_lease *l, const char *path, mode_t mode, struct sbx_error *err);
	int (*unlink)(struct sbx_lease *l, const char *path, struct sbx_error *err);
	int (*rmdir)(struct sbx_lease *l, const char *path, struct sbx_error *err);
	int (*rename)(struct sbx_lease *l, const char *from, const char *to, unsigned flags,
		      struct sbx_error *err);
	int (*chmod)(struct sbx_lease *l, const char *path, mode_t mode, struct sbx_error *err);
	int (*chown)(struct sbx_lease *l, const char *path, uid_t uid, gid_t gid,
		     struct sbx_error *err);
	int (*utimens)(struct sbx_lease *l, const char *path, const struct timespec ts[2],
		       struct sbx_error *err);
	int (*symlink)(struct sbx_lease *l, const char *target, const char *path,
		       struct sbx_error *err);
	int (*readlink)(struct sbx_lease *l, const char *path, char *buf, size_t size,
			struct sbx_error *err);
	int (*link)(struct sbx_lease *l, const char *from, const char *to, struct sbx_error *err);
	int (*mknod)(struct sbx_lease *l, const char *path, mode_t mode, dev_t dev,
		     struct sbx_error *err);
	int (*statfs)(struct sbx_lease *l, const char *path, struct statvfs *st,
		      struct sbx_error *err);
	/* Extended attributes of path itself, as the provider's slot (provider.h); NULL
	 * (ENOTSUP) where none are carried (the remote providers). */
	ssize_t (*xattr)(struct sbx_lease *l, const char *path, const struct sbx_xattr_req *rq,
			 struct sbx_error *err);
};

extern const struct sbx_fs_ops sbx_fs_direct_ops;
extern const struct sbx_fs_ops sbx_fs_cached_ops;

/* The implementation serving lease l. */
static inline const struct sbx_fs_ops *sbx_fs_ops_for(struct sbx_lease *l)
{
	return (l->prov->caps & SBX_CAP_DIRECT_IO) ? &sbx_fs_direct_ops : &sbx_fs_cached_ops;
}
/* After a run: drop what is cached of l's fs/ so the run's writes show. */
void sbx_fs_invalidate(struct sbx_lease *l);
/*
 * The same for a lease whose sandbox is gone, by a caller holding l->lock:
 * the kernel's part on another thread (sbx_kinval_flush_detached says why);
 * the caller waits for it once unlocked (sbx_kinval_wait_detached).
 */
void sbx_fs_invalidate_gone(struct sbx_lease *l);
#define SBX_GONE_INVAL_WAIT_MS 5000L
/* Most paths sbx_fs_before_pause() stats. */
#define SBX_PAUSE_FILL_MAX 32
/* Before a pause (l->lock not held): fetches what a paused lease's cache lacks. */
void sbx_fs_before_pause(struct sbx_lease *l);
/*
 * Uploads l's unsaved files (no locks held). all: every dirty file, those
 * still open included, until deadline_ms (sbx_now_ms() clock) — the
 * daemon's last act. Else the orphans whose retry is due (no handle holds
 * them: a failed background upload, or what a previous daemon left; the
 * back-off doubles with each failure in a row, and a resume makes them all
 * due), stopping at the first failure that is not the file's own (the
 * sandbox unreachable: the rest would wait as long) — the timer's pass.
 * A failure says in `error` where the data is kept. Returns how many stay
 * unsaved.
 */
size_t sbx_fs_save_unsaved(struct sbx_lease *l, bool all, long long deadline_ms);
/*
 * Before a run (sbx_fs_drain): the orphans again whatever their back-off,
 * stopping as the timer's pass does (a run waits for at most one upload
 * that fails for the sandbox's sake), so that a run sees what close()
 * returned for once the cause has passed. Returns 0, or the -errno of a
 * failure that was the sandbox's, not the file's (a 5xx, no connection),
 * with err naming the file: the run then would not see what was written.
 */
int sbx_fs_save_owed(struct sbx_lease *l, struct sbx_error *err);
/*
 * Installs sbx_fs_before_pause and sbx_fs_save_unsaved as the lease
 * module's hooks (sbx_lease_set_hooks); main.c calls it before the mount
 * opens.
 */
void sbx_fs_cached_install(void);
/* Files one sbx_fs_save_unsaved(all) pass takes at most. */
#define SBX_SAVE_UNSAVED_MAX 256
/*
 * False when rc (0 or -errno) answers the question (ENOENT, EEXIST,
 * ENOTEMPTY, ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP, EXDEV): returned, not
 * recorded; true for a fault, which goes to the lease's `error` file.
 */
bool sbx_fs_is_fault(int rc);
/* True for the kernel's pseudo filesystems (/proc, /sys, /dev): fs/ shows them empty. */
int sbx_fs_is_pseudo(const char *path);

#endif
