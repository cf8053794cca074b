/*
 * cache — what the mount keeps of a remote lease's fs/: attributes,
 * directory listings (names plus, with SBX_CAP_LIST_ATTRS, every child's
 * attributes from the one list call), readlink targets, and whole-file
 * contents in local cache files under the cache directory.
 *
 * Attributes and listings live SBX_CACHE_TTL_MS (negative entries
 * SBX_CACHE_NEG_TTL_MS); "any age" lookups ignore the TTL (a paused
 * sandbox cannot change its files). Content entries are stamped with the
 * remote (size, mtime) they were downloaded at and are revalidated against
 * fresh attributes on open; dirty entries (written here, not uploaded yet)
 * are never evicted or revalidated away.
 *
 * This module is the tables only: it never calls a provider and knows
 * nothing of leases or FUSE. fs_cached.c makes the provider calls and
 * drives the state below.
 *
 * Locking: one mutex per cache protects every table and every field of
 * the content entries marked (T). It is never held across a provider call
 * or a wait for the network: a content entry that is being opened or
 * uploaded carries a `busy` claim instead, and other claimants sleep on
 * the cache's condition variable until it is released.
 */
#ifndef SBX_CACHE_H
#define SBX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "provider.h"

/* How long attributes and listings are trusted (the kernel's own timeout is shorter). */
#define SBX_CACHE_TTL_MS 2000
/* How long "no such file" is trusted. */
#define SBX_CACHE_NEG_TTL_MS 1000
/* A dirty file whose upload failed is not retried by others' flushes before this. */
#define SBX_CACHE_RETRY_MS 10000
/* How long a failed lookup (a fault, not an answer) is answered with its error again. */
#define SBX_CACHE_FAIL_MS 250
/* A lookup missing in an expired listing of at most this many names lists it again. */
#define SBX_CACHE_RELIST_MAX 4096
/* Clean content files kept after their last close (least recently used go first). */
#define SBX_CACHE_KEEP_BYTES (256LL << 20)

struct sbx_cache;

/* A cache keeping content files under dir (created on demand). Aborts on OOM. */
struct sbx_cache *sbx_cache_new(const char *dir);
/*
 * Frees the cache (NULL-safe). Clean content files are deleted; dirty ones
 * stay on disk with a NAME.path file beside them naming the sandbox path,
 * so nothing written is lost silently: the next sbx_cache_new() on the same
 * dir takes them back as dirty entries. No handle may be open.
 */
void sbx_cache_free(struct sbx_cache *c);
/* Drops attributes and listings (content stays, revalidated by size+mtime). */
void sbx_cache_invalidate_all(struct sbx_cache *c);
/*
 * Drops what is known of path and of its parent directory (attributes,
 * listing, link target). For change notifications from the provider and
 * for mutations whose effect is not known exactly.
 */
void sbx_cache_invalidate_path(struct sbx_cache *c, const char *path);
/* Drops path, everything below it, and its parent (renames, rmdir). */
void sbx_cache_invalidate_tree(struct sbx_cache *c, const char *path);
/*
 * True exactly once per instance: the caller should ask that instance for
 * change notifications (provider set_notify) now. The cache must outlive
 * the instance's notifications (the lease releases its instance first).
 */
bool sbx_cache_watch_claim(struct sbx_cache *c, const void *inst);
/*
 * Change notification callback (ctx: the cache; path NULL: anything). A
 * report of a path this cache changed within the TTL is taken for the echo
 * of our own change and ignored.
 */
void sbx_cache_notify(void *ctx, const char *path);
/* Changes the TTLs (milliseconds; tests use short ones). */
void sbx_cache_set_ttl(struct sbx_cache *c, long ttl_ms, long neg_ttl_ms);
/* Changes the orphan retry back-off (SBX_CACHE_RETRY_MS). */
void sbx_cache_set_retry(struct sbx_cache *c, long retry_ms);

/*
 * The generation: bumped by every invalidation and mutation. Take it before
 * a provider call and pass it to the _put functions: a result older than a
 * mutation that happened while the call was in flight is not stored.
 */
unsigned long sbx_cache_gen(struct sbx_cache *c);

/* ---- attributes --------------------------------------------------------- */

enum sbx_cache_hit { SBX_CACHE_MISS = 0, SBX_CACHE_HIT, SBX_CACHE_NEGATIVE };

/*
 * Looks path's attributes up. NEGATIVE also when the parent's listing is
 * fresh and lacks the name. any_age ignores the TTL.
 */
enum sbx_cache_hit sbx_cache_attr_get(struct sbx_cache *c, const char *path, struct sbx_stat *st,
				      bool any_age);
/*
 * A directory's link count from its fresh cached listing: 2 and one per
 * entry whose cached attributes say directory (else st is left as it is).
 * The remote listings carry none (the providers say 2).
 */
void sbx_cache_dir_nlink(struct sbx_cache *c, const char *path, struct sbx_stat *st, bool any_age);
/* Stores attributes (st NULL: "no such file") unless gen is stale. */
void sbx_cache_attr_put(struct sbx_cache *c, const char *path, const struct sbx_stat *st,
			unsigned long gen);
/*
 * The paths (at most max, into out, each to free) whose attributes are
 * not cached although something at or below them is: ancestors of cached
 * attributes and listings, and files whose contents are cached. What a
 * paused sandbox needs to serve its cache without a request.
 */
size_t sbx_cache_unbacked(struct sbx_cache *c, char **out, size_t max);
/*
 * Edits cached attributes in place after a successful metadata change
 * (fields < 0 / UTIME_OMIT are kept, UTIME_NOW drops the entry). No-op when
 * nothing is cached.
 */
void sbx_cache_attr_chmod(struct sbx_cache *c, const char *path, mode_t mode);
void sbx_cache_attr_chown(struct sbx_cache *c, const char *path, uid_t uid, gid_t gid);
void sbx_cache_attr_utimens(struct sbx_cache *c, const char *path, const struct timespec ts[2]);
/* The cached readlink target (copied into buf, size > 0): true on a hit. */
bool sbx_cache_link_get(struct sbx_cache *c, const char *path, char *buf, size_t size,
			bool any_age);
void sbx_cache_link_put(struct sbx_cache *c, const char *path, const char *target,
			unsigned long gen);
/*
 * Whether to ask the texts of all of dir's links in one request (fs_cached.c):
 * true, noted, unless dir was asked within the TTL in this generation. So a
 * directory whose answer failed or was cut short (too many links) is not asked
 * again for each of its links; they are read one by one until the TTL passes.
 */
bool sbx_cache_links_try(struct sbx_cache *c, const char *dir);

/*
 * A lookup of path that failed with a fault (unreachable, deadline,
 * 5xx...), remembered for SBX_CACHE_FAIL_MS: the kernel asks again at
 * once (a failed revalidation is followed by a fresh lookup), and each
 * ask would wait out the whole deadline again. Dropped by every
 * invalidation, and not kept when the cache's generation moved past gen
 * (taken before the request) meanwhile: a fault met while the lease was
 * found gone would otherwise outlive the invalidation that said so.
 */
void sbx_cache_fail_put(struct sbx_cache *c, const char *path, const struct sbx_error *e,
			unsigned long gen);
/* True, with *e the remembered error, when path failed so within SBX_CACHE_FAIL_MS. */
bool sbx_cache_fail_get(struct sbx_cache *c, const char *path, struct sbx_error *e);

/* ---- listings ----------------------------------------------------------- */

struct sbx_cache_dirent {
	char *name;
	bool has_st;
	struct sbx_stat st;
};

/* A directory listing being built or handed out (caller owns it). */
struct sbx_cache_listing {
	struct sbx_cache_dirent *ents;
	size_t n, alloc;
};

#define SBX_CACHE_LISTING_INIT                                                                     \
	{                                                                                          \
		NULL, 0, 0                                                                         \
	}

/* Appends one entry (st may be NULL). */
void sbx_cache_listing_add(struct sbx_cache_listing *ls, const char *name,
			   const struct sbx_stat *st);
void sbx_cache_listing_release(struct sbx_cache_listing *ls); /* members; leaves it empty */

/*
 * Stores a fresh listing of dir unless gen is stale; with_attrs also
 * stores every entry's attributes (the provider gave complete ones).
 */
void sbx_cache_dir_put(struct sbx_cache *c, const char *dir, const struct sbx_cache_listing *ls,
		       bool with_attrs, unsigned long gen);
/*
 * After a successful mkdir here: dir is new, so it is empty (a fresh,
 * empty listing: lookups of names in it need no request until the TTL).
 */
void sbx_cache_dir_new(struct sbx_cache *c, const char *dir);
/*
 * True when dir has a listing that expired and held at most max names:
 * a lookup missing in it is better answered by listing dir again (one
 * request for every name) than by a stat per name (a `tar x` looks up
 * every name it creates).
 */
bool sbx_cache_dir_stale(struct sbx_cache *c, const char *dir, size_t max);
/*
 * True when dir is being walked: its listing is fresh and holds at most
 * max names, a listing of one of its entries was stored within the TTL,
 * and at least two of its subdirectories have no fresh listing yet
 * (fs_walk.c: one listing of the subtree then serves them all).
 */
bool sbx_cache_walk_due(struct sbx_cache *c, const char *dir, size_t max);
/*
 * Copies the cached listing of dir into out (each entry with its cached
 * attributes where known): true on a hit. Both this and the fresh listing
 * path should pass through sbx_cache_dir_overlay().
 */
bool sbx_cache_dir_get(struct sbx_cache *c, const char *dir, bool any_age,
		       struct sbx_cache_listing *out);
/*
 * Applies local knowledge to a listing of dir: files created here and not
 * uploaded yet are added, open or dirty files show their local size, and
 * subdirectories their link count (sbx_cache_dir_nlink; any_age as there).
 */
void sbx_cache_dir_overlay(struct sbx_cache *c, const char *dir, bool any_age,
			   struct sbx_cache_listing *ls);
/*
 * True when dir is known empty: its listing is fresh (fetched or made
 * within the TTL) and every name in it was removed here since, and no
 * file created here waits in it (provider rmdir_empty).
 */
bool sbx_cache_dir_empty(struct sbx_cache *c, const char *dir);
/*
 * After a successful create/mkdir/symlink/link here: the parent's cached
 * listing gains the name (st, if given, becomes path's attributes; else
 * they are dropped). After unlink/rmdir: path becomes a negative entry and
 * leaves the parent's listing. Both stamp the parent's cached attributes
 * with a new mtime and ctime (now): the remote ones are close, and
 * dropping them would cost a stat of the directory per file created.
 */
void sbx_cache_note_added(struct sbx_cache *c, const char *path, const struct sbx_stat *st);
void sbx_cache_note_removed(struct sbx_cache *c, const char *path);
/* path's own attributes changed in an unknown way (truncate, link count). */
void sbx_cache_note_changed(struct sbx_cache *c, const char *path);

/* ---- contents ----------------------------------------------------------- */

/*
 * One file's content in a local cache file. Fields marked (T) are
 * protected by the cache lock; fd is fixed (and valid) while the caller
 * holds a reference, so pread/pwrite on it need no lock.
 */
struct sbx_cfile;

int sbx_cfile_fd(const struct sbx_cfile *cf);

/* What the holder of a busy claim sees of an entry (a snapshot). */
struct sbx_cfile_state {
	char *path;	  /* current sandbox path (caller frees) */
	int refs;	  /* references, the caller's included */
	bool linked;	  /* still reachable by path (not unlinked or replaced) */
	bool have_data;	  /* the cache file holds the whole content */
	bool dirty;	  /* local changes not uploaded */
	bool remote;	  /* exists in the sandbox (false: created here) */
	bool stamped;	  /* stamp_* are known */
	bool stamp_loose; /* only stamp_size is: it vouches (the sandbox has not changed since) */
	off_t stamp_size;
	struct timespec stamp_mtime;
	mode_t mode;		 /* permission bits for the upload of a new file */
	unsigned long wgen;	 /* local change counter (see sbx_cache_file_end_upload) */
	bool open_before_change; /* its latest open came before the sandbox last changed
				    from outside (a run): the run may have removed it */
	bool streaming;		 /* its download is arriving, and this open (to read)
				    goes beside it: SBX_CF_JOIN */
};

/*
 * Finds or creates path's entry, takes a reference, waits until no one
 * else holds its busy claim and takes it (an open to read goes beside an
 * upload in flight, and beside a download read as it arrives while that
 * is wanted; one to write waits for them); *state is the snapshot
 * (caller frees state->path). Finish with sbx_cache_file_ready(). 0 or
 * -errno (the cache file cannot be created).
 */
int sbx_cache_file_open(struct sbx_cache *c, const char *path, bool writing, struct sbx_cfile **out,
			struct sbx_cfile_state *state);

enum sbx_cfile_how {
	SBX_CF_KEEP,   /* content as it is */
	SBX_CF_NEW,    /* a file created here: empty, dirty, not remote yet */
	SBX_CF_TRUNC,  /* O_TRUNC of a remote file: empty, dirty */
	SBX_CF_LOADED, /* downloaded just now into the fd; clean, stamped with *st */
	SBX_CF_FAILED, /* download failed: content unknown */
	SBX_CF_STREAM, /* fs_cached_file.c only: a download read as it arrives (never ready()) */
	SBX_CF_JOIN,   /* a read-only open beside that download: reads what it brings */
};

/* Ends the busy claim of open (mode: for SBX_CF_NEW; st: for SBX_CF_LOADED). */
void sbx_cache_file_ready(struct sbx_cache *c, struct sbx_cfile *cf, enum sbx_cfile_how how,
			  mode_t mode, const struct sbx_stat *st);
/*
 * A download read as it arrives (fs_cached_file.c): the opener's claim
 * passes to a thread that downloads into the fd, telling how far it got
 * (stream_have); reads wait for their bytes (stream_wait: 0 once the
 * file holds [0, upto) or the download ended well, else its -errno);
 * stream_end comes before the thread's sbx_cache_file_ready().
 */
void sbx_cache_file_stream_begin(struct sbx_cache *c, struct sbx_cfile *cf, void *src);
/* Tells how far it got; false when no one else holds cf any more (stop). */
bool sbx_cache_file_stream_have(struct sbx_cache *c, struct sbx_cfile *cf, off_t have);
void sbx_cache_file_stream_end(struct sbx_cache *c, struct sbx_cfile *cf, int rc);
int sbx_cache_file_stream_wait(struct sbx_cache *c, struct sbx_cfile *cf, off_t upto);
/*
 * For a read at `from`, more than `far` bytes past what the download has
 * brought: the stream's src (begin's), lent until stream_return, during
 * which stream_end waits (the sandbox stays in use); NULL otherwise.
 */
void *sbx_cache_file_stream_lend(struct sbx_cache *c, struct sbx_cfile *cf, off_t from, off_t far);
void sbx_cache_file_stream_return(struct sbx_cache *c, struct sbx_cfile *cf);
/* Waits until no download of c is arriving (a pause lets them end first). */
void sbx_cache_streams_wait(struct sbx_cache *c);
/* Drops a reference. The entry lives on while dirty, or clean as cache. */
void sbx_cache_file_put(struct sbx_cache *c, struct sbx_cfile *cf);
/* Takes one more reference on a referenced entry (the write-back queue's). */
void sbx_cache_file_hold(struct sbx_cache *c, struct sbx_cfile *cf);
/* Marks that a background upload of cf failed (cleared by a successful upload). */
void sbx_cache_file_bg_failed(struct sbx_cache *c, struct sbx_cfile *cf);
/* True (once) if cf's last background upload failed. */
bool sbx_cache_file_bg_failed_take(struct sbx_cache *c, struct sbx_cfile *cf);
/*
 * The entry holds local changes not uploaded yet and still has its name;
 * *wgen (if not NULL) counts its changes (equal: no write in between).
 */
bool sbx_cache_file_dirty(struct sbx_cache *c, struct sbx_cfile *cf, unsigned long *wgen);
/* True while cf was never uploaded by this mount (created here: write_new's case). */
bool sbx_cache_file_is_new(struct sbx_cache *c, struct sbx_cfile *cf);
/*
 * A referenced entry for path that is open or dirty (local data is the
 * truth), or NULL. Drop it with sbx_cache_file_put().
 */
struct sbx_cfile *sbx_cache_file_find_live(struct sbx_cache *c, const char *path);
/* Records a local change (after pwrite/ftruncate on the fd): dirty. */
void sbx_cache_file_changed(struct sbx_cache *c, struct sbx_cfile *cf);

/*
 * Keeps a chmod (mode non-NULL) or utimens (ts non-NULL) of path with its
 * dirty entry, applied after the upload that is coming (cache_defer.c);
 * the local file takes the times, stat shows the mode. An upload is coming
 * for any dirty entry with write-back, and only for an open one without
 * (open_only: its close uploads it). False when path has no upload coming,
 * or the one in flight is past taking them: the caller makes the call itself.
 */
bool sbx_cache_file_defer_attrs(struct sbx_cache *c, const char *path, bool open_only,
				const mode_t *mode, const struct timespec ts[2]);
/* The same for a chown ((uid_t)-1 / (gid_t)-1: left alone). */
bool sbx_cache_file_defer_owner(struct sbx_cache *c, const char *path, bool open_only, uid_t uid,
				gid_t gid);
/*
 * What waited for an upload: a mode, an owner ((uid_t)-1 / (gid_t)-1 for
 * one left alone), times (UTIME_OMIT for one left alone).
 */
struct sbx_cfile_attrs {
	bool mode_set, times_set, owner_set;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct timespec ts[2];
};
/* a's mode, owner and (with times) times, where set, over st. */
void sbx_cfile_attrs_onto(struct sbx_stat *st, const struct sbx_cfile_attrs *a, bool times);
/*
 * The upload holding cf's claim takes what waits, once its data is written;
 * none join it after this (sbx_cache_file_defer_attrs says false) until
 * sbx_cache_file_end_upload.
 */
void sbx_cache_file_take_attrs(struct sbx_cache *c, struct sbx_cfile *cf,
			       struct sbx_cfile_attrs *a);
/* Gives back what the provider refused, for the next upload (unless newer wait). */
void sbx_cache_file_return_attrs(struct sbx_cache *c, struct sbx_cfile *cf,
				 const struct sbx_cfile_attrs *a);

/*
 * Claims an entry for upload (waits for other claims); *state as above.
 * Call sbx_cache_file_end_upload() whatever happens.
 */
void sbx_cache_file_begin_upload(struct sbx_cache *c, struct sbx_cfile *cf,
				 struct sbx_cfile_state *state);
/*
 * The owner the sandbox gives a new file this mount uploads, learnt from
 * the stat after the first such upload (learn), so that the next ones need
 * none (known: false until learnt); also what a file waiting for its first
 * upload shows (write-back: rsync -a chowns only what differs).
 */
void sbx_cache_file_owner_learn(struct sbx_cache *c, uid_t uid, gid_t gid);
bool sbx_cache_file_owner_known(struct sbx_cache *c, uid_t *uid, gid_t *gid);
/*
 * A directory's times set (ts, UTIME_NOW taken as now) while uploads of
 * names in it wait (none: nothing is pinned, and an old pin goes): each
 * such upload, once it landed, changed the directory's mtime in the
 * sandbox, so the times are laid again after it
 * (sbx_cache_dir_times_after). A name the mount adds to or removes from
 * the directory afterwards (sbx_cache_note_added/_removed, not an
 * upload's landing) moves its mtime past them: the pin goes. At most
 * CACHE_PINS_MAX (the oldest goes).
 */
void sbx_cache_dir_times_pin(struct sbx_cache *c, const char *dir, const struct timespec ts[2]);
/*
 * After the upload of file (cf) landed: true with the times to lay again
 * on *dir (caller frees) when file's directory is pinned; the pin goes
 * once no other dirty file waits in it.
 */
bool sbx_cache_dir_times_after(struct sbx_cache *c, const char *file, const struct sbx_cfile *cf,
			       char **dir, struct timespec ts[2]);
/*
 * Ends the claim. ok: the upload of the state taken at begin (wgen)
 * succeeded: the entry is clean unless written since, now remote, stamped
 * with *st if given (and st becomes path's attributes unless gen is stale),
 * or, if sent >= 0 (an upload not stat'ed: st, if any, is made up), loosely
 * with that size: it alone vouches for the copy until the sandbox changes
 * from outside.
 * !ok: stays dirty for the next flush.
 */
void sbx_cache_file_end_upload(struct sbx_cache *c, struct sbx_cfile *cf, unsigned long wgen,
			       bool ok, const struct sbx_stat *st, unsigned long gen, off_t sent);

/*
 * Up to max dirty entries no handle holds (leftovers of failed uploads, or
 * taken back from a previous mount), each with a reference for the caller
 * to retry and put. Entries whose back-off has not passed are skipped: it
 * is SBX_CACHE_RETRY_MS after a failure, doubling with each failure in a
 * row up to 32 times that.
 */
size_t sbx_cache_file_orphans(struct sbx_cache *c, struct sbx_cfile **out, size_t max);
enum sbx_unsaved {
	SBX_UNSAVED_ORPHANS, /* as sbx_cache_file_orphans() */
	SBX_UNSAVED_OWED,    /* orphans whatever their back-off (a run is about to start) */
	SBX_UNSAVED_ALL,     /* every dirty entry, open and recently failed ones too */
};
/* Dirty entries of one kind, each with a reference for the caller to put. */
size_t sbx_cache_file_unsaved(struct sbx_cache *c, struct sbx_cfile **out, size_t max,
			      enum sbx_unsaved which);
/* Dirty entries strictly below dir (at most max), each with a reference for the caller to put. */
size_t sbx_cache_file_dirty_under(struct sbx_cache *c, const char *dir, struct sbx_cfile **out,
				  size_t max);
/* Makes every dirty entry's orphan retry due now (a resume: the pause refused them). */
void sbx_cache_retry_now(struct sbx_cache *c);
/* How many entries hold changes not uploaded yet. */
size_t sbx_cache_unsaved_count(struct sbx_cache *c);
/*
 * For a lease whose sandbox is gone, before its directory is removed: every
 * file of the cache directory dir with unsaved changes (a FILE.path names
 * it) is hard-linked into dest, a mkdtemp template made at the first one,
 * under the sandbox path it stands for. Works on the disk alone (the cache
 * of a lease found gone at mount is never set up). Returns how many (0:
 * none, dest not made; *first: the first one's sandbox path, to free) or
 * -errno with err saying which file could not be kept.
 */
int sbx_cache_keep_unsaved(const char *dir, char *dest, char **first, struct sbx_error *err);
/* The local cache file of an entry (for messages: where unsaved data is kept). */
const char *sbx_cfile_name(const struct sbx_cfile *cf);
/* The entry's sandbox path now (caller frees; for messages: the file they concern). */
char *sbx_cfile_path(struct sbx_cache *c, const struct sbx_cfile *cf);

enum sbx_overlay {
	SBX_OV_REMOTE,	   /* st holds remote attributes: local size (and mtime if dirty) on top */
	SBX_OV_LOCAL_ONLY, /* only a file created here, not uploaded yet: st filled entirely */
	SBX_OV_NO_REMOTE,  /* the sandbox has no such file: any local changes, st filled entirely */
};

/*
 * Overlays local knowledge of an open or dirty file on attributes of path
 * (see enum sbx_overlay). True when something was applied. Local changes
 * stay visible even when the sandbox lost the file: they will go up.
 */
bool sbx_cache_file_overlay(struct sbx_cache *c, const char *path, struct sbx_stat *st,
			    enum sbx_overlay how);
/* Attributes of an open entry from local facts alone (unlinked files). */
void sbx_cache_file_stat(struct sbx_cache *c, struct sbx_cfile *cf, struct sbx_stat *st);
/*
 * True when cf is a clean copy the sandbox has changed since, by the
 * attributes the cache holds now (no request; see outdated_copy: after a
 * run or change report, or learnt after the copy was stamped): a read
 * past its end should fetch the file again.
 */
bool sbx_cache_file_outdated(struct sbx_cache *c, struct sbx_cfile *cf);
/* True if path is a file created here that the sandbox does not have yet. */
bool sbx_cache_file_local_only(struct sbx_cache *c, const char *path);
/* Content of path no longer matches its stamp (changed remotely by us). */
void sbx_cache_file_stale(struct sbx_cache *c, const char *path);
/* A clean entry's stamp follows an explicit mtime we just set. */
void sbx_cache_file_restamp(struct sbx_cache *c, const char *path, const struct timespec *mtime);
/* path is gone: its entry is detached (open handles keep it, nothing uploads). */
void sbx_cache_file_unlink(struct sbx_cache *c, const char *path);
/*
 * cf, claimed by an upload, was removed in the sandbox (by a run) while it
 * was open here: it leaves the table and is clean, as a file unlinked
 * while open, so no later close uploads it (which made it reappear).
 */
void sbx_cache_file_gone(struct sbx_cache *c, struct sbx_cfile *cf);
/* cf is still in the sandbox now: later uploads of its open need not ask again. */
void sbx_cache_file_still_there(struct sbx_cache *c, struct sbx_cfile *cf);
/*
 * Entries at or under `from` move to `to`; entries at or under `to` are
 * detached, or with RENAME_EXCHANGE move to `from`.
 */
void sbx_cache_file_rename(struct sbx_cache *c, const char *from, const char *to, bool exchange);

/* ---- prefetch (cache_prefetch.c) ----------------------------------------- */

/*
 * Notes that path is being downloaded now; true when another file of the
 * same directory was downloaded within window_ms before it (grep -r,
 * cat *, tar c: the directory's other small files are worth one request).
 */
bool sbx_cache_prefetch_due(struct sbx_cache *c, const char *path, long window_ms);
/*
 * True when a prefetch of path, whose attributes are st, would add
 * something: no content entry, or a clean, unused one whose copy is not
 * stamped with st's size and mtime.
 */
bool sbx_cache_prefetch_wanted(struct sbx_cache *c, const char *path, const struct sbx_stat *st);
/*
 * Seeds path's content with the len bytes a prefetch fetched, stamped with
 * st (size, mtime, mode), as a download would be: a later open serves it
 * only while fresh attributes match the stamp. Nothing is stored when gen
 * is stale (the cache was changed or invalidated since the fetch began) or
 * the entry is claimed, open or dirty meanwhile. The copy is clean cache,
 * evicted like any closed one. 1 when stored, 0 when not, or -errno (the
 * cache file).
 */
int sbx_cache_prefetch_seed(struct sbx_cache *c, const char *path, const char *data, size_t len,
			    const struct sbx_stat *st, unsigned long gen);

/* Waits for the uploads in flight at the call (a run's view must include them). */
void sbx_cache_wait_uploads(struct sbx_cache *c);

#endif
