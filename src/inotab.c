/*
 * inotab — inode numbers and link counts the mount keeps for providers that
 * report none (inotab.h says the contract).
 *
 * A name's number is derived from a 64-bit FNV-1a state: with no entry for
 * the name or any directory above it, the state of its mount path (what
 * fs/ always showed); with an entry, the entry's state; under a directory
 * that has one, that state continued over the rest of the path. So a
 * renamed directory needs one entry for all the names below it, and those
 * keep their numbers without the table ever listing them. Entries point
 * at a node (the state and how many names share it): hard links made
 * through the mount are names sharing one node. A name left by a rename,
 * or by an unlink of one of several linked names, gets a fresh state (the
 * old one mixed with a counter), so nothing created there later collides
 * with the number that moved away.
 */
#include "inotab.h"
#include "base/xalloc.h"
#include "base/pathutil.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define FNV_BASIS 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL
#define INO_TOP (1ULL << 63)

struct ino_node {
	uint64_t h;	/* FNV state the number comes from */
	unsigned names; /* entries pointing here (1, or the names of a hard link) */
};

struct ino_ent {
	UT_hash_handle hh;
	struct ino_node *node;
	char path[]; /* the key, a mount path */
};

/* A directory with entries below it, and how many: only those are walked on a rename. */
struct ino_dir {
	UT_hash_handle hh;
	size_t below;
	char path[]; /* the key */
};

struct sbx_inotab {
	pthread_mutex_t lock;
	struct ino_ent *ents; /* uthash by path in insertion order, protected by lock */
	struct ino_dir *dirs; /* (lock) every proper prefix of an entry's path */
	size_t count, max;    /* (lock) */
	uint64_t gen;	      /* (lock) fresh states made */
	bool asked;	      /* (lock) a name without a number was shown: a remote provider */
};

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
	return h;
}

uint64_t sbx_inotab_hash(const char *path)
{
	return fnv(FNV_BASIS, path, strlen(path)) | INO_TOP;
}

struct sbx_inotab *sbx_inotab_new(size_t max)
{
	struct sbx_inotab *t = sbx_xcalloc(1, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	t->max = max ? max : SBX_INOTAB_MAX;
	return t;
}

static struct ino_ent *find(struct sbx_inotab *t, const char *path, size_t len)
{
	struct ino_ent *e = NULL;
	HASH_FIND(hh, t->ents, path, len, e);
	return e;
}

/* Counts path's entry (delta +1 or -1) in every directory above it. */
static void count_dirs(struct sbx_inotab *t, const char *path, int delta)
{
	for (size_t i = strlen(path); i-- > 1;) {
		struct ino_dir *d = NULL;
		if (path[i] != '/')
			continue;
		HASH_FIND(hh, t->dirs, path, i, d);
		if (!d && delta > 0) {
			d = sbx_xcalloc(1, sizeof(*d) + i + 1);
			memcpy(d->path, path, i);
			HASH_ADD(hh, t->dirs, path[0], i, d);
		}
		if (!d)
			continue;
		d->below += delta;
		if (d->below == 0) {
			HASH_DEL(t->dirs, d);
			free(d);
		}
	}
}

/* Whether some entry is below path. */
static bool has_below(struct sbx_inotab *t, const char *path, size_t len)
{
	struct ino_dir *d = NULL;
	HASH_FIND(hh, t->dirs, path, len, d);
	return d != NULL;
}

/* Takes e out of the table (its node still counts it). */
static void unhook(struct sbx_inotab *t, struct ino_ent *e)
{
	HASH_DEL(t->ents, e);
	t->count--;
	count_dirs(t, e->path, -1);
}

/* Unhooks e from the table and frees it; its node goes with its last name. */
static void drop(struct sbx_inotab *t, struct ino_ent *e)
{
	unhook(t, e);
	if (--e->node->names == 0)
		free(e->node);
	free(e);
}

static struct ino_node *node_new(uint64_t h)
{
	struct ino_node *n = sbx_xcalloc(1, sizeof(*n));
	n->h = h;
	return n;
}

/* A state no name has had: h mixed with the table's counter. */
static uint64_t fresh(struct sbx_inotab *t, uint64_t h)
{
	uint64_t g = ++t->gen;
	h = fnv(h, "\001", 1);
	return fnv(h, (const char *)&g, sizeof(g));
}

/* Adds path (len bytes, no entry yet) as a name of node; the oldest go past the bound. */
static void put(struct sbx_inotab *t, const char *path, size_t len, struct ino_node *node)
{
	struct ino_ent *e = sbx_xmalloc(sizeof(*e) + len + 1);
	memcpy(e->path, path, len);
	e->path[len] = '\0';
	e->node = node;
	node->names++;
	HASH_ADD(hh, t->ents, path[0], len, e);
	t->count++;
	count_dirs(t, e->path, +1);
	while (t->count > t->max && t->ents != e)
		drop(t, t->ents);
}

/* The FNV state of path's number (lock held). */
static uint64_t state_of(struct sbx_inotab *t, const char *path, size_t len)
{
	struct ino_ent *e;
	if (t->count == 0)
		return fnv(FNV_BASIS, path, len);
	e = find(t, path, len);
	if (e)
		return e->node->h;
	for (size_t i = len; i-- > 1;) {
		if (path[i] != '/')
			continue;
		e = find(t, path, i);
		if (e)
			return fnv(e->node->h, path + i, len - i);
	}
	return fnv(FNV_BASIS, path, len);
}

/* Gives path (an entry of a shared node) a fresh number of its own. */
static void split(struct sbx_inotab *t, struct ino_ent *e)
{
	char *path = sbx_xstrdup(e->path);
	uint64_t h = e->node->h;
	size_t len = strlen(path);
	drop(t, e);
	put(t, path, len, node_new(fresh(t, h)));
	free(path);
}

void sbx_inotab_stat(struct sbx_inotab *t, const char *path, struct stat *st)
{
	struct ino_ent *e;
	size_t len = strlen(path);
	if (st->st_ino)
		return; /* the provider's own numbers (and link counts) */
	if (!t) {
		st->st_ino = (ino_t)sbx_inotab_hash(path);
		return;
	}
	pthread_mutex_lock(&t->lock);
	t->asked = true;
	e = find(t, path, len);
	/* A directory where the mount linked a file: a run replaced it. */
	if (e && e->node->names > 1 && S_ISDIR(st->st_mode)) {
		split(t, e);
		e = find(t, path, len);
	}
	st->st_ino = (ino_t)(state_of(t, path, len) | INO_TOP);
	if (e && !S_ISDIR(st->st_mode) && e->node->names > st->st_nlink)
		st->st_nlink = e->node->names;
	pthread_mutex_unlock(&t->lock);
}

/* Appends e to *list (count in *n): the room doubles at each power of two, so a
 * directory rename carrying a full table copies it a few times, not once per name. */
static void push(struct ino_ent ***list, size_t *n, struct ino_ent *e)
{
	if ((*n & (*n - 1)) == 0) /* 0, 1, 2, 4, ...: full */
		*list = sbx_xreallocarray(*list, *n ? *n * 2 : 1, sizeof(**list));
	(*list)[(*n)++] = e;
}

/*
 * Unhooks path's entry and those below it into *list (count in *n); nodes
 * stay held. The whole table is walked only for a directory with entries
 * below it: renaming a file costs a lookup.
 */
static void detach(struct sbx_inotab *t, const char *path, size_t len, struct ino_ent ***list,
		   size_t *n)
{
	struct ino_ent *e = find(t, path, len), *tmp;
	if (e) {
		unhook(t, e);
		push(list, n, e);
	}
	if (!has_below(t, path, len))
		return;
	HASH_ITER(hh, t->ents, e, tmp)
	{
		if (!sbx_path_within(e->path, path, len))
			continue;
		unhook(t, e);
		push(list, n, e);
	}
}

/* Puts the detached entries back under new_prefix (they were under old_len bytes of prefix). */
static void reattach(struct sbx_inotab *t, struct ino_ent **list, size_t n, size_t old_len,
		     const char *new_prefix)
{
	size_t plen = strlen(new_prefix);
	for (size_t i = 0; i < n; i++) {
		struct ino_ent *e = list[i];
		const char *rest = e->path + old_len;
		size_t rlen = strlen(rest);
		char *key = sbx_xmalloc(plen + rlen + 1);
		memcpy(key, new_prefix, plen);
		memcpy(key + plen, rest, rlen + 1);
		put(t, key, plen + rlen, e->node);
		e->node->names--; /* put counted the name again */
		free(key);
		free(e);
	}
	free(list);
}

/* Makes sure path has an entry of its own, with the number it shows now. */
static void pin(struct sbx_inotab *t, const char *path, size_t len)
{
	if (!find(t, path, len))
		put(t, path, len, node_new(state_of(t, path, len)));
}

void sbx_inotab_rename(struct sbx_inotab *t, const char *from, const char *to, int exchange)
{
	struct ino_ent **a = NULL, **b = NULL, **gone = NULL;
	size_t na = 0, nb = 0, ng = 0, fl = strlen(from), tl = strlen(to);
	uint64_t hf;
	if (!t || !strcmp(from, to))
		return;
	pthread_mutex_lock(&t->lock);
	if (!t->asked) { /* local: the provider's own numbers, nothing to keep */
		pthread_mutex_unlock(&t->lock);
		return;
	}
	pin(t, from, fl);
	hf = find(t, from, fl)->node->h;
	if (exchange)
		pin(t, to, tl);
	detach(t, from, fl, &a, &na);
	if (exchange) {
		detach(t, to, tl, &b, &nb);
	} else { /* the replaced target and whatever was noted below it */
		detach(t, to, tl, &gone, &ng);
		for (size_t i = 0; i < ng; i++) {
			if (--gone[i]->node->names == 0)
				free(gone[i]->node);
			free(gone[i]);
		}
		free(gone);
	}
	reattach(t, a, na, fl, to);
	if (exchange)
		reattach(t, b, nb, tl, from);
	else /* the old name: a file made there later is not the one that left */
		put(t, from, fl, node_new(fresh(t, hf)));
	pthread_mutex_unlock(&t->lock);
}

void sbx_inotab_link(struct sbx_inotab *t, const char *from, const char *to)
{
	struct ino_ent *e;
	size_t fl = strlen(from), tl = strlen(to);
	if (!t || !strcmp(from, to))
		return;
	pthread_mutex_lock(&t->lock);
	if (!t->asked) {
		pthread_mutex_unlock(&t->lock);
		return;
	}
	pin(t, from, fl);
	e = find(t, to, tl);
	if (e) /* what a name left behind there */
		drop(t, e);
	e = find(t, from, fl); /* still there: it was just pinned, the newest */
	put(t, to, tl, e->node);
	pthread_mutex_unlock(&t->lock);
}

void sbx_inotab_unlink(struct sbx_inotab *t, const char *path)
{
	struct ino_ent *e;
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	e = find(t, path, strlen(path));
	/* A sole name keeps its entry: its number is free for what is made there next. */
	if (e && e->node->names > 1)
		split(t, e);
	pthread_mutex_unlock(&t->lock);
}

size_t sbx_inotab_others(struct sbx_inotab *t, const char *path, char ***out)
{
	struct ino_ent *e, *tmp;
	struct ino_node *node;
	size_t n = 0;
	*out = NULL;
	if (!t)
		return 0;
	pthread_mutex_lock(&t->lock);
	e = find(t, path, strlen(path));
	node = e && e->node->names > 1 ? e->node : NULL;
	if (node) {
		HASH_ITER(hh, t->ents, e, tmp)
		{
			if (e->node != node || !strcmp(e->path, path))
				continue;
			*out = sbx_xreallocarray(*out, n + 1, sizeof(**out));
			(*out)[n++] = sbx_xstrdup(e->path);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

size_t sbx_inotab_count(struct sbx_inotab *t)
{
	size_t n;
	pthread_mutex_lock(&t->lock);
	n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}

void sbx_inotab_free(struct sbx_inotab *t)
{
	struct ino_ent *e, *tmp;
	if (!t)
		return;
	HASH_ITER(hh, t->ents, e, tmp)
	{
		drop(t, e);
	}
	/* dropping the last entry dropped every directory count */
	pthread_mutex_destroy(&t->lock);
	free(t);
}
