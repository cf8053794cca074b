/*
 * fs_cached — private to fs_cached.c (helpers, tree, ops table) and
 * fs_cached_file.c (open files). Everyone else uses sbx_fs_cached_ops
 * from fsmirror.h. Every function returns 0 / -errno (or a byte count)
 * and fills err; "recorded" means written to the lease's `error` file.
 */
#ifndef SBX_FS_CACHED_H
#define SBX_FS_CACHED_H

#include <stdbool.h>

#include "cache.h"
#include "fsmirror.h"

/* Records the failure of `op path` (filling err if empty); returns rc. */
int fsc_record(struct sbx_lease *l, const char *op, const char *path, int rc,
	       struct sbx_error *err);
/* fsc_record() if rc is a fault (sbx_fs_is_fault()), else only returns rc. */
int fsc_fail(struct sbx_lease *l, const char *op, const char *path, int rc, struct sbx_error *err);
/* -ENOTSUP with "provider X cannot <what>" (not recorded). */
int fsc_unsupported(struct sbx_lease *l, const char *what, struct sbx_error *err);
/* 0 if slot is set, else fsc_unsupported(), recorded as `op path`. */
int fsc_need(const void *slot, struct sbx_lease *l, const char *what, const char *op,
	     const char *path, struct sbx_error *err);
/* sbx_lease_use() (resumes a paused sandbox); a failure is recorded. */
int fsc_use(struct sbx_lease *l, struct sbx_instance **inst, const char *op, const char *path,
	    struct sbx_error *err);
/* fsc_need() then fsc_use(). */
int fsc_reach(struct sbx_lease *l, const void *slot, const char *what, const char *op,
	      const char *path, struct sbx_instance **inst, struct sbx_error *err);
/* Ends a provider call begun with fsc_use(): unuses the lease, fsc_fail()s rc. */
int fsc_end(struct sbx_lease *l, int rc, const char *op, const char *path, struct sbx_error *err);
/* Waits (at most 30 s) for the streamed reads' threads to end (the quiesce hook, at exit). */
void sbx_fs_streams_wait(void);
/* True while the sandbox is paused: cached data is good at any age. */
bool fsc_any_age(struct sbx_lease *l);
/*
 * Before a read of a directory the cache lacks: when its parent is being
 * walked, one list_tree of the parent fills every sibling's listing
 * (fs_walk.c). True when it did (the cache then holds path's listing).
 */
bool fsc_walk_prefetch(struct sbx_lease *l, const char *path);
bool fsc_is_pseudo_root(const char *path);
/* -EACCES for paths under /proc, /sys, /dev; else 0. */
int fsc_pseudo_refuse(const char *path, struct sbx_error *err);
int fsc_no_such(const char *path, struct sbx_error *err);
/*
 * ENAMETOOLONG (recorded) for a component over NAME_MAX or a path over
 * PATH_MAX; then EILSEQ (recorded) for a path the provider cannot carry
 * (sbx_provider_carries).
 */
int fsc_name_check(struct sbx_lease *l, const char *op, const char *path, struct sbx_error *err);
/*
 * path's file has other names: hard links the mount made (inotab.h), or a
 * link count above 1 in its last stat (providers that report one).
 */
bool fsc_has_other_names(struct sbx_lease *l, const char *path);
/* path's file changed in the sandbox: what is cached of its other names is stale. */
void fsc_other_names_changed(struct sbx_lease *l, const char *path);
/* Remote attributes of path from the cache or one stat; -ENOENT if none. */
int fsc_lookup(struct sbx_lease *l, const char *path, struct sbx_stat *st, struct sbx_error *err);
/*
 * A write-back worker's upload of cf (writeback.c): failures recorded in
 * `error`, the data kept dirty; after a success, others' leftovers too.
 */
int fsc_upload_bg(struct sbx_lease *l, struct sbx_cfile *cf);
/*
 * As fsc_upload_bg for n entries (a worker's batch): the new files among
 * them go up in one write_new_many request, the others one by one; each
 * ends as its own upload would (rcs[i]).
 */
void fsc_upload_bg_many(struct sbx_lease *l, struct sbx_cfile **cf, size_t n, int *rcs);
/* Uploads path's local changes, if any, before a metadata call. */
int fsc_settle(struct sbx_lease *l, const char *path, struct sbx_error *err);
/*
 * Uploads a file below dir whose changes wait (queued for write-back, or
 * still open), unless none does: with one there, the sandbox's rmdir of
 * dir, or rename onto it, says ENOTEMPTY as the mount shows it. Returns
 * the failure when none could go up.
 */
int fsc_settle_under(struct sbx_lease *l, const char *dir, struct sbx_error *err);

/* The open-file slots of sbx_fs_cached_ops (fs_cached_file.c). */
int fsc_open(struct sbx_lease *l, const char *path, int flags, mode_t mode,
	     struct sbx_fs_file **out, struct sbx_error *err);
ssize_t fsc_read(struct sbx_fs_file *f, char *buf, size_t size, off_t off, struct sbx_error *err);
ssize_t fsc_write(struct sbx_fs_file *f, const char *buf, size_t size, off_t off,
		  struct sbx_error *err);
int fsc_flush(struct sbx_fs_file *f, struct sbx_error *err);
int fsc_fsync(struct sbx_fs_file *f, int datasync, struct sbx_error *err);
void fsc_release(struct sbx_fs_file *f);
/* fallocate(2) on the local copy, which then goes up as any write (KEEP_SIZE alone changes no
 * byte: nothing to upload). */
int fsc_fallocate(struct sbx_fs_file *f, int mode, off_t off, off_t len, struct sbx_error *err);
int fsc_truncate(struct sbx_lease *l, const char *path, struct sbx_fs_file *f, off_t size,
		 struct sbx_error *err);

#endif
