/*
 * proc — processes in an E2B sandbox: process.Process/Start as a server
 * stream (stdout/stderr into the caller's sink as they come, then the
 * exit code), the deadline passed as Connect-Timeout-Ms and backed by a
 * SendSignal SIGKILL when our side gives up first; and capturing runs.
 * It applies no queued metadata: the run slot (run.c) flushes first, and
 * the flush itself (files.c) runs its script through e2b_run_capture, so
 * with this in run.c the two files called each other.
 */
#include "e2b/e2b.h"
#include "base/xalloc.h"

#include <errno.h>
#include <string.h>

#include "base/log.h"

struct run_ctx {
	const struct sbx_run_sink *sink;
	struct e2b_proc_event ev;
	struct sbx_error err;
	unsigned pid;
	bool started, ended;
	int exit_code;
	char status[64];
};

static int run_message(void *ctx, const char *json, size_t len)
{
	struct run_ctx *r = ctx;
	int rc = e2b_proc_event_parse(json, len, &r->ev, &r->err);
	if (rc)
		return rc;
	switch (r->ev.kind) {
	case E2B_PROC_START:
		r->started = true;
		r->pid = r->ev.pid;
		break;
	case E2B_PROC_DATA:
		if (r->ev.stream && r->ev.data.len && r->sink && r->sink->output)
			return r->sink->output(r->sink->ctx, (enum sbx_stream)r->ev.stream,
					       r->ev.data.buf, r->ev.data.len);
		break;
	case E2B_PROC_END:
		r->ended = true;
		r->exit_code = r->ev.exit_code;
		memcpy(r->status, r->ev.status, sizeof(r->status));
		break;
	default:
		break;
	}
	return 0;
}

void e2b_proc_kill(struct e2b_inst *in, unsigned pid)
{
	struct sbx_error e = SBX_ERROR_INIT;
	json_t *req = sbx_xjson(
	    json_pack("{s:{s:i},s:s}", "process", "pid", (int)pid, "signal", "SIGNAL_SIGKILL"));
	json_t *out = NULL;
	if (e2b_rpc(in, "process.Process/SendSignal", req, true, 0, &out, "kill", &e))
		sbx_log(SBX_LOG_INFO, "e2b: %s: %s", in->base.id, e.msg);
	json_decref(out);
	json_decref(req);
}

/* envd's user for a process: Basic base64("root:"), as the SDK's `user: 'root'`. */
#define E2B_AUTH_ROOT "Authorization: Basic cm9vdDo="

int e2b_proc_start(struct e2b_inst *in, const struct sbx_run_req *req, bool as_root,
		   const struct sbx_run_sink *sink, struct sbx_run_result *result,
		   struct sbx_error *err)
{
	struct run_ctx r = {.sink = sink, .err = SBX_ERROR_INIT};
	struct e2b_stream_opts o = {.timeout_ms = req->timeout_ms,
				    .cancel = sink ? sink->cancel : NULL,
				    .auth = as_root ? E2B_AUTH_ROOT : NULL};
	long t0 = sbx_now_ms();
	json_t *body;
	int rc;

	memset(result, 0, sizeof(*result));
	if (!req->shell == !req->argv || (req->argv && !req->argv[0]))
		return sbx_error_set(err, EINVAL, SBX_E_INTERNAL, "run: shell or argv, not both");
	body = e2b_start_body(req->shell, req->argv, req->envs, req->cwd ? req->cwd : in->workdir);
	e2b_proc_event_init(&r.ev);
	rc = e2b_rpc_stream(in, "process.Process/Start", body, &o, run_message, &r, "run", err);
	result->duration_ms = sbx_now_ms() - t0;
	if (rc == -ETIMEDOUT && r.started && !r.ended && req->timeout_ms > 0) {
		/* envd's deadline_exceeded, or ours first: make sure it is dead. */
		e2b_proc_kill(in, r.pid);
		result->timed_out = true;
		result->exit_code = 128 + 9;
		rc = 0;
	} else if (rc && r.started && !r.ended) {
		if (r.err.err)
			*err = r.err;
		e2b_proc_kill(in, r.pid);
	} else if (!rc && !r.ended) {
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				   "run: process exited without a result");
	} else if (!rc) {
		result->exit_code = r.exit_code;
	} else if (r.err.err) {
		*err = r.err;
	}
	e2b_proc_event_release(&r.ev);
	json_decref(body);
	return rc;
}

struct capture {
	struct sbx_buf *out, *err;
	size_t max;
};

static int capture_output(void *ctx, enum sbx_stream s, const char *data, size_t len)
{
	struct capture *c = ctx;
	struct sbx_buf *b = s == SBX_STDOUT ? c->out : c->err;
	if (!b)
		return 0;
	sbx_buf_add_capped(b, data, len, c->max);
	return 0;
}

int e2b_run_capture(struct e2b_inst *in, const char *shell, bool as_root, long timeout_ms,
		    size_t max, struct sbx_buf *out, struct sbx_buf *errout, int *exit_code,
		    struct sbx_error *e)
{
	struct capture c = {.out = out, .err = errout, .max = max};
	struct sbx_run_sink sink = {.ctx = &c, .output = capture_output};
	struct sbx_run_req req = {.shell = shell, .cwd = "/", .timeout_ms = timeout_ms};
	struct sbx_run_result res;
	int rc = e2b_proc_start(in, &req, as_root, &sink, &res, e);
	if (rc)
		return rc;
	if (res.timed_out)
		return sbx_error_set(e, ETIMEDOUT, SBX_E_TIMEOUT, "command timed out");
	*exit_code = res.exit_code;
	return 0;
}

int e2b_helper_run(void *ctx, const char *cmd, struct sbx_buf *out, struct sbx_error *err)
{
	int code = 0;
	return e2b_run_capture(ctx, cmd, false, 20000, 1 << 20, out, NULL, &code, err);
}
