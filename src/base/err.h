/*
 * err — the error value that flows from providers up to the `error` files.
 *
 * Every fallible call returns 0 or -errno and fills a struct sbx_error with
 * a structured code (the provider contract's five codes) and one line of
 * text. The errno is decided from structured facts (HTTP status, curl code,
 * a provider's error code), never by matching message text. This module is
 * pure: no FUSE, no curl.
 */
#ifndef SBX_ERR_H
#define SBX_ERR_H

#include <stdarg.h>
#include <stddef.h>

enum sbx_errcode {
	SBX_E_NONE = 0,
	SBX_E_CONNECTION_FAILED,
	SBX_E_TIMEOUT,
	SBX_E_NOT_FOUND,
	SBX_E_EXECUTION_FAILED,
	SBX_E_INTERNAL,
	SBX_E_AUTH, /* the provider refused the credentials (HTTP 401/403), or none are set */
};

#define SBX_ERR_MSG_MAX 512

struct sbx_error {
	enum sbx_errcode code;
	int err;		   /* positive errno, 0 when no error */
	char msg[SBX_ERR_MSG_MAX]; /* one line, no secrets */
};

/*
 * s made one line that no terminal acts on, in place: line breaks and tabs
 * become spaces, other control characters (C0, DEL, C1 as UTF-8) '?', and
 * so do the bidirectional controls and U+2028/U+2029 (one '?' a byte).
 * Every error message gets it, and every log line.
 */
void sbx_one_line(char *s);

#define SBX_ERROR_INIT                                                                             \
	{                                                                                          \
		SBX_E_NONE, 0, ""                                                                  \
	}

void sbx_error_clear(struct sbx_error *e);
/*
 * Records an error (err is a positive or negative errno; code may be
 * SBX_E_NONE to derive it from err) and returns -errno, so that callers can
 * write `return sbx_error_set(e, ENOENT, 0, "no such file: %s", p);`.
 * A NULL e is allowed. Newlines in the message are replaced by spaces.
 */
int sbx_error_set(struct sbx_error *e, int err, enum sbx_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* sbx_error_set with a va_list, for helpers that take a format themselves. */
int sbx_error_vset(struct sbx_error *e, int err, enum sbx_errcode code, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/*
 * src into dst[size], whole when it fits; else each word (a run without
 * blanks: a path) longer than 128 bytes keeps its first 40 and last 72
 * around "...", and if that is still too long the middle of the whole goes,
 * its start (what failed) and end (why) kept. Never cuts a UTF-8
 * character. Returns the length written. Messages carry paths up to
 * PATH_MAX, often twice: cut at the end, a long one lost its reason.
 */
size_t sbx_fit(char *dst, size_t size, const char *src);
/* Prefixes the message with "what: " (keeps code and errno), fitted as above. */
void sbx_error_prefix(struct sbx_error *e, const char *what);
const char *sbx_errcode_name(enum sbx_errcode code);
/* The structured code an errno implies when nothing better is known. */
enum sbx_errcode sbx_errcode_from_errno(int err);
/*
 * errno for an HTTP status of a provider API (0 for 2xx): 401/403 EACCES,
 * 404 ENOENT, 408/504 ETIMEDOUT, 409 EEXIST, 429 EAGAIN, 502/503 ENOTCONN,
 * 507 ENOSPC, other failures EIO. Callers refine per operation.
 */
int sbx_errno_from_http(long status);
/* The errno sbxfs uses for a structured code when no status is known. */
int sbx_errno_from_code(enum sbx_errcode code);

#endif
