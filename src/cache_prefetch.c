/*
 * cache_prefetch — the tables' side of reading a directory's small files
 * in bulk (fs_prefetch.c makes the request): when a second file of one
 * directory is downloaded soon after a first, which other files are worth
 * fetching, and seeding their content entries with what came back, stamped
 * exactly as a download stamps them. It never calls a provider.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/sysutil.h"
#include "cache_int.h"

bool sbx_cache_prefetch_due(struct sbx_cache *c, const char *path, long window_ms)
{
	char dir[sizeof(c->pf_dir)];
	long long now = sbx_now_ms();
	bool due;
	if (!split(path, dir, sizeof(dir)))
		return false;
	pthread_mutex_lock(&c->lock);
	due = !strcmp(dir, c->pf_dir) && now - c->pf_at <= window_ms;
	snprintf(c->pf_dir, sizeof(c->pf_dir), "%s", dir);
	c->pf_at = now;
	pthread_mutex_unlock(&c->lock);
	return due;
}

/* cf holds a copy stamped with st's size and mtime (lock held). */
static bool stamped_as(const struct sbx_cfile *cf, const struct sbx_stat *st)
{
	return cf->have_data && cf->stamped && !cf->stamp_loose && cf->stamp_size == st->size &&
	       cf->stamp_mtime.tv_sec == st->mtime.tv_sec &&
	       cf->stamp_mtime.tv_nsec == st->mtime.tv_nsec;
}

/* Nobody uses cf: its content may be replaced (lock held). */
static bool idle(const struct sbx_cfile *cf)
{
	return !cf->refs && !cf->busy && !cf->dirty;
}

bool sbx_cache_prefetch_wanted(struct sbx_cache *c, const char *path, const struct sbx_stat *st)
{
	struct sbx_cfile *cf;
	bool wanted;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	wanted = !cf || (idle(cf) && !stamped_as(cf, st));
	pthread_mutex_unlock(&c->lock);
	return wanted;
}

int sbx_cache_prefetch_seed(struct sbx_cache *c, const char *path, const char *data, size_t len,
			    const struct sbx_stat *st, unsigned long gen)
{
	struct sbx_cfile *cf;
	int rc = 0;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->files, path, cf);
	if (gen != c->gen || (off_t)len != st->size || (cf && (!idle(cf) || stamped_as(cf, st))))
		goto out;
	if (!cf)
		cf = cache_cfile_add_locked(c, path);
	if (cf->fd >= 0) {
		close(cf->fd);
		cf->fd = -1;
	}
	/*
	 * The bytes are written under the lock: a few hundred KiB at most to
	 * a local file, and no claim is left for an open to wait on (two
	 * prefetches of one directory at once would wait on each other).
	 */
	rc = cache_cfile_create_locked(c, cf);
	if (!rc)
		rc = sbx_write_all(cf->fd, data, len);
	if (rc) {
		HASH_DEL(c->files, cf);
		if (cf->fd >= 0)
			close(cf->fd);
		if (cf->file)
			unlink(cf->file);
		free(cf->file);
		free(cf->path);
		free(cf);
		goto out;
	}
	close(cf->fd);
	cf->fd = -1;
	cf->have_data = true;
	cf->stamped = true;
	cf->stamp_loose = false;
	cf->stamp_size = st->size;
	cf->stamp_mtime = st->mtime;
	cf->stamp_epoch = c->epoch;
	cf->stamp_seq = ++c->seq;
	cf->mode = st->mode & 07777;
	cf->bytes = (off_t)len;
	cf->used_ms = sbx_now_ms();
	cache_evict_locked(c);
	rc = 1;
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}
