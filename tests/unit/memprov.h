/*
 * memprov — an in-memory sandbox provider for tests (in the spirit of
 * libgit2's mempack): its files live in a hash table, every op counts its
 * calls, and any op can be made to fail with a chosen errno for the next N
 * calls. It implements the file slots, stat/list (with full attributes:
 * SBX_CAP_LIST_ATTRS unless the caps are changed) and pause/unpause; it
 * runs nothing. Each memprov carries its own copy of the ops table, so a
 * test can clear a slot (NULL: "not supported") or change the caps.
 *
 * Not a filesystem: no permission checks, no hard links (link copies),
 * mtimes come from a logical clock so every change is visible.
 */
#ifndef SBX_MEMPROV_H
#define SBX_MEMPROV_H

#include <stddef.h>

#include "provider.h"

enum memprov_op {
	MP_STAT,
	MP_LIST,
	MP_READ,
	MP_WRITE,
	MP_TRUNCATE,
	MP_MKDIR,
	MP_UNLINK,
	MP_RMDIR,
	MP_RENAME,
	MP_CHMOD,
	MP_CHOWN,
	MP_UTIMENS,
	MP_SYMLINK,
	MP_READLINK,
	MP_LINK,
	MP_MKNOD,
	MP_STATFS,
	MP_SYNC,
	MP_PAUSE,
	MP_UNPAUSE,
	MP_NOPS
};

struct memprov {
	struct sbx_instance inst; /* first: the core sees this */
	struct sbx_provider prov; /* this fake's own ops table */
	void *priv;
};

/* A fresh provider with an empty root directory "/". */
struct memprov *memprov_new(void);
void memprov_free(struct memprov *mp);
/* The memprov behind an instance. */
struct memprov *memprov_of(struct sbx_instance *inst);

/* Calls of op since the last reset; the sum of all file ops (not pause/unpause). */
int memprov_calls(struct memprov *mp, enum memprov_op op);
int memprov_file_calls(struct memprov *mp);
void memprov_reset_calls(struct memprov *mp);
/* The next `times` calls of op fail with -err (times < 0: until cleared; err 0 clears). */
void memprov_fail(struct memprov *mp, enum memprov_op op, int err, int times);

/* Puts a file (parents created as needed), bumping its mtime; mode 0: 0644. */
void memprov_put(struct memprov *mp, const char *path, const void *data, size_t len, mode_t mode);
void memprov_mkdirs(struct memprov *mp, const char *path);
/* A copy of the content (caller frees; *len set), or NULL if no such file. */
char *memprov_get(struct memprov *mp, const char *path, size_t *len);
bool memprov_exists(struct memprov *mp, const char *path);
/* The mode (with type) of path, 0 if none. */
mode_t memprov_mode(struct memprov *mp, const char *path);

#endif
