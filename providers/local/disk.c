/*
 * disk — the writable disk under a lease's overlay (`<dir>/rw`), capped at
 * diskMB so that a full disk is ENOSPC.
 *
 * Two kinds. "tmpfs" needs nothing but is RAM: what the lease writes is
 * charged to its memory cgroup, so a lease writes at most about memoryMB of
 * files before the OOM killer (not ENOSPC) stops it. "ext4" is a sparse
 * image `<dir>/disk.img` made by mkfs.ext4 and mounted through an
 * auto-clearing loop device: it lives on the host's disk, its page cache
 * is reclaimable, and only what is written takes space. "auto" (the
 * default) uses ext4 where /dev/loop-control and mkfs.ext4 exist, and
 * tmpfs otherwise or if the ext4 set-up fails for another reason than a
 * full state dir: that one fails the create with ENOSPC, since a lease
 * quietly on RAM would be a silent failure. Not here: the overlay.
 */
#include "local.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/xalloc.h"

extern char **environ;

static const char *mkfs_path(void)
{
	static const char *const where[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4",
					    "/usr/bin/mkfs.ext4"};
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

static int mkfs(const char *img)
{
	const char *tool = mkfs_path();
	char *argv[] = {"mkfs.ext4",
			"-q",
			"-F",
			"-m",
			"0",
			"-i",
			"8192",
			"-O",
			"^has_journal",
			"-E",
			"lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0",
			(char *)img,
			NULL};
	pid_t pid;
	int st, e;

	if (!tool)
		return -ENOENT;
	if ((e = posix_spawn(&pid, tool, NULL, NULL, argv, environ)) != 0)
		return -e;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* Binds img to a free loop device that frees itself at unmount; returns its fd. */
static int loop_attach(int img, char *dev, size_t size)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC), e = -EBUSY;
	if (ctl < 0)
		return -errno;
	for (int tries = 0; tries < 16 && e == -EBUSY; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			e = -errno;
			break;
		}
		snprintf(dev, size, "/dev/loop%d", n);
		int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			e = -errno;
			break;
		}
		struct loop_config cfg = {.fd = (unsigned)img, .info.lo_flags = LO_FLAGS_AUTOCLEAR};
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
			close(ctl);
			return fd;
		}
		e = -errno; /* EBUSY: another lease took it first; try the next one */
		close(fd);
	}
	close(ctl);
	return e;
}

/*
 * Whether a failed mkfs ran out of room: mkfs.ext4 only exits 1, so the
 * image's file system is asked instead, while the image still holds what
 * mkfs wrote (less than SBX_DISK_ROOM_MIN left means it filled it).
 */
#define SBX_DISK_ROOM_MIN (1L << 20)
static bool state_dir_full(int img)
{
	struct statvfs sv;
	return fstatvfs(img, &sv) == 0 && (unsigned long long)sv.f_bavail * sv.f_frsize <
					      (unsigned long long)SBX_DISK_ROOM_MIN;
}

/* Mounts the ext4 image open on fd at rw, through an auto-clearing loop device. */
static int mount_image(int fd, const char *img, const char *rw, struct sbx_error *err)
{
	char dev[64];
	int loop = loop_attach(fd, dev, sizeof(dev)), e = 0;
	if (loop < 0)
		return sbx_error_set(err, loop, 0, "loop device for %s: %s", img, strerror(-loop));
	if (mount(dev, rw, "ext4", MS_NOATIME, "") < 0)
		e = sbx_error_set(err, errno, 0, "mounting %s at %s: %s", dev, rw, strerror(errno));
	close(loop); /* closing the last fd of an auto-clearing loop frees it */
	return e;
}

static int mount_ext4(const char *dir, const char *rw, long disk_mb, struct sbx_error *err)
{
	struct sbx_buf img = SBX_BUF_INIT;
	int fd, e;

	sbx_buf_addf(&img, "%s/disk.img", dir);
	if ((fd = open(img.buf, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		e = sbx_error_set(err, errno, 0, "%s: %s", img.buf, strerror(errno));
		goto out;
	}
	if (ftruncate(fd, (off_t)disk_mb << 20) < 0) {
		e = sbx_error_set(err, errno, 0, "%s: %s", img.buf, strerror(errno));
		goto out_unlink;
	}
	if ((e = mkfs(img.buf)) < 0) {
		if (state_dir_full(fd))
			e = sbx_error_set(err, ENOSPC, 0,
					  "no room for the lease's disk image %s: the state dir's "
					  "file system is full (free space there, or set "
					  "providers.local.disk to tmpfs)",
					  img.buf);
		else
			e = sbx_error_set(err, e, 0, "mkfs.ext4 %s failed", img.buf);
		goto out_unlink;
	}
	if ((e = mount_image(fd, img.buf, rw, err)) < 0)
		goto out_unlink;
	goto out;
out_unlink:
	unlink(img.buf);
out:
	if (fd >= 0)
		close(fd);
	sbx_buf_release(&img);
	return e;
}

int lcl_disk_remount(const char *dir, const char *rw, struct sbx_error *err)
{
	char *img = sbx_xasprintf("%s/disk.img", dir);
	int fd = open(img, O_RDWR | O_NOFOLLOW | O_CLOEXEC), e;
	e = fd < 0 ? sbx_error_set(err, errno, 0, "%s: %s", img, strerror(errno))
		   : mount_image(fd, img, rw, err);
	if (fd >= 0)
		close(fd);
	free(img);
	return e;
}

static int mount_tmpfs(const char *rw, long disk_mb, struct sbx_error *err)
{
	char opts[64];
	snprintf(opts, sizeof(opts), "size=%ldm,mode=0755", disk_mb);
	if (mount("sbxfs-disk", rw, "tmpfs", 0, opts) < 0)
		return sbx_error_set(err, errno, 0, "tmpfs at %s: %s", rw, strerror(errno));
	return 0;
}

const char *lcl_disk_name(enum lcl_disk kind)
{
	return kind == LCL_DISK_EXT4 ? "ext4" : kind == LCL_DISK_TMPFS ? "tmpfs" : "auto";
}

int lcl_disk_mount(const char *dir, const char *rw, long disk_mb, enum lcl_disk want,
		   enum lcl_disk *used, struct sbx_error *err)
{
	int e;
	if (want == LCL_DISK_AUTO && (access("/dev/loop-control", W_OK) < 0 || !mkfs_path()))
		want = LCL_DISK_TMPFS;
	if (want != LCL_DISK_TMPFS) {
		if ((e = mount_ext4(dir, rw, disk_mb, err)) == 0) {
			*used = LCL_DISK_EXT4;
			return 0;
		}
		/* A full state dir, or one whose files cannot be that big, is the
		 * user's to know: RAM instead of disk would hide it. */
		if (want == LCL_DISK_EXT4 || e == -ENOSPC || e == -EFBIG)
			return e;
		sbx_log(SBX_LOG_WARN, "local: %s; using tmpfs", err ? err->msg : "ext4 failed");
		sbx_error_clear(err);
	}
	*used = LCL_DISK_TMPFS;
	return mount_tmpfs(rw, disk_mb, err);
}
