/*
 * meta — the queue of metadata changes envd has no RPC for (chmod, chown,
 * utimens, symlink, truncate, link, mknod) and its rendering into shell
 * scripts, so that a `tar x` or `rsync -a` costs one command in the
 * sandbox per batch, not one per file per attribute.
 *
 * Pure: strings in, shell text out; every path and target is quoted with
 * sbx_buf_add_shquoted() and preceded by `--`. It does not run anything
 * and has no lock (the instance that owns a queue locks it).
 */
#ifndef SBX_E2B_META_H
#define SBX_E2B_META_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "base/buf.h"
#include "provider.h"

/* One script stays well under Linux's 128 KiB limit on one argv string. */
#define E2B_META_SCRIPT_MAX (96u << 10)

enum e2b_meta_kind {
	E2B_META_CHMOD,
	E2B_META_CHOWN,
	E2B_META_UTIMENS,
	E2B_META_SYMLINK,
	E2B_META_TRUNCATE,
	E2B_META_LINK,
	E2B_META_MKNOD,
};

struct e2b_meta_op {
	enum e2b_meta_kind kind;
	char *path;  /* the path changed (owned) */
	char *arg;   /* symlink: the target; link: the existing file (owned) */
	mode_t mode; /* chmod, mknod (with the type bits) */
	uid_t uid;   /* chown: (uid_t)-1 = keep */
	gid_t gid;
	/*
	 * chown: of a new entry, to the caller who made it (e2b_own_new):
	 * gid only where its directory is not setgid (there the entry has
	 * the directory's group already, as on a local disk).
	 */
	bool creator;
	struct timespec ts[2]; /* utimens: atime, mtime; UTIME_NOW / UTIME_OMIT */
	off_t size;	       /* truncate */
	dev_t dev;	       /* mknod */
};

struct e2b_meta_queue {
	struct e2b_meta_op *ops;
	size_t n, alloc;
};

void e2b_meta_init(struct e2b_meta_queue *q);
/* Frees every op and the array; q is empty and reusable afterwards. */
void e2b_meta_clear(struct e2b_meta_queue *q);
/* Appends a copy of op (path and arg are duplicated). */
void e2b_meta_add(struct e2b_meta_queue *q, const struct e2b_meta_op *op);
/* Moves all ops of src to the end of dst (src becomes empty). */
void e2b_meta_take(struct e2b_meta_queue *dst, struct e2b_meta_queue *src);
/*
 * Whether applying q could change what a read of path shows: an op on
 * path itself, naming it (link source, symlink target path), or on one of
 * its direct children (a listing shows their attributes). With subtree,
 * also any op below path (for rename and remove of a directory).
 */
bool e2b_meta_touches(const struct e2b_meta_queue *q, const char *path, bool subtree);
/*
 * Whether an op still waiting would create the entry at path (symlink,
 * link, mknod), or with children, any entry directly inside path too:
 * then a remote read cannot show it and the queue must be applied first.
 */
bool e2b_meta_creates(const struct e2b_meta_queue *q, const char *path, bool children);
/*
 * Whether a chmod setting the setgid bit of path's directory is waiting:
 * an entry envd makes there (upload, MakeDir) before it is applied would
 * miss the group (and a directory the bit) it hands down.
 */
bool e2b_meta_setgid_dir(const struct e2b_meta_queue *q, const char *path);
/* The target of the last symlink op making path, or NULL (borrowed from q). */
const char *e2b_meta_link_target(const struct e2b_meta_queue *q, const char *path);
/* Whether a truncate of path is waiting (a read of its content must wait). */
bool e2b_meta_truncates(const struct e2b_meta_queue *q, const char *path);
/* Drops the waiting truncates of path (its whole content is being replaced). */
void e2b_meta_drop_truncates(struct e2b_meta_queue *q, const char *path);
/*
 * Applies the waiting attribute ops on path (chmod, chown, utimens,
 * truncate: all absolute, so applying them twice is harmless) to st, so
 * that a stat or list answered before the flush already shows them.
 */
void e2b_meta_overlay(const struct e2b_meta_queue *q, const char *path, struct sbx_stat *st);

/*
 * Renders ops [first, n) into b as shell text, one command per op (runs
 * of the same chmod/chown merged into one command), each followed by
 * sbx_rmeta_add_mark's `|| sbx_f I-J` (ops [I, J) were that
 * command; the script starts with sbx_rmeta_add_marker, to stderr) so
 * the caller learns which ops failed. Stops before the
 * script would pass max_bytes (but always renders at least one op).
 * Returns the index after the last op rendered. Invalid ops (mknod of an
 * unknown type) render as `false` and their mark; a socket is bound by
 * sbx_rmeta_add_mksock's command.
 *
 * The script is meant to run as root (chown, and chmod of files another
 * user made, need it); the entries it creates (symlink, fifo, device,
 * socket, empty file) are then given to E2B_META_OWNER, as envd's own uploads are.
 */
#define E2B_META_OWNER "user"

/*
 * Puts alike chmod, chown and utimens ops (same mode, owner, times) next
 * to the first of them, so that each kind and value is one command for
 * many files (tar x leaves a chmod and a utimens per file). An op moves
 * up only past ops whose order with it does not matter: of unrelated
 * paths (neither is the other nor below it), or attribute changes of
 * other paths, or, of its own path, times past mode and owner.
 */
void e2b_meta_gather(struct e2b_meta_queue *q);
size_t e2b_meta_render(const struct e2b_meta_queue *q, size_t first, size_t max_bytes,
		       struct sbx_buf *b);
/* A short description of op for error text ("chmod /a/b"). */
const char *e2b_meta_name(enum e2b_meta_kind kind);

#endif
