/*
 * daytona/transport — the Daytona provider's HTTP calls over src/base/http:
 * the settings every call reads (dt_conf, filled by api.c's init), the
 * common headers (the credential, the SDK version), the URLs of the
 * control plane (/sandbox/...) and of a sandbox's toolbox, and dt_call(),
 * which performs one request and maps its reply to 0 / -errno with a
 * one-line message (dt_error_from_reply). It knows no provider op: api.c,
 * files.c, run.c, code.c and toolbox.c build on it, and it calls none of
 * them, so the provider's files form no cycle.
 */
#include "daytona/daytona.h"
#include "base/keyfile.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct dt_conf dt_conf;

/* --- small helpers ------------------------------------------------------- */

void dt_sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

void dt_random_hex(char *out, size_t bytes)
{
	unsigned char r[32];
	if (bytes > sizeof(r))
		bytes = sizeof(r);
	if (sbx_random_bytes(r, bytes)) {
		/* Only names of temporary files hang on this: time is enough. */
		unsigned long long t = (unsigned long long)sbx_now_ms() ^ (uintptr_t)out;
		for (size_t i = 0; i < bytes; i++)
			r[i] = (unsigned char)(t >> (8 * (i % 8))) ^ (unsigned char)i;
	}
	for (size_t i = 0; i < bytes; i++)
		sprintf(out + 2 * i, "%02x", r[i]);
}

int dt_ready(struct sbx_error *err)
{
	if (dt_conf.http)
		return 0;
	if (dt_conf.init_err.err) {
		if (err)
			*err = dt_conf.init_err;
		return -dt_conf.init_err.err;
	}
	return sbx_error_set(err, EACCES, SBX_E_INTERNAL, "daytona provider is not initialised");
}

/* The Authorization line: set at init, replaced when the key's file has a new one. */
static struct sbx_keyhdr auth = SBX_KEYHDR_INIT;

void dt_auth_start(const struct sbx_provider_env *env, const char *key)
{
	sbx_keyhdr_start(&auth, env, "Authorization: Bearer ", key);
}

bool dt_set_key(const char *key)
{
	return sbx_keyhdr_set(&auth, key);
}

void dt_auth_clear(void)
{
	sbx_keyhdr_clear(&auth);
}

const char **dt_headers(const char **hdr, size_t n, const char *auth_line, const char *const *extra)
{
	size_t i = 0;
	hdr[i++] = auth_line;
	if (dt_conf.org)
		hdr[i++] = dt_conf.org;
	hdr[i++] = "X-Daytona-SDK-Version: " DT_SDK_VERSION;
	hdr[i++] = "X-Daytona-Source: sbxfs";
	for (; extra && *extra && i + 1 < n; extra++)
		hdr[i++] = *extra;
	hdr[i] = NULL;
	return hdr;
}

void dt_toolbox_url(struct dt_instance *di, struct sbx_buf *b, const char *path)
{
	sbx_buf_adds(b, di->toolbox);
	sbx_buf_adds(b, path);
}

void dt_path_url(struct dt_instance *di, struct sbx_buf *b, const char *ep, const char *path)
{
	dt_toolbox_url(di, b, ep);
	sbx_http_add_query(b, "path", path);
}

void dt_sandbox_url(struct sbx_buf *b, const char *id, const char *suffix)
{
	sbx_buf_adds(b, dt_conf.api_url);
	sbx_buf_adds(b, "/sandbox");
	if (id) {
		sbx_buf_addch(b, '/');
		sbx_http_add_escaped(b, id);
	}
	if (suffix)
		sbx_buf_adds(b, suffix);
}

int dt_check_body(const json_t *body, const char *what, struct sbx_error *err)
{
	return body ? 0
		    : sbx_error_set(
			  err, EINVAL, SBX_E_EXECUTION_FAILED,
			  "%s: not valid UTF-8 (the toolbox API speaks JSON, which carries "
			  "UTF-8 only)",
			  what);
}

int dt_call(const struct dt_call *c, struct sbx_error *err)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	const char *extra[4] = {NULL}, *hdr[10];
	char accept[96];
	char *body = NULL;
	unsigned gen;
	char *auth_line;
	bool retried = false;
	int rc;

	if ((rc = dt_ready(err)))
		return rc;
	snprintf(accept, sizeof(accept), "Accept: %s", c->accept ? c->accept : "application/json");
	extra[0] = accept;
	extra[1] = c->range;
	if (c->body) {
		body = json_dumps(c->body, JSON_COMPACT);
		if (!body)
			return sbx_error_set(err, ENOMEM, SBX_E_INTERNAL, "out of memory");
		extra[c->range ? 2 : 1] = "Content-Type: application/json";
		req.body = body;
		req.body_len = strlen(body);
	}
	req.has_body = c->body || c->empty_post;
	req.method = c->method;
	req.url = c->url;
	auth_line = sbx_keyhdr_get(&auth, &gen);
	req.timeout_ms = c->timeout_ms;
	req.max_body = c->max_body ? c->max_body : DT_JSON_MAX;
	req.idempotent = c->idempotent;
	req.decompress = true;
	req.mime_fn = c->mime_fn;
	req.mime_ctx = c->mime_ctx;
	req.sink = c->sink;
	req.sink_ctx = c->sink_ctx;
	req.on_response = c->on_response;
	req.stream = c->stream;
again:
	req.headers = dt_headers(hdr, 10, auth_line, extra);
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(dt_conf.http, &req, &resp, err);
	if (c->status)
		*c->status = resp.status;
	if (rc) {
		if (c->what)
			sbx_error_prefix(err, c->what);
		goto out;
	}
	/* A refused key: its file may hold a new one (rotated). Once, with that. */
	if ((resp.status == 401 || resp.status == 403) && !retried &&
	    sbx_keyhdr_renewed(&auth, &auth_line, &gen)) {
		retried = true;
		sbx_http_resp_release(&resp);
		goto again;
	}
	if (resp.status < 200 || resp.status > 299) {
		rc = dt_error_from_reply(resp.status, resp.body.buf, resp.body.len, c->what, err);
		if (c->err_body) {
			sbx_buf_release(c->err_body);
			*c->err_body = resp.body;
			sbx_buf_init(&resp.body);
		}
		goto out;
	}
	if (c->reply) {
		*c->reply = json_loadb(resp.body.buf, resp.body.len, 0, NULL);
		if (!*c->reply)
			rc = sbx_error_set(err, EIO, SBX_E_INTERNAL, "%s: reply is not JSON",
					   c->what ? c->what : c->url);
	}
	if (c->raw) {
		sbx_buf_release(c->raw);
		*c->raw = resp.body;
		sbx_buf_init(&resp.body);
	}
out:
	sbx_http_resp_release(&resp);
	free(body);
	sbx_wipe_free(auth_line);
	return rc;
}
