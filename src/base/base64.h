/*
 * base64 — standard base64 (RFC 4648 alphabet, '=' padding), the one copy
 * the providers share: e2b's bytes fields, daytona's shell-borne uploads
 * and the kernel driver's rich outputs.
 */
#ifndef SBX_BASE64_H
#define SBX_BASE64_H

#include <stddef.h>

#include "base/buf.h"

/* Appends the padded encoding of in[0..len) to out. */
void sbx_base64_encode(const void *in, size_t len, struct sbx_buf *out);
/*
 * Appends the decoded bytes of in[0..len) to out. Padding is optional;
 * '\n', '\r' and ' ' are skipped anywhere. -EINVAL (out then holds a
 * partial result) for a character outside the alphabet, a digit after
 * '=', or a lone trailing digit that carries no whole byte; else 0.
 */
int sbx_base64_decode(const char *in, size_t len, struct sbx_buf *out);

#endif
