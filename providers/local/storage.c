/*
 * storage — the file system of one local lease: `<dir>/rw` is a disk of
 * diskMB (disk.c; a full disk is ENOSPC, inside the lease and through fs/
 * alike) that holds the overlay's upper/ and work/; `<dir>/root` is the overlay of the
 * template (read-only lower) and upper/, mounted in the host's mount
 * namespace so that fs/ operations reach it directly.
 *
 * Host data that a lease must not see (/root, /home, /tmp, /run, /mnt,
 * /media, /srv, and the mount's state directory) is hidden by opaque
 * directories in upper/; on the host template, everything else but an
 * allowlist too (a lower layer from hostview.c). This module does not start processes and knows
 * nothing of cgroups.
 */
#include "local.h"
#include "base/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <stdbool.h>
#include <unistd.h>

#include "base/buf.h"

static const struct {
	const char *name;
	mode_t mode;
} masked[] = {
    {"root", 0700}, {"home", 0755},  {"tmp", 01777}, {"run", 0755},
    {"mnt", 0755},  {"media", 0755}, {"srv", 0755},
};

const char *lcl_template_lower(const char *template_name)
{
	struct stat st;
	char sh[PATH_MAX];

	if (!template_name || !*template_name || !strcmp(template_name, "host"))
		return "/";
	if (template_name[0] != '/' || stat(template_name, &st) < 0 || !S_ISDIR(st.st_mode))
		return NULL;
	snprintf(sh, sizeof(sh), "%s/bin/sh", template_name);
	return faccessat(AT_FDCWD, sh, X_OK, AT_EACCESS) == 0 ? template_name : NULL;
}

/*
 * Hides the host directory `path` (absolute, inside the lower "/") unless it
 * already lies below a masked directory: its parents are created in upper/
 * with the lower's owner and mode, the last one opaque.
 */
static int mask_path(int upper, const char *path)
{
	char rel[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
		size_t n = strlen(masked[i].name);
		if (!strncmp(path + 1, masked[i].name, n) && (!path[1 + n] || path[1 + n] == '/'))
			return 0;
	}
	snprintf(rel, sizeof(rel), "%s", path + 1);
	for (char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		char host[PATH_MAX + 1] = "/";
		strcat(host, rel);
		if (stat(host, &st) < 0)
			return -errno;
		if (mkdirat(upper, rel, st.st_mode & 07777) < 0 && errno != EEXIST)
			return -errno;
		if (fchownat(upper, rel, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
		    fchmodat(upper, rel, st.st_mode & 07777, 0) < 0)
			return -errno;
		*s = '/';
	}
	return *rel ? lcl_make_opaque(upper, rel, 0700) : 0;
}

static int mask_host(const char *upper_path, const char *lower)
{
	int upper = open(upper_path, O_PATH | O_DIRECTORY | O_CLOEXEC), e = 0;
	if (upper < 0)
		return -errno;
	for (size_t i = 0; !e && i < sizeof(masked) / sizeof(masked[0]); i++)
		e = lcl_make_opaque(upper, masked[i].name, masked[i].mode);
	if (!e && !strcmp(lower, "/") && lcl_cfg.state_dir) {
		char real[PATH_MAX], *top = sbx_xstrdup(lcl_cfg.state_dir);
		/* The mount's state directory is the parent of <state>/local. */
		if (realpath(dirname(top), real))
			e = mask_path(upper, real);
		free(top);
	}
	close(upper);
	return e;
}

static void add_escaped(struct sbx_buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == ',' || *s == ':' || *s == '\\')
			sbx_buf_addch(b, '\\');
		sbx_buf_addch(b, *s);
	}
}

/* Mounts the overlay of lower (the template) and rw's upper/ at root. */
static int mount_overlay(const char *rw, const char *root, const char *lower, struct sbx_error *err)
{
	struct sbx_buf opts = SBX_BUF_INIT;
	int rc, e = 0;
	sbx_buf_adds(&opts, "lowerdir=");
	if (!strcmp(lower, "/")) {
		/* the host template: its allowlist (hostview.c) over the host's "/" */
		const char *view = lcl_hostview_dir(err);
		if (!view) {
			sbx_buf_release(&opts);
			return -err->err;
		}
		add_escaped(&opts, view);
		sbx_buf_adds(&opts, ":");
	}
	add_escaped(&opts, lower);
	sbx_buf_adds(&opts, ",upperdir=");
	add_escaped(&opts, rw);
	sbx_buf_adds(&opts, "/upper,workdir=");
	add_escaped(&opts, rw);
	sbx_buf_adds(&opts, "/work");
	/* nodev: a device node made through fs/ (or by the sandbox) is only a name.
	 * xino=on: the layers are on two file systems (host "/" and the lease
	 * disk), and without it a lower and an upper file may share an st_ino;
	 * xino=auto falls back to off where a layer's file system has a null
	 * uuid, as the host's "/" has here (DESIGN.md). A kernel that does not
	 * know xino (EINVAL) gets the mount without it. */
	size_t plain = opts.len;
	sbx_buf_adds(&opts, ",xino=on");
	rc = mount("sbxfs-root", root, "overlay", MS_NODEV, opts.buf);
	if (rc < 0 && errno == EINVAL) {
		opts.buf[opts.len = plain] = '\0';
		rc = mount("sbxfs-root", root, "overlay", MS_NODEV, opts.buf);
	}
	if (rc < 0)
		e = sbx_error_set(err, errno, 0, "overlay at %s: %s", root, strerror(errno));
	sbx_buf_release(&opts);
	return e;
}

int lcl_storage_create(const char *dir, const char *lower, long disk_mb, enum lcl_disk *disk,
		       struct sbx_error *err)
{
	struct sbx_buf rw = SBX_BUF_INIT, root = SBX_BUF_INIT, opts = SBX_BUF_INIT;
	int e = 0;

	sbx_buf_addf(&rw, "%s/rw", dir);
	sbx_buf_addf(&root, "%s/root", dir);
	if (mkdir(dir, 0700) < 0) {
		e = sbx_error_set(err, errno, 0, "mkdir %s: %s", dir, strerror(errno));
		goto out;
	}
	if (mkdir(rw.buf, 0700) < 0 || mkdir(root.buf, 0755) < 0) {
		e = sbx_error_set(err, errno, 0, "mkdir in %s: %s", dir, strerror(errno));
		goto out_rmdir;
	}
	if ((e = lcl_disk_mount(dir, rw.buf, disk_mb, *disk, disk, err)) < 0)
		goto out_rmdir;
	sbx_buf_addf(&opts, "%s/lost+found", rw.buf);
	rmdir(opts.buf); /* ext4's, not the lease's */
	sbx_buf_reset(&opts);
	sbx_buf_addf(&opts, "%s/upper", rw.buf);
	/* chmod: the upper root is the lease's "/", whatever our umask. */
	if (mkdir(opts.buf, 0755) < 0 || chmod(opts.buf, 0755) < 0 ||
	    (e = mask_host(opts.buf, lower)) < 0) {
		e = sbx_error_set(err, e ? e : -errno, 0, "preparing %s: %s", opts.buf,
				  strerror(e ? -e : errno));
		goto out_umount;
	}
	sbx_buf_reset(&opts);
	sbx_buf_addf(&opts, "%s/work", rw.buf);
	if (mkdir(opts.buf, 0700) < 0) {
		e = sbx_error_set(err, errno, 0, "mkdir %s: %s", opts.buf, strerror(errno));
		goto out_umount;
	}
	if ((e = mount_overlay(rw.buf, root.buf, lower, err)) < 0)
		goto out_umount;
	e = 0;
	goto out;
out_umount:
	umount2(rw.buf, MNT_DETACH);
out_rmdir:
	sbx_buf_reset(&opts);
	sbx_buf_addf(&opts, "%s/disk.img", dir);
	unlink(opts.buf);
	rmdir(root.buf);
	rmdir(rw.buf);
	rmdir(dir);
out:
	sbx_buf_release(&rw);
	sbx_buf_release(&root);
	sbx_buf_release(&opts);
	return e;
}

/* Whether the directory name is a mount's root: its device is not dir's. */
static bool mounted_at(const char *dir, const char *name)
{
	struct stat d, m;
	return stat(dir, &d) == 0 && fstatat(AT_FDCWD, name, &m, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISDIR(m.st_mode) && m.st_dev != d.st_dev;
}

int lcl_storage_reopen(const char *dir, const char *lower, enum lcl_disk disk,
		       struct sbx_error *err)
{
	char *rw = sbx_xasprintf("%s/rw", dir), *root = sbx_xasprintf("%s/root", dir);
	bool made = false;
	int e = 0;
	if (mounted_at(dir, root)) {
		/* the whole storage is as the dead init left it: kept */
	} else if (!mounted_at(dir, rw)) {
		if (disk != LCL_DISK_EXT4)
			e = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND,
					  "its disk was tmpfs (memory) and is gone");
		else
			made = !(e = lcl_disk_remount(dir, rw, err));
	}
	if (!e && !mounted_at(dir, root) && (e = mount_overlay(rw, root, lower, err)) < 0 && made)
		umount2(rw, MNT_DETACH);
	free(rw);
	free(root);
	return e;
}

/* Removes everything below dirfd that lies on device dev; 0 or the first -errno. */
static int rm_tree(int dirfd, dev_t dev)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *de;
	int first = 0;

	if (!d) {
		close(dirfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st;
		int e = 0;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (st.st_dev != dev) {
			e = -EBUSY; /* a mount we could not remove: never walk into it */
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, de->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			e = sub < 0 ? -errno : rm_tree(sub, dev);
			if (!e && unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0)
				e = -errno;
		} else if (unlinkat(dirfd, de->d_name, 0) < 0) {
			e = -errno;
		}
		if (e && !first)
			first = e;
	}
	closedir(d);
	return first;
}

static int unmount_one(const char *path)
{
	if (umount2(path, UMOUNT_NOFOLLOW) == 0 || errno == EINVAL || errno == ENOENT)
		return 0;
	if (errno == EBUSY && umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		return 0;
	return -errno;
}

int lcl_storage_destroy(const char *dir, struct sbx_error *err)
{
	struct sbx_buf p = SBX_BUF_INIT;
	struct stat st;
	int e, fd;

	sbx_buf_addf(&p, "%s/root", dir);
	e = unmount_one(p.buf);
	sbx_buf_reset(&p);
	sbx_buf_addf(&p, "%s/rw", dir);
	if (!e)
		e = unmount_one(p.buf);
	sbx_buf_release(&p);
	if (e)
		return sbx_error_set(err, e, 0, "unmounting %s: %s", dir, strerror(-e));
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT
			   ? 0
			   : sbx_error_set(err, errno, 0, "%s: %s", dir, strerror(errno));
	if (fstat(fd, &st) < 0) {
		close(fd);
		return sbx_error_set(err, errno, 0, "%s: %s", dir, strerror(errno));
	}
	if ((e = rm_tree(fd, st.st_dev)) < 0 || rmdir(dir) < 0)
		return sbx_error_set(err, e ? e : -errno, 0, "removing %s: %s", dir,
				     strerror(e ? -e : errno));
	return 0;
}
