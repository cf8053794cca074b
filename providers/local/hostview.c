/*
 * hostview — what a local lease on the `host` template sees of the host:
 * an allowlist, laid into a lower layer above the host's "/" (the overlay
 * is view:/). The layer is a small read-only tmpfs built once per daemon at
 * <state>/local/hostview-TIME-PID (~1,000 entries, mostly certificates and
 * alternatives), so a new lease copies nothing; views no mounted lease uses
 * any more are unmounted when the next one is built.
 *
 * The host's "/" stays the overlay's (read-only) lowest layer, but every
 * top-level entry outside the allowlist (/usr, /bin, /sbin, /lib*, and the
 * mount points the lease fills itself) is hidden by a whiteout. /etc is rebuilt: an opaque
 * directory holding copies of what programs need (passwd and group but
 * never shadow, resolv.conf, hosts, certificates, alternatives,
 * ld.so.cache ...) and nothing else (no /etc/ssh, no shadow, no
 * credentials). /var is empty but for tmp, log, cache and lib. A lease may
 * change its /etc (copy-up into its own disk); the view and the host's
 * never change.
 * doc/DESIGN.md ("Threat model") says why an allowlist.
 */
#include "local.h"
#include "base/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* Top-level host entries a lease sees as they are. */
int lcl_make_opaque(int upper, const char *rel, mode_t mode)
{
	char path[PATH_MAX];

	if (mkdirat(upper, rel, mode) < 0 && errno != EEXIST)
		return -errno;
	if (fchmodat(upper, rel, mode, 0) < 0)
		return -errno;
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", upper, rel);
	return lsetxattr(path, "trusted.overlay.opaque", "y", 1, 0) < 0 ? -errno : 0;
}

static const char *const shown[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
/* Top-level names the lease itself provides (init's mounts, the masks of storage.c, etc, var). */
static const char *const own[] = {"proc", "sys",   "dev", "tmp", "root", "home", "run",
				  "mnt",  "media", "srv", "etc", "var",	 NULL};
/* What of the host's /etc is copied (fnmatch patterns; directories whole). */
static const char *const etc_files[] = {
    "passwd",
    "group",
    "hosts",
    "hostname",
    "resolv.conf",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "ld.so.*",
    "ssl",
    "ca-certificates*",
    "alternatives",
    "localtime",
    "timezone",
    "os-release",
    "debian_version",
    "lsb-release",
    "issue",
    "profile",
    "profile.d",
    "bash.bashrc",
    "bash_completion.d",
    "inputrc",
    "environment",
    "shells",
    "protocols",
    "services",
    "networks",
    "ethertypes",
    "rpc",
    "netconfig",
    "mime.types",
    "magic*",
    "mailcap",
    "mtab",
    "python3*",
    "perl",
    "gitconfig",
    "npmrc",
    "pip.conf",
    "wgetrc",
    "vim",
    "emacs",
    "skel",
    "locale.*",
    "default",
    "mke2fs.conf",
    "matplotlibrc",
    "fonts",
    "X11",
    "xdg",
    "xml",
    "sgml",
    "terminfo",
    "manpath.config",
    "java-*",
    "maven",
    "gdb",
    "glvnd",
    "gtk-*",
    "groff",
    "ImageMagick-*",
    "iproute2",
    "dpkg",
    "debconf.conf",
    "fpc*.cfg",
    "gnucobol",
    NULL,
};
static const char *const var_dirs[][2] = {
    {"tmp", "1777"}, {"log", "755"}, {"cache", "755"}, {"lib", "755"}};

static bool listed(const char *const *list, const char *name)
{
	for (; *list; list++)
		if (!fnmatch(*list, name, 0))
			return true;
	return false;
}

/* Copies host entry src (an fd of its directory + name) to dst in dstdir: files,
 * links and directories (recursively), with owner and mode. 0 or -errno. */
static int copy_entry(int srcdir, const char *name, int dstdir, bool follow)
{
	struct stat st;
	char buf[65536];
	int e = 0, in, out;

	if (fstatat(srcdir, name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(srcdir, name, buf, sizeof(buf) - 1);
		if (n < 0)
			return -errno;
		buf[n] = '\0';
		if (symlinkat(buf, dstdir, name) < 0)
			return -errno;
	} else if (S_ISDIR(st.st_mode)) {
		if (mkdirat(dstdir, name, 0700) < 0)
			return -errno;
		int s = openat(srcdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int d = openat(dstdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *dir = s >= 0 ? fdopendir(s) : NULL;
		struct dirent *de;
		while (!e && dir && d >= 0 && (de = readdir(dir)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				e = copy_entry(s, de->d_name, d, false);
		if (dir)
			closedir(dir);
		else if (s >= 0)
			close(s);
		if (d >= 0)
			close(d);
		if (!dir || d < 0)
			return e ? e : -EIO;
	} else if (S_ISREG(st.st_mode)) {
		if ((in = openat(srcdir, name, O_RDONLY | O_CLOEXEC)) < 0)
			return errno == EACCES ? 0 : -errno;
		out = openat(dstdir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			     0600);
		ssize_t n = 0;
		while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
			if (write(out, buf, n) != n) {
				n = -1;
				break;
			}
		e = out < 0 || n < 0 ? -errno : 0;
		close(in);
		if (out >= 0)
			close(out);
		if (e)
			return e;
	} else {
		return 0; /* no devices, fifos or sockets */
	}
	if (fchownat(dstdir, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISLNK(st.st_mode) && fchmodat(dstdir, name, st.st_mode & 07777, 0) < 0)
		return -errno;
	return 0;
}

static int build_etc(int upper)
{
	int e = lcl_make_opaque(upper, "etc", 0755), src, dst;
	DIR *d;
	struct dirent *de;

	if (e < 0)
		return e;
	if ((src = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((dst = openat(upper, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    !(d = fdopendir(src))) {
		e = -errno;
		close(src);
		if (dst >= 0)
			close(dst);
		return e;
	}
	while (!e && (de = readdir(d)))
		if (listed(etc_files, de->d_name))
			/* resolv.conf is often a link into /run, which leases do not see */
			e = copy_entry(src, de->d_name, dst, !strcmp(de->d_name, "resolv.conf"));
	closedir(d);
	close(dst);
	return e;
}

static int build_var(int upper)
{
	int e = lcl_make_opaque(upper, "var", 0755);
	char rel[32];
	for (size_t i = 0; !e && i < sizeof(var_dirs) / sizeof(var_dirs[0]); i++) {
		mode_t mode = (mode_t)strtol(var_dirs[i][1], NULL, 8);
		snprintf(rel, sizeof(rel), "var/%s", var_dirs[i][0]);
		if (mkdirat(upper, rel, mode) < 0 || fchmodat(upper, rel, mode, 0) < 0)
			e = -errno;
	}
	return e;
}

/* Lays the allowlist into dir (an O_PATH fd). 0 or -errno. */
static int build(int dir)
{
	DIR *d = opendir("/");
	struct dirent *de;
	int e = 0;

	if (!d)
		return -errno;
	while (!e && (de = readdir(d))) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") || listed(shown, n) || listed(own, n))
			continue;
		if (mknodat(dir, n, S_IFCHR | 0000, makedev(0, 0)) < 0)
			e = -errno; /* a whiteout: not even the name shows */
	}
	closedir(d);
	if (!e)
		e = build_etc(dir);
	if (!e)
		e = build_var(dir);
	return e;
}

static void drop(const char *path)
{
	umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
	rmdir(path);
}

/* Removes the views of earlier daemons that no mounted overlay uses. */
static void prune(const char *keep)
{
	char path[PATH_MAX], needle[PATH_MAX + 16], *mi = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	struct dirent *de;
	DIR *d;

	if (!f || getdelim(&mi, &cap, '\0', f) < 0 || !(d = opendir(lcl_cfg.state_dir))) {
		if (f)
			fclose(f);
		free(mi);
		return;
	}
	fclose(f);
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "hostview-", 9))
			continue;
		snprintf(path, sizeof(path), "%s/%s", lcl_cfg.state_dir, de->d_name);
		/* Kept: ours, a live daemon's (its pid is in the name), or under an overlay. */
		const char *dash = strrchr(de->d_name, '-');
		pid_t owner = dash ? (pid_t)atoi(dash + 1) : 0;
		snprintf(needle, sizeof(needle), "lowerdir=%s:", path);
		if ((!keep || strcmp(path, keep)) && !strstr(mi, needle) &&
		    (owner <= 0 || owner == getpid() || kill(owner, 0) < 0))
			drop(path);
	}
	closedir(d);
	free(mi);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *view;

void lcl_hostview_release(void)
{
	pthread_mutex_lock(&lock);
	if (lcl_cfg.state_dir)
		prune(NULL); /* ours too, unless a lease (which outlives us) still uses it */
	free(view);
	view = NULL;
	pthread_mutex_unlock(&lock);
}

const char *lcl_hostview_dir(struct sbx_error *err)
{
	struct statfs sf;
	char path[PATH_MAX];
	int fd, e;

	pthread_mutex_lock(&lock);
	if (view && statfs(view, &sf) == 0 && sf.f_type == TMPFS_MAGIC)
		goto out;
	free(view); /* (gone: removed by a process that shared it, say) */
	view = NULL;
	snprintf(path, sizeof(path), "%s/hostview-%lld-%d", lcl_cfg.state_dir,
		 (long long)time(NULL), (int)getpid());
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		sbx_error_set(err, errno, 0, "%s: %s", path, strerror(errno));
		goto out;
	}
	/* A tmpfs of its own: overlayfs refuses a layer inside another layer ("/"). */
	if (mount("sbxfs-hostview", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=64m") < 0) {
		sbx_error_set(err, errno, 0, "tmpfs at %s: %s", path, strerror(errno));
		rmdir(path);
		goto out;
	}
	if ((fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		sbx_error_set(err, errno, 0, "%s: %s", path, strerror(errno));
		drop(path);
		goto out;
	}
	e = build(fd);
	close(fd);
	if (e < 0) {
		sbx_error_set(err, -e, 0, "building the host view %s: %s", path, strerror(-e));
		drop(path);
		goto out;
	}
	/* (names given though a remount ignores them: valgrind checks the pointers) */
	mount("sbxfs-hostview", path, "tmpfs", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
	view = sbx_xstrdup(path);
	prune(view);
out:
	pthread_mutex_unlock(&lock);
	return view;
}
