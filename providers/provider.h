/*
 * provider.h — THE contract between the sbxfs core and a sandbox backend.
 *
 * A provider is a const struct sbx_provider (an ops table) registered in
 * providers/registry.c. The core holds one struct sbx_instance per lease;
 * each provider embeds it as the FIRST member of its own instance struct
 * and casts back (container pattern, as libgit2's odb backends do).
 *
 * Rules every slot follows:
 *  - returns 0 (or a byte count where stated) on success, -errno on
 *    failure, and then fills *err with a structured code and one line of
 *    text. Never 0 on failure.
 *  - a NULL slot means "not supported": the core answers ENOTSUP itself
 *    (or uses a documented fallback), the provider never has to.
 *  - paths are absolute paths inside the sandbox ("/", "/home/user/a.txt"),
 *    already normalised by the core (no "..", no "//", no trailing "/").
 *  - calls may come from several FUSE threads at once, on the same
 *    instance: a provider protects its own shared state.
 *  - nothing blocks without a deadline: every network call has one.
 *  - credentials never appear in err->msg, info(), or logs.
 *
 * What a provider is not: it keeps no lease state (names, idle timers,
 * persistence are the core's), and it does not cache file contents (the
 * core's cache does, unless the provider sets SBX_CAP_DIRECT_IO).
 */
#ifndef SBX_PROVIDER_H
#define SBX_PROVIDER_H

#include <jansson.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <time.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/spec.h"

#define SBX_PROVIDER_ABI 1

/* Capability bits (struct sbx_provider.caps). */
enum {
	/*
	 * File I/O through open/pread/pwrite/close is as cheap as local disk:
	 * the core serves fs/ without its content and attribute caches.
	 */
	SBX_CAP_DIRECT_IO = 1u << 0,
	/* list() fills complete attributes (one call per directory). */
	SBX_CAP_LIST_ATTRS = 1u << 1,
	/* pause keeps memory (processes resume where they were). */
	SBX_CAP_PAUSE_MEMORY = 1u << 2,
	/*
	 * The file slots act as the caller of the request (base/caller.h):
	 * its uid, gid, groups and umask. Without it, the core masks new
	 * modes with the caller's umask before the call.
	 */
	SBX_CAP_AS_CALLER = 1u << 3,
	/*
	 * Paths, link texts and commands travel as UTF-8 text (JSON): a name
	 * that is not UTF-8 cannot exist there. The core answers ENOENT for
	 * one without asking, and refuses to make one or to run such a
	 * command (EILSEQ, with the reason). Code is UTF-8 on every provider.
	 */
	SBX_CAP_UTF8_TEXT = 1u << 4,
	/*
	 * read() of a range costs that range only (an HTTP Range), not the
	 * bytes before it: the core reads a big file's far parts that way
	 * rather than wait for its download to get there.
	 */
	SBX_CAP_RANGE_READ = 1u << 5,
	/*
	 * A run, code cell or terminal in flight outlives a pause: the
	 * daemon's stream to it is not cut (local: its processes are frozen
	 * and thawed). Without it a user's pause is refused while one is in
	 * flight, rather than cut it (e2b's pause drops envd's streams;
	 * daytona's stop ends the processes).
	 */
	SBX_CAP_PAUSE_KEEPS_RUNS = 1u << 6,
};

/* What the provider can say about a sandbox's state right now. */
enum sbx_remote_state {
	SBX_REMOTE_RUNNING = 0,
	SBX_REMOTE_PAUSED,
	SBX_REMOTE_GONE, /* killed, deleted or expired behind the core's back */
	SBX_REMOTE_UNKNOWN,
};

struct sbx_instance {
	const struct sbx_provider *prov;
	char id[128]; /* the provider's sandbox id, shown in status/info */
	/*
	 * Set by the core once it holds the instance: where the provider
	 * reports a failure no call returns (a queued change that failed when
	 * applied later: "mknod /a/b", why). Goes to the lease's `error` file.
	 * May be called from any thread, with provider locks held. NULL: none.
	 */
	void (*report)(void *ctx, const char *what, const struct sbx_error *e);
	void *report_ctx;
	/*
	 * Set by attach when taking the sandbox back changed it (local: its
	 * init had died, and it was started again on its own disk): one
	 * sentence for the lease's `error`, recorded once by the core. Empty:
	 * nothing to say.
	 */
	char attach_note[256];
};

/* Reports a failure that no call returns (see sbx_instance.report). */
static inline void sbx_instance_report(struct sbx_instance *inst, const char *what,
				       const struct sbx_error *e)
{
	if (inst && inst->report)
		inst->report(inst->report_ctx, what, e);
}

/* One file of write_new_many: what to send, and its own result. */
struct sbx_new_file {
	const char *path;
	int fd; /* size bytes at offset 0, streamed */
	off_t size;
	mode_t mode;
	int rc;		      /* out: 0 or -errno */
	struct sbx_error err; /* out: why, when rc */
};

/* Attributes of one file. Unknown fields are 0; mode always has the type. */
struct sbx_stat {
	mode_t mode;
	nlink_t nlink;
	uid_t uid;
	gid_t gid;
	off_t size;
	dev_t rdev;
	struct timespec atime, mtime, ctime;
	ino_t ino;	 /* the sandbox's inode number; 0: unknown (the core makes one up) */
	blkcnt_t blocks; /* 512-byte blocks allocated, if has_blocks */
	bool has_blocks; /* else the core counts size / 512 */
};

/* list() calls this once per entry (never for "." and ".."); non-zero stops the walk. */
typedef int (*sbx_list_fn)(void *ctx, const char *name, const struct sbx_stat *st);
/* list_tree() calls this once per entry, with the directory it is in. */
typedef int (*sbx_tree_fn)(void *ctx, const char *dir, const char *name, const struct sbx_stat *st);
/* readlinks() calls this once per symbolic link: its name in the directory, its text. */
typedef void (*sbx_link_fn)(void *ctx, const char *name, const char *target);

/*
 * One sandbox as a provider's control plane lists it (list_sandboxes). The
 * strings are the provider's and valid during the call only; NULL when not
 * known. Nothing here is a secret.
 */
struct sbx_sandbox_entry {
	const char *id;
	/* "running", "paused", "gone" (ended: attach will fail), or the
	 * provider's own word for a state in between ("creating", "error") */
	const char *state;
	const char *lease; /* the lease name sbxfs labelled it with at create */
	const char *template_name;
	const char *created_at; /* ISO 8601, UTC */
};

/* list_sandboxes() calls this once per sandbox; non-zero stops the walk. */
typedef int (*sbx_sandbox_fn)(void *ctx, const struct sbx_sandbox_entry *sb);

/* Byte sink for streamed output and downloads; returns 0 or -errno (stops the transfer). */
typedef int (*sbx_sink_fn)(void *ctx, const char *data, size_t len);

enum sbx_stream { SBX_STDOUT = 1, SBX_STDERR = 2 };

/* How often (at most) a provider looks at sbx_run_sink.cancel while it waits. */
#define SBX_CANCEL_POLL_MS 200

struct sbx_run_sink {
	void *ctx;
	/* Output as it is produced; may be called from the calling thread only. */
	int (*output)(void *ctx, enum sbx_stream s, const char *data, size_t len);
	/*
	 * Becomes non-zero when the caller gives up on the run (the reader or
	 * writer waiting for it was interrupted). The provider then stops it as
	 * at its timeout (the command's processes killed; a cell abandoned) and
	 * returns -ECANCELED, within about SBX_CANCEL_POLL_MS. NULL: never.
	 */
	const atomic_int *cancel;
};

/* True once the caller of a run has cancelled it. */
static inline bool sbx_run_cancelled(const struct sbx_run_sink *s)
{
	return s && s->cancel && atomic_load(s->cancel);
}

struct sbx_run_req {
	const char *shell;	 /* shell text run by /bin/sh -c (or the provider's shell) ... */
	const char *const *argv; /* ... or an argv (NULL-terminated); exactly one is set */
	const char *cwd;	 /* NULL: the spec's workingDirectory / provider default */
	const char *const *envs; /* NULL-terminated "KEY=VALUE" list, added to the spec's envs */
	long timeout_ms;	 /* 0: none (the provider still keeps a transport deadline) */
};

struct sbx_run_result {
	int exit_code;	/* 128+N when killed by signal N */
	bool timed_out; /* killed because timeout_ms passed */
	long duration_ms;
};

/* One rich output of a code run (an image, SVG, HTML, JSON ...). */
struct sbx_code_output {
	char *mime; /* "image/png", "image/svg+xml", "text/html", "application/json", ... */
	char *data; /* decoded bytes */
	size_t len;
};

struct sbx_code_req {
	const char *code;
	const char *language; /* "python", "javascript", "typescript" */
	const char *const *envs;
	long timeout_ms;
};

/*
 * The CodeExecutionResult. A raised exception is success=false with
 * err_name/err_value/traceback set, and run_code() still returns 0: only a
 * provider failure is an error of the call.
 */
struct sbx_code_result {
	bool success;
	bool state_lost; /* the interpreter had died and was restarted for this run */
	char *text;	 /* the final expression's value as text, or NULL */
	char *err_name, *err_value, *err_traceback;
	struct sbx_code_output *outputs;
	size_t n_outputs;
	long duration_ms;
};

void sbx_code_result_free(struct sbx_code_result *r); /* members only; NULL-safe */

/*
 * Terminal sessions (the tty_* slots): an interactive shell on a pseudo
 * terminal inside the sandbox. The provider's session is opaque to the core.
 */
struct sbx_tty_session;

struct sbx_tty_req {
	const char *const *envs; /* NULL-terminated "KEY=VALUE" list, added to the spec's envs */
	const char *cwd;	 /* NULL: the spec's workingDirectory / provider default */
	unsigned cols, rows;	 /* the terminal's size at the start (never 0) */
};

struct sbx_tty_sink {
	void *ctx;
	/* Terminal output as the shell produces it; called on a provider thread. */
	void (*output)(void *ctx, const char *data, size_t len);
	/*
	 * Called at most once, after the last output: the shell ended with status
	 * (its exit code, 128+N when killed by signal N; err NULL), or the
	 * session was lost (status -errno, err says why).
	 */
	void (*ended)(void *ctx, int status, const struct sbx_error *err);
};

/* Settings a provider gets at start-up. */
struct sbx_provider_env {
	json_t *settings;      /* config "providers": {NAME: {...}} entry, or an empty object */
	const char *state_dir; /* the mount's state directory (provider may use state_dir/NAME/) */
	/* The API key read from settings' "keyFile" (mode 0600 checked), or NULL:
	 * the provider then reads its environment variable. A secret. */
	const char *api_key;
	/* Why "keyFile" could not be used (its mode, say), or NULL. init() then
	 * fails with this error so that every later call repeats it. */
	const struct sbx_error *key_error;
	/* What a refused key calls to read it again (sbx_provider_key_reread),
	 * and the provider to pass it: kept by sbx_keyhdr_start. */
	void (*reread_key)(const struct sbx_provider *p);
	const struct sbx_provider *provider;
};

/*
 * One extended-attribute call on a path itself (a symlink is not
 * followed), answered as getxattr(2), listxattr(2) (bytes, or the size
 * needed when size is 0), setxattr(2) and removexattr(2) answer (0).
 */
enum sbx_xattr_op { SBX_XATTR_GET, SBX_XATTR_LIST, SBX_XATTR_SET, SBX_XATTR_REMOVE };
struct sbx_xattr_req {
	enum sbx_xattr_op op;
	const char *name;  /* GET, SET, REMOVE */
	char *buf;	   /* GET, LIST: size bytes to fill */
	const char *value; /* SET: size bytes */
	size_t size;
	int flags; /* SET: XATTR_CREATE, XATTR_REPLACE */
};
/* The system call's name, for messages. */
static inline const char *sbx_xattr_op_name(enum sbx_xattr_op op)
{
	static const char *const names[] = {"getxattr", "listxattr", "setxattr", "removexattr"};
	return names[op];
}

struct sbx_provider {
	unsigned abi; /* SBX_PROVIDER_ABI */
	const char *name;
	unsigned caps;

	/* --- provider-wide ------------------------------------------------ */
	/* Called once at mount; reads env/credentials. Optional. A failure here
	 * only disables this provider: the core then neither creates nor
	 * attaches on it, and leases on it get the error (sbx_provider_ready). */
	int (*init)(const struct sbx_provider_env *env, struct sbx_error *err);
	void (*shutdown)(void);
	/* The environment variable that holds its key (read from -o env_file=
	 * too), or NULL. Optional. */
	const char *key_var;
	/* A key re-read from its file after the service refused the one in use
	 * (sbx_provider_key_reread): true when it differs, and is then used from
	 * the next request on, running ones included. Optional. */
	bool (*set_key)(const char *key);

	/* --- lifecycle ---------------------------------------------------- */
	/* Creates a sandbox for spec (packages installed, envs set) and returns
	 * a new instance. `lease` is the lease's name (for labels/metadata). */
	int (*create)(const struct sbx_spec *spec, const char *lease, struct sbx_instance **out,
		      struct sbx_error *err);
	/* Re-attaches to an existing sandbox by id (remount, or `ctl attach`).
	 * `saved` is what save() returned last time, or NULL. Does not resume a
	 * paused sandbox. ENOENT when it no longer exists. */
	int (*attach)(const struct sbx_spec *spec, const char *sandbox_id, json_t *saved,
		      struct sbx_instance **out, struct sbx_error *err);
	/* Private state to persist with the lease table (never secrets). Optional. */
	json_t *(*save)(struct sbx_instance *inst);
	/* Frees the instance; the sandbox itself is left as it is. */
	void (*release)(struct sbx_instance *inst);
	int (*pause)(struct sbx_instance *inst, struct sbx_error *err);
	int (*unpause)(struct sbx_instance *inst, struct sbx_error *err);
	/* Ends the sandbox and deletes its storage. ENOENT if already gone. */
	int (*kill)(struct sbx_instance *inst, struct sbx_error *err);
	/* Probes the sandbox (cheap; used to detect reclaim behind our back). */
	int (*probe)(struct sbx_instance *inst, enum sbx_remote_state *state,
		     struct sbx_error *err);
	/* Keeps the provider's own lifetime in step: the sandbox must live at
	 * least `seconds` more. Optional. */
	int (*set_timeout)(struct sbx_instance *inst, long seconds, struct sbx_error *err);
	/* JSON facts for `info` (template, resources, endpoints...; no secrets).
	 * Answers from what the instance knows: never blocks on the network. Optional. */
	int (*info)(struct sbx_instance *inst, json_t **out, struct sbx_error *err);
	/*
	 * Writes how to reach `port` inside the sandbox: a full URL with its
	 * scheme, then for each header a request needs (a provider's access
	 * token) a newline and "Header: value". No trailing newline.
	 */
	int (*get_host)(struct sbx_instance *inst, int port, char *buf, size_t size,
			struct sbx_error *err);

	/* --- runs --------------------------------------------------------- */
	/* Runs a command; streams its output into sink while it runs. A non-zero
	 * exit is success of the call (result->exit_code says it). */
	int (*run)(struct sbx_instance *inst, const struct sbx_run_req *req,
		   const struct sbx_run_sink *sink, struct sbx_run_result *result,
		   struct sbx_error *err);
	/* Runs code in the lease's persistent interpreter for req->language;
	 * stdout/stderr stream into sink. */
	int (*run_code)(struct sbx_instance *inst, const struct sbx_code_req *req,
			const struct sbx_run_sink *sink, struct sbx_code_result *result,
			struct sbx_error *err);
	/* Starts a fresh interpreter for language (NULL: all). */
	int (*code_reset)(struct sbx_instance *inst, const char *language, struct sbx_error *err);
	/* Optional: makes language's interpreter ready for a cell (started under envs if
	 * none runs), called at a cell's first write so that a missing runtime fails the
	 * write, where a shell's $? sees it. A state lost by that start is reported by the
	 * next run_code. */
	int (*code_ready)(struct sbx_instance *inst, const char *language, const char *const *envs,
			  struct sbx_error *err);

	/* --- files -------------------------------------------------------- */
	int (*stat)(struct sbx_instance *inst, const char *path, struct sbx_stat *st,
		    struct sbx_error *err);
	/* Lists a directory; with SBX_CAP_LIST_ATTRS every entry's attributes in one call. */
	int (*list)(struct sbx_instance *inst, const char *path, sbx_list_fn fn, void *ctx,
		    struct sbx_error *err);
	/*
	 * Optional (with SBX_CAP_LIST_ATTRS): in one request, the entries of
	 * path and of the directories below it down to depth levels (2: path's
	 * and its subdirectories'), each with the directory it is in (path or
	 * below it, as path is spelled). Symbolic links are not followed; a
	 * subdirectory with no entries has none.
	 */
	int (*list_tree)(struct sbx_instance *inst, const char *path, int depth, sbx_tree_fn fn,
			 void *ctx, struct sbx_error *err);
	/* Streams bytes [off, off+len) of a file into sink (len < 0: to the end). */
	int (*read)(struct sbx_instance *inst, const char *path, off_t off, off_t len,
		    sbx_sink_fn sink, void *ctx, struct sbx_error *err);
	/* Replaces the file's whole content with the `size` bytes readable from
	 * fd at offset 0 (streamed, never held in memory), creating it with
	 * `mode` if new. Atomic where the provider can make it so. */
	int (*write)(struct sbx_instance *inst, const char *path, int fd, off_t size, mode_t mode,
		     struct sbx_error *err);
	/*
	 * Optional: as write, for a path the caller knows absent (created by
	 * this mount after a negative lookup, never uploaded): no reader can
	 * have an old content to protect, so the bytes go straight to path
	 * (no temporary name, no move, no lookup). A mode other than what an
	 * upload makes may be applied later (queued); the caller does not
	 * stat the file afterwards.
	 */
	int (*write_new)(struct sbx_instance *inst, const char *path, int fd, off_t size,
			 mode_t mode, struct sbx_error *err);
	/*
	 * Optional: as write, into the file itself (its inode kept, not a
	 * replacement): for a file with other hard links, which a new file
	 * moved over its name would split from them. Not atomic: a reader in
	 * the sandbox may see it half written.
	 */
	int (*write_inplace)(struct sbx_instance *inst, const char *path, int fd, off_t size,
			     mode_t mode, struct sbx_error *err);
	/*
	 * Optional: write_new for n files in one request where the service
	 * takes several (daytona's bulk upload, e2b's multipart /files). Each
	 * file gets its own result (files[i].rc, files[i].err): a file the
	 * service refused fails alone, the others are written. The caller
	 * bounds n and the bytes (writeback.h: SBX_WB_BATCH_*).
	 */
	int (*write_new_many)(struct sbx_instance *inst, struct sbx_new_file *files, size_t n);
	int (*truncate)(struct sbx_instance *inst, const char *path, off_t size,
			struct sbx_error *err);
	/*
	 * Optional: the whole contents of several regular files in one request
	 * (the core's prefetch of a directory's small files). Reads the whole
	 * reply and checks it first; then calls fn once per path that arrived
	 * whole, with its index in paths, its bytes and the size and mtime
	 * (st->size, st->mtime; the rest 0) the same reply measured before it
	 * read them, or st NULL when the reply measures none. A path that is
	 * missing, unreadable or not a regular file is left out (no call), not
	 * an error. A reply cut short or malformed, or carrying more than
	 * max_bytes of contents, calls fn for none and fails (-EIO, -EFBIG).
	 * A non-zero fn return stops the calls and is returned. Acts with the
	 * identity of read().
	 */
	int (*read_many)(struct sbx_instance *inst, const char *const *paths, size_t n,
			 size_t max_bytes,
			 int (*fn)(void *ctx, size_t index, const char *data, size_t len,
				   const struct sbx_stat *st),
			 void *ctx, struct sbx_error *err);
	int (*mkdir)(struct sbx_instance *inst, const char *path, mode_t mode,
		     struct sbx_error *err);
	int (*unlink)(struct sbx_instance *inst, const char *path, struct sbx_error *err);
	int (*rmdir)(struct sbx_instance *inst, const char *path, struct sbx_error *err);
	/*
	 * Optional: as rmdir, for a directory the caller knows empty (a
	 * listing of it fetched or made within the cache's TTL lost every
	 * name through this mount since): the provider may queue the
	 * removal and return 0; if it fails later (the sandbox put a name
	 * there meanwhile), the failure is recorded against path and
	 * reported in the lease's `error`.
	 */
	int (*rmdir_empty)(struct sbx_instance *inst, const char *path, struct sbx_error *err);
	/*
	 * Optional: as mkdir, for a directory whose attributes the caller
	 * made up (the mode asked, the owner uploads give: see the core's
	 * made_up_dir): the provider may queue the creation and return 0,
	 * to be made before anything that needs it reaches the sandbox, or
	 * by the service itself, alike, with the first upload into it. If
	 * it fails later, the failure is recorded against path and reported
	 * in the lease's `error`.
	 */
	int (*mkdir_new)(struct sbx_instance *inst, const char *path, mode_t mode,
			 struct sbx_error *err);
	/* Renames, replacing an existing target (flags: RENAME_NOREPLACE/EXCHANGE, 0). */
	int (*rename)(struct sbx_instance *inst, const char *from, const char *to, unsigned flags,
		      struct sbx_error *err);
	int (*chmod)(struct sbx_instance *inst, const char *path, mode_t mode,
		     struct sbx_error *err);
	int (*chown)(struct sbx_instance *inst, const char *path, uid_t uid, gid_t gid,
		     struct sbx_error *err);
	/* ts[0] atime, ts[1] mtime; UTIME_NOW / UTIME_OMIT allowed. */
	int (*utimens)(struct sbx_instance *inst, const char *path, const struct timespec ts[2],
		       struct sbx_error *err);
	int (*symlink)(struct sbx_instance *inst, const char *target, const char *path,
		       struct sbx_error *err);
	/* Writes the target NUL-terminated into buf (truncated to size-1). */
	int (*readlink)(struct sbx_instance *inst, const char *path, char *buf, size_t size,
			struct sbx_error *err);
	/*
	 * Optional: the text of every symbolic link directly in dir, in one
	 * request (fn once per link). The core asks it when a readlink (or a
	 * link's stat, whose size is the length readlink answers) misses its
	 * cache, so `ls -l` or `du` of a directory of links costs one request,
	 * not one per link; readlink remains for what this does not answer.
	 */
	int (*readlinks)(struct sbx_instance *inst, const char *dir, sbx_link_fn fn, void *ctx,
			 struct sbx_error *err);
	int (*link)(struct sbx_instance *inst, const char *from, const char *to,
		    struct sbx_error *err);
	int (*mknod)(struct sbx_instance *inst, const char *path, mode_t mode, dev_t dev,
		     struct sbx_error *err);
	int (*statfs)(struct sbx_instance *inst, const char *path, struct statvfs *st,
		      struct sbx_error *err);
	/* Applies queued metadata changes (batched chmod/utimens...). The core
	 * calls it before a run, a pause, and on fsync. Optional. */
	int (*sync)(struct sbx_instance *inst, struct sbx_error *err);
	/*
	 * A queued change that fails when applied is recorded against the path
	 * it concerns (and reported through sbx_instance.report), not returned
	 * by whichever call applied it. Takes the failure recorded against
	 * path: -errno with err filled, or 0. The core calls it at fsync, after
	 * sync. Optional.
	 */
	int (*take_failure)(struct sbx_instance *inst, const char *path, struct sbx_error *err);

	/* --- direct file handles (SBX_CAP_DIRECT_IO providers) ------------ */
	/* Opens path with open(2) flags/mode; *fh is the provider's handle. */
	int (*open)(struct sbx_instance *inst, const char *path, int flags, mode_t mode,
		    uint64_t *fh, struct sbx_error *err);
	/* Return bytes transferred or -errno. */
	ssize_t (*pread)(struct sbx_instance *inst, uint64_t fh, char *buf, size_t size, off_t off,
			 struct sbx_error *err);
	ssize_t (*pwrite)(struct sbx_instance *inst, uint64_t fh, const char *buf, size_t size,
			  off_t off, struct sbx_error *err);
	int (*ftruncate)(struct sbx_instance *inst, uint64_t fh, off_t size, struct sbx_error *err);
	/* fallocate(2) with its mode (KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE). Optional: EOPNOTSUPP. */
	int (*fallocate)(struct sbx_instance *inst, uint64_t fh, int mode, off_t off, off_t len,
			 struct sbx_error *err);
	/* lseek(2) with SEEK_DATA or SEEK_HOLE: the offset, or -errno (ENXIO: none at or
	 * after off). Optional: without it fs/ answers as for a file with no holes. */
	off_t (*seek_data)(struct sbx_instance *inst, uint64_t fh, off_t off, int whence,
			   struct sbx_error *err);
	int (*fsync)(struct sbx_instance *inst, uint64_t fh, int datasync, struct sbx_error *err);
	/* Extended attributes (struct sbx_xattr_req). Optional: without it fs/ answers ENOTSUP. */
	ssize_t (*xattr)(struct sbx_instance *inst, const char *path,
			 const struct sbx_xattr_req *rq, struct sbx_error *err);
	int (*fstat)(struct sbx_instance *inst, uint64_t fh, struct sbx_stat *st,
		     struct sbx_error *err);
	void (*close)(struct sbx_instance *inst, uint64_t fh);

	/* --- change notification ------------------------------------------ */
	/*
	 * Asks the provider to report changes made inside the sandbox by
	 * anything else (a background job, an agent): cb(ctx, path) with the
	 * absolute path that changed, or path NULL for "anything may have
	 * changed" (events may have been lost, e.g. after a reconnect). cb
	 * runs on a provider thread: it must be thread-safe, quick, and must
	 * not call set_notify() or release(). cb NULL stops the reports; once
	 * set_notify(NULL) or release() returns, no call is running or will
	 * come. Optional (NULL: the core relies on its cache timeouts).
	 */
	void (*set_notify)(struct sbx_instance *inst, void (*cb)(void *ctx, const char *path),
			   void *ctx);

	/* --- terminal sessions (optional: all four, or none = not supported) */
	/*
	 * Starts an interactive login shell (bash where the sandbox has it,
	 * else sh) on a pseudo terminal of req->cols x req->rows, the TERM
	 * the core puts in req->envs. Output goes to sink from a provider
	 * thread until sink->ended. *out is the session, valid until tty_close.
	 */
	int (*tty_open)(struct sbx_instance *inst, const struct sbx_tty_req *req,
			const struct sbx_tty_sink *sink, struct sbx_tty_session **out,
			struct sbx_error *err);
	/* Types len bytes (keystrokes, pasted text) into the terminal. */
	int (*tty_write)(struct sbx_tty_session *s, const char *data, size_t len,
			 struct sbx_error *err);
	/* Resizes the terminal (the shell gets SIGWINCH). */
	int (*tty_resize)(struct sbx_tty_session *s, unsigned cols, unsigned rows,
			  struct sbx_error *err);
	/*
	 * Ends the session (kills the shell if it still runs) and frees it.
	 * Once it returns, no sink call is running or will come.
	 */
	void (*tty_close)(struct sbx_tty_session *s);

	/* --- control plane -------------------------------------------------- */
	/*
	 * Calls fn once for every sandbox the provider's account (or machine)
	 * has, whether a lease knows it or not: what `sbxfs --list` shows, so a
	 * user can `attach` one again. Reads only: ends, resumes or reclaims
	 * nothing. A non-zero fn return stops the walk and is returned as is.
	 * Needs init(). Optional.
	 */
	int (*list_sandboxes)(sbx_sandbox_fn fn, void *ctx, struct sbx_error *err);

	/* --- ports ---------------------------------------------------------- */
	/*
	 * Fills ports (sorted, at most max) with the TCP ports something listens
	 * on inside the sandbox's own network namespace; returns how many, or
	 * -errno. Optional: without it the core reads /proc/net/tcp{,6} through
	 * run() (see sbx_ports_parse).
	 */
	int (*list_ports)(struct sbx_instance *inst, int *ports, size_t max, struct sbx_error *err);
};

/* Whether p can carry text s (a path, a link text, a terminal's cwd): SBX_CAP_UTF8_TEXT. */
static inline bool sbx_provider_carries(const struct sbx_provider *p, const char *s)
{
	return !(p->caps & SBX_CAP_UTF8_TEXT) || sbx_utf8_valid(s);
}

/*
 * The registry (providers/registry.c). Only providers that pass
 * sbx_provider_check are listed: a compiled-in one that fails is left out
 * with an error in the log.
 */
const struct sbx_provider *sbx_provider_find(const char *name);
/* sbx_provider_find, or NULL and EINVAL "unknown provider "X" (known: ...)" in err. */
const struct sbx_provider *sbx_provider_lookup(const char *name, struct sbx_error *err);
/* NULL-terminated list of every registered provider. */
const struct sbx_provider *const *sbx_provider_all(void);
/*
 * 0, or -errno with the reason: p->abi is not SBX_PROVIDER_ABI (EPROTO),
 * or a slot every provider needs (create, kill, release) or one its caps
 * promise (DIRECT_IO: open/pread/pwrite/close/fstat; LIST_ATTRS: list;
 * PAUSE_MEMORY: pause/unpause) is empty (EINVAL).
 */
int sbx_provider_check(const struct sbx_provider *p, struct sbx_error *err);
/*
 * Adds p (not copied: it must outlive the process) after the check; EEXIST
 * for a name already registered. Call before any mount starts.
 */
int sbx_provider_register(const struct sbx_provider *p, struct sbx_error *err);
/*
 * Calls p->init (if any) with the config's "providers" entry for p (an empty
 * object when providers_cfg has none; providers_cfg may be NULL) and
 * state_dir. Returns init's result.
 */
int sbx_provider_init(const struct sbx_provider *p, json_t *providers_cfg, const char *state_dir,
		      struct sbx_error *err);
/*
 * Initialises every provider. One without its credentials is only
 * unavailable (logged when keep; its leases say why); a value one cannot
 * use (EINVAL: a providers.NAME setting, a URL) fails the call with its
 * message, as every other bad value of the config refuses the mount.
 * Without keep, or on failure, every provider is shut down again: main
 * checks the settings so before daemonising, where the terminal sees them,
 * and the mount initialises for real after the fork.
 */
int sbx_provider_init_all(json_t *providers_cfg, const char *state_dir, bool keep,
			  struct sbx_error *err);
/*
 * 0 when p's last init succeeded (or p was never initialised), else its
 * error again, "provider NAME is unavailable: WHY". The core asks before
 * every create and attach, so a provider whose init failed half-way (its
 * settings refused) is never used with what it had set up by then. One
 * that failed on its keyFile (AUTH) is initialised again first, at most
 * every 2 s, so a key file fixed after the mount is taken.
 */
int sbx_provider_ready(const struct sbx_provider *p, struct sbx_error *err);
/*
 * The -o env_file= path ('-' prefix kept): a provider's key_var there is
 * its key (after a keyFile), at init and at each re-read. Set before any
 * thread starts.
 */
void sbx_provider_set_env_file(const char *path);
/*
 * The service refused p's key: reads it again from where it came (the
 * keyFile, else the env_file) and gives it to p->set_key, so that a key
 * rotated in its file is taken without a remount. Logs a file that can no
 * longer be read. Safe from any thread; a file read per call.
 */
void sbx_provider_key_reread(const struct sbx_provider *p);

/*
 * A provider's key as the header line its calls carry, replaced under
 * running calls when its file has a new one (providers/common.c).
 */
struct sbx_keyhdr {
	pthread_mutex_t lock;
	const char *prefix; /* "X-API-KEY: "... */
	char *line;	    /* prefix + key, a secret: wiped when replaced */
	unsigned gen;	    /* bumped at each change */
	void (*reread)(const struct sbx_provider *p); /* the env's reread_key */
	const struct sbx_provider *provider;
};
#define SBX_KEYHDR_INIT                                                                            \
	{                                                                                          \
		PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, NULL, NULL                               \
	}
/* At init: the line is prefix + key, and env says how to read the key again. */
void sbx_keyhdr_start(struct sbx_keyhdr *k, const struct sbx_provider_env *env, const char *prefix,
		      const char *key);
/* The line becomes prefix + key (set_key's work): true when that changed it. */
bool sbx_keyhdr_set(struct sbx_keyhdr *k, const char *key);
/* A copy of the line ("" before any set; wipe and free it) and its generation. */
char *sbx_keyhdr_get(struct sbx_keyhdr *k, unsigned *gen);
/*
 * After the service refused the line of generation *gen: reads the key
 * again (the env's reread_key). True when the line has changed since (then
 * *line, wiped and freed, is replaced by the new one, and *gen): by this
 * re-read or another call's, so every call refused with the old key retries.
 */
bool sbx_keyhdr_renewed(struct sbx_keyhdr *k, char **line, unsigned *gen);
/* Wipes and forgets the line (at shutdown). */
void sbx_keyhdr_clear(struct sbx_keyhdr *k);
/* Shuts every provider down, and forgets what init_all(keep) was given. */
void sbx_provider_shutdown_all(void);

/*
 * The listening TCP ports in the text of /proc/net/tcp and/or
 * /proc/net/tcp6 (state 0A), deduplicated and sorted, at most max; returns
 * how many (providers/ports.c).
 */
size_t sbx_ports_parse(const char *text, size_t len, int *ports, size_t max);

/* Helpers shared by providers (providers/common.c). */
/* Fills st from a struct stat. */
void sbx_stat_from_sys(struct sbx_stat *st, const struct stat *sys);
void sbx_stat_to_sys(struct stat *sys, const struct sbx_stat *st);
/* The spec's envs plus extra "K=V" strings as one NULL-terminated array
 * (one malloc; free() it). Later entries win on a repeated key. */
char **sbx_envs_merge(const struct sbx_spec *spec, const char *const *extra);

#endif
