/* connect — see connect.h. */
#include "e2b/connect.h"

#include <errno.h>
#include <string.h>

#include "base/http.h"

void e2b_connect_frame(struct sbx_buf *b, unsigned flags, const char *payload, size_t len)
{
	unsigned char h[5] = {(unsigned char)flags, (unsigned char)(len >> 24),
			      (unsigned char)(len >> 16), (unsigned char)(len >> 8),
			      (unsigned char)len};
	sbx_buf_add(b, h, sizeof(h));
	sbx_buf_add(b, payload, len);
}

void e2b_connect_decoder_init(struct e2b_connect_decoder *d, e2b_connect_msg_fn fn, void *ctx)
{
	memset(d, 0, sizeof(*d));
	d->on_message = fn;
	d->ctx = ctx;
	sbx_buf_init(&d->pending);
}

void e2b_connect_decoder_release(struct e2b_connect_decoder *d)
{
	sbx_buf_release(&d->pending);
}

static void copy_str(char *dst, size_t size, const char *s)
{
	snprintf(dst, size, "%s", s ? s : "");
}

/* {"error"?: {"code","message"}, "metadata"?: {...}} */
static int parse_end(struct e2b_connect_decoder *d, const char *json, size_t len,
		     struct sbx_error *e)
{
	json_error_t jerr;
	json_t *root = json_loadb(json, len, 0, &jerr), *err;
	d->ended = true;
	if (!root || !json_is_object(root)) {
		json_decref(root);
		return sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "malformed end-of-stream frame");
	}
	err = json_object_get(root, "error");
	if (json_is_object(err)) {
		const char *code = json_string_value(json_object_get(err, "code"));
		copy_str(d->end_code, sizeof(d->end_code), code ? code : "unknown");
		copy_str(d->end_msg, sizeof(d->end_msg),
			 json_string_value(json_object_get(err, "message")));
		d->end_err = e2b_connect_code_errno(d->end_code);
	}
	json_decref(root);
	return 0;
}

int e2b_connect_feed(struct e2b_connect_decoder *d, const char *data, size_t len,
		     struct sbx_error *e)
{
	size_t off = 0;
	sbx_buf_add(&d->pending, data, len);
	while (d->pending.len - off >= 5) {
		const unsigned char *h = (const unsigned char *)d->pending.buf + off;
		size_t mlen = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
		const char *payload = (const char *)h + 5;
		int rc;
		if (h[0] & E2B_CONNECT_FLAG_COMPRESSED)
			return sbx_error_set(e, EPROTO, SBX_E_INTERNAL,
					     "received unsupported compressed output");
		if (mlen > E2B_CONNECT_MAX_MSG)
			return sbx_error_set(e, EPROTO, SBX_E_INTERNAL,
					     "stream message of %zu bytes is over the limit", mlen);
		if (d->pending.len - off - 5 < mlen)
			break;
		if (d->ended)
			return sbx_error_set(e, EPROTO, SBX_E_INTERNAL,
					     "data after the end-of-stream frame");
		if (h[0] & E2B_CONNECT_FLAG_END)
			rc = parse_end(d, payload, mlen, e);
		else
			rc = d->on_message(d->ctx, payload, mlen);
		if (rc)
			return rc;
		off += 5 + mlen;
	}
	sbx_buf_consume(&d->pending, off);
	return 0;
}

int e2b_connect_finish(struct e2b_connect_decoder *d, const char *what, struct sbx_error *e)
{
	if (d->pending.len)
		return sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "%s: stream cut inside a frame",
				     what);
	if (!d->ended)
		return sbx_error_set(e, EPROTO, SBX_E_INTERNAL, "%s: missing EndStreamResponse",
				     what);
	if (d->end_err)
		return sbx_error_set(e, d->end_err,
				     d->end_err == ETIMEDOUT ? SBX_E_TIMEOUT : SBX_E_NONE,
				     "%s: [%s] %s", what, d->end_code, d->end_msg);
	return 0;
}

static const struct {
	const char *code;
	int err;
} codes[] = {
    {"canceled", ECANCELED},
    {"unknown", EIO},
    {"invalid_argument", EINVAL},
    {"deadline_exceeded", ETIMEDOUT},
    {"not_found", ENOENT},
    {"already_exists", EEXIST},
    {"permission_denied", EACCES},
    {"resource_exhausted", EAGAIN},
    /* envd uses it for a symlink loop only */
    {"failed_precondition", ELOOP},
    {"aborted", EIO},
    {"out_of_range", EINVAL},
    {"unimplemented", ENOTSUP},
    {"internal", EIO},
    {"unavailable", ENOTCONN},
    {"data_loss", EIO},
    {"unauthenticated", EACCES},
};

int e2b_connect_code_errno(const char *code)
{
	for (size_t i = 0; code && i < sizeof(codes) / sizeof(codes[0]); i++)
		if (!strcmp(codes[i].code, code))
			return codes[i].err;
	return EIO;
}

const char *e2b_connect_code_from_http(long status)
{
	switch (status) {
	case 400:
		return "internal";
	case 401:
		return "unauthenticated";
	case 403:
		return "permission_denied";
	case 404:
		return "unimplemented";
	case 429:
	case 502:
	case 503:
	case 504:
		return "unavailable";
	default:
		return "unknown";
	}
}

int e2b_connect_unary_error(long status, const char *content_type, const char *body, size_t len,
			    const char *what, struct sbx_error *e)
{
	json_t *root = NULL;
	const char *code = NULL, *msg = NULL;
	int ret;
	if (sbx_http_content_type_is(content_type, "application/json"))
		root = json_loadb(body, len, 0, NULL);
	if (json_is_object(root)) {
		code = json_string_value(json_object_get(root, "code"));
		msg = json_string_value(json_object_get(root, "message"));
	}
	if (code) {
		int err = e2b_connect_code_errno(code);
		ret = sbx_error_set(e, err, err == ETIMEDOUT ? SBX_E_TIMEOUT : SBX_E_NONE,
				    "%s: [%s] %s", what, code, msg ? msg : "");
	} else if (status == 502) {
		/* The edge proxy: the sandbox is gone, paused or not yet up. */
		ret = sbx_error_set(e, ENOTCONN, SBX_E_NOT_FOUND, "%s: %s", what,
				    msg ? msg : "the sandbox was not found");
	} else if (status == 429) {
		/* Connect says "unavailable"; sbxfs says rate-limited (the retries are spent). */
		ret = sbx_error_set(e, EAGAIN, SBX_E_NONE, "%s: HTTP 429 %s", what,
				    msg ? msg : "rate limited");
	} else if (status == 507) {
		ret = sbx_error_set(e, ENOSPC, SBX_E_NONE, "%s: %s", what,
				    msg ? msg : "not enough disk space");
	} else {
		code = e2b_connect_code_from_http(status);
		ret = sbx_error_set(e, e2b_connect_code_errno(code), SBX_E_NONE,
				    "%s: [%s] HTTP %ld%s%s", what, code, status, msg ? ": " : "",
				    msg ? msg : "");
	}
	json_decref(root);
	return ret;
}
