/*
 * transport — the E2B provider's HTTP calls over src/base/http: control
 * plane REST (X-API-KEY), envd unary and streaming Connect RPC and /files
 * (X-Access-Token, E2b-Sandbox-Id/-Port). Each call maps the reply to
 * 0 / -errno with a one-line message that names the operation and never
 * a credential. It knows no provider op (api.c, files.c, run.c do) and
 * calls none of their files; it holds the provider-wide state (e2b_g).
 */
#include "e2b/e2b.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/keyfile.h"
#include "e2b/connect.h"

#define E2B_KEEPALIVE_MAX_S 30 /* Keepalive-Ping-Interval asked of envd on streams */

/* Filled by e2b_init (api.c), read by every call here and by code.c. */
struct e2b_global e2b_g;

/*
 * The keepalive interval asked of envd: a third of the transfer deadline
 * (so a silent but healthy stream never hits it), at most 30 s.
 */
static long keepalive_s(void)
{
	long s = e2b_g.set.transfer_ms / 3000;
	return s < 1 ? 1 : s > E2B_KEEPALIVE_MAX_S ? E2B_KEEPALIVE_MAX_S : s;
}

static void wipe(void *p, size_t n)
{
	volatile unsigned char *v = p;
	while (n--)
		*v++ = 0;
}

/* --- envd connection snapshot ------------------------------------------- */

void e2b_conn_get(struct e2b_inst *in, int port, struct e2b_conn *c)
{
	memset(c, 0, sizeof(*c));
	sbx_buf_init(&c->base);
	pthread_mutex_lock(&in->lock);
	if (port == E2B_ENVD_PORT || e2b_g.set.sandbox_url)
		e2b_envd_base(&c->base, &e2b_g.set, in->sb.id, in->sb.domain);
	else
		sbx_buf_addf(&c->base, "https://%d-%s.%s", port, in->sb.id,
			     in->sb.domain ? in->sb.domain : e2b_g.set.domain);
	snprintf(c->id_hdr, sizeof(c->id_hdr), "E2b-Sandbox-Id: %s", in->sb.id);
	snprintf(c->port_hdr, sizeof(c->port_hdr), "E2b-Sandbox-Port: %d", port);
	c->headers[c->n_headers++] = c->id_hdr;
	c->headers[c->n_headers++] = c->port_hdr;
	if (in->sb.access_token) {
		snprintf(c->token_hdr, sizeof(c->token_hdr), "X-Access-Token: %s",
			 in->sb.access_token);
		c->headers[c->n_headers++] = c->token_hdr;
	}
	pthread_mutex_unlock(&in->lock);
}

void e2b_conn_add(struct e2b_conn *c, const char *header)
{
	if (c->n_headers + 1 < sizeof(c->headers) / sizeof(c->headers[0]))
		c->headers[c->n_headers++] = header;
}

void e2b_conn_release(struct e2b_conn *c)
{
	wipe(c->token_hdr, sizeof(c->token_hdr));
	sbx_buf_release(&c->base);
}

/* --- control plane ------------------------------------------------------- */

/* The X-API-KEY line: set at init, replaced when the key's file has a new one. */
static struct sbx_keyhdr api_key = SBX_KEYHDR_INIT;

void e2b_key_start(const struct sbx_provider_env *env)
{
	sbx_keyhdr_start(&api_key, env, "X-API-KEY: ", e2b_g.set.api_key ? e2b_g.set.api_key : "");
	/* The key line holds it from here, renewed on a refusal: no second copy to go stale. */
	sbx_wipe_free(e2b_g.set.api_key);
	e2b_g.set.api_key = NULL;
}

bool e2b_set_key(const char *key)
{
	return sbx_keyhdr_set(&api_key, key);
}

void e2b_key_clear(void)
{
	sbx_keyhdr_clear(&api_key);
}

int e2b_api(const char *method, const char *path, json_t *body, bool idempotent, json_t **out,
	    long *status, const char *what, struct sbx_error *e)
{
	return e2b_api_ex(method, path, body, idempotent, out, status, NULL, NULL, 0, what, e);
}

int e2b_api_ex(const char *method, const char *path, json_t *body, bool idempotent, json_t **out,
	       long *status, const char *header, char *value, size_t size, const char *what,
	       struct sbx_error *e)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct sbx_buf url = SBX_BUF_INIT;
	const char *headers[4] = {NULL};
	char *text = NULL;
	unsigned gen;
	char *key = sbx_keyhdr_get(&api_key, &gen);
	bool retried = false;
	int rc;

	*out = NULL;
	*status = 0;
	sbx_buf_addf(&url, "%s%s", e2b_g.set.api_url, path);
	headers[1] = "Accept: application/json";
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		if (!text) {
			rc = sbx_error_set(e, ENOMEM, SBX_E_INTERNAL, "%s: out of memory", what);
			goto out;
		}
		headers[2] = "Content-Type: application/json";
		req.body = text;
		req.body_len = strlen(text);
		req.has_body = true;
	}
	req.method = method;
	req.url = url.buf;
	req.headers = headers;
	req.idempotent = idempotent;
again:
	headers[0] = key;
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(e2b_g.http, &req, &resp, e);
	if (rc) {
		sbx_error_prefix(e, what);
		goto out_resp;
	}
	*status = resp.status;
	/* A refused key: its file may hold a new one (rotated). Once, with that. */
	if ((resp.status == 401 || resp.status == 403) && !retried &&
	    sbx_keyhdr_renewed(&api_key, &key, &gen)) {
		retried = true;
		sbx_http_resp_release(&resp);
		goto again;
	}
	if (header && size) {
		value[0] = '\0';
		sbx_http_resp_header(&resp, header, value, size);
	}
	if (resp.status < 200 || resp.status > 299) {
		rc = e2b_api_error(resp.status, resp.body.buf, resp.body.len, what, e);
		goto out_resp;
	}
	if (resp.body.len) {
		json_error_t jerr;
		*out = json_loadb(resp.body.buf, resp.body.len, 0, &jerr);
		if (!*out)
			rc = sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "%s: bad JSON reply: %s",
					   what, jerr.text);
	}
out_resp:
	sbx_http_resp_release(&resp);
out:
	free(text);
	sbx_wipe_free(key);
	sbx_buf_release(&url);
	return rc;
}

/* --- envd unary RPC ------------------------------------------------------ */

/* A request message that could not be built: json_pack() refuses strings
 * that are not UTF-8, and JSON cannot carry such a path to envd. */
static int bad_request(json_t *reqj, const char *what, struct sbx_error *e)
{
	if (!reqj)
		return sbx_error_set(
		    e, EINVAL, SBX_E_INTERNAL,
		    "%s: not valid UTF-8 (envd speaks JSON, which carries UTF-8 only)", what);
	return sbx_error_set(e, ENOMEM, SBX_E_INTERNAL, "%s: out of memory", what);
}

int e2b_rpc(struct e2b_inst *in, const char *method, json_t *reqj, bool idempotent,
	    size_t max_reply, json_t **out, const char *what, struct sbx_error *e)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct e2b_conn c;
	char *text = reqj ? json_dumps(reqj, JSON_COMPACT) : NULL;
	int rc;

	*out = NULL;
	if (!text)
		return bad_request(reqj, what, e);
	e2b_conn_get(in, E2B_ENVD_PORT, &c);
	sbx_buf_addf(&c.base, "/%s", method);
	e2b_conn_add(&c, "Content-Type: application/json");
	e2b_conn_add(&c, "Connect-Protocol-Version: 1");
	req.url = c.base.buf;
	req.headers = c.headers;
	req.body = text;
	req.body_len = strlen(text);
	req.idempotent = idempotent;
	req.max_body = max_reply;
	req.decompress = true;
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(e2b_g.http, &req, &resp, e);
	if (rc) {
		sbx_error_prefix(e, what);
	} else if (resp.status != 200) {
		rc = e2b_connect_unary_error(resp.status, resp.content_type, resp.body.buf,
					     resp.body.len, what, e);
	} else {
		json_error_t jerr;
		*out = json_loadb(resp.body.buf, resp.body.len, 0, &jerr);
		if (!json_is_object(*out)) {
			json_decref(*out);
			*out = NULL;
			rc = sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "%s: bad JSON reply", what);
		}
	}
	sbx_http_resp_release(&resp);
	e2b_conn_release(&c);
	free(text);
	return rc;
}

/* --- envd streaming RPC -------------------------------------------------- */

struct stream {
	struct e2b_connect_decoder dec;
	struct sbx_error err; /* why a callback stopped the transfer */
};

static int stream_response(void *ctx, const struct sbx_http_resp *resp)
{
	struct stream *s = ctx;
	if (resp->status == 200 &&
	    !sbx_http_content_type_is(resp->content_type, "application/connect+json"))
		return sbx_error_set(&s->err, EPROTO, SBX_E_INTERNAL,
				     "unsupported content type \"%s\"", resp->content_type);
	return 0;
}

static int stream_sink(void *ctx, const char *data, size_t len)
{
	struct stream *s = ctx;
	return e2b_connect_feed(&s->dec, data, len, &s->err);
}

int e2b_rpc_stream(struct e2b_inst *in, const char *method, json_t *reqj,
		   const struct e2b_stream_opts *o,
		   int (*fn)(void *ctx, const char *json, size_t len), void *ctx, const char *what,
		   struct sbx_error *e)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct sbx_buf frame = SBX_BUF_INIT;
	struct stream s = {.err = SBX_ERROR_INIT};
	struct e2b_conn c;
	char keepalive[48], deadline[48];
	char *text = reqj ? json_dumps(reqj, JSON_COMPACT) : NULL;
	int rc;

	if (!text)
		return bad_request(reqj, what, e);
	e2b_connect_frame(&frame, 0, text, strlen(text));
	e2b_connect_decoder_init(&s.dec, fn, ctx);
	e2b_conn_get(in, E2B_ENVD_PORT, &c);
	sbx_buf_addf(&c.base, "/%s", method);
	e2b_conn_add(&c, "Content-Type: application/connect+json");
	e2b_conn_add(&c, "Connect-Protocol-Version: 1");
	snprintf(keepalive, sizeof(keepalive), "Keepalive-Ping-Interval: %ld", keepalive_s());
	e2b_conn_add(&c, keepalive);
	if (o->auth)
		e2b_conn_add(&c, o->auth);
	if (o->timeout_ms > 0) {
		snprintf(deadline, sizeof(deadline), "Connect-Timeout-Ms: %ld", o->timeout_ms);
		e2b_conn_add(&c, deadline);
		/* envd ends the stream at the deadline; give its answer time to arrive. */
		req.timeout_ms = o->timeout_ms + 15000;
	}
	req.url = c.base.buf;
	req.headers = c.headers;
	req.body = frame.buf;
	req.body_len = frame.len;
	req.stream = true;
	req.idle_ms = o->idle_ms ? o->idle_ms : e2b_g.set.transfer_ms;
	req.cancel = o->cancel;
	req.sink = stream_sink;
	req.sink_ctx = &s;
	req.on_response = stream_response;
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(e2b_g.http, &req, &resp, e);
	if (rc) {
		if (s.err.err)
			*e = s.err;
		sbx_error_prefix(e, what);
	} else if (resp.status != 200) {
		rc = e2b_connect_unary_error(resp.status, resp.content_type, resp.body.buf,
					     resp.body.len, what, e);
	} else {
		rc = e2b_connect_finish(&s.dec, what, e);
	}
	sbx_http_resp_release(&resp);
	e2b_conn_release(&c);
	e2b_connect_decoder_release(&s.dec);
	sbx_buf_release(&frame);
	free(text);
	return rc;
}

/* --- /files -------------------------------------------------------------- */

/* envd's HTTP errors: {"code": <status>, "message"}. */
static int files_error(long status, const struct sbx_http_resp *r, const char *what,
		       const char *path, struct sbx_error *e)
{
	json_t *root = r->body.len ? json_loadb(r->body.buf, r->body.len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(root, "message"));
	int err = sbx_errno_from_http(status), rc;
	enum sbx_errcode code = SBX_E_NONE;
	if (status == 502) {
		code = SBX_E_NOT_FOUND; /* the sandbox, not the file: see connect.h */
		if (!msg)
			msg = "the sandbox was not found";
	}
	rc = sbx_error_set(e, err ? err : EIO, code, "%s %s: %ld %s", what, path, status,
			   msg ? msg : "failed");
	json_decref(root);
	return rc;
}

int e2b_files_get(struct e2b_inst *in, const char *path, off_t off, off_t len, sbx_sink_fn sink,
		  void *ctx, long *status, struct sbx_error *e)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct sbx_http_range rs;
	struct e2b_conn c;
	char hdr[96];
	const char *range = sbx_http_range_header(hdr, sizeof(hdr), off, len);
	int rc;

	*status = 0;
	e2b_conn_get(in, E2B_ENVD_PORT, &c);
	sbx_buf_adds(&c.base, "/files");
	sbx_http_add_query(&c.base, "path", path);
	if (range)
		e2b_conn_add(&c, range);
	sbx_http_range_init(&rs, off, len, sink, ctx);
	req.url = c.base.buf;
	req.headers = c.headers;
	req.stream = true;
	req.idle_ms = e2b_g.set.transfer_ms;
	req.idempotent = true;
	req.sink = sbx_http_range_write;
	req.sink_ctx = &rs;
	req.on_response = sbx_http_range_response;
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(e2b_g.http, &req, &resp, e);
	*status = resp.status;
	if (rc && rs.done) {
		rc = 0;
		sbx_error_clear(e);
	} else if (rc) {
		sbx_error_prefix(e, "read");
	} else if (resp.status < 200 || resp.status > 299)
		rc = resp.status == 416 ? 0 : files_error(resp.status, &resp, "read", path, e);
	sbx_http_resp_release(&resp);
	e2b_conn_release(&c);
	return rc;
}

int e2b_files_put(struct e2b_inst *in, const char *path, int fd, off_t size, struct sbx_error *e)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct e2b_conn c;
	int rc;

	e2b_conn_get(in, E2B_ENVD_PORT, &c);
	sbx_buf_adds(&c.base, "/files");
	sbx_http_add_query(&c.base, "path", path);
	e2b_conn_add(&c, "Content-Type: application/octet-stream");
	req.url = c.base.buf;
	req.headers = c.headers;
	req.body_fd = fd;
	req.body_off = 0;
	req.body_size = size;
	req.stream = true;
	req.idle_ms = e2b_g.set.transfer_ms;
	req.idempotent = true; /* the same bytes to the same (temporary) name */
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(e2b_g.http, &req, &resp, e);
	if (rc)
		sbx_error_prefix(e, "write");
	else if (resp.status < 200 || resp.status > 299)
		rc = files_error(resp.status, &resp, "write", path, e);
	sbx_http_resp_release(&resp);
	e2b_conn_release(&c);
	return rc;
}
