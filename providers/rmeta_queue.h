/*
 * rmeta_queue — the queue of metadata changes the remote providers' APIs
 * have no call for (chmod, chown, utimens, symlink, truncate, link, mknod:
 * rmeta.h keeps their failures) or no call for many at once (unlink and
 * rmdir: `rm -rf` of a tree is a few commands, not a request per entry), its questions (does an op
 * touch, create or truncate a path), the overlay of queued attributes on a stat, and its rendering
 * into shell scripts, so that a `tar x` or `rsync -a` costs one command in the sandbox per batch,
 * not one per file per attribute.
 *
 * Pure: strings in, shell text out; every path and target is quoted with
 * sbx_buf_add_shquoted() and preceded by `--`. It does not run anything
 * and has no lock (the instance that owns a queue locks it).
 */
#ifndef SBX_RMETA_QUEUE_H
#define SBX_RMETA_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "base/buf.h"
#include "provider.h"
#include "rmeta.h"

/* One script stays well under Linux's 128 KiB limit on one argv string. */
#define SBX_RMQ_SCRIPT_MAX (96u << 10)

enum sbx_rmq_kind {
	SBX_RMQ_CHMOD,
	SBX_RMQ_CHOWN,
	SBX_RMQ_UTIMENS,
	SBX_RMQ_SYMLINK,
	SBX_RMQ_TRUNCATE,
	SBX_RMQ_LINK,
	SBX_RMQ_MKNOD,
	/*
	 * Removals, not recursive: `rm -f --` (refuses a directory, a name
	 * already gone is no failure) and `rmdir --` (refuses a non-empty
	 * directory). Queued only where the call's own checks are known to
	 * hold (the kernel's type check for unlink; a directory the mount
	 * knows empty for rmdir): see sbx_rmq_fate and the providers.
	 */
	SBX_RMQ_UNLINK,
	SBX_RMQ_RMDIR,
	/*
	 * A directory whose attributes the core made up (provider.h:
	 * mkdir_new): `mkdir -m MODE`, or where an upload into it or a
	 * mkdir below it made it first (the services' MkdirAll: the
	 * owner of uploads, mode SBX_RMQ_MKDIR_ALL_MODE), `chmod MODE`.
	 * What else reaches the sandbox below it waits for it
	 * (sbx_rmq_needs).
	 */
	SBX_RMQ_MKDIR,
};
#define SBX_RMQ_MKDIR_ALL_MODE 0755

struct sbx_rmq_op {
	enum sbx_rmq_kind kind;
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
	/*
	 * Only root may do it (utimens or chown of a symbolic link the
	 * permissions API cannot reach): run as the user, the command falls
	 * back to `sudo -n` (device nodes and hard links always do).
	 */
	bool root;
	bool soft; /* its failure is no failure (a link's chown as the user: see daytona) */
	/* chmod: the mode the file has already (the service's upload made
	 * it): overlaid like any chmod, but asks for no change of its own */
	bool known;
	struct timespec ts[2]; /* utimens: atime, mtime; UTIME_NOW / UTIME_OMIT */
	off_t size;	       /* truncate */
	dev_t dev;	       /* mknod */
};

struct sbx_rmq_queue {
	struct sbx_rmq_op *ops;
	size_t n, alloc;
};

void sbx_rmq_init(struct sbx_rmq_queue *q);
/* Frees every op and the array; q is empty and reusable afterwards. */
void sbx_rmq_clear(struct sbx_rmq_queue *q);
/* Appends a copy of op (path and arg are duplicated). */
void sbx_rmq_add(struct sbx_rmq_queue *q, const struct sbx_rmq_op *op);
/*
 * As sbx_rmq_add, except that a utimens of a path whose last op that it
 * must stay after (within the last SBX_RMQ_MERGE_LOOKBACK ops) is a
 * utimens of that path with the same flags is merged into that op (its
 * times, but for those it omits, replace the older ones): one command,
 * not one per setting (a directory's times laid again after each
 * upload into it, tar's and rsync's time of a file set twice). Returns
 * whether it merged.
 */
#define SBX_RMQ_MERGE_LOOKBACK 256
bool sbx_rmq_add_merged(struct sbx_rmq_queue *q, const struct sbx_rmq_op *op);
/* Moves all ops of src to the end of dst (src becomes empty). */
void sbx_rmq_take(struct sbx_rmq_queue *dst, struct sbx_rmq_queue *src);
/* a is path, or below it (deep), or an entry directly in it (!deep); a may be NULL. */
bool sbx_rmq_under(const char *a, const char *path, bool deep);
/*
 * Whether applying q could change what a read of path shows: an op on
 * path itself, naming it (link source, symlink target path), or on one of
 * its direct children (a listing shows their attributes). With subtree,
 * also any op below path (for rename and remove of a directory).
 */
bool sbx_rmq_touches(const struct sbx_rmq_queue *q, const char *path, bool subtree);
/*
 * Whether every op of q that touches path or below it (as sbx_rmq_touches
 * with subtree) is a chmod, chown or utimens of path itself: a rename of
 * path need not apply them first, they can follow it (sbx_rmq_take_path,
 * then sbx_rmq_repath). True when no op touches path.
 */
bool sbx_rmq_only_attrs(const struct sbx_rmq_queue *q, const char *path);
/* Moves the ops of q whose path is path to the end of dst, in order; returns how many. */
size_t sbx_rmq_take_path(struct sbx_rmq_queue *dst, struct sbx_rmq_queue *q, const char *path);
/* Sets the path of every op of q to path. */
void sbx_rmq_repath(struct sbx_rmq_queue *q, const char *path);
/* Sets the path of the ops of q whose path is from to to, where they are; returns how many. */
size_t sbx_rmq_rename_path(struct sbx_rmq_queue *q, const char *from, const char *to);
/* Whether ops of this kind make the entry at their path (symlink, link, mknod). */
bool sbx_rmq_creates_kind(enum sbx_rmq_kind k);
/*
 * Whether an op still waiting would create the entry at path (symlink,
 * link, mknod, mkdir), or with children, any entry directly inside path too:
 * then a remote read cannot show it and the queue must be applied first.
 */
bool sbx_rmq_creates(const struct sbx_rmq_queue *q, const char *path, bool children);
/*
 * Whether a chmod setting the setgid bit of path's directory is waiting:
 * an entry envd makes there (upload, MakeDir) before it is applied would
 * miss the group (and a directory the bit) it hands down.
 */
bool sbx_rmq_setgid_dir(const struct sbx_rmq_queue *q, const char *path);
/* Whether k is a removal (unlink, rmdir). */
bool sbx_rmq_removal(enum sbx_rmq_kind k);
/*
 * What q, once applied, leaves at path: a removal of path or of a
 * directory above it that no op creating path follows (GONE: a stat is
 * ENOENT, a listing of its directory leaves it out, with no request),
 * an op creating path after any such removal (MADE), or neither
 * (UNTOUCHED). A provider with an in-flight queue asks the waiting one
 * first, then, if UNTOUCHED, the in-flight one.
 */
enum sbx_rmq_fate { SBX_RMQ_UNTOUCHED, SBX_RMQ_MADE, SBX_RMQ_GONE };
enum sbx_rmq_fate sbx_rmq_fate(const struct sbx_rmq_queue *q, const char *path);
/*
 * Which waiting ops an operation on a path cannot do without (the flush
 * before a dependent op): the remote read or change would not see them.
 */
enum sbx_rmq_need {
	SBX_RMQ_NEED_ALL,   /* all of them (sync, before a run or a pause); path unused */
	SBX_RMQ_NEED_TOUCH, /* any op on path or below it (rename, remove) */
	SBX_RMQ_NEED_NEAR,  /* any op on path or on an entry in it (touches, !subtree) */
	SBX_RMQ_NEED_ENTRY, /* ops creating or removing path, removals above it (stat, readlink) */
	SBX_RMQ_NEED_CHILDREN, /* ENTRY, plus ops creating or removing an entry in path (list) */
	/* CHILDREN but for removals of entries in path: a list that leaves them
	 * out itself (sbx_rmq_fate of each name), so `rm -rf` lists no flush */
	SBX_RMQ_NEED_LISTING,
	SBX_RMQ_NEED_CONTENT, /* ENTRY, plus a truncate of path (read, write) */
	SBX_RMQ_NEED_NEW,     /* CONTENT, plus a setgid chmod of its directory (write, mkdir) */
	SBX_RMQ_NEED_PUT,     /* NEAR, for an upload of a new file (daytona) */
};
/*
 * Whether q holds an op that an operation on path with that need must
 * wait for. A queued mkdir of a directory above path counts for every
 * need but NEW and PUT: an upload or a mkdir of path makes the missing
 * directories above it as the queued one would (the services' MkdirAll),
 * anything else needs them there.
 */
bool sbx_rmq_needs(const struct sbx_rmq_queue *q, const char *path, enum sbx_rmq_need need);
/* The target of the last symlink op making path, or NULL (borrowed from q). */
const char *sbx_rmq_link_target(const struct sbx_rmq_queue *q, const char *path);
/* Whether a truncate of path is waiting (a read of its content must wait). */
bool sbx_rmq_truncates(const struct sbx_rmq_queue *q, const char *path);
/* Drops the waiting truncates of path (its whole content is being replaced). */
void sbx_rmq_drop_truncates(struct sbx_rmq_queue *q, const char *path);
/*
 * Applies the waiting attribute ops on path (chmod, chown, utimens,
 * truncate: all absolute, so applying them twice is harmless) to st, so
 * that a stat or list answered before the flush already shows them.
 */
void sbx_rmq_overlay(const struct sbx_rmq_queue *q, const char *path, struct sbx_stat *st);

/*
 * Puts alike chmod, chown and utimens ops (same mode, owner, times) next
 * to the first of them, so that each kind and value is one command for
 * many files (tar x leaves a chmod and a utimens per file). An op moves
 * up only past ops whose order with it does not matter: of unrelated
 * paths (neither is the other nor below it), or attribute changes of
 * other paths, or, of its own path, times past mode and owner.
 */
void sbx_rmq_gather(struct sbx_rmq_queue *q);

/*
 * How a provider's scripts run: the rendering slots of the layer.
 *
 * new_owner set (e2b: "user"): the script runs as root (chown, and chmod
 * of files another user made, need it), and the entries it creates
 * (symlink, fifo, device, socket, empty file) are given to new_owner, as
 * the service's own uploads are. NULL (daytona): it runs as the
 * sandbox's user, and what only root may do (device nodes, hard links to
 * what the user does not own, ops marked root) is tried as the user, then
 * through `sudo -n` (sbx_rmq_add_as_root_else). Removals run as the
 * service's own removal would: as root (envd's Remove), or as the user,
 * then through `sudo -n` (daytona's DELETE is the daemon's, root's).
 */
struct sbx_rmq_style {
	const char *new_owner;
	/* symlink, link: refuse an existing name first with "P: File exists"
	 * (`ln` onto a directory would make the link inside it) */
	bool check_free;
	/* alike chmod/chown/utimens ops next to each other (sbx_rmq_gather)
	 * are one command (else each op is its own) */
	bool merge;
	/* utimens falls back to `sudo -n` as root-only ops do (as the user, a
	 * file a chown already gave away refuses its times) */
	bool times_root_else;
	/* alike removals next to each other are one command, even without
	 * merge (daytona: its retry after a borrow concerns no removal) */
	bool merge_removals;
};

/* The e2b style: as root, new entries to "user", names checked free, merged commands. */
extern const struct sbx_rmq_style sbx_rmq_style_root;

/*
 * Renders the command of op i (and, with st->merge, of the alike ops
 * after it: [i, *next)) into b, without its mark; room bounds how far
 * a merged command grows (b->len < room). Invalid ops (mknod of an
 * unknown type) render as `false`; a socket is bound by
 * sbx_rmeta_add_mksock's command.
 */
void sbx_rmq_render_op(const struct sbx_rmq_queue *q, size_t i, const struct sbx_rmq_style *st,
		       size_t room, struct sbx_buf *b, size_t *next);
/*
 * Renders ops [first, n) into b as a script: sbx_rmeta_add_marker (to
 * stderr), then each command followed by sbx_rmeta_add_mark's
 * `|| sbx_f I-J` (ops [I, J) were that command), so that
 * sbx_rmeta_attribute learns which ops failed. Stops before the script
 * would pass max_bytes (but always renders at least one op). Returns the
 * index after the last op rendered.
 */
size_t sbx_rmq_render(const struct sbx_rmq_queue *q, size_t first, const struct sbx_rmq_style *st,
		      size_t max_bytes, struct sbx_buf *b);
/*
 * `{ m=$(CMD 2>&1) || sudo -n CMD 2>/dev/null || { printf '%s\n' "$m"; false; }; }`:
 * CMD as the sandbox's user, else as root where it may `sudo -n`, with
 * the first try's message (EPERM) when both are refused.
 */
void sbx_rmq_add_as_root_else(struct sbx_buf *b, const char *cmd);
/*
 * The op of a utimens(path, ts) call (ts NULL: now): UTIME_NOW becomes
 * the time of the call, not of the flush.
 */
struct sbx_rmq_op sbx_rmq_utimens_op(const char *path, const struct timespec ts[2]);
/* A short description of op for error text ("chmod /a/b"). */
const char *sbx_rmq_name(enum sbx_rmq_kind kind);
/* sbx_rmeta_op_fn over a queue (ctx: the struct sbx_rmq_queue). */
void sbx_rmq_op_of(void *ctx, size_t i, const char **name, const char **path);

/*
 * What running the script of ops [first, end) of q through the provider's
 * run slot did, recorded against the ops' paths (rmeta.h), the same way
 * for every provider:
 *  - rc != 0: the script did not run (the run's error e): each op failed
 *    with EIO and e's message (its change was not made; why is in the
 *    message and the lease's `error`);
 *  - else the marks in out (the stream that carries them) name the ops
 *    that failed, each with its own message (sbx_rmeta_attribute);
 *  - a script that ended non-zero (code) without a mark failed as a
 *    whole, unless `explained` (the caller knows why: daytona's borrow
 *    requests): each op with EIO "the script ended CODE: FIRST LINE".
 * Returns how many ops failed.
 */
size_t sbx_rmq_settle(const struct sbx_rmq_queue *q, size_t first, size_t end,
		      struct sbx_rmeta_fails *f, struct sbx_instance *inst, int rc,
		      const struct sbx_error *e, const char *out, int code, bool explained);

#endif
