/*
 * connect — the Connect-RPC wire format envd speaks (JSON codec): the
 * envelope framing of streaming calls (1 flag byte + 4-byte big-endian
 * length + JSON), an incremental decoder that copes with frames split
 * across or packed into arbitrary chunks, the end-of-stream frame, and
 * Connect error JSON mapped to errno.
 *
 * Pure: no curl, no I/O. It is not an RPC client (api code drives the
 * HTTP side) and it does not know envd's message types (protocol.c does).
 */
#ifndef SBX_E2B_CONNECT_H
#define SBX_E2B_CONNECT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

#define E2B_CONNECT_FLAG_COMPRESSED 0x01u
#define E2B_CONNECT_FLAG_END 0x02u
#define E2B_CONNECT_MAX_MSG (16u << 20) /* bound on one remote message */

/* Appends one envelope (flags, then len as BE32, then payload) to b. */
void e2b_connect_frame(struct sbx_buf *b, unsigned flags, const char *payload, size_t len);

/* Called once per data frame with its JSON payload; 0 or -errno (stops). */
typedef int (*e2b_connect_msg_fn)(void *ctx, const char *json, size_t len);

struct e2b_connect_decoder {
	e2b_connect_msg_fn on_message;
	void *ctx;
	struct sbx_buf pending; /* bytes of an incomplete frame */
	bool ended;		/* the end-of-stream frame arrived */
	int end_err;		/* its error as a positive errno, 0 if none */
	char end_code[32];	/* its Connect code ("" if none) */
	char end_msg[256];	/* its message */
};

void e2b_connect_decoder_init(struct e2b_connect_decoder *d, e2b_connect_msg_fn fn, void *ctx);
void e2b_connect_decoder_release(struct e2b_connect_decoder *d);
/*
 * Feeds received bytes. Returns 0, the callback's -errno, or -EPROTO with
 * e filled for a compressed frame, a frame over E2B_CONNECT_MAX_MSG, a
 * data frame after the end frame, or a malformed end frame.
 */
int e2b_connect_feed(struct e2b_connect_decoder *d, const char *data, size_t len,
		     struct sbx_error *e);
/*
 * At end of body: 0 when the end frame arrived without error; the mapped
 * -errno of its error (e says "[code] message"); -EPROTO when the stream
 * stopped without an end frame or inside a frame.
 */
int e2b_connect_finish(struct e2b_connect_decoder *d, const char *what, struct sbx_error *e);

/* errno for a Connect code name ("not_found" -> ENOENT ...); EIO if unknown. */
int e2b_connect_code_errno(const char *code);
/* The Connect code an HTTP status implies when the body is no Connect error. */
const char *e2b_connect_code_from_http(long status);
/*
 * Maps a failed unary call: the body's {"code": "<string>", "message"}
 * when it is Connect error JSON, else the HTTP status (502 = the sandbox
 * is gone or paused: ENOTCONN with SBX_E_NOT_FOUND). Returns -errno.
 */
int e2b_connect_unary_error(long status, const char *content_type, const char *body, size_t len,
			    const char *what, struct sbx_error *e);

#endif
