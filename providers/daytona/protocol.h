/*
 * daytona/protocol — Daytona's wire formats to and from C structs.
 *
 * What it is: the pure half of the Daytona provider (see
 * doc/protocols/daytona.md): the Sandbox DTO and its states, the create
 * body, FileInfo to struct sbx_stat, error bodies (NestJS and daemon
 * ErrorResponse) to errno and one line of text, the streaming parser of the
 * multipart reply of /files/bulk-download, session command and log JSON,
 * and the shell wrapper that gives every run its own cwd/env/timeout (the
 * `df -kP` output of statfs is parsed by base/df.h).
 *
 * What it is not: no curl, no sockets, no clock, no global state. api.c and
 * its siblings do the requests; everything here is unit-tested from bytes
 * (tests/unit/check_daytona.c).
 */
#ifndef SBX_DAYTONA_PROTOCOL_H
#define SBX_DAYTONA_PROTOCOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/statvfs.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/spec.h"
#include "provider.h"

/* Upper bounds on what the remote side may make us hold in memory. */
#define DT_JSON_MAX (4u << 20)	   /* one control-plane or FileInfo reply */
#define DT_LIST_MAX (64u << 20)	   /* one directory listing */
#define DT_LOGS_MAX (64u << 20)	   /* one session-log reply (stdout+stderr so far) */
#define DT_ERRBODY_MAX (16u << 10) /* an error body we keep for its message */

/* --- sandboxes ----------------------------------------------------------- */

/* What a SandboxState string means to sbxfs. */
enum dt_phase {
	DT_PHASE_BUSY = 0, /* creating, starting, stopping, pulling_snapshot ... */
	DT_PHASE_STARTED,
	DT_PHASE_STOPPED, /* stopped, archived, paused: `start` brings it back */
	DT_PHASE_GONE,	  /* destroyed, destroying */
	DT_PHASE_FAILED,  /* error, build_failed */
	DT_PHASE_UNKNOWN, /* a state string this build does not know */
};

enum dt_phase dt_state_phase(const char *state);

/* The facts of a Sandbox DTO sbxfs uses (strings truncated to fit). */
struct dt_sandbox {
	char id[128];
	char name[128];
	char state[40];
	char snapshot[256];
	char target[64];
	char toolbox_url[512]; /* toolboxProxyUrl without a trailing '/' ("" if absent) */
	char error_reason[256];
	char language[16]; /* label code-toolbox-language */
	double cpu, gpu, memory_gib, disk_gib;
};

/* Fills sb from a parsed DTO. EIO when it lacks an id. */
int dt_sandbox_parse(json_t *dto, struct dt_sandbox *sb, struct sbx_error *err);

/*
 * One page of GET /sandbox, the 0.218 cursor form {items, nextCursor}: fn
 * once per item that has an id (state "running", "paused" or "gone" for
 * the phases STARTED, STOPPED and GONE, else Daytona's word; lease from
 * the label sbxfs-lease; template the snapshot), then nextCursor into
 * cursor ("" on the last page). EIO when the reply is not that shape; a
 * non-zero fn return stops the walk and is returned.
 */
int dt_sandbox_page(json_t *reply, sbx_sandbox_fn fn, void *ctx, char *cursor, size_t size,
		    struct sbx_error *err);

/*
 * The CreateSandbox body for spec (new reference). A template containing
 * ':' or '/' is an image (buildInfo `FROM <image>`, and only then the
 * resources, rounded up to whole cores / GiB); any other non-empty template
 * is a snapshot name. Labels: code-toolbox-language (the spec's language,
 * default python) and sbxfs-lease = lease. network "none" blocks all
 * traffic (networkBlockAll). target may be NULL.
 * auto_stop_min < 0 leaves autoStopInterval to the server.
 */
json_t *dt_create_body(const struct sbx_spec *spec, const char *lease, const char *target,
		       long auto_stop_min);

/*
 * autoStopInterval (minutes) for a lease that sbxfs itself pauses after
 * idle_s seconds: a backstop well behind sbxfs' own timer (idle + 15 min,
 * rounded up), so Daytona never stops a sandbox sbxfs believes running but
 * an orphaned one (a mount that died) still stops. 0 (never) when idle_s is 0.
 */
long dt_auto_stop_minutes(long idle_s);

/* --- files ----------------------------------------------------------------- */

/*
 * Go's FileMode.String() ("-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx",
 * "dtrwxrwxrwt", "Dcrw-rw-rw-", "urwxr-xr-x" ...) to a mode_t with type and
 * permission bits. perms, when not NULL, is the "0644" octal string that
 * wins for the low 9 bits. -EINVAL when neither parses.
 */
int dt_mode_parse(const char *mode, const char *perms, bool is_dir, mode_t *out);
/*
 * RFC 3339 ("2026-01-01T00:00:00Z", "...00.123456789+02:00"), or Go's
 * time.String() ("2026-01-01 00:00:00.123456789 +0000 UTC"), to a timespec.
 */
int dt_time_parse(const char *s, struct timespec *ts);
/*
 * An owner/group field: a number is the id; "root" is 0; any other name is
 * unknown to us and maps to 65534 (nobody), as NFS does.
 */
unsigned dt_owner_parse(const char *s);
/*
 * One FileInfo object to st; *name (borrowed from fi) is its `name`.
 * -EIO when the object has no usable mode, or (name not NULL: a listing
 * entry) no usable name.
 */
int dt_fileinfo_parse(json_t *fi, struct sbx_stat *st, const char **name);

/* --- errors ---------------------------------------------------------------- */

/*
 * Maps an HTTP error reply to -errno and fills err ("what: message"). The
 * body may be a NestJS error ({statusCode, error, message (string or
 * array)}), a daemon ErrorResponse ({statusCode, message, code, source}),
 * other text, or empty. The daemon's structured `code` decides first
 * (FILE_NOT_FOUND, FILE_ACCESS_DENIED, REQUEST_TIMEOUT ...), then the
 * status (sbx_errno_from_http: 401/403 EACCES, 404 ENOENT, 408 ETIMEDOUT,
 * 409 EEXIST, 429 EAGAIN, 502/503 ENOTCONN, other 5xx EIO). A proxy reply
 * saying the sandbox is not running (source DAYTONA_PROXY, or code
 * SANDBOX_NOT_STARTED) is ENOTCONN.
 */
int dt_error_from_reply(long status, const char *body, size_t len, const char *what,
			struct sbx_error *err);

/* --- bulk-download multipart ------------------------------------------------ */

/*
 * Extracts the boundary of a "multipart/...; boundary=X" Content-Type
 * (quoted or not). -EPROTO when absent or longer than 200 bytes.
 */
int dt_boundary_parse(const char *content_type, char *out, size_t size);

struct dt_multipart_ops {
	/* A part starts: its form name and filename (decoded; "" when absent). */
	int (*begin)(void *ctx, const char *name, const char *filename);
	int (*data)(void *ctx, const char *p, size_t n);
	int (*end)(void *ctx);
};

/*
 * A streaming multipart/form-data parser: feed it the body in chunks of
 * any size; it calls ops as parts begin, carry bytes and end. Headers of a
 * part are bounded (8 KiB); part bodies are not held, only passed on. A
 * part with Content-Length (the daemon sends it for files) is counted, so
 * a file containing the daemon's fixed boundary still arrives whole.
 */
struct dt_multipart {
	const struct dt_multipart_ops *ops;
	void *ctx;
	char delim[256]; /* "\r\n--" boundary */
	size_t dlen;
	int state;
	long long part_len;  /* the current part's Content-Length, -1 if none */
	struct sbx_buf pend; /* bytes not yet known to be outside a delimiter */
	int rc;		     /* first error (sticky) */
};

int dt_multipart_init(struct dt_multipart *mp, const char *boundary,
		      const struct dt_multipart_ops *ops, void *ctx);
/* 0, or -errno: the ops' own error, or -EPROTO for a malformed stream. */
int dt_multipart_feed(struct dt_multipart *mp, const char *p, size_t n);
/* Checks that the closing delimiter was seen (-EPROTO if the body was cut). */
int dt_multipart_finish(struct dt_multipart *mp);
void dt_multipart_release(struct dt_multipart *mp);

/*
 * The single-file download of read(): one multipart reply, whose only
 * accepted part is `file` with filename == path; bytes [off, off+len) go
 * to sink (len < 0: to the end). An `error` part becomes the errno of its
 * ErrorResponse. When the range is complete, feed returns DT_DOWNLOAD_DONE
 * (positive) so the caller may stop the transfer early.
 */
#define DT_DOWNLOAD_DONE 1
struct dt_download {
	struct dt_multipart mp;
	const char *path;
	long long skip, left; /* left < 0: unbounded */
	sbx_sink_fn sink;
	void *sink_ctx;
	int part; /* 0 none yet, 1 in file, 2 in error, 3 skipping, 4 file done */
	bool got_file;
	struct sbx_buf errbody;
	struct sbx_error *err;
};

int dt_download_init(struct dt_download *d, const char *content_type, const char *path,
		     long long off, long long len, sbx_sink_fn sink, void *ctx,
		     struct sbx_error *err);
int dt_download_feed(struct dt_download *d, const char *p, size_t n);
/* 0 when the file part arrived whole (or the range was complete). */
int dt_download_finish(struct dt_download *d);
void dt_download_release(struct dt_download *d);

/* --- sessions ---------------------------------------------------------------- */

/* GET .../command/{id}: *done once exitCode is present, *exit_code then set. */
int dt_command_parse(const char *body, size_t len, bool *done, int *exit_code);

/* GET .../logs as JSON {output, stdout, stderr}: borrowed views into *root. */
struct dt_logs {
	json_t *root;
	const char *out, *err;
	size_t out_len, err_len;
};

int dt_logs_parse(const char *body, size_t len, struct dt_logs *logs);
void dt_logs_release(struct dt_logs *logs);

/* --- commands -------------------------------------------------------------- */

/* What one run needs around its command text. */
struct dt_wrap {
	const char *shell;	 /* shell text, or ... */
	const char *const *argv; /* ... an argv */
	const char *cwd;	 /* NULL: the daemon's default */
	const char *const *envs; /* "K=V" list or NULL */
	long timeout_ms;	 /* > 0: killed (SIGKILL, whole group) by `timeout` */
	/*
	 * Or NULL: where the run writes "PID TOKEN" as it starts; PID leads
	 * the run's own process group (`timeout` makes one even without a
	 * deadline), so dt_kill_command() can stop it and nothing else.
	 */
	const char *pidfile;
	const char *token; /* [0-9a-f]+, with pidfile */
};

/* Appends the shell text that kills the run that wrote (pidfile, token); exit 0 if it did. */
void dt_kill_command(struct sbx_buf *out, const char *pidfile, const char *token);

/*
 * Appends the shell text that runs w independently of the session shell's
 * state: `(cd DIR && exec [timeout -s KILL S] env K=V sh -c TEXT) </dev/null`,
 * every piece single-quoted. -EINVAL for an env entry without '=' or with
 * a key that is not a shell name.
 */
int dt_wrap_command(struct sbx_buf *out, const struct dt_wrap *w);

#endif
