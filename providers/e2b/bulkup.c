/*
 * e2b/bulkup — several new files in one `POST /files` (what the SDK's
 * files.write([{path, data}, ...]) sends): a multipart body with one part
 * named `file` per file, its filename the full target path, no `path`
 * query parameter; the bodies are streamed from the callers' descriptors.
 * envd answers 200 with a JSON array of the entries it wrote.
 */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/xalloc.h"
#include "e2b.h"

struct put_many {
	struct sbx_new_file **files;
	struct sbx_http_fdpart *src;
	size_t n;
};

bool e2b_part_name_ok(const char *path)
{
	/*
	 * A quote, backslash, CR or LF would have to be escaped in the
	 * filename, and form encoders do that differently (undici and curl
	 * write %22, %0A, which envd would take literally): such a name goes
	 * up alone, with ?path=.
	 */
	return !strpbrk(path, "\"\\\r\n");
}

static int put_many_mime(void *ctx, struct curl_mime *mime)
{
	struct put_many *m = ctx;
	for (size_t i = 0; i < m->n; i++) {
		curl_mimepart *p;
		if (!(p = curl_mime_addpart(mime)) || curl_mime_name(p, "file") ||
		    curl_mime_filename(p, m->files[i]->path) ||
		    curl_mime_type(p, "application/octet-stream") ||
		    sbx_http_mime_fd(p, &m->src[i]))
			return -ENOMEM;
	}
	return 0;
}

void e2b_files_put_results(const char *body, size_t len, struct sbx_new_file **files, size_t n)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL, *e;
	size_t k;
	for (size_t i = 0; i < n; i++)
		files[i]->rc =
		    sbx_error_set(&files[i]->err, EIO, SBX_E_INTERNAL,
				  "write %s: not in the reply of POST /files", files[i]->path);
	json_array_foreach(j, k, e)
	{
		const char *p = json_string_value(json_object_get(e, "path"));
		for (size_t i = 0; p && i < n; i++) {
			if (!strcmp(p, files[i]->path)) {
				files[i]->rc = 0;
				sbx_error_clear(&files[i]->err);
			}
		}
	}
	json_decref(j);
}

int e2b_files_put_many(struct e2b_inst *in, struct sbx_new_file **files, size_t n,
		       struct sbx_error *e)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct put_many m = {files, sbx_xcalloc(n, sizeof(*m.src)), n};
	struct e2b_conn c;
	char what[48];
	int rc;

	for (size_t i = 0; i < n; i++)
		m.src[i] = (struct sbx_http_fdpart){.fd = files[i]->fd, .size = files[i]->size};
	e2b_conn_get(in, E2B_ENVD_PORT, &c);
	sbx_buf_adds(&c.base, "/files");
	req.url = c.base.buf;
	req.headers = c.headers;
	req.mime_fn = put_many_mime;
	req.mime_ctx = &m;
	req.stream = true;
	req.idle_ms = e2b_g.set.transfer_ms;
	req.idempotent = true; /* the same bytes to the same new names */
	sbx_http_resp_init(&resp);
	snprintf(what, sizeof(what), "write %zu files", n);
	rc = sbx_http_perform(e2b_g.http, &req, &resp, e);
	for (size_t i = 0; !rc && i < n; i++)
		if (m.src[i].err)
			rc = sbx_error_set(e, m.src[i].err, SBX_E_INTERNAL,
					   "write %s: reading the local copy failed",
					   files[i]->path);
	if (rc) {
		sbx_error_prefix(e, what);
	} else if (resp.status < 200 || resp.status > 299) {
		rc = sbx_error_set(e, sbx_errno_from_http(resp.status) ?: EIO, SBX_E_NONE,
				   "%s: HTTP %ld", what, resp.status);
	} else {
		e2b_files_put_results(resp.body.buf, resp.body.len, files, n);
	}
	sbx_http_resp_release(&resp);
	e2b_conn_release(&c);
	free(m.src);
	return rc;
}
