/*
 * kinval — what the kernel caches of a lease's fs/, so it can be dropped.
 *
 * The kernel keeps names and attributes of fs/ for a short timeout. Changes
 * made through the mount invalidate themselves; a run (or a provider's
 * change notification) changes files behind the kernel's back, so every
 * fs/ path the kernel learned from us is noted here, and after a run the
 * noted paths are invalidated through a callback that fuse_ops installs.
 * Knows nothing of FUSE; paths are mount paths ("/NAME/fs/etc/hosts").
 *
 * An invalidated path stays "doubted" with the file type the kernel was
 * last given: the kernel keeps its inode (only the attributes are
 * dropped), and an inode cannot change type. When a run replaced a file
 * by a directory (or a link by a file...), the kernel's next GETATTR
 * would get another type, mark its inode bad and fail the call with EIO.
 * fuse_ops answers that one GETATTR ESTALE instead (sbx_kinval_note's
 * result): the VFS retries the walk with LOOKUP_REVAL, the LOOKUP tells
 * the kernel the new type and it makes a new inode (NFS's way). An open
 * of a doubted path whose type changed is answered ESTALE too, with the
 * doubt kept, so open(2)'s own retry with LOOKUP_REVAL meets it.
 */
#ifndef SBX_KINVAL_H
#define SBX_KINVAL_H

#include <stdbool.h>
#include <sys/types.h>

struct sbx_kinval;

struct sbx_kinval *sbx_kinval_new(void);
void sbx_kinval_free(struct sbx_kinval *k); /* NULL-safe */
/*
 * Notes that the kernel now caches mount_path as a file of mode's type
 * (bounded: past the bound a path is not remembered and may stay stale for
 * the kernel's timeout). Returns true when the path was doubted with
 * another type: the kernel's inode for it has the wrong type (the doubt is
 * gone with this call, so a path gives true once).
 */
bool sbx_kinval_note(struct sbx_kinval *k, const char *mount_path, mode_t mode);
/*
 * The kernel was given mount_path's attributes through an open file (a
 * GETATTR with a handle, as a read past the cached size sends): noted, so
 * the next flush drops them, while a doubt of the path stays for its next
 * stat. Not noted, a run's new size stayed unseen for the attribute
 * timeout after the one flush that was to drop it: `cat` read the run's
 * new bytes cut at the old size.
 */
void sbx_kinval_note_kept(struct sbx_kinval *k, const char *mount_path, mode_t mode);
/* Whether mount_path is doubted; *type is then the kernel's (S_IFMT bits). */
bool sbx_kinval_doubted(struct sbx_kinval *k, const char *mount_path, mode_t *type);
/* Invalidates every noted path; they become doubted. */
void sbx_kinval_flush(struct sbx_kinval *k);
/*
 * sbx_kinval_flush on a thread of its own, for a caller holding the lease
 * lock (a lease that is gone: its paths are not doubted). The kernel's
 * invalidation of a file's pages waits for a page a read of it holds
 * locked, and that read's request may wait for the lease lock: rmdir of a
 * local lease while a file of it was read hung the mount for good.
 */
void sbx_kinval_flush_detached(struct sbx_kinval *k);
/* Waits (at most ms) until no detached flush runs: the caller, now without
 * the lock, returns once the kernel has dropped what it held. */
void sbx_kinval_wait_detached(long ms);
/* Invalidates one path now (a change notification); it becomes doubted. */
void sbx_kinval_path(struct sbx_kinval *k, const char *mount_path);
/* The mount itself made, removed or renamed mount_path: the kernel knows
 * what is there now, so the path is no longer doubted. */
void sbx_kinval_forget(struct sbx_kinval *k, const char *mount_path);
/*
 * Installs the invalidation callback (one mount per process): cb(ctx,
 * path) drops the kernel's attributes and data of path. Until one is
 * installed nothing is noted.
 */
void sbx_kinval_set_callback(void (*cb)(void *ctx, const char *mount_path), void *ctx);
/*
 * A name of the mount's root went away without a request of the kernel's
 * (a lease forgotten through its `state` file): the kernel drops its entry
 * now, through gone_cb(ctx, name), installed with the callback above.
 */
void sbx_kinval_set_gone_callback(void (*gone_cb)(void *ctx, const char *name));
void sbx_kinval_root_name_gone(const char *name);

#endif
