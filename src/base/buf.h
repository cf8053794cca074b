/*
 * buf — one growable byte buffer (modelled on git's strbuf).
 *
 * Invariants: b->buf is never NULL and always NUL-terminated at b->len;
 * SBX_BUF_INIT needs no allocation (it points at a shared empty string);
 * sbx_buf_detach() hands the storage to the caller and resets the buffer.
 * It is not a string-formatting library beyond printf-style appends.
 */
#ifndef SBX_BUF_H
#define SBX_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct sbx_buf {
	char *buf;
	size_t len;
	size_t alloc; /* 0 while buf points at the shared empty string */
};

extern char sbx_buf_empty[];
#define SBX_BUF_INIT                                                                               \
	{                                                                                          \
		sbx_buf_empty, 0, 0                                                                \
	}

void sbx_buf_init(struct sbx_buf *b);
/* Frees the storage and leaves b as SBX_BUF_INIT. */
void sbx_buf_release(struct sbx_buf *b);
/* Ensures room for extra more bytes (plus the NUL). Aborts on OOM. */
void sbx_buf_grow(struct sbx_buf *b, size_t extra);
void sbx_buf_add(struct sbx_buf *b, const void *data, size_t n);
void sbx_buf_adds(struct sbx_buf *b, const char *s);
void sbx_buf_addch(struct sbx_buf *b, char c);
void sbx_buf_addf(struct sbx_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbx_buf_vaddf(struct sbx_buf *b, const char *fmt, va_list ap);
void sbx_buf_reset(struct sbx_buf *b);
/* Removes the first n bytes. */
void sbx_buf_consume(struct sbx_buf *b, size_t n);
/* Returns the malloc'd string (caller frees; never NULL) and resets b. */
char *sbx_buf_detach(struct sbx_buf *b, size_t *len);
/* Appends s quoted for a POSIX shell ('...' with embedded ' escaped). */
void sbx_buf_add_shquoted(struct sbx_buf *b, const char *s);
/* Appends what of data[0..n) fits below max bytes in b (the rest is dropped). */
void sbx_buf_add_capped(struct sbx_buf *b, const char *data, size_t n, size_t max);
/*
 * Appends s with every byte that is not part of valid UTF-8 written as
 * the four characters \xNN: text for JSON (jansson refuses the rest) that
 * still shows which bytes were there.
 */
void sbx_buf_add_utf8_escaped(struct sbx_buf *b, const char *s);
/* Whether s is valid UTF-8 (RFC 3629: no overlong form, no surrogate). */
bool sbx_utf8_valid(const char *s);
/*
 * s[0..n) as text that goes on: -1 when a byte cannot be part of valid
 * UTF-8, else how many bytes at its end begin a sequence still incomplete
 * (0-3).
 */
int sbx_utf8_check(const char *s, size_t n);

#endif
