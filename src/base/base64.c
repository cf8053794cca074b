/* base64 — standard base64 encode and decode into a struct sbx_buf. */
#include "base/base64.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void sbx_base64_encode(const void *in, size_t len, struct sbx_buf *out)
{
	const unsigned char *p = in;
	for (size_t i = 0; i < len; i += 3) {
		unsigned long v = (unsigned long)p[i] << 16;
		if (i + 1 < len)
			v |= (unsigned long)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		char q[4] = {digits[(v >> 18) & 63], digits[(v >> 12) & 63],
			     i + 1 < len ? digits[(v >> 6) & 63] : '=',
			     i + 2 < len ? digits[v & 63] : '='};
		sbx_buf_add(out, q, 4);
	}
}

/* 0-63 for a base64 digit, -1 for anything else (NUL included). */
static int value(unsigned char c)
{
	const char *p = c ? strchr(digits, c) : NULL;
	return p ? (int)(p - digits) : -1;
}

int sbx_base64_decode(const char *in, size_t len, struct sbx_buf *out)
{
	unsigned long acc = 0;
	int bits = 0;
	bool padded = false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c == '\n' || c == '\r' || c == ' ')
			continue;
		if (c == '=') {
			padded = true;
			continue;
		}
		int v = value(c);
		if (v < 0 || padded)
			return -EINVAL;
		acc = (acc << 6) | (unsigned long)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			sbx_buf_addch(out, (char)((acc >> bits) & 0xff));
		}
	}
	return bits >= 6 ? -EINVAL : 0; /* a lone digit carries no whole byte */
}
