/*
 * e2b — internals shared by the E2B provider's files: the instance
 * struct, the provider-wide state, and the transport helpers (control
 * plane REST, envd unary and streaming Connect RPC, /files) that
 * transport.c implements over src/base/http.
 *
 * Not for the core: the core sees only sbx_provider_e2b (api.c).
 * Layout: api.c lifecycle + ops table; files.c filesystem ops and the
 * metadata batch; run.c the run slot and statfs; tty.c terminals; proc.c
 * processes (Start stream, kill, capture) under run.c, tty.c and the
 * batch; watch.c the WatchDir thread; transport.c HTTP and the
 * provider-wide state; protocol.c / connect.c pure (the metadata queue is ../rmeta_queue.c). code.c
 * is the code interpreter (:49999, run_code/code_reset).
 */
#ifndef SBX_E2B_H
#define SBX_E2B_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/http.h"
#include "base/pathttl.h"
#include "base/sysutil.h"
#include "e2b/protocol.h"
#include "provider.h"
#include "rmeta.h"
#include "rmeta_engine.h"
#include "rmeta_queue.h"

struct e2b_watch;
struct e2b_code;

/* Replies to our own writes and mkdirs kept to answer the stat that follows. */
#define E2B_RECENT_MAX 16
#define E2B_RECENT_MS 1000L

/* Provider-wide state, set by init() and read-only afterwards (defined in transport.c). */
struct e2b_global {
	struct e2b_settings set;
	struct sbx_http_client *http;
};
extern struct e2b_global e2b_g;
extern const struct sbx_provider sbx_provider_e2b;

struct e2b_inst {
	struct sbx_instance base; /* first: the core casts */
	pthread_mutex_t lock;	  /* protects the fields marked (L) */
	struct e2b_sandbox sb;	  /* (L) ids, tokens, domain; replaced on unpause */
	bool paused;		  /* (L) */
	char *workdir;		  /* spec workingDirectory or NULL (immutable) */
	long ttl_s;		  /* lifetime asked for on create and resume (immutable) */

	/* Metadata batch: the engine (its own locks) with e2b_meta_slots (files.c). */
	struct sbx_rme meta;
	struct sbx_rmeta_fails fails; /* queued ops that failed, by path (rmeta.h) */

	struct sbx_rmeta_df df;	  /* statfs cache (its own lock) */
	struct sbx_rmeta_ids ids; /* the sandbox's owner and group names (its own locks) */
	int sock_ok;		  /* whether it can bind a socket (sbx_rmeta_sock_check; atomic) */

	/* Entries envd just described in the reply to our own Move/MakeDir (files.c). */
	struct e2b_recent {
		char *path;
		struct sbx_stat st;
		long at_ms;
	} recent[E2B_RECENT_MAX]; /* (L) */
	unsigned recent_next;	  /* (L) the slot the next one replaces */
	struct sbx_pathttl own;	  /* (L) paths our last batches changed (their events are echoes) */

	pthread_mutex_t watch_lock; /* protects watch */
	struct e2b_watch *watch;

	struct e2b_code *code; /* code.c: interpreter contexts (own lock; set under lock) */
};

static inline struct e2b_inst *e2b_of(struct sbx_instance *i)
{
	return (struct e2b_inst *)i;
}

/* --- transport.c --------------------------------------------------------- */

/* Request headers and base URL for one envd call (a snapshot: tokens are
 * copied under the instance lock, then wiped by e2b_conn_release). */
struct e2b_conn {
	struct sbx_buf base;
	char id_hdr[192], port_hdr[48], token_hdr[320];
	const char *headers[8];
	size_t n_headers;
};
void e2b_conn_get(struct e2b_inst *in, int port, struct e2b_conn *c);
void e2b_conn_add(struct e2b_conn *c, const char *header);
void e2b_conn_release(struct e2b_conn *c);

/* The control plane's API key: set at init (from e2b_g.set), then by
 * set_key when its file has a new one (true when it differs). */
void e2b_key_start(const struct sbx_provider_env *env);
bool e2b_set_key(const char *key);
void e2b_key_clear(void);

/*
 * Control plane call: METHOD api_url+path with a JSON body (NULL: none).
 * 2xx: returns 0, *out = the parsed reply or NULL when empty (caller owns).
 * Else returns the mapped -errno (e2b_api_error) with *status set so a
 * caller can turn a 404 or 409 into its own answer. A 401 or 403 is
 * tried once more when the key's file has a new key (sbx_keyhdr_renewed).
 */
int e2b_api(const char *method, const char *path, json_t *body, bool idempotent, json_t **out,
	    long *status, const char *what, struct sbx_error *e);

/* e2b_api, also copying the reply's header `header` into value (""
 * when absent). */
int e2b_api_ex(const char *method, const char *path, json_t *body, bool idempotent, json_t **out,
	       long *status, const char *header, char *value, size_t size, const char *what,
	       struct sbx_error *e);

/*
 * Lists the sandboxes (running and paused) of this API key, all pages of
 * GET /v2/sandboxes; lease non-NULL: only those created for that lease
 * (metadata sbxfs_lease). *out = a new array of {sandboxID, templateID,
 * state, startedAt, endAt, metadata}. The list_sandboxes slot is built on it.
 */
int e2b_sandbox_list(const char *lease, json_t **out, struct sbx_error *e);

/* Unary envd RPC ("filesystem.Filesystem/Stat"); *out = reply (owned). */
int e2b_rpc(struct e2b_inst *in, const char *method, json_t *req, bool idempotent, size_t max_reply,
	    json_t **out, const char *what, struct sbx_error *e);

struct e2b_stream_opts {
	long timeout_ms; /* Connect-Timeout-Ms (0: none) and the total deadline */
	long idle_ms;	 /* no byte for this long ends the stream */
	const atomic_int *cancel;
	const char *auth; /* an "Authorization: Basic ..." line (the user), or NULL */
};
/* Streaming envd RPC: each data message goes to fn; 0 after a clean
 * end-of-stream frame, else -errno (the end frame's error included). */
int e2b_rpc_stream(struct e2b_inst *in, const char *method, json_t *req,
		   const struct e2b_stream_opts *o,
		   int (*fn)(void *ctx, const char *json, size_t len), void *ctx, const char *what,
		   struct sbx_error *e);

/* GET /files?path=P with an optional Range, 2xx body into sink. */
int e2b_files_get(struct e2b_inst *in, const char *path, off_t off, off_t len, sbx_sink_fn sink,
		  void *ctx, long *status, struct sbx_error *e);
/* POST /files?path=P, body streamed from fd (octet-stream). */
int e2b_files_put(struct e2b_inst *in, const char *path, int fd, off_t size, struct sbx_error *e);
/*
 * n new files in one POST /files (bulkup.c). 0: the reply came, and each
 * file's rc says whether it was listed (e2b_files_put_results); else
 * -errno for the whole request, whose files' fate is unknown.
 */
int e2b_files_put_many(struct e2b_inst *in, struct sbx_new_file **files, size_t n,
		       struct sbx_error *e);
/* Each file listed in the reply's JSON array: rc 0; else EIO, "not in the reply". */
void e2b_files_put_results(const char *body, size_t len, struct sbx_new_file **files, size_t n);
/* The path can be a part's filename as it is (no quote, backslash, CR, LF). */
bool e2b_part_name_ok(const char *path);

/* --- code.c -------------------------------------------------------------- */
int e2b_run_code(struct sbx_instance *inst, const struct sbx_code_req *req,
		 const struct sbx_run_sink *sink, struct sbx_code_result *result,
		 struct sbx_error *err);
int e2b_code_reset(struct sbx_instance *inst, const char *language, struct sbx_error *err);
void e2b_code_free(struct e2b_code *c);

/* --- proc.c: processes, without applying the metadata batch -------------- */
/*
 * Starts req and streams its output into sink until it ends (a run that
 * times out is killed: result->timed_out, exit code 137); as_root: as root
 * instead of the sandbox's default user.
 */
int e2b_proc_start(struct e2b_inst *in, const struct sbx_run_req *req, bool as_root,
		   const struct sbx_run_sink *sink, struct sbx_run_result *result,
		   struct sbx_error *err);
/* SIGKILLs process pid (best effort: the process must not outlive a run we
 * gave up on; a failure is only logged). */
void e2b_proc_kill(struct e2b_inst *in, unsigned pid);
/* Runs shell text, collecting stdout/stderr (each bounded by max bytes);
 * as root, or as the sandbox's default user. */
int e2b_run_capture(struct e2b_inst *in, const char *shell, bool as_root, long timeout_ms,
		    size_t max, struct sbx_buf *out, struct sbx_buf *errout, int *exit_code,
		    struct sbx_error *e);
/* sbx_rmeta_run_fn (ctx: the e2b_inst): a helper command as the default user, its stdout. */
int e2b_helper_run(void *ctx, const char *cmd, struct sbx_buf *out, struct sbx_error *err);

/* --- tty.c, run.c ------------------------------------------------------- */
/* tty.c: terminal sessions (process.Process/Start with a pty). */
int e2b_tty_open(struct sbx_instance *inst, const struct sbx_tty_req *req,
		 const struct sbx_tty_sink *sink, struct sbx_tty_session **out,
		 struct sbx_error *err);
int e2b_tty_write(struct sbx_tty_session *s, const char *data, size_t len, struct sbx_error *err);
int e2b_tty_resize(struct sbx_tty_session *s, unsigned cols, unsigned rows, struct sbx_error *err);
void e2b_tty_close(struct sbx_tty_session *s);
/* run.c: the run slot (applies the metadata batch first), statfs. */
int e2b_run(struct sbx_instance *inst, const struct sbx_run_req *req,
	    const struct sbx_run_sink *sink, struct sbx_run_result *result, struct sbx_error *err);
int e2b_statfs(struct sbx_instance *inst, const char *path, struct statvfs *st,
	       struct sbx_error *err);

/* --- files.c ------------------------------------------------------------- */

/*
 * How the engine applies e2b's metadata batch (rmeta_engine.h): one root
 * script per SBX_RMQ_SCRIPT_MAX, gathered; a second after the last op or
 * at 4,096 ops; the paths of a batch noted as our own echoes. Attribute-only
 * ops (chmod, chown, utimens, truncate) do not force a flush for stat and
 * list: sbx_rme_overlay shows them on the remote answer.
 */
extern const struct sbx_rme_slots e2b_meta_slots;
/* Forgets the recent entries at or under path (lock held; it changed). */
void e2b_recent_drop_locked(struct e2b_inst *in, const char *path);
/* Frees the recent entries (release). */
void e2b_recent_clear(struct e2b_inst *in);
/*
 * path was changed by one of our own batches within E2B_OWN_ECHO_MS: the
 * watch's event for it is an echo, not a change from the sandbox (the core
 * notes the echoes of its own uploads; a batch runs later, on its own).
 */
bool e2b_own_echo(struct e2b_inst *in, const char *path);
/* Frees that record (release). */
void e2b_own_clear(struct e2b_inst *in);
/* The file slots of the ops table (provider.h documents each). */
int e2b_stat(struct sbx_instance *inst, const char *path, struct sbx_stat *st,
	     struct sbx_error *err);
int e2b_read(struct sbx_instance *inst, const char *path, off_t off, off_t len, sbx_sink_fn sink,
	     void *ctx, struct sbx_error *err);
int e2b_write(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
	      struct sbx_error *err);
int e2b_write_new_many(struct sbx_instance *inst, struct sbx_new_file *files, size_t n);
int e2b_write_new(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		  struct sbx_error *err);
int e2b_write_inplace(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		      struct sbx_error *err);
int e2b_truncate(struct sbx_instance *inst, const char *path, off_t size, struct sbx_error *err);
int e2b_mkdir(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int e2b_unlink(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int e2b_rmdir(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int e2b_list_tree(struct sbx_instance *inst, const char *path, int depth, sbx_tree_fn fn, void *ctx,
		  struct sbx_error *err);
int e2b_rmdir_empty(struct sbx_instance *inst, const char *path, struct sbx_error *err);
int e2b_mkdir_new(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int e2b_rename(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
	       struct sbx_error *err);
int e2b_chmod(struct sbx_instance *inst, const char *path, mode_t mode, struct sbx_error *err);
int e2b_chown(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
	      struct sbx_error *err);
int e2b_utimens(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
		struct sbx_error *err);
int e2b_symlink(struct sbx_instance *inst, const char *target, const char *path,
		struct sbx_error *err);
int e2b_readlink(struct sbx_instance *inst, const char *path, char *buf, size_t size,
		 struct sbx_error *err);
int e2b_readlinks(struct sbx_instance *inst, const char *dir, sbx_link_fn fn, void *ctx,
		  struct sbx_error *err);
int e2b_link(struct sbx_instance *inst, const char *from, const char *to, struct sbx_error *err);
int e2b_mknod(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
	      struct sbx_error *err);
int e2b_sync(struct sbx_instance *inst, struct sbx_error *err);
int e2b_take_failure(struct sbx_instance *inst, const char *path, struct sbx_error *err);

/* --- watch.c ------------------------------------------------------------- */
void e2b_set_notify(struct sbx_instance *inst, void (*cb)(void *ctx, const char *path), void *ctx);
void e2b_watch_stop(struct e2b_inst *in);

#endif
