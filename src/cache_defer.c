/*
 * cache_defer — attributes (chmod, chown, utimens) kept with a dirty content
 * entry until its upload lands (write-back, see cache.h). tar sets each
 * file's mode and times right after closing it; applying them remotely
 * at once would need the upload first (settle), putting every upload
 * back on tar's path. Kept here instead: the local cache file takes the
 * times, the overlay shows the mode, FILE.attr keeps both on disk for
 * the next mount (as FILE.path keeps the data), and the upload takes
 * them once its data is written and hands them to the provider.
 * Tables and lock are cache_file.c's (cache_int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/pathutil.h"
#include "base/xalloc.h"
#include "cache_int.h"

/* FILE.attr: lines "mode OCTAL", "owner UID GID", "times ASEC ANSEC MSEC MNSEC". */
static void side_name(const struct sbx_cfile *cf, struct sbx_buf *b)
{
	sbx_buf_addf(b, "%s.attr", cf->file);
}

void cache_defer_side_locked(struct sbx_cfile *cf)
{
	struct sbx_buf side = SBX_BUF_INIT, text = SBX_BUF_INIT;
	if (!cf->file)
		return;
	side_name(cf, &side);
	if (cf->dirty && cf->linked && (cf->pend_mode || cf->pend_times || cf->pend_owner)) {
		if (cf->pend_mode)
			sbx_buf_addf(&text, "mode %o\n", (unsigned)(cf->mode & 07777));
		if (cf->pend_owner)
			sbx_buf_addf(&text, "owner %ld %ld\n",
				     cf->pend_uid == (uid_t)-1 ? -1L : (long)cf->pend_uid,
				     cf->pend_gid == (gid_t)-1 ? -1L : (long)cf->pend_gid);
		if (cf->pend_times)
			sbx_buf_addf(&text, "times %lld %ld %lld %ld\n",
				     (long long)cf->pend_ts[0].tv_sec, cf->pend_ts[0].tv_nsec,
				     (long long)cf->pend_ts[1].tv_sec, cf->pend_ts[1].tv_nsec);
		if (sbx_write_file_atomic(side.buf, text.buf, text.len))
			sbx_log(SBX_LOG_ERR,
				"cache: cannot write %s: a crash now would lose the mode "
				"and times waiting for the upload of %s",
				side.buf, cf->path);
	} else {
		unlink(side.buf);
	}
	sbx_buf_release(&side);
	sbx_buf_release(&text);
}

void cache_defer_drop_locked(struct sbx_cfile *cf)
{
	struct sbx_buf side = SBX_BUF_INIT;
	cf->pend_mode = cf->pend_times = cf->pend_owner = false;
	if (!cf->file)
		return;
	side_name(cf, &side);
	unlink(side.buf);
	sbx_buf_release(&side);
}

void cache_defer_adopt(struct sbx_cfile *cf)
{
	struct sbx_buf side = SBX_BUF_INIT, text = SBX_BUF_INIT;
	unsigned mode;
	long long as, ms;
	long an, mn, uid, gid;
	side_name(cf, &side);
	if (sbx_read_file(side.buf, &text, 256) == 0) {
		for (char *line = text.buf; line && *line;) {
			char *nl = strchr(line, '\n');
			if (nl)
				*nl = '\0';
			if (sscanf(line, "mode %o", &mode) == 1) {
				cf->mode = mode & 07777;
				cf->pend_mode = true;
			} else if (sscanf(line, "owner %ld %ld", &uid, &gid) == 2) {
				cf->pend_uid = uid < 0 ? (uid_t)-1 : (uid_t)uid;
				cf->pend_gid = gid < 0 ? (gid_t)-1 : (gid_t)gid;
				cf->pend_owner = true;
			} else if (sscanf(line, "times %lld %ld %lld %ld", &as, &an, &ms, &mn) ==
				   4) {
				cf->pend_ts[0] = (struct timespec){.tv_sec = as, .tv_nsec = an};
				cf->pend_ts[1] = (struct timespec){.tv_sec = ms, .tv_nsec = mn};
				cf->pend_times = true;
			}
			line = nl ? nl + 1 : NULL;
		}
	}
	sbx_buf_release(&side);
	sbx_buf_release(&text);
}

void sbx_cfile_attrs_onto(struct sbx_stat *st, const struct sbx_cfile_attrs *a, bool times)
{
	if (a->mode_set)
		st->mode = (st->mode & ~07777u) | (a->mode & 07777);
	if (a->owner_set && a->uid != (uid_t)-1)
		st->uid = a->uid;
	if (a->owner_set && a->gid != (gid_t)-1)
		st->gid = a->gid;
	if (times && a->times_set && a->ts[0].tv_nsec != UTIME_OMIT)
		st->atime = a->ts[0];
	if (times && a->times_set && a->ts[1].tv_nsec != UTIME_OMIT)
		st->mtime = a->ts[1];
}

/*
 * Those the upload in flight took first (the provider may not have them
 * yet, and the stat ending the upload is not stored yet: a getattr between
 * the two showed the old owner, and the kernel kept it for its TTL), then
 * those waiting.
 */
void cache_defer_overlay_locked(const struct sbx_cfile *cf, struct sbx_stat *st)
{
	struct sbx_cfile_attrs pend = {.mode_set = cf->pend_mode,
				       .owner_set = cf->pend_owner,
				       .mode = cf->mode,
				       .uid = cf->pend_uid,
				       .gid = cf->pend_gid};
	if (cf->attrs_closed)
		sbx_cfile_attrs_onto(st, &cf->fly, false);
	sbx_cfile_attrs_onto(st, &pend, false);
}

/* path's entry if an upload of it is coming that will take attributes (lock held). */
static struct sbx_cfile *waiting_locked(struct sbx_cache *c, const char *path, bool open_only)
{
	struct sbx_cfile *cf;
	HASH_FIND_STR(c->files, path, cf);
	/* An upload past its data (attrs_closed) would not see them: the caller waits. */
	if (!cf || !cf->linked || !cf->dirty || !cf->have_data || cf->fd < 0 ||
	    (open_only && cf->refs <= 0) || (cf->uploading && cf->attrs_closed))
		return NULL;
	return cf;
}

bool sbx_cache_file_defer_owner(struct sbx_cache *c, const char *path, bool open_only, uid_t uid,
				gid_t gid)
{
	struct sbx_cfile *cf;
	pthread_mutex_lock(&c->lock);
	cf = waiting_locked(c, path, open_only);
	if (cf) {
		if (!cf->pend_owner)
			cf->pend_uid = (uid_t)-1, cf->pend_gid = (gid_t)-1;
		if (uid != (uid_t)-1)
			cf->pend_uid = uid;
		if (gid != (gid_t)-1)
			cf->pend_gid = gid;
		cf->pend_owner = true;
		cache_defer_side_locked(cf);
	}
	pthread_mutex_unlock(&c->lock);
	return cf != NULL;
}

bool sbx_cache_file_defer_attrs(struct sbx_cache *c, const char *path, bool open_only,
				const mode_t *mode, const struct timespec ts[2])
{
	struct sbx_cfile *cf;
	bool kept = false;
	pthread_mutex_lock(&c->lock);
	cf = waiting_locked(c, path, open_only);
	if (!cf)
		goto out;
	if (ts) {
		/* The local file carries them (what stat shows); "now" is now, not the upload's. */
		if (futimens(cf->fd, ts))
			goto out;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		for (int i = 0; i < 2; i++) {
			if (ts[i].tv_nsec == UTIME_OMIT)
				continue;
			cf->pend_ts[i] = ts[i].tv_nsec == UTIME_NOW ? now : ts[i];
			if (!cf->pend_times)
				cf->pend_ts[!i].tv_nsec = UTIME_OMIT;
		}
		cf->pend_times = true;
	}
	if (mode) {
		cf->mode = *mode & 07777;
		cf->pend_mode = true;
	}
	cache_defer_side_locked(cf);
	kept = true;
out:
	pthread_mutex_unlock(&c->lock);
	return kept;
}

void sbx_cache_file_take_attrs(struct sbx_cache *c, struct sbx_cfile *cf, struct sbx_cfile_attrs *a)
{
	pthread_mutex_lock(&c->lock);
	a->mode_set = cf->pend_mode;
	a->times_set = cf->pend_times;
	a->owner_set = cf->pend_owner;
	a->mode = cf->mode;
	a->uid = cf->pend_uid;
	a->gid = cf->pend_gid;
	a->ts[0] = cf->pend_ts[0];
	a->ts[1] = cf->pend_ts[1];
	cf->pend_mode = cf->pend_times = cf->pend_owner = false;
	cf->attrs_closed = true; /* until end_upload: FILE.attr stays until then too */
	cf->fly = *a;
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_file_return_attrs(struct sbx_cache *c, struct sbx_cfile *cf,
				 const struct sbx_cfile_attrs *a)
{
	pthread_mutex_lock(&c->lock);
	if (a->mode_set && !cf->pend_mode) {
		cf->mode = a->mode;
		cf->pend_mode = true;
	}
	if (a->owner_set && !cf->pend_owner) {
		cf->pend_uid = a->uid;
		cf->pend_gid = a->gid;
		cf->pend_owner = true;
	}
	if (a->times_set && !cf->pend_times) {
		cf->pend_ts[0] = a->ts[0];
		cf->pend_ts[1] = a->ts[1];
		cf->pend_times = true;
	}
	pthread_mutex_unlock(&c->lock);
}

/* ---- directory times over the uploads below ------------------------------------------ */

/* The pin of dir, or NULL (lock held). */
static struct cache_pin *pin_of_locked(struct sbx_cache *c, const char *dir)
{
	for (size_t i = 0; i < c->npins; i++)
		if (!strcmp(c->pins[i].dir, dir))
			return &c->pins[i];
	return NULL;
}

static void pin_drop_locked(struct sbx_cache *c, struct cache_pin *p)
{
	free(p->dir);
	*p = c->pins[--c->npins];
}

/* A dirty file other than cf waits directly in dir (lock held). */
static bool dirty_in_locked(struct sbx_cache *c, const char *dir, const struct sbx_cfile *cf)
{
	struct sbx_cfile *o, *tmp;
	size_t n = strlen(dir);
	HASH_ITER(hh, c->files, o, tmp)
	{
		if (o != cf && o->dirty && o->linked && sbx_path_dirlen(o->path) == n &&
		    !strncmp(o->path, dir, n) && strcmp(o->path, dir))
			return true;
	}
	return false;
}

void cache_dir_times_unpin_locked(struct sbx_cache *c, const char *path)
{
	struct cache_pin *p;
	char *dir;
	if (!c->npins)
		return;
	dir = sbx_xstrndup(path, sbx_path_dirlen(path));
	if ((p = pin_of_locked(c, dir)))
		pin_drop_locked(c, p);
	free(dir);
}

void sbx_cache_dir_times_pin(struct sbx_cache *c, const char *dir, const struct timespec ts[2])
{
	struct cache_pin *p;
	struct cattr *a;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&c->lock);
	/* A file's utimens (no scan of the table for it) or no upload waiting in dir. */
	HASH_FIND_STR(c->attrs, dir, a);
	if ((a && a->has_st && !S_ISDIR(a->st.mode)) || !dirty_in_locked(c, dir, NULL)) {
		if ((p = pin_of_locked(c, dir)))
			pin_drop_locked(c, p);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (!(p = pin_of_locked(c, dir))) {
		if (c->npins == CACHE_PINS_MAX)
			pin_drop_locked(c, &c->pins[0]);
		c->pins = sbx_xreallocarray(c->pins, c->npins + 1, sizeof(*c->pins));
		p = &c->pins[c->npins++];
		p->dir = sbx_xstrdup(dir);
	}
	for (int i = 0; i < 2; i++)
		p->ts[i] = ts[i].tv_nsec == UTIME_NOW ? now : ts[i];
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_dir_times_after(struct sbx_cache *c, const char *file, const struct sbx_cfile *cf,
			       char **dir, struct timespec ts[2])
{
	char *d = sbx_xstrndup(file, sbx_path_dirlen(file));
	struct cache_pin *p;
	pthread_mutex_lock(&c->lock);
	p = c->npins ? pin_of_locked(c, d) : NULL;
	if (p) {
		ts[0] = p->ts[0];
		ts[1] = p->ts[1];
		if (!dirty_in_locked(c, d, cf))
			pin_drop_locked(c, p);
	}
	pthread_mutex_unlock(&c->lock);
	if (!p) {
		free(d);
		return false;
	}
	*dir = d;
	return true;
}
