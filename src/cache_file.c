/*
 * cache_file — the content half of the cache (see cache.h): one entry per
 * path holding a local cache file, its reference count, busy claim, dirty
 * state and remote stamp, plus the overlay of local facts on attributes
 * and listings. Tables and lock are shared with cache.c (cache_int.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/caller.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/xalloc.h"
#include "cache_int.h"

/*
 * FILE.path names the sandbox path of a dirty cache file. It is on disk
 * from the moment the entry becomes dirty until it is clean, unlinked or
 * gone (lock held), so what a kill -9 leaves behind is found again by the
 * next mount (cache_files_adopt) instead of lying there unread. Not
 * fsynced: it guards against the daemon dying, not the machine.
 */
static void side_set_locked(struct sbx_cfile *cf, bool dirty)
{
	struct sbx_buf side = SBX_BUF_INIT, tmp = SBX_BUF_INIT;
	if (!cf->file)
		return;
	sbx_buf_addf(&side, "%s.path", cf->file);
	if (dirty && cf->linked) {
		size_t len = strlen(cf->path);
		sbx_buf_addf(&tmp, "%s.tmp", side.buf);
		int fd = open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		bool ok = fd >= 0 && write(fd, cf->path, len) == (ssize_t)len;
		if (fd >= 0 && close(fd))
			ok = false;
		if (!ok || rename(tmp.buf, side.buf)) {
			sbx_log(SBX_LOG_ERR,
				"cache: cannot write %s (%s): a crash now would leave "
				"the unsaved changes to %s unnamed in %s",
				side.buf, strerror(errno), cf->path, cf->file);
			unlink(tmp.buf);
		}
	} else {
		unlink(side.buf);
		cache_defer_drop_locked(cf); /* clean or gone: what waited is moot */
	}
	sbx_buf_release(&side);
	sbx_buf_release(&tmp);
}

static void cfile_free(struct sbx_cfile *cf, bool keep_file)
{
	if (cf->fd >= 0)
		close(cf->fd);
	if (!keep_file) {
		side_set_locked(cf, false);
		unlink(cf->file);
	}
	free(cf->file);
	free(cf->path);
	free(cf);
}

/* Writes FILE.path naming the sandbox path of a dirty file left on disk. */
static void keep_dirty(struct sbx_cfile *cf)
{
	struct sbx_buf side = SBX_BUF_INIT;
	sbx_buf_addf(&side, "%s.path", cf->file);
	int rc = sbx_write_file_atomic(side.buf, cf->path, strlen(cf->path));
	if (rc) /* the next mount cannot tell where it goes: say it here, at least */
		sbx_log(SBX_LOG_ERR, "cache: unsaved changes to %s kept in %s, but %s: %s",
			cf->path, cf->file, side.buf, strerror(-rc));
	else
		sbx_log(SBX_LOG_WARN, "cache: unsaved changes to %s kept in %s", cf->path,
			cf->file);
	sbx_buf_release(&side);
}

void cache_files_free(struct sbx_cache *c)
{
	struct sbx_cfile *cf, *tmp;
	/* Gone with its lease (rmdir; what a gone sandbox never got is kept apart first). */
	bool dir_kept = access(c->dir, F_OK) == 0;
	HASH_ITER(hh, c->files, cf, tmp)
	{
		bool keep = cf->dirty && dir_kept;
		HASH_DEL(c->files, cf);
		if (keep)
			keep_dirty(cf);
		cfile_free(cf, keep);
	}
}

/* Whether dir/name is a FILE.path naming a sandbox path (then in side and path). */
static bool side_read(const char *dir, const char *name, struct sbx_buf *side, struct sbx_buf *path)
{
	size_t n = strlen(name);
	if (n < 6 || strcmp(name + n - 5, ".path"))
		return false;
	sbx_buf_addf(side, "%s/%s", dir, name);
	return !sbx_read_file(side->buf, path, 4096) && path->buf[0] == '/';
}

void cache_files_adopt(struct sbx_cache *c)
{
	DIR *d = opendir(c->dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d))) {
		struct sbx_buf side = SBX_BUF_INIT, path = SBX_BUF_INIT;
		struct sbx_cfile *cf;
		if (!side_read(c->dir, de->d_name, &side, &path))
			goto next;
		HASH_FIND_STR(c->files, path.buf, cf);
		if (cf)
			goto next; /* two leftovers for one path: the second stays on disk */
		cf = xcalloc(1, sizeof(*cf));
		cf->file = sbx_xstrdup(side.buf);
		cf->file[side.len - 5] = '\0';
		cf->fd = open(cf->file, O_RDWR | O_CLOEXEC);
		if (cf->fd < 0) {
			free(cf->file);
			free(cf);
			goto next;
		}
		cf->path = sbx_buf_detach(&path, NULL);
		cf->linked = cf->have_data = cf->dirty = cf->remote = true;
		cf->mode = 0644;
		cache_defer_adopt(cf); /* a chmod/utimens that waited for the upload */
		HASH_ADD_KEYPTR(hh, c->files, cf->path, strlen(cf->path), cf);
		/* FILE.path stays until the upload: a second crash still finds it. */
		sbx_log(SBX_LOG_WARN, "cache: unsaved changes to %s taken back from %s", cf->path,
			cf->file);
	next:
		sbx_buf_release(&side);
		sbx_buf_release(&path);
	}
	closedir(d);
}

/*
 * Links file (a cache file whose FILE.path is side) into *dest (made from
 * its template at the first file) as the sandbox path it stands for, or,
 * when that name cannot be made (taken, a file where a directory goes, too
 * long), under its own name with its FILE.path beside it.
 */
static int keep_one(const char *file, const char *side, const char *path, char *dest)
{
	char *to = sbx_xasprintf("%s%s", dest, path);
	const char *last = strrchr(path, '/');
	bool dots = strstr(path, "/../") || strstr(path, "/./") || !strcmp(last, "/..") ||
		    !strcmp(last, "/.");
	int rc = dots ? -EINVAL : sbx_mkdir_parent(to, 0700);
	if (!rc && link(file, to))
		rc = -errno;
	free(to);
	if (rc && rc != -ENOSPC && rc != -EDQUOT && rc != -EIO) {
		const char *base = strrchr(file, '/') + 1;
		char *flat = sbx_xasprintf("%s/%s", dest, base);
		char *flat_side = sbx_xasprintf("%s.path", flat);
		rc = link(file, flat) || link(side, flat_side) ? -errno : 0;
		free(flat);
		free(flat_side);
	}
	return rc;
}

/* Makes the directory the template dest names (its parent too), as mkdtemp. */
static int make_dest(char *dest)
{
	int rc = sbx_mkdir_parent(dest, 0700);
	return rc ? rc : mkdtemp(dest) ? 0 : -errno;
}

int sbx_cache_keep_unsaved(const char *dir, char *dest, char **first, struct sbx_error *err)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0, rc = 0;
	if (!d)
		return errno == ENOENT ? 0
				       : sbx_error_set(err, -errno, SBX_E_INTERNAL,
						       "cannot read %s: %s", dir, strerror(errno));
	while (!rc && (de = readdir(d))) {
		struct sbx_buf side = SBX_BUF_INIT, path = SBX_BUF_INIT;
		if (side_read(dir, de->d_name, &side, &path)) {
			char *file = sbx_xstrndup(side.buf, side.len - 5);
			if (!n)
				rc = make_dest(dest);
			if (!rc)
				rc = keep_one(file, side.buf, path.buf, dest);
			if (rc)
				sbx_error_set(
				    err, rc, SBX_E_INTERNAL,
				    "cannot keep the unsaved changes to %s (in %s) in %s: %s",
				    path.buf, file, dest, strerror(-rc));
			else if (!n++ && first)
				*first = sbx_xstrdup(path.buf);
			free(file);
		}
		sbx_buf_release(&side);
		sbx_buf_release(&path);
	}
	closedir(d);
	return rc ? rc : n;
}

/* ---- local facts over remote attributes ------------------------------------------- */

/* Local size and times of an entry with an open fd (lock held). */
static bool local_stat_locked(struct sbx_cfile *cf, struct stat *sys)
{
	return cf->fd >= 0 && fstat(cf->fd, sys) == 0;
}

/*
 * Applies cf's local facts to st (lock held); full: st describes cf alone.
 * A file not uploaded yet shows the owner its upload will give it (the
 * sandbox's user, learnt from the first upload of a new file), so that
 * rsync -a, which chowns only what differs, sees then what it sees after.
 */
static void overlay_locked(struct sbx_cache *c, struct sbx_cfile *cf, struct sbx_stat *st,
			   bool full)
{
	struct stat sys;
	if (!local_stat_locked(cf, &sys))
		return;
	if (full) {
		memset(st, 0, sizeof(*st));
		st->mode = S_IFREG | (cf->mode & 07777);
		st->nlink = 1;
		st->uid = c->up_owner ? c->up_uid : getuid();
		st->gid = c->up_owner ? c->up_gid : getgid();
		st->atime = sys.st_atim;
	}
	st->size = sys.st_size;
	if (full || cf->dirty) {
		st->mtime = sys.st_mtim;
		st->ctime = sys.st_ctim;
	}
	cache_defer_overlay_locked(cf, st);
}

/*
 * cf's local facts matter for path's attributes (lock held): its changes,
 * or an open copy's size, unless the copy is known stale (a truncate, or
 * a write through another hard link, changed the file in the sandbox).
 */
static bool overlays(const struct sbx_cfile *cf)
{
	return cf->linked && cf->have_data &&
	       (cf->dirty || (cf->refs > 0 && (cf->stamped || !cf->remote)));
}

/*
 * cf is a clean copy and the remote st differs from it: the file changed
 * and st is the truth. Either the copy was read before the sandbox was
 * last changed from outside (a run, a change report: a loose stamp, whose
 * mtime is unknown, then counts as changed), or the attributes the cache
 * holds for it were learnt after the copy was stamped (a background
 * process appended, and no report said so: daytona has no watch, e2b's
 * covers the working tree). (An open copy outlives its close: FUSE sends
 * the release after close() returns, so the `cat` after a run may come
 * first.) Lock held.
 */
static bool outdated_copy(struct sbx_cache *c, const struct sbx_cfile *cf,
			  const struct sbx_stat *st)
{
	struct cattr *a;
	if (!cf->remote || cf->dirty || !cf->stamped)
		return false;
	bool differs = cf->stamp_size != st->size ||
		       (!cf->stamp_loose && (cf->stamp_mtime.tv_sec != st->mtime.tv_sec ||
					     cf->stamp_mtime.tv_nsec != st->mtime.tv_nsec));
	if (cf->stamp_epoch != c->epoch)
		return cf->stamp_loose || differs;
	if (!differs || !cf->linked)
		return false;
	HASH_FIND_STR(c->attrs, cf->path, a);
	return a && a->has_st && a->set_seq > cf->stamp_seq;
}

void sbx_cache_dir_overlay(struct sbx_cache *c, const char *dir, bool any_age,
			   struct sbx_cache_listing *ls)
{
	struct sbx_cfile *cf, *tmp;
	char parent[4096];
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < ls->n; i++) {
		if (ls->ents[i].has_st && S_ISDIR(ls->ents[i].st.mode)) {
			char *p = join(dir, ls->ents[i].name);
			cache_dir_nlink_locked(c, p, &ls->ents[i].st, any_age);
			free(p);
		}
	}
	HASH_ITER(hh, c->files, cf, tmp)
	{
		const char *name = split(cf->path, parent, sizeof(parent));
		if (!name || strcmp(parent, dir) || !overlays(cf))
			continue;
		size_t i;
		for (i = 0; i < ls->n && strcmp(ls->ents[i].name, name); i++)
			;
		if (i == ls->n) {
			if (cf->remote && !cf->dirty)
				continue; /* removed remotely: the listing is the truth */
			sbx_cache_listing_add(ls, name, NULL);
			overlay_locked(c, cf, &ls->ents[i].st, true);
			ls->ents[i].has_st = true;
		} else if (ls->ents[i].has_st && !outdated_copy(c, cf, &ls->ents[i].st)) {
			overlay_locked(c, cf, &ls->ents[i].st, false);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_dir_empty(struct sbx_cache *c, const char *dir)
{
	struct sbx_cfile *cf, *tmp;
	struct cdir *d;
	char parent[4096];
	bool empty;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->dirs, dir, d);
	empty = d && sbx_now_ms() < d->expires && !HASH_COUNT(d->names);
	HASH_ITER(hh, c->files, cf, tmp)
	{
		const char *name = empty ? split(cf->path, parent, sizeof(parent)) : NULL;
		if (name && !strcmp(parent, dir) && overlays(cf))
			empty = false;
	}
	pthread_mutex_unlock(&c->lock);
	return empty;
}

/* ---- contents ----------------------------------------------------------------- */

int sbx_cfile_fd(const struct sbx_cfile *cf)
{
	return cf->fd;
}

/* Gives cf a new, empty cache file (lock held). */
int cache_cfile_create_locked(struct sbx_cache *c, struct sbx_cfile *cf)
{
	struct sbx_buf tmpl = SBX_BUF_INIT;
	int rc = sbx_mkdir_p(c->dir, 0700), fd;
	if (rc)
		return rc;
	sbx_buf_addf(&tmpl, "%s/cXXXXXX", c->dir);
	fd = mkostemp(tmpl.buf, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		sbx_buf_release(&tmpl);
		return rc;
	}
	if (cf->file) {
		side_set_locked(cf, false);
		unlink(cf->file);
	}
	free(cf->file);
	cf->file = sbx_buf_detach(&tmpl, NULL);
	cf->fd = fd;
	cf->have_data = false;
	cf->stamped = false;
	return 0;
}

/* Makes sure cf->fd is open, reopening a kept file (lock held). */
static int cfile_ensure_fd_locked(struct sbx_cache *c, struct sbx_cfile *cf)
{
	if (cf->fd >= 0)
		return 0;
	if (cf->file && cf->have_data) {
		cf->fd = open(cf->file, O_RDWR | O_CLOEXEC);
		if (cf->fd >= 0)
			return 0;
	}
	return cache_cfile_create_locked(c, cf);
}

static void snapshot_locked(const struct sbx_cache *c, const struct sbx_cfile *cf,
			    struct sbx_cfile_state *s)
{
	s->path = sbx_xstrdup(cf->path);
	s->refs = cf->refs;
	s->linked = cf->linked;
	s->have_data = cf->have_data;
	s->dirty = cf->dirty;
	s->remote = cf->remote;
	/* A loose stamp (an upload not stat'ed) holds until the sandbox is changed from outside. */
	s->stamped = cf->stamped && (!cf->stamp_loose || cf->stamp_epoch == c->epoch);
	s->stamp_loose = cf->stamp_loose;
	s->stamp_size = cf->stamp_size;
	s->stamp_mtime = cf->stamp_mtime;
	s->mode = cf->mode;
	s->wgen = cf->wgen;
	s->open_before_change = cf->open_epoch != c->epoch;
	s->streaming = false; /* sbx_cache_file_open's to say */
}

/* Drops clean, unused entries beyond the byte budget, oldest first (lock held). */
void cache_evict_locked(struct sbx_cache *c)
{
	for (;;) {
		struct sbx_cfile *cf, *tmp, *oldest = NULL;
		long long total = 0;
		HASH_ITER(hh, c->files, cf, tmp)
		{
			if (cf->refs || cf->dirty)
				continue;
			total += cf->bytes;
			if (!oldest || cf->used_ms < oldest->used_ms)
				oldest = cf;
		}
		if (total <= SBX_CACHE_KEEP_BYTES || !oldest)
			return;
		HASH_DEL(c->files, oldest);
		cfile_free(oldest, false);
	}
}

struct sbx_cfile *cache_cfile_add_locked(struct sbx_cache *c, const char *path)
{
	struct sbx_cfile *cf = xcalloc(1, sizeof(*cf));
	cf->path = sbx_xstrdup(path);
	cf->fd = -1;
	cf->linked = true;
	cf->remote = true;
	HASH_ADD_KEYPTR(hh, c->files, cf->path, strlen(cf->path), cf);
	return cf;
}

/* A read-only open goes beside an upload of local changes (the cache file is whole) ... */
static bool joins_upload(const struct sbx_cfile *cf)
{
	return cf->uploading && cf->dirty && cf->have_data && cf->fd >= 0;
}

/* ... and beside a download read as it arrives, unless it is being given up. */
static bool joins_stream(const struct sbx_cfile *cf)
{
	return cf->streaming && !cf->stream_dropped && cf->fd >= 0;
}

int sbx_cache_file_open(struct sbx_cache *c, const char *path, bool writing, struct sbx_cfile **out,
			struct sbx_cfile_state *state)
{
	struct sbx_cfile *cf;
	int rc;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	if (!cf)
		cf = cache_cfile_add_locked(c, path);
	cf->refs++;
	/*
	 * Local changes being uploaded (in the background, writeback.c) are
	 * opened to read beside the upload, not after it: the open needs no
	 * request. An open to write waits for it: the upload reads the cache
	 * file as it goes, and `cp` over a file whose last copy was still going
	 * up truncated it under the upload, which then put a mix of the two
	 * (or failed: "shrank") under the name a reader of the sandbox opens.
	 */
	while (cf->busy && (writing || !(joins_upload(cf) || joins_stream(cf))))
		pthread_cond_wait(&c->cond, &c->lock);
	rc = cfile_ensure_fd_locked(c, cf);
	if (rc) {
		pthread_mutex_unlock(&c->lock);
		sbx_cache_file_put(c, cf);
		return rc;
	}
	if (cf->busy)
		cf->shared_opens++;
	else
		cf->busy = true;
	cf->used_ms = sbx_now_ms();
	cf->open_epoch = c->epoch;
	snapshot_locked(c, cf, state);
	state->streaming = !writing && joins_stream(cf);
	pthread_mutex_unlock(&c->lock);
	*out = cf;
	return 0;
}

void sbx_cache_file_ready(struct sbx_cache *c, struct sbx_cfile *cf, enum sbx_cfile_how how,
			  mode_t mode, const struct sbx_stat *st)
{
	pthread_mutex_lock(&c->lock);
	switch (how) {
	case SBX_CF_KEEP:
		break;
	case SBX_CF_NEW:
	case SBX_CF_TRUNC:
		if (ftruncate(cf->fd, 0) == 0) {
			if (!cf->dirty)
				side_set_locked(cf, true);
			cf->have_data = true;
			cf->dirty = true;
			cf->wgen++;
			cf->stamped = false;
			if (how == SBX_CF_NEW) {
				/*
				 * Another user's new file is theirs, as on a local disk: a
				 * chown to them waits for the upload like tar's (the
				 * overlay shows it at once, and the kernel checks their
				 * chmod against it). The upload may run on a write-back
				 * worker, which knows no caller.
				 */
				const struct sbx_caller *who = sbx_caller_get();
				cf->remote = false;
				cf->mode = mode & 07777;
				if (who && who->known && who->uid != geteuid()) {
					cf->pend_owner = true;
					cf->pend_uid = who->uid;
					cf->pend_gid = who->gid;
					cache_defer_side_locked(cf);
				}
			}
		}
		break;
	case SBX_CF_LOADED:
		if (cf->dirty)
			side_set_locked(cf, false);
		cf->have_data = true;
		cf->dirty = false;
		cf->remote = true;
		cf->stamped = st != NULL;
		cf->stamp_loose = false;
		if (st) {
			cf->stamp_size = st->size;
			cf->stamp_mtime = st->mtime;
			cf->stamp_epoch = c->epoch;
			cf->stamp_seq = ++c->seq;
			cf->mode = st->mode & 07777;
		}
		break;
	case SBX_CF_FAILED:
		cf->have_data = false;
		cf->stamped = false;
		break;
	case SBX_CF_STREAM: /* never given: fs_cached_file.c's own */
	case SBX_CF_JOIN:   /* the stream's claim: its end says how it went */
		break;
	}
	if (how != SBX_CF_FAILED && how != SBX_CF_JOIN)
		cf->stream_rc = 0; /* an earlier stream's failure is not this content's */
	if (cf->shared_opens)
		cf->shared_opens--; /* the claim is another's */
	else
		cf->busy = false;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_put(struct sbx_cache *c, struct sbx_cfile *cf)
{
	struct stat sys;
	pthread_mutex_lock(&c->lock);
	if (--cf->refs > 0 || cf->dirty) {
		if (!cf->linked && cf->refs == 0)
			cfile_free(cf, false); /* unlinked while dirty: the user removed it */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (!cf->linked) {
		cfile_free(cf, false);
	} else if (!cf->have_data) {
		HASH_DEL(c->files, cf);
		cfile_free(cf, false);
	} else {
		cf->bytes = local_stat_locked(cf, &sys) ? sys.st_size : 0;
		close(cf->fd);
		cf->fd = -1;
		cache_evict_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_hold(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cf->refs++;
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_bg_failed(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cf->bg_failed = cf->dirty;
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_file_bg_failed_take(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool failed = cf->bg_failed;
	cf->bg_failed = false;
	pthread_mutex_unlock(&c->lock);
	return failed;
}

bool sbx_cache_file_dirty(struct sbx_cache *c, struct sbx_cfile *cf, unsigned long *wgen)
{
	pthread_mutex_lock(&c->lock);
	bool dirty = cf->dirty && cf->linked;
	if (wgen)
		*wgen = cf->wgen;
	pthread_mutex_unlock(&c->lock);
	return dirty;
}

bool sbx_cache_file_is_new(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	bool fresh = !cf->remote;
	pthread_mutex_unlock(&c->lock);
	return fresh;
}

struct sbx_cfile *sbx_cache_file_find_live(struct sbx_cache *c, const char *path)
{
	struct sbx_cfile *cf;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	if (cf && overlays(cf))
		cf->refs++;
	else
		cf = NULL;
	pthread_mutex_unlock(&c->lock);
	return cf;
}

void sbx_cache_file_stream_begin(struct sbx_cache *c, struct sbx_cfile *cf, void *src)
{
	pthread_mutex_lock(&c->lock);
	cf->streaming = true;
	cf->stream_dropped = false;
	cf->stream_src = src;
	c->streams++;
	cf->stream_have = 0;
	cf->stream_need = 0;
	cf->stream_rc = 0;
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_file_stream_have(struct sbx_cache *c, struct sbx_cfile *cf, off_t have)
{
	bool wanted;
	pthread_mutex_lock(&c->lock);
	cf->stream_have = have;
	wanted = cf->refs > 1;
	cf->stream_dropped = !wanted; /* decided under the lock an open joins by */
	/* Only when the least of what the waiting reads need has come (not per piece). */
	if (cf->stream_need && have >= cf->stream_need) {
		cf->stream_need = 0;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return wanted;
}

void sbx_cache_file_stream_end(struct sbx_cache *c, struct sbx_cfile *cf, int rc)
{
	pthread_mutex_lock(&c->lock);
	cf->streaming = false;
	cf->stream_rc = rc;
	pthread_cond_broadcast(&c->cond);
	while (cf->stream_lent) /* their sandbox is the stream's until it ends */
		pthread_cond_wait(&c->cond, &c->lock);
	cf->stream_src = NULL;
	c->streams--;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

void *sbx_cache_file_stream_lend(struct sbx_cache *c, struct sbx_cfile *cf, off_t from, off_t far)
{
	void *src = NULL;
	pthread_mutex_lock(&c->lock);
	if (cf->streaming && cf->stream_src && from - cf->stream_have > far) {
		cf->stream_lent++;
		src = cf->stream_src;
	}
	pthread_mutex_unlock(&c->lock);
	return src;
}

void sbx_cache_file_stream_return(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	if (!--cf->stream_lent)
		pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_streams_wait(struct sbx_cache *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->streams)
		pthread_cond_wait(&c->cond, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

int sbx_cache_file_stream_wait(struct sbx_cache *c, struct sbx_cfile *cf, off_t upto)
{
	int rc;
	pthread_mutex_lock(&c->lock);
	while (cf->streaming && cf->stream_have < upto) {
		if (!cf->stream_need || upto < cf->stream_need)
			cf->stream_need = upto;
		pthread_cond_wait(&c->cond, &c->lock);
	}
	rc = cf->streaming ? 0 : cf->stream_rc;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

void sbx_cache_file_changed(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	if (!cf->dirty)
		side_set_locked(cf, true);
	cf->dirty = true;
	cf->have_data = true;
	cf->wgen++;
	if (cf->pend_times) { /* a write after utimens: the mtime is the write's */
		cf->pend_times = false;
		cache_defer_side_locked(cf);
	}
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_begin_upload(struct sbx_cache *c, struct sbx_cfile *cf,
				 struct sbx_cfile_state *state)
{
	pthread_mutex_lock(&c->lock);
	while (cf->busy)
		pthread_cond_wait(&c->cond, &c->lock);
	cf->busy = true;
	cf->uploading = true;
	cf->uploads++;
	snapshot_locked(c, cf, state);
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_owner_learn(struct sbx_cache *c, uid_t uid, gid_t gid)
{
	pthread_mutex_lock(&c->lock);
	c->up_owner = true;
	c->up_uid = uid;
	c->up_gid = gid;
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_file_owner_known(struct sbx_cache *c, uid_t *uid, gid_t *gid)
{
	pthread_mutex_lock(&c->lock);
	bool known = c->up_owner;
	*uid = c->up_uid;
	*gid = c->up_gid;
	pthread_mutex_unlock(&c->lock);
	return known;
}

void sbx_cache_file_end_upload(struct sbx_cache *c, struct sbx_cfile *cf, unsigned long wgen,
			       bool ok, const struct sbx_stat *st, unsigned long gen, off_t sent)
{
	pthread_mutex_lock(&c->lock);
	if (ok) {
		/*
		 * Made-up attributes (sent >= 0) are the mount's own facts, not a
		 * reply a change could have overtaken (runs and pauses wait for
		 * uploads): other uploads' generation bumps do not make them stale.
		 * With four workers they nearly always came between, and every
		 * dropped entry cost tar x's next utimens a Stat (171 of 200).
		 */
		bool current = gen == c->gen || sent >= 0, added = !cf->remote && cf->linked;
		cf->remote = true;
		cf->bg_failed = false;
		cf->fails = 0;
		if (wgen == cf->wgen && cf->dirty) {
			cf->dirty = false;
			side_set_locked(cf, false);
		}
		cf->stamped = st != NULL || sent >= 0;
		cf->stamp_loose = sent >= 0;
		if (sent >= 0) {
			cf->stamp_size = sent;
		} else if (st) {
			cf->stamp_size = st->size;
			cf->stamp_mtime = st->mtime;
		}
		cf->stamp_epoch = c->epoch;
		cf->stamp_seq = ++c->seq;
		/*
		 * The upload changed path: older attributes must not outlive it.
		 * A first upload made the file appear: said here, under the lock
		 * and before busy drops, so an unlink waiting for this upload
		 * cannot run between the two and leave a ghost name.
		 */
		if (added) {
			cache_note_added_locked(c, cf->path, st && current ? st : NULL);
		} else {
			c->gen++;
			cache_echo_note_locked(c, cf->path);
			if (cf->linked && st && current)
				cache_attr_set_locked(c, cf->path, st);
			else if (cf->linked)
				cache_attr_drop_locked(c, cf->path);
		}
	} else if (cf->dirty) {
		/* retry_ms, doubling per failure in a row up to 32 times it */
		cf->retry_at = sbx_now_ms() + (c->retry_ms << (cf->fails < 5 ? cf->fails : 5));
		cf->fails++;
	}
	if (cf->dirty)
		cache_defer_side_locked(cf); /* what still waits (given back, or none) */
	cf->attrs_closed = false;
	cf->busy = false;
	cf->uploading = false;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Up to max dirty, linked entries keep() accepts, each with a reference for the caller. */
static size_t collect(struct sbx_cache *c, struct sbx_cfile **out, size_t max,
		      bool (*keep)(const struct sbx_cfile *cf, const void *arg, long long now),
		      const void *arg)
{
	struct sbx_cfile *cf, *tmp;
	long long now = sbx_now_ms();
	size_t n = 0;
	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->files, cf, tmp)
	{
		if (n == max)
			break;
		if (cf->dirty && cf->linked && keep(cf, arg, now)) {
			cf->refs++;
			out[n++] = cf;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return n;
}

static bool of_kind(const struct sbx_cfile *cf, const void *arg, long long now)
{
	enum sbx_unsaved which = *(const enum sbx_unsaved *)arg;
	bool held = cf->refs || cf->busy;
	return which == SBX_UNSAVED_ALL ||
	       (!held && (which == SBX_UNSAVED_OWED || cf->retry_at <= now));
}

static bool strictly_below(const struct sbx_cfile *cf, const void *arg, long long now)
{
	const char *dir = arg;
	(void)now;
	return strcmp(cf->path, dir) && sbx_path_within(cf->path, dir, strlen(dir));
}

size_t sbx_cache_file_unsaved(struct sbx_cache *c, struct sbx_cfile **out, size_t max,
			      enum sbx_unsaved which)
{
	return collect(c, out, max, of_kind, &which);
}

size_t sbx_cache_file_dirty_under(struct sbx_cache *c, const char *dir, struct sbx_cfile **out,
				  size_t max)
{
	return collect(c, out, max, strictly_below, dir);
}

size_t sbx_cache_file_orphans(struct sbx_cache *c, struct sbx_cfile **out, size_t max)
{
	return sbx_cache_file_unsaved(c, out, max, SBX_UNSAVED_ORPHANS);
}

void sbx_cache_retry_now(struct sbx_cache *c)
{
	struct sbx_cfile *cf, *tmp;
	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->files, cf, tmp) cf->retry_at = 0;
	pthread_mutex_unlock(&c->lock);
}

size_t sbx_cache_unsaved_count(struct sbx_cache *c)
{
	struct sbx_cfile *cf, *tmp;
	size_t n = 0;
	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->files, cf, tmp) n += cf->dirty && cf->linked;
	pthread_mutex_unlock(&c->lock);
	return n;
}

const char *sbx_cfile_name(const struct sbx_cfile *cf)
{
	return cf->file;
}

char *sbx_cfile_path(struct sbx_cache *c, const struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	char *path = sbx_xstrdup(cf->path);
	pthread_mutex_unlock(&c->lock);
	return path;
}

bool sbx_cache_file_overlay(struct sbx_cache *c, const char *path, struct sbx_stat *st,
			    enum sbx_overlay how)
{
	struct sbx_cfile *cf;
	bool applied = false;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	if (cf && overlays(cf) && !(how == SBX_OV_REMOTE && outdated_copy(c, cf, st)) &&
	    (how == SBX_OV_REMOTE || !cf->remote || (how == SBX_OV_NO_REMOTE && cf->dirty))) {
		overlay_locked(c, cf, st, how != SBX_OV_REMOTE);
		applied = true;
	}
	pthread_mutex_unlock(&c->lock);
	return applied;
}

bool sbx_cache_file_outdated(struct sbx_cache *c, struct sbx_cfile *cf)
{
	struct sbx_stat st;
	bool out = false;
	pthread_mutex_lock(&c->lock);
	if (!cf->busy && !cf->streaming && cf->linked && cache_attr_peek_locked(c, cf->path, &st))
		out = outdated_copy(c, cf, &st);
	pthread_mutex_unlock(&c->lock);
	return out;
}

void sbx_cache_file_stat(struct sbx_cache *c, struct sbx_cfile *cf, struct sbx_stat *st)
{
	pthread_mutex_lock(&c->lock);
	overlay_locked(c, cf, st, true);
	pthread_mutex_unlock(&c->lock);
}

/*
 * An upload in flight (a release's, which close() does not wait for) is
 * waited for: deciding "local only" before it lands would skip the remote
 * unlink of a file that then appears in the sandbox.
 */
bool sbx_cache_file_local_only(struct sbx_cache *c, const char *path)
{
	struct sbx_cfile *cf;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		HASH_FIND_STR(c->files, path, cf);
		if (!cf || !cf->busy)
			break;
		pthread_cond_wait(&c->cond, &c->lock);
	}
	bool local = cf && cf->have_data && !cf->remote;
	pthread_mutex_unlock(&c->lock);
	return local;
}

void sbx_cache_file_stale(struct sbx_cache *c, const char *path)
{
	struct sbx_cfile *cf;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	if (cf && !cf->dirty)
		cf->stamped = false;
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_restamp(struct sbx_cache *c, const char *path, const struct timespec *mtime)
{
	struct sbx_cfile *cf;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	if (cf && !cf->dirty && cf->stamped) {
		cf->stamp_mtime = *mtime; /* our own change: the epoch stays */
		cf->stamp_seq = ++c->seq; /* attributes learnt before it are older */
	}
	pthread_mutex_unlock(&c->lock);
}

/* Takes cf out of the table; it lives on while referenced (lock held). */
static void detach_locked(struct sbx_cache *c, struct sbx_cfile *cf)
{
	HASH_DEL(c->files, cf);
	side_set_locked(cf, false);
	cf->linked = false;
	if (cf->refs == 0)
		cfile_free(cf, false);
}

void sbx_cache_file_unlink(struct sbx_cache *c, const char *path)
{
	struct sbx_cfile *cf;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	if (cf)
		detach_locked(c, cf);
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_gone(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	if (cf->linked)
		detach_locked(c, cf); /* the upload's reference keeps it */
	cf->dirty = false;
	cf->pend_mode = cf->pend_times = cf->pend_owner = false;
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_still_there(struct sbx_cache *c, struct sbx_cfile *cf)
{
	pthread_mutex_lock(&c->lock);
	cf->open_epoch = c->epoch;
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_rename(struct sbx_cache *c, const char *from, const char *to, bool exchange)
{
	struct sbx_cfile *cf, *tmp, *moved = NULL;
	pthread_mutex_lock(&c->lock);
	/* Take every affected entry out first, so the new keys never collide. */
	HASH_ITER(hh, c->files, cf, tmp)
	{
		const char *root = NULL, *dest = NULL;
		if (sbx_path_under(cf->path, from)) {
			root = from;
			dest = to;
		} else if (sbx_path_under(cf->path, to)) {
			if (!exchange) {
				detach_locked(c, cf);
				continue;
			}
			root = to;
			dest = from;
		} else {
			continue;
		}
		struct sbx_buf b = SBX_BUF_INIT;
		sbx_buf_addf(&b, "%s%s", dest, cf->path + strlen(root));
		HASH_DEL(c->files, cf);
		free(cf->path);
		cf->path = sbx_buf_detach(&b, NULL);
		HASH_ADD_KEYPTR(hh, moved, cf->path, strlen(cf->path), cf);
	}
	HASH_ITER(hh, moved, cf, tmp)
	{
		HASH_DEL(moved, cf);
		HASH_ADD_KEYPTR(hh, c->files, cf->path, strlen(cf->path), cf);
		if (cf->dirty)
			side_set_locked(cf, true); /* the new name */
	}
	pthread_mutex_unlock(&c->lock);
}

/*
 * Waits for the uploads in flight now (not for those that begin later: a
 * busy writer cannot hold the caller forever). An upload the lease timer
 * or a close started applies its waiting attributes before it ends, so
 * a run after this sees the data and the attributes.
 */
void sbx_cache_wait_uploads(struct sbx_cache *c)
{
	struct sbx_cfile *cf, *tmp, **v = NULL;
	unsigned long *seen = NULL;
	size_t n = 0, cap = 0;
	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->files, cf, tmp)
	{
		if (!cf->uploading)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			v = sbx_xrealloc(v, cap * sizeof(*v));
			seen = sbx_xrealloc(seen, cap * sizeof(*seen));
		}
		cf->refs++;
		seen[n] = cf->uploads;
		v[n++] = cf;
	}
	for (size_t i = 0; i < n; i++) {
		while (v[i]->uploading && v[i]->uploads == seen[i])
			pthread_cond_wait(&c->cond, &c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < n; i++)
		sbx_cache_file_put(c, v[i]);
	free(v);
	free(seen);
}
