/* aliases — the other names of hard-linked files (see aliases.h). */
#include "aliases.h"
#include "base/xalloc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* Bound on names remembered: past it, later aliases age out with the attribute timeout. */
#define SBX_ALIASES_MAX 100000

struct alias {
	UT_hash_handle hh;
	ino_t ino;
	char path[]; /* the key */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct alias *by_path; /* protected by lock */
static unsigned count;
static void (*inval_cb)(void *ctx, const char *path);
static void *inval_ctx;

void sbx_aliases_set_callback(void (*cb)(void *ctx, const char *mount_path), void *ctx)
{
	inval_cb = cb;
	inval_ctx = ctx;
}

static void drop(struct alias *a)
{
	HASH_DEL(by_path, a);
	count--;
	free(a);
}

void sbx_aliases_note(const char *path, const struct stat *st)
{
	struct alias *a;
	size_t len = strlen(path);
	bool linked = st->st_nlink > 1 && !S_ISDIR(st->st_mode);
	pthread_mutex_lock(&lock);
	HASH_FIND(hh, by_path, path, len, a);
	if (a && (!linked || a->ino != st->st_ino)) {
		drop(a);
		a = NULL;
	}
	if (linked && !a && count < SBX_ALIASES_MAX) {
		a = sbx_xmalloc(sizeof(*a) + len + 1);
		a->ino = st->st_ino;
		memcpy(a->path, path, len + 1);
		HASH_ADD(hh, by_path, path[0], len, a);
		count++;
	}
	pthread_mutex_unlock(&lock);
}

void sbx_aliases_changed(const char *path)
{
	struct alias *a, *tmp;
	char **others = NULL;
	size_t n = 0;
	pthread_mutex_lock(&lock);
	HASH_FIND(hh, by_path, path, strlen(path), a);
	if (a) {
		ino_t ino = a->ino;
		HASH_ITER(hh, by_path, a, tmp)
		{
			if (a->ino != ino || !strcmp(a->path, path))
				continue;
			others = sbx_xreallocarray(others, n + 1, sizeof(*others));
			others[n++] = sbx_xstrdup(a->path);
		}
	}
	pthread_mutex_unlock(&lock);
	/* Outside the lock: the callback writes to the kernel. */
	for (size_t i = 0; i < n; i++) {
		if (inval_cb && others[i])
			inval_cb(inval_ctx, others[i]);
		free(others[i]);
	}
	free(others);
}

void sbx_aliases_forget(const char *path)
{
	struct alias *a;
	pthread_mutex_lock(&lock);
	HASH_FIND(hh, by_path, path, strlen(path), a);
	if (a)
		drop(a);
	pthread_mutex_unlock(&lock);
}
