/* err — see err.h. */
#include "base/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbx_error_clear(struct sbx_error *e)
{
	if (!e)
		return;
	e->code = SBX_E_NONE;
	e->err = 0;
	e->msg[0] = '\0';
}

/*
 * At p, in UTF-8: a bidirectional control (U+200E, U+200F, U+202A to
 * U+202E, U+2066 to U+2069), which makes a terminal that honours them show
 * the rest of the line reversed, or a line or paragraph separator (U+2028,
 * U+2029), which some readers take for a line break.
 */
static bool bidi_or_break(const unsigned char *p)
{
	if (p[0] != 0xe2 || !p[1] || !p[2])
		return false;
	if (p[1] == 0x80)
		return p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xa8 && p[2] <= 0xae);
	return p[1] == 0x81 && p[2] >= 0xa6 && p[2] <= 0xa9;
}

/*
 * One line, and nothing a terminal acts on: messages carry what a sandbox
 * chose (file names, its envd's error text) and end up in `error`, which
 * people `cat`. Line breaks and tabs become spaces; other control
 * characters (C0, DEL, and C1 as UTF-8, U+0080..U+009F: an escape sequence
 * could retitle the terminal or write its clipboard) become '?', as
 * `ls -q` shows them; so do bidirectional controls and U+2028/U+2029.
 */
void sbx_one_line(char *s)
{
	for (unsigned char *p = (unsigned char *)s; *p; p++) {
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
		else if (*p < 0x20 || *p == 0x7f)
			*p = '?';
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			p[0] = p[1] = '?';
		else if (bidi_or_break(p))
			p[0] = p[1] = p[2] = '?';
	}
}

/*
 * A cut at p moved back (not below lo) so as not to split a UTF-8
 * character: over at most 3 continuation bytes, as many as valid UTF-8
 * has; a name of invalid bytes (any byte but '/' and NUL is legal) is cut
 * where it is.
 */
static size_t char_start(const char *s, size_t lo, size_t p)
{
	for (int k = 0; k < 3 && p > lo && ((unsigned char)s[p] & 0xc0) == 0x80; k++)
		p--;
	return p;
}

/* Appends s[from, to) to d (room checked by the caller). */
static char *put(char *d, const char *s, size_t from, size_t to)
{
	memcpy(d, s + from, to - from);
	return d + (to - from);
}

/*
 * A word (a run without blanks: a path, mostly) longer than this is cut to
 * its first FIT_HEAD and last FIT_TAIL bytes around "...", which keeps the
 * path's start and its last components.
 */
enum { FIT_LONG = 128, FIT_HEAD = 40, FIT_TAIL = 72 };

size_t sbx_fit(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src), out = 0;
	char *t, *d;
	if (!size)
		return 0;
	if (n < size) {
		memcpy(dst, src, n + 1);
		return n;
	}
	/* First the long words, each alone; the text between them is kept whole. */
	t = malloc(n + 1);
	if (t) {
		d = t;
		for (size_t i = 0; i < n;) {
			size_t j = i;
			while (j < n && src[j] != ' ')
				j++;
			if (j - i > FIT_LONG) {
				d = put(d, src, i, char_start(src, i, i + FIT_HEAD));
				d = put(d, "...", 0, 3);
				d = put(d, src, char_start(src, i + FIT_HEAD, j - FIT_TAIL), j);
			} else {
				d = put(d, src, i, j);
			}
			for (i = j; i < n && src[i] == ' '; i++)
				*d++ = ' ';
		}
		*d = '\0';
		src = t;
		n = (size_t)(d - t);
	}
	if (n < size) {
		memcpy(dst, src, n + 1);
		out = n;
	} else if (size < 8) {
		out = char_start(src, 0, size - 1);
		memcpy(dst, src, out);
		dst[out] = '\0';
	} else {
		/* Then the middle of the whole: its start (what failed) and its end (why) stay. */
		size_t head = char_start(src, 0, (size - 4) / 3);
		size_t tail = n - (size - 4 - head);
		for (int k = 0; k < 3 && ((unsigned char)src[tail] & 0xc0) == 0x80; k++)
			tail++; /* not into a character */
		d = put(dst, src, 0, head);
		d = put(d, "...", 0, 3);
		d = put(d, src, tail, n);
		*d = '\0';
		out = (size_t)(d - dst);
	}
	free(t);
	return out;
}

int sbx_error_vset(struct sbx_error *e, int err, enum sbx_errcode code, const char *fmt, va_list ap)
{
	if (err < 0)
		err = -err;
	if (!err)
		err = EIO;
	if (e) {
		char *all = NULL;
		if (vasprintf(&all, fmt, ap) >= 0) {
			sbx_fit(e->msg, sizeof(e->msg), all);
			free(all);
		} else {
			snprintf(e->msg, sizeof(e->msg), "%s", fmt);
		}
		sbx_one_line(e->msg);
		e->err = err;
		e->code = code != SBX_E_NONE ? code : sbx_errcode_from_errno(err);
	}
	return -err;
}

int sbx_error_set(struct sbx_error *e, int err, enum sbx_errcode code, const char *fmt, ...)
{
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = sbx_error_vset(e, err, code, fmt, ap);
	va_end(ap);
	return rc;
}

void sbx_error_prefix(struct sbx_error *e, const char *what)
{
	char *all;
	if (!e || !what || !*what)
		return;
	if (asprintf(&all, "%s: %s", what, e->msg) < 0)
		return;
	sbx_fit(e->msg, sizeof(e->msg), all);
	sbx_one_line(e->msg);
	free(all);
}

const char *sbx_errcode_name(enum sbx_errcode code)
{
	switch (code) {
	case SBX_E_NONE:
		return "OK";
	case SBX_E_CONNECTION_FAILED:
		return "CONNECTION_FAILED";
	case SBX_E_TIMEOUT:
		return "TIMEOUT";
	case SBX_E_NOT_FOUND:
		return "NOT_FOUND";
	case SBX_E_EXECUTION_FAILED:
		return "EXECUTION_FAILED";
	case SBX_E_INTERNAL:
		return "INTERNAL";
	case SBX_E_AUTH:
		return "AUTH";
	}
	return "INTERNAL";
}

enum sbx_errcode sbx_errcode_from_errno(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case ENOTCONN:
	case ECONNREFUSED:
	case ECONNRESET:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return SBX_E_CONNECTION_FAILED;
	case ETIMEDOUT:
		return SBX_E_TIMEOUT;
	case ENOENT:
		return SBX_E_NOT_FOUND;
	case EIO:
		return SBX_E_INTERNAL;
	default:
		return SBX_E_EXECUTION_FAILED;
	}
}

int sbx_errno_from_http(long status)
{
	switch (status) {
	case 400:
	case 422:
		return EINVAL;
	case 401:
	case 403:
		return EACCES;
	case 404:
	case 410:
		return ENOENT;
	case 408:
	case 504:
		return ETIMEDOUT;
	case 409:
		return EEXIST;
	case 413:
		return EFBIG;
	case 429:
		return EAGAIN;
	case 501:
		return ENOTSUP;
	case 502:
	case 503:
		return ENOTCONN;
	case 507:
		return ENOSPC;
	default:
		return status >= 200 && status < 300 ? 0 : EIO;
	}
}

int sbx_errno_from_code(enum sbx_errcode code)
{
	switch (code) {
	case SBX_E_NONE:
		return 0;
	case SBX_E_CONNECTION_FAILED:
		return ENOTCONN;
	case SBX_E_TIMEOUT:
		return ETIMEDOUT;
	case SBX_E_NOT_FOUND:
		return ENOENT;
	case SBX_E_EXECUTION_FAILED:
	case SBX_E_INTERNAL:
		return EIO;
	case SBX_E_AUTH:
		return EACCES;
	}
	return EIO;
}
