/*
 * fuse_ops — the only file with FUSE callbacks. Each callback classifies
 * the path (nodes), makes one call into the lease table, the fs/ mirror or
 * a control-file handler (ctlfiles), and maps the result to -errno. No
 * logic of its own beyond marshalling.
 */
#define FUSE_USE_VERSION 31
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <sys/uio.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "access.h"
#include "base/caller.h"
#include "aliases.h"
#include "base/fsutil.h"
#include "ctlfiles.h"
#include "fsmirror.h"
#include "fuse_ops.h"
#include "idmap.h"
#include "inotab.h"
#include "kinval.h"
#include "linkmap.h"
#include "nodes.h"
#include "run.h"
#include "runs.h"
#include "tty.h"
#include "base/xalloc.h"
#include "base/pathutil.h"

/* private_data points at main()'s `struct sbx_mount *`, set before the loop runs. */
static struct sbx_mount *mnt(void)
{
	return *(struct sbx_mount **)fuse_get_context()->private_data;
}

/* Only the mount's owner, root and the share group's members get in (access.h). */
static bool caller_allowed(void)
{
	struct fuse_context *c = fuse_get_context();
	gid_t groups[64];
	int n = 0;
	if (sbx_access_allows(c->uid, c->gid, NULL, 0))
		return true;
	n = fuse_getgroups(64, groups);
	return n > 0 && sbx_access_allows(c->uid, c->gid, groups, n < 64 ? n : 64);
}

/* Records (fs/ requests) or forgets who asked, for providers that act as the caller. */
static void note_caller(bool fs)
{
	const struct fuse_context *ctx = fuse_get_context();
	struct sbx_caller c = {true, ctx->uid, ctx->gid, ctx->umask, ctx->pid};
	sbx_caller_set(fs ? &c : NULL);
}

/* Parses path and, for nodes inside a lease, looks the lease up (ref taken). */
static int resolve(const char *path, struct sbx_node *n, struct sbx_lease **l)
{
	int rc;
	*l = NULL;
	if (!path)
		return -ENOENT;
	rc = sbx_node_parse(path, n);
	/* share_fs: others pass through the root and lease directories to fs/ (modes decide). */
	if (!caller_allowed() &&
	    !(sbx_access_fs_shared() && rc == 0 &&
	      (n->kind == SBX_N_FS || n->kind == SBX_N_ROOT || n->kind == SBX_N_LEASE)))
		return -EACCES;
	note_caller(rc == 0 && n->kind == SBX_N_FS);
	if (rc)
		return rc;
	if (n->lease[0]) {
		*l = sbx_lease_get(mnt(), n->lease);
		if (!*l)
			return -ENOENT;
	}
	return 0;
}

/*
 * use_ino: st_ino is what the provider reports (local: the lease root's own
 * inode numbers, so hard links share one). Where it has none (control
 * files: l NULL; e2b, daytona), inotab.h makes one from the mount path,
 * kept across the mount's renames and shared by its hard links, whose
 * names it counts in st_nlink.
 */
static void give_ino(struct stat *st, const char *path, struct sbx_lease *l)
{
	sbx_inotab_stat(l ? l->inotab : NULL, path, st);
	sbx_idmap_out(l, st); /* -o idmap=user: fs/ only (l is NULL for control files) */
}

/* A new file's mode for l: with FUSE_CAP_DONT_MASK, the caller's umask is applied once here. */
static mode_t new_mode(struct sbx_lease *l, mode_t mode)
{
	if (l->prov->caps & SBX_CAP_AS_CALLER)
		return mode; /* the provider creates with the caller's umask */
	return mode & ~(fuse_get_context()->umask & 0777);
}

/* The mount path of an open fs/ file ("/NAME/fs/sub"). */
static void fh_path(char *buf, size_t size, const struct sbx_fs_file *f)
{
	snprintf(buf, size, "/%s/fs%s", f->lease->name, sbx_path_prefix(f->path));
}

/*
 * The open behind fi: open_of() for read, write, flush, fsync and release,
 * which libfuse always calls with one; of() where fi may be NULL (a path op).
 */
static struct sbx_open *open_of(struct fuse_file_info *fi)
{
	return (struct sbx_open *)(uintptr_t)fi->fh;
}

static struct sbx_open *of(struct fuse_file_info *fi)
{
	return fi ? open_of(fi) : NULL;
}

/*
 * The path of an operation on an open file: nullpath_ok gives none for
 * fstat, ftruncate, fchmod... An open control file answers by the path
 * it was opened by (`truncate -s 0 exec` is a no-op, as the shell's `>`).
 */
static const char *op_path(const char *path, const struct sbx_open *o)
{
	return !path && o && !o->fsf ? o->path : path;
}

/*
 * A new name beside the control files (`touch LEASE/x`, the temporary of
 * `sed -i LEASE/env`, `ln -s`, `mv` onto one): EACCES, as mkdir says, not
 * the lookup's ENOENT, which says the directory is missing. 0 otherwise.
 */
static int new_name_refused(const char *path)
{
	struct sbx_node n;
	struct sbx_lease *l;
	const char *slash = path ? strrchr(path, '/') : NULL;
	char parent[SBX_MOUNT_PATH_MAX];
	int rc;
	if (!slash || (size_t)(slash - path) >= sizeof(parent))
		return 0;
	rc = sbx_node_parse(path, &n);
	if (!(rc == -ENOENT || (rc == 0 && n.kind == SBX_N_LEASE)))
		return 0;
	snprintf(parent, sizeof(parent), "%.*s", slash == path ? 1 : (int)(slash - path), path);
	if (resolve(parent, &n, &l))
		return 0;
	rc = 0;
	if (n.kind == SBX_N_ROOT)
		rc = sbx_refuse(mnt(), l, EACCES, "create",
				"%s: the mount's root takes leases, by mkdir", slash + 1);
	else if (sbx_node_is_dir(n.kind) && n.kind != SBX_N_FS)
		rc = sbx_refuse(mnt(), l, EACCES, "create", "%s: only fs/ takes new names here",
				path);
	sbx_lease_put(l);
	return rc;
}

/* resolve() for an operation that makes path: beside the control files, EACCES with a reason. */
static int resolve_new(const char *path, struct sbx_node *n, struct sbx_lease **l)
{
	int rc = resolve(path, n, l);
	return rc == -ENOENT && new_name_refused(path) ? -EACCES : rc;
}

/* fs/ links as the host must follow them (linkmap.h), unless -o symlinks=raw. */
static int raw_symlinks;

void sbx_fuse_set_raw_symlinks(int raw)
{
	raw_symlinks = raw;
}

static int link_lstat(void *ctx, const char *path, mode_t *mode)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct stat st;
	int rc = sbx_fs_ops_for(ctx)->getattr(ctx, path, NULL, &st, &err);
	*mode = st.st_mode;
	return rc;
}

static int link_read(void *ctx, const char *path, char *buf, size_t size)
{
	struct sbx_error err = SBX_ERROR_INIT;
	return sbx_fs_ops_for(ctx)->readlink(ctx, path, buf, size, &err);
}

/*
 * What readlink of sub answers through the mount: the sandbox's text
 * rewritten for the host (linkmap.h), or as it is with -o symlinks=raw.
 */
static int shown_link(struct sbx_lease *l, const char *sub, char *buf, size_t size)
{
	struct sbx_error err = SBX_ERROR_INIT;
	char *raw = sbx_xmalloc(size);
	int rc = sbx_fs_ops_for(l)->readlink(l, sub, raw, size, &err);
	if (!rc && raw_symlinks)
		memcpy(buf, raw, size);
	else if (!rc)
		rc = sbx_link_rewrite(sub, raw, &(struct sbx_link_io){link_lstat, link_read, l},
				      buf, size);
	free(raw);
	return rc;
}

/*
 * A symlink's st_size is the length of what readlink answers (POSIX), not
 * of the sandbox's text: readers size their buffer by it (libarchive,
 * readlink(2)'s own example), and a rewrite longer than the text was cut
 * short in what they kept ("../usr/bin/pytho" in a bsdtar archive). Left as
 * the provider gave it if the link cannot be read.
 */
static void link_size(struct sbx_lease *l, const char *sub, struct stat *st)
{
	char shown[PATH_MAX];
	if (S_ISLNK(st->st_mode) && !shown_link(l, sub, shown, sizeof(shown)))
		st->st_size = (off_t)strlen(shown);
}

/*
 * An open directory: its path (nullpath_ok: readdir may get none) and, from
 * the first readdir on, its whole listing. Entries are handed to libfuse
 * with offsets (index + 1): only in that mode does libfuse's readdirplus
 * pass the attributes on to the kernel (it answers ino 0, "no attributes",
 * for a listing filled without offsets), and without them every name of a
 * `du` or `find` costs one more LOOKUP round trip.
 */
struct dir_entry {
	char *name;
	bool has_st;
	struct stat st;
};

struct open_dir {
	char *path;
	struct dir_entry *ents;
	size_t n, cap;
	bool listed;
	bool plus; /* the listing's attributes go to the kernel (see dir_list) */
};

static void dir_add(struct open_dir *d, const char *name, const struct stat *st)
{
	if (d->n == d->cap) {
		d->cap = d->cap ? d->cap * 2 : 64;
		d->ents = sbx_xreallocarray(d->ents, d->cap, sizeof(*d->ents));
	}
	struct dir_entry *e = &d->ents[d->n++];
	e->name = sbx_xstrdup(name);
	e->has_st = st != NULL;
	if (st)
		e->st = *st;
}

static void dir_clear(struct open_dir *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->ents[i].name);
	d->n = 0;
	d->listed = false;
}

struct fill_ctx {
	struct open_dir *d;
	struct sbx_lease *lease; /* fs/ listings: the kernel caches what readdirplus gives */
	const char *dir;
	const char *sub; /* fs/ listings: the directory's sandbox path */
};

static int fill_adapter(void *ctx, const char *name, const struct stat *st)
{
	struct fill_ctx *fc = ctx;
	struct stat with_ino;
	char path[SBX_MOUNT_PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", fc->dir, name);
	if (st) {
		with_ino = *st;
		give_ino(&with_ino, path, fc->lease);
		if (fc->lease && fc->d->plus && S_ISLNK(st->st_mode)) { /* the kernel keeps it */
			char sub[SBX_FS_PATH_MAX];
			snprintf(sub, sizeof(sub), "%s/%s", sbx_path_prefix(fc->sub), name);
			link_size(fc->lease, sub, &with_ino);
		}
		st = &with_ino;
	}
	if (st && fc->lease) {
		/* READDIRPLUS replaces an inode of another type itself. */
		(void)sbx_kinval_note(fc->lease->kinval, path, st->st_mode);
		sbx_aliases_note(path, st);
	}
	dir_add(fc->d, name, st);
	return 0;
}

/* How long the kernel may keep fs/ names and attributes (runs invalidate them). */
static double fs_cache_timeout = 1.0;

void sbx_fuse_set_cache_timeout(double seconds)
{
	fs_cache_timeout = seconds;
}

static void invalidate_path(void *ctx, const char *path)
{
	fuse_invalidate_path(ctx, path);
}

static void root_name_gone(void *ctx, const char *name)
{
	fuse_lowlevel_notify_inval_entry(fuse_get_session(ctx), FUSE_ROOT_ID, name, strlen(name));
}

/* The process whose request this thread serves is being killed, or the daemon stops. */
static bool requester_killed(void)
{
	return sbx_run_waits_stopped() || sbx_tid_dying(fuse_get_context()->pid);
}

/* The process whose request this thread serves (the per-caller rule of runs). */
static pid_t requester_pid(void)
{
	return fuse_get_context()->pid;
}

static int fs_pseudo_child(const struct sbx_node *n)
{
	/* /proc, /sys, /dev themselves exist (empty); nothing below them does. */
	return n->kind == SBX_N_FS && sbx_fs_is_pseudo(n->sub) && strchr(n->sub + 1, '/');
}

/*
 * Notes the attributes the kernel is given for path; true when they have
 * another type than its inode (kinval.h: it must look the name up again).
 * An fstat on an open file (o) leaves a doubt for the path's next stat,
 * and is noted all the same: the kernel keeps what it was given.
 */
static bool kernel_learns(struct sbx_lease *l, const char *path, mode_t mode,
			  const struct sbx_open *o)
{
	if (o) {
		sbx_kinval_note_kept(l->kinval, path, mode);
		return false;
	}
	return sbx_kinval_note(l->kinval, path, mode);
}

static int op_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_open *o = of(fi);
	int rc;
	if (!path && o && o->fsf) {
		rc = sbx_fs_ops_for(o->fsf->lease)
			 ->getattr(o->fsf->lease, o->fsf->path, o->fsf, st, &err);
		if (!rc) {
			char mp[SBX_MOUNT_PATH_MAX];
			fh_path(mp, sizeof(mp), o->fsf);
			give_ino(st, mp, o->fsf->lease);
			sbx_aliases_note(mp, st);
			(void)kernel_learns(o->fsf->lease, mp, st->st_mode, o);
		}
		return rc;
	}
	path = op_path(path, o);
	rc = resolve(path, &n, &l);
	if (rc == -ENOENT && n.kind == SBX_N_LEASE) {
		/* The kernel looks a name up before rmdir/open: say which lease is missing. */
		struct sbx_error e = SBX_ERROR_INIT;
		const char *why = sbx_mount_unloaded(mnt(), n.lease);
		if (why)
			sbx_error_set(&e, ENOENT, SBX_E_NOT_FOUND,
				      "lease %s is in the lease table but not loaded: %s", n.lease,
				      why);
		else
			sbx_error_set(&e, ENOENT, SBX_E_NOT_FOUND, "no lease %s", n.lease);
		sbx_mount_error(mnt(), "lookup", &e);
	}
	if (rc)
		return rc;
	if (n.kind == SBX_N_FS && !fs_pseudo_child(&n) && !(sbx_fs_is_pseudo(n.sub))) {
		sbx_idmap_learn(l);
		rc = sbx_fs_ops_for(l)->getattr(l, n.sub, o ? o->fsf : NULL, st, &err);
		if (!rc && kernel_learns(l, path, st->st_mode, o)) {
			rc = -ESTALE; /* a run changed its type: the VFS looks it up again */
		} else if (!rc) {
			give_ino(st, path, l);
			sbx_aliases_note(path, st);
			link_size(l, n.sub, st);
		} else if (rc == -ENOENT) { /* gone behind the mount's back: one name less */
			sbx_inotab_unlink(l->inotab, path);
			sbx_kinval_forget(l->kinval, path);
		}
	} else if (fs_pseudo_child(&n)) {
		rc = -ENOENT;
	} else {
		rc = sbx_ctl_getattr(mnt(), &n, l, st);
		if (!rc)
			give_ino(st, path, NULL);
	}
	sbx_lease_put(l);
	return rc;
}

/*
 * Whether the kernel holds a name for path that a run made stale: the path
 * is doubted (kinval.h) and is gone now or of another type. Its open is
 * then answered ESTALE, and open(2) walks again with LOOKUP_REVAL: without
 * that, a file a run removed fails `echo > f` with ENOENT (the kernel sends
 * OPEN, not CREATE, on the name it still has), and one a run replaced by a
 * directory is opened as a file. Asked only of doubted paths.
 */
static bool kernel_name_stale(struct sbx_lease *l, const char *path, const char *sub)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct stat st;
	mode_t type;
	if (!sbx_kinval_doubted(l->kinval, path, &type))
		return false;
	int rc = sbx_fs_ops_for(l)->getattr(l, sub, NULL, &st, &err);
	return rc == -ENOENT || (!rc && ((st.st_mode ^ type) & S_IFMT));
}

/*
 * Listings of a local lease's fs/ stay in the kernel's cache across opens
 * when names outlive a walk (fs_cache_timeout of 10 s or more): a second
 * `du` or `grep -r` then costs OPENDIR and RELEASEDIR per directory, no
 * READDIRPLUS. The kernel drops a cached listing when the directory's
 * mtime changes (checked against its attributes, so within the timeout)
 * and when a run's end invalidates the directory (kinval). Not with short
 * timeouts: a cached listing brings no attributes, so every name whose
 * entry expired would cost a LOOKUP, where READDIRPLUS brings ~30 at once.
 */
#define SBX_CACHE_DIR_MIN_TIMEOUT 10.0

/*
 * libfuse's high-level API before 3.16.1 (Debian 12 has 3.14) drops what
 * opendir sets in cache_readdir and keep_cache: it answers the kernel's
 * OPENDIR with its own handle's flags, all 0 (seen in the reply's bytes;
 * upstream 98eb808 fixed it). So op_opendir notes the wish on its thread,
 * which is the one that writes the reply next, and the session's writev
 * (installed by sbx_fuse_install_io) sets the bits in that reply.
 */
static _Thread_local bool opendir_wants_cache;

static ssize_t reply_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	const struct fuse_out_header *h = iov[0].iov_base;
	(void)userdata;
	/* A notification (unique 0) sent meanwhile is not the reply. */
	if (opendir_wants_cache && iov[0].iov_len >= sizeof(*h) && h->unique) {
		opendir_wants_cache = false;
		if (count == 2 && h->error == 0 && iov[1].iov_len == sizeof(struct fuse_open_out))
			((struct fuse_open_out *)iov[1].iov_base)->open_flags |=
			    FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR;
	}
	return writev(fd, iov, count);
}

static ssize_t request_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	return read(fd, buf, len);
}

int sbx_fuse_install_io(struct fuse *f)
{
	static const struct fuse_custom_io io = {.writev = reply_writev, .read = request_read};
	struct fuse_session *se = fuse_get_session(f);
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

static int op_opendir(const char *path, struct fuse_file_info *fi)
{
	struct open_dir *d;
	struct sbx_node n;
	struct sbx_lease *l;
	if (resolve(path, &n, &l) == 0) {
		bool fs = n.kind == SBX_N_FS;
		if (fs && kernel_name_stale(l, path, n.sub)) {
			sbx_lease_put(l);
			return -ESTALE;
		}
		if (fs && (l->prov->caps & SBX_CAP_DIRECT_IO) &&
		    fs_cache_timeout >= SBX_CACHE_DIR_MIN_TIMEOUT)
			fi->cache_readdir = fi->keep_cache = opendir_wants_cache = true;
		sbx_lease_put(l);
	}
	d = sbx_xcalloc(1, sizeof(*d));
	d->path = sbx_xstrdup(path);
	fi->fh = (uintptr_t)d;
	return 0;
}

static int op_releasedir(const char *path, struct fuse_file_info *fi)
{
	struct open_dir *d = (struct open_dir *)(uintptr_t)fi->fh;
	dir_clear(d);
	free(d->ents);
	free(d->path);
	free(d);
	return 0;
}

/* Lists the directory into d (from the start: a first readdir or a rewind). */
static int dir_list(struct open_dir *d)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc = resolve(d->path, &n, &l);
	if (rc)
		return rc;
	struct fill_ctx fc = {d, NULL, sbx_path_prefix(d->path), n.sub};
	dir_clear(d);
	dir_add(d, ".", NULL);
	dir_add(d, "..", NULL);
	/*
	 * Offsets (so attributes reach the kernel) for local leases only:
	 * there a listing is lstat() of each name. A remote listing can differ
	 * from the file's stat (e2b lists a symlink with its target's times),
	 * and the remote tests count requests made the old way: there the
	 * listing goes to libfuse without offsets, as before.
	 */
	d->plus = false;
	if (n.kind == SBX_N_FS) {
		fc.lease = l;
		d->plus = l->prov->caps & SBX_CAP_DIRECT_IO;
		if (!sbx_fs_is_pseudo(n.sub))
			rc = sbx_fs_ops_for(l)->readdir(l, n.sub, fill_adapter, &fc, &err);
	} else {
		rc = sbx_ctl_readdir(mnt(), &n, l, fill_adapter, &fc);
	}
	sbx_lease_put(l);
	d->listed = rc == 0;
	return rc;
}

static int op_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct open_dir *d = (struct open_dir *)(uintptr_t)fi->fh;
	int rc;
	if ((off == 0 || !d->listed) && (rc = dir_list(d)))
		return rc;
	for (size_t i = d->plus ? (size_t)off : 0; i < d->n; i++) {
		struct dir_entry *e = &d->ents[i];
		/* Remote: no offsets, as before (libfuse keeps the listing itself). */
		if (filler(buf, e->name, e->has_st ? &e->st : NULL, d->plus ? (off_t)(i + 1) : 0,
			   e->has_st ? FUSE_FILL_DIR_PLUS : 0))
			break; /* the reply is full: the kernel asks again from i + 1 */
	}
	return 0;
}

static int fs_open(struct sbx_node *n, struct sbx_lease *l, int flags, mode_t mode,
		   struct fuse_file_info *fi)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_fs_file *f;
	if (sbx_fs_is_pseudo(n->sub))
		return -EACCES;
	int rc = sbx_fs_ops_for(l)->open(l, n->sub, flags, mode, &f, &err);
	if (rc)
		return rc;
	struct sbx_open *o = sbx_open_new(SBX_N_FS, NULL, flags);
	o->fsf = f;
	fi->fh = (uintptr_t)o;
	/* Page cache kept across opens: runs invalidate it, attribute changes drop it. */
	fi->keep_cache = 1;
	/*
	 * Direct-I/O providers (local) have nothing to do at close: writes are
	 * in the lease's file when write() returns. FOPEN_NOFLUSH spares the
	 * FLUSH round trip of every close (one of ~9 requests per file a
	 * `tar x` makes, one of ~4 of a `grep -r`). Remote providers upload
	 * at flush: they keep it.
	 */
	if (l->prov->caps & SBX_CAP_DIRECT_IO)
		fi->noflush = 1;
	return 0;
}

static int op_open(const char *path, struct fuse_file_info *fi)
{
	struct sbx_node n;
	struct sbx_lease *l;
	int rc = resolve(path, &n, &l);
	if (rc)
		return rc;
	if (n.kind == SBX_N_FS) {
		rc = kernel_name_stale(l, path, n.sub) ? -ESTALE : fs_open(&n, l, fi->flags, 0, fi);
		sbx_lease_put(l);
		return rc;
	}
	struct sbx_open *o;
	rc = sbx_ctl_open(mnt(), &n, l, fi->flags, &o); /* takes over the lease ref */
	if (rc)
		return rc;
	o->path = sbx_xstrdup(path);
	fi->fh = (uintptr_t)o;
	fi->direct_io = 1;
	if (sbx_node_is_runner(n.kind) || n.kind == SBX_N_TTY_DATA)
		fi->nonseekable = 1;
	return 0;
}

static int op_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	struct sbx_node n;
	struct sbx_lease *l;
	int rc = resolve_new(path, &n, &l);
	if (rc)
		return rc;
	if (n.kind != SBX_N_FS) {
		sbx_lease_put(l);
		/* Control files exist already; anything else cannot be created here. */
		return n.kind == SBX_N_NONE ? -EACCES : -EEXIST;
	}
	rc = fs_open(&n, l, fi->flags | O_CREAT, new_mode(l, mode), fi);
	if (!rc)
		sbx_kinval_forget(l->kinval, path);
	sbx_lease_put(l);
	return rc;
}

static int op_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct sbx_open *o = open_of(fi);
	struct sbx_error err = SBX_ERROR_INIT;
	note_caller(o->fsf != NULL);
	if (o->fsf)
		return (int)sbx_fs_ops_for(o->fsf->lease)->read(o->fsf, buf, size, off, &err);
	return (int)sbx_ctl_read(o, buf, size, off);
}

static int op_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct sbx_open *o = open_of(fi);
	struct sbx_error err = SBX_ERROR_INIT;
	note_caller(o->fsf != NULL);
	if (o->fsf) {
		ssize_t n = sbx_fs_ops_for(o->fsf->lease)->write(o->fsf, buf, size, off, &err);
		char mp[SBX_MOUNT_PATH_MAX];
		fh_path(mp, sizeof(mp), o->fsf);
		if (n > 0)
			sbx_aliases_changed(mp);
		return (int)n;
	}
	return (int)sbx_ctl_write(mnt(), o, buf, size, off);
}

static int op_flush(const char *path, struct fuse_file_info *fi)
{
	struct sbx_open *o = open_of(fi);
	struct sbx_error err = SBX_ERROR_INIT;
	note_caller(o->fsf != NULL);
	if (o->fsf)
		return sbx_fs_ops_for(o->fsf->lease)->flush(o->fsf, &err);
	return sbx_ctl_flush(mnt(), o);
}

static int op_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	struct sbx_open *o = open_of(fi);
	struct sbx_error err = SBX_ERROR_INIT;
	note_caller(o->fsf != NULL);
	if (o->fsf)
		return sbx_fs_ops_for(o->fsf->lease)->fsync(o->fsf, datasync, &err);
	return sbx_ctl_flush(mnt(), o);
}

static int op_release(const char *path, struct fuse_file_info *fi)
{
	struct sbx_open *o = open_of(fi);
	note_caller(o->fsf != NULL);
	if (o->fsf) {
		struct sbx_lease *l = o->fsf->lease;
		sbx_fs_ops_for(l)->release(o->fsf);
		o->fsf = NULL;
	} else {
		sbx_ctl_release(mnt(), o);
	}
	sbx_open_free(o);
	return 0;
}

/*
 * fallocate(2): the kernel sends it for a descriptor open for writing,
 * with only the modes FUSE carries (KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE).
 * A control file has no blocks to give: EOPNOTSUPP, which the kernel
 * takes for that call alone (ENOSYS, the answer of a missing handler,
 * would turn fallocate off for the whole mount).
 */
static int op_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	struct sbx_open *o = of(fi);
	struct sbx_error err = SBX_ERROR_INIT;
	char mp[SBX_MOUNT_PATH_MAX];
	int rc;
	if (!o || !o->fsf)
		return -EOPNOTSUPP;
	note_caller(true);
	rc = sbx_fs_ops_for(o->fsf->lease)->fallocate(o->fsf, mode, off, len, &err);
	fh_path(mp, sizeof(mp), o->fsf);
	if (!rc && mode != FALLOC_FL_KEEP_SIZE)
		sbx_aliases_changed(mp);
	return rc;
}

/*
 * lseek(2) with SEEK_DATA or SEEK_HOLE (the kernel answers the other
 * whences itself): a local lease's file answers as its disk does, so `cp`
 * and `tar -S` step over a sparse file's holes instead of reading them as
 * zeros; a remote copy (whose holes may be what is not downloaded yet) and
 * a control file answer as a file with no holes, from its size — the
 * kernel's own answer without a handler, but a handler's ENOSYS would turn
 * the call off for the local leases too.
 */
static off_t op_lseek(const char *path, off_t off, int whence, struct fuse_file_info *fi)
{
	struct sbx_open *o = of(fi);
	struct sbx_error err = SBX_ERROR_INIT;
	struct stat st;
	off_t r = -ENOSYS;
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (o && o->fsf && sbx_fs_ops_for(o->fsf->lease)->seek_data) {
		note_caller(true);
		r = sbx_fs_ops_for(o->fsf->lease)->seek_data(o->fsf, off, whence, &err);
	}
	if (r != -ENOSYS)
		return r;
	int rc = op_getattr(o && o->fsf ? NULL : path, &st, fi);
	if (rc)
		return rc;
	if (off < 0 || off >= st.st_size)
		return -ENXIO;
	return whence == SEEK_DATA ? off : st.st_size;
}

static int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_open *o = of(fi);
	int rc;
	if (o && o->fsf) {
		char mp[SBX_MOUNT_PATH_MAX];
		note_caller(true);
		rc = sbx_fs_ops_for(o->fsf->lease)
			 ->truncate(o->fsf->lease, o->fsf->path, o->fsf, size, &err);
		fh_path(mp, sizeof(mp), o->fsf);
		if (!rc)
			sbx_aliases_changed(mp);
		return rc;
	}
	rc = resolve(op_path(path, o), &n, &l);
	if (rc)
		return rc;
	if (n.kind == SBX_N_FS) {
		rc = sbx_fs_ops_for(l)->truncate(l, n.sub, NULL, size, &err);
		if (!rc)
			sbx_aliases_changed(path);
	} else {
		rc = sbx_ctl_truncate(mnt(), &n, l, o, size);
	}
	sbx_lease_put(l);
	return rc;
}

static int op_mkdir(const char *path, mode_t mode)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc = sbx_node_parse(path, &n);
	if (rc == -ENOENT || (rc == 0 && n.kind == SBX_N_LEASE)) {
		const char *name = path + 1;
		if (strchr(name, '/')) /* beside a lease's control files, or no such lease */
			return new_name_refused(path) ? -EACCES : -ENOENT;
		note_caller(false);
		rc = sbx_lease_create(mnt(), name, NULL, NULL, NULL, &err);
		if (rc)
			sbx_mount_error(mnt(), "mkdir", &err);
		return rc;
	}
	if (rc)
		return rc;
	rc = resolve(path, &n, &l);
	if (rc)
		return rc;
	if (n.kind == SBX_N_FS)
		rc = sbx_fs_ops_for(l)->mkdir(l, n.sub, new_mode(l, mode), &err);
	else
		rc = -EEXIST;
	if (!rc)
		sbx_kinval_forget(l->kinval, path);
	sbx_lease_put(l);
	return rc;
}

static int op_rmdir(const char *path)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc = resolve(path, &n, &l);
	if (rc) {
		if (rc == -ENOENT && n.kind == SBX_N_LEASE) {
			sbx_error_set(&err, ENOENT, SBX_E_NOT_FOUND, "rmdir: no lease %s", n.lease);
			sbx_mount_error(mnt(), "rmdir", &err);
		}
		return rc;
	}
	if (n.kind == SBX_N_LEASE) {
		rc = sbx_lease_remove(mnt(), n.lease, &err);
		if (rc)
			sbx_mount_error(mnt(), "rmdir", &err);
	} else if (n.kind == SBX_N_FS && strcmp(n.sub, "/")) {
		rc = sbx_fs_ops_for(l)->rmdir(l, n.sub, &err);
		if (!rc)
			sbx_kinval_forget(l->kinval, path);
	} else {
		rc = sbx_node_is_dir(n.kind) ? -EBUSY : -ENOTDIR;
	}
	sbx_lease_put(l);
	return rc;
}

/*
 * The fs/ operations on one path: classify (by resolver), refuse outside
 * fs/ (0 instead when `unchanged`, an expression on path and n, holds:
 * the operation would change nothing there), call.
 */
#define FS_ONLY_BY(resolver, path, n, l, rc, unchanged)                                            \
	do {                                                                                       \
		rc = resolver(path, &n, &l);                                                       \
		if (rc)                                                                            \
			return rc;                                                                 \
		if (n.kind != SBX_N_FS || !strcmp(n.sub, "/") || sbx_fs_is_pseudo(n.sub)) {        \
			rc = n.kind == SBX_N_NONE ? -ENOENT                                        \
			     : (unchanged)	  ? 0                                              \
						  : refuse_fixed(path, &n, l, __func__);                  \
			sbx_lease_put(l);                                                          \
			return rc;                                                                 \
		}                                                                                  \
	} while (0)
#define FS_ONLY(path, n, l, rc) FS_ONLY_BY(resolve, path, n, l, rc, false)

/*
 * EPERM, with the reason in `error`, for an operation of fn ("op_rename")
 * on a name that is not the sandbox's (a lease, a control file, fs/ itself,
 * fs/proc): `mv L L2` and `chmod 777 L` failed with no reason anywhere.
 */
static int refuse_fixed(const char *path, const struct sbx_node *n, struct sbx_lease *l,
			const char *fn)
{
	const char *op = strncmp(fn, "op_", 3) ? fn : fn + 3;
	if (n->kind != SBX_N_FS)
		return sbx_refuse(mnt(), l, EPERM, op,
				  "%s is sbxfs's, not the sandbox's: %s works under fs/", path, op);
	if (!strcmp(n->sub, "/"))
		return sbx_refuse(mnt(), l, EPERM, op, "%s is the sandbox's root: it takes no %s",
				  path, op);
	return sbx_refuse(mnt(), l, EPERM, op,
			  "%s: the sandbox's /proc, /sys and /dev are not mirrored", path);
}

/* The body of one: FS_ONLY_BY, then the mirror call on `sub`, then the aliases' note. */
#define FS_PATH_CALL(resolver, call, unchanged)                                                    \
	do {                                                                                       \
		FS_ONLY_BY(resolver, path, n, l, rc, unchanged);                                   \
		const char *sub = n.sub;                                                           \
		rc = sbx_fs_ops_for(l)->call;                                                      \
		if (!rc) {                                                                         \
			sbx_aliases_changed(path);                                                 \
			sbx_kinval_forget(l->kinval, path);                                        \
		}                                                                                  \
		sbx_lease_put(l);                                                                  \
		return rc;                                                                         \
	} while (0)

/* An fs/-only operation making one name: classify, refuse outside fs/, one mirror call. */
#define FS_PATH_OP(fn, params, call)                                                               \
	static int fn params                                                                       \
	{                                                                                          \
		struct sbx_node n;                                                                 \
		struct sbx_lease *l;                                                               \
		struct sbx_error err = SBX_ERROR_INIT;                                             \
		int rc;                                                                            \
		FS_PATH_CALL(resolve_new, call, false);                                            \
	}

/*
 * The same for operations that may come on an open file with no path
 * (nullpath_ok), and that change nothing on a name of sbxfs's when
 * `unchanged` holds (FS_ONLY_BY).
 */
#define FS_PATH_OR_FILE_OP(fn, params, call, unchanged)                                            \
	static int fn params                                                                       \
	{                                                                                          \
		struct sbx_node n;                                                                 \
		struct sbx_lease *l;                                                               \
		struct sbx_error err = SBX_ERROR_INIT;                                             \
		struct sbx_open *o = of(fi);                                                       \
		int rc;                                                                            \
		if (!path && o && o->fsf) {                                                        \
			const char *sub = o->fsf->path;                                            \
			char mp[SBX_MOUNT_PATH_MAX];                                               \
			note_caller(true);                                                         \
			l = o->fsf->lease;                                                         \
			rc = sbx_fs_ops_for(l)->call;                                              \
			fh_path(mp, sizeof(mp), o->fsf);                                           \
			if (!rc)                                                                   \
				sbx_aliases_changed(mp);                                           \
			return rc;                                                                 \
		}                                                                                  \
		path = op_path(path, o);                                                           \
		FS_PATH_CALL(resolve, call, unchanged);                                            \
	}

static int op_unlink(const char *path)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc;
	FS_ONLY(path, n, l, rc);
	rc = sbx_fs_ops_for(l)->unlink(l, n.sub, &err);
	if (!rc) { /* the count first: the other names' refresh shows it */
		sbx_inotab_unlink(l->inotab, path);
		sbx_aliases_changed(path);
		sbx_kinval_forget(l->kinval, path);
	}
	sbx_lease_put(l);
	return rc;
}
FS_PATH_OP(op_symlink, (const char *target, const char *path), symlink(l, target, sub, &err))

static int op_readlink(const char *path, char *buf, size_t size)
{
	struct sbx_node n;
	struct sbx_lease *l;
	int rc;
	FS_ONLY(path, n, l, rc);
	if (kernel_name_stale(l, path, n.sub)) {
		sbx_lease_put(l);
		return -ESTALE;
	}
	rc = shown_link(l, n.sub, buf, size);
	sbx_lease_put(l);
	return rc;
}

FS_PATH_OP(op_mknod, (const char *path, mode_t mode, dev_t dev),
	   mknod(l, sub, new_mode(l, mode), dev, &err))
/*
 * A chmod or chown of a name that is sbxfs's (a control file, a lease,
 * fs/ itself) to what it has already changes nothing and succeeds, as on
 * a disk: vim saving `code.py` sets its mode back after the write, which
 * left a refusal in `error` for a change nobody asked for, and `cp -a
 * DIR/. LEASE/fs/` failed ("preserving permissions for fs/.") though the
 * modes were equal. Any other is refused (refuse_fixed). Asked only of a
 * name FS_ONLY_BY would refuse; mode, uid, gid: (type)-1 for "not asked",
 * compared with what a stat of path shows.
 */
static bool fixed_has(const char *path, const struct sbx_node *n, mode_t mode, uid_t uid, gid_t gid)
{
	struct stat st;
	return (n->kind != SBX_N_FS || !strcmp(n->sub, "/")) && !op_getattr(path, &st, NULL) &&
	       (mode == (mode_t)-1 || (st.st_mode & 07777) == (mode & 07777)) &&
	       (uid == (uid_t)-1 || uid == st.st_uid) && (gid == (gid_t)-1 || gid == st.st_gid);
}

FS_PATH_OR_FILE_OP(op_chmod, (const char *path, mode_t mode, struct fuse_file_info *fi),
		   chmod(l, sub, mode, &err), fixed_has(path, &n, mode, (uid_t)-1, (gid_t)-1))
FS_PATH_OR_FILE_OP(op_chown, (const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi),
		   chown(l, sub, sbx_idmap_uid_in(l, uid), sbx_idmap_gid_in(l, gid), &err),
		   fixed_has(path, &n, (mode_t)-1, uid, gid))

static int op_rename(const char *from, const char *to, unsigned int flags)
{
	struct sbx_node n, n2;
	struct sbx_lease *l, *l2;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc;
	FS_ONLY(from, n, l, rc);
	rc = resolve_new(to, &n2, &l2);
	if (!rc && (n2.kind != SBX_N_FS || l2 != l || !strcmp(n2.sub, "/")))
		rc = -EXDEV; /* across leases: mv falls back to copy + unlink */
	if (!rc)
		rc = sbx_fs_ops_for(l)->rename(l, n.sub, n2.sub, flags, &err);
	if (!rc) { /* a replaced target lost a name; the names now mean other files */
		sbx_inotab_rename(l->inotab, from, to, flags & RENAME_EXCHANGE);
		sbx_aliases_changed(to);
		sbx_aliases_forget(to);
		sbx_aliases_forget(from);
		sbx_kinval_forget(l->kinval, to);
		sbx_kinval_forget(l->kinval, from);
	}
	sbx_lease_put(l2);
	sbx_lease_put(l);
	return rc;
}

static int op_link(const char *from, const char *to)
{
	struct sbx_node n, n2;
	struct sbx_lease *l, *l2;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc;
	FS_ONLY(from, n, l, rc);
	rc = resolve_new(to, &n2, &l2);
	if (!rc && (n2.kind != SBX_N_FS || l2 != l))
		rc = -EXDEV;
	if (!rc)
		rc = sbx_fs_ops_for(l)->link(l, n.sub, n2.sub, &err);
	if (!rc) { /* the kernel knows the old name as another inode: its nlink changed */
		sbx_inotab_link(l->inotab, from, to);
		sbx_aliases_changed(from);
		sbx_kinval_forget(l->kinval, to);
		fuse_invalidate_path(fuse_get_context()->fuse, from);
	}
	sbx_lease_put(l2);
	sbx_lease_put(l);
	return rc;
}

static int op_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_open *o = of(fi);
	int rc;
	if (!path && o && o->fsf) {
		char mp[SBX_MOUNT_PATH_MAX];
		note_caller(true);
		rc = sbx_fs_ops_for(o->fsf->lease)->utimens(o->fsf->lease, o->fsf->path, tv, &err);
		fh_path(mp, sizeof(mp), o->fsf);
		if (!rc)
			sbx_aliases_changed(mp); /* as chmod and chown on an open file */
		return rc;
	}
	rc = resolve(op_path(path, o), &n, &l);
	if (rc)
		return rc;
	if (n.kind == SBX_N_FS && strcmp(n.sub, "/") && !sbx_fs_is_pseudo(n.sub)) {
		rc = sbx_fs_ops_for(l)->utimens(l, n.sub, tv, &err);
		if (!rc)
			sbx_aliases_changed(path);
	} else
		rc = 0; /* `touch exec` and friends: harmless on synthetic files */
	sbx_lease_put(l);
	return rc;
}

static int op_statfs(const char *path, struct statvfs *st)
{
	struct sbx_node n;
	struct sbx_lease *l;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc = resolve(path, &n, &l);
	if (rc == 0 && n.kind == SBX_N_FS && !sbx_fs_is_pseudo(n.sub)) {
		rc = sbx_fs_ops_for(l)->statfs(l, n.sub, st, &err);
	} else {
		memset(st, 0, sizeof(*st));
		st->f_bsize = st->f_frsize = 4096;
		st->f_namemax = 255;
		rc = 0;
	}
	sbx_lease_put(l);
	return rc;
}

/*
 * Extended attributes, with -o xattr, where the lease's provider carries
 * them (local): an fs/ entry's own. Elsewhere (a control file, a lease
 * directory, a remote lease's fs/, fs/'s /proc, /sys, /dev) the answer is
 * ENOTSUP for that call alone. Without -o xattr the answer is ENOSYS,
 * which the kernel keeps for the whole mount and answers EOPNOTSUPP
 * itself from then on: `ls -l` asks for every file's ACL and SELinux
 * label, and each ask answered here costs a FUSE round trip (ls -lR of a
 * local lease's /usr/share/doc, 0.29 s without, 0.96 s with).
 */
static int xattrs_on;

void sbx_fuse_set_xattr(int on)
{
	xattrs_on = on;
}

static int xattr_op(const char *path, const struct sbx_xattr_req *rq)
{
	struct sbx_node n;
	struct sbx_lease *l;
	const struct sbx_fs_ops *ops = NULL;
	struct sbx_error err = SBX_ERROR_INIT;
	int rc;
	if (!xattrs_on)
		return -ENOSYS;
	rc = resolve(path, &n, &l);
	if (!rc && n.kind == SBX_N_FS && !sbx_fs_is_pseudo(n.sub))
		ops = sbx_fs_ops_for(l);
	if (!rc && (!ops || !ops->xattr))
		rc = -ENOTSUP;
	if (!rc) {
		rc = (int)ops->xattr(l, n.sub, rq, &err);
		if (!rc && (rq->op == SBX_XATTR_SET || rq->op == SBX_XATTR_REMOVE))
			sbx_aliases_changed(path); /* its ctime, through its other names */
	}
	sbx_lease_put(l);
	return rc;
}

static int op_getxattr(const char *path, const char *name, char *value, size_t size)
{
	struct sbx_xattr_req rq = {SBX_XATTR_GET, .name = name, .buf = value, .size = size};
	return xattr_op(path, &rq);
}

static int op_listxattr(const char *path, char *list, size_t size)
{
	struct sbx_xattr_req rq = {SBX_XATTR_LIST, .buf = list, .size = size};
	return xattr_op(path, &rq);
}

static int op_setxattr(const char *path, const char *name, const char *value, size_t size,
		       int flags)
{
	struct sbx_xattr_req rq = {SBX_XATTR_SET, .name = name, .value = value, .size = size,
				   .flags = flags};
	return xattr_op(path, &rq);
}

static int op_removexattr(const char *path, const char *name)
{
	struct sbx_xattr_req rq = {SBX_XATTR_REMOVE, .name = name};
	return xattr_op(path, &rq);
}

static void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	/*
	 * The kernel keeps fs/ names and attributes for a short timeout; every
	 * fs/ path it learns is noted (kinval.c) and invalidated after each run,
	 * so what a run wrote shows at once. No negative entries: a run may
	 * create any name.
	 */
	cfg->entry_timeout = fs_cache_timeout;
	cfg->attr_timeout = fs_cache_timeout;
	cfg->negative_timeout = 0;
	sbx_kinval_set_callback(invalidate_path, fuse_get_context()->fuse);
	sbx_kinval_set_gone_callback(root_name_gone);
	sbx_aliases_set_callback(invalidate_path, fuse_get_context()->fuse);
	sbx_run_set_abandon_check(requester_killed);
	sbx_runs_set_caller(requester_pid);
	sbx_tty_set_abandon_check(requester_killed);
	cfg->use_ino = 1;
	cfg->nullpath_ok = 1;
	cfg->hard_remove = 1;
	cfg->kernel_cache = 0;
	/* O_TRUNC reaches open: `>` and `>>` on the env file differ, and no extra setattr. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * Every listing is a readdirplus (not only after the kernel has seen
	 * lookups in it): `du`, `find -size`, `rsync` then stat from the
	 * kernel's cache instead of one lookup round trip per name (du -s
	 * fs/usr: 6x the host's time with the automatic choice).
	 */
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	/* Modes arrive unmasked with the caller's umask, which providers apply once. */
	if (conn->capable & FUSE_CAP_DONT_MASK)
		conn->want |= FUSE_CAP_DONT_MASK;
	/* A changed mtime or size seen on an attribute refresh drops cached pages. */
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	return fuse_get_context()->private_data;
}

const struct fuse_operations sbx_fuse_ops = {
    .init = op_init,
    .getattr = op_getattr,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .releasedir = op_releasedir,
    .open = op_open,
    .create = op_create,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .release = op_release,
    .truncate = op_truncate,
    .fallocate = op_fallocate,
    .lseek = op_lseek,
    .mkdir = op_mkdir,
    .rmdir = op_rmdir,
    .unlink = op_unlink,
    .rename = op_rename,
    .link = op_link,
    .chmod = op_chmod,
    .chown = op_chown,
    .utimens = op_utimens,
    .symlink = op_symlink,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .statfs = op_statfs,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
};
