/* kinval — kernel cache tracking for fs/ (see kinval.h). */
#include "kinval.h"
#include "base/xalloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "base/log.h"

/* Bound on paths remembered per lease between two runs (about 100 B each). */
#define SBX_KINVAL_MAX 200000

struct path_entry {
	UT_hash_handle hh;
	char path[]; /* the key */
};

struct sbx_kinval {
	pthread_mutex_t lock; /* protects paths and n */
	struct path_entry *paths;
	unsigned n;
};

static void (*inval_cb)(void *ctx, const char *path);
static void *inval_ctx;

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

static void drop_all(struct path_entry *all, int invalidate)
{
	struct path_entry *e, *tmp;
	HASH_ITER(hh, all, e, tmp)
	{
		HASH_DEL(all, e);
		if (invalidate && inval_cb)
			inval_cb(inval_ctx, e->path);
		free(e);
	}
}

void sbx_kinval_free(struct sbx_kinval *k)
{
	if (!k)
		return;
	drop_all(take_all(k), 0);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

void sbx_kinval_note(struct sbx_kinval *k, const char *path)
{
	struct path_entry *e;
	size_t len = strlen(path);
	if (!inval_cb)
		return; /* nothing could be invalidated: nothing to remember */
	pthread_mutex_lock(&k->lock);
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
	pthread_mutex_unlock(&k->lock);
}

void sbx_kinval_flush(struct sbx_kinval *k)
{
	if (k)
		drop_all(take_all(k), 1);
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
	if (e) {
		inval_cb(inval_ctx, path);
		free(e);
	}
}
