/*
 * protocol — E2B's JSON shapes to C structs and back: provider settings,
 * the create body, Sandbox/SandboxDetail replies, control-plane error
 * bodies, envd's EntryInfo, process and watch events, and the protobuf
 * JSON rules they follow (int64 as strings or numbers, bytes as base64,
 * absent = zero; base64 via base/base64.h). The `df` parser behind statfs
 * is base/df.h.
 *
 * Pure: jansson only, no curl, no I/O, no threads. It is not the
 * transport (api/envd code) and not the Connect framing (connect.c).
 */
#ifndef SBX_E2B_PROTOCOL_H
#define SBX_E2B_PROTOCOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/statvfs.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/spec.h"
#include "provider.h"
#include "rmeta.h"

#define E2B_DEFAULT_DOMAIN "e2b.app"
#define E2B_DEFAULT_TEMPLATE "base"
#define E2B_DEFAULT_TIMEOUT_S 3600L
#define E2B_ENVD_PORT 49983
#define E2B_INTERP_PORT 49999

/* Where and how to reach E2B. Strings are owned (e2b_settings_free). */
struct e2b_settings {
	char *api_key;	   /* secret: never logged, never shown; handed to the key line at init */
	char *api_url;	   /* control plane base, no trailing '/' */
	char *sandbox_url; /* envd base override (tests), or NULL */
	char *domain;
	/* Deadlines in ms (0: the defaults below); config only, no SDK variable. */
	long request_ms; /* requestTimeout: one unary call, retries included */
	long
	    transfer_ms; /* transferTimeout: no byte for this long ends a file transfer or stream */
	long connect_ms; /* connectTimeout: TCP + TLS set-up */
};

#define E2B_REQUEST_TIMEOUT_MS 60000L
#define E2B_TRANSFER_TIMEOUT_MS 60000L
#define E2B_CONNECT_TIMEOUT_MS 10000L

/* getenv-like lookup, so tests need not touch the environment. */
typedef const char *(*e2b_getenv_fn)(const char *name);

/*
 * Reads settings the way SDK 2.51 does: E2B_API_KEY, E2B_DOMAIN,
 * E2B_API_URL, E2B_SANDBOX_URL, each overridable by the config object's
 * domain, apiUrl, sandboxUrl (cfg may be NULL). A missing key is
 * EACCES "E2B_API_KEY is not set"; URLs other than http(s) are EINVAL.
 * The deadlines requestTimeout, transferTimeout, connectTimeout are a
 * number of seconds (fractions allowed) or a duration string ("90s",
 * "2m"); anything else, or <= 0, is EINVAL naming the key.
 */
int e2b_settings_load(struct e2b_settings *s, json_t *cfg, e2b_getenv_fn get, struct sbx_error *e);
void e2b_settings_free(struct e2b_settings *s);

/*
 * The envd base URL for a sandbox: sandbox_url when set; the shared
 * https://sandbox.DOMAIN for E2B's own domains; else
 * https://49983-ID.DOMAIN (as the SDK). domain: the sandbox's own, or
 * NULL for the settings' one. Appends to b.
 */
void e2b_envd_base(struct sbx_buf *b, const struct e2b_settings *s, const char *id,
		   const char *domain);
/* Uploads go to DIR/E2B_TEMP_PREFIX<8 hex>~NAME, then Move over DIR/NAME. */
#define E2B_TEMP_PREFIX ".sbxfs-"
/* Whether the last component of path is such a temporary upload name. */
bool e2b_is_temp_name(const char *path);
/* `https://PORT-ID.DOMAIN`: the SDK's getHost() with its scheme. */
void e2b_host(struct sbx_buf *b, const struct e2b_settings *s, const char *id, const char *domain,
	      int port);

/* The NewSandboxV2 body for spec (new reference). */
json_t *e2b_create_body(const struct sbx_spec *spec, const char *lease);

/* The parts of a Sandbox / SandboxDetail reply sbxfs uses. Owned strings. */
struct e2b_sandbox {
	char *id, *template_id, *envd_version, *domain;
	char *access_token;  /* envdAccessToken: secret */
	char *traffic_token; /* trafficAccessToken: secret */
	char *state;	     /* "running" | "paused" (detail only) */
	char *started_at, *end_at;
	long cpu_count, memory_mb, disk_mb;
};
/* Parses a reply object; EPROTO when sandboxID is missing. */
int e2b_sandbox_parse(json_t *j, struct e2b_sandbox *sb, struct sbx_error *e);
void e2b_sandbox_free(struct e2b_sandbox *sb);

/*
 * Maps a failed control-plane reply ({code, message} body) to -errno:
 * 401/403 EACCES, 404 ENOENT, 409 EEXIST, 429 EAGAIN (after retries), 503
 * EAGAIN (service busy), 502 ENOTCONN, 504 ETIMEDOUT, 507 ENOSPC, 400
 * EINVAL, other EIO. Text: "what: STATUS message" (never the key).
 */
int e2b_api_error(long status, const char *body, size_t len, const char *what, struct sbx_error *e);

/* RFC 3339 ("2024-01-01T00:00:00.5Z", offsets allowed) to a timespec; 0 or -EINVAL. */
int e2b_parse_time(const char *s, struct timespec *ts);
/* An int64 that protobuf JSON sends as a string or a number; 0 or -EINVAL. */
int e2b_json_int64(json_t *v, long long *out);

/*
 * EntryInfo to attributes (lstat view): type and mode from `permissions`
 * (Go's FileMode.String(), sbx_rmeta_gomode), else from `type`/`mode`; a
 * symlink's size is `size` (its text's length). Owner/group names through
 * the sandbox's own tables (ids; NULL: numbers and "root" only, any other
 * name 65534). Returns 0, or -EINVAL for an entry without a usable type.
 */
int e2b_entry_to_stat(json_t *entry, struct sbx_rmeta_ids *ids, struct sbx_stat *st);

/* The StartRequest of `bash -l -c TEXT` or an argv (exactly one set). */
json_t *e2b_start_body(const char *shell, const char *const *argv, const char *const *envs,
		       const char *cwd);

enum e2b_proc_kind {
	E2B_PROC_OTHER = 0,
	E2B_PROC_START,
	E2B_PROC_DATA,
	E2B_PROC_END,
	E2B_PROC_KEEPALIVE
};

struct e2b_proc_event {
	enum e2b_proc_kind kind;
	unsigned pid;	     /* start */
	int stream;	     /* data: SBX_STDOUT or SBX_STDERR (0: pty, ignored) */
	struct sbx_buf data; /* data: decoded bytes */
	int exit_code;	     /* end: exitCode, or 128+N when killed by signal N */
	bool exited;
	char status[64]; /* end: "exit status 3", "signal: killed" */
};

void e2b_proc_event_init(struct e2b_proc_event *ev);
void e2b_proc_event_release(struct e2b_proc_event *ev);
/* Parses one StartResponse message ({"event":{...}}); 0 or -EPROTO. */
int e2b_proc_event_parse(const char *json, size_t len, struct e2b_proc_event *ev,
			 struct sbx_error *e);

enum e2b_watch_kind { E2B_WATCH_OTHER = 0, E2B_WATCH_START, E2B_WATCH_EVENT, E2B_WATCH_KEEPALIVE };
/*
 * Parses one WatchDirResponse: for an event, the changed name (relative to
 * the watched directory) is copied into name. 0 or -EPROTO.
 */
int e2b_watch_event_parse(const char *json, size_t len, enum e2b_watch_kind *kind, char *name,
			  size_t size);

#endif
