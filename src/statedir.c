/*
 * statedir — the one-daemon lock and the lease table file (see statedir.h).
 */
#include "statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/fsutil.h"
#include "base/keyfile.h"
#include "base/sysutil.h"

#define TABLE "leases.json"

static char *state_path(const char *state_dir, const char *file)
{
	struct sbx_buf b = SBX_BUF_INIT;
	sbx_buf_addf(&b, "%s/%s", state_dir, file);
	return sbx_buf_detach(&b, NULL);
}

/*
 * Whether a FUSE filesystem is mounted on path (/proc/self/mountinfo: the
 * 5th field, unescaped; the type after " - "): another kind mounted there
 * since is not the holder's.
 */
static bool mounted_on(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, mp[PATH_MAX];
	size_t cap = 0;
	bool found = false;
	if (!f)
		return true; /* cannot tell: as before, the holder is alive */
	while (!found && getline(&line, &cap, f) > 0) {
		const char *q = line;
		size_t n = 0;
		for (int field = 0; field < 4 && q; field++)
			if ((q = strchr(q, ' ')))
				q++;
		for (; q && *q && *q != ' ' && n + 1 < sizeof(mp); n++) {
			unsigned o;
			if (q[0] == '\\' && sscanf(q + 1, "%3o", &o) == 1) {
				mp[n] = (char)o;
				q += 4;
			} else {
				mp[n] = *q++;
			}
		}
		mp[n] = '\0';
		const char *type = q ? strstr(q, " - ") : NULL;
		found = type && !strcmp(mp, path) && !strncmp(type + 3, "fuse", 4);
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * The lock is held: by a live daemon (refused at once), or by one whose mount
 * is gone and that is still exiting (saving what it owes): `fusermount3 -u
 * M; sbxfs M` at once met that one. Waits for it up to LOCK_WAIT_MS.
 */
#define LOCK_WAIT_MS 30000
static int lock_wait(int fd, const char *holder)
{
	if (!*holder || mounted_on(holder))
		return EWOULDBLOCK;
	for (long long end = sbx_now_ms() + LOCK_WAIT_MS; sbx_now_ms() < end;) {
		usleep(50 * 1000);
		if (!flock(fd, LOCK_EX | LOCK_NB))
			return 0;
		if (errno != EWOULDBLOCK)
			return errno;
	}
	return EWOULDBLOCK;
}

int sbx_statedir_make(const char *state_dir, struct sbx_error *err)
{
	struct stat st;
	int rc = sbx_mkdir_p(state_dir, 0700);
	if (rc)
		return sbx_error_set(err, rc, SBX_E_INTERNAL, "cannot create state dir %s: %s",
				     state_dir, strerror(-rc));
	if (stat(state_dir, &st))
		return sbx_error_set(err, errno, SBX_E_INTERNAL, "state dir %s: %s", state_dir,
				     strerror(errno));
	return sbx_trusted_check("state dir", state_dir, &st, err);
}

int sbx_statedir_lock(const char *state_dir, const char *mountpoint, int *out,
		      struct sbx_error *err)
{
	char holder[PATH_MAX + 64] = "";
	char mp[PATH_MAX];
	int rc, fd;
	char *p = state_path(state_dir, "lock");
	fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cannot open %s: %s", p,
				   strerror(errno));
		free(p);
		return rc;
	}
	int e = 0;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		e = errno;
		ssize_t n = e == EWOULDBLOCK ? pread(fd, holder, sizeof(holder) - 1, 0) : -1;
		holder[n > 0 ? n : 0] = '\0';
		holder[strcspn(holder, "\n")] = '\0';
		if (e == EWOULDBLOCK)
			e = lock_wait(fd, holder);
	}
	if (e) {
		close(fd);
		if (e == EWOULDBLOCK && *holder && !mounted_on(holder))
			rc = sbx_error_set(
			    err, EBUSY, SBX_E_EXECUTION_FAILED,
			    "state dir %s is still held by the sbxfs that was mounted "
			    "on %s: its mount is gone, but it has not exited in %d s "
			    "(still saving what it owed? see its log)",
			    state_dir, holder, LOCK_WAIT_MS / 1000);
		else if (e == EWOULDBLOCK)
			rc = sbx_error_set(err, EBUSY, SBX_E_EXECUTION_FAILED,
					   "state dir %s is in use by the sbxfs mounted on %s "
					   "(one daemon per state dir: unmount it, or give this "
					   "mount its own -o state_dir=)",
					   state_dir, *holder ? holder : "(unknown mountpoint)");
		else
			rc = sbx_error_set(err, e, SBX_E_INTERNAL, "cannot lock %s: %s", p,
					   strerror(e));
		free(p);
		return rc;
	}
	free(p);
	if (!realpath(mountpoint, mp))
		snprintf(mp, sizeof(mp), "%s", mountpoint);
	int n = snprintf(holder, sizeof(holder), "%s\n", mp);
	if (ftruncate(fd, 0) || pwrite(fd, holder, (size_t)n, 0) != n) {
		rc = sbx_error_set(err, errno ? errno : EIO, SBX_E_INTERNAL,
				   "cannot write %s/lock: %s", state_dir, strerror(errno));
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

/* The way out, named in every refusal. */
static int refuse(struct sbx_error *err, int e, const char *path, const char *why)
{
	return sbx_error_set(err, e, SBX_E_INTERNAL,
			     "lease table %s: %s; the mount is refused so no lease is lost: "
			     "move the file away (or put %s.prev back in its place), then mount "
			     "and bring the leases back with `sbxfs --list` and "
			     "`echo \"attach NAME ID provider=P\" > MOUNTPOINT/ctl`",
			     path, why, path);
}

int sbx_statedir_read_table(const char *state_dir, json_t **root, struct sbx_error *err)
{
	char why[SBX_ERR_MSG_MAX / 2];
	struct sbx_buf text = SBX_BUF_INIT;
	json_error_t jerr;
	struct stat st;
	int rc = 0;
	char *p = state_path(state_dir, TABLE);
	*root = NULL;
	/* O_NONBLOCK: a FIFO in its place must not hang the open. */
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e != ENOENT) {
			snprintf(why, sizeof(why), "cannot open it: %s", strerror(e));
			rc = refuse(err, e == ELOOP ? EINVAL : e, p, why);
		}
		free(p);
		return rc;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		rc = refuse(err, EINVAL, p, "not a regular file");
		free(p);
		return rc;
	}
	for (;;) {
		sbx_buf_grow(&text, 65536);
		ssize_t r = read(fd, text.buf + text.len, 65536);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(why, sizeof(why), "cannot read it: %s", strerror(errno));
			rc = refuse(err, errno, p, why);
			break;
		}
		if (r == 0)
			break;
		text.len += (size_t)r;
	}
	close(fd);
	if (!rc) {
		json_t *j = json_loadb(text.buf ? text.buf : "", text.len, 0, &jerr);
		if (!j) {
			snprintf(why, sizeof(why), "not valid JSON (line %d: %s)", jerr.line,
				 jerr.text);
			rc = refuse(err, EINVAL, p, why);
		} else if (!json_is_array(json_object_get(j, "leases"))) {
			json_decref(j);
			rc = refuse(err, EINVAL, p, "no \"leases\" array");
		} else {
			*root = j;
		}
	}
	sbx_buf_release(&text);
	free(p);
	return rc;
}

int sbx_statedir_write_table(const char *state_dir, const char *text, struct sbx_error *err)
{
	char *p = state_path(state_dir, TABLE), *prev = state_path(state_dir, TABLE ".prev");
	char *tmp = state_path(state_dir, TABLE ".tmp");
	int rc = 0, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	size_t len = strlen(text);
	if (fd < 0) {
		rc = -errno;
	} else {
		for (size_t off = 0; off < len && !rc;) {
			ssize_t w = write(fd, text + off, len - off);
			if (w < 0 && errno != EINTR)
				rc = -errno;
			else if (w > 0)
				off += (size_t)w;
		}
		if (!rc && fsync(fd))
			rc = -errno;
		if (close(fd) && !rc)
			rc = -errno;
	}
	/* The replaced generation stays as .prev; the table itself is never missing. */
	if (!rc && (unlink(prev) && errno != ENOENT))
		rc = -errno;
	if (!rc && link(p, prev) && errno != ENOENT)
		rc = -errno;
	if (!rc && rename(tmp, p))
		rc = -errno;
	if (rc) {
		unlink(tmp);
		sbx_error_set(err, rc, SBX_E_INTERNAL, "cannot save the lease table %s: %s", p,
			      strerror(-rc));
	} else {
		/* The rename itself reaches the disk with the directory. */
		int dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	free(p);
	free(prev);
	free(tmp);
	return rc;
}
