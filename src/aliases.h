/*
 * aliases — the other names of hard-linked files, for the kernel's
 * attribute cache. With the high-level FUSE API each name is its own
 * kernel inode, so after `chmod a` (or a write, link, unlink, rename)
 * the kernel would keep showing the old mode, size or link count under
 * every other name `b` of the same file until its attributes time out.
 * fuse_ops.c notes every fs/ name it shows whose nlink is above 1, with
 * its inode number; after a change through one name the other names the
 * kernel knows are invalidated at once. Knows nothing of FUSE.
 * Paths are mount paths ("/NAME/fs/etc/hosts").
 */
#ifndef SBX_ALIASES_H
#define SBX_ALIASES_H

#include <sys/stat.h>

/* Notes (nlink > 1, not a directory) or forgets (otherwise) mount_path as shown with st. */
void sbx_aliases_note(const char *mount_path, const struct stat *st);
/* mount_path's file changed (or lost or gained a name): invalidates its other names. */
void sbx_aliases_changed(const char *mount_path);
/* mount_path is gone (unlink, or renamed away): forgets it after sbx_aliases_changed. */
void sbx_aliases_forget(const char *mount_path);
/* Installs the invalidation callback (one mount per process). */
void sbx_aliases_set_callback(void (*cb)(void *ctx, const char *mount_path), void *ctx);

#endif
