/* kinval — kernel cache tracking for fs/ (see kinval.h). */
#include "kinval.h"
#include "base/xalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uthash.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/sysutil.h"

/* Bound on paths remembered per lease between two runs (about 100 B each),
 * and on the doubted ones (the oldest are forgotten first). */
#define SBX_KINVAL_MAX 200000

struct path_entry {
	UT_hash_handle hh;
	mode_t type; /* S_IFMT bits the kernel was given for path */
	char path[]; /* the key */
};

struct sbx_kinval {
	pthread_mutex_t lock;	  /* protects paths, n and doubt */
	struct path_entry *paths; /* noted since the last flush */
	unsigned n;
	struct path_entry *doubt; /* invalidated, the kernel's type kept (kinval.h) */
};

static void (*inval_cb)(void *ctx, const char *path);
static void (*gone_cb)(void *ctx, const char *name);
static void *inval_ctx;

void sbx_kinval_set_gone_callback(void (*cb)(void *ctx, const char *name))
{
	gone_cb = cb;
}

void sbx_kinval_root_name_gone(const char *name)
{
	if (gone_cb)
		gone_cb(inval_ctx, name);
}

void sbx_kinval_set_callback(void (*cb)(void *ctx, const char *mount_path), void *ctx)
{
	inval_cb = cb;
	inval_ctx = ctx;
}

struct sbx_kinval *sbx_kinval_new(void)
{
	struct sbx_kinval *k = sbx_xcalloc(1, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
	return k;
}

static struct path_entry *take_all(struct sbx_kinval *k)
{
	pthread_mutex_lock(&k->lock);
	struct path_entry *all = k->paths;
	k->paths = NULL;
	k->n = 0;
	pthread_mutex_unlock(&k->lock);
	return all;
}

static void free_all(struct path_entry *all)
{
	struct path_entry *e, *tmp;
	HASH_ITER(hh, all, e, tmp)
	{
		HASH_DEL(all, e);
		free(e);
	}
}

/* The detached flushes running (sbx_kinval_flush_detached). */
static struct sbx_waitgroup detached = SBX_WAITGROUP_INIT;

static void *flush_main(void *arg)
{
	struct path_entry *all = arg, *e, *tmp;
	HASH_ITER(hh, all, e, tmp)
	{
		inval_cb(inval_ctx, e->path);
	}
	free_all(all);
	sbx_wg_done(&detached);
	return NULL;
}

void sbx_kinval_flush_detached(struct sbx_kinval *k)
{
	struct path_entry *all;
	int rc;
	if (!k || !inval_cb || !(all = take_all(k)))
		return;
	sbx_wg_add(&detached);
	rc = sbx_thread_detached(NULL, flush_main, all);
	if (rc) { /* not here, with the lock held: the kernel keeps them a timeout */
		sbx_log(SBX_LOG_WARN, "no thread to drop the kernel's cache of a gone lease (%s)",
			strerror(rc));
		free_all(all);
		sbx_wg_done(&detached);
	}
}

void sbx_kinval_wait_detached(long ms)
{
	struct timespec ts;
	sbx_deadline_in(ms, &ts);
	sbx_wg_wait(&detached, &ts);
}

/* Under k->lock: e (in no table) is doubted now, unless noted again meanwhile. */
static void doubt_locked(struct sbx_kinval *k, struct path_entry *e)
{
	struct path_entry *old;
	size_t len = strlen(e->path);
	HASH_FIND(hh, k->paths, e->path, len, old);
	if (!old)
		HASH_FIND(hh, k->doubt, e->path, len, old);
	if (old) {
		free(e);
		return;
	}
	HASH_ADD(hh, k->doubt, path[0], len, e);
	while (HASH_COUNT(k->doubt) > SBX_KINVAL_MAX) { /* the oldest first */
		old = k->doubt;
		HASH_DEL(k->doubt, old);
		free(old);
	}
}

void sbx_kinval_free(struct sbx_kinval *k)
{
	if (!k)
		return;
	free_all(take_all(k));
	free_all(k->doubt);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

/* Under k->lock: path is among the noted ones, with the kernel's type (bounded). */
static void note_locked(struct sbx_kinval *k, const char *path, size_t len, mode_t mode)
{
	struct path_entry *e;
	HASH_FIND(hh, k->paths, path, len, e);
	if (!e && k->n < SBX_KINVAL_MAX) {
		e = sbx_xmalloc(sizeof(*e) + len + 1);
		memcpy(e->path, path, len + 1);
		HASH_ADD(hh, k->paths, path[0], len, e);
		k->n++;
	} else if (!e) {
		static int warned;
		if (!warned++)
			sbx_log(SBX_LOG_WARN,
				"more than %d fs/ paths cached between runs: "
				"later ones may show stale attributes for a second",
				SBX_KINVAL_MAX);
	}
	if (e)
		e->type = mode & S_IFMT;
}

bool sbx_kinval_note(struct sbx_kinval *k, const char *path, mode_t mode)
{
	struct path_entry *e;
	size_t len = strlen(path);
	bool changed = false;
	if (!inval_cb)
		return false; /* nothing could be invalidated: nothing to remember */
	pthread_mutex_lock(&k->lock);
	HASH_FIND(hh, k->doubt, path, len, e);
	if (e) {
		HASH_DEL(k->doubt, e);
		changed = (e->type ^ mode) & S_IFMT;
		free(e);
	}
	note_locked(k, path, len, mode);
	pthread_mutex_unlock(&k->lock);
	return changed;
}

void sbx_kinval_note_kept(struct sbx_kinval *k, const char *path, mode_t mode)
{
	if (!inval_cb)
		return;
	pthread_mutex_lock(&k->lock);
	note_locked(k, path, strlen(path), mode); /* a flush keeps the doubt's own type */
	pthread_mutex_unlock(&k->lock);
}

bool sbx_kinval_doubted(struct sbx_kinval *k, const char *path, mode_t *type)
{
	struct path_entry *e;
	if (!k)
		return false;
	pthread_mutex_lock(&k->lock);
	HASH_FIND(hh, k->doubt, path, strlen(path), e);
	if (e)
		*type = e->type;
	pthread_mutex_unlock(&k->lock);
	return e != NULL;
}

void sbx_kinval_flush(struct sbx_kinval *k)
{
	struct path_entry *all, *e, *tmp;
	if (!k)
		return;
	all = take_all(k);
	HASH_ITER(hh, all, e, tmp)
	{
		if (inval_cb)
			inval_cb(inval_ctx, e->path);
	}
	pthread_mutex_lock(&k->lock);
	HASH_ITER(hh, all, e, tmp)
	{
		HASH_DEL(all, e);
		doubt_locked(k, e);
	}
	pthread_mutex_unlock(&k->lock);
}

void sbx_kinval_path(struct sbx_kinval *k, const char *path)
{
	struct path_entry *e;
	if (!k || !inval_cb)
		return;
	pthread_mutex_lock(&k->lock);
	HASH_FIND(hh, k->paths, path, strlen(path), e);
	if (e) {
		HASH_DEL(k->paths, e);
		k->n--;
	}
	pthread_mutex_unlock(&k->lock);
	if (!e)
		return;
	inval_cb(inval_ctx, path);
	pthread_mutex_lock(&k->lock);
	doubt_locked(k, e);
	pthread_mutex_unlock(&k->lock);
}

void sbx_kinval_forget(struct sbx_kinval *k, const char *path)
{
	struct path_entry *e;
	size_t len = strlen(path);
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	HASH_FIND(hh, k->doubt, path, len, e);
	if (e) {
		HASH_DEL(k->doubt, e);
		free(e);
	}
	pthread_mutex_unlock(&k->lock);
}
