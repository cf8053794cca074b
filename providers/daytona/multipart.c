/*
 * daytona/multipart — the streaming multipart/form-data reader behind
 * /files/bulk-download (see protocol.h), and the single-file download that
 * read() builds on it.
 *
 * It is a reader of replies only (uploads are curl_mime's job), it keeps no
 * part body in memory (only a delimiter's worth of look-behind and a part's
 * headers, bounded), and it knows nothing of HTTP.
 */
#include "daytona/protocol.h"
#include "base/xalloc.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MP_HEADERS_MAX (8u << 10)
#define MP_NAME_MAX 4096

/* MP_BODY_LEN: a part with Content-Length, whose bytes are counted, not searched. */
enum { MP_PREAMBLE, MP_AFTER_DELIM, MP_HEADERS, MP_BODY, MP_BODY_LEN, MP_END };

int dt_boundary_parse(const char *ct, char *out, size_t size)
{
	const char *p = ct ? strcasestr(ct, "boundary=") : NULL;
	size_t n = 0;
	if (!p)
		return -EPROTO;
	p += 9;
	if (*p == '"') {
		for (p++; p[n] && p[n] != '"'; n++)
			;
	} else {
		while (p[n] && p[n] != ';' && !isspace((unsigned char)p[n]))
			n++;
	}
	if (!n || n > 200 || n >= size)
		return -EPROTO;
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

int dt_multipart_init(struct dt_multipart *mp, const char *boundary,
		      const struct dt_multipart_ops *ops, void *ctx)
{
	size_t n = strlen(boundary);
	memset(mp, 0, sizeof(*mp));
	if (!n || n > 200)
		return -EPROTO;
	mp->ops = ops;
	mp->ctx = ctx;
	mp->dlen = (size_t)snprintf(mp->delim, sizeof(mp->delim), "\r\n--%s", boundary);
	mp->state = MP_PREAMBLE;
	sbx_buf_init(&mp->pend);
	/* The first delimiter may open the body: give it the CRLF it lacks. */
	sbx_buf_adds(&mp->pend, "\r\n");
	return 0;
}

void dt_multipart_release(struct dt_multipart *mp)
{
	sbx_buf_release(&mp->pend);
}

/* Copies a parameter value (quoted-string or token) of a header into out. */
static void param_value(const char *p, char *out, size_t size)
{
	size_t o = 0;
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1])
				p++;
			if (o + 1 < size)
				out[o++] = *p;
		}
	} else {
		for (; *p && *p != ';' && !isspace((unsigned char)*p); p++)
			if (o + 1 < size)
				out[o++] = *p;
	}
	out[o] = '\0';
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* RFC 5987 ext-value: charset'lang'pct-encoded (only UTF-8 is decoded). */
static bool ext_value(const char *v, char *out, size_t size)
{
	const char *q = strchr(v, '\'');
	size_t o = 0;
	if (!q || strncasecmp(v, "utf-8'", 6) || !(q = strchr(q + 1, '\'')))
		return false;
	for (q++; *q && o + 1 < size; q++) {
		if (*q == '%' && hexval(q[1]) >= 0 && hexval(q[2]) >= 0) {
			out[o++] = (char)(hexval(q[1]) * 16 + hexval(q[2]));
			q += 2;
		} else {
			out[o++] = *q;
		}
	}
	out[o] = '\0';
	return true;
}

/* Finds the parameter `key` of a header line (case-insensitive), or NULL. */
static const char *find_param(const char *line, const char *key)
{
	size_t kl = strlen(key);
	bool quoted = false;
	for (const char *p = line; *p; p++) {
		if (*p == '"' && (p == line || p[-1] != '\\'))
			quoted = !quoted;
		if (quoted || *p != ';')
			continue;
		const char *k = p + 1;
		while (*k == ' ' || *k == '\t')
			k++;
		if (!strncasecmp(k, key, kl) && k[kl] == '=')
			return k + kl + 1;
	}
	return NULL;
}

static int parse_headers(struct dt_multipart *mp, char *hdr)
{
	char name[256] = "", filename[MP_NAME_MAX] = "";
	mp->part_len = -1;
	for (char *line = hdr; line && *line;) {
		char *eol = strstr(line, "\r\n");
		if (eol)
			*eol = '\0';
		if (!strncasecmp(line, "Content-Length:", 15)) {
			char *end;
			long long n = strtoll(line + 15, &end, 10);
			while (*end == ' ' || *end == '\t')
				end++;
			if (end != line + 15 && !*end && n >= 0)
				mp->part_len = n;
		} else if (!strncasecmp(line, "Content-Disposition:", 20)) {
			const char *v;
			if ((v = find_param(line, "name")))
				param_value(v, name, sizeof(name));
			if ((v = find_param(line, "filename")))
				param_value(v, filename, sizeof(filename));
			if ((v = find_param(line, "filename*"))) {
				char raw[MP_NAME_MAX * 3], dec[MP_NAME_MAX];
				param_value(v, raw, sizeof(raw));
				if (ext_value(raw, dec, sizeof(dec))) /* else keep filename= */
					memcpy(filename, dec, sizeof(filename));
			}
		}
		line = eol ? eol + 2 : NULL;
	}
	return mp->ops->begin ? mp->ops->begin(mp->ctx, name, filename) : 0;
}

static int emit(struct dt_multipart *mp, const char *p, size_t n)
{
	if (!n || !mp->ops->data)
		return 0;
	return mp->ops->data(mp->ctx, p, n);
}

/* Runs the state machine over mp->pend as far as it can; 0, >0 stop, <0 error. */
static int step(struct dt_multipart *mp)
{
	struct sbx_buf *b = &mp->pend;
	int rc;
	for (;;) {
		switch (mp->state) {
		case MP_PREAMBLE:
		case MP_BODY: {
			char *hit = memmem(b->buf, b->len, mp->delim, mp->dlen);
			size_t keep, out;
			if (hit) {
				out = (size_t)(hit - b->buf);
				rc = mp->state == MP_BODY ? emit(mp, b->buf, out) : 0;
				if (!rc && mp->state == MP_BODY && mp->ops->end)
					rc = mp->ops->end(mp->ctx);
				sbx_buf_consume(b, out + mp->dlen);
				mp->state = MP_AFTER_DELIM;
				if (rc)
					return rc;
				continue;
			}
			/* Keep what could still be the start of a delimiter. */
			keep = b->len < mp->dlen - 1 ? b->len : mp->dlen - 1;
			out = b->len - keep;
			rc = mp->state == MP_BODY ? emit(mp, b->buf, out) : 0;
			sbx_buf_consume(b, out);
			return rc;
		}
		case MP_AFTER_DELIM: {
			size_t i = 0;
			while (i < b->len && (b->buf[i] == ' ' || b->buf[i] == '\t'))
				i++;
			if (b->len - i < 2)
				return 0;
			if (b->buf[i] == '-' && b->buf[i + 1] == '-') {
				mp->state = MP_END;
			} else if (b->buf[i] == '\r' && b->buf[i + 1] == '\n') {
				mp->state = MP_HEADERS;
			} else {
				return -EPROTO;
			}
			sbx_buf_consume(b, i + 2);
			continue;
		}
		case MP_HEADERS: {
			char *end;
			size_t hl;
			if (b->len >= 2 && b->buf[0] == '\r' && b->buf[1] == '\n') {
				hl = 0;
			} else if ((end = memmem(b->buf, b->len, "\r\n\r\n", 4))) {
				hl = (size_t)(end - b->buf) + 2;
			} else {
				return b->len > MP_HEADERS_MAX ? -EPROTO : 0;
			}
			if (hl > MP_HEADERS_MAX)
				return -EPROTO;
			char *hdr = sbx_xstrndup(b->buf, hl);
			rc = parse_headers(mp, hdr);
			free(hdr);
			sbx_buf_consume(b, hl + 2);
			mp->state = mp->part_len >= 0 ? MP_BODY_LEN : MP_BODY;
			if (rc)
				return rc;
			continue;
		}
		case MP_BODY_LEN: {
			/*
			 * Counted bytes may hold the delimiter itself (a file can
			 * contain anything); after them, the delimiter is searched
			 * for as in the preamble.
			 */
			size_t n = (unsigned long long)mp->part_len < b->len ? (size_t)mp->part_len
									     : b->len;
			rc = emit(mp, b->buf, n);
			sbx_buf_consume(b, n);
			mp->part_len -= (long long)n;
			if (rc)
				return rc;
			if (mp->part_len)
				return 0;
			if (mp->ops->end && (rc = mp->ops->end(mp->ctx)))
				return rc;
			/* What follows is "\r\n--boundary": found as in the preamble. */
			mp->state = MP_PREAMBLE;
			continue;
		}
		case MP_END:
		default:
			sbx_buf_reset(b);
			return 0;
		}
	}
}

int dt_multipart_feed(struct dt_multipart *mp, const char *p, size_t n)
{
	if (mp->rc)
		return mp->rc;
	if (mp->state == MP_END)
		return 0;
	sbx_buf_add(&mp->pend, p, n);
	mp->rc = step(mp);
	return mp->rc;
}

int dt_multipart_finish(struct dt_multipart *mp)
{
	if (mp->rc)
		return mp->rc;
	return mp->state == MP_END ? 0 : -EPROTO;
}

/* --- the single-file download of read() ----------------------------------- */

enum { DL_NONE, DL_FILE, DL_ERROR, DL_SKIP, DL_DONE };

static int dl_begin(void *ctx, const char *name, const char *filename)
{
	struct dt_download *d = ctx;
	if (d->got_file || d->part == DL_DONE) {
		d->part = DL_SKIP;
		return 0;
	}
	if (!strcmp(name, "file") || !strcmp(name, "error")) {
		/* The daemon keys every part by the exact requested path. */
		if (strcmp(filename, d->path))
			return sbx_error_set(d->err, EIO, SBX_E_INTERNAL,
					     "download %s: reply carries a part for another path",
					     d->path);
		d->part = !strcmp(name, "file") ? DL_FILE : DL_ERROR;
		return 0;
	}
	d->part = DL_SKIP;
	return 0;
}

static int dl_data(void *ctx, const char *p, size_t n)
{
	struct dt_download *d = ctx;
	int rc;
	if (d->part == DL_ERROR) {
		sbx_buf_add_capped(&d->errbody, p, n, DT_ERRBODY_MAX);
		return 0;
	}
	if (d->part != DL_FILE)
		return 0;
	if (d->skip > 0) {
		size_t s = (long long)n < d->skip ? n : (size_t)d->skip;
		d->skip -= (long long)s;
		p += s;
		n -= s;
	}
	if (d->left >= 0 && (long long)n > d->left)
		n = (size_t)d->left;
	if (n) {
		rc = d->sink(d->sink_ctx, p, n);
		if (rc)
			return sbx_error_set(d->err, rc, 0, "download %s: %s", d->path,
					     "the reader stopped the transfer");
	}
	if (d->left >= 0) {
		d->left -= (long long)n;
		if (!d->left) {
			d->got_file = true;
			d->part = DL_DONE;
			return DT_DOWNLOAD_DONE;
		}
	}
	return 0;
}

static int dl_end(void *ctx)
{
	struct dt_download *d = ctx;
	if (d->part == DL_FILE) {
		d->got_file = true;
		d->part = DL_DONE;
	} else if (d->part == DL_ERROR) {
		json_t *j = json_loadb(d->errbody.buf, d->errbody.len, 0, NULL);
		json_t *st = json_object_get(j, "statusCode");
		long status = json_is_integer(st) ? (long)json_integer_value(st) : 500;
		char *what = sbx_xasprintf("read %s", d->path);
		int rc;
		json_decref(j);
		rc = dt_error_from_reply(status, d->errbody.buf, d->errbody.len, what, d->err);
		free(what);
		return rc;
	}
	return 0;
}

static const struct dt_multipart_ops dl_ops = {dl_begin, dl_data, dl_end};

int dt_download_init(struct dt_download *d, const char *content_type, const char *path,
		     long long off, long long len, sbx_sink_fn sink, void *ctx,
		     struct sbx_error *err)
{
	char boundary[256];
	memset(d, 0, sizeof(*d));
	sbx_buf_init(&d->errbody);
	d->path = path;
	d->skip = off > 0 ? off : 0;
	d->left = len;
	d->sink = sink;
	d->sink_ctx = ctx;
	d->err = err;
	if (dt_boundary_parse(content_type, boundary, sizeof(boundary)) ||
	    dt_multipart_init(&d->mp, boundary, &dl_ops, d))
		return sbx_error_set(err, EIO, SBX_E_INTERNAL,
				     "read %s: reply is not multipart (%s)", path,
				     content_type ? content_type : "no Content-Type");
	if (!len) {
		d->got_file = true;
		d->part = DL_DONE;
	}
	return 0;
}

int dt_download_feed(struct dt_download *d, const char *p, size_t n)
{
	int rc;
	if (d->part == DL_DONE && d->got_file && d->left == 0)
		return DT_DOWNLOAD_DONE;
	rc = dt_multipart_feed(&d->mp, p, n);
	if (rc == -EPROTO && d->err && !d->err->err)
		sbx_error_set(d->err, EIO, SBX_E_INTERNAL, "read %s: malformed multipart reply",
			      d->path);
	return rc == -EPROTO ? -EIO : rc;
}

int dt_download_finish(struct dt_download *d)
{
	int rc = d->mp.rc;
	if (rc < 0)
		return rc == -EPROTO ? -EIO : rc;
	if (d->got_file && (rc == DT_DOWNLOAD_DONE || d->left == 0))
		return 0;
	if (dt_multipart_finish(&d->mp))
		return sbx_error_set(d->err, EIO, SBX_E_INTERNAL, "read %s: reply was cut short",
				     d->path);
	if (!d->got_file)
		return sbx_error_set(d->err, EIO, SBX_E_INTERNAL, "read %s: reply has no file part",
				     d->path);
	return 0;
}

void dt_download_release(struct dt_download *d)
{
	dt_multipart_release(&d->mp);
	sbx_buf_release(&d->errbody);
}
