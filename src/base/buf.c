/*
 * buf — the growable buffer of buf.h. Allocation failures abort: a
 * filesystem daemon that cannot allocate a few bytes cannot report it.
 */
#include "base/buf.h"
#include "base/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char sbx_buf_empty[1];

void sbx_buf_init(struct sbx_buf *b)
{
	b->buf = sbx_buf_empty;
	b->len = 0;
	b->alloc = 0;
}

void sbx_buf_release(struct sbx_buf *b)
{
	if (b->alloc)
		free(b->buf);
	sbx_buf_init(b);
}

void sbx_buf_grow(struct sbx_buf *b, size_t extra)
{
	size_t need = b->len + extra + 1;
	if (need <= b->alloc)
		return;
	size_t n = b->alloc ? b->alloc : 64;
	while (n < need)
		n *= 2;
	char *p = b->alloc ? sbx_xrealloc(b->buf, n) : sbx_xmalloc(n);
	if (!b->alloc)
		p[0] = '\0';
	b->buf = p;
	b->alloc = n;
}

void sbx_buf_add(struct sbx_buf *b, const void *data, size_t n)
{
	if (!n)
		return;
	sbx_buf_grow(b, n);
	memcpy(b->buf + b->len, data, n);
	b->len += n;
	b->buf[b->len] = '\0';
}

void sbx_buf_adds(struct sbx_buf *b, const char *s)
{
	sbx_buf_add(b, s, strlen(s));
}

void sbx_buf_addch(struct sbx_buf *b, char c)
{
	sbx_buf_add(b, &c, 1);
}

void sbx_buf_vaddf(struct sbx_buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	va_copy(cp, ap);
	int n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n <= 0)
		return;
	sbx_buf_grow(b, (size_t)n);
	vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
}

void sbx_buf_addf(struct sbx_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sbx_buf_vaddf(b, fmt, ap);
	va_end(ap);
}

void sbx_buf_reset(struct sbx_buf *b)
{
	b->len = 0;
	if (b->alloc)
		b->buf[0] = '\0';
}

void sbx_buf_consume(struct sbx_buf *b, size_t n)
{
	if (n >= b->len) {
		sbx_buf_reset(b);
		return;
	}
	memmove(b->buf, b->buf + n, b->len - n);
	b->len -= n;
	b->buf[b->len] = '\0';
}

char *sbx_buf_detach(struct sbx_buf *b, size_t *len)
{
	char *p;
	if (len)
		*len = b->len;
	if (b->alloc) {
		p = b->buf;
	} else {
		p = sbx_xmalloc(1);
		p[0] = '\0';
	}
	sbx_buf_init(b);
	return p;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 (RFC 3629: no overlong, no surrogate). */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	size_t n;
	unsigned long cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

void sbx_buf_add_utf8_escaped(struct sbx_buf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		size_t n = utf8_len(p);
		if (n) {
			sbx_buf_add(b, (const char *)p, n);
			p += n;
		} else {
			sbx_buf_addf(b, "\\x%02x", *p++);
		}
	}
}

bool sbx_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;
	while (*p)
		if (!(n = utf8_len(p)))
			return false;
		else
			p += n;
	return true;
}

int sbx_utf8_check(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;
	while (p < end) {
		unsigned char c = *p;
		size_t want = c < 0x80	 ? 1
			      : c < 0xc2 ? 0
			      : c < 0xe0 ? 2
			      : c < 0xf0 ? 3
			      : c < 0xf5 ? 4
					 : 0;
		if (!want)
			return -1;
		if ((size_t)(end - p) < want) {
			/* Complete it with the smallest continuation that keeps it valid. */
			unsigned char seq[5] = {0};
			memcpy(seq, p, (size_t)(end - p));
			for (size_t i = (size_t)(end - p); i < want; i++)
				seq[i] = c == 0xe0 && i == 1   ? 0xa0
					 : c == 0xf0 && i == 1 ? 0x90
							       : 0x80;
			return utf8_len(seq) ? (int)(end - p) : -1;
		}
		if (!utf8_len(p))
			return -1;
		p += want;
	}
	return 0;
}

void sbx_buf_add_shquoted(struct sbx_buf *b, const char *s)
{
	sbx_buf_addch(b, '\'');
	for (; *s; s++) {
		if (*s == '\'')
			sbx_buf_adds(b, "'\\''");
		else
			sbx_buf_addch(b, *s);
	}
	sbx_buf_addch(b, '\'');
}

void sbx_buf_add_capped(struct sbx_buf *b, const char *data, size_t n, size_t max)
{
	if (b->len < max)
		sbx_buf_add(b, data, n < max - b->len ? n : max - b->len);
}
