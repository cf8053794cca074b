/*
 * files — the file slots of the local provider, done on the host side on
 * the lease's overlay root (no command per operation).
 *
 * Every path is resolved inside the root (resolve.c: openat2 with
 * RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, or the same walk in user space
 * where openat2 is missing) from the O_PATH descriptor the instance keeps,
 * so ".." and absolute symlinks stop at the lease's "/" and no link in the
 * sandbox can reach a host file. Operations on the last component (lstat,
 * unlink, rename, symlink, chown ...) open the parent that way and use the
 * *at() call on the last name. Handles are plain descriptors (fh = fd).
 * Not here: caching (the core serves SBX_CAP_DIRECT_IO providers uncached).
 */
#include "local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "base/pathmax.h"
#include "files.h"

static int fail(struct sbx_error *err, int e, const char *op, const char *path)
{
	return sbx_error_set(err, e, 0, "%s %s: %s", op, path, strerror(e < 0 ? -e : e));
}

/* openat2 refuses what open(2) ignores: bits FUSE passes along (FMODE_EXEC)
 * are dropped here, S_IFREG in a create's mode by resolve.c. */
#define OPEN_FLAGS                                                                                 \
	(O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC |     \
	 O_SYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_PATH |         \
	 O_TMPFILE)

int lcl_open_in_root(const struct local_inst *li, const char *path, int flags, mode_t mode)
{
	return lcl_resolve_open(li->rootfd, path, flags & OPEN_FLAGS, mode);
}

/*
 * Opens the parent of path (O_PATH) and points *name at the last component
 * (into path). For "/" the parent is the root itself and *name is ".".
 */
static int open_parent_in(int root, const char *path, char *parent, size_t size, const char **name)
{
	const char *slash = strrchr(path, '/');
	if (!slash || path[0] != '/')
		return -EINVAL;
	if (!slash[1]) {
		*name = ".";
		return lcl_resolve_open(root, "/", O_PATH | O_DIRECTORY, 0);
	}
	size_t n = (size_t)(slash - path);
	if (n >= size)
		return -ENAMETOOLONG;
	memcpy(parent, path, n);
	parent[n ? n : 1] = '\0';
	if (!n)
		parent[0] = '/';
	*name = slash + 1;
	return lcl_resolve_open(root, parent, O_PATH | O_DIRECTORY, 0);
}

static int open_parent(const struct local_inst *li, const char *path, char *parent, size_t size,
		       const char **name)
{
	return open_parent_in(li->rootfd, path, parent, size, name);
}

/* Declares `pfd` and `name` for path, or returns the error. */
#define PARENT(li, path, op)                                                                       \
	char parent_buf_[SBX_FS_PATH_MAX];                                                         \
	const char *name;                                                                          \
	int pfd = open_parent(li, path, parent_buf_, sizeof(parent_buf_), &name);                  \
	if (pfd < 0)                                                                               \
	return fail(err, pfd, op, path)

/* Closes pfd and reports r (a syscall's return) as 0 or a failure of op. */
static int done(int pfd, int r, struct sbx_error *err, const char *op, const char *path)
{
	int e = r < 0 ? -errno : 0;
	close(pfd);
	return e ? fail(err, e, op, path) : 0;
}

int lcl_f_stat(struct sbx_instance *inst, const char *path, struct sbx_stat *st,
	       struct sbx_error *err)
{
	struct stat sys;
	PARENT(lcl_inst(inst), path, "stat");
	int r = fstatat(pfd, name, &sys, AT_SYMLINK_NOFOLLOW);
	if (r == 0)
		sbx_stat_from_sys(st, &sys);
	return done(pfd, r, err, "stat", path);
}

int lcl_f_list(struct sbx_instance *inst, const char *path, sbx_list_fn fn, void *ctx,
	       struct sbx_error *err)
{
	int fd = lcl_open_in_root(lcl_inst(inst), path, O_RDONLY | O_DIRECTORY, 0), r = 0;
	DIR *d;
	struct dirent *de;

	if (fd < 0)
		return fail(err, fd, "list", path);
	if (!(d = fdopendir(fd))) {
		close(fd);
		return fail(err, -errno, "list", path);
	}
	while (!r && (de = readdir(d))) {
		struct stat sys;
		struct sbx_stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &sys, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		sbx_stat_from_sys(&st, &sys);
		r = fn(ctx, de->d_name, &st);
	}
	closedir(d);
	return r < 0 ? fail(err, r, "list", path) : 0;
}

int lcl_f_read(struct sbx_instance *inst, const char *path, off_t off, off_t len, sbx_sink_fn sink,
	       void *ctx, struct sbx_error *err)
{
	int fd = lcl_open_in_root(lcl_inst(inst), path, O_RDONLY, 0), e = 0;
	char buf[65536];

	if (fd < 0)
		return fail(err, fd, "read", path);
	while (len != 0) {
		size_t want = len < 0 || len > (off_t)sizeof(buf) ? sizeof(buf) : (size_t)len;
		ssize_t n = pread(fd, buf, want, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			e = n < 0 ? fail(err, -errno, "read", path) : 0;
			break;
		}
		if ((e = sink(ctx, buf, n)) < 0) {
			e = fail(err, e, "read", path);
			break;
		}
		off += n;
		if (len > 0)
			len -= n;
	}
	close(fd);
	return e;
}

/* Copies size bytes of src (from offset 0) to dst. 0 or -errno. */
static int copy_fd(int src, int dst, off_t size)
{
	char buf[65536];
	for (off_t off = 0; off < size;) {
		size_t want = size - off > (off_t)sizeof(buf) ? sizeof(buf) : (size_t)(size - off);
		ssize_t n = pread(src, buf, want, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO; /* shorter than announced */
		for (ssize_t w = 0; w < n;) {
			ssize_t m = write(dst, buf + w, n - w);
			if (m < 0 && errno != EINTR)
				return -errno;
			w += m > 0 ? m : 0;
		}
		off += n;
	}
	return 0;
}

/*
 * Whole-file replace: a temporary file in the same directory renamed over
 * the target (keeping an existing file's mode and owner), so readers see
 * the old or the new content. A target that is a symlink or has other hard
 * links is written in place instead, through the link.
 */
int lcl_f_write(struct sbx_instance *inst, const char *path, int src, off_t size, mode_t mode,
		struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	struct stat old;
	char tmp[300];
	int fd, e;
	PARENT(li, path, "write");

	bool exists = fstatat(pfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0;
	if (exists && (!S_ISREG(old.st_mode) || old.st_nlink > 1)) {
		close(pfd);
		if ((fd = lcl_open_in_root(li, path, O_WRONLY | O_TRUNC, 0)) < 0)
			return fail(err, fd, "write", path);
		e = copy_fd(src, fd, size);
		close(fd);
		return e ? fail(err, e, "write", path) : 0;
	}
	snprintf(tmp, sizeof(tmp), ".%.200s.sbxfs-%d", name, (int)gettid());
	if ((fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			 exists ? old.st_mode & 07777 : mode & 07777)) < 0)
		return done(pfd, -1, err, "write", path);
	if (exists &&
	    (fchown(fd, old.st_uid, old.st_gid) < 0 || fchmod(fd, old.st_mode & 07777) < 0))
		e = -errno;
	else
		e = copy_fd(src, fd, size);
	close(fd);
	if (!e && renameat(pfd, tmp, pfd, name) < 0)
		e = -errno;
	if (e)
		unlinkat(pfd, tmp, 0);
	close(pfd);
	return e ? fail(err, e, "write", path) : 0;
}

int lcl_f_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err)
{
	int fd = lcl_open_in_root(lcl_inst(inst), path, O_WRONLY, 0);
	if (fd < 0)
		return fail(err, fd, "truncate", path);
	return done(fd, ftruncate(fd, size), err, "truncate", path);
}

int lcl_f_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	PARENT(lcl_inst(inst), path, "mkdir");
	return done(pfd, mkdirat(pfd, name, mode), err, "mkdir", path);
}

int lcl_f_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	PARENT(lcl_inst(inst), path, "unlink");
	return done(pfd, unlinkat(pfd, name, 0), err, "unlink", path);
}

int lcl_f_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	PARENT(lcl_inst(inst), path, "rmdir");
	if (!strcmp(name, "."))
		return done(pfd, (errno = EBUSY, -1), err, "rmdir", path);
	return done(pfd, unlinkat(pfd, name, AT_REMOVEDIR), err, "rmdir", path);
}

/* rename (renameat2 with flags) or link (linkat) between two parents. */
static int two_names(struct sbx_instance *inst, const char *from, const char *to, bool link,
		     unsigned flags, struct sbx_error *err)
{
	struct local_inst *li = lcl_inst(inst);
	const char *op = link ? "link" : "rename", *tname;
	char tbuf[SBX_FS_PATH_MAX];
	PARENT(li, from, op);
	int tfd = open_parent(li, to, tbuf, sizeof(tbuf), &tname);
	if (tfd < 0) {
		close(pfd);
		return fail(err, tfd, op, to);
	}
	int r = link ? linkat(pfd, name, tfd, tname, 0) : renameat2(pfd, name, tfd, tname, flags);
	close(tfd);
	return done(pfd, r, err, op, from);
}

int lcl_f_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
		 struct sbx_error *err)
{
	return two_names(inst, from, to, false, flags, err);
}

/* chmod follows symlinks (there is no lchmod): the target is resolved in the root. */
int lcl_f_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	char proc[64];
	int fd = lcl_open_in_root(lcl_inst(inst), path, O_PATH, 0);
	if (fd < 0)
		return fail(err, fd, "chmod", path);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return done(fd, chmod(proc, mode & 07777), err, "chmod", path);
}

int lcl_f_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
		struct sbx_error *err)
{
	PARENT(lcl_inst(inst), path, "chown");
	return done(pfd, fchownat(pfd, name, uid, gid, AT_SYMLINK_NOFOLLOW), err, "chown", path);
}

int lcl_f_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
		  struct sbx_error *err)
{
	PARENT(lcl_inst(inst), path, "utimens");
	return done(pfd, utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW), err, "utimens", path);
}

int lcl_f_symlink(struct sbx_instance *inst, const char *target, const char *path,
		  struct sbx_error *err)
{
	PARENT(lcl_inst(inst), path, "symlink");
	return done(pfd, symlinkat(target, pfd, name), err, "symlink", path);
}

int lcl_f_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		   struct sbx_error *err)
{
	char parent[SBX_FS_PATH_MAX];
	const char *name;
	if (!size)
		return sbx_error_set(err, EINVAL, 0, "readlink %s: empty buffer", path);
	/* Through the noatime clone: a link's stat reads it too (local.h, peekfd). */
	int pfd = open_parent_in(lcl_inst(inst)->peekfd, path, parent, sizeof(parent), &name);
	if (pfd < 0)
		return fail(err, pfd, "readlink", path);
	ssize_t n = readlinkat(pfd, name, buf, size - 1);
	if (n >= 0)
		buf[n] = '\0';
	return done(pfd, n < 0 ? -1 : 0, err, "readlink", path);
}

/*
 * Extended attributes act on the entry itself, through its O_PATH
 * descriptor's /proc link (O_PATH takes no f*xattr call; the link reaches
 * a fifo or a device node without opening it). A symlink's own attributes
 * are not carried: it lists none, has none, and setting or removing one is
 * EPERM (the kernel's answer for user.* on a link).
 */
ssize_t lcl_f_xattr(struct sbx_instance *inst, const char *path, const struct sbx_xattr_req *rq,
		    struct sbx_error *err)
{
	static const int on_link[] = {-ENODATA, 0, -EPERM, -EPERM};
	char proc[64];
	struct stat st;
	ssize_t n = 0;
	int fd = lcl_open_in_root(lcl_inst(inst), path, O_PATH | O_NOFOLLOW, 0), e;
	if (fd < 0)
		return fail(err, fd, sbx_xattr_op_name(rq->op), path);
	if (fstat(fd, &st) < 0) {
		e = -errno;
	} else if (S_ISLNK(st.st_mode)) {
		e = on_link[rq->op];
	} else {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		n = rq->op == SBX_XATTR_GET    ? getxattr(proc, rq->name, rq->buf, rq->size)
		    : rq->op == SBX_XATTR_LIST ? listxattr(proc, rq->buf, rq->size)
		    : rq->op == SBX_XATTR_SET
			? setxattr(proc, rq->name, rq->value, rq->size, rq->flags)
			: removexattr(proc, rq->name);
		e = n < 0 ? -errno : 0;
	}
	close(fd);
	return e ? fail(err, e, sbx_xattr_op_name(rq->op), path) : n;
}

int lcl_f_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err)
{
	return two_names(inst, from, to, true, 0, err);
}

/* Device nodes too, as on any disk: the root is mounted nodev (storage.c), so a
 * node there is only a name, and making one takes the caller's CAP_MKNOD. */
int lcl_f_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
		struct sbx_error *err)
{
	PARENT(lcl_inst(inst), path, "mknod");
	return done(pfd, mknodat(pfd, name, mode, dev), err, "mknod", path);
}

/* The overlay reports its upper file system: the lease's tmpfs, so df shows diskMB. */
int lcl_f_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
		 struct sbx_error *err)
{
	if (fstatvfs(lcl_inst(inst)->rootfd, st) < 0)
		return fail(err, -errno, "statfs", path);
	return 0;
}

int lcl_f_open(struct sbx_instance *inst, const char *path, int flags, mode_t mode, uint64_t *fh,
	       struct sbx_error *err)
{
	int fd = lcl_open_in_root(lcl_inst(inst), path, flags, mode);
	if (fd < 0)
		return fail(err, fd, "open", path);
	*fh = (uint64_t)fd;
	return 0;
}

ssize_t lcl_f_pread(struct sbx_instance *inst, uint64_t fh, char *buf, size_t size, off_t off,
		    struct sbx_error *err)
{
	ssize_t n = pread((int)fh, buf, size, off);
	return n < 0 ? sbx_error_set(err, errno, 0, "read: %s", strerror(errno)) : n;
}

ssize_t lcl_f_pwrite(struct sbx_instance *inst, uint64_t fh, const char *buf, size_t size,
		     off_t off, struct sbx_error *err)
{
	ssize_t n = pwrite((int)fh, buf, size, off);
	return n < 0 ? sbx_error_set(err, errno, 0, "write: %s", strerror(errno)) : n;
}

int lcl_f_ftruncate(struct sbx_instance *inst, uint64_t fh, off_t size, struct sbx_error *err)
{
	if (ftruncate((int)fh, size) < 0)
		return sbx_error_set(err, errno, 0, "truncate: %s", strerror(errno));
	return 0;
}

int lcl_f_fallocate(struct sbx_instance *inst, uint64_t fh, int mode, off_t off, off_t len,
		    struct sbx_error *err)
{
	if (fallocate((int)fh, mode, off, len) < 0)
		return sbx_error_set(err, errno, 0, "fallocate: %s", strerror(errno));
	return 0;
}

off_t lcl_f_seek_data(struct sbx_instance *inst, uint64_t fh, off_t off, int whence,
		      struct sbx_error *err)
{
	off_t r = lseek((int)fh, off, whence); /* reads and writes are pread/pwrite: no offset */
	if (r < 0)
		return sbx_error_set(err, errno, 0, "lseek: %s", strerror(errno));
	return r;
}

int lcl_f_fsync(struct sbx_instance *inst, uint64_t fh, int datasync, struct sbx_error *err)
{
	if ((datasync ? fdatasync((int)fh) : fsync((int)fh)) < 0)
		return sbx_error_set(err, errno, 0, "fsync: %s", strerror(errno));
	return 0;
}

int lcl_f_fstat(struct sbx_instance *inst, uint64_t fh, struct sbx_stat *st, struct sbx_error *err)
{
	struct stat sys;
	if (fstat((int)fh, &sys) < 0)
		return sbx_error_set(err, errno, 0, "fstat: %s", strerror(errno));
	sbx_stat_from_sys(st, &sys);
	return 0;
}

void lcl_f_close(struct sbx_instance *inst, uint64_t fh)
{
	close((int)fh);
}

int lcl_mkdir_p(const struct local_inst *li, const char *path, mode_t mode)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *s = buf + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = '\0';
		int fd = lcl_open_in_root(li, buf, O_PATH | O_DIRECTORY, 0);
		if (fd >= 0) {
			close(fd);
		} else {
			char pb[4096];
			const char *name;
			int pfd = open_parent(li, buf, pb, sizeof(pb), &name);
			if (pfd < 0)
				return pfd;
			int r = mkdirat(pfd, name, mode) < 0 && errno != EEXIST ? -errno : 0;
			close(pfd);
			if (r)
				return r;
		}
		if (!c)
			return 0;
		*s = c;
	}
}
