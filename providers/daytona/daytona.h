/*
 * daytona/daytona.h — what the Daytona provider's own files share (api.c,
 * files.c, run.c, code.c, batch.c, toolbox.c): the settings read at init,
 * the instance struct, and the request helpers over base/http
 * (transport.c).
 *
 * Layout, each file calling only those after it: api.c lifecycle + ops
 * table; code.c interpreters; run.c runs and sessions; files.c file ops;
 * batch.c the queued metadata commands; toolbox.c /process/execute and
 * /files/permissions; transport.c HTTP; protocol.c / multipart.c pure.
 *
 * It is internal to providers/daytona/: the core only sees
 * sbx_provider_daytona (provider.h).
 */
#ifndef SBX_DAYTONA_H
#define SBX_DAYTONA_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/statvfs.h>
#include <time.h>
#include <uthash.h>

#include "base/buf.h"
#include "base/http.h"
#include "base/sysutil.h"
#include "daytona/protocol.h"
#include "provider.h"
#include "rmeta.h"
#include "rmeta_engine.h"
#include "rmeta_queue.h"

/* Deadlines when providers.daytona does not set them (see dt_conf). */
#define DT_STATE_TIMEOUT_MS 60000L
#define DT_REQUEST_TIMEOUT_MS 60000L
#define DT_TRANSFER_TIMEOUT_MS 60000L
#define DT_CONNECT_TIMEOUT_MS 10000L

/* The daemon answers in the formats of this SDK (>= 0.167: JSON logs, envs). */
#define DT_SDK_VERSION "0.218.0"
#define DT_SESSIONS_IDLE_MAX 4
/*
 * A batch is full at this many entries (commands plus permission paths):
 * 64 made `tar x` as root a command every ten files or so (tar restores
 * each owner); the bytes bound below keeps one command line in ARG_MAX.
 */
#define DT_BATCH_MAX_ENTRIES 512
/* Removals (`rm -f` of many names, one command) are bounded by bytes and this. */
#define DT_BATCH_MAX_REMOVALS 2048
#define DT_UPLOAD_MODE 0644L /* what bulk-upload gives a new file (Go's 0666 &^ umask 022) */
#define DT_BATCH_MAX_BYTES (128u << 10)
/* The queue is applied this long after its last op (rmeta_engine.h's timer). */
#define DT_BATCH_DELAY_MS 1000L
/*
 * The symlink table's bounds (struct dt_link): a link it drops shows as
 * its target again (DESIGN.md, Lessons: 32 were too few for fsstress).
 */
#define DT_LINKS_MAX 16384
#define DT_LINKS_BYTES (8u << 20) /* paths and targets */
/* How a queued command asks to borrow a path it may not touch (batch.c). */
#define DT_BORROW_TAG "sbxfs-borrow "
/* How the queued commands' script tells who runs them (batch.c). */
#define DT_IDS_TAG "sbxfs-ids "

/*
 * Settings read once by init (read-only afterwards, so no lock). The
 * credential lives only in an HTTP header line (transport.c's, replaced
 * when its file has a new key: dt_set_key); it is never logged (http
 * redacts Authorization), never in a URL, never in argv.
 */
struct dt_conf {
	char *api_url;	       /* without a trailing '/' */
	char *target;	       /* NULL: the server's default region */
	char *org;	       /* "X-Daytona-Organization-ID: ..." with a JWT, else NULL */
	long state_timeout_ms; /* timeout: create/start/stop waits (default 60 s) */
	long request_ms;       /* requestTimeout: one request, retries included (60 s) */
	long transfer_ms;      /* transferTimeout: no byte for this long ends a transfer (60 s) */
	long connect_ms;       /* connectTimeout: TCP + TLS set-up (10 s) */
	struct sbx_http_client *http;
	struct sbx_error init_err; /* why init failed (err == 0: it did not) */
};

extern struct dt_conf dt_conf;
extern const struct sbx_provider sbx_provider_daytona;

/*
 * A symlink made through this instance. The daemon's /files/info (and its
 * listing) follow symbolic links, so without this a new link would look
 * like its target, and the kernel fails symlink(2) with EIO when the new
 * entry's type is not a link.
 */
struct dt_link {
	char *path, *target;
	/* What lchown and lutimes asked for (-1, !has_*: not asked): the
	 * daemon cannot read a link's own attributes back (see dt_chown), and
	 * a listing has no atime at all. */
	long uid, gid;
	bool has_atime, has_mtime;
	struct timespec atime, mtime;
	bool doubt;	   /* a run since: see dt_links_doubt */
	UT_hash_handle hh; /* dt_instance.links, by path */
};

struct dt_instance {
	struct sbx_instance base; /* first: the core casts */
	struct sbx_spec spec;	  /* owned copy */
	char *toolbox;		  /* "{toolboxProxyUrl}/{id}" (set once, then read-only) */

	pthread_mutex_t lock;	 /* protects every field below */
	struct dt_sandbox facts; /* the last DTO seen (for info) */
	time_t facts_at;
	char *idle[DT_SESSIONS_IDLE_MAX]; /* sessions free for the next run */
	size_t n_idle;
	unsigned epoch;		      /* bumps on stop/start: older sessions are gone */
	bool no_sessions;	      /* the daemon has no session API: use execute */
	unsigned code_installed;      /* code.c: kernel drivers known to be in the sandbox (bits) */
	struct sbx_rmeta_fails fails; /* queued ops that failed, by path (own lock; rmeta.h) */
	bool no_tree; /* the daemon lists no paths with depth (before 0.218): no list_tree */
	struct sbx_rmeta_df df;	 /* statfs, cached */
	int sock_ok;		 /* whether it can bind a socket (sbx_rmeta_sock_check; atomic) */
	struct dt_link *links;	 /* symlinks this instance made (batch.c; uthash, oldest first) */
	size_t links_bytes;	 /* their paths' and targets' */
	long user_uid, user_gid; /* who runs commands (-1: not known yet) */
	bool perms_no_sudo;	 /* `sudo -n` refused to the batch's chown/chmod (batch.c; under the
				    engine's flush_lock, not lock) */

	/* the queued metadata ops: the engine (own locks) with dt_meta_slots (batch.c) */
	struct sbx_rme meta;
	struct sbx_rmeta_gate placing; /* destinations of moves in flight (own lock) */
};

/* The deadline of a short request (polls, sessions, helper commands): 30 s at most. */
static inline long dt_short_ms(void)
{
	return dt_conf.request_ms > 0 && dt_conf.request_ms < 30000 ? dt_conf.request_ms : 30000;
}

static inline struct dt_instance *dt_inst(struct sbx_instance *i)
{
	return (struct dt_instance *)i;
}

/* --- requests (transport.c) ------------------------------------------------ */

/* One JSON-or-nothing request; see dt_call(). */
struct dt_call {
	const char *method; /* NULL: GET, or POST when body is set */
	const char *url;
	json_t *body;		  /* sent as application/json (not stolen) */
	bool empty_post;	  /* POST without a body */
	json_t **reply;		  /* the parsed JSON reply (new reference), or NULL */
	struct sbx_buf *raw;	  /* or the raw reply body */
	struct sbx_buf *err_body; /* a non-2xx reply's body too (bulk upload's per-file errors) */
	const char *accept;	  /* NULL: application/json */
	const char *range;	  /* a "Range: bytes=..." header, or NULL */
	const char *what;	  /* "stat /a" — the prefix of error messages */
	long timeout_ms;	  /* 0: the client's default */
	size_t max_body;	  /* 0: DT_JSON_MAX */
	bool idempotent;
	long *status; /* the reply's HTTP status (0: none came), or NULL */
	/* Streaming (files.c): a multipart request body, a reply sink. */
	int (*mime_fn)(void *ctx, struct curl_mime *mime);
	void *mime_ctx;
	sbx_http_sink_fn sink; /* 2xx reply body, streamed (stream = true) */
	int (*on_response)(void *ctx, const struct sbx_http_resp *resp);
	void *sink_ctx;
	bool stream;
};

/*
 * Performs c. 0 for a 2xx reply (with *c->reply / c->raw filled), else
 * -errno with err filled: transport failures from http (ENOTCONN,
 * ETIMEDOUT ...), HTTP errors through dt_error_from_reply(). A 401 or 403
 * is tried once more when the key's file has a new key (sbx_keyhdr_renewed).
 */
int dt_call(const struct dt_call *c, struct sbx_error *err);
/*
 * 0, or EINVAL naming `what` when body is NULL: json_pack() refuses text
 * that is not UTF-8 (a path, a command), and dt_call would otherwise send
 * the request without its body.
 */
int dt_check_body(const json_t *body, const char *what, struct sbx_error *err);
/*
 * Fills hdr (room for n pointers) with the common headers plus extra
 * (NULL-terminated, may be NULL); returns hdr.
 */
const char **dt_headers(const char **hdr, size_t n, const char *auth_line,
			const char *const *extra);
/* The key (API key or JWT) calls carry: set at init, then by set_key when
 * its file has a new one (true when it differs); cleared at shutdown. */
void dt_auth_start(const struct sbx_provider_env *env, const char *key);
bool dt_set_key(const char *key);
void dt_auth_clear(void);
/* The init error when the provider is not usable, else 0. */
int dt_ready(struct sbx_error *err);
/*
 * URL helpers: "{toolbox}{path}", "{toolbox}{ep}?path=P" and
 * "{api_url}/sandbox/{id}{suffix}".
 */
void dt_toolbox_url(struct dt_instance *di, struct sbx_buf *b, const char *path);
void dt_path_url(struct dt_instance *di, struct sbx_buf *b, const char *ep, const char *path);
void dt_sandbox_url(struct sbx_buf *b, const char *id, const char *suffix);
void dt_sleep_ms(long ms);
/* A random lowercase hex string of 2*bytes characters into out. */
void dt_random_hex(char *out, size_t bytes);

/* --- instances (api.c) ------------------------------------------------------ */

/* Stores the DTO's facts on the instance (for info). */
void dt_facts_set(struct dt_instance *di, const struct dt_sandbox *sb);

/* --- toolbox requests under both the ops and the batch (toolbox.c) ---------- */

/*
 * POST /process/execute: the combined output into out (bounded), the exit
 * code into *exit_code; a daemon-side timeout (408) is a success with
 * *timed_out set and exit code 137.
 */
int dt_execute(struct dt_instance *di, const char *command, long timeout_ms, struct sbx_buf *out,
	       int *exit_code, bool *timed_out, struct sbx_error *err);
/*
 * Runs an internal helper command through /process/execute (one request):
 * combined output into out (bounded), exit code into *exit_code; a
 * timeout is -ETIMEDOUT.
 */
int dt_exec(struct dt_instance *di, const char *cmd, long timeout_ms, struct sbx_buf *out,
	    int *exit_code, struct sbx_error *err);
/* POST /files/permissions at once; mode < 0, owner/group NULL: left as they are. */
int dt_perms(struct dt_instance *di, const char *path, long mode, const char *owner,
	     const char *group, struct sbx_error *err);

/* --- runs (run.c) ---------------------------------------------------------- */

int dt_run(struct sbx_instance *inst, const struct sbx_run_req *req,
	   const struct sbx_run_sink *sink, struct sbx_run_result *result, struct sbx_error *err);
/* Forgets every idle session (the sandbox stopped: they are gone). */
void dt_sessions_drop(struct dt_instance *di);

/* --- code (code.c): persistent interpreters through dt_run ------------------ */

int dt_run_code(struct sbx_instance *inst, const struct sbx_code_req *req,
		const struct sbx_run_sink *sink, struct sbx_code_result *result,
		struct sbx_error *err);
int dt_code_reset(struct sbx_instance *inst, const char *language, struct sbx_error *err);

/* --- metadata batch (batch.c) ------------------------------------------------ */

/*
 * How the engine applies daytona's queue (rmeta_engine.h): the commands
 * (its script lane) through /process/execute, then the chmod/chown of its
 * native lane folded per path into /files/permissions calls; full at
 * DT_BATCH_MAX_* (entries: commands plus permission paths), and applied
 * DT_BATCH_DELAY_MS after the last op.
 */
extern const struct sbx_rme_slots dt_meta_slots;
/*
 * Applies everything queued (all of it, in order, then the queued
 * chmod/chown). An op that fails is recorded against its path
 * (di->fails, reported to the lease): not the caller's failure, so this
 * returns 0 then.
 */
int dt_batch_flush(struct dt_instance *di, struct sbx_error *err);
/* Flushes when a queued command or chmod/chown touches path or an entry of directory path. */
int dt_batch_flush_for(struct dt_instance *di, const char *path, struct sbx_error *err);
/* The same before an upload of path: a mkdir queued above it need not go first (NEED_PUT). */
int dt_batch_flush_put(struct dt_instance *di, const char *path);
/* Queues a mkdir (SBX_RMQ_MKDIR): dt_mkdir_new's. */
int dt_batch_mkdir(struct dt_instance *di, const char *path, mode_t mode);
/*
 * The same for queued commands only: a reader of attributes then lays the
 * queued chmod/chown of path over what the daemon said (sbx_rme_overlay),
 * so that a stat does not cost the flush. Then
 * returns the failure of a queued op of path itself, once (rmeta.h).
 */
int dt_batch_settle_for(struct dt_instance *di, const char *path, struct sbx_error *err);
/* dt_batch_flush when anything queued is on path or below it (a listing of a subtree). */
int dt_batch_flush_below(struct dt_instance *di, const char *path, struct sbx_error *err);
/* Whether a queued removal leaves path gone (sbx_rme_fate): a stat says ENOENT. */
bool dt_batch_gone(struct dt_instance *di, const char *path);

/*
 * The symlink table: dt_links_add() records a link this instance made,
 * or with read one a readlink found (doubted, see below; a link already
 * held keeps what the table noted of it, with the text read), the oldest
 * going past DT_LINKS_MAX or DT_LINKS_BYTES; dt_link_lookup()
 * fills st (and the target) for one; dt_links_forget() drops path and
 * everything below it (unlink, rmdir, rename, write); dt_links_rename()
 * and dt_links_exchange() move them; dt_links_clear() forgets all;
 * dt_links_any() says whether it holds one. After a run, which may have
 * changed anything, dt_links_doubt() marks them all doubted: a doubted
 * link is not looked up until dt_stat has checked it against its
 * directory's listing (lstat), dt_link_check (kept when the listing still
 * shows the link, with the listing's owner and times; dropped when not).
 * Forgetting them made the kernel's inode of a link the mount made turn
 * into its target (info follows links) after any run: EIO, then a
 * regular file.
 */
bool dt_link_lookup(struct dt_instance *di, const char *path, struct sbx_stat *st, char *target,
		    size_t size);
void dt_links_add(struct dt_instance *di, const char *path, const char *target, bool read);
void dt_links_forget(struct dt_instance *di, const char *path);
/* Records an lchown (uid/gid -1: unchanged) or lutimes (ts NULL, or UTIME_OMIT: unchanged). */
void dt_link_note(struct dt_instance *di, const char *path, long uid, long gid,
		  const struct timespec ts[2]);
void dt_links_rename(struct dt_instance *di, const char *from, const char *to);
/* RENAME_EXCHANGE of a and b: the links at and below each are at and below the other. */
void dt_links_exchange(struct dt_instance *di, const char *a, const char *b);
void dt_links_clear(struct dt_instance *di);
bool dt_links_any(struct dt_instance *di);
void dt_links_doubt(struct dt_instance *di);
/* Whether path is a doubted link: then ls (its listing's entry, or NULL: none) settles it. */
bool dt_link_doubted(struct dt_instance *di, const char *path);
void dt_link_check(struct dt_instance *di, const char *path, const struct sbx_stat *ls);

/* Queues a chmod (mode >= 0) and/or chown (uid, gid >= 0) of path. */
int dt_batch_perms(struct dt_instance *di, const char *path, long mode, long uid, long gid,
		   struct sbx_error *err);
/* Queues the chown that gives path to another caller who made it (batch.c). */
int dt_own_new(struct dt_instance *di, const char *path, struct sbx_error *err);
/*
 * path was just uploaded as a new file, so its mode is the upload's (0644):
 * queues mode unless it is that one, and remembers it, so that a chmod
 * to it that follows (tar's) is no request either.
 */
int dt_batch_perms_new(struct dt_instance *di, const char *path, long mode, struct sbx_error *err);

int dt_sync(struct sbx_instance *inst, struct sbx_error *err);
int dt_take_failure(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int dt_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
	       struct sbx_error *err);
int dt_symlink(struct sbx_instance *inst, const char *target, const char *path,
	       struct sbx_error *err);
int dt_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err);
int dt_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err);
int dt_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
	     struct sbx_error *err);
int dt_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		struct sbx_error *err);
int dt_readlinks(struct sbx_instance *inst, const char *dir, sbx_link_fn fn, void *ctx,
		 struct sbx_error *err);
int dt_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
	      struct sbx_error *err);
int dt_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int dt_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
	     struct sbx_error *err);

/* --- files (files.c) --------------------------------------------------------- */

int dt_stat(struct sbx_instance *inst, const char *path, struct sbx_stat *st,
	    struct sbx_error *err);
int dt_read(struct sbx_instance *inst, const char *path, off_t off, off_t len, sbx_sink_fn sink,
	    void *ctx, struct sbx_error *err);
int dt_write(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
	     struct sbx_error *err);
int dt_write_new_many(struct sbx_instance *inst, struct sbx_new_file *files, size_t n);
/*
 * Gives each of the n files its result from a bulk-upload reply (status,
 * body): listed under "files": 0; under "errors" (an object with path and
 * error, or a "PATH: why" string): the errno its text names; not listed
 * (or a reply that is no such JSON): EIO, "not in the reply".
 */
void dt_bulk_upload_results(long status, const char *body, size_t len, struct sbx_new_file *files,
			    size_t n);
int dt_write_new(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		 struct sbx_error *err);
int dt_write_inplace(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		     struct sbx_error *err);
int dt_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int dt_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int dt_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int dt_list_tree(struct sbx_instance *inst, const char *path, int depth, sbx_tree_fn fn, void *ctx,
		 struct sbx_error *err);
int dt_rmdir_empty(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int dt_mkdir_new(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int dt_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
	      struct sbx_error *err);

#endif
