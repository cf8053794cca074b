/*
 * http_util — the pure half of the http module (see http.h): URL escaping,
 * query strings, header parsing, Retry-After, Content-Range, content
 * types and retry delays. No curl, no I/O: unit-tested by check_http.
 */
#include "base/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void sbx_http_add_escaped(struct sbx_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			sbx_buf_addch(b, (char)c);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			sbx_buf_add(b, e, 3);
		}
	}
}

void sbx_http_add_query(struct sbx_buf *b, const char *name, const char *value)
{
	if (!value)
		return;
	sbx_buf_addch(b, memchr(b->buf, '?', b->len) ? '&' : '?');
	sbx_http_add_escaped(b, name);
	sbx_buf_addch(b, '=');
	sbx_http_add_escaped(b, value);
}

static size_t trim_len(const char **s, size_t len)
{
	while (len && (**s == ' ' || **s == '\t')) {
		(*s)++;
		len--;
	}
	while (len && ((*s)[len - 1] == ' ' || (*s)[len - 1] == '\t' || (*s)[len - 1] == '\r' ||
		       (*s)[len - 1] == '\n'))
		len--;
	return len;
}

long sbx_http_header_find(const char *block, size_t len, const char *name, char *out, size_t size)
{
	size_t nl = strlen(name);
	const char *p = block, *end = block + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = eol ? eol : end;
		if ((size_t)(line_end - p) > nl && !strncasecmp(p, name, nl) && p[nl] == ':') {
			const char *v = p + nl + 1;
			size_t vl = trim_len(&v, (size_t)(line_end - v));
			if (size) {
				size_t n = vl < size - 1 ? vl : size - 1;
				memcpy(out, v, n);
				out[n] = '\0';
			}
			return (long)vl;
		}
		p = line_end + 1;
	}
	return -1;
}

long sbx_http_resp_header(const struct sbx_http_resp *r, const char *name, char *out, size_t size)
{
	return sbx_http_header_find(r->headers.buf, r->headers.len, name, out, size);
}

long sbx_http_parse_status_line(const char *line, size_t len)
{
	size_t i = 5;
	long st = 0;
	int digits = 0;
	if (len < 5 || strncmp(line, "HTTP/", 5))
		return -1;
	while (i < len && line[i] != ' ')
		i++;
	while (i < len && line[i] == ' ')
		i++;
	for (; i < len && line[i] >= '0' && line[i] <= '9' && digits < 3; i++, digits++)
		st = st * 10 + (line[i] - '0');
	if (digits != 3 || (i < len && line[i] >= '0' && line[i] <= '9'))
		return -1;
	return st;
}

long sbx_http_parse_retry_after(const char *v)
{
	char *end;
	long s;
	if (!v)
		return -1;
	while (*v == ' ')
		v++;
	if (*v < '0' || *v > '9')
		return -1;
	errno = 0;
	s = strtol(v, &end, 10);
	while (*end == ' ' || *end == '\r' || *end == '\n')
		end++;
	if (errno || *end)
		return -1;
	return s;
}

int sbx_http_parse_content_range(const char *v, off_t *start, off_t *end, off_t *total)
{
	long long a, b, t = -1;
	int n = 0;
	if (!v || strncasecmp(v, "bytes ", 6))
		return -EINVAL;
	v += 6;
	while (*v == ' ')
		v++;
	if (sscanf(v, "%lld-%lld/%n", &a, &b, &n) != 2 || !n)
		return -EINVAL;
	if (v[n] == '*') {
		if (v[n + 1] && v[n + 1] != '\r' && v[n + 1] != '\n' && v[n + 1] != ' ')
			return -EINVAL;
	} else {
		char *e;
		errno = 0;
		t = strtoll(v + n, &e, 10);
		if (errno || e == v + n || (*e && *e != '\r' && *e != '\n' && *e != ' '))
			return -EINVAL;
		if (t <= b)
			return -EINVAL;
	}
	if (a < 0 || b < a)
		return -EINVAL;
	*start = (off_t)a;
	*end = (off_t)b;
	*total = (off_t)t;
	return 0;
}

bool sbx_http_content_type_is(const char *ct, const char *type)
{
	size_t tl = strlen(type);
	if (!ct)
		return false;
	while (*ct == ' ')
		ct++;
	if (strncasecmp(ct, type, tl))
		return false;
	ct += tl;
	while (*ct == ' ')
		ct++;
	return !*ct || *ct == ';';
}

long sbx_http_retry_delay_ms(int attempt, long retry_after_s, long remaining_ms, unsigned rnd)
{
	long d;
	if (retry_after_s >= 0) {
		if (retry_after_s > SBX_HTTP_RETRY_AFTER_MAX_S)
			return -1;
		d = retry_after_s * 1000;
	} else {
		long base = 250L << (attempt < 5 ? attempt : 5);
		if (base > 4000)
			base = 4000;
		d = base / 2 + (long)(rnd % (unsigned)(base / 2 + 1));
	}
	if (remaining_ms >= 0 && d >= remaining_ms)
		return -1;
	return d;
}
