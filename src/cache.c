/*
 * cache — the metadata half of the tables behind fs_cached.c (see
 * cache.h): attributes and readlink targets by path, listings by
 * directory, invalidation. The content entries are in cache_file.c; both
 * share one lock and the structs in cache_int.h. No I/O here.
 */
#include "base/fsutil.h"
#include "base/xalloc.h"
#include "cache_int.h"

/* Past this many attribute entries, expired ones are swept on insert. */
#define SBX_CACHE_SWEEP_AT 65536
/* Past this many remembered changes of ours, expired ones are swept. */

/* ---- the cache ------------------------------------------------------------ */

struct sbx_cache *sbx_cache_new(const char *dir)
{
	struct sbx_cache *c = xcalloc(1, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->dir = sbx_xstrdup(dir);
	c->ttl_ms = SBX_CACHE_TTL_MS;
	c->neg_ttl_ms = SBX_CACHE_NEG_TTL_MS;
	c->retry_ms = SBX_CACHE_RETRY_MS;
	c->sweep_at = SBX_CACHE_SWEEP_AT;
	cache_files_adopt(c);
	return c;
}

static void attr_free(struct sbx_cache *c, struct cattr *a)
{
	HASH_DEL(c->attrs, a);
	free(a->path);
	free(a->link);
	free(a);
}

static void dir_free(struct sbx_cache *c, struct cdir *d)
{
	struct cname *n, *tmp;
	HASH_DEL(c->dirs, d);
	HASH_ITER(hh, d->names, n, tmp)
	{
		HASH_DEL(d->names, n);
		free(n->name);
		free(n);
	}
	free(d->path);
	free(d);
}

static void fails_clear_locked(struct sbx_cache *c)
{
	for (int i = 0; i < SBX_CACHE_FAILS; i++) {
		free(c->fails[i].path);
		c->fails[i].path = NULL;
	}
}

void sbx_cache_fail_put(struct sbx_cache *c, const char *path, const struct sbx_error *e,
			unsigned long gen)
{
	pthread_mutex_lock(&c->lock);
	if (gen != c->gen) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	struct cfail *f = &c->fails[c->fail_next++ % SBX_CACHE_FAILS];
	free(f->path);
	f->path = sbx_xstrdup(path);
	f->err = *e;
	f->until = sbx_now_ms() + SBX_CACHE_FAIL_MS;
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_fail_get(struct sbx_cache *c, const char *path, struct sbx_error *e)
{
	long long now = sbx_now_ms();
	bool hit = false;
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < SBX_CACHE_FAILS && !hit; i++) {
		struct cfail *f = &c->fails[i];
		if (f->path && f->until > now && !strcmp(f->path, path)) {
			*e = f->err;
			hit = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void sbx_cache_free(struct sbx_cache *c)
{
	struct cattr *a, *atmp;
	struct cdir *d, *dtmp;
	if (!c)
		return;
	cache_files_free(c);
	fails_clear_locked(c);
	sbx_pathttl_clear(&c->echoes);
	for (size_t i = 0; i < c->npins; i++)
		free(c->pins[i].dir);
	free(c->pins);
	HASH_ITER(hh, c->attrs, a, atmp)
	attr_free(c, a);
	HASH_ITER(hh, c->dirs, d, dtmp)
	dir_free(c, d);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c->dir);
	free(c);
}

bool sbx_cache_watch_claim(struct sbx_cache *c, const void *inst)
{
	pthread_mutex_lock(&c->lock);
	bool claim = inst && inst != c->watched;
	if (claim)
		c->watched = inst;
	pthread_mutex_unlock(&c->lock);
	return claim;
}

/* ---- echoes of our own changes ------------------------------------------------- */

void cache_echo_note_locked(struct sbx_cache *c, const char *path)
{
	sbx_pathttl_note(&c->echoes, path, sbx_now_ms(), c->ttl_ms);
}

void sbx_cache_notify(void *ctx, const char *path)
{
	struct sbx_cache *c = ctx;
	if (!path) {
		sbx_cache_invalidate_all(c);
		return;
	}
	/*
	 * The sandbox reports our own uploads and renames back to us: those are
	 * already in the cache, and dropping the parent's listing for each
	 * would cost a request per file of a `tar x`.
	 */
	pthread_mutex_lock(&c->lock);
	bool echo = sbx_pathttl_live(&c->echoes, path, sbx_now_ms());
	if (!echo)
		c->epoch++; /* a change from outside */
	pthread_mutex_unlock(&c->lock);
	if (!echo)
		sbx_cache_invalidate_path(c, path);
}

void sbx_cache_set_ttl(struct sbx_cache *c, long ttl_ms, long neg_ttl_ms)
{
	pthread_mutex_lock(&c->lock);
	c->ttl_ms = ttl_ms;
	c->neg_ttl_ms = neg_ttl_ms;
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_set_retry(struct sbx_cache *c, long retry_ms)
{
	pthread_mutex_lock(&c->lock);
	c->retry_ms = retry_ms;
	pthread_mutex_unlock(&c->lock);
}

unsigned long sbx_cache_gen(struct sbx_cache *c)
{
	pthread_mutex_lock(&c->lock);
	unsigned long g = c->gen;
	pthread_mutex_unlock(&c->lock);
	return g;
}

void sbx_cache_invalidate_all(struct sbx_cache *c)
{
	struct cattr *a, *atmp;
	struct cdir *d, *dtmp;
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->gen++;
	c->epoch++;
	fails_clear_locked(c);
	HASH_ITER(hh, c->attrs, a, atmp)
	attr_free(c, a);
	HASH_ITER(hh, c->dirs, d, dtmp)
	dir_free(c, d);
	pthread_mutex_unlock(&c->lock);
}

/* Drops path's attributes and listing (lock held). */
static void drop_locked(struct sbx_cache *c, const char *path)
{
	struct cattr *a;
	struct cdir *d;
	HASH_FIND_STR(c->attrs, path, a);
	if (a)
		attr_free(c, a);
	HASH_FIND_STR(c->dirs, path, d);
	if (d)
		dir_free(c, d);
}

static void drop_parent_locked(struct sbx_cache *c, const char *path)
{
	char parent[4096];
	if (split(path, parent, sizeof(parent)))
		drop_locked(c, parent);
}

void sbx_cache_invalidate_path(struct sbx_cache *c, const char *path)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->gen++;
	fails_clear_locked(c);
	drop_locked(c, path);
	drop_parent_locked(c, path);
	pthread_mutex_unlock(&c->lock);
}

/* Drops what is known of path and everything below it (lock held). */
static void drop_tree_locked(struct sbx_cache *c, const char *path)
{
	struct cattr *a, *atmp;
	struct cdir *d, *dtmp;
	HASH_ITER(hh, c->attrs, a, atmp)
	if (sbx_path_under(a->path, path))
		attr_free(c, a);
	HASH_ITER(hh, c->dirs, d, dtmp)
	if (sbx_path_under(d->path, path))
		dir_free(c, d);
}

void sbx_cache_invalidate_tree(struct sbx_cache *c, const char *path)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	c->gen++;
	fails_clear_locked(c);
	drop_tree_locked(c, path);
	drop_parent_locked(c, path);
	pthread_mutex_unlock(&c->lock);
}

/* ---- attributes ------------------------------------------------------------ */

static bool fresh(long long expires, bool any_age)
{
	return any_age || sbx_now_ms() < expires;
}

static struct cattr *attr_slot_locked(struct sbx_cache *c, const char *path)
{
	struct cattr *a;
	HASH_FIND_STR(c->attrs, path, a);
	if (a)
		return a;
	if (HASH_COUNT(c->attrs) >= c->sweep_at) {
		/* Expired entries go; the next sweep waits until the table doubles. */
		struct cattr *x, *tmp;
		long long now = sbx_now_ms();
		HASH_ITER(hh, c->attrs, x, tmp)
		if (x->expires <= now && x->link_expires <= now)
			attr_free(c, x);
		c->sweep_at = HASH_COUNT(c->attrs) * 2;
		if (c->sweep_at < SBX_CACHE_SWEEP_AT)
			c->sweep_at = SBX_CACHE_SWEEP_AT;
	}
	a = xcalloc(1, sizeof(*a));
	a->path = sbx_xstrdup(path);
	HASH_ADD_KEYPTR(hh, c->attrs, a->path, strlen(a->path), a);
	return a;
}

void cache_attr_set_locked(struct sbx_cache *c, const char *path, const struct sbx_stat *st)
{
	struct cattr *a = attr_slot_locked(c, path);
	a->has_st = st != NULL;
	a->neg = st == NULL;
	if (st)
		a->st = *st;
	a->set_seq = ++c->seq;
	a->expires = sbx_now_ms() + (st ? c->ttl_ms : c->neg_ttl_ms);
}

void cache_attr_drop_locked(struct sbx_cache *c, const char *path)
{
	struct cattr *a;
	HASH_FIND_STR(c->attrs, path, a);
	if (a)
		attr_free(c, a);
}

/* 1 present, 0 absent from a usable listing of path's parent, -1 unknown. */
static int listed_locked(struct sbx_cache *c, const char *path, bool any_age)
{
	char parent[4096];
	const char *name = split(path, parent, sizeof(parent));
	struct cdir *d;
	struct cname *n;
	if (!name)
		return -1;
	HASH_FIND_STR(c->dirs, parent, d);
	if (!d || !fresh(d->expires, any_age))
		return -1;
	HASH_FIND_STR(d->names, name, n);
	return n != NULL;
}

/*
 * A directory's link count: 2 and one per subdirectory (its entry in the
 * parent, its ".", each subdirectory's ".."), counted from its cached
 * listing: the entries whose cached attributes say directory. The remote
 * listings carry no link count and the providers say 2, so a name of
 * unknown type (a file being written here has its attributes in its cache
 * file, not in the table) counts as none, as it did. Left as it is with no
 * fresh listing, or past DIR_NLINK_MAX entries (each stat of the directory
 * walks its names). Before, a remote directory showed 2 whatever it held
 * (`ls -la`, and pjdfstest's rename/24.t: the parents' counts after a
 * directory moved).
 */
#define DIR_NLINK_MAX 4096

void cache_dir_nlink_locked(struct sbx_cache *c, const char *path, struct sbx_stat *st,
			    bool any_age)
{
	struct cdir *d;
	struct cname *n, *tmp;
	struct sbx_buf child = SBX_BUF_INIT;
	nlink_t subdirs = 0;
	if (!S_ISDIR(st->mode))
		return;
	HASH_FIND_STR(c->dirs, path, d);
	if (!d || !fresh(d->expires, any_age) || HASH_COUNT(d->names) > DIR_NLINK_MAX)
		return;
	/* one buffer for every child's path: "DIR/" once, each name after it */
	sbx_buf_addf(&child, "%s/", sbx_path_prefix(path));
	size_t prefix = child.len;
	HASH_ITER(hh, d->names, n, tmp)
	{
		struct cattr *a;
		child.len = prefix;
		sbx_buf_adds(&child, n->name);
		HASH_FIND_STR(c->attrs, child.buf, a);
		subdirs += a && a->has_st && fresh(a->expires, any_age) && S_ISDIR(a->st.mode);
	}
	sbx_buf_release(&child);
	st->nlink = 2 + subdirs;
}

void sbx_cache_dir_nlink(struct sbx_cache *c, const char *path, struct sbx_stat *st, bool any_age)
{
	pthread_mutex_lock(&c->lock);
	cache_dir_nlink_locked(c, path, st, any_age);
	pthread_mutex_unlock(&c->lock);
}

enum sbx_cache_hit sbx_cache_attr_get(struct sbx_cache *c, const char *path, struct sbx_stat *st,
				      bool any_age)
{
	enum sbx_cache_hit hit = SBX_CACHE_MISS;
	struct cattr *a;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->attrs, path, a);
	if (a && (a->has_st || a->neg) && fresh(a->expires, any_age)) {
		hit = a->neg ? SBX_CACHE_NEGATIVE : SBX_CACHE_HIT;
		if (a->has_st)
			*st = a->st;
	} else if (listed_locked(c, path, any_age) == 0) {
		hit = SBX_CACHE_NEGATIVE;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

bool cache_attr_peek_locked(struct sbx_cache *c, const char *path, struct sbx_stat *st)
{
	struct cattr *a;
	HASH_FIND_STR(c->attrs, path, a);
	if (!a || !a->has_st || !fresh(a->expires, false))
		return false;
	*st = a->st;
	return true;
}

void sbx_cache_attr_put(struct sbx_cache *c, const char *path, const struct sbx_stat *st,
			unsigned long gen)
{
	pthread_mutex_lock(&c->lock);
	if (gen == c->gen)
		cache_attr_set_locked(c, path, st);
	pthread_mutex_unlock(&c->lock);
}

/* Adds to out (deduplicated, up to max) the ancestors of path, path too when
 * self, that have no attributes cached (lock held). */
static void unbacked_add_locked(struct sbx_cache *c, const char *path, bool self, char **out,
				size_t *n, size_t max)
{
	char cur[4096], parent[4096];
	struct cattr *a;
	if (strlen(path) >= sizeof(cur))
		return;
	strcpy(cur, path);
	for (bool first = true; *n < max; first = false) {
		if (!first || self) {
			HASH_FIND_STR(c->attrs, cur, a);
			bool listed = false;
			for (size_t i = 0; i < *n && !listed; i++)
				listed = !strcmp(out[i], cur);
			if (!a && !listed)
				out[(*n)++] = sbx_xstrdup(cur);
		}
		if (!split(cur, parent, sizeof(parent)))
			break;
		strcpy(cur, parent);
	}
}

size_t sbx_cache_unbacked(struct sbx_cache *c, char **out, size_t max)
{
	struct cattr *a, *atmp;
	struct cdir *d, *dtmp;
	struct sbx_cfile *f, *ftmp;
	size_t n = 0;
	pthread_mutex_lock(&c->lock);
	HASH_ITER(hh, c->attrs, a, atmp)
	if (a->has_st)
		unbacked_add_locked(c, a->path, false, out, &n, max);
	HASH_ITER(hh, c->dirs, d, dtmp)
	unbacked_add_locked(c, d->path, true, out, &n, max);
	HASH_ITER(hh, c->files, f, ftmp)
	if (f->have_data || f->dirty) /* a dirty file's own facts are local */
		unbacked_add_locked(c, f->path, !f->dirty, out, &n, max);
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* The cached attributes of path to edit in place, or NULL (lock held). */
static struct cattr *attr_edit_locked(struct sbx_cache *c, const char *path)
{
	struct cattr *a;
	c->gen++;
	cache_echo_note_locked(c, path);
	HASH_FIND_STR(c->attrs, path, a);
	return a && a->has_st ? a : NULL;
}

void sbx_cache_attr_chmod(struct sbx_cache *c, const char *path, mode_t mode)
{
	pthread_mutex_lock(&c->lock);
	struct cattr *a = attr_edit_locked(c, path);
	if (a)
		a->st.mode = (a->st.mode & S_IFMT) | (mode & 07777);
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_attr_chown(struct sbx_cache *c, const char *path, uid_t uid, gid_t gid)
{
	pthread_mutex_lock(&c->lock);
	struct cattr *a = attr_edit_locked(c, path);
	if (a && uid != (uid_t)-1)
		a->st.uid = uid;
	if (a && gid != (gid_t)-1)
		a->st.gid = gid;
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_attr_utimens(struct sbx_cache *c, const char *path, const struct timespec ts[2])
{
	pthread_mutex_lock(&c->lock);
	struct cattr *a = attr_edit_locked(c, path);
	if (a && (ts[0].tv_nsec == UTIME_NOW || ts[1].tv_nsec == UTIME_NOW)) {
		attr_free(c, a);
	} else if (a) {
		if (ts[0].tv_nsec != UTIME_OMIT)
			a->st.atime = ts[0];
		if (ts[1].tv_nsec != UTIME_OMIT)
			a->st.mtime = ts[1];
	}
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_link_get(struct sbx_cache *c, const char *path, char *buf, size_t size, bool any_age)
{
	struct cattr *a;
	bool hit = false;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->attrs, path, a);
	if (a && a->link && fresh(a->link_expires, any_age)) {
		snprintf(buf, size, "%s", a->link);
		hit = true;
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void sbx_cache_link_put(struct sbx_cache *c, const char *path, const char *target,
			unsigned long gen)
{
	pthread_mutex_lock(&c->lock);
	if (gen == c->gen) {
		struct cattr *a = attr_slot_locked(c, path);
		free(a->link);
		a->link = sbx_xstrdup(target);
		a->link_expires = sbx_now_ms() + c->ttl_ms;
	}
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_links_try(struct sbx_cache *c, const char *dir)
{
	long long now = sbx_now_ms();
	bool go = strlen(dir) < sizeof(c->links_dir);
	pthread_mutex_lock(&c->lock);
	if (go && c->links_gen == c->gen && now - c->links_at < c->ttl_ms &&
	    !strcmp(dir, c->links_dir))
		go = false;
	if (go) {
		snprintf(c->links_dir, sizeof(c->links_dir), "%s", dir);
		c->links_gen = c->gen;
		c->links_at = now;
	}
	pthread_mutex_unlock(&c->lock);
	return go;
}

/* ---- listings --------------------------------------------------------------- */

void sbx_cache_listing_add(struct sbx_cache_listing *ls, const char *name,
			   const struct sbx_stat *st)
{
	if (ls->n == ls->alloc) {
		ls->alloc = ls->alloc ? ls->alloc * 2 : 32;
		ls->ents = sbx_xrealloc(ls->ents, ls->alloc * sizeof(*ls->ents));
	}
	struct sbx_cache_dirent *e = &ls->ents[ls->n++];
	memset(e, 0, sizeof(*e));
	e->name = sbx_xstrdup(name);
	e->has_st = st != NULL;
	if (st)
		e->st = *st;
}

void sbx_cache_listing_release(struct sbx_cache_listing *ls)
{
	for (size_t i = 0; i < ls->n; i++)
		free(ls->ents[i].name);
	free(ls->ents);
	memset(ls, 0, sizeof(*ls));
}

static void names_add(struct cdir *d, const char *name)
{
	struct cname *n;
	HASH_FIND_STR(d->names, name, n);
	if (n)
		return;
	n = xcalloc(1, sizeof(*n));
	n->name = sbx_xstrdup(name);
	HASH_ADD_KEYPTR(hh, d->names, n->name, strlen(n->name), n);
}

/* A new, empty listing of dir, fresh now, replacing any other (lock held). */
static struct cdir *dir_reset_locked(struct sbx_cache *c, const char *dir)
{
	struct cdir *d;
	HASH_FIND_STR(c->dirs, dir, d);
	if (d)
		dir_free(c, d);
	d = xcalloc(1, sizeof(*d));
	d->path = sbx_xstrdup(dir);
	d->expires = sbx_now_ms() + c->ttl_ms;
	HASH_ADD_KEYPTR(hh, c->dirs, d->path, strlen(d->path), d);
	return d;
}

void sbx_cache_dir_put(struct sbx_cache *c, const char *dir, const struct sbx_cache_listing *ls,
		       bool with_attrs, unsigned long gen)
{
	struct cdir *d;
	pthread_mutex_lock(&c->lock);
	if (gen != c->gen)
		goto out;
	d = dir_reset_locked(c, dir);
	if (strcmp(dir, "/")) { /* its directory is being walked */
		char parent[4096];
		struct cdir *pd;
		split(dir, parent, sizeof(parent));
		HASH_FIND_STR(c->dirs, parent, pd);
		if (pd)
			pd->child_listed = sbx_now_ms();
	}
	for (size_t i = 0; i < ls->n; i++) {
		names_add(d, ls->ents[i].name);
		if (with_attrs && ls->ents[i].has_st) {
			char *p = join(dir, ls->ents[i].name);
			cache_attr_set_locked(c, p, &ls->ents[i].st);
			free(p);
		}
	}
out:
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_dir_get(struct sbx_cache *c, const char *dir, bool any_age,
		       struct sbx_cache_listing *out)
{
	struct cdir *d;
	struct cname *n, *tmp;
	bool hit = false;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->dirs, dir, d);
	if (d && fresh(d->expires, any_age)) {
		hit = true;
		HASH_ITER(hh, d->names, n, tmp)
		{
			char *p = join(dir, n->name);
			struct cattr *a;
			HASH_FIND_STR(c->attrs, p, a);
			bool ok = a && a->has_st && fresh(a->expires, any_age);
			sbx_cache_listing_add(out, n->name, ok ? &a->st : NULL);
			free(p);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

bool sbx_cache_walk_due(struct sbx_cache *c, const char *dir, size_t max)
{
	struct cdir *d, *sub;
	struct cname *n, *tmp;
	long long now = sbx_now_ms();
	size_t unlisted = 0;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->dirs, dir, d);
	if (d && fresh(d->expires, false) && now - d->child_listed < c->ttl_ms &&
	    HASH_COUNT(d->names) <= max)
		HASH_ITER(hh, d->names, n, tmp)
		{
			char *p = join(dir, n->name);
			struct cattr *a;
			HASH_FIND_STR(c->attrs, p, a);
			if (a && a->has_st && S_ISDIR(a->st.mode) && fresh(a->expires, false)) {
				HASH_FIND_STR(c->dirs, p, sub);
				unlisted += !sub || !fresh(sub->expires, false);
			}
			free(p);
		}
	pthread_mutex_unlock(&c->lock);
	return unlisted >= 2;
}

void sbx_cache_dir_new(struct sbx_cache *c, const char *dir)
{
	pthread_mutex_lock(&c->lock);
	c->gen++;
	dir_reset_locked(c, dir);
	pthread_mutex_unlock(&c->lock);
}

bool sbx_cache_dir_stale(struct sbx_cache *c, const char *dir, size_t max)
{
	struct cdir *d;
	bool stale;
	pthread_mutex_lock(&c->lock);
	HASH_FIND_STR(c->dirs, dir, d);
	stale = d && !fresh(d->expires, false) && HASH_COUNT(d->names) <= max;
	pthread_mutex_unlock(&c->lock);
	return stale;
}

/* The parent of path changed here: new mtime and ctime on its cached attributes (lock held). */
static void touch_parent_locked(struct sbx_cache *c, const char *parent)
{
	struct cattr *pa;
	struct timespec now;
	/*
	 * The sandbox reports the directory too: an echo. Unnoted, once the
	 * directory's own echo (its mkdir's) was 2 s old, every new file of a
	 * tar x dropped the directory and its names' attributes, and each
	 * utimens after cost a Stat (100 to 190 of 200 files).
	 */
	cache_echo_note_locked(c, parent);
	HASH_FIND_STR(c->attrs, parent, pa);
	if (!pa || !pa->has_st)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	pa->st.mtime = pa->st.ctime = now;
}

void cache_note_added_locked(struct sbx_cache *c, const char *path, const struct sbx_stat *st)
{
	char parent[4096];
	const char *name = split(path, parent, sizeof(parent));
	struct cdir *d = NULL;
	c->gen++;
	cache_echo_note_locked(c, path);
	if (st)
		cache_attr_set_locked(c, path, st);
	else
		cache_attr_drop_locked(c, path);
	if (name) {
		HASH_FIND_STR(c->dirs, parent, d);
		if (d)
			names_add(d, name);
		touch_parent_locked(c, parent);
	}
}

void sbx_cache_note_added(struct sbx_cache *c, const char *path, const struct sbx_stat *st)
{
	pthread_mutex_lock(&c->lock);
	cache_note_added_locked(c, path, st);
	cache_dir_times_unpin_locked(c, path);
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_note_removed(struct sbx_cache *c, const char *path)
{
	char parent[4096];
	const char *name = split(path, parent, sizeof(parent));
	struct cdir *d;
	pthread_mutex_lock(&c->lock);
	c->gen++;
	cache_echo_note_locked(c, path);
	cache_dir_times_unpin_locked(c, path);
	drop_tree_locked(c, path);
	cache_attr_set_locked(c, path, NULL);
	if (name) {
		struct cname *n;
		HASH_FIND_STR(c->dirs, parent, d);
		if (d) {
			HASH_FIND_STR(d->names, name, n);
			if (n) {
				HASH_DEL(d->names, n);
				free(n->name);
				free(n);
			}
		}
		touch_parent_locked(c, parent);
	}
	pthread_mutex_unlock(&c->lock);
}

void sbx_cache_note_changed(struct sbx_cache *c, const char *path)
{
	struct cattr *a;
	pthread_mutex_lock(&c->lock);
	c->gen++;
	cache_echo_note_locked(c, path);
	HASH_FIND_STR(c->attrs, path, a);
	if (a)
		attr_free(c, a);
	pthread_mutex_unlock(&c->lock);
}
