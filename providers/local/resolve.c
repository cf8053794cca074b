/*
 * resolve — opening a path inside a directory as if that directory were
 * "/": the one guard that keeps every file operation of a local lease
 * inside the lease's root, whatever symlinks the sandbox has made.
 *
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) does it in the kernel.
 * Where openat2 is missing (kernels before 5.6; valgrind 3.19, which
 * answers ENOSYS to syscalls it does not know) the same resolution
 * is done here in user space: one component at a time with
 * openat(O_PATH | O_NOFOLLOW) from the root's descriptor, so the kernel
 * never follows a link on our behalf; symlinks are read and walked from
 * here (absolute ones from the root), ".." stops at the root, and after 40
 * links the walk fails with ELOOP, as the kernel's would.
 *
 * The walk also serves paths of PATH_MAX bytes or more, which openat2
 * refuses whole (ENAMETOOLONG: one system call's limit) but which fs/
 * reaches relative to a deep directory: each of its openat() calls takes
 * one component, so the path's length is bounded only by SBX_FS_PATH_MAX,
 * and the boundary is the walk's, as without openat2.
 *
 * Not here: which open flags a caller may pass (files.c filters them).
 */
#include "local.h"
#include "base/xalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "base/pathmax.h"

#define MAX_LINKS 40 /* the kernel's MAXSYMLINKS */

/*
 * The directories from the root down to where the walk is: dirs[0] is the
 * root (borrowed), the others are O_PATH descriptors the walk owns. ".."
 * is a pop, so it never leaves the root and never asks the kernel for a
 * parent that a concurrent rename may have moved out of it.
 */
struct walk {
	int *dirs;
	size_t n, cap;
	int links; /* symlinks followed so far */
};

static int walk_cur(const struct walk *w)
{
	return w->dirs[w->n - 1];
}

static void walk_pop_to(struct walk *w, size_t n)
{
	while (w->n > n)
		close(w->dirs[--w->n]);
}

/* Takes fd over (closed on failure). 0 or -errno. */
static int walk_push(struct walk *w, int fd)
{
	if (w->n == w->cap) {
		size_t cap = w->cap * 2;
		int *dirs = sbx_xrealloc(w->dirs, cap * sizeof(*dirs));
		w->dirs = dirs;
		w->cap = cap;
	}
	w->dirs[w->n++] = fd;
	return 0;
}

/*
 * The text to walk next after the link `fd` (an O_PATH descriptor of the
 * symlink itself): its target followed by `rest`. Magic links (procfs
 * links whose text is an absolute path or an object such as "pipe:[12]",
 * which the kernel would jump through instead of reading) are refused with
 * ELOOP, as RESOLVE_NO_MAGICLINKS does; procfs's ordinary links ("self",
 * "mounts" -> "self/mounts") have relative texts and are followed.
 * A new string or NULL with *e set.
 */
static char *link_text(struct walk *w, int fd, const char *rest, int *e)
{
	char target[PATH_MAX];
	struct statfs fs;
	ssize_t n;

	if (++w->links > MAX_LINKS) {
		*e = -ELOOP;
		return NULL;
	}
	if ((n = readlinkat(fd, "", target, sizeof(target))) < 0) {
		*e = -errno;
		return NULL;
	}
	if (n == (ssize_t)sizeof(target)) {
		*e = -ENAMETOOLONG;
		return NULL;
	}
	target[n] = '\0';
	if (fstatfs(fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC &&
	    (target[0] == '/' || strstr(target, ":["))) {
		*e = -ELOOP;
		return NULL;
	}
	size_t rlen = strlen(rest);
	char *text = sbx_xmalloc((size_t)n + 1 + rlen + 1);
	memcpy(text, target, (size_t)n);
	text[n] = '/';
	memcpy(text + n + 1, rest, rlen + 1);
	if (!rlen)
		text[n] = '\0'; /* a trailing "/" would make the target a directory */
	return text;
}

/* An O_PATH descriptor of name in dir if name is a symlink, else -1. */
static int link_at(int dir, const char *name)
{
	struct stat st;
	int fd = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode))
		return fd;
	if (fd >= 0)
		close(fd);
	return -1;
}

/* Steps into name, a component before the last: 0 (*link set when it is a
 * symlink to follow) or -errno. */
static int go_down(struct walk *w, const char *name, int *link)
{
	struct stat st;
	int fd;

	if (!strcmp(name, "."))
		return 0;
	if (!strcmp(name, "..")) {
		walk_pop_to(w, w->n > 1 ? w->n - 1 : 1);
		return 0;
	}
	if ((fd = openat(walk_cur(w), name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (S_ISLNK(st.st_mode)) {
		*link = fd;
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		close(fd);
		return -ENOTDIR;
	}
	return walk_push(w, fd);
}

/*
 * Opens name, the last component, in the directory the walk is in: the fd
 * or -errno, or *link set when it is a symlink to follow. The kernel never
 * follows it (O_NOFOLLOW is always added): when the open fails or opens a
 * link and the caller's flags follow links, a symlink there is walked.
 */
static int open_last(struct walk *w, const char *name, bool slash, int flags, mode_t mode,
		     int *link)
{
	int fd, e;

	if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
		/* A directory the walk holds already ("/", "a/..", "."). */
		if (!strcmp(name, ".."))
			walk_pop_to(w, w->n > 1 ? w->n - 1 : 1);
		fd = openat(walk_cur(w), ".", flags | O_CLOEXEC, mode);
		return fd < 0 ? -errno : fd;
	}
	if (slash && (flags & O_CREAT))
		return -EISDIR; /* as the kernel: "name/" cannot be created */
	/* A trailing "/" follows even with O_NOFOLLOW; O_CREAT|O_EXCL never does. */
	bool follow =
	    slash || (!(flags & O_NOFOLLOW) && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL));
	int how = flags | O_NOFOLLOW | O_CLOEXEC | (slash ? O_DIRECTORY : 0);
	fd = openat(walk_cur(w), name, how, mode);
	e = fd < 0 ? -errno : 0;
	if (!follow || (fd >= 0 && !(how & O_PATH)))
		return fd < 0 ? e : fd;
	if (fd >= 0) { /* O_PATH opens a link itself */
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode))
			*link = fd;
		return *link >= 0 ? 0 : fd;
	}
	/* Failed (ELOOP, ENOTDIR ...): because it is a link to follow? */
	*link = link_at(walk_cur(w), name);
	return *link >= 0 ? 0 : e;
}

int lcl_resolve_walk(int rootfd, const char *path, int flags, mode_t mode)
{
	struct walk w = {.n = 1, .cap = 16};
	size_t plen = strlen(path);
	char *text, *p;
	int r;

	if (!plen)
		return -ENOENT;
	if (plen >= SBX_FS_PATH_MAX)
		return -ENAMETOOLONG;
	w.dirs = sbx_xmalloc(w.cap * sizeof(*w.dirs));
	text = sbx_xstrdup(path);
	w.dirs[0] = rootfd;
	p = text;
	for (;;) {
		if (*p == '/')
			walk_pop_to(&w, 1); /* an absolute path or link target starts at the root */
		while (*p == '/')
			p++;
		char *name = p, *end = p + strcspn(p, "/"), *next = end;
		while (*next == '/')
			next++;
		bool last = !*next, slash = *end == '/';
		char saved = *end;
		int link = -1;

		*end = '\0';
		r = last ? open_last(&w, name, slash, flags, mode, &link)
			 : go_down(&w, name, &link);
		*end = saved;
		if (link < 0 && (last || r < 0))
			break;
		if (link < 0) {
			p = next;
			continue;
		}
		/* Walk the link's target, then what followed it (a trailing "/" too). */
		char *more = link_text(&w, link, last ? (slash ? "/" : "") : next, &r);
		close(link);
		if (!more)
			break;
		free(text);
		p = text = more;
	}
	walk_pop_to(&w, 1);
	free(w.dirs);
	free(text);
	return r;
}

enum { OPENAT2_UNKNOWN = 0, OPENAT2_WORKS, OPENAT2_MISSING };

/* Whether openat2 may be tried: decided at the first call, then once more
 * if it turns out to be missing. Process-wide. */
static atomic_int openat2_state;

int lcl_resolve_open(int rootfd, const char *path, int flags, mode_t mode)
{
	int state = atomic_load(&openat2_state);
	if (state == OPENAT2_UNKNOWN) {
		const char *no = getenv("SBXFS_NO_OPENAT2");
		state = no && *no && strcmp(no, "0") ? OPENAT2_MISSING : OPENAT2_WORKS;
		atomic_store(&openat2_state, state);
		if (state == OPENAT2_MISSING)
			sbx_log(SBX_LOG_INFO,
				"local: SBXFS_NO_OPENAT2 set: resolving paths in user space");
	}
	if (state == OPENAT2_WORKS && strlen(path) < PATH_MAX) {
		struct open_how how = {
		    .flags = (unsigned long long)(flags | O_CLOEXEC),
		    /* openat2 refuses a mode without a create (glibc's __O_TMPFILE
		     * has O_DIRECTORY in it: the whole of O_TMPFILE is tested) */
		    .mode =
			(flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode & 07777 : 0,
		    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
		};
		/* EAGAIN: a rename raced the lookup (the kernel's guard against escapes). */
		for (int tries = 0; tries < 8; tries++) {
			long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
			if (fd >= 0)
				return (int)fd;
			if (errno == ENOSYS)
				break;
			if (errno != EAGAIN && errno != EINTR)
				return -errno;
		}
		if (errno != ENOSYS)
			return -EAGAIN;
		if (atomic_exchange(&openat2_state, OPENAT2_MISSING) != OPENAT2_MISSING)
			sbx_log(SBX_LOG_INFO, "local: no openat2 (kernel before 5.6, or valgrind): "
					      "resolving paths in user space");
	}
	return lcl_resolve_walk(rootfd, path, flags, mode & 07777);
}
