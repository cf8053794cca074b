/*
 * tty — terminal sessions in an E2B sandbox, as the SDK's `pty` module
 * makes them: process.Process/Start of `/bin/bash -i -l` with a `pty`
 * size, its output arriving as `data.pty` events on the stream (read on
 * a thread of ours), keystrokes sent with SendInput {input: {pty}}, a
 * resize with Update {pty: {size}}, and the end with SendSignal SIGKILL.
 * Not here: the plain command runs (run.c).
 */
#include "e2b/e2b.h"
#include "base/xalloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base64.h"
#include "base/fsutil.h"

/* How long tty_open waits for envd's start event. */
#define E2B_TTY_START_MS 30000

struct sbx_tty_session {
	struct e2b_inst *in;
	struct sbx_tty_sink sink;
	json_t *body; /* the StartRequest */
	pthread_t thread;
	atomic_int cancel; /* tty_close: the stream is abandoned */

	pthread_mutex_t lock; /* protects the fields marked (S) */
	pthread_cond_t cond;
	unsigned pid;		  /* (S) from the start event */
	bool started, ended;	  /* (S) start event seen; stream over */
	int start_rc;		  /* (S) the stream's failure before the start */
	struct sbx_error err;	  /* (S) its reason */
	struct e2b_proc_event ev; /* the stream thread's */
	int exit_code;
	bool have_end;
};

static int tty_message(void *ctx, const char *json, size_t len)
{
	struct sbx_tty_session *s = ctx;
	struct sbx_error e = SBX_ERROR_INIT;
	int rc = e2b_proc_event_parse(json, len, &s->ev, &e);
	if (rc)
		return rc;
	switch (s->ev.kind) {
	case E2B_PROC_START:
		pthread_mutex_lock(&s->lock);
		s->pid = s->ev.pid;
		s->started = true;
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		break;
	case E2B_PROC_DATA:
		/* A pty process sends data.pty only; stream 0 is the pty. */
		if (s->ev.data.len)
			s->sink.output(s->sink.ctx, s->ev.data.buf, s->ev.data.len);
		break;
	case E2B_PROC_END:
		s->have_end = true;
		s->exit_code = s->ev.exit_code;
		break;
	default:
		break;
	}
	return 0;
}

static void *tty_main(void *arg)
{
	struct sbx_tty_session *s = arg;
	struct sbx_error e = SBX_ERROR_INIT;
	struct e2b_stream_opts o = {.cancel = &s->cancel};
	int rc =
	    e2b_rpc_stream(s->in, "process.Process/Start", s->body, &o, tty_message, s, "tty", &e);
	if (!rc && !s->have_end)
		rc = sbx_error_set(&e, EIO, SBX_E_EXECUTION_FAILED,
				   "tty: the shell's stream ended without its exit status");
	pthread_mutex_lock(&s->lock);
	bool was_started = s->started;
	s->ended = true;
	if (!was_started) {
		s->start_rc = rc ? rc : -EIO;
		s->err = e;
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (was_started && !atomic_load(&s->cancel))
		s->sink.ended(s->sink.ctx, rc ? rc : s->exit_code, rc ? &e : NULL);
	return NULL;
}

static void session_free(struct sbx_tty_session *s)
{
	json_decref(s->body);
	e2b_proc_event_release(&s->ev);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}

int e2b_tty_open(struct sbx_instance *inst, const struct sbx_tty_req *req,
		 const struct sbx_tty_sink *sink, struct sbx_tty_session **out,
		 struct sbx_error *err)
{
	static const char *const shell[] = {"/bin/bash", "-i", "-l", NULL};
	struct e2b_inst *in = e2b_of(inst);
	struct sbx_tty_session *s = sbx_xcalloc(1, sizeof(*s));
	int rc = 0;

	s->in = in;
	s->sink = *sink;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	e2b_proc_event_init(&s->ev);
	s->body = e2b_start_body(NULL, shell, req->envs, req->cwd ? req->cwd : in->workdir);
	json_object_set_new(s->body, "pty",
			    sbx_xjson(json_pack("{s:{s:i, s:i}}", "size", "cols", (int)req->cols,
						"rows", (int)req->rows)));
	if (pthread_create(&s->thread, NULL, tty_main, s)) {
		session_free(s);
		return sbx_error_set(err, EAGAIN, SBX_E_INTERNAL, "cannot start a terminal thread");
	}
	struct timespec dl;
	sbx_deadline_in(E2B_TTY_START_MS, &dl);
	pthread_mutex_lock(&s->lock);
	while (!s->started && !s->ended && !rc)
		rc = sbx_cond_wait_until(&s->cond, &s->lock, &dl);
	bool started = s->started;
	if (!started && s->ended) {
		rc = s->start_rc;
		*err = s->err;
	}
	pthread_mutex_unlock(&s->lock);
	if (!started) {
		if (rc == ETIMEDOUT)
			rc = sbx_error_set(err, ETIMEDOUT, SBX_E_TIMEOUT,
					   "tty: envd did not start the shell within %d s",
					   E2B_TTY_START_MS / 1000);
		atomic_store(&s->cancel, 1);
		pthread_join(s->thread, NULL);
		session_free(s);
		return rc < 0 ? rc : -EIO;
	}
	*out = s;
	return 0;
}

/* A unary call on our process: SendInput or Update. */
static int tty_call(struct sbx_tty_session *s, const char *method, json_t *req,
		    struct sbx_error *err)
{
	json_t *reply = NULL;
	int rc = e2b_rpc(s->in, method, req, false, 0, &reply, "tty", err);
	json_decref(reply);
	json_decref(req);
	return rc;
}

int e2b_tty_write(struct sbx_tty_session *s, const char *data, size_t len, struct sbx_error *err)
{
	struct sbx_buf b64 = SBX_BUF_INIT;
	sbx_base64_encode(data, len, &b64);
	json_t *req = sbx_xjson(json_pack("{s:{s:i}, s:{s:s%}}", "process", "pid", (int)s->pid,
					  "input", "pty", b64.buf, b64.len));
	sbx_buf_release(&b64);
	return tty_call(s, "process.Process/SendInput", req, err);
}

int e2b_tty_resize(struct sbx_tty_session *s, unsigned cols, unsigned rows, struct sbx_error *err)
{
	json_t *req =
	    sbx_xjson(json_pack("{s:{s:i}, s:{s:{s:i, s:i}}}", "process", "pid", (int)s->pid, "pty",
				"size", "cols", (int)cols, "rows", (int)rows));
	return tty_call(s, "process.Process/Update", req, err);
}

void e2b_tty_close(struct sbx_tty_session *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	bool ended = s->ended;
	pthread_mutex_unlock(&s->lock);
	/* The shell outlives a dropped stream on envd: kill it first. */
	if (!ended)
		e2b_proc_kill(s->in, s->pid);
	atomic_store(&s->cancel, 1);
	pthread_join(s->thread, NULL);
	session_free(s);
}
