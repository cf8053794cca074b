/*
 * http — see http.h. The pool is a mutex-protected free list of easy
 * handles; connections, DNS and TLS sessions live in one CURLSH share so
 * any handle reuses any live connection. Each transfer keeps its state in
 * a struct xfer on the caller's stack: nothing of a call outlives it.
 * The pure helpers of http.h live in http_util.c.
 */
#include "base/http.h"
#include "base/xalloc.h"

#include <curl/curl.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sysutil.h"
#include "config.h"

struct pooled {
	CURL *h;
	struct pooled *next;
};

struct sbx_http_client {
	struct sbx_http_settings set;
	char *user_agent, *ca_file;
	CURLSH *share;
	pthread_mutex_t share_locks[CURL_LOCK_DATA_LAST];
	pthread_mutex_t lock; /* protects free_list, n_free */
	struct pooled *free_list;
	unsigned n_free;
};

/* State of one attempt; the curl callbacks' ctx. */
struct xfer {
	const struct sbx_http_req *req;
	struct sbx_http_resp *resp;
	off_t read_pos;	 /* fd body: bytes already handed to curl */
	bool in_headers; /* a header block is being received */
	bool final_2xx;	 /* the final reply's headers are complete and 2xx */
	bool delivered;	 /* a byte reached the sink: no retry */
	int cb_err;	 /* positive errno a callback stopped with */
	const char *cb_msg;
	/* Streams: when a byte last moved either way (see on_progress). */
	long idle_ms, moved_ms;
	curl_off_t moved;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int sbx_http_curl_retryable(int curl_code)
{
	switch ((CURLcode)curl_code) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
		return 1;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 2;
	default:
		return 0;
	}
}

int sbx_http_error_from_curl(int curl_code, const char *what, struct sbx_error *e)
{
	CURLcode rc = (CURLcode)curl_code;
	const char *text = curl_easy_strerror(rc);
	int err = EIO;
	enum sbx_errcode code = SBX_E_INTERNAL;
	if (sbx_http_curl_retryable(rc))
		rc = CURLE_WEIRD_SERVER_REPLY; /* resolve, connect, reset: all ENOTCONN */
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		err = ETIMEDOUT;
		code = SBX_E_TIMEOUT;
		break;
	case CURLE_WEIRD_SERVER_REPLY:
		err = ENOTCONN;
		code = SBX_E_CONNECTION_FAILED;
		break;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_USE_SSL_FAILED:
		err = ECONNREFUSED;
		code = SBX_E_CONNECTION_FAILED;
		break;
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		err = EINVAL;
		code = SBX_E_INTERNAL;
		break;
	case CURLE_OUT_OF_MEMORY:
		err = ENOMEM;
		break;
	case CURLE_TOO_MANY_REDIRECTS:
	default:
		break;
	}
	return sbx_error_set(e, err, code, "%s: %s", what ? what : "http", text);
}

/* --- responses --------------------------------------------------------- */

void sbx_http_resp_init(struct sbx_http_resp *r)
{
	memset(r, 0, sizeof(*r));
	sbx_buf_init(&r->headers);
	sbx_buf_init(&r->body);
	r->retry_after_s = -1;
	r->content_length = -1;
}

void sbx_http_resp_release(struct sbx_http_resp *r)
{
	if (!r)
		return;
	sbx_buf_release(&r->headers);
	sbx_buf_release(&r->body);
}

static void resp_reset(struct sbx_http_resp *r)
{
	r->status = 0;
	r->content_type[0] = '\0';
	r->content_range[0] = '\0';
	r->retry_after_s = -1;
	r->content_length = -1;
	sbx_buf_reset(&r->headers);
	sbx_buf_reset(&r->body);
}

/* --- the client -------------------------------------------------------- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ctx)
{
	struct sbx_http_client *c = ctx;
	pthread_mutex_lock(&c->share_locks[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ctx)
{
	struct sbx_http_client *c = ctx;
	pthread_mutex_unlock(&c->share_locks[data]);
}

struct sbx_http_client *sbx_http_client_new(const struct sbx_http_settings *s)
{
	struct sbx_http_client *c;
	pthread_once(&global_once, global_init);
	c = sbx_xcalloc(1, sizeof(*c));
	if (s)
		c->set = *s;
	c->user_agent =
	    sbx_xstrdup(c->set.user_agent ? c->set.user_agent : "sbxfs/" PACKAGE_VERSION);
	c->ca_file = c->set.ca_file ? sbx_xstrdup(c->set.ca_file) : NULL;
	c->set.user_agent = c->user_agent;
	c->set.ca_file = c->ca_file;
	if (!c->set.connect_timeout_ms)
		c->set.connect_timeout_ms = SBX_HTTP_CONNECT_TIMEOUT_MS;
	if (!c->set.timeout_ms)
		c->set.timeout_ms = SBX_HTTP_TIMEOUT_MS;
	if (!c->set.idle_ms)
		c->set.idle_ms = SBX_HTTP_IDLE_MS;
	if (!c->set.max_attempts)
		c->set.max_attempts = SBX_HTTP_MAX_ATTEMPTS;
	if (!c->set.max_idle_handles)
		c->set.max_idle_handles = 16;
	pthread_mutex_init(&c->lock, NULL);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&c->share_locks[i], NULL);
	c->share = curl_share_init();
	if (!c->share)
		goto out_locks;
	curl_share_setopt(c->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(c->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(c->share, CURLSHOPT_USERDATA, c);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	return c;

out_locks:
	sbx_http_client_free(c); /* nothing pooled yet; the share, if made */
	return NULL;
}

void sbx_http_client_free(struct sbx_http_client *c)
{
	if (!c)
		return;
	while (c->free_list) {
		struct pooled *p = c->free_list;
		c->free_list = p->next;
		curl_easy_cleanup(p->h);
		free(p);
	}
	if (c->share)
		curl_share_cleanup(c->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&c->share_locks[i]);
	pthread_mutex_destroy(&c->lock);
	free(c->user_agent);
	free(c->ca_file);
	free(c);
}

static CURL *handle_get(struct sbx_http_client *c)
{
	struct pooled *p;
	CURL *h;
	pthread_mutex_lock(&c->lock);
	p = c->free_list;
	if (p) {
		c->free_list = p->next;
		c->n_free--;
	}
	pthread_mutex_unlock(&c->lock);
	if (p) {
		h = p->h;
		free(p);
		curl_easy_reset(h);
		return h;
	}
	return curl_easy_init();
}

static void handle_put(struct sbx_http_client *c, CURL *h)
{
	struct pooled *p = sbx_xmalloc(sizeof(*p));
	p->h = h;
	pthread_mutex_lock(&c->lock);
	if (c->n_free < c->set.max_idle_handles) {
		p->next = c->free_list;
		c->free_list = p;
		c->n_free++;
		p = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (p) {
		curl_easy_cleanup(h);
		free(p);
	}
}

/* --- callbacks ---------------------------------------------------------- */

static size_t xfer_stop(struct xfer *x, int err, const char *msg)
{
	x->cb_err = err < 0 ? -err : err;
	x->cb_msg = msg;
	return 0;
}

static void headers_done(struct xfer *x)
{
	struct sbx_http_resp *r = x->resp;
	char v[64];
	sbx_http_resp_header(r, "Content-Type", r->content_type, sizeof(r->content_type));
	sbx_http_resp_header(r, "Content-Range", r->content_range, sizeof(r->content_range));
	if (sbx_http_resp_header(r, "Retry-After", v, sizeof(v)) >= 0)
		r->retry_after_s = sbx_http_parse_retry_after(v);
	if (sbx_http_resp_header(r, "Content-Length", v, sizeof(v)) >= 0) {
		char *e;
		long long n = strtoll(v, &e, 10);
		if (e != v && !*e && n >= 0)
			r->content_length = (off_t)n;
	}
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	struct sbx_http_resp *r = x->resp;
	size_t len = size * n;
	long st = sbx_http_parse_status_line(data, len);
	if (x->idle_ms)
		x->moved_ms = sbx_now_ms(); /* header bytes moved too */
	if (st >= 0) {
		/* A new reply (after a 1xx, or the first). */
		r->status = st;
		sbx_buf_reset(&r->headers);
		x->in_headers = true;
		return len;
	}
	if (!x->in_headers)
		return len;
	if (len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
		x->in_headers = false;
		if (r->status >= 100 && r->status < 200)
			return len;
		headers_done(x);
		if (r->status >= 200 && r->status < 300) {
			x->final_2xx = true;
			if (x->req->on_response) {
				int rc = x->req->on_response(x->req->sink_ctx, r);
				if (rc)
					return xfer_stop(x, rc, "rejected the reply");
			}
		}
		return len;
	}
	if (r->headers.len + len > SBX_HTTP_MAX_HEADERS)
		return xfer_stop(x, EFBIG, "reply headers too large");
	sbx_buf_add(&r->headers, data, len);
	return len;
}

static size_t on_write(char *data, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	const struct sbx_http_req *req = x->req;
	size_t len = size * n, max;
	if (x->final_2xx && req->sink) {
		int rc = req->sink(req->sink_ctx, data, len);
		x->delivered = true;
		if (rc)
			return xfer_stop(x, rc, "stopped by the receiver");
		return len;
	}
	max = req->sink ? SBX_HTTP_MAX_ERROR_BODY
			: (req->max_body ? req->max_body : SBX_HTTP_MAX_BODY);
	if (x->final_2xx && !req->sink && x->resp->body.len + len > max)
		return xfer_stop(x, EFBIG, "reply larger than the limit");
	if (!x->final_2xx && x->resp->body.len + len > max) {
		/* An error body: keep its head, drop the rest quietly. */
		if (x->resp->body.len < max)
			sbx_buf_add(&x->resp->body, data, max - x->resp->body.len);
		return len;
	}
	sbx_buf_add(&x->resp->body, data, len);
	return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ctx)
{
	struct xfer *x = ctx;
	const struct sbx_http_req *req = x->req;
	off_t left = req->body_size - x->read_pos;
	size_t want = size * n;
	ssize_t got;
	if (left <= 0)
		return 0;
	if ((off_t)want > left)
		want = (size_t)left;
	do
		got = pread(req->body_fd, buf, want, req->body_off + x->read_pos);
	while (got < 0 && errno == EINTR);
	if (got < 0) {
		xfer_stop(x, errno, "reading the local file failed");
		return CURL_READFUNC_ABORT;
	}
	if (got == 0) {
		xfer_stop(x, EIO, "local file shrank during upload");
		return CURL_READFUNC_ABORT;
	}
	x->read_pos += got;
	return (size_t)got;
}

static int on_seek(void *ctx, curl_off_t off, int origin)
{
	struct xfer *x = ctx;
	if (origin != SEEK_SET || off < 0 || off > x->req->body_size)
		return CURL_SEEKFUNC_CANTSEEK;
	x->read_pos = (off_t)off;
	return CURL_SEEKFUNC_OK;
}

/*
 * Also the stream's idle deadline. curl's own low-speed check averages
 * over a window of several seconds, so a request body sent at once keeps
 * an upload that then waits for an answer "fast" for seconds past
 * idle_ms (3x a 3 s deadline); here any byte in or out restarts the clock
 * and nothing else does.
 */
static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct xfer *x = ctx;
	long now;
	if (x->req->cancel && atomic_load(x->req->cancel)) {
		xfer_stop(x, ECANCELED, "cancelled");
		return 1;
	}
	if (!x->idle_ms)
		return 0;
	now = sbx_now_ms();
	if (dn + un != x->moved || !x->moved_ms) {
		x->moved = dn + un;
		x->moved_ms = now;
	} else if (now - x->moved_ms >= x->idle_ms) {
		xfer_stop(x, ETIMEDOUT, "no data moved within the idle deadline");
		return 1;
	}
	return 0;
}

static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *ctx)
{
	char red[4096];
	const char *dir;
	switch (type) {
	case CURLINFO_TEXT:
		dir = "*";
		break;
	case CURLINFO_HEADER_IN:
		dir = "<";
		break;
	case CURLINFO_HEADER_OUT:
		dir = ">";
		break;
	case CURLINFO_DATA_IN:
		sbx_log(SBX_LOG_DEBUG, "http: < [%zu bytes of body]", size);
		return 0;
	case CURLINFO_DATA_OUT:
		sbx_log(SBX_LOG_DEBUG, "http: > [%zu bytes of body]", size);
		return 0;
	default:
		return 0;
	}
	sbx_log_redact(red, sizeof(red), data, size);
	/* One log line per header line keeps syslog readable. */
	for (char *line = red, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		line[strcspn(line, "\r")] = '\0';
		if (*line)
			sbx_log(SBX_LOG_DEBUG, "http: %s %s", dir, line);
	}
	return 0;
}

/* --- perform ------------------------------------------------------------ */

static int setup(struct sbx_http_client *c, CURL *h, struct xfer *x, struct curl_slist **hdrs,
		 curl_mime **mime, long attempt_timeout_ms, struct sbx_error *err)
{
	const struct sbx_http_req *req = x->req;
	const char *method = req->method;
	bool body = req->has_body || req->body || req->body_fd >= 0 || req->mime_fn;
	long idle_ms = req->idle_ms ? req->idle_ms : c->set.idle_ms;

	curl_easy_setopt(h, CURLOPT_SHARE, c->share);
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, c->set.user_agent);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->set.ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->set.ca_file);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	curl_easy_setopt(h, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, SBX_HTTP_MAX_CONNS);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->set.connect_timeout_ms);
	if (attempt_timeout_ms > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, attempt_timeout_ms);
	if (req->stream) {
		x->idle_ms = idle_ms;
		/* on_progress has the idle deadline; this is a backstop. */
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (idle_ms + 999) / 1000);
	}
	if (req->decompress)
		curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");

	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	/* A sinked body (a download) in big pieces: fewer writes and wake-ups. */
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, req->sink ? SBX_HTTP_SINK_BUFFER : 16384L);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	if (sbx_log_level() >= SBX_LOG_DEBUG) {
		curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
		curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
	}

	/* "Expect:" off: no 100-continue round trip before uploads. */
	*hdrs = curl_slist_append(NULL, "Expect:");
	for (const char *const *hp = req->headers; hp && *hp && *hdrs; hp++)
		*hdrs = curl_slist_append(*hdrs, *hp);
	if (!*hdrs)
		return sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "out of memory");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);

	if (req->mime_fn) {
		int rc;
		*mime = curl_mime_init(h);
		if (!*mime)
			return sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "out of memory");
		rc = req->mime_fn(req->mime_ctx, *mime);
		if (rc)
			return sbx_error_set(err, rc, SBX_E_INTERNAL, "building the form failed");
		curl_easy_setopt(h, CURLOPT_MIMEPOST, *mime);
	} else if (req->body_fd >= 0) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_size);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, x);
	} else if (body) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? (const char *)req->body : "");
	}
	if (!method)
		method = body ? "POST" : "GET";
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, body ? "POST" : "GET"))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	return 0;
}

/* Sleeps ms, waking early (false) when the request is cancelled. */
static bool backoff_sleep(const struct sbx_http_req *req, long ms)
{
	while (ms > 0) {
		long step = ms > 50 ? 50 : ms;
		struct timespec ts = {0, step * 1000000L};
		if (req->cancel && atomic_load(req->cancel))
			return false;
		nanosleep(&ts, NULL);
		ms -= step;
	}
	return !(req->cancel && atomic_load(req->cancel));
}

static unsigned jitter(void)
{
	static _Thread_local unsigned seed;
	if (!seed)
		seed = (unsigned)sbx_now_ms() ^ (unsigned)(uintptr_t)&seed;
	return (unsigned)rand_r(&seed);
}

int sbx_http_perform(struct sbx_http_client *c, const struct sbx_http_req *req,
		     struct sbx_http_resp *resp, struct sbx_error *err)
{
	long total = req->timeout_ms ? req->timeout_ms : (req->stream ? 0 : c->set.timeout_ms);
	long start = sbx_now_ms(), deadline = total > 0 ? start + total : 0;
	int max_attempts = req->max_attempts ? req->max_attempts : c->set.max_attempts;
	CURL *h = handle_get(c);
	int ret = 0;

	if (!h)
		return sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "out of memory");
	for (int attempt = 0;; attempt++) {
		struct xfer x = {.req = req, .resp = resp};
		struct curl_slist *hdrs = NULL;
		curl_mime *mime = NULL;
		long remaining = deadline ? deadline - sbx_now_ms() : -1, delay = -1;
		CURLcode rc = CURLE_FAILED_INIT;
		int kind;

		if (deadline && remaining <= 0) {
			ret = sbx_error_set(err, ETIMEDOUT, SBX_E_TIMEOUT,
					    "%s: deadline passed after %d attempts", req->url,
					    attempt);
			break;
		}
		resp_reset(resp);
		resp->attempts = attempt + 1;
		if (attempt)
			curl_easy_reset(h);
		ret = setup(c, h, &x, &hdrs, &mime, remaining, err);
		if (!ret)
			rc = curl_easy_perform(h);
		curl_slist_free_all(hdrs);
		curl_mime_free(mime);
		if (ret)
			break;

		if (rc == CURLE_OK) {
			if (x.final_2xx || attempt + 1 >= max_attempts || x.delivered)
				break;
			if (resp->status == 429 || (resp->status == 503 && req->idempotent))
				delay = sbx_http_retry_delay_ms(attempt, resp->retry_after_s,
								remaining, jitter());
			if (delay < 0)
				break;
			sbx_log(SBX_LOG_INFO, "http: %ld from %s, retry in %ld ms", resp->status,
				req->url, delay);
		} else {
			if (x.cb_err) {
				ret = sbx_error_set(err, x.cb_err,
						    x.cb_err == ETIMEDOUT ? SBX_E_TIMEOUT
									  : SBX_E_NONE,
						    "%s: %s", req->url, x.cb_msg);
				break;
			}
			kind = sbx_http_curl_retryable(rc);
			if (!x.delivered && attempt + 1 < max_attempts &&
			    (kind == 1 || (kind == 2 && req->idempotent)))
				delay = sbx_http_retry_delay_ms(
				    attempt, -1, deadline ? deadline - sbx_now_ms() : -1, jitter());
			if (delay < 0) {
				ret = sbx_http_error_from_curl(rc, req->url, err);
				break;
			}
			sbx_log(SBX_LOG_INFO, "http: %s: %s, retry in %ld ms", req->url,
				curl_easy_strerror(rc), delay);
		}
		if (!backoff_sleep(req, delay)) {
			ret = sbx_error_set(err, ECANCELED, SBX_E_NONE, "%s: cancelled", req->url);
			break;
		}
	}
	handle_put(c, h);
	return ret;
}

/* --- multipart parts from a descriptor -------------------------------------------- */

static size_t fdpart_read(char *buf, size_t size, size_t n, void *ctx)
{
	struct sbx_http_fdpart *s = ctx;
	size_t want = size * n;
	ssize_t got;
	if (s->pos >= s->size)
		return 0;
	if ((off_t)want > s->size - s->pos)
		want = (size_t)(s->size - s->pos);
	do
		got = pread(s->fd, buf, want, s->pos);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		/* A file shorter than promised is as bad as an I/O error. */
		s->err = got < 0 ? errno : EIO;
		return CURL_READFUNC_ABORT;
	}
	s->pos += got;
	return (size_t)got;
}

static int fdpart_seek(void *ctx, curl_off_t off, int origin)
{
	struct sbx_http_fdpart *s = ctx;
	if (origin != SEEK_SET || off < 0 || off > s->size)
		return CURL_SEEKFUNC_CANTSEEK;
	s->pos = (off_t)off;
	return CURL_SEEKFUNC_OK;
}

int sbx_http_mime_fd(struct curl_mimepart *p, struct sbx_http_fdpart *src)
{
	src->pos = 0;
	return curl_mime_data_cb(p, (curl_off_t)src->size, fdpart_read, fdpart_seek, NULL, src)
		   ? -ENOMEM
		   : 0;
}

void sbx_http_range_init(struct sbx_http_range *r, off_t off, off_t len, sbx_http_sink_fn sink,
			 void *ctx)
{
	*r = (struct sbx_http_range){.sink = sink, .ctx = ctx, .skip = off, .left = len};
}

const char *sbx_http_range_header(char *buf, size_t size, off_t off, off_t len)
{
	if (off <= 0 && len < 0)
		return NULL;
	if (len >= 0)
		snprintf(buf, size, "Range: bytes=%lld-%lld", (long long)off,
			 (long long)(off + len - 1));
	else
		snprintf(buf, size, "Range: bytes=%lld-", (long long)off);
	return buf;
}

int sbx_http_range_response(void *ctx, const struct sbx_http_resp *resp)
{
	struct sbx_http_range *r = ctx;
	r->status = resp->status;
	if (resp->status == 206)
		r->skip = 0; /* the server did the slicing */
	return 0;
}

int sbx_http_range_write(void *ctx, const char *data, size_t len)
{
	struct sbx_http_range *r = ctx;
	if (r->skip) {
		size_t n = (off_t)len < r->skip ? len : (size_t)r->skip;
		r->skip -= n;
		data += n;
		len -= n;
	}
	if (r->left >= 0 && (off_t)len > r->left)
		len = (size_t)r->left;
	if (len) {
		int rc = r->sink(r->ctx, data, len);
		if (rc)
			return rc;
		if (r->left >= 0)
			r->left -= len;
	}
	/* A server that ignored Range: stop once the range is delivered. */
	if (r->left == 0 && r->status == 200) {
		r->done = true;
		return -ECANCELED;
	}
	return 0;
}
