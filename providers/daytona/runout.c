/*
 * daytona/runout — a session run's stdout and stderr, byte for byte.
 *
 * The toolbox hands session logs back inside JSON text, where a byte that
 * is not UTF-8 arrives as U+FFFD. So a run sends its two streams to files
 * in the sandbox (/tmp/.run-<session>.<token>.{out,err}, created by the
 * session shell before the run starts; the same line removes the files of
 * the session's earlier runs; where they cannot be made, the output goes
 * to the session log as before and is read from there at the end), and
 * every poll fetches both with one
 * POST /files/bulk-download, the byte-exact file endpoint. The reply is
 * parsed as it streams: the bytes beyond those already delivered go to the
 * run's sink, nothing is held. A file not there yet (the shell has not
 * reached the run) counts as empty. The poll downloads each file whole, as
 * the logs call returned each log whole, so the output of one run keeps
 * the same bound (DT_LOGS_MAX, EFBIG past it).
 */
#include "daytona/runout.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/xalloc.h"

#define RO_ERRBODY_MAX 4096

void dt_runout_init(struct dt_runout *ro, const char *sid, const char *token)
{
	memset(ro, 0, sizeof(*ro));
	snprintf(ro->path[0], sizeof(ro->path[0]), "/tmp/.run-%s.%s.out", sid, token);
	snprintf(ro->path[1], sizeof(ro->path[1]), "/tmp/.run-%s.%s.err", sid, token);
	snprintf(ro->glob, sizeof(ro->glob), "/tmp/.run-%s.*.out /tmp/.run-%s.*.err", sid, sid);
}

void dt_runout_prefix(struct sbx_buf *cmd, const struct dt_runout *ro)
{
	/*
	 * Session ids and tokens are [a-z0-9-]: the glob needs no quoting. It
	 * is expanded by sh, whatever the session's shell (zsh would abort the
	 * line on a glob that matches nothing).
	 */
	sbx_buf_addf(cmd, "sh -c 'rm -f %s' 2>/dev/null; ", ro->glob);
	/*
	 * A subshell whose streams become the two files when both can be
	 * made; otherwise the run still runs, its output going to the session
	 * log (read when it ends: dt_runout_fetch() finds neither file).
	 */
	sbx_buf_adds(cmd, "( if : >");
	sbx_buf_add_shquoted(cmd, ro->path[0]);
	sbx_buf_adds(cmd, " 2>/dev/null && : >");
	sbx_buf_add_shquoted(cmd, ro->path[1]);
	sbx_buf_adds(cmd, " 2>/dev/null; then exec >");
	sbx_buf_add_shquoted(cmd, ro->path[0]);
	sbx_buf_adds(cmd, " 2>");
	sbx_buf_add_shquoted(cmd, ro->path[1]);
	sbx_buf_adds(cmd, "; else rm -f ");
	sbx_buf_add_shquoted(cmd, ro->path[0]);
	sbx_buf_adds(cmd, "; fi; ");
}

void dt_runout_suffix(struct sbx_buf *cmd)
{
	sbx_buf_adds(cmd, " )");
}

/* --- one fetch ---------------------------------------------------------------- */

struct fetch {
	struct dt_runout *ro;
	const struct sbx_run_sink *sink;
	struct dt_multipart mp;
	bool started;
	int part;	 /* -1 none/ignored, 0 stdout, 1 stderr */
	bool error_part; /* the current part is an `error` one */
	long long pos;	 /* bytes of the current file part so far */
	long long total; /* bytes of both files in this reply */
	bool seen[2];	 /* a file or error part came for each stream */
	struct sbx_buf errbody;
	struct sbx_error *err;
};

static int f_begin(void *ctx, const char *name, const char *filename)
{
	struct fetch *f = ctx;
	f->part = -1;
	f->error_part = false;
	f->pos = 0;
	f->errbody.len = 0;
	for (int i = 0; i < 2; i++)
		if (!strcmp(filename, f->ro->path[i]))
			f->part = i;
	if (f->part < 0 || f->seen[f->part])
		return sbx_error_set(f->err, EIO, SBX_E_INTERNAL,
				     "run: output reply carries an unexpected part (%s)", filename);
	f->seen[f->part] = true;
	if (!strcmp(name, "error"))
		f->error_part = true;
	else if (strcmp(name, "file"))
		f->part = -1;
	return 0;
}

static int f_data(void *ctx, const char *p, size_t n)
{
	struct fetch *f = ctx;
	long long *sent;
	int rc;

	if (f->part < 0)
		return 0;
	if (f->error_part) {
		sbx_buf_add_capped(&f->errbody, p, n, RO_ERRBODY_MAX);
		return 0;
	}
	f->total += (long long)n;
	if (f->total > (long long)DT_LOGS_MAX)
		return sbx_error_set(f->err, EFBIG, SBX_E_EXECUTION_FAILED,
				     "run: output over %u MiB (each poll downloads it whole)",
				     DT_LOGS_MAX >> 20);
	sent = &f->ro->sent[f->part];
	if (f->pos + (long long)n > *sent) {
		size_t skip = f->pos >= *sent ? 0 : (size_t)(*sent - f->pos);
		if (f->sink && f->sink->output &&
		    (rc = f->sink->output(f->sink->ctx, f->part ? SBX_STDERR : SBX_STDOUT, p + skip,
					  n - skip)))
			return sbx_error_set(f->err, rc, 0, "run: the reader stopped the output");
		*sent = f->pos + (long long)n;
	}
	f->pos += (long long)n;
	return 0;
}

static int f_end(void *ctx)
{
	struct fetch *f = ctx;
	json_t *j, *st;
	long status;

	if (f->part < 0 || !f->error_part)
		return 0;
	j = json_loadb(f->errbody.buf, f->errbody.len, 0, NULL);
	st = json_object_get(j, "statusCode");
	status = json_is_integer(st) ? (long)json_integer_value(st) : 500;
	json_decref(j);
	if (status == 404) {
		f->ro->missing[f->part] = true; /* not created yet: nothing so far */
		return 0;
	}
	return dt_error_from_reply(status, f->errbody.buf, f->errbody.len, "run: output", f->err);
}

static const struct dt_multipart_ops f_ops = {f_begin, f_data, f_end};

static int f_on_response(void *ctx, const struct sbx_http_resp *resp)
{
	struct fetch *f = ctx;
	char boundary[256];
	if (f->started)
		dt_multipart_release(&f->mp);
	f->started = false;
	if (dt_boundary_parse(resp->content_type, boundary, sizeof(boundary)) ||
	    dt_multipart_init(&f->mp, boundary, &f_ops, f))
		return sbx_error_set(f->err, EIO, SBX_E_INTERNAL,
				     "run: output reply is not multipart (%s)",
				     *resp->content_type ? resp->content_type : "no Content-Type");
	f->started = true;
	return 0;
}

static int f_sink(void *ctx, const char *p, size_t n)
{
	struct fetch *f = ctx;
	int rc = dt_multipart_feed(&f->mp, p, n);
	if (rc == -EPROTO && !f->err->err)
		sbx_error_set(f->err, EIO, SBX_E_INTERNAL, "run: malformed multipart reply");
	return rc == -EPROTO ? -EIO : rc;
}

int dt_runout_fetch(struct dt_instance *di, struct dt_runout *ro, const struct sbx_run_sink *sink,
		    struct sbx_error *err)
{
	struct sbx_error ferr = SBX_ERROR_INIT;
	struct fetch f = {.ro = ro, .sink = sink, .part = -1, .err = &ferr};
	struct sbx_buf url = SBX_BUF_INIT;
	json_t *body = sbx_xjson(json_pack("{s[ss]}", "paths", ro->path[0], ro->path[1]));
	int rc;

	sbx_buf_init(&f.errbody);
	ro->missing[0] = ro->missing[1] = false;
	dt_toolbox_url(di, &url, "/files/bulk-download");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .accept = "multipart/form-data",
				       .what = "run: output",
				       .on_response = f_on_response,
				       .sink = f_sink,
				       .sink_ctx = &f,
				       .stream = true,
				       .idempotent = true},
		     err);
	if (f.started) {
		if (!rc && !ferr.err && dt_multipart_finish(&f.mp))
			sbx_error_set(&ferr, EIO, SBX_E_INTERNAL,
				      "run: output reply was cut short");
		if (!ferr.err && !rc && (!f.seen[0] || !f.seen[1]))
			sbx_error_set(&ferr, EIO, SBX_E_INTERNAL,
				      "run: output reply lacks a stream's part");
		if (ferr.err) {
			/* The parser's own reason beats http's generic one. */
			rc = -ferr.err;
			if (err)
				*err = ferr;
		}
		dt_multipart_release(&f.mp);
	}
	sbx_buf_release(&f.errbody);
	sbx_buf_release(&url);
	json_decref(body);
	return rc;
}

void dt_runout_remove(struct dt_instance *di, const struct dt_runout *ro)
{
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	int code = -1;
	sbx_buf_adds(&cmd, "rm -f ");
	sbx_buf_add_shquoted(&cmd, ro->path[0]);
	sbx_buf_addch(&cmd, ' ');
	sbx_buf_add_shquoted(&cmd, ro->path[1]);
	if (dt_exec(di, cmd.buf, dt_short_ms(), &out, &code, &e))
		sbx_log(SBX_LOG_INFO, "daytona: %s: removing a run's output files: %s", di->base.id,
			e.msg);
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
}
