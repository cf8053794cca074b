/*
 * memprov — the in-memory test provider (see memprov.h). One mutex guards
 * the file table and the counters, so the fake serves several threads.
 */
#include "memprov.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uthash.h>

#include "base/buf.h"

struct mfile {
	UT_hash_handle hh;
	char *path;
	struct sbx_stat st;
	struct sbx_buf data; /* content, or a symlink's target */
};

struct mstate {
	pthread_mutex_t lock; /* protects everything below */
	struct mfile *files;
	long clock; /* logical mtime source */
	int calls[MP_NOPS];
	int fail_err[MP_NOPS];
	int fail_times[MP_NOPS];
};

#define MS(inst) ((struct mstate *)memprov_of(inst)->priv)

struct memprov *memprov_of(struct sbx_instance *inst)
{
	return (struct memprov *)inst;
}

/* Counts the call; returns -errno if a failure is armed (lock held). */
static int enter_locked(struct mstate *ms, enum memprov_op op, struct sbx_error *err)
{
	ms->calls[op]++;
	if (!ms->fail_err[op] || !ms->fail_times[op])
		return 0;
	if (ms->fail_times[op] > 0)
		ms->fail_times[op]--;
	return sbx_error_set(err, ms->fail_err[op], SBX_E_NONE, "memprov: injected failure (op %d)",
			     (int)op);
}

#define ENTER(inst, op, err)                                                                       \
	struct mstate *ms = MS(inst);                                                              \
	pthread_mutex_lock(&ms->lock);                                                             \
	int rc = enter_locked(ms, op, err);                                                        \
	if (rc)                                                                                    \
		goto out;

#define LEAVE()                                                                                    \
	out:                                                                                       \
	pthread_mutex_unlock(&ms->lock);                                                           \
	return rc;

static struct mfile *find(struct mstate *ms, const char *path)
{
	struct mfile *f;
	HASH_FIND_STR(ms->files, path, f);
	return f;
}

static void tick(struct mstate *ms, struct mfile *f)
{
	ms->clock++;
	f->st.mtime.tv_sec = 1700000000 + ms->clock;
	f->st.mtime.tv_nsec = 0;
	f->st.ctime = f->st.mtime;
	f->st.size = S_ISDIR(f->st.mode) ? 4096 : (off_t)f->data.len;
}

static const char *parent_of(const char *path, char *buf, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	snprintf(buf, size, "%.*s", (int)n, path);
	return buf;
}

/* Adds an entry; ENOENT without a parent directory, EEXIST if taken. */
static int add(struct mstate *ms, const char *path, mode_t mode, struct mfile **out)
{
	char pbuf[4096];
	struct mfile *p = find(ms, parent_of(path, pbuf, sizeof(pbuf)));
	if (find(ms, path))
		return -EEXIST;
	if (strcmp(path, "/") && (!p || !S_ISDIR(p->st.mode)))
		return -ENOENT;
	struct mfile *f = calloc(1, sizeof(*f));
	f->path = strdup(path);
	sbx_buf_init(&f->data);
	f->st.mode = mode;
	f->st.nlink = S_ISDIR(mode) ? 2 : 1;
	f->st.uid = 1000;
	f->st.gid = 1000;
	tick(ms, f);
	HASH_ADD_KEYPTR(hh, ms->files, f->path, strlen(f->path), f);
	if (p)
		tick(ms, p);
	if (out)
		*out = f;
	return 0;
}

static void drop(struct mstate *ms, struct mfile *f)
{
	HASH_DEL(ms->files, f);
	sbx_buf_release(&f->data);
	free(f->path);
	free(f);
}

static bool is_child(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	if (n == 1)
		return path[0] == '/' && path[1] && !strchr(path + 1, '/');
	return !strncmp(path, dir, n) && path[n] == '/' && !strchr(path + n + 1, '/');
}

/* ---- the provider slots ---------------------------------------------------- */

static int mp_stat(struct sbx_instance *inst, const char *path, struct sbx_stat *st,
		   struct sbx_error *err)
{
	ENTER(inst, MP_STAT, err);
	struct mfile *f = find(ms, path);
	if (!f)
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "no such file: %s", path);
	else
		*st = f->st;
	LEAVE();
}

static int mp_list(struct sbx_instance *inst, const char *path, sbx_list_fn fn, void *ctx,
		   struct sbx_error *err)
{
	ENTER(inst, MP_LIST, err);
	struct mfile *d = find(ms, path), *f, *tmp;
	if (!d || !S_ISDIR(d->st.mode)) {
		rc = sbx_error_set(err, d ? ENOTDIR : ENOENT, SBX_E_NONE, "cannot list %s", path);
		goto out;
	}
	HASH_ITER(hh, ms->files, f, tmp)
	if (is_child(f->path, path) && fn(ctx, strrchr(f->path, '/') + 1, &f->st))
		break;
	LEAVE();
}

static int mp_read(struct sbx_instance *inst, const char *path, off_t off, off_t len,
		   sbx_sink_fn sink, void *ctx, struct sbx_error *err)
{
	ENTER(inst, MP_READ, err);
	struct mfile *f = find(ms, path);
	if (!f || S_ISDIR(f->st.mode)) {
		rc = sbx_error_set(err, f ? EISDIR : ENOENT, SBX_E_NONE, "cannot read %s", path);
		goto out;
	}
	size_t end =
	    len < 0 || (size_t)(off + len) > f->data.len ? f->data.len : (size_t)(off + len);
	/* Small chunks, as a network stream would come. */
	for (size_t at = (size_t)off; at < end && !rc; at += 4096)
		rc = sink(ctx, f->data.buf + at, end - at < 4096 ? end - at : 4096);
	LEAVE();
}

static int mp_write(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		    struct sbx_error *err)
{
	ENTER(inst, MP_WRITE, err);
	struct mfile *f = find(ms, path);
	if (!f)
		rc = add(ms, path, S_IFREG | (mode & 07777), &f);
	if (rc || S_ISDIR(f->st.mode)) {
		rc = sbx_error_set(err, rc ? rc : -EISDIR, SBX_E_NONE, "cannot write %s", path);
		goto out;
	}
	sbx_buf_reset(&f->data);
	sbx_buf_grow(&f->data, (size_t)size);
	ssize_t n = pread(fd, f->data.buf, (size_t)size, 0);
	if (n != size) {
		rc = sbx_error_set(err, EIO, SBX_E_NONE, "short read from fd");
		goto out;
	}
	f->data.len = (size_t)n;
	f->data.buf[n] = '\0';
	tick(ms, f);
	LEAVE();
}

static int mp_truncate(struct sbx_instance *inst, const char *path, off_t size,
		       struct sbx_error *err)
{
	ENTER(inst, MP_TRUNCATE, err);
	struct mfile *f = find(ms, path);
	if (!f) {
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "no such file: %s", path);
		goto out;
	}
	if ((size_t)size > f->data.len) {
		sbx_buf_grow(&f->data, (size_t)size - f->data.len);
		memset(f->data.buf + f->data.len, 0, (size_t)size - f->data.len);
	}
	f->data.len = (size_t)size;
	f->data.buf[size] = '\0';
	tick(ms, f);
	LEAVE();
}

static int mp_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	ENTER(inst, MP_MKDIR, err);
	rc = add(ms, path, S_IFDIR | (mode & 07777), NULL);
	if (rc)
		sbx_error_set(err, rc, SBX_E_NONE, "mkdir %s", path);
	LEAVE();
}

static int mp_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	ENTER(inst, MP_UNLINK, err);
	struct mfile *f = find(ms, path);
	if (!f || S_ISDIR(f->st.mode))
		rc = sbx_error_set(err, f ? EISDIR : ENOENT, SBX_E_NONE, "unlink %s", path);
	else
		drop(ms, f);
	LEAVE();
}

static int mp_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err)
{
	ENTER(inst, MP_RMDIR, err);
	struct mfile *f = find(ms, path), *x, *tmp;
	if (!f || !S_ISDIR(f->st.mode)) {
		rc = sbx_error_set(err, f ? ENOTDIR : ENOENT, SBX_E_NONE, "rmdir %s", path);
		goto out;
	}
	HASH_ITER(hh, ms->files, x, tmp)
	if (is_child(x->path, path)) {
		rc = sbx_error_set(err, ENOTEMPTY, SBX_E_NONE, "rmdir %s", path);
		goto out;
	}
	drop(ms, f);
	LEAVE();
}

static int mp_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
		     struct sbx_error *err)
{
	ENTER(inst, MP_RENAME, err);
	struct mfile *f = find(ms, from), *t = find(ms, to), *x, *tmp;
	size_t n = strlen(from);
	if (!f || flags) {
		rc = sbx_error_set(err, f ? EINVAL : ENOENT, SBX_E_NONE, "rename %s", from);
		goto out;
	}
	if (t)
		drop(ms, t);
	HASH_ITER(hh, ms->files, x, tmp)
	{
		if (strncmp(x->path, from, n) || (x->path[n] && x->path[n] != '/'))
			continue;
		struct sbx_buf b = SBX_BUF_INIT;
		sbx_buf_addf(&b, "%s%s", to, x->path + n);
		HASH_DEL(ms->files, x);
		free(x->path);
		x->path = sbx_buf_detach(&b, NULL);
		HASH_ADD_KEYPTR(hh, ms->files, x->path, strlen(x->path), x);
	}
	LEAVE();
}

static int mp_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err)
{
	ENTER(inst, MP_CHMOD, err);
	struct mfile *f = find(ms, path);
	if (!f)
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "chmod %s", path);
	else
		f->st.mode = (f->st.mode & S_IFMT) | (mode & 07777);
	LEAVE();
}

static int mp_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
		    struct sbx_error *err)
{
	ENTER(inst, MP_CHOWN, err);
	struct mfile *f = find(ms, path);
	if (!f) {
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "chown %s", path);
		goto out;
	}
	if (uid != (uid_t)-1)
		f->st.uid = uid;
	if (gid != (gid_t)-1)
		f->st.gid = gid;
	LEAVE();
}

static int mp_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
		      struct sbx_error *err)
{
	ENTER(inst, MP_UTIMENS, err);
	struct mfile *f = find(ms, path);
	if (!f) {
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "utimens %s", path);
		goto out;
	}
	if (ts[0].tv_nsec != UTIME_OMIT && ts[0].tv_nsec != UTIME_NOW)
		f->st.atime = ts[0];
	if (ts[1].tv_nsec == UTIME_NOW)
		tick(ms, f);
	else if (ts[1].tv_nsec != UTIME_OMIT)
		f->st.mtime = ts[1];
	LEAVE();
}

static int mp_symlink(struct sbx_instance *inst, const char *target, const char *path,
		      struct sbx_error *err)
{
	ENTER(inst, MP_SYMLINK, err);
	struct mfile *f;
	rc = add(ms, path, S_IFLNK | 0777, &f);
	if (rc) {
		sbx_error_set(err, rc, SBX_E_NONE, "symlink %s", path);
		goto out;
	}
	sbx_buf_adds(&f->data, target);
	f->st.size = (off_t)f->data.len;
	LEAVE();
}

static int mp_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		       struct sbx_error *err)
{
	ENTER(inst, MP_READLINK, err);
	struct mfile *f = find(ms, path);
	if (!f || !S_ISLNK(f->st.mode))
		rc = sbx_error_set(err, f ? EINVAL : ENOENT, SBX_E_NONE, "readlink %s", path);
	else
		snprintf(buf, size, "%s", f->data.buf);
	LEAVE();
}

static int mp_link(struct sbx_instance *inst, const char *from, const char *to,
		   struct sbx_error *err)
{
	ENTER(inst, MP_LINK, err);
	struct mfile *f = find(ms, from), *t;
	if (!f) {
		rc = sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "link %s", from);
		goto out;
	}
	rc = add(ms, to, f->st.mode, &t);
	if (rc) {
		sbx_error_set(err, rc, SBX_E_NONE, "link %s", to);
		goto out;
	}
	sbx_buf_add(&t->data, f->data.buf, f->data.len);
	tick(ms, t);
	LEAVE();
}

static int mp_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
		    struct sbx_error *err)
{
	ENTER(inst, MP_MKNOD, err);
	struct mfile *f;
	rc = add(ms, path, mode, &f);
	if (rc)
		sbx_error_set(err, rc, SBX_E_NONE, "mknod %s", path);
	else
		f->st.rdev = dev;
	LEAVE();
}

static int mp_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
		     struct sbx_error *err)
{
	ENTER(inst, MP_STATFS, err);
	memset(st, 0, sizeof(*st));
	st->f_bsize = st->f_frsize = 4096;
	st->f_blocks = 1000;
	st->f_bfree = st->f_bavail = 500;
	st->f_namemax = 255;
	LEAVE();
}

static int mp_sync(struct sbx_instance *inst, struct sbx_error *err)
{
	ENTER(inst, MP_SYNC, err);
	LEAVE();
}

static int mp_pause(struct sbx_instance *inst, struct sbx_error *err)
{
	ENTER(inst, MP_PAUSE, err);
	LEAVE();
}

static int mp_unpause(struct sbx_instance *inst, struct sbx_error *err)
{
	ENTER(inst, MP_UNPAUSE, err);
	LEAVE();
}

static void mp_release(struct sbx_instance *inst)
{
	(void)inst; /* owned by the test (memprov_free) */
}

static const struct sbx_provider memprov_ops = {
    .abi = SBX_PROVIDER_ABI,
    .name = "memprov",
    .caps = SBX_CAP_LIST_ATTRS,
    .release = mp_release,
    .pause = mp_pause,
    .unpause = mp_unpause,
    .stat = mp_stat,
    .list = mp_list,
    .read = mp_read,
    .write = mp_write,
    .truncate = mp_truncate,
    .mkdir = mp_mkdir,
    .unlink = mp_unlink,
    .rmdir = mp_rmdir,
    .rename = mp_rename,
    .chmod = mp_chmod,
    .chown = mp_chown,
    .utimens = mp_utimens,
    .symlink = mp_symlink,
    .readlink = mp_readlink,
    .link = mp_link,
    .mknod = mp_mknod,
    .statfs = mp_statfs,
    .sync = mp_sync,
};

/* ---- the test-side API ---------------------------------------------------------- */

struct memprov *memprov_new(void)
{
	struct memprov *mp = calloc(1, sizeof(*mp));
	struct mstate *ms = calloc(1, sizeof(*ms));
	if (!mp || !ms)
		abort();
	pthread_mutex_init(&ms->lock, NULL);
	mp->prov = memprov_ops;
	mp->inst.prov = &mp->prov;
	snprintf(mp->inst.id, sizeof(mp->inst.id), "mem-1");
	mp->priv = ms;
	add(ms, "/", S_IFDIR | 0755, NULL);
	return mp;
}

void memprov_free(struct memprov *mp)
{
	struct mstate *ms;
	struct mfile *f, *tmp;
	if (!mp)
		return;
	ms = mp->priv;
	HASH_ITER(hh, ms->files, f, tmp)
	drop(ms, f);
	pthread_mutex_destroy(&ms->lock);
	free(ms);
	free(mp);
}

int memprov_calls(struct memprov *mp, enum memprov_op op)
{
	struct mstate *ms = mp->priv;
	pthread_mutex_lock(&ms->lock);
	int n = ms->calls[op];
	pthread_mutex_unlock(&ms->lock);
	return n;
}

int memprov_file_calls(struct memprov *mp)
{
	int n = 0;
	for (int op = 0; op < MP_PAUSE; op++)
		n += memprov_calls(mp, op);
	return n;
}

void memprov_reset_calls(struct memprov *mp)
{
	struct mstate *ms = mp->priv;
	pthread_mutex_lock(&ms->lock);
	memset(ms->calls, 0, sizeof(ms->calls));
	pthread_mutex_unlock(&ms->lock);
}

void memprov_fail(struct memprov *mp, enum memprov_op op, int err, int times)
{
	struct mstate *ms = mp->priv;
	pthread_mutex_lock(&ms->lock);
	ms->fail_err[op] = err < 0 ? -err : err;
	ms->fail_times[op] = times;
	pthread_mutex_unlock(&ms->lock);
}

static void mkdirs_locked(struct mstate *ms, const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = '\0';
			if (!find(ms, buf))
				add(ms, buf, S_IFDIR | 0755, NULL);
			*p = c;
		}
		if (!*p)
			break;
	}
}

void memprov_mkdirs(struct memprov *mp, const char *path)
{
	struct mstate *ms = mp->priv;
	pthread_mutex_lock(&ms->lock);
	mkdirs_locked(ms, path);
	pthread_mutex_unlock(&ms->lock);
}

void memprov_put(struct memprov *mp, const char *path, const void *data, size_t len, mode_t mode)
{
	struct mstate *ms = mp->priv;
	char pbuf[4096];
	pthread_mutex_lock(&ms->lock);
	mkdirs_locked(ms, parent_of(path, pbuf, sizeof(pbuf)));
	struct mfile *f = find(ms, path);
	if (!f)
		add(ms, path, S_IFREG | (mode ? mode : 0644), &f);
	sbx_buf_reset(&f->data);
	sbx_buf_add(&f->data, data, len);
	tick(ms, f);
	pthread_mutex_unlock(&ms->lock);
}

char *memprov_get(struct memprov *mp, const char *path, size_t *len)
{
	struct mstate *ms = mp->priv;
	char *copy = NULL;
	pthread_mutex_lock(&ms->lock);
	struct mfile *f = find(ms, path);
	if (f) {
		copy = malloc(f->data.len + 1);
		memcpy(copy, f->data.buf, f->data.len + 1);
		*len = f->data.len;
	}
	pthread_mutex_unlock(&ms->lock);
	return copy;
}

bool memprov_exists(struct memprov *mp, const char *path)
{
	return memprov_mode(mp, path) != 0;
}

mode_t memprov_mode(struct memprov *mp, const char *path)
{
	struct mstate *ms = mp->priv;
	pthread_mutex_lock(&ms->lock);
	struct mfile *f = find(ms, path);
	mode_t m = f ? f->st.mode : 0;
	pthread_mutex_unlock(&ms->lock);
	return m;
}
