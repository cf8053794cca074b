/*
 * daytona/batch — the operations the toolbox has no endpoint for, done by
 * commands in the sandbox: utimens, symlink, truncate, link and mknod are
 * queued (every path single-quoted) and applied together as one script
 * through /process/execute: on sync, before a run, before any change to
 * the filesystem, and before a read of a path they touch. readlink and
 * statfs are one command each (statfs cached for DT_STATFS_TTL_S).
 *
 * A queued operation returns 0 at once; when the script later fails, the
 * call that flushed it (usually fsync/sync or the next access) gets EIO
 * with the failing command's message. The kernel has already refused the
 * common errors (EEXIST, ENOENT on the parent) through its own lookups.
 *
 * Not here: anything with a toolbox endpoint (files.c).
 */
#include "daytona/daytona.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "base/log.h"

void dt_batch_free(struct dt_batch *b)
{
	for (size_t i = 0; i < b->n; i++)
		free(b->paths[i]);
	free(b->paths);
	sbx_buf_release(&b->script);
	b->paths = NULL;
	b->n = 0;
}

int dt_batch_flush(struct dt_instance *di, struct sbx_error *err)
{
	struct dt_batch b;
	struct sbx_buf script = SBX_BUF_INIT, out = SBX_BUF_INIT;
	int rc = 0, code = 0;

	pthread_mutex_lock(&di->flush_lock);
	pthread_mutex_lock(&di->lock);
	b = di->batch;
	memset(&di->batch, 0, sizeof(di->batch));
	sbx_buf_init(&di->batch.script);
	di->flushing = b.n > 0;
	pthread_mutex_unlock(&di->lock);
	if (!b.n)
		goto out;
	sbx_buf_adds(&script, "rc=0\n");
	sbx_buf_add(&script, b.script.buf, b.script.len);
	sbx_buf_adds(&script, "exit $rc\n");
	rc = dt_exec(di, script.buf, 60000, &out, &code, err);
	if (!rc && code) {
		char line[256];
		size_t n = strcspn(out.buf, "\n");
		snprintf(line, sizeof(line), "%.*s", (int)n, out.buf);
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				   "applying %zu queued change%s failed: %s", b.n,
				   b.n == 1 ? "" : "s", line[0] ? line : "(no message)");
	}
	if (rc) {
		sbx_log(SBX_LOG_WARN, "daytona: %s: %s", di->base.id, err ? err->msg : "batch failed");
		for (size_t i = 0; i < b.n; i++) /* which ones failed is not known */
			dt_links_forget(di, b.paths[i]);
	}
	pthread_mutex_lock(&di->lock);
	di->flushing = false;
	pthread_mutex_unlock(&di->lock);
out:
	pthread_mutex_unlock(&di->flush_lock);
	dt_batch_free(&b);
	sbx_buf_release(&script);
	sbx_buf_release(&out);
	return rc;
}

/* True when p is path or an entry directly in directory path. */
static bool touches(const char *p, const char *path)
{
	size_t n = strlen(path);
	const char *slash;
	if (!strcmp(p, path))
		return true;
	slash = strrchr(p, '/');
	if (!slash)
		return false;
	if (slash == p) /* an entry of "/" */
		return !strcmp(path, "/");
	return (size_t)(slash - p) == n && !strncmp(p, path, n);
}

int dt_batch_flush_for(struct dt_instance *di, const char *path, struct sbx_error *err)
{
	bool need;
	pthread_mutex_lock(&di->lock);
	need = di->flushing;
	for (size_t i = 0; !need && i < di->batch.n; i++)
		need = touches(di->batch.paths[i], path);
	pthread_mutex_unlock(&di->lock);
	return need ? dt_batch_flush(di, err) : 0;
}

/* Queues one command (a line of shell) touching path; flushes when full. */
static int enqueue(struct dt_instance *di, const struct sbx_buf *cmd, const char *path,
		   struct sbx_error *err)
{
	char *p = strdup(path), **np;
	bool full;
	if (!p)
		abort();
	pthread_mutex_lock(&di->lock);
	np = realloc(di->batch.paths, (di->batch.n + 1) * sizeof(*np));
	if (!np)
		abort();
	di->batch.paths = np;
	np[di->batch.n++] = p;
	sbx_buf_add(&di->batch.script, cmd->buf, cmd->len);
	sbx_buf_adds(&di->batch.script, " || rc=1\n");
	full = di->batch.n >= DT_BATCH_MAX_ENTRIES || di->batch.script.len >= DT_BATCH_MAX_BYTES;
	pthread_mutex_unlock(&di->lock);
	return full ? dt_batch_flush(di, err) : 0;
}

/* "'a' 'b'" helpers for the command lines below. */
static void arg(struct sbx_buf *b, const char *s)
{
	sbx_buf_addch(b, ' ');
	sbx_buf_add_shquoted(b, s);
}

/* `{ [ ! -e P ] && [ ! -L P ] || { echo "P: exists" >&2; false; }; } && ` */
static void must_not_exist(struct sbx_buf *b, const char *path)
{
	sbx_buf_adds(b, "{ { [ ! -e");
	arg(b, path);
	sbx_buf_adds(b, " ] && [ ! -L");
	arg(b, path);
	sbx_buf_adds(b, " ]; } || { echo");
	arg(b, path);
	sbx_buf_adds(b, "': File exists' >&2; false; }; } && ");
}

int dt_sync(struct sbx_instance *inst, struct sbx_error *err)
{
	return dt_batch_flush(dt_inst(inst), err);
}

static void touch_arg(struct sbx_buf *b, const struct timespec *t)
{
	if (t->tv_nsec != UTIME_NOW)
		sbx_buf_addf(b, " -d @%lld.%09ld", (long long)t->tv_sec, t->tv_nsec);
}

int dt_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
	       struct sbx_error *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	bool a = ts[0].tv_nsec != UTIME_OMIT, m = ts[1].tv_nsec != UTIME_OMIT;
	int rc = 0;
	if (!a && !m)
		return 0;
	if (a && m && ts[0].tv_nsec == ts[1].tv_nsec &&
	    (ts[0].tv_nsec == UTIME_NOW || ts[0].tv_sec == ts[1].tv_sec)) {
		sbx_buf_adds(&b, "touch -c");
		touch_arg(&b, &ts[1]);
	} else {
		if (a) {
			sbx_buf_adds(&b, "touch -c -a");
			touch_arg(&b, &ts[0]);
			sbx_buf_adds(&b, " --");
			arg(&b, path);
		}
		if (a && m)
			sbx_buf_adds(&b, " && ");
		if (m) {
			sbx_buf_adds(&b, "touch -c -m");
			touch_arg(&b, &ts[1]);
		}
	}
	if (m || !a) {
		sbx_buf_adds(&b, " --");
		arg(&b, path);
	}
	rc = enqueue(dt_inst(inst), &b, path, err);
	sbx_buf_release(&b);
	return rc;
}

/* --- the symlink table (see struct dt_link) ---------------------------------- */

/* path is p, or p is below directory path. */
static bool under(const char *p, const char *path)
{
	size_t n = strlen(path);
	return !strncmp(p, path, n) && (p[n] == '\0' || p[n] == '/' || !strcmp(path, "/"));
}

static void link_drop(struct dt_instance *di, size_t i)
{
	free(di->links[i].path);
	free(di->links[i].target);
	di->links[i] = di->links[--di->n_links];
}

static void links_add(struct dt_instance *di, const char *path, const char *target)
{
	pthread_mutex_lock(&di->lock);
	for (size_t i = di->n_links; i-- > 0;)
		if (!strcmp(di->links[i].path, path))
			link_drop(di, i);
	if (di->n_links == DT_LINKS_MAX)
		link_drop(di, 0); /* an old one: it then looks like its target, as before */
	di->links[di->n_links].path = strdup(path);
	di->links[di->n_links].target = strdup(target);
	if (!di->links[di->n_links].path || !di->links[di->n_links].target)
		abort();
	di->n_links++;
	pthread_mutex_unlock(&di->lock);
}

bool dt_link_lookup(struct dt_instance *di, const char *path, struct sbx_stat *st, char *target,
		    size_t size)
{
	bool found = false;
	pthread_mutex_lock(&di->lock);
	for (size_t i = 0; !found && i < di->n_links; i++) {
		if (strcmp(di->links[i].path, path))
			continue;
		found = true;
		if (st) {
			/* Owner and times stay those the caller already has (the target's). */
			st->mode = S_IFLNK | 0777;
			st->size = (off_t)strlen(di->links[i].target);
			st->nlink = 1;
		}
		if (target)
			snprintf(target, size, "%s", di->links[i].target);
	}
	pthread_mutex_unlock(&di->lock);
	return found;
}

void dt_links_forget(struct dt_instance *di, const char *path)
{
	pthread_mutex_lock(&di->lock);
	for (size_t i = di->n_links; i-- > 0;)
		if (under(di->links[i].path, path))
			link_drop(di, i);
	pthread_mutex_unlock(&di->lock);
}

void dt_links_rename(struct dt_instance *di, const char *from, const char *to)
{
	size_t fl = strlen(from);
	dt_links_forget(di, to);
	pthread_mutex_lock(&di->lock);
	for (size_t i = 0; i < di->n_links; i++) {
		char *p;
		if (!under(di->links[i].path, from))
			continue;
		if (asprintf(&p, "%s%s", to, di->links[i].path + fl) < 0)
			abort();
		free(di->links[i].path);
		di->links[i].path = p;
	}
	pthread_mutex_unlock(&di->lock);
}

void dt_links_clear(struct dt_instance *di)
{
	pthread_mutex_lock(&di->lock);
	while (di->n_links)
		link_drop(di, 0);
	pthread_mutex_unlock(&di->lock);
}

int dt_symlink(struct sbx_instance *inst, const char *target, const char *path,
	       struct sbx_error *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	int rc;
	must_not_exist(&b, path);
	sbx_buf_adds(&b, "ln -s --");
	arg(&b, target);
	arg(&b, path);
	rc = enqueue(dt_inst(inst), &b, path, err);
	if (!rc)
		links_add(dt_inst(inst), path, target);
	sbx_buf_release(&b);
	return rc;
}

int dt_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	int rc;
	must_not_exist(&b, to);
	sbx_buf_adds(&b, "ln --");
	arg(&b, from);
	arg(&b, to);
	rc = enqueue(dt_inst(inst), &b, to, err);
	sbx_buf_release(&b);
	return rc;
}

int dt_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	int rc;
	if (size < 0)
		return sbx_error_set(err, EINVAL, 0, "truncate %s: negative size", path);
	sbx_buf_addf(&b, "truncate -s %lld --", (long long)size);
	arg(&b, path);
	rc = enqueue(dt_inst(inst), &b, path, err);
	sbx_buf_release(&b);
	return rc;
}

int dt_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
	     struct sbx_error *err)
{
	struct sbx_buf b = SBX_BUF_INIT;
	unsigned perm = mode & 07777;
	int rc;
	switch (mode & S_IFMT) {
	case S_IFIFO:
		sbx_buf_addf(&b, "mkfifo -m %o --", perm);
		arg(&b, path);
		break;
	case S_IFREG:
		sbx_buf_adds(&b, "(set -C; : >");
		arg(&b, path);
		sbx_buf_addf(&b, ") && chmod %o --", perm);
		arg(&b, path);
		break;
	case S_IFCHR:
	case S_IFBLK:
		sbx_buf_addf(&b, "mknod -m %o --", perm);
		arg(&b, path);
		sbx_buf_addf(&b, " %c %u %u", S_ISCHR(mode) ? 'c' : 'b', major(dev), minor(dev));
		break;
	default:
		return sbx_error_set(err, ENOTSUP, 0, "mknod %s: this file type is not supported",
				     path);
	}
	rc = enqueue(dt_inst(inst), &b, path, err);
	sbx_buf_release(&b);
	return rc;
}

int dt_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_buf b = SBX_BUF_INIT, out = SBX_BUF_INIT;
	int rc, code = 0;

	if (!size)
		return sbx_error_set(err, EINVAL, 0, "readlink %s: no room", path);
	if ((rc = dt_batch_flush_for(di, path, err)))
		return rc;
	if (dt_link_lookup(di, path, NULL, buf, size))
		return 0;
	/* exit 2: missing, 3: not a link; the target alone on stdout. */
	sbx_buf_adds(&b, "if [ -L");
	arg(&b, path);
	sbx_buf_adds(&b, " ]; then readlink --");
	arg(&b, path);
	sbx_buf_adds(&b, " 2>/dev/null; elif [ -e");
	arg(&b, path);
	sbx_buf_adds(&b, " ]; then exit 3; else exit 2; fi");
	rc = dt_exec(di, b.buf, 30000, &out, &code, err);
	if (!rc && code == 2)
		rc = sbx_error_set(err, ENOENT, 0, "readlink %s: no such file", path);
	else if (!rc && code == 3)
		rc = sbx_error_set(err, EINVAL, 0, "readlink %s: not a symbolic link", path);
	else if (!rc && code)
		rc = sbx_error_set(err, EIO, 0, "readlink %s: exit %d", path, code);
	if (!rc) {
		if (out.len && out.buf[out.len - 1] == '\n')
			out.buf[--out.len] = '\0';
		snprintf(buf, size, "%s", out.buf);
	}
	sbx_buf_release(&b);
	sbx_buf_release(&out);
	return rc;
}

int dt_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
	      struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_buf b = SBX_BUF_INIT, out = SBX_BUF_INIT;
	time_t now = time(NULL);
	int rc, code = 0;

	/* One answer for the whole sandbox: the root filesystem's. */
	pthread_mutex_lock(&di->lock);
	if (di->sfs_at && now - di->sfs_at < DT_STATFS_TTL_S) {
		*st = di->sfs;
		pthread_mutex_unlock(&di->lock);
		return 0;
	}
	pthread_mutex_unlock(&di->lock);
	sbx_buf_adds(&b, "df -kP -- / 2>/dev/null; df -iP -- / 2>/dev/null; true");
	rc = dt_exec(di, b.buf, 30000, &out, &code, err);
	if (!rc && dt_df_parse(out.buf, st))
		rc = sbx_error_set(err, EIO, 0, "statfs: `df` gave no answer");
	if (!rc) {
		pthread_mutex_lock(&di->lock);
		di->sfs = *st;
		di->sfs_at = now;
		pthread_mutex_unlock(&di->lock);
	}
	sbx_buf_release(&b);
	sbx_buf_release(&out);
	(void)path;
	return rc;
}
