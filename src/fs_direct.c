/*
 * fs_direct — fs/ for providers whose files are as cheap as local disk
 * (SBX_CAP_DIRECT_IO, i.e. local): every operation is one provider call on
 * the lease's root, no cache. Metadata reads (getattr, readdir, readlink)
 * of a paused sandbox are served without resuming it (a frozen sandbox
 * cannot change its files), and so are reads of files; anything that
 * creates or changes a file counts as use and resumes it.
 */
#include "fsmirror.h"
#include "base/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gets the instance for a read-only metadata call (no resume). */
static int peek(struct sbx_lease *l, struct sbx_instance **inst, bool *used, struct sbx_error *err)
{
	*inst = sbx_lease_peek(l);
	*used = false;
	if (*inst)
		return 0;
	*used = true;
	return sbx_lease_use(l, inst, err);
}

static int fail(struct sbx_lease *l, const char *op, const char *path, int rc,
		struct sbx_error *err)
{
	if (sbx_fs_is_fault(rc)) {
		char *what = sbx_xasprintf("%s %s", op, path);
		sbx_lease_error(l, what, err);
		free(what);
	}
	return rc;
}

#define USE_OR_RETURN(l, inst, err)                                                                \
	do {                                                                                       \
		int _rc = sbx_lease_use((l), &(inst), (err));                                      \
		if (_rc)                                                                           \
			return _rc;                                                                \
	} while (0)

static int need(const void *slot, struct sbx_lease *l, const char *op, struct sbx_error *err)
{
	if (slot)
		return 0;
	return sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED, "provider %s cannot %s",
			     l->prov->name, op);
}

static int d_getattr(struct sbx_lease *l, const char *path, struct sbx_fs_file *f, struct stat *st,
		     struct sbx_error *err)
{
	struct sbx_instance *inst;
	struct sbx_stat s;
	bool used;
	int rc = peek(l, &inst, &used, err);
	if (rc)
		return rc;
	if (f && l->prov->fstat)
		rc = l->prov->fstat(inst, f->fh, &s, err);
	else
		rc = l->prov->stat(inst, path, &s, err);
	if (used)
		sbx_lease_unuse(l);
	if (rc)
		return fail(l, "stat", path, rc, err);
	sbx_stat_to_sys(st, &s);
	return 0;
}

struct fill_ctx {
	sbx_fs_fill_fn fill;
	void *ctx;
};

static int fill_one(void *ctx, const char *name, const struct sbx_stat *s)
{
	struct fill_ctx *fc = ctx;
	struct stat st;
	if (!s)
		return fc->fill(fc->ctx, name, NULL);
	sbx_stat_to_sys(&st, s);
	return fc->fill(fc->ctx, name, &st);
}

static int d_readdir(struct sbx_lease *l, const char *path, sbx_fs_fill_fn fill, void *ctx,
		     struct sbx_error *err)
{
	struct sbx_instance *inst;
	struct fill_ctx fc = {fill, ctx};
	bool used;
	int rc = peek(l, &inst, &used, err);
	if (rc)
		return rc;
	rc = l->prov->list(inst, path, fill_one, &fc, err);
	if (used)
		sbx_lease_unuse(l);
	return rc ? fail(l, "list", path, rc, err) : 0;
}

/* Reading cannot change a frozen sandbox's files: served without resuming it. */
static bool read_only(int flags)
{
	return (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_CREAT | O_TRUNC));
}

static int d_open(struct sbx_lease *l, const char *path, int flags, mode_t mode,
		  struct sbx_fs_file **out, struct sbx_error *err)
{
	struct sbx_instance *inst;
	uint64_t fh;
	bool used = true;
	int rc = need(l->prov->open, l, "open files", err);
	if (rc)
		return rc;
	rc = read_only(flags) ? peek(l, &inst, &used, err) : sbx_lease_use(l, &inst, err);
	if (rc)
		return rc;
	rc = l->prov->open(inst, path, flags, mode, &fh, err);
	if (used)
		sbx_lease_unuse(l);
	if (rc)
		return fail(l, "open", path, rc, err);
	struct sbx_fs_file *f = sbx_xcalloc(1, sizeof(*f));
	f->lease = l;
	f->path = sbx_xstrdup(path);
	f->flags = flags;
	f->fh = fh;
	*out = f;
	return 0;
}

static ssize_t d_read(struct sbx_fs_file *f, char *buf, size_t size, off_t off,
		      struct sbx_error *err)
{
	struct sbx_instance *inst;
	bool used;
	int rc = peek(f->lease, &inst, &used, err);
	if (rc)
		return rc;
	ssize_t n = f->lease->prov->pread(inst, f->fh, buf, size, off, err);
	if (used)
		sbx_lease_unuse(f->lease);
	return n < 0 ? fail(f->lease, "read", f->path, (int)n, err) : n;
}

static ssize_t d_write(struct sbx_fs_file *f, const char *buf, size_t size, off_t off,
		       struct sbx_error *err)
{
	struct sbx_instance *inst;
	USE_OR_RETURN(f->lease, inst, err);
	ssize_t n = f->lease->prov->pwrite(inst, f->fh, buf, size, off, err);
	sbx_lease_unuse(f->lease);
	return n < 0 ? fail(f->lease, "write", f->path, (int)n, err) : n;
}

static int d_flush(struct sbx_fs_file *f, struct sbx_error *err)
{
	return 0;
}

static int d_fsync(struct sbx_fs_file *f, int datasync, struct sbx_error *err)
{
	struct sbx_instance *inst;
	if (!f->lease->prov->fsync)
		return 0;
	USE_OR_RETURN(f->lease, inst, err);
	int rc = f->lease->prov->fsync(inst, f->fh, datasync, err);
	sbx_lease_unuse(f->lease);
	return rc ? fail(f->lease, "fsync", f->path, rc, err) : 0;
}

static void d_release(struct sbx_fs_file *f)
{
	struct sbx_instance *inst = sbx_lease_peek(f->lease);
	if (inst && f->lease->prov->close)
		f->lease->prov->close(inst, f->fh);
	free(f->path);
	free(f);
}

static int d_truncate(struct sbx_lease *l, const char *path, struct sbx_fs_file *f, off_t size,
		      struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc;
	USE_OR_RETURN(l, inst, err);
	if (f && l->prov->ftruncate)
		rc = l->prov->ftruncate(inst, f->fh, size, err);
	else if (l->prov->truncate)
		rc = l->prov->truncate(inst, path, size, err);
	else
		rc = need(NULL, l, "truncate", err);
	sbx_lease_unuse(l);
	return rc ? fail(l, "truncate", path, rc, err) : 0;
}

static int d_fallocate(struct sbx_fs_file *f, int mode, off_t off, off_t len, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = need(f->lease->prov->fallocate, f->lease, "fallocate", err);
	if (rc)
		return rc;
	USE_OR_RETURN(f->lease, inst, err);
	rc = f->lease->prov->fallocate(inst, f->fh, mode, off, len, err);
	sbx_lease_unuse(f->lease);
	return rc ? fail(f->lease, "fallocate", f->path, rc, err) : 0;
}

/*
 * Extended attributes: reads served like a stat (no resume), changes like
 * a chmod. What xattr calls answer every day (no such attribute, a buffer
 * too small, a name refused) is an answer, not a fault of the lease: it
 * never reaches the error file (`ls -l` asks for ACLs of every file).
 */
static ssize_t xattr_end(struct sbx_lease *l, const char *op, const char *path, ssize_t rc,
			 struct sbx_error *err)
{
	switch (-rc) {
	case ENODATA:
	case ERANGE:
	case ENOTSUP:
	case EPERM:
	case EACCES:
	case EEXIST:
	case E2BIG:
	case EINVAL:
		return rc;
	default:
		return rc < 0 ? fail(l, op, path, (int)rc, err) : rc;
	}
}

static ssize_t d_xattr(struct sbx_lease *l, const char *path, const struct sbx_xattr_req *rq,
		       struct sbx_error *err)
{
	const char *name = sbx_xattr_op_name(rq->op);
	bool reads = rq->op == SBX_XATTR_GET || rq->op == SBX_XATTR_LIST, used = true;
	struct sbx_instance *inst;
	ssize_t rc = need(l->prov->xattr, l, name, err);
	if (!rc)
		rc = reads ? peek(l, &inst, &used, err) : sbx_lease_use(l, &inst, err);
	if (rc)
		return rc;
	rc = l->prov->xattr(inst, path, rq, err);
	if (used)
		sbx_lease_unuse(l);
	return xattr_end(l, name, path, rc, err);
}

static off_t d_seek_data(struct sbx_fs_file *f, off_t off, int whence, struct sbx_error *err)
{
	struct sbx_instance *inst;
	bool used;
	if (!f->lease->prov->seek_data)
		return -ENOSYS;
	int rc = peek(f->lease, &inst, &used, err); /* a read: no resume, as d_read */
	if (rc)
		return rc;
	off_t r = f->lease->prov->seek_data(inst, f->fh, off, whence, err);
	if (used)
		sbx_lease_unuse(f->lease);
	/* ENXIO is an answer (no data or hole at or after off), not a fault */
	return r < 0 && r != -ENXIO ? fail(f->lease, "lseek", f->path, (int)r, err) : r;
}

/* The path-only operations: one provider slot each, same shape. */
#define PATH_OP(fn, slot, opname, params, args)                                                    \
	static int fn params                                                                       \
	{                                                                                          \
		struct sbx_instance *inst;                                                         \
		int rc = need(l->prov->slot, l, opname, err);                                      \
		if (rc)                                                                            \
			return rc;                                                                 \
		USE_OR_RETURN(l, inst, err);                                                       \
		rc = l->prov->slot args;                                                           \
		sbx_lease_unuse(l);                                                                \
		return rc ? fail(l, opname, path, rc, err) : 0;                                    \
	}

PATH_OP(d_mkdir, mkdir, "mkdir",
	(struct sbx_lease * l, const char *path, mode_t mode, struct sbx_error *err),
	(inst, path, mode, err))
PATH_OP(d_unlink, unlink, "unlink", (struct sbx_lease * l, const char *path, struct sbx_error *err),
	(inst, path, err))
PATH_OP(d_rmdir, rmdir, "rmdir", (struct sbx_lease * l, const char *path, struct sbx_error *err),
	(inst, path, err))
PATH_OP(d_rename, rename, "rename",
	(struct sbx_lease * l, const char *path, const char *to, unsigned flags,
	 struct sbx_error *err),
	(inst, path, to, flags, err))
PATH_OP(d_chmod, chmod, "chmod",
	(struct sbx_lease * l, const char *path, mode_t mode, struct sbx_error *err),
	(inst, path, mode, err))
PATH_OP(d_chown, chown, "chown",
	(struct sbx_lease * l, const char *path, uid_t uid, gid_t gid, struct sbx_error *err),
	(inst, path, uid, gid, err))
PATH_OP(d_utimens, utimens, "utimens",
	(struct sbx_lease * l, const char *path, const struct timespec ts[2],
	 struct sbx_error *err),
	(inst, path, ts, err))
PATH_OP(d_symlink, symlink, "symlink",
	(struct sbx_lease * l, const char *target, const char *path, struct sbx_error *err),
	(inst, target, path, err))
PATH_OP(d_link, link, "link",
	(struct sbx_lease * l, const char *path, const char *to, struct sbx_error *err),
	(inst, path, to, err))
PATH_OP(d_mknod, mknod, "mknod",
	(struct sbx_lease * l, const char *path, mode_t mode, dev_t dev, struct sbx_error *err),
	(inst, path, mode, dev, err))
PATH_OP(d_statfs, statfs, "statfs",
	(struct sbx_lease * l, const char *path, struct statvfs *st, struct sbx_error *err),
	(inst, path, st, err))

static int d_readlink(struct sbx_lease *l, const char *path, char *buf, size_t size,
		      struct sbx_error *err)
{
	struct sbx_instance *inst;
	bool used;
	int rc = need(l->prov->readlink, l, "readlink", err);
	if (!rc)
		rc = peek(l, &inst, &used, err);
	if (rc)
		return rc;
	rc = l->prov->readlink(inst, path, buf, size, err);
	if (used)
		sbx_lease_unuse(l);
	return rc ? fail(l, "readlink", path, rc, err) : 0;
}

const struct sbx_fs_ops sbx_fs_direct_ops = {
    .getattr = d_getattr,
    .readdir = d_readdir,
    .open = d_open,
    .read = d_read,
    .write = d_write,
    .flush = d_flush,
    .fsync = d_fsync,
    .release = d_release,
    .truncate = d_truncate,
    .fallocate = d_fallocate,
    .seek_data = d_seek_data,
    .xattr = d_xattr,
    .mkdir = d_mkdir,
    .unlink = d_unlink,
    .rmdir = d_rmdir,
    .rename = d_rename,
    .chmod = d_chmod,
    .chown = d_chown,
    .utimens = d_utimens,
    .symlink = d_symlink,
    .readlink = d_readlink,
    .link = d_link,
    .mknod = d_mknod,
    .statfs = d_statfs,
};
