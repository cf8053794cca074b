/*
 * http — the libcurl layer every remote provider talks through.
 *
 * What it is: one shared client (settings + a pool of reusable easy
 * handles + a CURLSH share for connections, DNS and TLS sessions, so
 * keep-alive works across FUSE threads), and one call,
 * sbx_http_perform(), that sends a request and collects the reply with a
 * deadline, retries with backoff, and redacted debug dumps. Plus the pure
 * helpers around it (URL escaping, query strings, header parsing, retry
 * delays, curl-error mapping) that the unit tests cover.
 *
 * What it is not: it knows nothing of E2B, Daytona, leases or FUSE. It
 * never interprets a reply's status: any HTTP reply (404 and 500 too) is
 * a success of the call, and the caller maps the status and the error
 * body of its own API. Only transport failures (no reply, deadline,
 * aborted by a callback) are errors here.
 *
 * Security: TLS peer and host verification are always on (there is no
 * switch); redirects are never followed (custom credential headers would
 * go to the new host); only http and https are allowed; debug dumps
 * (log level debug) show headers through sbx_log_redact() and only the
 * size of bodies, since bodies carry tokens (E2B's create reply does).
 *
 * Threads: a client is shared by all threads; every call is independent.
 */
#ifndef SBX_HTTP_H
#define SBX_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/err.h"

/* Kept out of this header so pure modules can use the helpers below
 * without curl's headers; curl's curl_mime is this struct. */
struct curl_mime;
struct curl_mimepart;

/* A multipart part's body, streamed from a descriptor (sbx_http_mime_fd). */
struct sbx_http_fdpart {
	int fd;
	off_t size, pos; /* size bytes from offset 0; pos: the next to send */
	int err;	 /* errno of a failed local read (the request aborts) */
};
/* Makes src's bytes p's body, read with pread as curl sends (each attempt rewinds). */
int sbx_http_mime_fd(struct curl_mimepart *p, struct sbx_http_fdpart *src);

/* Defaults used when a setting or request field is 0. */
#define SBX_HTTP_CONNECT_TIMEOUT_MS 10000L
#define SBX_HTTP_TIMEOUT_MS 60000L /* total, unary calls */
#define SBX_HTTP_IDLE_MS 120000L   /* no byte for this long ends a stream */
#define SBX_HTTP_MAX_ATTEMPTS 4
#define SBX_HTTP_MAX_BODY (8u << 20)	    /* reply kept in memory */
#define SBX_HTTP_MAX_ERROR_BODY (64u << 10) /* non-2xx reply of a sinked request */
#define SBX_HTTP_SINK_BUFFER (256L << 10)   /* libcurl's receive buffer for a sinked body */
#define SBX_HTTP_MAX_HEADERS (64u << 10)
#define SBX_HTTP_RETRY_AFTER_MAX_S 30 /* a longer Retry-After is not waited for */
/*
 * Connections a client's shared cache keeps, in use or idle. libcurl's
 * default (5, CURLOPT_MAXCONNECTS) counts the whole share: past it, every
 * transfer that ends closes the oldest idle connection, so a daemon with
 * more than 5 threads talking at once (FUSE threads, 4 write-back workers
 * a lease, streams) reconnected for nearly every request.
 */
#define SBX_HTTP_MAX_CONNS 64L

struct sbx_http_client;

struct sbx_http_settings {
	const char *user_agent;	   /* NULL: "sbxfs/VERSION" */
	long connect_timeout_ms;   /* 0: SBX_HTTP_CONNECT_TIMEOUT_MS */
	long timeout_ms;	   /* 0: SBX_HTTP_TIMEOUT_MS (unary total) */
	long idle_ms;		   /* 0: SBX_HTTP_IDLE_MS (streams) */
	int max_attempts;	   /* 0: SBX_HTTP_MAX_ATTEMPTS (1 = no retry) */
	const char *ca_file;	   /* extra CA bundle (PEM), or NULL for the system's */
	unsigned max_idle_handles; /* 0: 16 handles kept in the pool */
};

/* Same shape as provider.h's sbx_sink_fn: returns 0, or -errno to stop. */
typedef int (*sbx_http_sink_fn)(void *ctx, const char *data, size_t len);

struct sbx_http_resp;

struct sbx_http_req {
	const char *method; /* NULL: GET without a body, POST with one */
	const char *url;
	const char *const *headers; /* NULL-terminated "Name: value" list, or NULL */

	/* Request body: at most one of these three. Each attempt re-reads it. */
	const void *body; /* in memory, body_len bytes (kept by the caller) */
	size_t body_len;
	bool has_body;		   /* send body/body_len even when body_len is 0 */
	int body_fd;		   /* >= 0: body_size bytes from body_fd at body_off, */
	off_t body_off, body_size; /*   read with pread (fd's offset untouched) */
	/* Builds a multipart body into mime (called per attempt); 0 or -errno. */
	int (*mime_fn)(void *ctx, struct curl_mime *mime);
	void *mime_ctx;

	/*
	 * Reply body: for a 2xx status it goes to sink when set (streamed,
	 * unbounded), else into resp->body bounded by max_body (past it the
	 * call fails with EFBIG). A non-2xx body always goes to resp->body
	 * (bounded by SBX_HTTP_MAX_ERROR_BODY when a sink is set).
	 */
	sbx_http_sink_fn sink;
	void *sink_ctx;
	size_t max_body; /* 0: SBX_HTTP_MAX_BODY */
	/* Called with sink_ctx once a 2xx reply's headers are complete,
	 * before any sink call; return -errno to abort with that errno. */
	int (*on_response)(void *ctx, const struct sbx_http_resp *resp);

	/*
	 * Deadlines. A unary call has a total deadline (timeout_ms, default
	 * the client's) covering every attempt and backoff. A stream has no
	 * total unless timeout_ms is set; it ends when no byte moved for
	 * idle_ms (ETIMEDOUT). Both have the client's connect timeout.
	 */
	bool stream;
	long timeout_ms;
	long idle_ms;

	/*
	 * Retries. Failures before the request reached a server (resolve,
	 * connect) and 429 are retried for every request; 503 and a dropped
	 * connection only when idempotent. Never after a byte reached the
	 * sink. Retry-After (seconds) is honoured when it fits the deadline.
	 */
	bool idempotent;
	int max_attempts; /* 0: the client's */

	const atomic_int *cancel; /* becomes non-zero: abort with ECANCELED */
	bool decompress;	  /* send Accept-Encoding and decode gzip/deflate */
};

#define SBX_HTTP_REQ_INIT                                                                          \
	{                                                                                          \
		.body_fd = -1                                                                      \
	}

struct sbx_http_resp {
	long status;		 /* the final reply's status; 0 if none came */
	char content_type[128];	 /* as sent (with parameters), "" if absent */
	long retry_after_s;	 /* Retry-After in seconds, -1 absent/not a number */
	char content_range[128]; /* "" if absent */
	off_t content_length;	 /* -1 unknown */
	struct sbx_buf headers;	 /* the final reply's header lines, "Name: value\r\n" */
	struct sbx_buf body;	 /* see sbx_http_req */
	int attempts;		 /* how many were made */
};

void sbx_http_resp_init(struct sbx_http_resp *r);
/* Frees the buffers; r can be reused after sbx_http_resp_init(). */
void sbx_http_resp_release(struct sbx_http_resp *r);

/*
 * A new client. Calls curl_global_init once per process (thread-safe
 * here). Returns NULL only on allocation failure. s may be NULL.
 */
struct sbx_http_client *sbx_http_client_new(const struct sbx_http_settings *s);
/* Frees the client and its pooled handles; no call may be in flight. NULL-safe. */
void sbx_http_client_free(struct sbx_http_client *c);

/*
 * Performs req. Returns 0 when a reply arrived (resp->status says which;
 * the caller maps non-2xx), or -errno with *err filled for a transport
 * failure: ETIMEDOUT (deadline, idle stream), ENOTCONN (resolve, connect,
 * reset, nothing received), ECONNREFUSED (TLS handshake or certificate
 * verification failed: we refused the peer, distinct from "unreachable"
 * and from EACCES, which sbxfs keeps for refused credentials), EFBIG
 * (reply over max_body), ECANCELED, EINVAL (bad URL), or the -errno a
 * callback returned. resp must have been initialised; it is reset per
 * attempt and holds the last attempt's reply.
 */
int sbx_http_perform(struct sbx_http_client *c, const struct sbx_http_req *req,
		     struct sbx_http_resp *resp, struct sbx_error *err);

/* --- pure helpers --------------------------------------------------- */

/* Appends s percent-encoded (everything but RFC 3986 unreserved bytes). */
void sbx_http_add_escaped(struct sbx_buf *b, const char *s);
/* Appends "?name=value" (first) or "&name=value", both escaped; a NULL
 * value appends nothing. Looks at b for an existing '?'. */
void sbx_http_add_query(struct sbx_buf *b, const char *name, const char *value);

/*
 * Finds header `name` (case-insensitive) in a block of "Name: value"
 * lines; copies the trimmed value into out (NUL-terminated, truncated to
 * size-1). Returns the value's full length, or -1 if absent.
 */
long sbx_http_header_find(const char *block, size_t len, const char *name, char *out, size_t size);
/* sbx_http_header_find over resp->headers. */
long sbx_http_resp_header(const struct sbx_http_resp *r, const char *name, char *out, size_t size);
/* Parses "HTTP/1.1 206 Partial Content" / "HTTP/2 200"; the status or -1. */
long sbx_http_parse_status_line(const char *line, size_t len);
/* Retry-After as delay-seconds; -1 when absent, negative or an HTTP-date. */
long sbx_http_parse_retry_after(const char *v);
/* "bytes START-END/TOTAL" (TOTAL may be "*": -1). 0 or -EINVAL. */
int sbx_http_parse_content_range(const char *v, off_t *start, off_t *end, off_t *total);
/* True when content type ct has media type `type` (case-insensitive, parameters ignored). */
bool sbx_http_content_type_is(const char *ct, const char *type);
/*
 * A ranged GET: bytes [off, off+len) of the resource (len < 0: to its end)
 * into sink, whether the server answers 206 or ignores the Range (a 200:
 * the bytes before off are skipped, and the transfer is stopped at the
 * range's end: -ECANCELED with `done` set, which is a success). Pass
 * sbx_http_range_response and sbx_http_range_write as the request's
 * on_response and sink, with r as their context.
 */
struct sbx_http_range {
	sbx_http_sink_fn sink;
	void *ctx;
	long status;
	off_t skip, left; /* left < 0: unbounded */
	bool done;	  /* stopped at the range's end on purpose */
};
void sbx_http_range_init(struct sbx_http_range *r, off_t off, off_t len, sbx_http_sink_fn sink,
			 void *ctx);
/* The request's "Range: bytes=..." header in buf, or NULL when the whole is asked. */
const char *sbx_http_range_header(char *buf, size_t size, off_t off, off_t len);
int sbx_http_range_response(void *ctx, const struct sbx_http_resp *resp);
int sbx_http_range_write(void *ctx, const char *data, size_t len);
/*
 * The delay before retry number attempt+1 (attempt counts from 0):
 * Retry-After when given (>= 0), else exponential backoff from 250 ms
 * doubling to 4 s, with jitter drawn from rnd (the upper half of the
 * window). -1 when the delay would not fit remaining_ms (< 0: no
 * deadline) or Retry-After exceeds SBX_HTTP_RETRY_AFTER_MAX_S.
 */
long sbx_http_retry_delay_ms(int attempt, long retry_after_s, long remaining_ms, unsigned rnd);
/* Whether a curl failure (a CURLcode) may be retried: 1 always (nothing was sent),
 * 2 only for idempotent requests, 0 never. */
int sbx_http_curl_retryable(int curl_code);
/* Maps a curl failure to -errno and fills e ("what: curl's text"). */
int sbx_http_error_from_curl(int curl_code, const char *what, struct sbx_error *e);

#endif
