/*
 * fs_prefetch — reads in bulk for a remote lease's fs/. grep -r, cat *
 * and tar c read every file of a directory in turn, one download each.
 * When an open must download a file and another file of the same
 * directory was downloaded within SBX_PREFETCH_WINDOW_MS, one request (the
 * provider's read_many) fetches that file together with the directory's
 * other regular files that the cache's listing knows, and those of the
 * directories beside it whose listings the cache holds fresh (a walk's:
 * add_siblings), each at most SBX_PREFETCH_FILE_MAX, at most
 * SBX_PREFETCH_BATCH_FILES files and SBX_PREFETCH_BATCH_BYTES in all,
 * skipping any already cached as listed, open or dirty. Each fetched file
 * seeds the content cache stamped as a download would be
 * (cache_prefetch.c), so a later open validates it the same way. What
 * this is not: a read-ahead within one file, or a cache of its own (the
 * content cache holds and evicts what comes back).
 */
#include "fs_prefetch.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fsutil.h"
#include "base/log.h"
#include "base/pathutil.h"
#include "base/xalloc.h"
#include "fs_cached.h"
#include "lease.h"

static atomic_bool prefetch_off;

void sbx_prefetch_set(bool on)
{
	atomic_store(&prefetch_off, !on);
}

struct batch {
	struct sbx_cache *c;
	const char **paths;
	struct sbx_stat *sts; /* the attributes each was chosen by (listing; [0]: the open's) */
	size_t n, alloc;
	long long bytes; /* of the files chosen */
	unsigned long gen;
	int fd; /* the open's cache file, for paths[0] */
	off_t got;
	bool loaded;
	size_t seeded;
};

/*
 * The stamp a fetched file gets: the size and mtime the reply measured
 * (before reading the bytes) over the listing's other attributes; a reply
 * measuring none vouches for the listing's own only with the same size,
 * exactly as a download vouches for the stat before it (a change in
 * between leaves a copy newer than its stamp: re-read at the next open).
 */
static bool stamp_for(const struct sbx_stat *listed, const struct sbx_stat *measured, size_t len,
		      struct sbx_stat *out)
{
	*out = *listed;
	if (measured) {
		out->size = measured->size;
		out->mtime = measured->mtime;
	}
	return out->size == (off_t)len;
}

static int batch_file(void *ctx, size_t i, const char *data, size_t len,
		      const struct sbx_stat *measured)
{
	struct batch *b = ctx;
	struct sbx_stat st;
	if (i >= b->n)
		return 0;
	if (i == 0) {
		/* The open's own file: its download (the open stamps it, as after download()). */
		int rc = ftruncate(b->fd, 0) || lseek(b->fd, 0, SEEK_SET)
			     ? -errno
			     : sbx_write_all(b->fd, data, len);
		if (rc)
			return rc;
		b->got = (off_t)len;
		b->loaded = true;
		return 0;
	}
	if (stamp_for(&b->sts[i], measured, len, &st) &&
	    sbx_cache_prefetch_seed(b->c, b->paths[i], data, len, &st, b->gen) > 0)
		b->seeded++;
	return 0;
}

/* Appends path (taken) with the attributes it was chosen by. */
static void batch_add(struct batch *b, char *path, const struct sbx_stat *st)
{
	if (b->n == b->alloc) {
		b->alloc = b->alloc ? 2 * b->alloc : 64;
		b->paths = sbx_xreallocarray(b->paths, b->alloc, sizeof(*b->paths));
		b->sts = sbx_xreallocarray(b->sts, b->alloc, sizeof(*b->sts));
	}
	b->paths[b->n] = path;
	b->sts[b->n++] = *st;
}

/*
 * Adds dir's regular files that ls lists and the cache wants (each at most
 * SBX_PREFETCH_FILE_MAX, the batch within its caps), except `skip`.
 */
static void add_files(struct sbx_lease *l, struct batch *b, const char *dir,
		      const struct sbx_cache_listing *ls, const char *skip)
{
	for (size_t i = 0; i < ls->n && b->n < SBX_PREFETCH_BATCH_FILES; i++) {
		const struct sbx_cache_dirent *e = &ls->ents[i];
		char *p;
		if (!e->has_st || !S_ISREG(e->st.mode) || e->st.size > SBX_PREFETCH_FILE_MAX ||
		    b->bytes + e->st.size > SBX_PREFETCH_BATCH_BYTES)
			continue;
		p = sbx_xasprintf("%s/%s", sbx_path_prefix(dir), e->name);
		if (!strcmp(p, skip) || !sbx_cache_prefetch_wanted(l->cache, p, &e->st)) {
			free(p);
			continue;
		}
		batch_add(b, p, &e->st);
		b->bytes += e->st.size;
	}
}

/*
 * A walk's other directories (grep -r, tar c): the subdirectories of dir's
 * parent whose listings the cache holds fresh — a walk's list_tree
 * (fs_walk.c) brought them, or they were just read — give their files to
 * the same batch, so a walk costs a batch per subtree, not per directory.
 * Never beside a directory of "/" (the sandbox's /proc, /sys), and at most
 * SBX_CACHE_RELIST_MAX names looked at in the parent and in its
 * subdirectories' listings (each prefetch of a walk looks again).
 */
static void add_siblings(struct sbx_lease *l, struct batch *b, const char *dir)
{
	struct sbx_cache_listing pls = SBX_CACHE_LISTING_INIT;
	char *parent = sbx_xstrndup(dir, sbx_path_dirlen(dir));
	size_t seen = 0;
	if (strcmp(parent, "/") && sbx_cache_dir_get(l->cache, parent, true, &pls) &&
	    pls.n <= SBX_CACHE_RELIST_MAX) {
		for (size_t i = 0;
		     i < pls.n && b->n < SBX_PREFETCH_BATCH_FILES && seen < SBX_CACHE_RELIST_MAX;
		     i++) {
			struct sbx_cache_listing ls = SBX_CACHE_LISTING_INIT;
			char *sub;
			if (!pls.ents[i].has_st || !S_ISDIR(pls.ents[i].st.mode))
				continue;
			sub = sbx_xasprintf("%s/%s", parent, pls.ents[i].name);
			if (strcmp(sub, dir) && sbx_cache_dir_get(l->cache, sub, false, &ls)) {
				add_files(l, b, sub, &ls, "");
				seen += ls.n;
			}
			sbx_cache_listing_release(&ls);
			free(sub);
		}
	}
	sbx_cache_listing_release(&pls);
	free(parent);
}

/* Fills b with path (st) and the files worth fetching with it; false if there are none. */
static bool choose(struct sbx_lease *l, const char *path, const struct sbx_stat *st,
		   struct batch *b)
{
	struct sbx_cache_listing ls = SBX_CACHE_LISTING_INIT;
	char *dir = sbx_xstrndup(path, sbx_path_dirlen(path));
	batch_add(b, sbx_xstrdup(path), st);
	b->bytes = st->size;
	/*
	 * Any age: the listing only chooses the names; each fetched file's
	 * stamp is checked at its open like a download's (an old listing's
	 * mtime, vouched for by daytona's size, is older than the bytes: a
	 * change since fails the check). `find -exec cat {} +` lists every
	 * directory first and reached the last ones with their listings
	 * expired: 0.22 requests per file on e2b.
	 */
	if (sbx_cache_dir_get(l->cache, dir, true, &ls)) {
		add_files(l, b, dir, &ls, path);
		add_siblings(l, b, dir);
	}
	sbx_cache_listing_release(&ls);
	free(dir);
	return b->n > 1;
}

bool sbx_prefetch_open(struct sbx_lease *l, const char *path, const struct sbx_stat *st, int fd,
		       off_t *got)
{
	struct batch b = {.c = l->cache, .fd = fd};
	struct sbx_error err = SBX_ERROR_INIT;
	struct sbx_instance *inst;
	int rc = -1;

	if (atomic_load(&prefetch_off) || !l->prov->read_many ||
	    !sbx_cache_prefetch_due(l->cache, path, SBX_PREFETCH_WINDOW_MS) || !S_ISREG(st->mode) ||
	    st->size > SBX_PREFETCH_FILE_MAX)
		return false;
	b.gen = sbx_cache_gen(l->cache);
	if (choose(l, path, st, &b) && sbx_lease_use(l, &inst, &err) == 0) {
		rc = l->prov->read_many(inst, b.paths, b.n, SBX_PREFETCH_BATCH_BYTES, batch_file,
					&b, &err);
		sbx_lease_unuse(l);
		/* Not recorded: the download that follows reports a fault of its own. */
		if (rc)
			sbx_log(SBX_LOG_DEBUG, "prefetch of %zu files with %s: %s", b.n - 1, path,
				err.msg);
		else
			sbx_log(SBX_LOG_DEBUG, "prefetch of %zu files with %s: %zu cached", b.n - 1,
				path, b.seeded);
		*got = b.got;
	}
	for (size_t i = 0; i < b.n; i++)
		free((char *)b.paths[i]);
	free(b.paths);
	free(b.sts);
	return b.loaded && !rc;
}
