/*
 * hostview — what a local lease on the `host` template sees of the host:
 * an allowlist, laid into the overlay's upper/ before it is mounted.
 *
 * The host's "/" stays the overlay's (read-only) lower, but every
 * top-level entry outside the allowlist (/usr, /bin, /sbin, /lib*, and the
 * mount points the lease fills itself) is hidden by a whiteout. /etc is rebuilt: an opaque
 * directory holding copies of what programs need (passwd and group but
 * never shadow, resolv.conf, hosts, certificates, alternatives,
 * ld.so.cache ...) and nothing else (no /etc/ssh, no shadow, no
 * credentials). /var is empty but for tmp, log, cache and lib. The copies
 * are the lease's own: it may change them, the host's never change.
 * doc/DESIGN.md ("Threat model") says why an allowlist.
 */
#include "local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Top-level host entries a lease sees as they are. */
static const char *const shown[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", NULL};
/* Top-level names the lease itself provides (init's mounts, the masks of storage.c, etc, var). */
static const char *const own[] = {"proc", "sys", "dev", "tmp", "root", "home", "run",
				  "mnt",  "media", "srv", "etc", "var", NULL};
/* What of the host's /etc is copied (fnmatch patterns; directories whole). */
static const char *const etc_files[] = {
    "passwd", "group", "hosts", "hostname", "resolv.conf", "nsswitch.conf", "host.conf",
    "gai.conf", "ld.so.*", "ssl", "ca-certificates*", "alternatives", "localtime", "timezone",
    "os-release", "debian_version", "lsb-release", "issue", "profile", "profile.d",
    "bash.bashrc", "bash_completion.d", "inputrc", "environment", "shells", "protocols",
    "services", "networks", "ethertypes", "rpc", "netconfig", "mime.types", "magic*", "mailcap",
    "mtab", "python3*", "perl", "gitconfig", "npmrc", "pip.conf", "wgetrc", "vim", "emacs",
    "skel", "locale.*", "default", "mke2fs.conf", "matplotlibrc", "fonts", "X11", "xdg", "xml",
    "sgml", "terminfo", "manpath.config", "java-*", "maven", "gdb", "glvnd", "gtk-*", "groff",
    "ImageMagick-*", "iproute2", "dpkg", "debconf.conf", "fpc*.cfg", "gnucobol", NULL,
};
static const char *const var_dirs[][2] = {{"tmp", "1777"}, {"log", "755"}, {"cache", "755"},
					  {"lib", "755"}};

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

int lcl_hostview_build(int upper)
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
		if (mknodat(upper, n, S_IFCHR | 0000, makedev(0, 0)) < 0)
			e = -errno; /* a whiteout: not even the name shows */
	}
	closedir(d);
	if (!e)
		e = build_etc(upper);
	if (!e)
		e = build_var(upper);
	return e;
}
