/* fsutil — see fsutil.h. */
#include "base/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/pathutil.h"
#include "base/xalloc.h"

int sbx_mkdir_p(const char *path, mode_t mode)
{
	char tmp[4096];
	size_t n = strlen(path);
	if (n == 0 || n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

int sbx_mkdir_parent(char *path, mode_t mode)
{
	char *slash = strrchr(path, '/');
	int rc;
	if (!slash || slash == path)
		return 0;
	*slash = '\0';
	rc = sbx_mkdir_p(path, mode);
	*slash = '/';
	return rc;
}

static int put_all(int fd, const void *data, size_t len, bool sock)
{
	const char *p = data;
	while (len) {
		ssize_t w = sock ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int sbx_write_all(int fd, const void *data, size_t len)
{
	return put_all(fd, data, len, false);
}

int sbx_send_all(int fd, const void *data, size_t len)
{
	return put_all(fd, data, len, true);
}

int sbx_write_file_atomic(const char *path, const void *data, size_t len)
{
	char tmp[4200];
	int fd, rc;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = sbx_write_all(fd, data, len);
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int sbx_append_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600), rc;
	if (fd < 0)
		return -errno;
	rc = sbx_write_all(fd, data, len);
	close(fd);
	return rc;
}

int sbx_append_file_capped(const char *path, const void *data, size_t len, off_t cap)
{
	static pthread_mutex_t rotate_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
	struct stat st;
	int rc = 0;
	pthread_mutex_lock(&rotate_lock);
	if (stat(path, &st) == 0 && st.st_size > 0 && st.st_size + (off_t)len > cap) {
		struct sbx_buf old = SBX_BUF_INIT;
		sbx_buf_addf(&old, "%s.1", path);
		if (rename(path, old.buf) < 0)
			rc = -errno;
		sbx_buf_release(&old);
	}
	if (!rc)
		rc = sbx_append_file(path, data, len);
	pthread_mutex_unlock(&rotate_lock);
	return rc;
}

int sbx_read_file(const char *path, struct sbx_buf *out, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		sbx_buf_grow(out, 65536);
		ssize_t r = read(fd, out->buf + out->len, 65536);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		out->len += (size_t)r;
		out->buf[out->len] = '\0';
		if (out->len > max) {
			close(fd);
			return -EFBIG;
		}
	}
	close(fd);
	return 0;
}

static int rm_rf_at(int dirfd, const char *name, dev_t dev)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;
	if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
		int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			return -errno;
		}
		struct dirent *de;
		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			rm_rf_at(fd, de->d_name, dev);
		}
		closedir(d);
		if (unlinkat(dirfd, name, AT_REMOVEDIR))
			return -errno;
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		return -EBUSY; /* a mount point: never delete across it */
	if (unlinkat(dirfd, name, 0))
		return -errno;
	return 0;
}

int sbx_disk_reserve_check(int fd, unsigned long long written, size_t more,
			   unsigned long long *avail_mib, unsigned long long *reserve_mib)
{
	const unsigned long long mib = 1ull << 20;
	struct statvfs v;
	if ((written + more) / mib == written / mib || fstatvfs(fd, &v) || (v.f_flag & ST_RDONLY))
		return 0;
	unsigned long long size = (unsigned long long)v.f_blocks * v.f_frsize;
	unsigned long long avail = (unsigned long long)v.f_bavail * v.f_frsize;
	unsigned long long reserve = size / 20 < 1024 * mib ? size / 20 : 1024 * mib;
	if (reserve < mib)
		reserve = mib;
	if (avail >= reserve + more)
		return 0;
	*avail_mib = avail / mib;
	*reserve_mib = (reserve + mib - 1) / mib;
	return -ENOSPC;
}

int sbx_rm_rf(const char *path)
{
	struct stat st;
	if (lstat(path, &st))
		return errno == ENOENT ? 0 : -errno;
	return rm_rf_at(AT_FDCWD, path, st.st_dev);
}

void sbx_iso_time(time_t t, char *buf, size_t size)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void sbx_file_time(time_t t, char *buf, size_t size)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y%m%dT%H%M%SZ", &tm);
}

bool sbx_tid_dying(pid_t tid)
{
	char path[64], line[256];
	unsigned long long mask;
	bool dying = false;
	FILE *f;
	if (tid <= 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT;
	while (!dying && fgets(line, sizeof(line), f))
		if ((sscanf(line, "SigPnd: %llx", &mask) == 1 ||
		     sscanf(line, "ShdPnd: %llx", &mask) == 1) &&
		    (mask & (1ULL << (SIGKILL - 1))))
			dying = true;
	fclose(f);
	return dying;
}

char *sbx_path_absolute(const char *path)
{
	char cwd[PATH_MAX];
	if (path[0] == '/')
		return sbx_xstrdup(path);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/%s", cwd, path);
	return sbx_buf_detach(&b, NULL);
}

/* realpath of path's longest existing prefix, with the rest appended; false if none resolves. */
static bool resolve_existing(const char *path, char out[PATH_MAX])
{
	char head[PATH_MAX];
	size_t keep = strlen(path), o;
	if (!keep || keep >= sizeof(head))
		return false;
	for (;;) {
		memcpy(head, keep ? path : ".", keep ? keep : 1);
		head[keep ? keep : 1] = '\0';
		if (realpath(head, out))
			break;
		if ((errno != ENOENT && errno != ENOTDIR) || !keep)
			return false;
		while (keep && path[keep - 1] == '/') /* the last name, and the slashes before it */
			keep--;
		while (keep && path[keep - 1] != '/')
			keep--;
		while (keep > 1 && path[keep - 1] == '/') /* but "/" itself stays */
			keep--;
	}
	const char *rest = path + keep;
	while (*rest == '/')
		rest++;
	o = strlen(out);
	return !*rest || snprintf(out + o, PATH_MAX - o, "%s%s", strcmp(out, "/") ? "/" : "",
				  rest) < (int)(PATH_MAX - o);
}

bool sbx_path_resolved_under(const char *path, const char *dir)
{
	char p[PATH_MAX], d[PATH_MAX];
	return resolve_existing(dir, d) && resolve_existing(path, p) && sbx_path_under(p, d);
}
