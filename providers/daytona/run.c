/*
 * daytona/run — commands in a Daytona sandbox.
 *
 * A run goes through a toolbox session, because only a session keeps
 * stdout and stderr apart (/process/execute combines them): the command,
 * wrapped by dt_wrap_command() so each run has its own cwd, envs, stdin and
 * timeout and leaves the session shell untouched, is sent with runAsync,
 * its stdout and stderr redirected to files in the sandbox; then
 * GET .../command/{id} (exit code) and the two files (one bulk-download,
 * byte for byte: runout.c) are polled, and the bytes that are new since
 * the last poll are streamed into the sink. The session logs (JSON text,
 * so lossy for bytes that are not UTF-8) are read only when the files
 * never appeared (a shell that could not create them).
 *
 * A session runs its commands one after another (the daemon writes each to
 * the session shell's stdin), so an instance keeps a small pool: a run
 * takes an idle session or creates one, and gives it back after. The
 * deadline is enforced in the sandbox by `timeout -s KILL` (exit 137); a
 * run still going 5 s after it has its session deleted (which kills the
 * shell) and reports timed_out all the same. A cancelled run is killed by
 * its own process group (`timeout` makes one; the wrapper writes its pid
 * and a per-run token to the session's pid file) through
 * /process/execute, so the session and the background jobs started in it
 * live on. A daemon without sessions (404) gets /process/execute with the
 * output combined into stdout.
 *
 * Not here: run_code (code.c builds on dt_run), file ops.
 */
#include "daytona/daytona.h"
#include "base/xalloc.h"
#include "daytona/runout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

#define DT_KILL_GRACE_MS 5000L
#define DT_RUNOUT_KEEP_MAX (1LL << 20) /* a run's output files past this are removed at its end */

/* --- sessions ------------------------------------------------------------ */

void dt_sessions_drop(struct dt_instance *di)
{
	pthread_mutex_lock(&di->lock);
	for (size_t i = 0; i < di->n_idle; i++)
		free(di->idle[i]);
	di->n_idle = 0;
	di->epoch++;
	pthread_mutex_unlock(&di->lock);
}

static void session_url(struct dt_instance *di, struct sbx_buf *b, const char *sid,
			const char *suffix)
{
	dt_toolbox_url(di, b, "/process/session");
	if (sid) {
		sbx_buf_addch(b, '/');
		sbx_http_add_escaped(b, sid);
	}
	if (suffix)
		sbx_buf_adds(b, suffix);
}

static void session_delete(struct dt_instance *di, const char *sid)
{
	struct sbx_buf url = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	session_url(di, &url, sid, NULL);
	if (dt_call(&(struct dt_call){.method = "DELETE",
				      .url = url.buf,
				      .what = "delete session",
				      .timeout_ms = dt_short_ms(),
				      .idempotent = true},
		    &e) &&
	    e.err != ENOENT)
		sbx_log(SBX_LOG_INFO, "daytona: %s: %s", di->base.id, e.msg);
	sbx_buf_release(&url);
}

/*
 * An idle session of di, or a new one. *sid is malloc'd. -ENOSYS when the
 * daemon has no session API (the caller falls back to execute).
 */
static int session_take(struct dt_instance *di, char **sid, unsigned *epoch, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	char id[40] = "sbxfs-";
	json_t *body;
	int rc;

	pthread_mutex_lock(&di->lock);
	*epoch = di->epoch;
	if (di->no_sessions) {
		pthread_mutex_unlock(&di->lock);
		return -ENOSYS;
	}
	if (di->n_idle) {
		*sid = di->idle[--di->n_idle];
		pthread_mutex_unlock(&di->lock);
		return 0;
	}
	pthread_mutex_unlock(&di->lock);

	dt_random_hex(id + 6, 12);
	body = sbx_xjson(json_pack("{ss}", "sessionId", id));
	session_url(di, &url, NULL, NULL);
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .what = "create session",
				       .timeout_ms = dt_short_ms()},
		     err);
	json_decref(body);
	sbx_buf_release(&url);
	if (rc == -ENOENT) {
		pthread_mutex_lock(&di->lock);
		di->no_sessions = true;
		pthread_mutex_unlock(&di->lock);
		sbx_log(SBX_LOG_INFO, "daytona: %s has no session API; runs combine stderr",
			di->base.id);
		sbx_error_clear(err);
		return -ENOSYS;
	}
	if (!rc)
		*sid = sbx_xstrdup(id);
	return rc;
}

/* Gives a healthy session back (dropped if the sandbox restarted since). */
static void session_give(struct dt_instance *di, char *sid, unsigned epoch)
{
	bool kept = false;
	pthread_mutex_lock(&di->lock);
	if (epoch == di->epoch && di->n_idle < DT_SESSIONS_IDLE_MAX) {
		di->idle[di->n_idle++] = sid;
		kept = true;
	}
	pthread_mutex_unlock(&di->lock);
	if (!kept) {
		if (epoch == di->epoch)
			session_delete(di, sid);
		free(sid);
	}
}

/* --- one run over a session ---------------------------------------------------- */

struct run_state {
	struct dt_instance *di;
	const struct sbx_run_sink *sink;
	struct dt_runout ro; /* the output files, and the bytes of each delivered */
};

static int deliver(struct run_state *rs, enum sbx_stream s, const char *p, size_t len,
		   long long *sent)
{
	int rc = 0;
	if ((long long)len > *sent && rs->sink && rs->sink->output)
		rc = rs->sink->output(rs->sink->ctx, s, p + *sent, len - (size_t)*sent);
	if ((long long)len > *sent)
		*sent = (long long)len;
	return rc;
}

/* The session's logs (JSON text: lossy), for a run whose files never appeared. */
static int poll_logs(struct run_state *rs, struct sbx_buf *url, struct sbx_error *err)
{
	struct sbx_buf raw = SBX_BUF_INIT;
	struct dt_logs logs;
	int rc;

	sbx_buf_adds(url, "/logs");
	rc = dt_call(&(struct dt_call){.url = url->buf,
				       .raw = &raw,
				       .what = "run: logs",
				       .timeout_ms = dt_short_ms(),
				       .max_body = DT_LOGS_MAX,
				       .idempotent = true},
		     err);
	if (rc == -EFBIG)
		rc = sbx_error_set(err, EFBIG, SBX_E_EXECUTION_FAILED,
				   "run: output over %u MiB (the logs API returns it whole)",
				   DT_LOGS_MAX >> 20);
	if (rc)
		goto out;
	dt_logs_parse(raw.buf, raw.len, &logs);
	rc = deliver(rs, SBX_STDOUT, logs.out, logs.out_len, &rs->ro.sent[0]);
	if (!rc)
		rc = deliver(rs, SBX_STDERR, logs.err, logs.err_len, &rs->ro.sent[1]);
	dt_logs_release(&logs);
	if (rc)
		rc = sbx_error_set(err, rc, 0, "run: the reader stopped the output");
out:
	sbx_buf_release(&raw);
	return rc;
}

/* One poll: the command's state, then its output (so output after exit is whole). */
static int poll_once(struct run_state *rs, const char *sid, const char *cmd_id, bool *done,
		     int *code, struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT, raw = SBX_BUF_INIT;
	char suffix[160];
	int rc;

	snprintf(suffix, sizeof(suffix), "/command/%s", cmd_id);
	session_url(rs->di, &url, sid, suffix);
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .raw = &raw,
				       .what = "run: command",
				       .timeout_ms = dt_short_ms(),
				       .idempotent = true},
		     err);
	if (!rc && dt_command_parse(raw.buf, raw.len, done, code))
		rc = sbx_error_set(err, EIO, SBX_E_INTERNAL, "run: command reply is not JSON");
	if (!rc)
		rc = dt_runout_fetch(rs->di, &rs->ro, rs->sink, err);
	/* Ended with neither file there: the shell could not create them. */
	if (!rc && *done && rs->ro.missing[0] && rs->ro.missing[1])
		rc = poll_logs(rs, &url, err);
	sbx_buf_release(&url);
	sbx_buf_release(&raw);
	return rc;
}

/* Sends the command; *cmd_id (malloc'd) names it. -ENOENT/-ESRCH: the session is gone. */
static int session_exec(struct dt_instance *di, const char *sid, const char *command, char **cmd_id,
			struct sbx_error *err)
{
	struct sbx_buf url = SBX_BUF_INIT;
	json_t *body = json_pack("{sssb}", "command", command, "runAsync", 1), *reply = NULL;
	const char *id;
	int rc;

	if ((rc = dt_check_body(body, "run", err)))
		return rc;
	session_url(di, &url, sid, "/exec");
	rc = dt_call(&(struct dt_call){.url = url.buf,
				       .body = body,
				       .reply = &reply,
				       .what = "run",
				       .timeout_ms = dt_short_ms()},
		     err);
	if (!rc) {
		id = json_string_value(json_object_get(reply, "cmdId"));
		if (!id || !*id || strchr(id, '/'))
			rc = sbx_error_set(err, EIO, SBX_E_INTERNAL, "run: reply has no cmdId");
		else
			*cmd_id = sbx_xstrdup(id);
	}
	json_decref(reply);
	json_decref(body);
	sbx_buf_release(&url);
	return rc;
}

/* The pid file of session sid's runs (one run at a time per session). */
static void pidfile_of(const char *sid, char *buf, size_t size)
{
	snprintf(buf, size, "/tmp/.run-%s.pid", sid);
}

/* Sends w on session sid, with its pid file and output files (ro); *cmd_id names it. */
static int session_run(struct dt_instance *di, const char *sid, const struct dt_wrap *base,
		       char *pidfile, size_t size, struct dt_runout *ro, char **cmd_id,
		       struct sbx_error *err)
{
	struct sbx_buf cmd = SBX_BUF_INIT;
	struct dt_wrap w = *base;
	int rc;
	pidfile_of(sid, pidfile, size);
	w.pidfile = pidfile;
	dt_runout_init(ro, sid, w.token);
	dt_runout_prefix(&cmd, ro);
	if (dt_wrap_command(&cmd, &w)) {
		rc = sbx_error_set(err, EINVAL, 0, "run: a malformed env entry");
	} else {
		dt_runout_suffix(&cmd);
		rc = session_exec(di, sid, cmd.buf, cmd_id, err);
	}
	sbx_buf_release(&cmd);
	return rc;
}

/* Kills a cancelled run (its own process group, not the session's background jobs). */
static bool kill_run(struct dt_instance *di, const char *pidfile, const char *token)
{
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	struct sbx_error e = SBX_ERROR_INIT;
	bool timed_out;
	int code = -1;
	dt_kill_command(&cmd, pidfile, token);
	int rc = dt_execute(di, cmd.buf, dt_short_ms(), &out, &code, &timed_out, &e);
	sbx_log(SBX_LOG_DEBUG, "daytona: %s: killing a cancelled run: %s", di->base.id,
		rc     ? e.msg
		: code ? "not started yet"
		       : "done");
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	return !rc && code == 0;
}

static int run_session(struct dt_instance *di, const struct dt_wrap *wrap,
		       const struct sbx_run_sink *sink, struct sbx_run_result *res,
		       struct sbx_error *err)
{
	struct run_state rs = {.di = di, .sink = sink};
	char *sid = NULL, *cmd_id = NULL, token[25], pidfile[96];
	struct dt_wrap w = *wrap;
	unsigned epoch;
	long start = sbx_now_ms(), delay = 20, timeout_ms = w.timeout_ms, cancel_at = 0;
	bool done = false, killed = false, kept = false;
	int rc, code = 0;

	dt_random_hex(token, 12);
	w.token = token;
	if ((rc = session_take(di, &sid, &epoch, err)))
		return rc;
	rc = session_run(di, sid, &w, pidfile, sizeof(pidfile), &rs.ro, &cmd_id, err);
	if (rc == -ENOENT || rc == -ESRCH) {
		/* A pooled session the daemon lost (it restarted): one fresh try. */
		free(sid);
		sid = NULL;
		sbx_error_clear(err);
		dt_sessions_drop(di);
		if ((rc = session_take(di, &sid, &epoch, err)))
			return rc;
		rc = session_run(di, sid, &w, pidfile, sizeof(pidfile), &rs.ro, &cmd_id, err);
	}
	while (!rc) {
		dt_sleep_ms(cancel_at ? 100 : delay);
		delay = delay * 2 > 500 ? 500 : delay * 2;
		/* Every poll fetches the whole log: slower polls once it is big. */
		if (rs.ro.sent[0] + rs.ro.sent[1] > (1 << 20))
			delay = 1000 + (long)((rs.ro.sent[0] + rs.ro.sent[1]) >> 24) * 1000;
		rc = poll_once(&rs, sid, cmd_id, &done, &code, err);
		if (rc || done)
			break;
		if (sbx_run_cancelled(sink)) {
			if (!cancel_at)
				cancel_at = sbx_now_ms();
			if (!killed)
				killed = kill_run(di, pidfile, token);
			if (sbx_now_ms() - cancel_at <= DT_KILL_GRACE_MS)
				continue;
			/* It would not die: deleting the session kills it (its jobs too). */
			session_delete(di, sid);
			free(sid);
			sid = NULL;
			break;
		}
		if (timeout_ms > 0 && sbx_now_ms() - start > timeout_ms + DT_KILL_GRACE_MS) {
			/* `timeout` is missing or stuck: deleting the session kills it. */
			session_delete(di, sid);
			free(sid);
			sid = NULL;
			res->timed_out = true;
			res->exit_code = 137;
			break;
		}
	}
	/*
	 * No exit status: the session's shell died under the command (the
	 * fake's sandbox OOM-killed it once a `yes` filled its memory-backed
	 * /tmp). Its -1 was taken for an exit code, and `sbx run` said "result
	 * missing". An error instead, and the session is not pooled again.
	 */
	if (!rc && done && code < 0)
		rc = sbx_error_set(err, EIO, SBX_E_EXECUTION_FAILED,
				   "run: the command ended without an exit status (its session's "
				   "shell was killed: out of memory?)");
	if (!rc && done) {
		res->exit_code = code;
		res->timed_out =
		    timeout_ms > 0 && code == 137 && sbx_now_ms() - start >= timeout_ms;
	}
	if (sid) {
		/*
		 * It may still run (a poll failed, or its output passed
		 * DT_LOGS_MAX): stop it. `timeout` gave it a process group of
		 * its own, which deleting the session leaves running (`yes`
		 * then filled the sandbox's disk), so it is killed first.
		 */
		if (rc && rc != -ENOENT && !killed && rc != -ENOTCONN && rc != -ETIMEDOUT)
			kill_run(di, pidfile, token);
		if (rc && rc != -ENOENT)
			session_delete(di, sid);
		if (rc) {
			free(sid);
		} else {
			session_give(di, sid, epoch);
			kept = true;
		}
	}
	/*
	 * A run's files stay until the session's next run removes them; big
	 * ones, and those of a session that is gone, go now (a sandbox that
	 * does not answer is not asked).
	 */
	if (cmd_id && rc != -ENOENT && rc != -ENOTCONN && rc != -ETIMEDOUT &&
	    (!kept || rs.ro.sent[0] + rs.ro.sent[1] > DT_RUNOUT_KEEP_MAX))
		dt_runout_remove(di, &rs.ro);
	free(cmd_id);
	if (!rc && cancel_at)
		rc = sbx_error_set(err, ECANCELED, 0, "the run was cancelled");
	return rc;
}

/* --- the run op ------------------------------------------------------------------ */

int dt_run(struct sbx_instance *inst, const struct sbx_run_req *req,
	   const struct sbx_run_sink *sink, struct sbx_run_result *result, struct sbx_error *err)
{
	struct dt_instance *di = dt_inst(inst);
	struct sbx_buf cmd = SBX_BUF_INIT, out = SBX_BUF_INIT;
	char **envs = sbx_envs_merge(&di->spec, req->envs);
	long start = sbx_now_ms();
	struct dt_wrap w = {
	    .shell = req->shell,
	    .argv = req->argv,
	    .cwd = req->cwd ? req->cwd : di->spec.working_dir,
	    .envs = (const char *const *)envs,
	    .timeout_ms = req->timeout_ms,
	};
	int rc;

	memset(result, 0, sizeof(*result));
	/* Queued changes: the core's sync() applied them before the run. */
	if ((!req->shell && !(req->argv && req->argv[0])) || dt_wrap_command(&cmd, &w)) {
		rc = sbx_error_set(err, EINVAL, 0, "run: no command, or a malformed env entry");
		goto out;
	}
	rc = run_session(di, &w, sink, result, err);
	if (rc == -ENOSYS) {
		rc = dt_execute(di, cmd.buf, req->timeout_ms, &out, &result->exit_code,
				&result->timed_out, err);
		/* Killed by the wrapper's `timeout` before the daemon's 408. */
		if (!rc && req->timeout_ms > 0 && result->exit_code == 137 &&
		    sbx_now_ms() - start >= req->timeout_ms)
			result->timed_out = true;
		if (!rc && out.len && sink && sink->output &&
		    (rc = sink->output(sink->ctx, SBX_STDOUT, out.buf, out.len)))
			sbx_error_set(err, rc, 0, "run: the reader stopped the output");
	}
out:
	/* The command may have changed any file: what we knew of links is in doubt. */
	dt_links_doubt(di);
	result->duration_ms = sbx_now_ms() - start;
	free(envs);
	sbx_buf_release(&cmd);
	sbx_buf_release(&out);
	return rc;
}
