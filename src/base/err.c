/* err — see err.h. */
#include "base/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
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
 * One line, and nothing a terminal acts on: messages carry what a sandbox
 * chose (file names, its envd's error text) and end up in `error`, which
 * people `cat`. Line breaks and tabs become spaces; other control
 * characters (C0, DEL, and C1 as UTF-8, U+0080..U+009F: an escape sequence
 * could retitle the terminal or write its clipboard) become '?', as
 * `ls -q` shows them.
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
	}
}

int sbx_error_vset(struct sbx_error *e, int err, enum sbx_errcode code, const char *fmt, va_list ap)
{
	if (err < 0)
		err = -err;
	if (!err)
		err = EIO;
	if (e) {
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
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
	char tmp[SBX_ERR_MSG_MAX];
	size_t n;
	if (!e || !what || !*what)
		return;
	n = strlen(what);
	if (n + 2 >= sizeof(tmp))
		return;
	memcpy(tmp, what, n);
	memcpy(tmp + n, ": ", 2);
	/* Keep the tail of the old message that still fits. */
	snprintf(tmp + n + 2, sizeof(tmp) - n - 2, "%.*s", (int)(sizeof(tmp) - n - 3), e->msg);
	memcpy(e->msg, tmp, sizeof(tmp));
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
