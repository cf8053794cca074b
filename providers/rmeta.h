/*
 * rmeta — the metadata layer the remote providers (e2b, daytona) share.
 *
 * Remote APIs lack chmod, chown, utimens, symlink, link, mknod and
 * truncate; the providers queue those changes and apply them later as one
 * shell script per batch. A queued change returns 0 at once, so its
 * failure cannot reach the call that asked for it. This module keeps such
 * failures against the path they concern (struct sbx_rmeta_fails):
 *  - each is reported once to the lease (sbx_instance_report: the
 *    lease's `error` file) when it happens;
 *  - the next access of that path through the provider, or an fsync of
 *    it (the take_failure slot), fails with it, once;
 *  - no other path's call fails because of it (an fsync of another file,
 *    a rename, a run).
 *
 * It also reads what both services send about a file: Go's
 * FileMode.String() (sbx_rmeta_gomode) and owner names (sbx_rmeta_ids).
 *
 * Thread-safe (its own leaf locks); no network or FUSE of its own (the
 * statfs and id caches run a command through the provider's callback).
 */
#ifndef SBX_RMETA_H
#define SBX_RMETA_H

#include <pthread.h>
#include <stddef.h>
#include <sys/statvfs.h>

#include "base/buf.h"
#include "provider.h"

/* Failures kept at most; the oldest goes first (it was reported already). */
#define SBX_RMETA_FAILS_MAX 256

struct sbx_rmeta_fail {
	char *path;
	struct sbx_error e;
};

struct sbx_rmeta_fails {
	pthread_mutex_t lock;
	struct sbx_rmeta_fail *v;
	size_t n, alloc;
};

void sbx_rmeta_fails_init(struct sbx_rmeta_fails *f);
void sbx_rmeta_fails_destroy(struct sbx_rmeta_fails *f);
/*
 * Records that the change `op` (e.g. "mknod") of path, applied by a
 * command in the sandbox, failed with e (its errno and message; EIO when
 * it has none): "OP PATH failed in the sandbox: MESSAGE" (no "queued":
 * some such changes are applied by the call that asked, e.g. a daytona
 * device node). It replaces an older failure of path, and is reported to
 * inst's lease when report is true (false: one report covers several
 * paths, the caller made it).
 */
void sbx_rmeta_fail(struct sbx_rmeta_fails *f, struct sbx_instance *inst, const char *op,
		    const char *path, const struct sbx_error *e, bool report);
/* Takes the failure recorded against path: -errno with err filled, or 0. */
int sbx_rmeta_fail_take(struct sbx_rmeta_fails *f, const char *path, struct sbx_error *err);
/* Whether a failure is recorded against path (left for the next call on it). */
bool sbx_rmeta_fail_has(struct sbx_rmeta_fails *f, const char *path);
/* Forgets the failures of path and of everything below it (it was removed or renamed). */
void sbx_rmeta_fail_forget(struct sbx_rmeta_fails *f, const char *path);
/* Forgets every failure (the sandbox is gone). */
void sbx_rmeta_fail_clear(struct sbx_rmeta_fails *f);

/*
 * Batch scripts: a script starts with sbx_rmeta_add_marker's shell
 * function, and after the command of ops [I, J) it renders
 * sbx_rmeta_add_mark's ` || sbx_f I-J` (` || sbx_f I` for one op), which
 * prints `@sbxfs-failed@I-J` on the stream that carries the commands'
 * messages: so the output tells which ops failed, each after its message.
 */
#define SBX_RMETA_FAILED "@sbxfs-failed@"
#define SBX_RMETA_MARK_FN "sbx_f"
/* Appends the definition of the mark function (printing to stderr when to_stderr). */
void sbx_rmeta_add_marker(struct sbx_buf *b, bool to_stderr);
/* Appends ` || sbx_f I-J` and a newline. */
void sbx_rmeta_add_mark(struct sbx_buf *b, size_t i, size_t j);

/* The list slot of a provider with list_tree: its list_tree to depth 1. */
int sbx_rmeta_list(struct sbx_instance *inst, const char *path, sbx_list_fn fn, void *ctx,
		   struct sbx_error *err);

/* The name ("chmod") and path of op i of a batch, for the failure records. */
typedef void (*sbx_rmeta_op_fn)(void *ctx, size_t i, const char **name, const char **path);

/*
 * The errno a message names ("mknod: 'c': Operation not permitted":
 * EPERM; Go's lower-case "not a directory" too), by the C library's own
 * texts, which the sandbox's tools print; EIO when it names none.
 */
int sbx_rmeta_msg_errno(const char *msg, size_t len);
/*
 * Records the failures a batch script's output (out: the stream with the
 * marks) says ops [first, end) had: for each mark, the message is the last
 * other line before it; of a command that did several ops (a chmod or an
 * `rm -f` of many paths), those whose path a line since the previous mark
 * names failed, each with the last such line (one report each), or all
 * of them when none is named (one report), each with the errno its
 * message names (the C library's text: "Operation not permitted" EPERM
 * ...; else EIO). Returns how many ops failed.
 */
size_t sbx_rmeta_attribute(struct sbx_rmeta_fails *f, struct sbx_instance *inst, const char *out,
			   size_t first, size_t end, sbx_rmeta_op_fn op_of, void *ctx);
/* Records e against every op of [first, end) (their script did not run); one report. */
void sbx_rmeta_fail_all(struct sbx_rmeta_fails *f, struct sbx_instance *inst, size_t first,
			size_t end, sbx_rmeta_op_fn op_of, void *ctx, const struct sbx_error *e);

/*
 * statfs of a remote sandbox: one answer for the whole sandbox (its root
 * filesystem's), from `df -kP /` and `df -iP /` (sbx_df_parse), kept for
 * SBX_RMETA_DF_TTL_MS so that `df` and tools that statfs a lot (cp, rsync)
 * cost one command now and then. Forgotten on a change that may move it.
 */
#define SBX_RMETA_DF_TTL_MS 30000LL

struct sbx_rmeta_df {
	pthread_mutex_t lock;
	struct statvfs st;
	long long at_ms; /* 0: empty */
};

/* Runs cmd in the sandbox, its stdout into out (exit status ignored): 0 or -errno. */
typedef int (*sbx_rmeta_run_fn)(void *ctx, const char *cmd, struct sbx_buf *out,
				struct sbx_error *err);

void sbx_rmeta_df_init(struct sbx_rmeta_df *d);
void sbx_rmeta_df_forget(struct sbx_rmeta_df *d);
int sbx_rmeta_statfs(struct sbx_rmeta_df *d, sbx_rmeta_run_fn run, void *ctx, struct statvfs *st,
		     struct sbx_error *err);

/*
 * The readlinks slot's command: every symbolic link directly in dir with
 * its text, by one command through run (the sandbox's shell: dash, bash,
 * busybox), as lengths and bytes so any name or text comes through (a
 * newline in either). fn once per link. 0, or -errno when dir cannot be
 * listed or the answer does not parse (the caller reads links one by one).
 */
int sbx_rmeta_readlinks(sbx_rmeta_run_fn run, void *ctx, const char *dir, sbx_link_fn fn,
			void *fctx, struct sbx_error *err);

/*
 * Go's FileMode.String(), which both services send ("-rw-r--r--",
 * "drwxr-xr-x", "Lrwxrwxrwx", "dtrwxrwxrwx", "prw-r-----", "Dcrw-rw-rw-",
 * "Drw-rw----" (block), "Srwxr-xr-x", "urwxr-xr-x" ...), to st_mode: the
 * type (no type letter: a regular file; '?' irregular: unknown, -EINVAL)
 * and the permission, setuid, setgid and sticky bits. 0 or -EINVAL.
 */
int sbx_rmeta_gomode(const char *s, mode_t *out);

/*
 * Owner and group names to ids, as the sandbox maps them: its own
 * /etc/passwd and /etc/group, read by one command (SBX_RMETA_IDS_CMD)
 * at the first name met, and again when a name is not in them, at most
 * once per SBX_RMETA_IDS_RETRY_MS. A number is taken as it is, and
 * "root" is 0 without a read; a name the sandbox does not know either is
 * 65534 (nobody), as NFS does. sbx_rmeta_ids_prefetch starts the first
 * read in a thread of its own, so that it overlaps the first lookups
 * instead of following one (a cold `cat` on E2B waited a round trip
 * and a process start for it); a lookup that needs the tables meanwhile
 * waits for that read instead of making its own.
 */
#define SBX_RMETA_IDS_RETRY_MS 5000LL
#define SBX_RMETA_IDS_SEP "@sbxfs-groups@"
#define SBX_RMETA_IDS_CMD                                                                          \
	"cat /etc/passwd 2>/dev/null; echo; echo " SBX_RMETA_IDS_SEP "; cat /etc/group "           \
	"2>/dev/null"

struct sbx_rmeta_name {
	char *name;
	unsigned id;
};

struct sbx_rmeta_ids {
	pthread_mutex_t lock, load;  /* load: one reader of the tables at a time */
	struct sbx_rmeta_name *v[2]; /* [0] users, [1] groups */
	size_t n[2];
	long long at_ms; /* last read (0: never) */
	sbx_rmeta_run_fn run;
	void *ctx;
	pthread_t pre; /* the prefetch (pre_on: started, not joined; under lock) */
	bool pre_on, pre_done;
};

void sbx_rmeta_ids_init(struct sbx_rmeta_ids *ids, sbx_rmeta_run_fn run, void *ctx);
/* Waits for a prefetch still running; then destroys. */
void sbx_rmeta_ids_destroy(struct sbx_rmeta_ids *ids);
/* Starts the first read of the tables in the background (once per ids). */
void sbx_rmeta_ids_prefetch(struct sbx_rmeta_ids *ids);
/* Waits for a prefetch still running (before what its command uses goes). */
void sbx_rmeta_ids_wait(struct sbx_rmeta_ids *ids);
/* Replaces the tables with those of text (SBX_RMETA_IDS_CMD's output). */
void sbx_rmeta_ids_parse(struct sbx_rmeta_ids *ids, const char *text);
/* The id of user (group when group) s; ids may be NULL (numbers and "root" only). */
unsigned sbx_rmeta_id(struct sbx_rmeta_ids *ids, const char *s, bool group);

/*
 * Unix sockets (mknod S_IFSOCK, which a bind() on the mount arrives as).
 * No remote API makes one, and no shell tool either, but a socket file
 * stays after the process that bound it exits: sbx_rmeta_add_mksock
 * renders a command that binds one at path with python3, else perl
 * (perl-base has Socket), and sets its mode to perm. Its failures print
 * `mknod 'PATH': MESSAGE` on stderr (the C library's text, so that
 * sbx_rmeta_attribute finds the errno; a taken name says EEXIST as mknod
 * would, not bind's EADDRINUSE), and without either interpreter
 * "... Operation not supported" (EOPNOTSUPP). A name too long for
 * sun_path is bound under a short name in the same directory and linked.
 */
void sbx_rmeta_add_mksock(struct sbx_buf *b, const char *path, mode_t perm);

/*
 * Whether the sandbox can bind a socket (sbx_rmeta_add_mksock): asked
 * once (SBX_RMETA_SOCK_PROBE) and kept in *state (0 not known yet, 1 yes,
 * -1 no; start it at 0). 0 when it can; -EOPNOTSUPP with the reason in
 * err, reported to inst's lease (its `error` file), when it cannot; the run's error when
 * the question could not be asked (not kept: asked again next time).
 */
#define SBX_RMETA_SOCK_PROBE                                                                       \
	"{ command -v python3 || command -v perl; } >/dev/null 2>&1 && echo sbxfs-sock-yes"
int sbx_rmeta_sock_check(int *state, struct sbx_instance *inst, sbx_rmeta_run_fn run, void *ctx,
			 const char *path, struct sbx_error *err);

/*
 * Paths being put in place. A provider whose replace is several remote
 * calls (daytona: move the old file aside, move the new one in) holds
 * the destination across them, so that two of its own uploads or
 * renames to one name cannot interleave (the second one's move landing
 * in the first one's gap made it fail with EEXIST).
 */
struct sbx_rmeta_gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char **paths;
	size_t n, cap;
};

void sbx_rmeta_gate_init(struct sbx_rmeta_gate *g);
void sbx_rmeta_gate_destroy(struct sbx_rmeta_gate *g);
/* Waits until neither a nor b (either may be NULL) is held, then holds both. */
void sbx_rmeta_gate_enter(struct sbx_rmeta_gate *g, const char *a, const char *b);
void sbx_rmeta_gate_leave(struct sbx_rmeta_gate *g, const char *a, const char *b);

/*
 * RENAME_EXCHANGE where the service can only move a name to a free one
 * (e2b's Move, daytona's /files/move): three moves, a -> tmp, b -> a,
 * tmp -> b, where tmp is an unused hidden name beside a that the
 * provider's listings skip. Not atomic: between the moves a reader in the
 * sandbox finds a missing, then b missing. A failed move is undone (the
 * moves done so far, backwards), so a failure leaves both names as they
 * were; when an undo fails too, err says where a's entry was left.
 * A missing a or b fails the first or second move (ENOENT, as exchange
 * says). On success the failures f recorded against a and b (and below
 * them) are forgotten, as a rename's are: they concern the other entry
 * now. 0 or the failed move's -errno.
 */
typedef int (*sbx_rmeta_move_fn)(void *ctx, const char *from, const char *to,
				 struct sbx_error *err);
int sbx_rmeta_exchange(sbx_rmeta_move_fn move, void *ctx, struct sbx_rmeta_fails *f, const char *a,
		       const char *b, const char *tmp, struct sbx_error *err);

/*
 * A new entry belongs to who made it, as on a local disk, when that is not
 * the mount's owner (a caller through allow_other): the services' uploads,
 * mkdirs and the queued commands make it the sandbox user's. The caller
 * when it is such another caller, else NULL.
 */
struct sbx_caller;
const struct sbx_caller *sbx_rmeta_other_caller(void);
/*
 * The queued chown that gives path to that caller (its gid unless the
 * directory is setgid: see sbx_rmq_op.creator), or false when the caller
 * is the mount's owner. root: run through `sudo -n` where the script runs
 * as the sandbox's user (only root may give a file away).
 */
struct sbx_rmq_op;
bool sbx_rmeta_creator_op(const char *path, bool root, struct sbx_rmq_op *op);

#endif
