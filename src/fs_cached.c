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
 * It is not the cache's bookkeeping (cache.c, cache_file.c), nor FUSE
 * (fuse_ops.c): it returns 0 / -errno and fills err. The kernel's /proc,
 * /sys and /dev show as empty directories and never reach the provider.
 * This file: the helpers, the tree and the ops table; fs_cached_file.c:
 * open files (download, read, write, upload, truncate).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs_cached.h"
#include "base/caller.h"
#include "base/buf.h"
#include "base/pathutil.h"
#include "base/xalloc.h"
#include "inotab.h"
#include "kinval.h"
#include "writeback.h"

/* ---- helpers ---------------------------------------------------------------- */

/* Records a failure of `op path` in the lease's `error` file; returns rc. */
int fsc_record(struct sbx_lease *l, const char *op, const char *path, int rc, struct sbx_error *err)
{
	char *what = sbx_xasprintf("%s %s", op, path); /* whole: `error` fits it */
	if (!err->err || !err->msg[0])
		sbx_error_set(err, rc, SBX_E_NONE, "%s: %s", what, strerror(-rc));
	sbx_lease_error(l, what, err);
	free(what);
	return rc;
}

/* fsc_record() unless the failure is an answer (ENOENT...). */
int fsc_fail(struct sbx_lease *l, const char *op, const char *path, int rc, struct sbx_error *err)
{
	return sbx_fs_is_fault(rc) ? fsc_record(l, op, path, rc, err) : rc;
}

int fsc_unsupported(struct sbx_lease *l, const char *what, struct sbx_error *err)
{
	return sbx_error_set(err, ENOTSUP, SBX_E_EXECUTION_FAILED,
			     "provider %s cannot %s (no fallback)", l->prov->name, what);
}

/* ENOTSUP, recorded, when the provider lacks the slot `op path` needs. */
int fsc_need(const void *slot, struct sbx_lease *l, const char *what, const char *op,
	     const char *path, struct sbx_error *err)
{
	return slot ? 0 : fsc_fail(l, op, path, fsc_unsupported(l, what, err), err);
}

/* The sandbox for a call that must reach the provider (resumes a paused one). */
int fsc_use(struct sbx_lease *l, struct sbx_instance **inst, const char *op, const char *path,
	    struct sbx_error *err)
{
	int rc = sbx_lease_use(l, inst, err);
	return rc ? fsc_fail(l, op, path, rc, err) : 0;
}

/* fsc_use() for `op path`, which needs the provider's slot (ENOTSUP without it). */
int fsc_reach(struct sbx_lease *l, const void *slot, const char *what, const char *op,
	      const char *path, struct sbx_instance **inst, struct sbx_error *err)
{
	int rc = fsc_need(slot, l, what, op, path, err);
	return rc ? rc : fsc_use(l, inst, op, path, err);
}

/* Ends a provider call begun with fsc_use(): releases the sandbox, records a failure. */
int fsc_end(struct sbx_lease *l, int rc, const char *op, const char *path, struct sbx_error *err)
{
	sbx_lease_unuse(l);
	return rc ? fsc_fail(l, op, path, rc, err) : 0;
}

/*
 * Subscribes the cache to the provider's change reports (E2B's WatchDir),
 * once per instance, so changes made in the sandbox by anything else
 * invalidate what is cached of them before the TTL runs out.
 */
static void lease_notify(void *ctx, const char *path)
{
	struct sbx_lease *l = ctx;
	sbx_cache_notify(l->cache, path);
	if (!path) {
		sbx_kinval_flush(l->kinval);
		return;
	}
	/* The kernel's copy too: its paths are mount paths. */
	struct sbx_buf mp = SBX_BUF_INIT;
	sbx_buf_addf(&mp, "/%s/fs%s", l->name, path);
	sbx_kinval_path(l->kinval, mp.buf);
	sbx_buf_release(&mp);
}

static void watch(struct sbx_lease *l, struct sbx_instance *inst)
{
	/* The lease outlives the subscription: release() ends it, in lease_free. */
	if (l->prov->set_notify && sbx_cache_watch_claim(l->cache, inst))
		l->prov->set_notify(inst, lease_notify, l);
}

/* A paused sandbox cannot change its files: its cache is good at any age. */
bool fsc_any_age(struct sbx_lease *l)
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

/*
 * Before a pause (called without l->lock: it makes requests, and `state`
 * must never wait on them): makes what is cached answerable without one.
 * A run empties the cache, and afterwards the kernel asks again only for
 * names whose entries expired in it, so a file read since may be cached
 * while its directories are not; once the kernel's entries for them
 * expire (in fs_cache_timeout), a paused lease would have to resume to
 * answer. One stat of each such path, bounded; a failure only leaves that
 * path to resume the lease later, and the first fault ends the filling.
 */
void sbx_fs_before_pause(struct sbx_lease *l)
{
	char *miss[SBX_PAUSE_FILL_MAX];
	struct sbx_instance *inst;
	size_t n;
	int rc = 0;
	if (!l->cache || !l->prov->stat)
		return;
	pthread_mutex_lock(&l->lock);
	inst = l->state == SBX_LS_RUNNING ? l->inst : NULL;
	pthread_mutex_unlock(&l->lock);
	if (!inst)
		return;
	n = sbx_cache_unbacked(l->cache, miss, SBX_PAUSE_FILL_MAX);
	for (size_t i = 0; i < n; i++) {
		struct sbx_error e = SBX_ERROR_INIT;
		struct sbx_stat st;
		unsigned long gen = sbx_cache_gen(l->cache);
		if (rc == 0 || rc == -ENOENT)
			rc = l->prov->stat(inst, miss[i], &st, &e);
		if (rc == 0 || rc == -ENOENT)
			sbx_cache_attr_put(l->cache, miss[i], rc ? NULL : &st, gen);
		free(miss[i]);
	}
}

bool fsc_is_pseudo_root(const char *path)
{
	return !strcmp(path, "/proc") || !strcmp(path, "/sys") || !strcmp(path, "/dev");
}

/* Refuses changes under /proc, /sys, /dev. */
int fsc_pseudo_refuse(const char *path, struct sbx_error *err)
{
	if (!sbx_fs_is_pseudo(path))
		return 0;
	return sbx_error_set(err, EACCES, SBX_E_EXECUTION_FAILED,
			     "%s: the sandbox's kernel filesystems are not mirrored", path);
}

/*
 * ENAMETOOLONG, recorded, for a name the sandbox's filesystem cannot hold:
 * FUSE passes names up to 1024 bytes, and a remote provider may accept a
 * longer one and fail later (the close of a 256-byte name failed with EIO
 * and left it listed, dirty).
 */
static int name_too_long(const char *op, const char *path, struct sbx_error *err)
{
	size_t len = strlen(path);
	int rc = 0;
	if (len >= PATH_MAX) {
		rc = sbx_error_set(err, ENAMETOOLONG, SBX_E_EXECUTION_FAILED,
				   "%s: a path of %zu bytes is longer than PATH_MAX (%d)", op, len,
				   PATH_MAX);
	} else {
		for (const char *p = path; *p && !rc;) {
			size_t n = strcspn(p, "/");
			if (n > NAME_MAX)
				rc = sbx_error_set(err, ENAMETOOLONG, SBX_E_EXECUTION_FAILED,
						   "%s: the name \"%.32s...\" has %zu bytes, more "
						   "than NAME_MAX (%d)",
						   op, p, n, NAME_MAX);
			p += n + (p[n] == '/');
		}
	}
	return rc;
}

int fsc_name_check(struct sbx_lease *l, const char *op, const char *path, struct sbx_error *err)
{
	int rc = name_too_long(op, path, err);
	if (rc)
		return fsc_record(l, op, "(name too long)", rc, err);
	if (sbx_provider_carries(l->prov, path))
		return 0;
	sbx_error_set(err, EILSEQ, SBX_E_EXECUTION_FAILED,
		      "%s: not UTF-8, and %s carries names as UTF-8 text only", path,
		      l->prov->name);
	return fsc_record(l, op, path, -EILSEQ, err);
}

int fsc_no_such(const char *path, struct sbx_error *err)
{
	return sbx_error_set(err, ENOENT, SBX_E_NOT_FOUND, "%s: no such file or directory", path);
}

static int collect(void *ctx, const char *name, const struct sbx_stat *st)
{
	sbx_cache_listing_add(ctx, name, st);
	return 0;
}

/*
 * Lists dir again (one request) when its cached listing expired, so that
 * lookups in a directory being filled (`tar x`, `cp -r`) cost one list
 * per TTL, not one stat per new name. 1 when a fresh listing is stored,
 * 0 when there was nothing to do, or -errno (err filled, recorded).
 */
static int relist(struct sbx_lease *l, const char *dir, bool *fault, struct sbx_error *err)
{
	struct sbx_cache_listing ls = SBX_CACHE_LISTING_INIT;
	struct sbx_instance *inst;
	unsigned long gen;
	int rc;
	if (!(l->prov->caps & SBX_CAP_LIST_ATTRS) || !l->prov->list ||
	    !sbx_cache_dir_stale(l->cache, dir, SBX_CACHE_RELIST_MAX))
		return 0;
	/*
	 * Its parent being walked (git's object directories, looked up one
	 * after another, each revisited after its listing expired): the
	 * parent's subtree in one request, as a read of the directory would.
	 */
	if (fsc_walk_prefetch(l, dir) && !sbx_cache_dir_stale(l->cache, dir, SBX_CACHE_RELIST_MAX))
		return 1;
	gen = sbx_cache_gen(l->cache);
	rc = fsc_use(l, &inst, "list", dir, err);
	if (rc)
		return rc;
	rc = fsc_end(l, l->prov->list(inst, dir, collect, &ls, err), "list", dir, err);
	if (!rc)
		sbx_cache_dir_put(l->cache, dir, &ls, true, gen);
	sbx_cache_listing_release(&ls);
	*fault = rc && sbx_fs_is_fault(rc);
	return rc ? rc : 1;
}

/*
 * Remote attributes of path from a fresh listing of its directory (when
 * the old one expired) or from one stat; the answer (ENOENT included) is
 * cached, and so, briefly, is a fault (see sbx_cache_fail_put).
 */
static int remote_stat(struct sbx_lease *l, const char *path, struct sbx_stat *st,
		       struct sbx_error *err)
{
	struct sbx_instance *inst;
	const char *slash = strrchr(path, '/');
	unsigned long gen;
	bool fault = false;
	int rc = 0;

	if (sbx_cache_fail_get(l->cache, path, err))
		return -err->err;
	gen = sbx_cache_gen(l->cache);
	if (slash && slash[1]) {
		char *dir = sbx_xstrndup(path, sbx_path_dirlen(path));
		rc = relist(l, dir, &fault, err);
		free(dir);
	}
	if (rc < 0)
		goto out;
	if (rc > 0) {
		switch (sbx_cache_attr_get(l->cache, path, st, false)) {
		case SBX_CACHE_HIT:
			return 0;
		case SBX_CACHE_NEGATIVE:
			return fsc_no_such(path, err);
		default:
			break;
		}
	}
	gen = sbx_cache_gen(l->cache);
	rc = fsc_reach(l, l->prov->stat, "stat", "stat", path, &inst, err);
	if (rc)
		return rc;
	rc = fsc_end(l, l->prov->stat(inst, path, st, err), "stat", path, err);
	if (rc == 0 || rc == -ENOENT)
		sbx_cache_attr_put(l->cache, path, rc ? NULL : st, gen);
	fault = rc && sbx_fs_is_fault(rc);
out:
	if (fault)
		sbx_cache_fail_put(l->cache, path, err, gen);
	return rc;
}

/* Remote attributes of path from the cache or one stat; -ENOENT if none. */
int fsc_lookup(struct sbx_lease *l, const char *path, struct sbx_stat *st, struct sbx_error *err)
{
	switch (sbx_cache_attr_get(l->cache, path, st, fsc_any_age(l))) {
	case SBX_CACHE_HIT:
		return 0;
	case SBX_CACHE_NEGATIVE:
		return fsc_no_such(path, err);
	default:
		return remote_stat(l, path, st, err);
	}
}

/* ---- reading the tree ------------------------------------------------------------ */

static int c_getattr(struct sbx_lease *l, const char *path, struct sbx_fs_file *f, struct stat *st,
		     struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_stat s;
	int rc;

	if (sbx_fs_is_pseudo(path)) {
		if (!fsc_is_pseudo_root(path))
			return fsc_no_such(path, err);
		memset(&s, 0, sizeof(s));
		s.mode = S_IFDIR | 0555;
		s.nlink = 2;
		goto out;
	}
	/*
	 * A name no file can have: answered here (no request), and said in
	 * `error`; one the provider cannot carry does not exist there (an
	 * answer, as ENOENT is: its create says why).
	 */
	if ((rc = name_too_long("lookup", path, err)))
		return fsc_record(l, "lookup", "(name too long)", rc, err);
	if (!sbx_provider_carries(l->prov, path))
		return fsc_no_such(path, err);
	switch (sbx_cache_attr_get(c, path, &s, fsc_any_age(l))) {
	case SBX_CACHE_HIT:
		sbx_cache_file_overlay(c, path, &s, SBX_OV_REMOTE);
		goto out;
	case SBX_CACHE_NEGATIVE:
		rc = fsc_no_such(path, err);
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
	sbx_cache_dir_nlink(c, path, &s, fsc_any_age(l));
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
	if (!sbx_cache_dir_get(c, path, fsc_any_age(l), &ls) &&
	    !(fsc_walk_prefetch(l, path) && sbx_cache_dir_get(c, path, false, &ls))) {
		unsigned long gen = sbx_cache_gen(c);
		rc = fsc_reach(l, l->prov->list, "list directories", "list", path, &inst, err);
		if (!rc)
			rc = fsc_end(l, l->prov->list(inst, path, collect, &ls, err), "list", path,
				     err);
		if (rc)
			goto out;
		/* Partial attributes (no SBX_CAP_LIST_ATTRS) must not reach the kernel. */
		for (size_t i = 0; !attrs && i < ls.n; i++)
			ls.ents[i].has_st = false;
		sbx_cache_dir_put(c, path, &ls, attrs, gen);
		if (ls.n > 4096)
			malloc_trim(0);
	}
	sbx_cache_dir_overlay(c, path, fsc_any_age(l), &ls);
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

struct links_put {
	struct sbx_cache *c;
	const char *dir;
	unsigned long gen;
};

static void link_put(void *ctx, const char *name, const char *target)
{
	struct links_put *lp = ctx;
	char *path = sbx_xasprintf("%s/%s", sbx_path_prefix(lp->dir), name);
	sbx_cache_link_put(lp->c, path, target, lp->gen);
	free(path);
}

/*
 * On a miss, the texts of every link in path's directory come in one
 * request (the readlinks slot) into the cache: `ls -l` or `du` of a
 * directory of links asks once, not once a link (a link's stat needs its
 * text too: fuse_ops.c's link_size). Quiet when it fails: the link is then
 * read alone, and that call reports what it meets.
 */
static void links_of_dir(struct sbx_lease *l, const char *path, unsigned long gen)
{
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	char *dir = sbx_xstrndup(path, sbx_path_dirlen(path));
	if (!l->prov->readlinks || !sbx_cache_links_try(l->cache, dir) ||
	    sbx_lease_use(l, &inst, &err)) {
		sbx_error_clear(&err);
		free(dir);
		return;
	}
	(void)l->prov->readlinks(inst, dir, link_put, &(struct links_put){l->cache, dir, gen},
				 &err);
	sbx_lease_unuse(l);
	sbx_error_clear(&err);
	free(dir);
}

static int c_readlink(struct sbx_lease *l, const char *path, char *buf, size_t size,
		      struct sbx_error *err)
{
	struct sbx_instance *inst;
	unsigned long gen;
	int rc;
	if (sbx_fs_is_pseudo(path))
		return fsc_no_such(path, err);
	if (sbx_cache_link_get(l->cache, path, buf, size, fsc_any_age(l)))
		return 0;
	gen = sbx_cache_gen(l->cache);
	links_of_dir(l, path, gen);
	if (sbx_cache_link_get(l->cache, path, buf, size, fsc_any_age(l)))
		return 0;
	rc = fsc_reach(l, l->prov->readlink, "read symlinks", "readlink", path, &inst, err);
	if (!rc)
		rc = fsc_end(l, l->prov->readlink(inst, path, buf, size, err), "readlink", path,
			     err);
	if (!rc)
		sbx_cache_link_put(l->cache, path, buf, gen);
	return rc;
}

/* ---- changing the tree ------------------------------------------------------------- */

/*
 * Starts a change of path: refuses pseudo paths, uploads local changes of
 * `settle_path` first (the provider changes what it has), checks the slot,
 * gets the sandbox. On success the caller makes its call and passes the
 * result through fsc_end().
 */
static int begin(struct sbx_lease *l, const void *slot, const char *op, const char *path,
		 const char *settle_path, struct sbx_instance **inst, struct sbx_error *err)
{
	int rc = fsc_pseudo_refuse(path, err);
	if (!rc)
		rc = fsc_name_check(l, op, path, err);
	if (!rc && settle_path)
		rc = fsc_settle(l, settle_path, err);
	return rc ? rc : fsc_reach(l, slot, op, op, path, inst, err);
}

/*
 * The owner a new file shows (made_up_stat) is the one uploads give, and
 * the services' mkdir gives it too (envd's MakeDir and daytona's folder
 * both make it the sandbox user's), so a directory the mount's owner
 * makes teaches it with the stat the kernel asks for next (cached here:
 * no request more; e2b's comes with the MakeDir). Not another caller's
 * (chowned to them), nor a setgid one (its parent's group). Else the
 * lease's first new file teaches it (learn_owner, fs_cached_file.c).
 */
static void learn_owner_from_dir(struct sbx_lease *l, const char *path)
{
	const struct sbx_caller *who = sbx_caller_get();
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_stat st;
	uid_t uid;
	gid_t gid;
	if (!l->prov->write_new || sbx_cache_file_owner_known(l->cache, &uid, &gid) ||
	    (who && who->known && who->uid != geteuid()))
		return;
	if (fsc_lookup(l, path, &st, &err) == 0 && S_ISDIR(st.mode) && !(st.mode & S_ISGID))
		sbx_cache_file_owner_learn(l->cache, st.uid, st.gid);
}

/*
 * The attributes a directory just made shows, without asking: the mode
 * asked, the owner uploads give, nlink 2 and the times of now (the
 * sandbox's, a moment later, after the attribute TTL), as made_up_stat
 * does for a new file. Only where none of it is a guess: the caller is
 * the mount's owner (another is given the directory), the owner is known,
 * and the parent is cached (of any age: tar x outlives its TTL) and not
 * setgid (its group and bit would pass down). Asked before the mkdir.
 */
static bool made_up_dir(struct sbx_lease *l, const char *path, mode_t mode, struct sbx_stat *st)
{
	const struct sbx_caller *who = sbx_caller_get();
	size_t dl = sbx_path_dirlen(path);
	struct sbx_stat parent;
	char *dir;
	bool ok;
	if (who && who->known && who->uid != geteuid())
		return false;
	dir = sbx_xstrndup(path, dl ? dl : 1);
	ok = sbx_cache_attr_get(l->cache, dir, &parent, true) == SBX_CACHE_HIT &&
	     S_ISDIR(parent.mode) && !(parent.mode & S_ISGID);
	free(dir);
	memset(st, 0, sizeof(*st));
	if (!ok || !sbx_cache_file_owner_known(l->cache, &st->uid, &st->gid))
		return false;
	st->mode = S_IFDIR | (mode & 07777);
	st->nlink = 2;
	st->size = 4096;
	clock_gettime(CLOCK_REALTIME, &st->mtime);
	st->atime = st->ctime = st->mtime;
	return true;
}

/*
 * Where made_up_dir knows what the directory shows and the name is a
 * fresh negative entry (the kernel's lookup just said so), the provider
 * may queue it (mkdir_new: tar x cost a MakeDir, or a folder call and a
 * lookup, per directory); else it is made at once.
 */
static int c_mkdir(struct sbx_lease *l, const char *path, mode_t mode, struct sbx_error *err)
{
	struct sbx_instance *inst;
	struct sbx_stat st;
	bool made_up = false, queued;
	int rc = begin(l, l->prov->mkdir, "mkdir", path, NULL, &inst, err);
	if (!rc) {
		struct sbx_stat none;
		made_up = made_up_dir(l, path, mode, &st);
		queued = made_up && l->prov->mkdir_new &&
			 sbx_cache_attr_get(l->cache, path, &none, false) == SBX_CACHE_NEGATIVE;
		rc = fsc_end(l,
			     queued ? l->prov->mkdir_new(inst, path, mode, err)
				    : l->prov->mkdir(inst, path, mode, err),
			     "mkdir", path, err);
	}
	if (!rc) {
		sbx_cache_note_added(l->cache, path, made_up ? &st : NULL);
		sbx_cache_dir_new(l->cache, path);
		if (!made_up)
			learn_owner_from_dir(l, path);
	}
	return rc;
}

/*
 * The other names the mount linked to path's file (inotab.h), as paths in
 * the lease's fs/ (each and *out to free): their cached attributes change
 * with path's.
 */
static size_t fsc_other_names(struct sbx_lease *l, const char *path, char ***out)
{
	struct sbx_buf mp = SBX_BUF_INIT;
	size_t pre = strlen(l->name) + 4; /* "/NAME/fs" */
	sbx_buf_addf(&mp, "/%s/fs%s", l->name, path);
	size_t n = sbx_inotab_others(l->inotab, mp.buf, out);
	sbx_buf_release(&mp);
	for (size_t i = 0; i < n; i++)
		memmove((*out)[i], (*out)[i] + pre, strlen((*out)[i] + pre) + 1);
	return n;
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

bool fsc_has_other_names(struct sbx_lease *l, const char *path)
{
	char **others;
	struct sbx_stat st;
	size_t n = fsc_other_names(l, path, &others);
	free_names(others, n);
	return n || (sbx_cache_attr_get(l->cache, path, &st, true) == SBX_CACHE_HIT &&
		     S_ISREG(st.mode) && st.nlink > 1);
}

void fsc_other_names_changed(struct sbx_lease *l, const char *path)
{
	char **others;
	size_t n = fsc_other_names(l, path, &others);
	for (size_t i = 0; i < n; i++) {
		sbx_cache_note_changed(l->cache, others[i]);
		sbx_cache_file_stale(l->cache, others[i]);
	}
	free_names(others, n);
}

/* path's name goes (unlink, or a rename over it): the file's other names have one link less. */
static void one_link_less(struct sbx_lease *l, const char *path)
{
	char **others;
	size_t n = fsc_other_names(l, path, &others);
	for (size_t i = 0; i < n; i++)
		sbx_cache_note_changed(l->cache, others[i]);
	free_names(others, n);
}

static int c_unlink_held(struct sbx_lease *l, const char *path, struct sbx_error *err)
{
	struct sbx_instance *inst;
	int rc = 0;
	/* A file created here and never uploaded has nothing to remove remotely. */
	if (!sbx_cache_file_local_only(l->cache, path)) {
		rc = begin(l, l->prov->unlink, "unlink", path, NULL, &inst, err);
		if (!rc)
			rc = fsc_end(l, l->prov->unlink(inst, path, err), "unlink", path, err);
		/* Local changes of a file the sandbox lost: removing them is the whole job. */
		if (rc == -ENOENT && sbx_cache_file_overlay(l->cache, path, &(struct sbx_stat){0},
							    SBX_OV_NO_REMOTE)) {
			sbx_error_clear(err);
			rc = 0;
		}
	}
	if (!rc) {
		one_link_less(l, path);
		sbx_cache_file_unlink(l->cache, path);
		sbx_cache_note_removed(l->cache, path);
	}
	return rc;
}

/*
 * unlink, rmdir and rename hold the write-back queue across their remote
 * call (writeback.h): an upload already in flight lands first (then the
 * removal removes it), and one queued starts only after the entry was
 * detached or renamed, so it is dropped or goes to the new name: never
 * resurrects the old one in the sandbox.
 */
static int c_unlink(struct sbx_lease *l, const char *path, struct sbx_error *err)
{
	sbx_wb_hold(l->wb);
	int rc = c_unlink_held(l, path, err);
	sbx_wb_unhold(l->wb);
	return rc;
}

static int c_rmdir(struct sbx_lease *l, const char *path, struct sbx_error *err)
{
	struct sbx_instance *inst;
	sbx_wb_hold(l->wb);
	int rc = fsc_settle_under(l, path, err); /* a file only queued is an entry too */
	/* Known empty (`rm -rf` just listed it and removed each name): may be queued. */
	int (*slot)(struct sbx_instance *, const char *, struct sbx_error *) =
	    l->prov->rmdir_empty && sbx_cache_dir_empty(l->cache, path) ? l->prov->rmdir_empty
									: l->prov->rmdir;
	if (!rc)
		rc = begin(l, slot, "rmdir", path, NULL, &inst, err);
	if (!rc)
		rc = fsc_end(l, slot(inst, path, err), "rmdir", path, err);
	if (!rc)
		sbx_cache_note_removed(l->cache, path);
	sbx_wb_unhold(l->wb);
	return rc;
}

static int c_rename_held(struct sbx_lease *l, const char *from, const char *to, unsigned flags,
			 struct sbx_error *err)
{
	struct sbx_cache *c = l->cache;
	struct sbx_instance *inst;
	bool exchange = flags & RENAME_EXCHANGE;
	int rc = fsc_pseudo_refuse(to, err);
	if (!rc)
		rc = fsc_name_check(l, "rename", to, err);
	struct sbx_stat tst, fst;
	/* The moved entry keeps what is known of it: no stat after, its new parent counts it. */
	bool known = !rc && !exchange && sbx_cache_attr_get(c, from, &fst, false) == SBX_CACHE_HIT;
	if (!rc && exchange)
		rc = fsc_settle(l, to, err);
	else if (!rc && sbx_cache_attr_get(c, to, &tst, true) == SBX_CACHE_HIT && S_ISDIR(tst.mode))
		rc = fsc_settle_under(l, to, err); /* onto a directory: ENOTEMPTY as shown */
	if (!rc)
		rc = begin(l, l->prov->rename, "rename", from, from, &inst, err);
	if (!rc)
		rc = fsc_end(l, l->prov->rename(inst, from, to, flags, err), "rename", from, err);
	if (rc)
		return rc;
	if (!exchange && strcmp(from, to))
		one_link_less(l, to); /* the file it replaced (pjdfstest rename/23.t) */
	sbx_cache_file_rename(c, from, to, exchange);
	sbx_cache_note_removed(c, from);
	sbx_cache_note_removed(c, to);
	if (known)
		clock_gettime(CLOCK_REALTIME, &fst.ctime); /* a rename changes its ctime */
	sbx_cache_note_added(c, to, known ? &fst : NULL);
	if (exchange)
		sbx_cache_note_added(c, from, NULL);
	return 0;
}

static int c_rename(struct sbx_lease *l, const char *from, const char *to, unsigned flags,
		    struct sbx_error *err)
{
	sbx_wb_hold(l->wb);
	int rc = c_rename_held(l, from, to, flags, err);
	sbx_wb_unhold(l->wb);
	return rc;
}

/*
 * A chmod, chown or utimens of a file whose upload is coming waits with it
 * (cache_defer.c) rather than settling it first. With write-back, that is
 * any dirty file: tar's per-file mode and times would otherwise put every
 * upload back on its path. Without, a file still open (its close uploads
 * it): rsync's fchmod of the temporary it just made would upload it empty
 * and then replace it (temporary name, move aside, move, delete) instead
 * of writing it once to its name. The cache's attributes show the change
 * at once.
 */
static bool defer_attrs(struct sbx_lease *l, const void *slot, const char *path, const mode_t *mode,
			const struct timespec ts[2])
{
	return slot && !sbx_fs_is_pseudo(path) &&
	       sbx_cache_file_defer_attrs(l->cache, path, !l->wb, mode, ts);
}

/* A metadata change made through one name of a hard-linked file (fields NULL: kept). */
struct attr_change {
	const mode_t *mode;
	const uid_t *uid;
	const gid_t *gid;
	const struct timespec *ts;
};

/* Makes ch on the cached attributes of path (its mode only when with_mode). */
static void change_cached(struct sbx_cache *c, const char *path, const struct attr_change *ch,
			  bool with_mode)
{
	if (ch->mode && with_mode)
		sbx_cache_attr_chmod(c, path, *ch->mode);
	if (ch->uid)
		sbx_cache_attr_chown(c, path, *ch->uid, *ch->gid);
	if (ch->ts)
		sbx_cache_attr_utimens(c, path, ch->ts);
}

/*
 * A change made (or deferred with its upload) shows at once: on path's
 * cached attributes, and on the other names the mount linked to path's
 * file (inotab.h): the remote side may apply it later (a queued command),
 * and until then a refetch of another name would say the old mode, owner
 * or times. They take path's cached attributes (one file); when path has
 * none, the change is made on theirs.
 */
static void attrs_changed(struct sbx_lease *l, const char *path, const struct attr_change *ch)
{
	struct sbx_stat st;
	char **others;
	change_cached(l->cache, path, ch, true);
	unsigned long gen = sbx_cache_gen(l->cache);
	size_t n = fsc_other_names(l, path, &others);
	bool have = n && sbx_cache_attr_get(l->cache, path, &st, false) == SBX_CACHE_HIT;
	for (size_t i = 0; i < n; i++) {
		const char *sub = others[i];
		if (have)
			sbx_cache_attr_put(l->cache, sub, &st, gen);
		change_cached(l->cache, sub, ch, !have);
		free(others[i]);
	}
	free(others);
}

static int c_chmod(struct sbx_lease *l, const char *path, mode_t mode, struct sbx_error *err)
{
	const struct attr_change ch = {.mode = &mode};
	struct sbx_instance *inst;
	int rc;
	if (defer_attrs(l, l->prov->chmod, path, &mode, NULL)) {
		attrs_changed(l, path, &ch);
		return 0;
	}
	rc = begin(l, l->prov->chmod, "chmod", path, path, &inst, err);
	if (!rc)
		rc = fsc_end(l, l->prov->chmod(inst, path, mode, err), "chmod", path, err);
	if (!rc)
		attrs_changed(l, path, &ch);
	return rc;
}

static int c_chown(struct sbx_lease *l, const char *path, uid_t uid, gid_t gid,
		   struct sbx_error *err)
{
	const struct attr_change ch = {.uid = &uid, .gid = &gid};
	struct sbx_instance *inst;
	int rc;
	if (l->prov->chown && !sbx_fs_is_pseudo(path) &&
	    sbx_cache_file_defer_owner(l->cache, path, !l->wb, uid, gid)) {
		attrs_changed(l, path, &ch);
		return 0;
	}
	rc = begin(l, l->prov->chown, "chown", path, path, &inst, err);
	if (!rc)
		rc = fsc_end(l, l->prov->chown(inst, path, uid, gid, err), "chown", path, err);
	if (!rc)
		attrs_changed(l, path, &ch);
	return rc;
}

static int c_utimens(struct sbx_lease *l, const char *path, const struct timespec ts[2],
		     struct sbx_error *err)
{
	const struct attr_change ch = {.ts = ts};
	struct sbx_instance *inst;
	int rc;
	if (defer_attrs(l, l->prov->utimens, path, NULL, ts)) {
		attrs_changed(l, path, &ch);
		return 0;
	}
	/*
	 * Settled first, or a later upload would stamp its own mtime over this
	 * one. The uploads of names in a directory, still queued, would stamp
	 * the directory's when they land: rsync -a and tar x set a
	 * directory's times after writing its files, and rsync -aH found the
	 * directory's mtime changed. So the times are pinned and laid again
	 * after each of those uploads (fs_cached_file.c, upload_after), in the
	 * provider's next batch; waiting for the uploads instead cost tar x a
	 * metadata command per directory (its pause let the batch timer fire).
	 */
	sbx_cache_dir_times_pin(l->cache, path, ts);
	rc = begin(l, l->prov->utimens, "utimens", path, path, &inst, err);
	if (!rc)
		rc = fsc_end(l, l->prov->utimens(inst, path, ts, err), "utimens", path, err);
	if (rc)
		return rc;
	attrs_changed(l, path, &ch);
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
	int rc;
	if (!sbx_provider_carries(l->prov, target))
		return sbx_refuse(
		    l->mount, l, EILSEQ, "symlink",
		    "%s: the link text is not UTF-8, and %s carries it as UTF-8 text only", path,
		    l->prov->name);
	rc = begin(l, l->prov->symlink, "symlink", path, NULL, &inst, err);
	if (!rc)
		rc = fsc_end(l, l->prov->symlink(inst, target, path, err), "symlink", path, err);
	if (!rc) {
		sbx_cache_note_added(l->cache, path, NULL);
		/* The target as given: what readlink must say, without asking. */
		sbx_cache_link_put(l->cache, path, target, sbx_cache_gen(l->cache));
	}
	return rc;
}

/*
 * The new name's attributes are the file's, one link more, when the cache
 * knows them: the kernel's lookup right after link() is then no request
 * (remote providers queue the link: a stat of the new name would apply the
 * queue first, a command and a stat per object of `git add`).
 */
static int c_link(struct sbx_lease *l, const char *from, const char *to, struct sbx_error *err)
{
	struct sbx_instance *inst;
	struct sbx_stat st;
	unsigned long gen;
	bool known;
	int rc = fsc_pseudo_refuse(from, err);
	/*
	 * from's upload first (write-back: git's object, closed, then linked):
	 * its own bump of the generation must not make the link forget what
	 * it knows, or the reply's stat of to applies the queued link at once.
	 */
	if (!rc)
		rc = fsc_settle(l, from, err);
	gen = sbx_cache_gen(l->cache);
	known = sbx_cache_attr_get(l->cache, from, &st, false) == SBX_CACHE_HIT;
	if (!rc)
		rc = begin(l, l->prov->link, "link", to, NULL, &inst, err);
	if (!rc)
		rc = fsc_end(l, l->prov->link(inst, from, to, err), "link", to, err);
	if (rc)
		return rc;
	if (known && sbx_cache_gen(l->cache) == gen) {
		st.nlink++;
		clock_gettime(CLOCK_REALTIME, &st.ctime);
		sbx_cache_attr_put(l->cache, from, &st, gen);
		sbx_cache_note_added(l->cache, to, &st);
		return 0;
	}
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
		rc = fsc_end(l, l->prov->mknod(inst, path, mode, dev, err), "mknod", path, err);
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
	rc = fsc_use(l, &inst, "statfs", path, err);
	return rc ? rc : fsc_end(l, l->prov->statfs(inst, path, st, err), "statfs", path, err);
}

const struct sbx_fs_ops sbx_fs_cached_ops = {
    .getattr = c_getattr,
    .readdir = c_readdir,
    .open = fsc_open,
    .read = fsc_read,
    .write = fsc_write,
    .flush = fsc_flush,
    .fsync = fsc_fsync,
    .release = fsc_release,
    .truncate = fsc_truncate,
    .fallocate = fsc_fallocate,
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

/*
 * A pause waits for the write-back queue first, and for the downloads
 * being read as they arrive: a paused sandbox takes no upload and sends
 * no more bytes (a `cat` of a big file failed half-way, with "sandbox not
 * found", when its lease was paused). A download ends by itself, or when
 * its readers close, or when the transfer stalls past its idle timeout.
 */
static void before_pause(struct sbx_lease *l)
{
	struct sbx_error ignore = SBX_ERROR_INIT; /* said in `error` by the upload */
	sbx_fs_drain(l, &ignore);
	if (l->cache)
		sbx_cache_streams_wait(l->cache);
	sbx_fs_before_pause(l);
}

/* At exit (all): the queue's workers stop first, then everything dirty goes up here. */
static size_t save_unsaved(struct sbx_lease *l, bool all, long long deadline_ms)
{
	if (all)
		sbx_wb_stop(l->wb);
	return sbx_fs_save_unsaved(l, all, deadline_ms);
}

void sbx_fs_cached_install(void)
{
	static const struct sbx_lease_hooks hooks = {
	    .before_pause = before_pause,
	    .save_unsaved = save_unsaved,
	    .wb_new = sbx_wb_new,
	    .wb_free = sbx_wb_free,
	    .quiesce = sbx_fs_streams_wait,
	};
	sbx_lease_set_hooks(&hooks);
}
