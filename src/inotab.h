/*
 * inotab — inode numbers and link counts for fs/ names of providers that
 * report none (e2b, daytona: their APIs send neither st_ino nor nlink).
 *
 * Without it a name's st_ino is a hash of its mount path, so a file renamed
 * through the mount changes number and two hard links are two files to
 * rsync -H, tar, du and find -samefile. The table remembers only what the
 * mount itself did, per lease: a renamed name keeps the number it had (a
 * directory's too, and so every name below it), a name linked through the
 * mount shares its source's number, and each such number counts the names
 * the mount gave it (link +1, unlink -1), shown as st_nlink when above the
 * provider's. A name the table never saw keeps the path hash.
 *
 * Contract:
 * - It only ever changes st_ino and st_nlink of a name that exists; it
 *   never decides existence (no EEXIST or ENOENT comes from it).
 * - Two live names get the same number only if the mount linked them: a
 *   name renamed or unlinked away from keeps a fresh number of its own, so
 *   a file created there later shares nothing with the moved one.
 * - Runs in the sandbox change names behind the mount's back: a lookup that
 *   answers ENOENT (sbx_inotab_unlink from fuse_ops) or a directory where a
 *   linked file was drops that name's share; past that, what the table
 *   holds stays until the mount renames, links or unlinks the name again.
 * - Bounded (SBX_INOTAB_MAX names by default): past the bound the oldest
 *   entries go, and their names fall back to path-derived numbers.
 * - A table that never saw a name without a number (a provider that
 *   reports its own, local) keeps nothing: renames and links are no-ops.
 * - Thread-safe: one mutex per table. Paths are mount paths
 *   ("/NAME/fs/tmp/a"); the numbers have the top bit set, far from any
 *   real inode number. Knows nothing of FUSE or providers.
 */
#ifndef SBX_INOTAB_H
#define SBX_INOTAB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define SBX_INOTAB_MAX 65536

struct sbx_inotab;

/* A table holding at most max names (0: SBX_INOTAB_MAX). Never NULL. */
struct sbx_inotab *sbx_inotab_new(size_t max);
/* Frees t; NULL is a no-op. */
void sbx_inotab_free(struct sbx_inotab *t);

/* The number of path with no table: FNV-1a of the mount path, top bit set. */
uint64_t sbx_inotab_hash(const char *path);

/*
 * Fills st for path as the provider answered it: st_ino (only when the
 * provider said 0: t may be NULL, then the path hash) and st_nlink (a
 * non-directory's count of names the mount linked, when above st_nlink).
 */
void sbx_inotab_stat(struct sbx_inotab *t, const char *path, struct stat *st);

/* from was renamed to to (exchange: the two swapped); their subtrees follow. */
void sbx_inotab_rename(struct sbx_inotab *t, const char *from, const char *to, int exchange);
/* to was made a hard link of from: it shares from's number, both count one name more. */
void sbx_inotab_link(struct sbx_inotab *t, const char *from, const char *to);
/* path lost its name (unlink, rmdir, or a lookup found it gone): its share drops. */
void sbx_inotab_unlink(struct sbx_inotab *t, const char *path);

/*
 * The other names the mount linked to path's file (mount paths, each and
 * *out to free; *out NULL when none): those whose cached attributes a
 * change through path must change too. Returns how many.
 */
size_t sbx_inotab_others(struct sbx_inotab *t, const char *path, char ***out);

/* Names held (for tests and the bound). */
size_t sbx_inotab_count(struct sbx_inotab *t);

#endif
