/*
 * fs_cached — fs/ for remote providers (no SBX_CAP_DIRECT_IO: e2b,
 * daytona). Every remote request is expensive, so:
 *  - one list call fills a whole directory's attributes (getattr of its
 *    children is then served from the cache), attributes and listings live
 *    a short TTL, negative answers too, and every mutation made here edits
 *    or drops the cached facts it touches;
 *  - open downloads a file once into a local cache file (streamed through
 *    the provider's read slot), later opens revalidate it by its (size,
 *    mtime) and reuse it; reads and writes go to that file; dirty data is
 *    uploaded (whole file, streamed from the fd) on flush, fsync and the
 *    last release. A failed upload fails flush/fsync, is recorded in the
 *    lease's `error` file, and the data stays for the next try;
 *  - a paused sandbox is served from the cache at any age without resuming
 *    it; only what must reach the provider goes through sbx_lease_use().
 *
 * It is not the cache's bookkeeping (cache.c), nor FUSE (fuse_ops.c): it
 * returns 0 / -errno and fills err. The kernel's /proc, /sys and /dev show
 * as empty directories and never reach the provider.
 */
#include "fsmirror.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Failures that answer the question rather than report a fault: not logged. */
static bool is_answer(int rc)
{
	switch (-rc) {
	case ENOENT:
	case EEXIST:
	case ENOTEMPTY:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case ELOOP:
		return true;
	default:
		return false;
	}
}

/* Records a failure of `op path` in the lease's `error` file; returns rc. */
static int record(struct sbx_lease *l, const char *op, const char *path, int rc,
		  struct sbx_error *err)
{
	char what[300];
	if (!err->err || !err->msg[0])
		sbx_error_set(err, rc, SBX_E_NONE, "%s %s: %s", op, path, strerror(-rc));
	snprintf(what, sizeof(what), "%s %s", op, path);
	sbx_lease_error(l, what, err);
	return rc;
}

/* record() unless the failure is an answer (ENOENT...). */
static int fail(struct sbx_lease *l, const char *op, const char *path, int rc,
		struct sbx_error *err)
{
	return is_answer(rc) ? rc : record(l, op, path, rc, err);
}

static int unsupported(struct sbx_lease *l, const char *what, struct sbx_error *err)
{
	return sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED,
			     "provider %s cannot %s (no fallback)", l->prov->name, what);
}

/* ENOTSUP, recorded, when the provider lacks the slot `op path` needs. */
static int need(const void *slot, struct sbx_lease *l, const char *what, const char *op,
		const char *path, struct sbx_error *err)
{
	return slot ? 0 : fail(l, op, path, unsupported(l, what, err), err);
}

/* The sandbox for a call that must reach the provider (resumes a paused one). */
static int use(struct sbx_lease *l, struct sbx_instance **inst, const char *op,
	       const char *path, struct sbx_error *err)
{
	int rc = sbx_lease_use(l, inst, err);
	return rc ? fail(l, op, path, rc, err) : 0;
}

/* use() for `op path`, which needs the provider's slot (ENOTSUP without it). */
static int reach(struct sbx_lease *l, const void *slot, const char *what, const char *op,
		 const char *path, struct sbx_instance **inst, struct sbx_error *err)
{
	int rc = need(slot, l, what, op, path, err);
	return rc ? rc : use(l, inst, op, path, err);
}

/* Ends a provider call begun with use(): releases the sandbox, records a failure. */
static int end(struct sbx_lease *l, int rc, const char *op, const char *path,
	       struct sbx_error *err)
{
	sbx_lease_unuse(l);
	return rc ? fail(l, op, path, rc, err) : 0;
}

/*
 * Subscribes the cache to the provider's change reports (E2B's WatchDir),
 * once per instance, so changes made in the sandbox by anything else
 * invalidate what is cached of them before the TTL runs out.
 */
static void watch(struct sbx_lease *l, struct sbx_instance *inst)
{
	if (l->prov->set_notify && sbx_cache_watch_claim(l->cache, inst))
		l->prov->set_notify(inst, sbx_cache_notify, l->cache);
}

/* A paused sandbox cannot change its files: its cache is good at any age. */
static bool any_age(struct sbx_lease *l)
{
	struct sbx_instance *inst = sbx_lease_peek(l);
	bool paused;
	if (!inst)
		return false;
	watch(l, inst);
	pthread_mutex_lock(&l->lock);
	paused = l->state == SBX_LS_PAUSED;
	pthread_mutex_unlock(&l->lock);
	return paused;
}

static bool is_pseudo_root(const char *path)
{
	return !strcmp(path, "/proc") || !strcmp(path, "/sys") || !strcmp(path, "/dev");
}

/* Refuses changes under /proc, /sys, /dev. */
static int pseudo_refuse(const char *path, struct sbx_error *err)
{
	if (!sbx_fs_is_pseudo(path))
		return 0;
	return sbx_error_set(err, EACCES, SBX_E_EXECUTION_FAILED,
			     "%s: the sandbox's kernel filesystems are not mirrored", path);
}

static int no_such(const char *path, struct sbx_error *err)
{
	return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "%s: no such file or directory", path);
}

/* One provider stat, its answer (ENOENT included) cached. */
static int remote_stat(struct sbx_lease *l, const char *path, struct sbx_stat *st,
		       struct sbx_error *err)
{
	struct sbx_instance *inst;
	unsigned long gen = sbx_cache_gen(l->cache);
	int rc = reach(l, l->prov->stat, "stat", "stat", path, &inst, err);
	if (rc)
		return rc;
	rc = end(l, l->prov->stat(inst, path, st, err), "stat", path, err);
	if (rc == 0 || rc == -ENOENT)
		sbx_cache_attr_put(l->cache, path, rc ? NULL : st, gen);
	return rc;
}

/* Remote attributes of path from the cache or one stat; -ENOENT if none. */
static int lookup(struct sbx_lease *l, const char *path, struct sbx_stat *st,
		  struct sbx_error *err)
{
	switch (sbx_cache_attr_get(l->cache, path, st, any_age(l))) {
	case SBX_CACHE_HIT:
		return 0;
	case SBX_CACHE_NEGATIVE:
		return no_such(path, err);
	default:
		return remote_stat(l, path, st, err);
	}
}

/* ---- uploads ---------------------------------------------------------------- */

/*
 * Uploads cf if it is dirty: the whole cache file through the provider's
 * write slot, then one stat to stamp it. On failure the entry stays dirty
 * and the failure is recorded.
 */
static int upload(struct sbx_lease *l, struct sbx_cfile *cf, bool *sent, struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_cfile_state s;
	struct sbx_instance *inst;
	struct sbx_stat st;
	struct sbx_error serr = SBX_ERROR_INIT;
	struct stat sys;
	unsigned long gen = 0;
	bool done = false;
	int rc = 0, src = -1;

	sbx_cache_file_begin_upload(c, cf, &s);
	if (!s.dirty || !s.linked)
		goto out;
	if (fstat(sbx_cfile_fd(cf), &sys)) {
		rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", s.path,
				   strerror(errno));
		goto out;
	}
	rc = l->prov->write ? 0 : unsupported(l, "write files", err);
	if (!rc)
		rc = sbx_lease_use(l, &inst, err);
	if (rc)
		goto out;
	rc = l->prov->write(inst, s.path, sbx_cfile_fd(cf), sys.st_size, s.mode ? s.mode : 0644,
			    err);
	done = rc == 0;
	if (done && l->prov->stat) {
		gen = sbx_cache_gen(c);
		src = l->prov->stat(inst, s.path, &st, &serr);
	}
	sbx_lease_unuse(l);
out:
	sbx_cache_file_end_upload(c, cf, s.wgen, done, src == 0 ? &st : NULL, gen);
	if (sent)
		*sent = done;
	if (done && !s.remote)
		sbx_cache_note_added(c, s.path, src == 0 ? &st : NULL);
	if (rc) /* always said: written data is waiting */
		record(l, "upload", s.path, rc, err);
	free(s.path);
	return rc;
}

/*
 * After a successful upload (the provider is reachable): retries a few
 * dirty files whose own handles are gone. Their failures are recorded,
 * not returned: this close did its own job.
 */
static void retry_orphans(struct sbx_lease *l)
{
	struct sbx_cfile *orphans[2];
	struct sbx_error err = SBX_ERROR_INIT;
	size_t n = sbx_cache_file_orphans(l->cache, orphans, 2);
	for (size_t i = 0; i < n; i++) {
		upload(l, orphans[i], NULL, &err);
		sbx_cache_file_put(l->cache, orphans[i]);
	}
}

/* Uploads f's data if dirty, then (if it went up) others' leftovers. */
static int upload_handle(struct sbx_fs_file *f, struct sbx_error *err)
{
	bool sent = false;
	int rc = upload(f->lease, f->priv, &sent, err);
	if (sent)
		retry_orphans(f->lease);
	return rc;
}

/* Uploads path's entry first if it holds local changes (before metadata calls). */
static int settle(struct sbx_lease *l, const char *path, struct sbx_error *err)
{
	struct sbx_cfile *cf = sbx_cache_file_find_live(l->cache, path);
	int rc = 0;
	if (cf) {
		rc = upload(l, cf, NULL, err);
		sbx_cache_file_put(l->cache, cf);
	}
	return rc;
}

/* ---- reading the tree ------------------------------------------------------------ */

static int c_getattr(struct sbx_lease *l, const char *path, struct sbx_fs_file *f,
		     struct stat *st, struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_stat s;
	int rc;

	if (sbx_fs_is_pseudo(path)) {
		if (!is_pseudo_root(path))
			return no_such(path, err);
		memset(&s, 0, sizeof(s));
		s.mode = S_IFDIR | 0555;
		s.nlink = 2;
		goto out;
	}
	switch (sbx_cache_attr_get(c, path, &s, any_age(l))) {
	case SBX_CACHE_HIT:
		sbx_cache_file_overlay(c, path, &s, SBX_OV_REMOTE);
		goto out;
	case SBX_CACHE_NEGATIVE:
		rc = no_such(path, err);
		goto out_gone;
	default:
		if (sbx_cache_file_overlay(c, path, &s, SBX_OV_LOCAL_ONLY))
			goto out;
		break;
	}
	rc = remote_stat(l, path, &s, err);
	if (rc)
		goto out_gone;
	sbx_cache_file_overlay(c, path, &s, SBX_OV_REMOTE);
out:
	sbx_stat_to_sys(st, &s);
	return 0;
out_gone:
	if (rc != -ENOENT)
		return rc;
	if (sbx_cache_file_overlay(c, path, &s, SBX_OV_NO_REMOTE)) {
		sbx_error_clear(err);
		goto out;
	}
	/* An open file that was unlinked still has attributes through its handle. */
	if (f && f->priv) {
		sbx_cache_file_stat(c, f->priv, &s);
		sbx_error_clear(err);
		goto out;
	}
	return rc;
}

static int collect(void *ctx, const char *name, const struct sbx_stat *st)
{
	sbx_cache_listing_add(ctx, name, st);
	return 0;
}

static int c_readdir(struct sbx_lease *l, const char *path, sbx_fs_fill_fn fill, void *ctx,
		     struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_cache_listing ls = SBX_CACHE_LISTING_INIT;
	bool attrs = l->prov->caps & SBX_CAP_LIST_ATTRS;
	struct sbx_instance *inst;
	int rc = 0;

	if (sbx_fs_is_pseudo(path))
		return 0;
	if (!sbx_cache_dir_get(c, path, any_age(l), &ls)) {
		unsigned long gen = sbx_cache_gen(c);
		rc = reach(l, l->prov->list, "list directories", "list", path, &inst, err);
		if (!rc)
			rc = end(l, l->prov->list(inst, path, collect, &ls, err), "list", path, err);
		if (rc)
			goto out;
		/* Partial attributes (no SBX_CAP_LIST_ATTRS) must not reach the kernel. */
		for (size_t i = 0; !attrs && i < ls.n; i++)
			ls.ents[i].has_st = false;
		sbx_cache_dir_put(c, path, &ls, attrs, gen);
	}
	sbx_cache_dir_overlay(c, path, &ls);
	for (size_t i = 0; i < ls.n; i++) {
		struct stat sys;
		if (ls.ents[i].has_st)
			sbx_stat_to_sys(&sys, &ls.ents[i].st);
		if (fill(ctx, ls.ents[i].name, ls.ents[i].has_st ? &sys : NULL))
			break;
	}
out:
	sbx_cache_listing_release(&ls);
	return rc;
}

static int c_readlink(struct sbx_lease *l, const char *path, char *buf, size_t size,
		      struct sbx_error *err)
{
	struct sbx_instance *inst;
	unsigned long gen;
	int rc;
	if (sbx_fs_is_pseudo(path))
		return no_such(path, err);
	if (sbx_cache_link_get(l->cache, path, buf, size, any_age(l)))
		return 0;
	gen = sbx_cache_gen(l->cache);
	rc = reach(l, l->prov->readlink, "read symlinks", "readlink", path, &inst, err);
	if (!rc)
		rc = end(l, l->prov->readlink(inst, path, buf, size, err), "readlink", path, err);
	if (!rc)
		sbx_cache_link_put(l->cache, path, buf, gen);
	return rc;
}

/* ---- contents --------------------------------------------------------------------- */

struct fd_sink {
	int fd;
	off_t off;
};

/* Download sink: appends to the cache file (nothing held in memory). */
static int sink_to_fd(void *ctx, const char *data, size_t len)
{
	struct fd_sink *s = ctx;
	while (len) {
		ssize_t w = pwrite(s->fd, data, len, s->off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		data += w;
		len -= (size_t)w;
		s->off += w;
	}
	return 0;
}

/* Downloads path into fd (truncated first); *got is the byte count. */
static int download(struct sbx_lease *l, const char *path, int fd, off_t *got,
		    struct sbx_error *err)
{
	struct sbx_instance *inst;
	struct fd_sink sink = {fd, 0};
	int rc = reach(l, l->prov->read, "read files", "download", path, &inst, err);
	if (rc)
		return rc;
	if (ftruncate(fd, 0)) {
		rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", path,
				   strerror(errno));
	} else {
		rc = l->prov->read(inst, path, 0, -1, sink_to_fd, &sink, err);
		rc = rc > 0 ? 0 : rc;
	}
	*got = sink.off;
	return end(l, rc, "download", path, err);
}

static bool stamp_matches(const struct sbx_cfile_state *s, const struct sbx_stat *st)
{
	return s->have_data && s->stamped && s->stamp_size == st->size &&
	       s->stamp_mtime.tv_sec == st->mtime.tv_sec &&
	       s->stamp_mtime.tv_nsec == st->mtime.tv_nsec;
}

/* Decides how open finds its content (*how); may download. */
static int open_content(struct sbx_lease *l, const char *path, int flags,
			const struct sbx_cfile_state *s, int fd, enum sbx_cfile_how *how,
			struct sbx_stat *st, bool *stamp_ok, struct sbx_error *err)
{
	bool trunc = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
	bool excl = (flags & O_CREAT) && (flags & O_EXCL);
	off_t got;
	int rc;

	if (s->have_data && (s->dirty || s->refs > 1)) {
		/*
		 * Local changes are the newest content there is; and a file open
		 * elsewhere keeps its one shared content (refreshing it would pull
		 * the bytes from under the other handles).
		 */
		if (excl)
			return sbx_error_set(err, EEXIST, SBX_E_NONE, "%s exists", path);
		*how = trunc ? SBX_CF_TRUNC : SBX_CF_KEEP;
		return 0;
	}
	rc = lookup(l, path, st, err);
	if (rc == -ENOENT && (flags & O_CREAT)) {
		sbx_error_clear(err);
		*how = SBX_CF_NEW;
		return 0;
	}
	if (rc)
		return rc;
	if (excl)
		return sbx_error_set(err, EEXIST, SBX_E_NONE, "%s exists", path);
	if (S_ISDIR(st->mode))
		return sbx_error_set(err, EISDIR, SBX_E_NONE, "%s is a directory", path);
	if (trunc) {
		*how = SBX_CF_TRUNC;
	} else if (stamp_matches(s, st)) {
		*how = SBX_CF_KEEP;
	} else {
		rc = download(l, path, fd, &got, err);
		*how = rc ? SBX_CF_FAILED : SBX_CF_LOADED;
		/* Changed between stat and read: keep the bytes, not the stamp. */
		if (!rc && got != st->size) {
			*stamp_ok = false;
			sbx_cache_note_changed(l->cache, path);
		}
	}
	return rc;
}

static int c_open(struct sbx_lease *l, const char *path, int flags, mode_t mode,
		  struct sbx_fs_file **out, struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_cfile_state s;
	struct sbx_cfile *cf;
	struct sbx_stat st;
	enum sbx_cfile_how how = SBX_CF_KEEP;
	struct sbx_fs_file *f;
	bool stamp_ok = true;
	int rc;

	if (sbx_fs_is_pseudo(path)) {
		if (is_pseudo_root(path))
			return sbx_error_set(err, EISDIR, SBX_E_NONE, "%s is a directory", path);
		return (flags & O_CREAT) ? pseudo_refuse(path, err) : no_such(path, err);
	}
	rc = sbx_cache_file_open(c, path, &cf, &s);
	if (rc) {
		sbx_error_set(err, rc, SBX_E_INTERNAL, "cache file for %s: %s", path,
			      strerror(-rc));
		return fail(l, "open", path, rc, err);
	}
	memset(&st, 0, sizeof(st));
	rc = open_content(l, path, flags, &s, sbx_cfile_fd(cf), &how, &st, &stamp_ok, err);
	if (rc && how != SBX_CF_FAILED)
		how = SBX_CF_KEEP;
	sbx_cache_file_ready(c, cf, how, mode, how == SBX_CF_LOADED && stamp_ok ? &st : NULL);
	free(s.path);
	if (rc) {
		sbx_cache_file_put(c, cf);
		return rc;
	}
	if (how == SBX_CF_NEW)
		sbx_cache_note_added(c, path, NULL);
	f = calloc(1, sizeof(*f));
	if (!f)
		abort();
	f->lease = l;
	f->path = strdup(path);
	f->flags = flags;
	f->priv = cf;
	*out = f;
	return 0;
}

static ssize_t c_read(struct sbx_fs_file *f, char *buf, size_t size, off_t off,
		      struct sbx_error *err)
{
	ssize_t n;
	do
		n = pread(sbx_cfile_fd(f->priv), buf, size, off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", f->path,
				     strerror(errno));
	return n;
}

static ssize_t c_write(struct sbx_fs_file *f, const char *buf, size_t size, off_t off,
		       struct sbx_error *err)
{
	int fd = sbx_cfile_fd(f->priv);
	struct stat sys;
	ssize_t n;
	if ((f->flags & O_APPEND) && fstat(fd, &sys) == 0)
		off = sys.st_size;
	do
		n = pwrite(fd, buf, size, off);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		int rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s",
				       f->path, strerror(errno));
		return fail(f->lease, "write", f->path, rc, err);
	}
	sbx_cache_file_changed(f->lease->cache, f->priv);
	return n;
}

static int c_flush(struct sbx_fs_file *f, struct sbx_error *err)
{
	return upload_handle(f, err);
}

static int c_fsync(struct sbx_fs_file *f, int datasync, struct sbx_error *err)
{
	struct sbx_lease *l = f->lease;
	struct sbx_instance *inst;
	int rc = upload_handle(f, err);
	if (rc || !l->prov->sync)
		return rc;
	rc = use(l, &inst, "sync", f->path, err);
	return rc ? rc : end(l, l->prov->sync(inst, err), "sync", f->path, err);
}

static void c_release(struct sbx_fs_file *f)
{
	struct sbx_error err = SBX_ERROR_INIT;
	/* Late writes (mmap) after the last flush still go up; failures are recorded. */
	upload(f->lease, f->priv, NULL, &err);
	sbx_cache_file_put(f->lease->cache, f->priv);
	free(f->path);
	free(f);
}

static int c_truncate(struct sbx_lease *l, const char *path, struct sbx_fs_file *f, off_t size,
		      struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_cfile *cf = f ? f->priv : NULL;
	struct sbx_instance *inst;
	int rc = pseudo_refuse(path, err);
	if (rc)
		return rc;
	if (!cf)
		cf = sbx_cache_file_find_live(c, path);
	if (cf) {
		/* Local data is the truth: change it, upload now unless a handle will. */
		if (ftruncate(sbx_cfile_fd(cf), size))
			rc = sbx_error_set(err, errno, SBX_E_INTERNAL, "cache file of %s: %s", path,
					   strerror(errno));
		if (!rc)
			sbx_cache_file_changed(c, cf);
		if (!f) {
			if (!rc)
				rc = upload(l, cf, NULL, err);
			sbx_cache_file_put(c, cf);
		}
		return rc;
	}
	if (!l->prov->truncate) {
		/* Fallback through the content cache: download, cut, upload. */
		struct sbx_fs_file *h;
		rc = c_open(l, path, size ? O_RDWR : O_WRONLY | O_TRUNC, 0, &h, err);
		if (rc)
			return rc;
		rc = c_truncate(l, path, h, size, err);
		if (!rc)
			rc = c_flush(h, err);
		c_release(h);
		return rc;
	}
	rc = use(l, &inst, "truncate", path, err);
	if (!rc)
		rc = end(l, l->prov->truncate(inst, path, size, err), "truncate", path, err);
	if (rc)
		return rc;
	sbx_cache_file_stale(c, path);
	sbx_cache_note_changed(c, path);
	return 0;
}

/* ---- changing the tree ------------------------------------------------------------- */

/*
 * Starts a change of path: refuses pseudo paths, uploads local changes of
 * `settle_path` first (the provider changes what it has), checks the slot,
 * gets the sandbox. On success the caller makes its call and passes the
 * result through end().
 */
static int begin(struct sbx_lease *l, const void *slot, const char *op, const char *path,
		 const char *settle_path, struct sbx_instance **inst, struct sbx_error *err)
{
	int rc = pseudo_refuse(path, err);
	if (!rc && settle_path)
		rc = settle(l, settle_path, err);
	return rc ? rc : reach(l, slot, op, op, path, inst, err);
}

static int c_mkdir(struct sbx_lease *l, const char *path, mode_t mode, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = begin(l, l->prov->mkdir, "mkdir", path, NULL, &inst, err);
	if (!rc)
		rc = end(l, l->prov->mkdir(inst, path, mode, err), "mkdir", path, err);
	if (!rc)
		sbx_cache_note_added(l->cache, path, NULL);
	return rc;
}

static int c_unlink(struct sbx_lease *l, const char *path, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = 0;
	/* A file created here and never uploaded has nothing to remove remotely. */
	if (!sbx_cache_file_local_only(l->cache, path)) {
		rc = begin(l, l->prov->unlink, "unlink", path, NULL, &inst, err);
		if (!rc)
			rc = end(l, l->prov->unlink(inst, path, err), "unlink", path, err);
		/* Local changes of a file the sandbox lost: removing them is the whole job. */
		if (rc == -ENOENT && sbx_cache_file_overlay(l->cache, path, &(struct sbx_stat){0},
							    SBX_OV_NO_REMOTE)) {
			sbx_error_clear(err);
			rc = 0;
		}
	}
	if (!rc) {
		sbx_cache_file_unlink(l->cache, path);
		sbx_cache_note_removed(l->cache, path);
	}
	return rc;
}

static int c_rmdir(struct sbx_lease *l, const char *path, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = begin(l, l->prov->rmdir, "rmdir", path, NULL, &inst, err);
	if (!rc)
		rc = end(l, l->prov->rmdir(inst, path, err), "rmdir", path, err);
	if (!rc)
		sbx_cache_note_removed(l->cache, path);
	return rc;
}

static int c_rename(struct sbx_lease *l, const char *from, const char *to, unsigned flags,
		    struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_instance *inst;
	bool exchange = flags & RENAME_EXCHANGE;
	int rc = pseudo_refuse(to, err);
	if (!rc && exchange)
		rc = settle(l, to, err);
	if (!rc)
		rc = begin(l, l->prov->rename, "rename", from, from, &inst, err);
	if (!rc)
		rc = end(l, l->prov->rename(inst, from, to, flags, err), "rename", from, err);
	if (rc)
		return rc;
	sbx_cache_file_rename(c, from, to, exchange);
	sbx_cache_note_removed(c, from);
	sbx_cache_note_removed(c, to);
	sbx_cache_note_added(c, to, NULL);
	if (exchange)
		sbx_cache_note_added(c, from, NULL);
	return 0;
}

static int c_chmod(struct sbx_lease *l, const char *path, mode_t mode, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = begin(l, l->prov->chmod, "chmod", path, path, &inst, err);
	if (!rc)
		rc = end(l, l->prov->chmod(inst, path, mode, err), "chmod", path, err);
	if (!rc)
		sbx_cache_attr_chmod(l->cache, path, mode);
	return rc;
}

static int c_chown(struct sbx_lease *l, const char *path, uid_t uid, gid_t gid,
		   struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = begin(l, l->prov->chown, "chown", path, path, &inst, err);
	if (!rc)
		rc = end(l, l->prov->chown(inst, path, uid, gid, err), "chown", path, err);
	if (!rc)
		sbx_cache_attr_chown(l->cache, path, uid, gid);
	return rc;
}

static int c_utimens(struct sbx_lease *l, const char *path, const struct timespec ts[2],
		     struct sbx_error *err)
{
	struct sbx_instance *inst;
	/* Settled first, or a later upload would stamp its own mtime over this one. */
	int rc = begin(l, l->prov->utimens, "utimens", path, path, &inst, err);
	if (!rc)
		rc = end(l, l->prov->utimens(inst, path, ts, err), "utimens", path, err);
	if (rc)
		return rc;
	sbx_cache_attr_utimens(l->cache, path, ts);
	if (ts[1].tv_nsec == UTIME_NOW)
		sbx_cache_file_stale(l->cache, path);
	else if (ts[1].tv_nsec != UTIME_OMIT)
		sbx_cache_file_restamp(l->cache, path, &ts[1]);
	return 0;
}

static int c_symlink(struct sbx_lease *l, const char *target, const char *path,
		     struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = begin(l, l->prov->symlink, "symlink", path, NULL, &inst, err);
	if (!rc)
		rc = end(l, l->prov->symlink(inst, target, path, err), "symlink", path, err);
	if (!rc)
		sbx_cache_note_added(l->cache, path, NULL);
	return rc;
}

static int c_link(struct sbx_lease *l, const char *from, const char *to, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = pseudo_refuse(from, err);
	if (!rc)
		rc = begin(l, l->prov->link, "link", to, from, &inst, err);
	if (!rc)
		rc = end(l, l->prov->link(inst, from, to, err), "link", to, err);
	if (rc)
		return rc;
	sbx_cache_note_added(l->cache, to, NULL);
	sbx_cache_note_changed(l->cache, from); /* its link count */
	return 0;
}

static int c_mknod(struct sbx_lease *l, const char *path, mode_t mode, dev_t dev,
		   struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = begin(l, l->prov->mknod, "mknod", path, NULL, &inst, err);
	if (!rc)
		rc = end(l, l->prov->mknod(inst, path, mode, dev, err), "mknod", path, err);
	if (!rc)
		sbx_cache_note_added(l->cache, path, NULL);
	return rc;
}

static int c_statfs(struct sbx_lease *l, const char *path, struct statvfs *st,
		    struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc;
	if (!l->prov->statfs) {
		/* No numbers to give: what libfuse answers without a statfs. */
		memset(st, 0, sizeof(*st));
		st->f_bsize = st->f_frsize = 4096;
		st->f_namemax = 255;
		return 0;
	}
	rc = use(l, &inst, "statfs", path, err);
	return rc ? rc : end(l, l->prov->statfs(inst, path, st, err), "statfs", path, err);
}

const struct sbx_fs_ops sbx_fs_cached_ops = {
	.getattr = c_getattr,
	.readdir = c_readdir,
	.open = c_open,
	.read = c_read,
	.write = c_write,
	.flush = c_flush,
	.fsync = c_fsync,
	.release = c_release,
	.truncate = c_truncate,
	.mkdir = c_mkdir,
	.unlink = c_unlink,
	.rmdir = c_rmdir,
	.rename = c_rename,
	.chmod = c_chmod,
	.chown = c_chown,
	.utimens = c_utimens,
	.symlink = c_symlink,
	.readlink = c_readlink,
	.link = c_link,
	.mknod = c_mknod,
	.statfs = c_statfs,
};
