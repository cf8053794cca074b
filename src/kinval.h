/*
 * kinval — what the kernel caches of a lease's fs/, so it can be dropped.
 *
 * The kernel keeps names and attributes of fs/ for a short timeout. Changes
 * made through the mount invalidate themselves; a run (or a provider's
 * change notification) changes files behind the kernel's back, so every
 * fs/ path the kernel learned from us is noted here, and after a run the
 * noted paths are invalidated through a callback that fuse_ops installs.
 * Knows nothing of FUSE; paths are mount paths ("/NAME/fs/etc/hosts").
 */
#ifndef SBX_KINVAL_H
#define SBX_KINVAL_H

struct sbx_kinval;

struct sbx_kinval *sbx_kinval_new(void);
void sbx_kinval_free(struct sbx_kinval *k); /* NULL-safe */
/* Notes that the kernel now caches mount_path (bounded: past the bound a
 * path is not remembered and may stay stale for the kernel's timeout). */
void sbx_kinval_note(struct sbx_kinval *k, const char *mount_path);
/* Invalidates every noted path and forgets them. */
void sbx_kinval_flush(struct sbx_kinval *k);
/* Invalidates one path now (a change notification) and forgets it. */
void sbx_kinval_path(struct sbx_kinval *k, const char *mount_path);
/*
 * Installs the invalidation callback (one mount per process): cb(ctx,
 * path) drops the kernel's attributes and data of path. Until one is
 * installed nothing is noted.
 */
void sbx_kinval_set_callback(void (*cb)(void *ctx, const char *mount_path), void *ctx);

#endif
