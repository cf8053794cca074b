/*
 * daytona/readmany — read_many: many files' contents in one POST
 * /files/bulk-download, what the SDK's downloadFiles() sends. Each
 * requested path comes back as one part, `file` (its bytes) or `error`
 * (missing, a directory, unreadable), keyed by the exact path in its
 * filename (§2.3). The reply is collected whole (bounded by max_bytes)
 * and checked before any file is handed to the caller: a cut or
 * malformed reply yields nothing. The daemon measures no stamp, so st is
 * NULL (the core vouches with the listing's, by size).
 */
#include "daytona/readmany.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "daytona/daytona.h"

enum { MANY_NONE, MANY_OPEN, MANY_WHOLE, MANY_ERROR };

static int many_begin(void *ctx, const char *name, const char *filename)
{
	struct dt_many *m = ctx;
	bool file = !strcmp(name, "file");
	m->cur = -1;
	if (!file && strcmp(name, "error"))
		return 0; /* a part of no interest */
	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->paths[i], filename))
			continue;
		if (m->state[i] != MANY_NONE)
			return -EIO; /* a second part for one path */
		m->state[i] = file ? MANY_OPEN : MANY_ERROR;
		m->cur = file ? (long)i : -1;
		return 0;
	}
	return -EIO; /* a path not asked for */
}

static int many_data(void *ctx, const char *p, size_t n)
{
	struct dt_many *m = ctx;
	if (m->cur < 0)
		return 0;
	if (n > m->max - m->total)
		return -EFBIG;
	m->total += n;
	sbx_buf_add(&m->data[m->cur], p, n);
	return 0;
}

static int many_end(void *ctx)
{
	struct dt_many *m = ctx;
	if (m->cur >= 0)
		m->state[m->cur] = MANY_WHOLE;
	m->cur = -1;
	return 0;
}

static const struct dt_multipart_ops many_ops = {many_begin, many_data, many_end};

int dt_many_init(struct dt_many *m, const char *content_type, const char *const *paths, size_t n,
		 size_t max)
{
	char boundary[256];
	memset(m, 0, sizeof(*m));
	m->paths = paths;
	m->n = n;
	m->max = max;
	m->cur = -1;
	m->data = sbx_xcalloc(n ? n : 1, sizeof(*m->data));
	m->state = sbx_xcalloc(n ? n : 1, 1);
	for (size_t i = 0; i < n; i++)
		sbx_buf_init(&m->data[i]);
	if (dt_boundary_parse(content_type, boundary, sizeof(boundary)) ||
	    dt_multipart_init(&m->mp, boundary, &many_ops, m))
		return -EIO;
	return 0;
}

int dt_many_feed(struct dt_many *m, const char *p, size_t len)
{
	int rc = dt_multipart_feed(&m->mp, p, len);
	return rc == -EPROTO ? -EIO : rc;
}

int dt_many_finish(struct dt_many *m,
		   int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			     const struct sbx_stat *st),
		   void *ctx)
{
	int rc = m->mp.rc ? m->mp.rc : dt_multipart_finish(&m->mp);
	if (rc)
		return rc == -EPROTO ? -EIO : rc;
	for (size_t i = 0; i < m->n; i++) {
		if (m->state[i] == MANY_WHOLE &&
		    (rc = fn(ctx, i, m->data[i].buf, m->data[i].len, NULL)))
			return rc;
	}
	return 0;
}

void dt_many_release(struct dt_many *m)
{
	if (m->data) {
		for (size_t i = 0; i < m->n; i++)
			sbx_buf_release(&m->data[i]);
	}
	free(m->data);
	free(m->state);
	dt_multipart_release(&m->mp);
	memset(m, 0, sizeof(*m));
}

/* ---- the slot ------------------------------------------------------------------ */

struct many_call {
	struct dt_many m;
	const char *const *paths;
	size_t n, max;
	bool started;
	int rc; /* the collector's own error */
};

static int many_response(void *ctx, const struct sbx_http_resp *resp)
{
	struct many_call *c = ctx;
	c->started = true;
	c->rc = dt_many_init(&c->m, resp->content_type, c->paths, c->n, c->max);
	return c->rc;
}

static int many_sink(void *ctx, const char *data, size_t len)
{
	struct many_call *c = ctx;
	if (!c->rc)
		c->rc = dt_many_feed(&c->m, data, len);
	return c->rc;
}

int dt_read_many(struct sbx_instance *inst, const char *const *paths, size_t n, size_t max_bytes,
		 int (*fn)(void *ctx, size_t index, const char *data, size_t len,
			   const struct sbx_stat *st),
		 void *ctx, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct many_call c = {.paths = paths, .n = n, .max = max_bytes};
	struct sbx_buf url = SBX_BUF_INIT;
	json_t *arr = sbx_xjson(json_array()), *body;
	char what[64];
	int rc = 0;

	/* What is queued for these paths (a chmod, a link) goes first, as for read. */
	for (size_t i = 0; i < n && !rc; i++)
		rc = dt_batch_flush_for(di, paths[i], err);
	if (rc) {
		json_decref(arr);
		return rc;
	}
	/* A path JSON cannot carry (not UTF-8) is left out: its own read says why. */
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_string(paths[i]);
		if (s)
			json_array_append_new(arr, s);
	}
	body = sbx_xjson(json_pack("{s:o}", "paths", arr));
	snprintf(what, sizeof(what), "read %zu files", n);
	dt_toolbox_url(di, &url, "/files/bulk-download");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .accept = "multipart/form-data",
				       .what = what,
				       .on_response = many_response,
				       .sink = many_sink,
				       .sink_ctx = &c,
				       .stream = true,
				       .idempotent = true},
		     err);
	if (c.rc)
		rc = sbx_error_set(err, -c.rc, SBX_E_INTERNAL, "%s: %s", what,
				   c.rc == -EFBIG ? "reply larger than asked for"
						  : "malformed multipart reply");
	else if (!rc && c.started)
		rc = dt_many_finish(&c.m, fn, ctx);
	if (rc == -EIO && !err->err)
		sbx_error_set(err, EIO, SBX_E_INTERNAL, "%s: reply cut short", what);
	if (c.started)
		dt_many_release(&c.m);
	json_decref(body);
	sbx_buf_release(&url);
	return rc;
}
