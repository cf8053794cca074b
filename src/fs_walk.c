/*
 * fs_walk — the listings of a directory walk in bulk (remote leases). A
 * walk (`rm -rf`, `find`, `du`, `ls -R`, `git status`) reads every
 * subdirectory of a directory in turn, and each read on a cold cache was
 * one request: a `.git` (objects/00 ... objects/ff, two or three entries
 * each) cost about one request per two entries. When the kernel reads a
 * directory the cache does not hold, or a lookup needs the expired
 * listing of one again (fs_cached.c, relist: git revisiting its object
 * directories), and its parent is being walked (a
 * sibling was listed within the TTL and two or more are not yet:
 * sbx_cache_walk_due), the provider's list_tree brings the parent's
 * subtree to depth 2 in one request, and every sibling's listing, with
 * its entries' attributes, goes into the cache. Never for "/" (it would
 * list the sandbox's /proc) nor past SBX_CACHE_RELIST_MAX names in the
 * parent; a failure only leaves the read to its own listing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "fs_cached.h"
#include "base/pathutil.h"

/* The listings list_tree brought: the parent's, then one per directory below it. */
struct tree_lists {
	const char *top;
	struct sbx_cache_listing *ls; /* [0]: top's */
	char **dirs;		      /* [0]: top */
	size_t n, alloc, last;
};

static size_t lists_of(struct tree_lists *t, const char *dir)
{
	if (t->last < t->n && !strcmp(t->dirs[t->last], dir))
		return t->last;
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->dirs[i], dir))
			return t->last = i;
	if (t->n == t->alloc) {
		t->alloc = t->alloc ? 2 * t->alloc : 32;
		t->ls = sbx_xreallocarray(t->ls, t->alloc, sizeof(*t->ls));
		t->dirs = sbx_xreallocarray(t->dirs, t->alloc, sizeof(*t->dirs));
	}
	t->ls[t->n] = (struct sbx_cache_listing)SBX_CACHE_LISTING_INIT;
	t->dirs[t->n] = sbx_xstrdup(dir);
	return t->last = t->n++;
}

static int tree_add(void *ctx, const char *dir, const char *name, const struct sbx_stat *st)
{
	struct tree_lists *t = ctx;
	struct sbx_buf sub = SBX_BUF_INIT;
	sbx_cache_listing_add(&t->ls[lists_of(t, dir)], name, st);
	/* a subdirectory of top: a listing of its own, empty until its entries come */
	if (!strcmp(dir, t->top) && S_ISDIR(st->mode)) {
		sbx_buf_addf(&sub, "%s/%s", sbx_path_prefix(dir), name);
		lists_of(t, sub.buf);
		sbx_buf_release(&sub);
	}
	return 0;
}

bool fsc_walk_prefetch(struct sbx_lease *l, const char *path)
{
	const char *slash = strrchr(path, '/');
	struct tree_lists t = {0};
	struct sbx_instance *inst;
	struct sbx_error err = SBX_ERROR_INIT;
	unsigned long gen;
	char *parent;
	int rc;
	if (!l->prov->list_tree || !(l->prov->caps & SBX_CAP_LIST_ATTRS) || !slash || slash == path)
		return false;
	parent = sbx_xstrndup(path, (size_t)(slash - path));
	if (sbx_fs_is_pseudo(parent) ||
	    !sbx_cache_walk_due(l->cache, parent, SBX_CACHE_RELIST_MAX)) {
		free(parent);
		return false;
	}
	t.top = parent;
	lists_of(&t, parent);
	gen = sbx_cache_gen(l->cache);
	/* not recorded: on a failure the read lists its own directory, which says why */
	rc = sbx_lease_use(l, &inst, &err);
	if (!rc) {
		rc = l->prov->list_tree(inst, parent, 2, tree_add, &t, &err);
		sbx_lease_unuse(l);
	}
	for (size_t i = 0; i < t.n; i++) {
		if (!rc)
			sbx_cache_dir_put(l->cache, t.dirs[i], &t.ls[i], true, gen);
		sbx_cache_listing_release(&t.ls[i]);
		free(t.dirs[i]);
	}
	free(t.ls);
	free(t.dirs);
	free(parent);
	return !rc;
}
