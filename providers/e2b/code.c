/*
 * code — run_code and code_reset of the E2B provider: the sandbox's code
 * interpreter on port 49999 (doc/protocols/e2b.md §3), with one
 * context per language per lease.
 *
 * A lease's first run in a language adopts a context of that language the
 * sandbox already has (GET /contexts: after a remount, the lease's own;
 * with a workingDirectory, only one with that cwd) or creates one (POST
 * /contexts {language, cwd}); its id is reused for every run. A run is
 * POST /execute {code, context_id, env_vars}, whose NDJSON reply is parsed
 * while it streams (kernel/events.h): stdout and stderr reach the sink as
 * they arrive.
 *
 * State lost: a context the server no longer knows (404) is created anew
 * and that run says state_lost; so does a run whose execution count
 * starts again at 1 (the kernel behind the context was restarted: it died,
 * say). code_reset restarts the context (POST /contexts/{id}/restart),
 * which is not a loss.
 */
#include "e2b/e2b.h"
#include "base/xalloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "kernel/events.h"

#define N_LANGS 3
static const char *const langs[N_LANGS] = {"python", "javascript", "typescript"};

struct e2b_code {
	pthread_mutex_t lock;  /* protects everything below */
	bool listed;	       /* GET /contexts was asked (adoption done) */
	char *ctx[N_LANGS];    /* context id per language, or NULL */
	long count[N_LANGS];   /* the last execution count seen (0: none) */
	unsigned gen[N_LANGS]; /* bumped by a restart: runs begun before it count no more */
};

static int lang_index(const char *language)
{
	return sbx_code_language_index(language); /* langs[] is in its order */
}

static struct e2b_code *code_of(struct e2b_inst *in)
{
	pthread_mutex_lock(&in->lock);
	if (!in->code) {
		in->code = sbx_xcalloc(1, sizeof(*in->code));
		pthread_mutex_init(&in->code->lock, NULL);
	}
	struct e2b_code *c = in->code;
	pthread_mutex_unlock(&in->lock);
	return c;
}

void e2b_code_free(struct e2b_code *c)
{
	if (!c)
		return;
	for (int i = 0; i < N_LANGS; i++)
		free(c->ctx[i]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The interpreter's HTTP errors: 502 is the edge proxy (sandbox or port gone). */
static int interp_error(long status, const struct sbx_buf *body, const char *what,
			struct sbx_error *e)
{
	json_t *j = body->len ? json_loadb(body->buf, body->len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "message"));
	int rc;
	if (status == 502 && json_object_get(j, "port"))
		rc = sbx_error_set(e, ENOTSUP, SBX_E_EXECUTION_FAILED,
				   "%s: the sandbox has no code interpreter (port 49999 is not "
				   "open; use a code-interpreter template)",
				   what);
	else if (status == 502)
		rc = sbx_error_set(e, ENOENT, SBX_E_NOT_FOUND, "%s: %s", what,
				   msg ? msg : "the sandbox was not found");
	else {
		int err = sbx_errno_from_http(status);
		rc = sbx_error_set(e, err ? err : EIO, SBX_E_NONE, "%s: %ld %.*s", what, status,
				   (int)(body->len > 200 ? 200 : body->len),
				   j ? (msg ? msg : "") : body->buf);
	}
	json_decref(j);
	return rc;
}

/* One unary call to :49999. 0 with *out (may be NULL) on 2xx; -errno else, *status set. */
static int interp_call(struct e2b_inst *in, const char *method, const char *path, json_t *body,
		       json_t **out, long *status, const char *what, struct sbx_error *e)
{
	struct sbx_http_req req = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct e2b_conn c;
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int rc;

	*status = 0;
	if (out)
		*out = NULL;
	e2b_conn_get(in, E2B_INTERP_PORT, &c);
	sbx_buf_adds(&c.base, path);
	e2b_conn_add(&c, "Content-Type: application/json");
	req.method = method;
	req.url = c.base.buf;
	req.headers = c.headers;
	if (text || strcmp(method, "GET")) {
		req.body = text ? text : "";
		req.body_len = text ? strlen(text) : 0;
		req.has_body = true;
	}
	req.idempotent = !strcmp(method, "GET");
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(e2b_g.http, &req, &resp, e);
	if (rc) {
		sbx_error_prefix(e, what);
	} else {
		*status = resp.status;
		if (resp.status < 200 || resp.status > 299)
			rc = interp_error(resp.status, &resp.body, what, e);
		else if (out && resp.body.len)
			*out = json_loadb(resp.body.buf, resp.body.len, JSON_DECODE_ANY, NULL);
	}
	sbx_http_resp_release(&resp);
	e2b_conn_release(&c);
	free(text);
	return rc;
}

/* Adopts the sandbox's existing contexts once (c->lock held). Failures are not fatal. */
static void adopt(struct e2b_inst *in, struct e2b_code *c)
{
	struct sbx_error e = SBX_ERROR_INIT;
	json_t *list = NULL, *item;
	long status;
	size_t i;
	if (c->listed)
		return;
	c->listed = true;
	if (interp_call(in, "GET", "/contexts", NULL, &list, &status, "list contexts", &e)) {
		sbx_log(SBX_LOG_DEBUG, "e2b: %s: %s", in->base.id, e.msg);
		return;
	}
	json_array_foreach(list, i, item)
	{
		int k = lang_index(json_string_value(json_object_get(item, "language")));
		const char *id = json_string_value(json_object_get(item, "id"));
		const char *cwd = json_string_value(json_object_get(item, "cwd"));
		if (k < 0 || !id || c->ctx[k] ||
		    (in->workdir && (!cwd || strcmp(cwd, in->workdir))))
			continue;
		c->ctx[k] = sbx_xstrdup(id);
	}
	json_decref(list);
}

/* The context of language k (created when none); a copy in *id. c->lock held. */
static int context(struct e2b_inst *in, struct e2b_code *c, int k, char **id, struct sbx_error *e)
{
	json_t *body, *reply = NULL;
	long status;
	int rc;
	adopt(in, c);
	if (!c->ctx[k]) {
		body = sbx_xjson(json_pack("{s:s}", "language", langs[k]));
		if (in->workdir)
			json_object_set_new(body, "cwd", json_string(in->workdir));
		rc = interp_call(in, "POST", "/contexts", body, &reply, &status, "create context",
				 e);
		json_decref(body);
		const char *s = json_string_value(json_object_get(reply, "id"));
		if (!rc && !s)
			rc = sbx_error_set(e, EPROTO, SBX_E_INTERNAL,
					   "create context: no id in reply");
		if (!rc)
			c->ctx[k] = sbx_xstrdup(s);
		c->count[k] = 0;
		json_decref(reply);
		if (rc)
			return rc;
	}
	*id = sbx_xstrdup(c->ctx[k]);
	return 0;
}

struct exec_state {
	struct sbx_code_events ev;
	struct sbx_error err; /* why the sink stopped the transfer */
};

static int exec_sink(void *ctx, const char *data, size_t len)
{
	struct exec_state *x = ctx;
	return sbx_code_events_feed(&x->ev, data, len, &x->err);
}

/* POST /execute on context id; *status is the HTTP status (404: unknown context). */
static int execute(struct e2b_inst *in, const struct sbx_code_req *req, const char *id,
		   struct exec_state *x, long *status, struct sbx_error *e)
{
	struct sbx_http_req hreq = SBX_HTTP_REQ_INIT;
	struct sbx_http_resp resp;
	struct e2b_conn c;
	json_t *body = json_pack("{s:s, s:s, s:o}", "code", req->code ? req->code : "",
				 "context_id", id, "env_vars", sbx_code_env_json(req->envs));
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int rc;

	json_decref(body);
	*status = 0;
	if (!text)
		return sbx_error_set(e, EINVAL, SBX_E_EXECUTION_FAILED,
				     "code: the code or an env value is not valid UTF-8");
	e2b_conn_get(in, E2B_INTERP_PORT, &c);
	sbx_buf_adds(&c.base, "/execute");
	e2b_conn_add(&c, "Content-Type: application/json");
	hreq.url = c.base.buf;
	hreq.headers = c.headers;
	hreq.body = text;
	hreq.body_len = strlen(text);
	hreq.stream = true;
	hreq.timeout_ms = req->timeout_ms;
	hreq.cancel = x->ev.sink ? x->ev.sink->cancel : NULL;
	hreq.sink = exec_sink;
	hreq.sink_ctx = x;
	sbx_http_resp_init(&resp);
	rc = sbx_http_perform(e2b_g.http, &hreq, &resp, e);
	if (rc) {
		if (x->err.err)
			*e = x->err;
		sbx_error_prefix(e, "code");
	} else {
		*status = resp.status;
		if (resp.status < 200 || resp.status > 299)
			rc = interp_error(resp.status, &resp.body, "code", e);
	}
	sbx_http_resp_release(&resp);
	e2b_conn_release(&c);
	free(text);
	return rc;
}

int e2b_run_code(struct sbx_instance *inst, const struct sbx_code_req *req,
		 const struct sbx_run_sink *sink, struct sbx_code_result *result,
		 struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct e2b_code *c = code_of(in);
	struct exec_state x = {.err = SBX_ERROR_INIT};
	int k = lang_index(req->language), rc;
	long t0 = sbx_now_ms(), status = 0;
	bool lost = false;
	char *id = NULL;
	unsigned gen = 0;

	sbx_code_events_init(&x.ev, sink, result);
	if (k < 0) {
		rc = sbx_error_set(err, EINVAL, SBX_E_EXECUTION_FAILED, "no interpreter for %s",
				   req->language ? req->language : "(none)");
		goto out;
	}
	/* Queued metadata changes: the core's sync() applied them before the run. */
	for (int attempt = 0; attempt < 2; attempt++) {
		pthread_mutex_lock(&c->lock);
		rc = context(in, c, k, &id, err);
		gen = c->gen[k];
		pthread_mutex_unlock(&c->lock);
		if (rc)
			goto out;
		rc = execute(in, req, id, &x, &status, err);
		if (!(rc == -ENOENT && status == 404))
			break;
		/* The server no longer knows the context: a new one, state lost. */
		sbx_error_clear(err);
		pthread_mutex_lock(&c->lock);
		if (c->ctx[k] && !strcmp(c->ctx[k], id)) {
			free(c->ctx[k]);
			c->ctx[k] = NULL;
		}
		pthread_mutex_unlock(&c->lock);
		free(id);
		id = NULL;
		lost = true;
	}
	if (!rc)
		rc = sbx_code_events_finish(&x.ev, langs[k], err);
	pthread_mutex_lock(&c->lock);
	if (!rc && x.ev.execution_count > 0 && k >= 0 && c->gen[k] == gen) {
		/* Counts start again at 1 when the kernel behind the context restarts. */
		if (x.ev.execution_count == 1 && c->count[k] >= 1 && c->ctx[k] &&
		    !strcmp(c->ctx[k], id))
			lost = true;
		if (x.ev.execution_count == 1 || x.ev.execution_count > c->count[k])
			c->count[k] = x.ev.execution_count;
	}
	pthread_mutex_unlock(&c->lock);
	result->state_lost = result->state_lost || lost;
out:
	free(id);
	sbx_code_events_release(&x.ev);
	result->duration_ms = sbx_now_ms() - t0;
	return rc;
}

int e2b_code_reset(struct sbx_instance *inst, const char *language, struct sbx_error *err)
{
	struct e2b_inst *in = e2b_of(inst);
	struct e2b_code *c = code_of(in);
	int k = language ? lang_index(language) : -1, rc = 0;

	if (language && k < 0)
		return sbx_error_set(
		    err, EINVAL, SBX_E_EXECUTION_FAILED,
		    "restart: no interpreter for %s (python, javascript or typescript)", language);
	pthread_mutex_lock(&c->lock);
	adopt(in, c);
	for (int i = 0; i < N_LANGS && !rc; i++) {
		struct sbx_buf path = SBX_BUF_INIT;
		long status = 0;
		json_t *ignore = NULL;
		if ((k >= 0 && i != k) || !c->ctx[i])
			continue;
		sbx_buf_adds(&path, "/contexts/");
		sbx_http_add_escaped(&path, c->ctx[i]);
		sbx_buf_adds(&path, "/restart");
		rc = interp_call(in, "POST", path.buf, NULL, &ignore, &status, "restart", err);
		json_decref(ignore);
		sbx_buf_release(&path);
		if (rc == -ENOENT && status == 404) {
			/* Gone already: the next run makes a fresh one. */
			free(c->ctx[i]);
			c->ctx[i] = NULL;
			sbx_error_clear(err);
			rc = 0;
		}
		c->count[i] = 0;
		c->gen[i]++;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}
